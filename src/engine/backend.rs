//! The seam between the profiler and an engine: the CPU engine or the CUDA engine behind one
//! type, so the decode loop (`profiler::session`) drives either. Greedy sampling happens where
//! the logits are: on the CPU after copying nothing, on the GPU before copying one token id.
//!
//! `Backend::open` builds the engine for a resolved `Device`, so the headless run, the live
//! view and `generate` all get the same engine for the same choice.

use std::sync::Arc;
use std::time::Instant;

use super::cpu::ops::argmax as cpu_argmax;
use super::cpu::CpuEngine;
use super::cuda::{CudaEngine, GpuDesc, GpuInfo};
use super::error::EngineError;
use super::options::{LogitsFor, Numerics, Timing};
use crate::brick::peaks::MeasuredPeaks;
use crate::brick::{BrickId, Catalogue, Recorder};
use crate::model::Model;

/// The device an engine runs on, once `auto` has been resolved.
#[derive(Clone, Debug)]
pub enum Device {
    Cpu,
    Cuda(GpuDesc),
}

impl Device {
    /// `cpu` or `cuda:N`, as `--device` spells it.
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_string(),
            Device::Cuda(g) => format!("cuda:{}", g.ordinal),
        }
    }

    /// The numerics an engine on this device runs with unless asked otherwise: the CPU engine
    /// is the reference (exact), the GPU's default is fast.
    pub fn default_numerics(&self) -> Numerics {
        match self {
            Device::Cpu => Numerics::Exact,
            Device::Cuda(_) => Numerics::Fast,
        }
    }
}

/// How brick times are measured with `timing` on `device`, as the report's `config.timing`
/// and the live view's header name it: `off`, `cpu_timer`, `gpu_globaltimer` or `host_sync`.
pub fn timing_label(device: &Device, timing: Timing) -> &'static str {
    match (device, timing) {
        (_, Timing::Off) => "off",
        (Device::Cpu, _) => "cpu_timer",
        (Device::Cuda(_), Timing::Events) => "gpu_globaltimer",
        (Device::Cuda(_), Timing::Sync) => "host_sync",
    }
}

/// An engine on some device.
pub enum Backend {
    Cpu(CpuEngine),
    Cuda(Box<CudaEngine>),
}

impl From<CpuEngine> for Backend {
    fn from(e: CpuEngine) -> Backend {
        Backend::Cpu(e)
    }
}

impl From<CudaEngine> for Backend {
    fn from(e: CudaEngine) -> Backend {
        Backend::Cuda(Box::new(e))
    }
}

/// A greedy decode step's result.
pub struct Greedy {
    pub token: u32,
    /// The logits it was picked from, where they came back to the host (the CPU).
    pub row: Option<Vec<f32>>,
    /// The step was already running when asked for: the call before launched it ahead, so
    /// its time runs from the token before it arriving, not from this call.
    pub ahead: bool,
    /// When the token was on the host: the host's reading of the step's stamps after that
    /// overlaps the next step's run (pipelined), so it is no step's time.
    pub arrived: Instant,
}

impl Backend {
    /// The engine for `model` on `device` with room for `ctx` positions; on a GPU, bricks
    /// timed by `timing` and products run with the kernels `numerics` picks (the CPU engine is
    /// the reference: under `fast` only a prompt's Q4_0 and Q8_0 products leave its
    /// arithmetic; it times with the host clock whenever a recorder asks). A device error
    /// names the device (`cuda:N: ...`).
    pub fn open(
        model: &Arc<Model>,
        ctx: usize,
        device: &Device,
        timing: Timing,
        numerics: Numerics,
    ) -> Result<Backend, EngineError> {
        Ok(match device {
            Device::Cpu => {
                if let Some(why) = super::cpu::unsupported(&model.config) {
                    return Err(EngineError::Device(format!("cpu: {why}")));
                }
                // The CPU engine reads its weights on every token: from a copy in huge pages
                // where the file takes at most half the memory the system has free, else from
                // the file's map.
                let room = super::cpu::batch::memory_available()
                    .is_some_and(|free| model.file.tensor_data_raw().len() <= free / 2);
                model.file.prefault(room);
                CpuEngine::new(model.clone(), ctx)
                    .with_numerics(numerics)
                    .into()
            }
            Device::Cuda(g) => CudaEngine::new(model.clone(), g, ctx, timing, numerics)
                .map_err(|e| EngineError::Device(format!("{}: {e}", device.name())))?
                .into(),
        })
    }

    /// `cpu` or `cuda` (the report's `hardware.backend`).
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu(_) => "cpu",
            Backend::Cuda(_) => "cuda",
        }
    }

    /// The roofline's peaks, measured on the device the engine runs on: the CPU probes (about
    /// half a second) or the GPU's copy, FMA and tensor-core probes.
    pub fn measure_peaks(&self) -> Result<MeasuredPeaks, String> {
        match self {
            Backend::Cpu(e) => {
                let (all, largest) = e.weight_bytes_per_token();
                Ok(MeasuredPeaks::probe_cpu(all, largest))
            }
            Backend::Cuda(e) => e.measure_peaks(),
        }
    }

    /// The GPU the engine runs on, as the report describes it (None on the CPU).
    pub fn gpu_info(&self) -> Option<GpuInfo> {
        match self {
            Backend::Cpu(_) => None,
            Backend::Cuda(e) => Some(e.gpu_info()),
        }
    }

    /// Whether a prompt of `n` tokens runs its products on tensor cores (the GPU's fast
    /// numerics), whose peak then bounds its bricks' compute.
    pub fn prompt_on_tensor_cores(&self, n: usize) -> bool {
        match self {
            Backend::Cpu(_) => false,
            Backend::Cuda(e) => e.prompt_on_tensor_cores(n),
        }
    }

    /// Rows of a prompt of `n` tokens its last layer runs past the attention when only the
    /// last logits are wanted: the CPU engine's last row alone, every row on the GPU.
    pub fn prompt_tail_rows(&self, n: usize) -> usize {
        match self {
            Backend::Cpu(_) => n.min(1),
            Backend::Cuda(_) => n,
        }
    }

    /// The numerics the engine runs with: `exact` on the CPU (the reference) whatever was
    /// asked, the CUDA engine's own setting on the GPU.
    pub fn numerics(&self) -> Numerics {
        match self {
            Backend::Cpu(e) => e.numerics(),
            Backend::Cuda(e) => e.numerics(),
        }
    }

    /// Every kernel the engine has named for its bricks so far (the GPU: stamped launches;
    /// the CPU: the kernels its products and steps chose), indexed as the recorder's
    /// `KernelSpan`s name them.
    pub fn kernels(&self) -> Catalogue {
        match self {
            Backend::Cpu(e) => e.kernels(),
            Backend::Cuda(e) => e.kernels(),
        }
    }

    /// Bytes and seconds the engine spent repacking weights at load (the CPU's `fast`
    /// numerics), if it did.
    pub fn repacked(&self) -> Option<(usize, f64)> {
        match self {
            Backend::Cpu(e) => e.repacked().filter(|&(bytes, _)| bytes > 0),
            Backend::Cuda(_) => None,
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
                Ok((logits.last().map_or(0, |l| cpu_argmax(l)), eval_ns))
            }
            Backend::Cuda(e) => {
                let next = e.eval_argmax(tokens, &mut Recorder::off())?;
                Ok((next, t0.elapsed().as_nanos() as u64))
            }
        }
    }

    /// Evaluate a prompt brick by brick into `rec` and pick its greedy next token (the
    /// profiled prefill; `prefill` is the timed one).
    pub fn prefill_recorded(
        &mut self,
        tokens: &[u32],
        rec: &mut Recorder,
    ) -> Result<u32, EngineError> {
        Ok(self.eval_greedy(tokens, rec)?.0)
    }

    /// Evaluate `tokens` and return the greedy next token, with the logits it was picked from
    /// when they are on the host (CPU; on CUDA only the token id comes back). The `sample`
    /// brick is recorded (host clock on the CPU, the GPU timing mode on CUDA).
    pub fn eval_greedy(
        &mut self,
        tokens: &[u32],
        rec: &mut Recorder,
    ) -> Result<(u32, Option<Vec<f32>>), EngineError> {
        let g = self.decode_greedy(tokens, rec, None)?;
        Ok((g.token, g.row))
    }

    /// `eval_greedy` for a decode loop that knows its next step: with `next` (whether that
    /// step is profiled) the GPU engine launches it before this step's token is read
    /// (CudaEngine::decode); the CPU has nothing to overlap and ignores it.
    pub fn decode_greedy(
        &mut self,
        tokens: &[u32],
        rec: &mut Recorder,
        next: Option<bool>,
    ) -> Result<Greedy, EngineError> {
        match self {
            Backend::Cpu(e) => {
                let row = e
                    .eval_recorded(tokens, LogitsFor::Last, rec)?
                    .pop()
                    .unwrap_or_default();
                let token = rec.time(BrickId::Sample, None, || cpu_argmax(&row));
                e.note_sample(rec);
                Ok(Greedy {
                    token,
                    row: Some(row),
                    ahead: false,
                    arrived: Instant::now(),
                })
            }
            Backend::Cuda(e) => {
                let d = e.decode(tokens, rec, next)?;
                Ok(Greedy {
                    token: d.token,
                    row: None,
                    ahead: d.ahead,
                    arrived: d.arrived,
                })
            }
        }
    }

    /// How many logits of the last `eval_greedy` row were NaN or infinite, where the row stayed
    /// on the device (CUDA counts them in its argmax kernels); None where `eval_greedy` handed
    /// the row back to be counted.
    pub fn device_nonfinite(&self) -> Option<usize> {
        match self {
            Backend::Cpu(_) => None,
            Backend::Cuda(e) => Some(e.nonfinite_logits()),
        }
    }
}
