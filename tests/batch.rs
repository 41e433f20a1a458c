//! Several sequences decoded together on the CPU (`CpuBatch`, `generate_batch`): each
//! sequence's tokens and logits in a batch are its tokens and logits alone, bit for bit under
//! `exact` and within the conformance bounds under `fast`, with prompts of different lengths
//! and sequences that stop at different steps; and a batch too large for memory is refused
//! before anything is allocated.

mod common;

use cbtop::engine::cpu::{CpuBatch, CpuEngine};
use cbtop::engine::generate::{generate_batch, Request};
use cbtop::engine::sampler::{argmax, Sampler, SamplerConfig};
use cbtop::engine::{EngineError, LogitsFor, Numerics};
use common::max_abs_diff;

fn greedy() -> Sampler {
    Sampler::new(SamplerConfig {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        seed: 0,
    })
}

/// Each sequence alone: its greedy tokens and the logits each was picked from.
fn alone(engine: &mut CpuEngine, prompt: &[u32], max: usize) -> Vec<(u32, Vec<f32>)> {
    engine.reset();
    let mut logits = engine.eval(prompt, LogitsFor::Last).unwrap().pop().unwrap();
    let mut out = Vec::new();
    for i in 0..max {
        let t = argmax(&logits);
        out.push((t, std::mem::take(&mut logits)));
        if i + 1 < max {
            logits = engine.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap();
        }
    }
    out
}

/// The same requests in one batch.
fn batched(engine: &CpuEngine, prompts: &[Vec<u32>], max: &[usize]) -> Vec<Vec<(u32, Vec<f32>)>> {
    let mut batch = CpuBatch::new(engine, 64, prompts.len() + 1).unwrap();
    let mut requests: Vec<Request> = prompts
        .iter()
        .zip(max)
        .map(|(p, &m)| Request {
            prompt: p.clone(),
            max_tokens: m,
            sampler: greedy(),
        })
        .collect();
    let mut out = vec![Vec::new(); prompts.len()];
    generate_batch(&mut batch, &mut requests, false, |s, step| {
        out[s].push((step.token, step.logits.clone()))
    })
    .unwrap();
    out
}

/// Three prompts of different lengths (the fixture's and two prefixes of it), stopping
/// after 7, 2 and 5 tokens.
fn requests(
    name: &str,
) -> (
    std::sync::Arc<cbtop::model::Model>,
    Vec<Vec<u32>>,
    [usize; 3],
    f32,
) {
    let (model, reference, bound) = common::conformance_case(name);
    let prompt = common::ids(&reference["prompt_ids"]);
    assert!(prompt.len() >= 5, "{name}: a prompt of 5 tokens at least");
    let prompts = vec![prompt.clone(), prompt[..3].to_vec(), prompt[..5].to_vec()];
    (model, prompts, [7, 2, 5], bound)
}

#[test]
fn a_sequence_in_a_batch_is_itself_alone_bit_for_bit_under_exact() {
    for name in [
        "conf-qwen2-Q4_0",
        "conf-qwen2-Q8_0",
        "conf-llama-Q4_K_S",
        "conf-qwen2-Q6_K",
        "conf-qwen2-F16",
    ] {
        let (model, prompts, max, _) = requests(name);
        let mut engine = CpuEngine::new(model, 64);
        let together = batched(&engine, &prompts, &max);
        for (s, (prompt, &m)) in prompts.iter().zip(&max).enumerate() {
            let by_itself = alone(&mut engine, prompt, m);
            assert_eq!(
                together[s].len(),
                m,
                "{name}: sequence {s} stopped at its own count"
            );
            for (i, (a, b)) in together[s].iter().zip(&by_itself).enumerate() {
                assert_eq!(a.0, b.0, "{name}: sequence {s} step {i}: token");
                assert!(
                    a.1.iter()
                        .zip(&b.1)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{name}: sequence {s} step {i}: logits differ (max {})",
                    max_abs_diff(&a.1, &b.1)
                );
            }
        }
    }
}

/// Under `fast` a batch's products take the prompt kernels, which order their sums unlike
/// the one-token ones: each step's logits stay within the bound of the sequence alone, up
/// to the first step where a near tie (top-2 margin under 0.05 alone) picks another token.
#[test]
fn a_sequence_in_a_batch_stays_within_the_bounds_under_fast() {
    for name in [
        "conf-qwen2-Q4_0",
        "conf-qwen2-Q8_0",
        "conf-llama-Q4_K_S",
        "conf-qwen2-F16",
    ] {
        let (model, prompts, max, bound) = requests(name);
        let mut engine = CpuEngine::new(model, 64).with_numerics(Numerics::Fast);
        let together = batched(&engine, &prompts, &max);
        for (s, (prompt, &m)) in prompts.iter().zip(&max).enumerate() {
            let by_itself = alone(&mut engine, prompt, m);
            for (i, (a, b)) in together[s].iter().zip(&by_itself).enumerate() {
                let d = max_abs_diff(&a.1, &b.1);
                assert!(d <= bound, "{name}: sequence {s} step {i}: {d} > {bound}");
                if a.0 != b.0 {
                    let mut l = b.1.clone();
                    let top = argmax(&l);
                    l[top as usize] = f32::NEG_INFINITY;
                    let margin = b.1[top as usize] - l[argmax(&l) as usize];
                    assert!(
                        margin < 0.05,
                        "{name}: sequence {s} step {i}: token differs at margin {margin}"
                    );
                    break;
                }
            }
        }
    }
}

#[test]
fn a_batch_too_large_for_memory_is_refused_with_the_figure() {
    let (model, _, _) = common::conformance_case("conf-qwen2-Q4_0");
    let engine = CpuEngine::new(model, 64);
    match CpuBatch::new(&engine, 64, 1 << 40) {
        Err(e @ EngineError::BatchTooLarge { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("--batch 1099511627776") && text.contains("MiB"),
                "{text}"
            );
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a batch of 2^40 sequences was made"),
    }
}
