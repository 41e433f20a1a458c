//! Text generation on any backend: evaluate a prompt, then sample token after token on the
//! host, so the CPU and the GPU sample identically.

use super::backend::Backend;
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
