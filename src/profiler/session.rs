//! The backend-neutral decode loop the profiler drives: evaluate a prompt, then decode one
//! token per step, each step timed as a whole and (when profiling) brick by brick through the
//! engine's `Recorder`. Headless runs and the live view both step a `Session`.

use std::time::Instant;

use crate::brick::stats::TokenSample;
use crate::brick::Recorder;
use crate::engine::backend::Backend;
use crate::engine::EngineError;

/// A prompt evaluation, measured.
#[derive(Clone, Debug)]
pub struct Prefill {
    pub tokens: usize,
    /// Prompt evaluation wall time.
    pub eval_ns: u64,
    /// Prompt evaluation plus sampling the first token.
    pub ttft_ns: u64,
}

/// An engine (CPU or GPU), the tokens so far, and the recorder its spans go to.
pub struct Session {
    engine: Backend,
    rec: Recorder,
    prompt: Vec<u32>,
    next: u32,
    generated: Vec<u32>,
    /// Logits of the last step that were NaN or infinite.
    nonfinite: usize,
    /// When the last decode step's token arrived (a step launched ahead is timed from it).
    last_end: Option<Instant>,
}

impl Session {
    /// A session that will evaluate `prompt` (non-empty, in range) first.
    pub fn new(engine: impl Into<Backend>, prompt: Vec<u32>) -> Session {
        Session {
            engine: engine.into(),
            rec: Recorder::new(false, Instant::now()),
            prompt,
            next: 0,
            generated: Vec::new(),
            nonfinite: 0,
            last_end: None,
        }
    }

    pub fn engine(&self) -> &Backend {
        &self.engine
    }

    /// When spans are measured from (for traces).
    pub fn origin(&self) -> Instant {
        self.rec.origin()
    }

    /// Tokens generated since the last prefill.
    pub fn generated(&self) -> &[u32] {
        &self.generated
    }

    /// Logits of the last decode step that were NaN or infinite (0 for a healthy model).
    pub fn nonfinite_logits(&self) -> usize {
        self.nonfinite
    }

    /// Positions left before the context is full.
    pub fn room(&self) -> usize {
        self.engine.context() - self.engine.position()
    }

    /// Clear the cache, evaluate the prompt and sample the first token.
    pub fn prefill(&mut self) -> Result<Prefill, EngineError> {
        self.engine.reset();
        self.last_end = None;
        self.generated.clear();
        self.rec.set_enabled(false);
        let t0 = Instant::now();
        let (next, eval_ns) = self.engine.prefill(&self.prompt, t0)?;
        self.next = next;
        self.generated.push(self.next);
        Ok(Prefill {
            tokens: self.prompt.len(),
            eval_ns,
            ttft_ns: t0.elapsed().as_nanos() as u64,
        })
    }

    /// Evaluate the prompt brick by brick (every brick's span and, on the GPU, the gaps
    /// between kernels), from an empty cache. The cache is left holding the prompt: the timed
    /// `prefill` that follows starts over, so time to first token is never profiled.
    pub fn profile_prefill(&mut self) -> Result<TokenSample, EngineError> {
        self.engine.reset();
        self.last_end = None;
        self.rec.set_enabled(true);
        self.rec.clear();
        let t0 = Instant::now();
        self.engine.prefill_recorded(&self.prompt, &mut self.rec)?;
        let total_ns = t0.elapsed().as_nanos() as u64;
        self.rec.set_enabled(false);
        Ok(TokenSample {
            start_ns: self.rec.since_origin(t0),
            total_ns,
            position: 0,
            spans: self.rec.take(),
            gaps_ns: self.rec.take_gaps(),
            kernels: self.rec.take_kernels(),
        })
    }

    /// Decode one token: feed the last sampled token, sample the next. With `profiled`, every
    /// brick's span is in the returned sample; without, only the step's wall time. `next` tells
    /// the engine what the next step will be (`Some(profiled)`; None: no next step, or not
    /// known), so the GPU can run it straight after this one. A step ends when its token is on
    /// the host (its stamps are read after); one that was already running when asked for is
    /// timed from the token before it arriving (the time between tokens), not from this call.
    pub fn step_then(
        &mut self,
        profiled: bool,
        next: Option<bool>,
    ) -> Result<TokenSample, EngineError> {
        self.rec.set_enabled(profiled);
        self.rec.clear();
        let position = self.engine.position();
        let t0 = Instant::now();
        let g = self
            .engine
            .decode_greedy(&[self.next], &mut self.rec, next)?;
        self.next = g.token;
        let from = match self.last_end {
            Some(t) if g.ahead => t,
            _ => t0,
        };
        self.last_end = Some(g.arrived);
        let total_ns = g.arrived.saturating_duration_since(from).as_nanos() as u64;
        // Outside the timed step: the check must not count as anyone's time. On CUDA the
        // logits stay on the device and its argmax kernels counted them.
        self.nonfinite = match g.row {
            Some(r) => r.iter().filter(|x| !x.is_finite()).count(),
            None => self.engine.device_nonfinite().unwrap_or(0),
        };
        self.generated.push(self.next);
        Ok(TokenSample {
            start_ns: self.rec.since_origin(from),
            total_ns,
            position,
            spans: self.rec.take(),
            gaps_ns: self.rec.take_gaps(),
            kernels: self.rec.take_kernels(),
        })
    }
}
