//! Conformance with llama.cpp on tiny gemma3 models (tests/fixtures/conformance/shapes/
//! conf-gemma3.toml: seven layers, layer 5 global, a 4-token sliding window that the prompt and
//! its greedy steps cross, heads wider than n_embd / n_heads, linear RoPE scaling on the global
//! layer) in F32, F16, Q8_0, Q4_K and Q6_K. The models are not in the repository: each is
//! synthesized again with `cbtop synth` (seed 0) and must have the sha256 recorded beside its
//! reference (scripts/gemma3-fixtures.sh made both). Logits at every prompt position and every
//! greedy step within the fixture README's bounds, and llama.cpp's greedy token wherever its
//! top-1 margin exceeds 0.05.

mod common;

use std::path::{Path, PathBuf};

use cbtop::engine::{CpuEngine, LogitsFor, Numerics};
use common::{cbtop, max_abs_diff, stderr};
use sha2::{Digest, Sha256};

const TYPES: [&str; 5] = ["F32", "F16", "Q8_0", "Q4_K", "Q6_K"];

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-gemma3-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Synthesize `conf-gemma3-TYPE` and check it is the model the reference was made from.
fn synthesize(ty: &str) -> PathBuf {
    let name = format!("conf-gemma3-{ty}");
    let out = tmp(&format!("{name}.gguf"));
    let shape = common::fixture("conformance/shapes/conf-gemma3.toml");
    let quant = format!("pure-{}", ty.to_ascii_lowercase());
    let o = cbtop(&[
        "synth",
        "--shape",
        shape.to_str().unwrap(),
        "--quant",
        &quant,
        "--seed",
        "0",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recorded =
        std::fs::read_to_string(common::fixture(&format!("conformance/ref/{name}.sha256")))
            .unwrap();
    let want = recorded.split_whitespace().next().unwrap();
    let got: String = Sha256::digest(std::fs::read(&out).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        got, want,
        "{name}: cbtop synth no longer writes the model the reference was made from"
    );
    out
}

/// Compare one model with its reference; returns the largest logit difference seen.
fn check(ty: &str, path: &Path, numerics: Numerics) -> f32 {
    let name = format!("conf-gemma3-{ty}");
    let model = std::sync::Arc::new(cbtop::model::Model::load(path).unwrap());
    let reference = common::jsonl(&common::fixture(&format!("conformance/ref/{name}.jsonl")))
        .into_iter()
        .next()
        .expect("a reference record");
    let bound = if ty.starts_with('F') { 0.005 } else { 0.05 };
    let prompt = common::ids(&reference["prompt_ids"]);
    let mut engine = CpuEngine::new(model, 64).with_numerics(numerics);
    let ours = engine.eval(&prompt, LogitsFor::All).unwrap();
    let theirs = reference["prompt_logits"].as_array().unwrap();
    assert_eq!(ours.len(), theirs.len());
    let mut worst = 0f32;
    for (pos, (o, t)) in ours.iter().zip(theirs).enumerate() {
        let d = max_abs_diff(o, &common::floats(t));
        assert!(
            d <= bound,
            "{name}: prompt position {pos}: max |logit diff| {d} > {bound}"
        );
        worst = worst.max(d);
    }
    let mut logits = ours.last().unwrap().clone();
    for (i, step) in reference["steps"].as_array().unwrap().iter().enumerate() {
        let d = max_abs_diff(&logits, &common::floats(&step["logits"]));
        assert!(
            d <= bound,
            "{name}: step {i}: max |logit diff| {d} > {bound}"
        );
        worst = worst.max(d);
        let token = step["token"].as_u64().unwrap() as u32;
        let top = step["top"].as_array().unwrap();
        let margin = top[0][1].as_f64().unwrap() - top[1][1].as_f64().unwrap();
        if margin > 0.05 {
            assert_eq!(
                cbtop::engine::sampler::argmax(&logits),
                token,
                "{name}: step {i}: greedy token differs (margin {margin})"
            );
        }
        // Continue with llama.cpp's token so one near-tie cannot cascade.
        logits = engine
            .eval(&[token], LogitsFor::Last)
            .unwrap()
            .pop()
            .unwrap();
    }
    eprintln!("{name} ({numerics:?}): max |logit diff| {worst:.5} (bound {bound})");
    worst
}

#[test]
fn gemma3_matches_llama_cpp_in_every_type() {
    for ty in TYPES {
        let path = synthesize(ty);
        check(ty, &path, Numerics::Exact);
        check(ty, &path, Numerics::Fast);
        let _ = std::fs::remove_file(path);
    }
}

/// The prompt and greedy steps cross the window (18 positions, window 4), so the sliding
/// layers must differ from plain causal attention: with the window widened past the context
/// in the file's metadata, the logits move by more than the bound.
#[test]
fn the_sliding_window_changes_the_logits() {
    let path = synthesize("Q8_0");
    let reference =
        common::jsonl(&common::fixture("conformance/ref/conf-gemma3-Q8_0.jsonl")).remove(0);
    let prompt = common::ids(&reference["prompt_ids"]);
    let windowed = std::sync::Arc::new(cbtop::model::Model::load(&path).unwrap());
    let mut wide = cbtop::model::Model::load(&path).unwrap();
    wide.config.sliding_window = Some(1 << 20);
    let last = |m: std::sync::Arc<cbtop::model::Model>| {
        CpuEngine::new(m, 64)
            .eval(&prompt, LogitsFor::All)
            .unwrap()
            .pop()
            .unwrap()
    };
    let d = max_abs_diff(&last(windowed), &last(std::sync::Arc::new(wide)));
    assert!(d > 0.05, "the window changed the last logits by only {d}");
    let _ = std::fs::remove_file(path);
}
