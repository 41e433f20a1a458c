//! Text generation on any backend: evaluate a prompt, then sample token after token on the
//! host, so the CPU and the GPU sample identically. Several sequences decode together with
//! `generate_batch`.

use super::backend::Backend;
use super::batched::Batched;
use super::error::EngineError;
use super::options::LogitsFor;
use super::sampler::Sampler;
use crate::brick::Recorder;

/// One generated token with the logits it was chosen from.
pub struct Step {
    pub token: u32,
    pub logits: Vec<f32>,
}

/// Evaluate `prompt`, then generate up to `max_tokens` tokens, stopping after an
/// end-of-generation token when `stop_at_eog`. `on_step` sees each step as it is made.
/// Returns the prompt's logits (every position when `prompt_logits`, else none).
///
/// Every step's logits come to the host (on the GPU, one row copied back per step) and
/// `sampler` picks there.
pub fn generate(
    engine: &mut Backend,
    prompt: &[u32],
    max_tokens: usize,
    sampler: &mut Sampler,
    stop_at_eog: bool,
    prompt_logits: bool,
    mut on_step: impl FnMut(&Step),
) -> Result<Vec<Vec<f32>>, EngineError> {
    let want = if prompt_logits {
        LogitsFor::All
    } else {
        LogitsFor::Last
    };
    let rec = &mut Recorder::off();
    let mut all = engine.eval_recorded(prompt, want, rec)?;
    let mut logits = all.last().cloned().unwrap_or_default();
    if !prompt_logits {
        all.clear();
    }
    for i in 0..max_tokens {
        let token = sampler.sample(&logits);
        let step = Step { token, logits };
        on_step(&step);
        if (stop_at_eog && engine.model().tokenizer.is_eog(token)) || i + 1 == max_tokens {
            break;
        }
        logits = engine
            .eval_recorded(&[token], LogitsFor::Last, rec)?
            .pop()
            .unwrap_or_default();
    }
    Ok(all)
}

/// One sequence's request in a batched generation.
pub struct Request {
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub sampler: Sampler,
}

/// `generate` for several sequences decoded together (a `Batched`, one sequence a request, the
/// batch at least as large): the prompts evaluated (in one pass where the batch runs them
/// together), then one pass per step over the sequences still running. A sequence stops after `max_tokens` or (when
/// `stop_at_eog`) an end-of-generation token, and the others go on without it. `on_step(s,
/// step)` sees each sequence's steps as they are made.
pub fn generate_batch(
    batch: &mut dyn Batched,
    requests: &mut [Request],
    stop_at_eog: bool,
    mut on_step: impl FnMut(usize, &Step),
) -> Result<(), EngineError> {
    assert!(requests.len() <= batch.len(), "a sequence per request");
    let rec = &mut Recorder::off();
    let work: Vec<(usize, &[u32])> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.max_tokens > 0)
        .map(|(s, r)| (s, r.prompt.as_slice()))
        .collect();
    if work.is_empty() {
        return Ok(());
    }
    let mut logits: Vec<(usize, Vec<f32>)> = work
        .iter()
        .map(|&(s, _)| s)
        .zip(batch.eval(&work, LogitsFor::Last, rec)?)
        .map(|(s, mut rows)| (s, rows.pop().unwrap_or_default()))
        .collect();
    let mut made = vec![0usize; requests.len()];
    while !logits.is_empty() {
        let mut next: Vec<(usize, [u32; 1])> = Vec::with_capacity(logits.len());
        for (s, l) in logits.drain(..) {
            let r = &mut requests[s];
            let token = r.sampler.sample(&l);
            on_step(s, &Step { token, logits: l });
            made[s] += 1;
            let eog = stop_at_eog && batch.model().tokenizer.is_eog(token);
            if !eog && made[s] < r.max_tokens {
                next.push((s, [token]));
            }
        }
        if next.is_empty() {
            break;
        }
        let work: Vec<(usize, &[u32])> = next.iter().map(|(s, t)| (*s, &t[..])).collect();
        logits = next
            .iter()
            .map(|&(s, _)| s)
            .zip(batch.eval(&work, LogitsFor::Last, rec)?)
            .map(|(s, mut rows)| (s, rows.pop().unwrap_or_default()))
            .collect();
    }
    Ok(())
}
