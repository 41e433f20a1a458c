//! Several sequences decoded together on the CPU (`CpuBatch`, `generate_batch`): each
//! sequence's tokens and logits in a batch are its tokens and logits alone, bit for bit under
//! `exact` and within the conformance bounds under `fast`, with prompts of different lengths
//! and sequences that stop at different steps; and a batch too large for memory is refused
//! before anything is allocated.

mod common;

use cbtop::engine::cpu::{CpuBatch, CpuEngine};
use cbtop::engine::{EngineError, LogitsFor, Numerics};
use common::batch::{alone, assert_same_bits, assert_within, batched, requests, Run};

/// Each request alone on `engine` (its cache cleared first).
fn by_itself(engine: &mut CpuEngine, prompt: &[u32], max: usize) -> Run {
    engine.reset();
    alone(
        |t| engine.eval(t, LogitsFor::Last).unwrap().pop().unwrap(),
        prompt,
        max,
    )
}

/// The requests in one batch of one more sequence than requests.
fn together(engine: &CpuEngine, prompts: &[Vec<u32>], max: &[usize]) -> Vec<Run> {
    let mut batch = CpuBatch::new(engine, 64, prompts.len() + 1).unwrap();
    batched(&mut batch, prompts, max)
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
        let all = together(&engine, &prompts, &max);
        for (s, (prompt, &m)) in prompts.iter().zip(&max).enumerate() {
            let one = by_itself(&mut engine, prompt, m);
            assert_same_bits(name, s, &all[s], &one, m);
        }
    }
}

/// Eight sequences decode together for several steps, then drop out one by one: steps of
/// eight down to two tokens take the few-token kernels (`few_vnni` for Q4_0/Q5_0/Q8_0,
/// `few_kquants_exact` for the k-quants on AVX-512, else their one-token dots), each
/// sequence's logits still its own alone, bit for bit.
#[test]
fn eight_sequences_in_a_batch_are_each_alone_bit_for_bit_under_exact() {
    for name in [
        "conf-qwen2-Q5_0",
        "conf-qwen2-Q4_0",
        "conf-qwen2-Q8_0",
        "conf-qwen2-Q4_K_M",
        "conf-qwen2-F16",
    ] {
        let (model, prompts, _, _) = requests(name);
        let (eight, max) = eight_requests(&prompts[0]);
        let mut engine = CpuEngine::new(model, 64);
        let mut batch = CpuBatch::new(&engine, 64, 8).unwrap();
        let all = batched(&mut batch, &eight, &max);
        for (s, (prompt, &m)) in eight.iter().zip(&max).enumerate() {
            let one = by_itself(&mut engine, prompt, m);
            assert_same_bits(name, s, &all[s], &one, m);
        }
    }
}

/// The same eight sequences under `fast` (steps of 8 down to 2 tokens on `few_vnni`,
/// `few_kquants_exact` from 4 tokens and `few_kquants` below, and the repacked Q4_0 groups): each step's logits within the bound of the
/// sequence alone.
#[test]
fn eight_sequences_in_a_batch_stay_within_the_bounds_under_fast() {
    for name in [
        "conf-qwen2-Q5_0",
        "conf-qwen2-Q4_0",
        "conf-qwen2-Q8_0",
        "conf-qwen2-Q4_K_M",
        "conf-qwen2-Q6_K",
        "conf-qwen2-F16",
    ] {
        let (model, prompts, _, bound) = requests(name);
        let (eight, max) = eight_requests(&prompts[0]);
        let mut engine = CpuEngine::new(model, 64).with_numerics(Numerics::Fast);
        let mut batch = CpuBatch::new(&engine, 64, 8).unwrap();
        let all = batched(&mut batch, &eight, &max);
        for (s, (prompt, &m)) in eight.iter().zip(&max).enumerate() {
            let one = by_itself(&mut engine, prompt, m);
            assert_within(name, s, &all[s], &one, bound);
        }
    }
}

/// Eight prompts from `long` (itself, then prefixes of 2 to 5 tokens) and their step counts
/// (2 to 9, so the batch shrinks a sequence a step).
fn eight_requests(long: &[u32]) -> (Vec<Vec<u32>>, Vec<usize>) {
    let eight = (0..8)
        .map(|s| {
            if s % 2 == 0 {
                long.to_vec()
            } else {
                long[..(2 + s / 2).min(long.len())].to_vec()
            }
        })
        .collect();
    (eight, (0..8).map(|s| 2 + s).collect())
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
        let all = together(&engine, &prompts, &max);
        for (s, (prompt, &m)) in prompts.iter().zip(&max).enumerate() {
            let one = by_itself(&mut engine, prompt, m);
            assert_within(name, s, &all[s], &one, bound);
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

/// A batch's greedy picks (read from the pass's logits where they lie) are the argmax of the
/// logits `eval` gives for the same steps, on two batches fed the same tokens: the prompts
/// together, then steps of three, two and one sequences.
#[test]
fn greedy_picks_are_the_argmax_of_the_same_steps_logits() {
    use cbtop::brick::Recorder;
    use cbtop::engine::sampler::argmax;
    use cbtop::engine::Batched;
    let (model, prompts, _, _) = requests("conf-qwen2-Q8_0");
    let engine = CpuEngine::new(model, 64);
    let mut picked = CpuBatch::new(&engine, 64, prompts.len()).unwrap();
    let mut logged = CpuBatch::new(&engine, 64, prompts.len()).unwrap();
    let rec = &mut Recorder::off();
    let mut next: Vec<Vec<u32>> = prompts.clone();
    for step in 0..4 {
        // Sequences 0..3 - step + 1 (all three, then fewer), each its last token.
        let running = (3 - step.min(2)).min(next.len());
        let work: Vec<(usize, &[u32])> = (0..running).map(|s| (s, &next[s][..])).collect();
        let picks = picked.greedy(&work, rec).unwrap();
        let rows = logged.eval(&work, LogitsFor::Last, rec).unwrap();
        let want: Vec<u32> = rows.iter().map(|r| argmax(r.last().unwrap())).collect();
        assert_eq!(picks, want, "step {step}");
        for (s, &t) in picks.iter().enumerate() {
            next[s] = vec![t];
        }
    }
}
