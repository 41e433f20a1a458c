//! The batched-decode sweep (`--batch`): for each batch size `n`, `n` sequences with their own
//! prompts and KV caches on an engine's batch (`Batched`: the CPU's evaluates every prompt in
//! one pass, the GPU's one after another), then warm-up steps and measured steps of one token for every sequence. With per-brick
//! timing on, each measured step is profiled and followed by an unprofiled one, so the
//! throughput comes from unprofiled steps and the per-brick table from profiled ones at the
//! same positions; their ratio is the profiler's own cost at that batch size.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::brick::cost::Shapes;
use crate::brick::{Brick, Recorder};
use crate::engine::{Batched, EngineError};
use crate::model::Model;

/// What a sweep runs at each batch size.
#[derive(Clone, Copy, Debug)]
pub struct Sweep {
    pub warmup: usize,
    pub tokens: usize,
    /// Per-brick timing on the measured steps.
    pub profiled: bool,
}

/// Most sequences a batch takes (`--batch`).
pub const MAX_BATCH: usize = 1024;

/// `--prompt-file`: each non-empty line's tokens (one prompt a line); an unreadable file or
/// one with no prompt in it is refused, naming the file.
pub fn prompt_lines(model: &Model, path: &Path) -> Result<Vec<Vec<u32>>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--prompt-file {}: cannot read: {e}", path.display()))?;
    let prompts: Vec<Vec<u32>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| model.tokenizer.encode(l, true))
        .filter(|ids| !ids.is_empty())
        .collect();
    if prompts.is_empty() {
        return Err(format!(
            "--prompt-file {}: no prompt in it (one a line)",
            path.display()
        ));
    }
    Ok(prompts)
}

/// Sequence `s`'s prompt: `base` with the tokens after the first turned by `s` places, so the
/// sequences of a batch read different text of the same length.
pub fn varied_prompt(base: &[u32], s: usize) -> Vec<u32> {
    let mut p = base.to_vec();
    if p.len() > 2 {
        let k = s % (p.len() - 1);
        p[1..].rotate_left(k);
    }
    p
}

/// Positions a sequence needs: its prompt and every step of the sweep.
pub fn context_needed(prompt: usize, sweep: Sweep) -> usize {
    prompt + sweep.warmup + 2 * sweep.tokens + 1
}

/// `n` sequences decoded together, each its own prompt and KV cache, one pass per step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BatchPoint {
    /// Sequences in the batch.
    pub n: usize,
    /// Each sequence's prompt length.
    pub prompt_tokens: Vec<usize>,
    /// Every prompt evaluated (in one pass on the CPU, one after another on the GPU),
    /// milliseconds.
    pub prefill_ms: f64,
    /// Each sequence's time to its first token from the start of the prompts, ms.
    pub ttft_ms: Vec<f64>,
    /// Measured steps (each one token for every sequence).
    pub steps: usize,
    /// Mean, median and p99 step time without per-brick timing, microseconds.
    pub step_us: f64,
    pub step_p50_us: f64,
    pub step_p99_us: f64,
    /// Tokens per second over all sequences (`n` / mean step time).
    pub tokens_per_sec: f64,
    /// Tokens per second of each sequence (1 / mean step time, the same for all).
    pub per_sequence_tokens_per_sec: f64,
    /// Bytes of the sequences' KV caches.
    pub kv_cache_bytes: usize,
    /// Per-brick timing's cost on the step time, percent (absent when it was off).
    #[serde(default)]
    pub overhead_percent: Option<f64>,
    /// Mean profiled step time not covered by any brick, microseconds.
    #[serde(default)]
    pub other_us: Option<f64>,
    /// Per brick (absent when per-brick timing was off), in pipeline order.
    #[serde(default)]
    pub bricks: Vec<BatchBrick>,
}

/// One brick of a batched step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BatchBrick {
    pub id: String,
    /// Mean time per step (all `n` sequences), microseconds.
    pub per_step_us: f64,
    /// `per_step_us / n`.
    pub per_token_us: f64,
    /// Share of the mean profiled step time, percent.
    pub share_percent: f64,
    /// Bytes moved and FLOPs per step by the cost model (weights once, the rest per sequence).
    pub bytes: f64,
    pub flops: f64,
    pub gbps: f64,
    pub tflops: f64,
    /// FLOPs per byte: where the brick sits on the roofline at this batch size.
    pub intensity: f64,
}

/// The quantile `q` of `xs` (sorted here), microseconds from nanoseconds.
fn quantile_us(xs: &mut [u64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_unstable();
    let i = ((xs.len() - 1) as f64 * q).round() as usize;
    xs[i] as f64 / 1e3
}

/// Sequence `s`'s prompt from `given`: one prompt varied per sequence (`varied_prompt`), or
/// several taken in turn.
pub fn prompt_for(given: &[Vec<u32>], s: usize) -> Vec<u32> {
    match given {
        [one] => varied_prompt(one, s),
        many => many[s % many.len()].clone(),
    }
}

/// One batch size of the sweep on `batch` (its sequences' prompts from `given`, `prompt_for`).
/// Prompts the engine runs together are timed as one pass; otherwise each sequence's time to
/// its first token counts from the start of the first prompt.
pub fn run_point(
    batch: &mut dyn Batched,
    given: &[Vec<u32>],
    sweep: Sweep,
) -> Result<BatchPoint, EngineError> {
    let n = batch.len();
    let prompts: Vec<Vec<u32>> = (0..n).map(|s| prompt_for(given, s)).collect();
    let work: Vec<(usize, &[u32])> = prompts.iter().map(|p| p.as_slice()).enumerate().collect();
    let off = &mut Recorder::off();
    let t0 = Instant::now();
    let mut ttft_ms = Vec::with_capacity(n);
    let mut next: Vec<[u32; 1]> = Vec::with_capacity(n);
    if batch.prompts_together() {
        next.extend(batch.greedy(&work, off)?.into_iter().map(|t| [t]));
        ttft_ms.resize(n, t0.elapsed().as_secs_f64() * 1e3);
    } else {
        for item in &work {
            next.push([batch.greedy(std::slice::from_ref(item), off)?[0]]);
            ttft_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    let prefill = t0.elapsed();
    let mut step = |rec: &mut Recorder, next: &mut Vec<[u32; 1]>| -> Result<u64, EngineError> {
        let work: Vec<(usize, &[u32])> = next.iter().map(|t| &t[..]).enumerate().collect();
        let t = Instant::now();
        let picks = batch.greedy(&work, rec)?;
        let ns = t.elapsed().as_nanos() as u64;
        for (t, p) in next.iter_mut().zip(picks) {
            t[0] = p;
        }
        Ok(ns)
    };
    for _ in 0..sweep.warmup {
        step(off, &mut next)?;
    }
    let mut plain = Vec::with_capacity(sweep.tokens);
    let mut profiled = Vec::new();
    let mut spans: HashMap<Brick, u64> = HashMap::new();
    let mut rec = Recorder::new(true, Instant::now());
    for _ in 0..sweep.tokens {
        if sweep.profiled {
            rec.clear();
            profiled.push(step(&mut rec, &mut next)?);
            for s in rec.take() {
                *spans.entry(s.brick).or_default() += s.dur_ns;
            }
        }
        plain.push(step(off, &mut next)?);
    }
    let mean = |xs: &[u64]| xs.iter().sum::<u64>() as f64 / xs.len().max(1) as f64 / 1e3;
    let step_us = mean(&plain);
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let positions = longest + sweep.warmup + sweep.tokens;
    let model = batch.model();
    let shapes = Shapes::new(&model.config, &model.weights);
    let mut bricks: Vec<(Brick, u64)> = spans.into_iter().collect();
    bricks.sort_by_key(|(b, _)| b.order());
    let profiled_us = mean(&profiled);
    let steps = sweep.tokens.max(1) as f64;
    let bricks: Vec<BatchBrick> = bricks
        .into_iter()
        .map(|(b, ns)| {
            let per_step_us = ns as f64 / 1e3 / steps;
            let cost = shapes.batch_cost(b, n, positions as f64);
            let s = per_step_us / 1e6;
            BatchBrick {
                id: b.to_string(),
                per_step_us,
                per_token_us: per_step_us / n as f64,
                share_percent: 100.0 * per_step_us / profiled_us.max(f64::MIN_POSITIVE),
                bytes: cost.bytes(),
                flops: cost.flops,
                gbps: cost.bytes() / s.max(f64::MIN_POSITIVE) / 1e9,
                tflops: cost.flops / s.max(f64::MIN_POSITIVE) / 1e12,
                intensity: cost.intensity(),
            }
        })
        .collect();
    let covered: f64 = bricks.iter().map(|b| b.per_step_us).sum();
    Ok(BatchPoint {
        n,
        prompt_tokens: prompts.iter().map(Vec::len).collect(),
        prefill_ms: prefill.as_secs_f64() * 1e3,
        ttft_ms,
        steps: sweep.tokens,
        step_us,
        step_p50_us: quantile_us(&mut plain.clone(), 0.5),
        step_p99_us: quantile_us(&mut plain, 0.99),
        tokens_per_sec: n as f64 * 1e6 / step_us.max(f64::MIN_POSITIVE),
        per_sequence_tokens_per_sec: 1e6 / step_us.max(f64::MIN_POSITIVE),
        kv_cache_bytes: batch.kv_bytes(),
        overhead_percent: sweep
            .profiled
            .then(|| 100.0 * (profiled_us / step_us.max(f64::MIN_POSITIVE) - 1.0)),
        other_us: sweep.profiled.then(|| (profiled_us - covered).max(0.0)),
        bricks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_prompts_are_taken_in_turn() {
        let given = vec![vec![1, 2], vec![3]];
        assert_eq!(prompt_for(&given, 0), vec![1, 2]);
        assert_eq!(prompt_for(&given, 1), vec![3]);
        assert_eq!(prompt_for(&given, 2), vec![1, 2]);
        assert_eq!(prompt_for(&[vec![1, 10, 11]], 1), vec![1, 11, 10]);
    }

    #[test]
    fn varied_prompts_keep_the_first_token_and_the_length() {
        let base = [1, 10, 11, 12];
        assert_eq!(varied_prompt(&base, 0), vec![1, 10, 11, 12]);
        assert_eq!(varied_prompt(&base, 1), vec![1, 11, 12, 10]);
        assert_eq!(varied_prompt(&base, 3), vec![1, 10, 11, 12]);
        assert_eq!(varied_prompt(&[5], 2), vec![5]);
    }
}
