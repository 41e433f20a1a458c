//! The `cbtop` binary on the GPU: `generate --device cuda` prints the fixtures' layout with
//! llama.cpp's greedy tokens and logits within the conformance bound, and headless reports
//! record the numerics that ran. Skips (saying why) without a GPU.

mod common;
mod gpu;

use common::{cbtop, stderr};
use serde_json::Value;
use std::process::Command;

const NAME: &str = "conf-llama-Q8_0";

fn model() -> String {
    common::fixture(&format!("conformance/models/{NAME}.gguf"))
        .display()
        .to_string()
}

/// `cbtop generate` of `ids` on `device`: greedy to `max_tokens` steps, every step's logits in
/// one JSON line.
fn generate(m: &str, ids: &str, max_tokens: &str, device: &str, numerics: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cbtop"));
    c.args([
        "generate",
        "--model-path",
        m,
        "--ids",
        ids,
        "--max-tokens",
        max_tokens,
        "--greedy",
        "--ignore-eos",
        "--json",
        "--full-logits",
        "--device",
        device,
        "--numerics",
        numerics,
    ]);
    c
}

/// A quiet headless JSON run of model `m` on `device`: 4 steps after 1 warm-up.
fn headless<'a>(m: &'a str, device: &'a str) -> Vec<&'a str> {
    vec![
        "--headless",
        "--ci",
        "--json",
        "--model-path",
        m,
        "--device",
        device,
        "--tokens",
        "4",
        "--warmup",
        "1",
    ]
}

#[test]
fn generate_on_the_gpu_matches_llama_cpp() {
    let Some(g) = gpu::gpu("gpu_cli::generate") else {
        return;
    };
    let (_, reference, bound) = common::conformance_case(NAME);
    let prompt: Vec<String> = common::ids(&reference["prompt_ids"])
        .iter()
        .map(u32::to_string)
        .collect();
    let ref_steps = reference["steps"].as_array().unwrap();
    let (m, device, ids) = (model(), format!("cuda:{}", g.ordinal), prompt.join(" "));
    let max_tokens = ref_steps.len().to_string();
    for numerics in ["exact", "fast"] {
        let o = generate(&m, &ids, &max_tokens, &device, numerics)
            .args(["--top-k-logits", "5"])
            .output()
            .expect("run cbtop");
        assert_eq!(o.status.code(), Some(0), "{numerics}: {}", stderr(&o));
        let text = String::from_utf8(o.stdout).unwrap();
        assert_eq!(text.trim_end().lines().count(), 1, "one JSON line");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["engine"]["device"], device.as_str());
        assert_eq!(v["engine"]["numerics"], numerics);
        assert_eq!(v["timing"]["source"], "host_sync");
        assert_eq!(v["prompt_ids"], reference["prompt_ids"]);
        let steps = v["steps"].as_array().unwrap();
        assert_eq!(steps.len(), ref_steps.len());
        for (i, (ours, theirs)) in steps.iter().zip(ref_steps).enumerate() {
            assert_eq!(ours["top"].as_array().unwrap().len(), 5);
            let d = common::max_abs_diff(
                &common::floats(&ours["logits"]),
                &common::floats(&theirs["logits"]),
            );
            assert!(
                d <= bound,
                "{numerics} step {i}: |logit diff| {d} > {bound}"
            );
        }
        assert_eq!(v["generated_ids"], reference["generated_ids"], "{numerics}");
        assert!(v["generated_text"].is_string());
    }
}

#[test]
fn headless_on_the_gpu_records_the_numerics() {
    let Some(g) = gpu::gpu("gpu_cli::headless") else {
        return;
    };
    let (m, device) = (model(), format!("cuda:{}", g.ordinal));
    for (asked, want) in [
        (None, "fast"),
        (Some("exact"), "exact"),
        (Some("fast"), "fast"),
    ] {
        let mut args = headless(&m, &device);
        args.extend(asked.iter().flat_map(|n| ["--numerics", n]));
        let o = cbtop(&args);
        assert_eq!(o.status.code(), Some(0), "{asked:?}: {}", stderr(&o));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["hardware"]["backend"], "cuda");
        assert_eq!(r["config"]["numerics"], want, "--numerics {asked:?}");
    }
}

/// `generate --batch 3` on the GPU under `exact`: each sequence prints the tokens the prompt
/// gives alone; the headless `--batch 1,3` sweep on the GPU adds an entry per size, with a
/// time to first token per sequence.
#[test]
fn batches_on_the_gpu_from_the_command_line() {
    let Some(g) = gpu::gpu("gpu_cli::batch") else {
        return;
    };
    let (m, device) = (model(), format!("cuda:{}", g.ordinal));
    let ids = |o: &std::process::Output| -> Vec<Value> {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["generated_ids"].clone())
            .collect()
    };
    let alone = ids(&generate(&m, "1 7 9 30", "6", &device, "exact")
        .output()
        .unwrap());
    let three = ids(&generate(&m, "1 7 9 30", "6", &device, "exact")
        .args(["--batch", "3"])
        .output()
        .unwrap());
    assert_eq!(three.len(), 3);
    for (s, t) in three.iter().enumerate() {
        assert_eq!(t, &alone[0], "sequence {s}");
    }
    let mut args = headless(&m, &device);
    args.extend(["--batch", "1,3"]);
    let o = cbtop(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let points = r["batch"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (p, n) in points.iter().zip([1, 3]) {
        assert_eq!(p["n"], n);
        assert_eq!(p["ttft_ms"].as_array().unwrap().len(), n);
        assert!(p["tokens_per_sec"].as_f64().unwrap() > 0.0);
    }
}

/// A prompt longer than the prefill chunk, evaluated in chunks (`CBTOP_PREFILL_CHUNK=64`: 300
/// tokens as four chunks of 64 and one of 44, each chunk's products and attention on tensor
/// cores, attending to the cache the chunks before it wrote) gives the logits of the same
/// prompt in one batch (the default chunk is larger than the prompt), within the conformance
/// bound, at the prompt's last token and the greedy steps after it; and the steps after it
/// give the same logits, within that bound, on either decode attention kernel.
#[test]
fn a_prompt_in_chunks_gives_the_logits_of_one_batch() {
    let Some(g) = gpu::gpu("gpu_cli::chunks") else {
        return;
    };
    let (_, reference, bound) = common::conformance_case(NAME);
    let base = common::ids(&reference["prompt_ids"]);
    let ids: Vec<String> = base.iter().cycle().take(300).map(u32::to_string).collect();
    let (m, device, ids) = (model(), format!("cuda:{}", g.ordinal), ids.join(" "));
    let run = |chunk: Option<&str>, group_from: Option<&str>| {
        let mut c = generate(&m, &ids, "4", &device, "fast");
        if let Some(n) = chunk {
            c.env("CBTOP_PREFILL_CHUNK", n);
        }
        if let Some(n) = group_from {
            c.env("CBTOP_ATTN_GROUP_FROM", n);
        }
        let o = c.output().expect("run cbtop");
        assert_eq!(o.status.code(), Some(0), "chunk {chunk:?}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["steps"].as_array().unwrap().clone()
    };
    let (whole, chunked) = (run(None, None), run(Some("64"), None));
    assert_eq!(whole.len(), 4);
    assert_eq!(chunked.len(), 4);
    for (i, (a, b)) in whole.iter().zip(&chunked).enumerate() {
        let d = common::max_abs_diff(&common::floats(&a["logits"]), &common::floats(&b["logits"]));
        eprintln!("step {i}: max |logit diff|, chunks of 64 against one batch: {d:.2e}");
        assert!(d <= bound, "step {i}: |logit diff| {d} > {bound}");
    }
    // The decode steps after the prompt on the grouped decode attention (this model has two
    // query heads per KV head, head size 64: the tensor-core kernel) from every context,
    // against the one-head kernel for every context (`generate` evaluates step by step, so
    // the decode graphs' recapture at the switch is left to the benchmarks).
    let (one_head, grouped) = (run(None, Some("1000000000")), run(None, Some("1")));
    for (i, (a, b)) in one_head.iter().zip(&grouped).enumerate().skip(1) {
        let d = common::max_abs_diff(&common::floats(&a["logits"]), &common::floats(&b["logits"]));
        eprintln!("step {i}: max |logit diff|, grouped against one-head attention: {d:.2e}");
        assert!(d <= bound, "step {i}: |logit diff| {d} > {bound}");
    }
}
