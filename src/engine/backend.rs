//! The seam between the profiler and an engine: the CPU engine or the CUDA engine behind one
//! type, so the decode loop (`profiler::session`) drives either. Greedy sampling happens where
//! the logits are: on the CPU after copying nothing, on the GPU before copying one token id.

use std::time::Instant;

use super::cuda::CudaEngine;
use super::sampler::argmax;
use super::{Engine, EngineError, LogitsFor};
use crate::brick::{BrickId, Recorder};
use crate::model::Model;

/// An engine on some device.
pub enum Backend {
    Cpu(Engine),
    Cuda(Box<CudaEngine>),
}

impl From<Engine> for Backend {
    fn from(e: Engine) -> Backend {
        Backend::Cpu(e)
    }
}

impl From<CudaEngine> for Backend {
    fn from(e: CudaEngine) -> Backend {
        Backend::Cuda(Box::new(e))
    }
}

impl Backend {
    /// `cpu` or `cuda` (the report's `hardware.backend`).
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu(_) => "cpu",
            Backend::Cuda(_) => "cuda",
        }
    }

    pub fn model(&self) -> &Model {
        match self {
            Backend::Cpu(e) => e.model(),
            Backend::Cuda(e) => e.model(),
        }
    }

    pub fn position(&self) -> usize {
        match self {
            Backend::Cpu(e) => e.position(),
            Backend::Cuda(e) => e.position(),
        }
    }

    pub fn context(&self) -> usize {
        match self {
            Backend::Cpu(e) => e.context(),
            Backend::Cuda(e) => e.context(),
        }
    }

    pub fn reset(&mut self) {
        match self {
            Backend::Cpu(e) => e.reset(),
            Backend::Cuda(e) => e.reset(),
        }
    }

    /// Evaluate `tokens`, returning logits (copied back from the GPU on CUDA).
    pub fn eval_recorded(
        &mut self,
        tokens: &[u32],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        match self {
            Backend::Cpu(e) => e.eval_recorded(tokens, want, rec),
            Backend::Cuda(e) => e.eval(tokens, want, rec),
        }
    }

    /// Evaluate a prompt (timing from `t0`) and pick its greedy next token; returns the token
    /// and the evaluation's nanoseconds. On the CPU the evaluation ends before the pick; on the
    /// GPU they end together (one token id comes back), so there the time includes the pick.
    pub fn prefill(&mut self, tokens: &[u32], t0: Instant) -> Result<(u32, u64), EngineError> {
        match self {
            Backend::Cpu(e) => {
                let logits = e.eval(tokens, LogitsFor::Last)?;
                let eval_ns = t0.elapsed().as_nanos() as u64;
                Ok((logits.last().map_or(0, |l| argmax(l)), eval_ns))
            }
            Backend::Cuda(e) => {
                let next = e.eval_argmax(tokens, &mut Recorder::off())?;
                Ok((next, t0.elapsed().as_nanos() as u64))
            }
        }
    }

    /// Evaluate `tokens` and return the greedy next token, with the logits it was picked from
    /// when they are on the host (CPU; on CUDA only the token id comes back). The `sample`
    /// brick is recorded (host clock on the CPU, the GPU timing mode on CUDA).
    pub fn eval_greedy(
        &mut self,
        tokens: &[u32],
        rec: &mut Recorder,
    ) -> Result<(u32, Option<Vec<f32>>), EngineError> {
        match self {
            Backend::Cpu(e) => {
                let row = e
                    .eval_recorded(tokens, LogitsFor::Last, rec)?
                    .pop()
                    .unwrap_or_default();
                let next = rec.time(BrickId::Sample, None, || argmax(&row));
                Ok((next, Some(row)))
            }
            Backend::Cuda(e) => Ok((e.eval_argmax(tokens, rec)?, None)),
        }
    }
}
