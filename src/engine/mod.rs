//! The inference engine: a model, its KV cache, and the decode loop. `eval` feeds tokens
//! (a whole prompt at once, or one at a time) and returns logits; `generate` runs the loop with
//! a sampler.

pub mod backend;
pub mod cpu;
pub mod cuda;
mod forward;
pub mod gpu_pci;
pub mod kv_cache;
pub mod options;
pub mod sampler;

use std::sync::Arc;

use backend::Backend;
pub use forward::LogitsFor;
use kv_cache::KvCache;
pub use options::{Numerics, Timing};
use sampler::Sampler;

use crate::brick::Recorder;
use crate::model::Model;

/// Errors while running the model.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    #[error("token id {id} is outside the vocabulary of {vocab}")]
    BadToken { id: u32, vocab: usize },
    #[error("the context of {ctx} positions is full ({used} used, {asked} more asked)")]
    ContextFull {
        ctx: usize,
        used: usize,
        asked: usize,
    },
    #[error("nothing to evaluate: the token list is empty")]
    Empty,
    /// A GPU failure (out of memory, a kernel fault, NVRTC): the message names it.
    #[error("{0}")]
    Device(String),
}

/// A model with a KV cache, ready to evaluate tokens.
pub struct Engine {
    model: Arc<Model>,
    kv: KvCache,
    /// Boxed: `Backend` holds an `Engine` by value beside a boxed CUDA engine.
    scratch: Box<forward::Scratch>,
}

impl Engine {
    /// An engine with room for `ctx` positions (capped at the model's context length).
    pub fn new(model: Arc<Model>, ctx: usize) -> Engine {
        let c = &model.config;
        let ctx = ctx.clamp(1, c.context_length);
        let kv = KvCache::new(c.n_layers, c.kv_dim(), ctx);
        Engine {
            model,
            kv,
            scratch: Box::default(),
        }
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Positions used so far.
    pub fn position(&self) -> usize {
        self.kv.len()
    }

    /// Context capacity.
    pub fn context(&self) -> usize {
        self.kv.capacity()
    }

    /// Drop the cache and start over.
    pub fn reset(&mut self) {
        self.kv.clear();
    }

    /// Evaluate `tokens` after what is cached; logits for the last or every token.
    pub fn eval(&mut self, tokens: &[u32], want: LogitsFor) -> Result<Vec<Vec<f32>>, EngineError> {
        self.eval_recorded(tokens, want, &mut Recorder::off())
    }

    /// `eval`, handing each brick's span to `rec` (when it is enabled).
    pub fn eval_recorded(
        &mut self,
        tokens: &[u32],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::Empty);
        }
        let vocab = self.model.config.vocab_size;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(EngineError::BadToken { id, vocab });
        }
        if self.kv.len() + tokens.len() > self.kv.capacity() {
            return Err(EngineError::ContextFull {
                ctx: self.kv.capacity(),
                used: self.kv.len(),
                asked: tokens.len(),
            });
        }
        let m = &self.model;
        Ok(forward::forward(
            &m.config,
            &m.weights,
            &mut self.kv,
            tokens,
            want,
            rec,
            &mut self.scratch,
        ))
    }
}

/// One generated token with the logits it was chosen from.
pub struct Step {
    pub token: u32,
    pub logits: Vec<f32>,
}

/// Evaluate `prompt`, then generate up to `max_tokens` tokens, stopping after an
/// end-of-generation token when `stop_at_eog`. `on_step` sees each step as it is made.
/// Returns the prompt's logits (every position when `prompt_logits`, else none).
///
/// Runs on either engine: every step's logits come to the host (on the GPU, one row copied
/// back per step) and `sampler` picks there, so CPU and GPU sample identically.
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
