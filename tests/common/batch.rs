//! Shared by the batch tests (CPU and GPU): three requests of different prompt lengths that
//! stop at different steps, run alone and in a batch, and the two ways a batch's sequence must
//! match itself alone (bit for bit under `exact`, within the bounds under `fast`).

use cbtop::engine::generate::{generate_batch, Request};
use cbtop::engine::sampler::{argmax, Sampler, SamplerConfig};
use cbtop::engine::Batched;

use super::max_abs_diff;

/// Each sequence's greedy tokens and the logits each was picked from.
pub type Run = Vec<(u32, Vec<f32>)>;

pub fn greedy() -> Sampler {
    Sampler::new(SamplerConfig {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        seed: 0,
    })
}

/// Three prompts of different lengths (the fixture's and two prefixes of it), stopping
/// after 7, 2 and 5 tokens, with the model and its bound.
pub fn requests(
    name: &str,
) -> (
    std::sync::Arc<cbtop::model::Model>,
    Vec<Vec<u32>>,
    [usize; 3],
    f32,
) {
    let (model, reference, bound) = super::conformance_case(name);
    let prompt = super::ids(&reference["prompt_ids"]);
    assert!(prompt.len() >= 5, "{name}: a prompt of 5 tokens at least");
    let prompts = vec![prompt.clone(), prompt[..3].to_vec(), prompt[..5].to_vec()];
    (model, prompts, [7, 2, 5], bound)
}

/// One sequence alone: `eval(tokens)` gives the logits after `tokens` (the prompt first, then
/// each picked token) on a fresh cache.
pub fn alone(mut eval: impl FnMut(&[u32]) -> Vec<f32>, prompt: &[u32], max: usize) -> Run {
    let mut logits = eval(prompt);
    let mut out = Vec::new();
    for i in 0..max {
        let t = argmax(&logits);
        out.push((t, std::mem::take(&mut logits)));
        if i + 1 < max {
            logits = eval(&[t]);
        }
    }
    out
}

/// The requests in one batch (`generate_batch`).
pub fn batched(batch: &mut dyn Batched, prompts: &[Vec<u32>], max: &[usize]) -> Vec<Run> {
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
    generate_batch(batch, &mut requests, false, |s, step| {
        out[s].push((step.token, step.logits.clone()))
    })
    .unwrap();
    out
}

/// Sequence `s` in the batch gave its tokens and logits alone, bit for bit, and stopped at
/// its own count.
pub fn assert_same_bits(what: &str, s: usize, together: &Run, by_itself: &Run, max: usize) {
    assert_eq!(
        together.len(),
        max,
        "{what}: sequence {s} stopped at its own count"
    );
    for (i, (a, b)) in together.iter().zip(by_itself).enumerate() {
        assert_eq!(a.0, b.0, "{what}: sequence {s} step {i}: token");
        assert!(
            a.1.iter()
                .zip(&b.1)
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "{what}: sequence {s} step {i}: logits differ (max {})",
            max_abs_diff(&a.1, &b.1)
        );
    }
}

/// Each step's logits within `bound` of the sequence alone, up to the first step where a near
/// tie (top-2 margin under 0.05 alone) picks another token. Returns the largest difference.
pub fn assert_within(what: &str, s: usize, together: &Run, by_itself: &Run, bound: f32) -> f32 {
    let mut worst = 0f32;
    for (i, (a, b)) in together.iter().zip(by_itself).enumerate() {
        let d = max_abs_diff(&a.1, &b.1);
        assert!(d <= bound, "{what}: sequence {s} step {i}: {d} > {bound}");
        worst = worst.max(d);
        if a.0 != b.0 {
            let mut l = b.1.clone();
            let top = argmax(&l);
            l[top as usize] = f32::NEG_INFINITY;
            let margin = b.1[top as usize] - l[argmax(&l) as usize];
            assert!(
                margin < 0.05,
                "{what}: sequence {s} step {i}: token differs at margin {margin}"
            );
            break;
        }
    }
    worst
}

/// A step's work over sequences whose last tokens are `last`: every sequence's, except that
/// sequence 1 sits out every other step after its prompt (step 0), so a step's rows are not
/// always its sequences.
pub fn one_sitting_out(last: &[Vec<u32>], step: usize) -> Vec<(usize, &[u32])> {
    last.iter()
        .enumerate()
        .filter(|&(s, _)| step == 0 || s != 1 || step.is_multiple_of(2))
        .map(|(s, t)| (s, t.as_slice()))
        .collect()
}
