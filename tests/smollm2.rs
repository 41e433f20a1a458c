//! The real model: SmolLM2-135M-Instruct Q4_1 must generate exactly llama.cpp's greedy tokens
//! for every prompt of the fixture.

mod common;

use std::sync::Arc;

use cbtop::engine::backend::Backend;
use cbtop::engine::sampler::{Sampler, SamplerConfig};
use cbtop::engine::{generate, CpuEngine};
use cbtop::model::Model;

#[test]
fn greedy_generation_matches_llama_cpp() {
    let model = Arc::new(Model::load(&common::smollm2()).unwrap());
    let cases = common::jsonl(&common::fixture("smollm2/generation.jsonl"));
    assert_eq!(cases.len(), 8);
    let mut failures = Vec::new();
    for case in &cases {
        let prompt = common::ids(&case["prompt_ids"]);
        let want = common::ids(&case["generated_ids"]);
        let mut engine = Backend::from(CpuEngine::new(model.clone(), 128));
        let mut got = Vec::new();
        let mut worst = 0f32;
        let steps = case["steps"].as_array().unwrap();
        generate(
            &mut engine,
            &prompt,
            32,
            &mut Sampler::new(SamplerConfig::greedy()),
            true,
            false,
            |s| {
                if let Some(step) = steps.get(got.len()) {
                    for pair in step["top"].as_array().unwrap() {
                        let id = pair[0].as_u64().unwrap() as usize;
                        worst = worst.max((s.logits[id] - pair[1].as_f64().unwrap() as f32).abs());
                    }
                }
                got.push(s.token);
            },
        )
        .unwrap();
        eprintln!(
            "{:?}: max |top-5 logit diff| {worst:.4}",
            case["prompt"].as_str().unwrap_or("")
        );
        if got != want {
            failures.push(format!("{:?}: got {got:?}, want {want:?}", case["prompt"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
