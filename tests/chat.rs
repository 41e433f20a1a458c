//! Chat templates on the SmolLM2 file: its `tokenizer.chat_template` rendered by cbtop equals
//! Jinja2's rendering of the same template (tests/fixtures/chat/smollm2.json, made by
//! scripts/chat-fixtures.py), `generate --chat` feeds the model those tokens (the turn markers
//! as the vocabulary's special tokens), the live view's default prompt on a chat model is a
//! user's turn, and a file without a template is refused by name.

mod common;

use cbtop::model::chat::{ChatTemplate, Message};
use cbtop::model::Model;
use cbtop::profiler::model_source::{chat_default_prompt, DEFAULT_PROMPT};
use serde_json::Value;

fn fixture() -> Value {
    let text = std::fs::read_to_string(common::fixture("chat/smollm2.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn messages(v: &Value) -> Vec<Message> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect()
}

/// `cbtop generate --chat` on model file `model` on the CPU, with `args` after.
fn generate_chat(model: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "generate",
        "--model-path",
        model,
        "--chat",
        "--device",
        "cpu",
    ];
    all.extend_from_slice(args);
    common::cbtop(&all)
}

#[test]
fn smollm2s_template_renders_as_jinja2_renders_it() {
    let model = Model::load(&common::smollm2()).unwrap();
    let f = fixture();
    let source = model
        .file
        .metadata
        .get_str("tokenizer.chat_template")
        .expect("SmolLM2-Instruct carries a chat template");
    assert_eq!(
        source,
        f["template"].as_str().unwrap(),
        "the fixture's template is the file's"
    );
    let t = ChatTemplate::of(&model).unwrap().unwrap();
    for case in f["cases"].as_array().unwrap() {
        let got = t
            .render(
                &messages(&case["messages"]),
                case["add_generation_prompt"].as_bool().unwrap(),
            )
            .unwrap();
        assert_eq!(got, case["text"].as_str().unwrap(), "{}", case["name"]);
    }
}

#[test]
fn generate_chat_feeds_the_laid_out_turn_with_special_tokens() {
    let path = common::smollm2();
    let model = Model::load(&path).unwrap();
    let f = fixture();
    let case = &f["cases"][0];
    let user = case["messages"][0]["content"].as_str().unwrap();
    let p = path.display().to_string();
    let o = generate_chat(
        &p,
        &["--prompt", user, "--max-tokens", "4", "--greedy", "--json"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids = common::ids(&out["prompt_ids"]);
    let want = model.tokenizer.encode(case["text"].as_str().unwrap(), true);
    assert_eq!(ids, want);
    // The turn markers are single special tokens, not spelled out.
    assert_eq!(model.tokenizer.piece(ids[0]), "<|im_start|>");
    let marks = ids
        .iter()
        .filter(|&&i| model.tokenizer.piece(i) == "<|im_start|>")
        .count();
    assert_eq!(marks, 3, "system, user and assistant turns");
    // A system turn replaces the template's default one.
    let system = "You answer in one line.";
    let args = [
        "--system",
        system,
        "--prompt",
        user,
        "--max-tokens",
        "1",
        "--json",
    ];
    let o = generate_chat(&p, &args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = model.tokenizer.decode(&common::ids(&out["prompt_ids"]));
    assert!(
        text.contains(system) && !text.contains("SmolLM"),
        "{text:?}"
    );
}

#[test]
fn the_live_views_default_prompt_on_a_chat_model_is_a_users_turn() {
    let model = Model::load(&common::smollm2()).unwrap();
    let (text, note) = chat_default_prompt(&model);
    assert_eq!(note, None);
    let t = ChatTemplate::of(&model).unwrap().unwrap();
    let want = t
        .render(&[Message::new("user", DEFAULT_PROMPT)], true)
        .unwrap();
    assert_eq!(text, want);
    assert!(text.ends_with("<|im_start|>assistant\n"), "{text:?}");
    // A model without a template keeps the text as it is.
    let plain = common::fixture("conformance/models/conf-llama-Q8_0.gguf");
    let (text, note) = chat_default_prompt(&Model::load(&plain).unwrap());
    assert_eq!((text.as_str(), note), (DEFAULT_PROMPT, None));
}

#[test]
fn a_file_without_a_template_is_refused_by_name() {
    let m = common::fixture("conformance/models/conf-llama-Q8_0.gguf");
    let p = m.display().to_string();
    let o = generate_chat(&p, &["--prompt", "Hi"]);
    assert_eq!(o.status.code(), Some(2));
    let err = common::stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&p) && err.contains("no chat template"),
        "{err}"
    );
    // --system without --chat is a usage error.
    let o = common::cbtop(&[
        "generate",
        "--model-path",
        &p,
        "--system",
        "x",
        "--prompt",
        "Hi",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
}
