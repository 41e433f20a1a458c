//! The `cbtop` binary on the GPU: `generate --device cuda` prints the fixtures' layout with
//! llama.cpp's greedy tokens and logits within the conformance bound, and headless reports
//! record the numerics that ran. Skips (saying why) without a GPU.

mod common;
mod gpu;

use common::{cbtop, stderr};
use serde_json::Value;

const NAME: &str = "conf-llama-Q8_0";

fn model() -> String {
    common::fixture(&format!("conformance/models/{NAME}.gguf"))
        .display()
        .to_string()
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
        let o = cbtop(&[
            "generate",
            "--model-path",
            &m,
            "--ids",
            &ids,
            "--max-tokens",
            &max_tokens,
            "--greedy",
            "--ignore-eos",
            "--json",
            "--full-logits",
            "--top-k-logits",
            "5",
            "--device",
            &device,
            "--numerics",
            numerics,
        ]);
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
        let mut args = vec![
            "--headless",
            "--ci",
            "--json",
            "--model-path",
            &m,
            "--device",
            &device,
            "--tokens",
            "4",
            "--warmup",
            "1",
        ];
        args.extend(asked.iter().flat_map(|n| ["--numerics", n]));
        let o = cbtop(&args);
        assert_eq!(o.status.code(), Some(0), "{asked:?}: {}", stderr(&o));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["hardware"]["backend"], "cuda");
        assert_eq!(r["config"]["numerics"], want, "--numerics {asked:?}");
    }
}
