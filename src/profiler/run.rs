//! A measured run: prefill (profiled once brick by brick, or run once untimed where warm-up
//! steps are asked for, then timed unprofiled), warm-up
//! steps (discarded), then the measured steps. When asked,
//! every profiled step is followed by one unprofiled step at the next position, so profiled and
//! unprofiled throughput come from the same run, the same positions and the same machine state:
//! their ratio is cbtop's own overhead.

use super::session::{Prefill, Session};
use crate::brick::stats::{Series, Stats, TokenSample};
use crate::engine::EngineError;

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub warmup: usize,
    pub tokens: usize,
    /// Per-brick timing on the measured steps.
    pub profiled: bool,
    /// Interleave one unprofiled step after each measured step (for the overhead figure).
    pub measure_overhead: bool,
}

impl Plan {
    /// Decode steps the plan takes after the prompt (the first token comes from the prefill).
    pub fn steps(&self) -> usize {
        let per = if self.profiled && self.measure_overhead {
            2
        } else {
            1
        };
        self.warmup + per * self.tokens
    }
}

/// Everything a run measured.
pub struct RunResult {
    pub prefill: Prefill,
    /// The prompt evaluated once more brick by brick before the timed prefill (when the plan
    /// profiles): its spans, gaps and wall time.
    pub prefill_profile: Option<TokenSample>,
    pub stats: Stats,
    /// The measured steps, spans included (for traces and series).
    pub samples: Vec<TokenSample>,
    /// Step times of the interleaved unprofiled steps.
    pub unprofiled: Option<Series>,
    /// Stopped early (a signal): `samples` holds the measured steps, fewer than planned.
    pub interrupted: bool,
    /// Decode steps (warm-up, measured, unprofiled) whose logits held a NaN or an infinity
    /// (on CUDA counted on the device by the argmax kernels).
    pub nonfinite_steps: u64,
}

/// Measured steps per run of profiled steps before as many unprofiled ones
/// (`CBTOP_OVERHEAD_BLOCK`, default 1: they alternate). A measuring aid: with longer runs, a
/// cost that follows a profiled step lands on the profiled side instead of hiding among the
/// unprofiled ones (docs/measurements/profiler.md).
fn overhead_block() -> usize {
    std::env::var("CBTOP_OVERHEAD_BLOCK")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&k: &usize| k > 0)
        .unwrap_or(1)
}

/// Run `plan` on `session`; `progress(done, total)` after every step.
pub fn run(
    session: &mut Session,
    n_layers: usize,
    plan: Plan,
    mut progress: impl FnMut(usize, usize),
) -> Result<RunResult, EngineError> {
    run_until(session, n_layers, plan, |d, t, _| progress(d, t), || false)
}

/// `run`, stopping at the first step boundary where `stop()` is true (checked after the
/// prefill and after every step); the result then holds the steps measured so far.
/// `progress` also sees the statistics so far (for a metrics endpoint during the run).
pub fn run_until(
    session: &mut Session,
    n_layers: usize,
    plan: Plan,
    mut progress: impl FnMut(usize, usize, &Stats),
    stop: impl Fn() -> bool,
) -> Result<RunResult, EngineError> {
    let total = plan.steps();
    // With warm-up steps asked for, an untimed prompt runs first, so a process's first-touch
    // costs (buffers growing, pages faulting in) stay out of the profiled prompt's bricks, as
    // llama-bench's warm-up run keeps them out of its; the timed prompt runs warm either way.
    if plan.warmup > 0 {
        session.prefill()?;
    }
    let prefill_profile = if plan.profiled {
        Some(session.profile_prefill()?)
    } else {
        None
    };
    let prefill = session.prefill()?;
    let overhead = plan.profiled && plan.measure_overhead;
    // Every step in order (profiled or not), so each can tell the engine what the next one is
    // and the GPU can run it straight after.
    let mut schedule = vec![plan.profiled; plan.warmup];
    let block = overhead_block();
    let mut left = plan.tokens;
    while left > 0 {
        let k = block.min(left);
        schedule.extend(std::iter::repeat_n(plan.profiled, k));
        if overhead {
            schedule.extend(std::iter::repeat_n(false, k));
        }
        left -= k;
    }
    let measured_from = plan.warmup;
    let mut nonfinite_steps = 0u64;
    let mut stats = Stats::new(n_layers);
    let mut samples = Vec::with_capacity(plan.tokens);
    let mut unprofiled = overhead.then(|| Series::new(3));
    let mut interrupted = stop();
    let mut done = 0;
    for (i, &profiled) in schedule.iter().enumerate() {
        if interrupted {
            break;
        }
        let s = session.step_then(profiled, schedule.get(i + 1).copied())?;
        nonfinite_steps += u64::from(session.nonfinite_logits() > 0);
        done += 1;
        if i < measured_from {
            // The bricks' histograms are made here, not inside the first measured step.
            stats.prepare(&s);
        } else if profiled == plan.profiled {
            stats.add(&s);
            samples.push(s);
        } else if let Some(u) = unprofiled.as_mut() {
            u.record(s.total_ns);
        }
        progress(done, total, &stats);
        // Stop only where as many unprofiled steps as measured ones have run.
        let paired = !overhead
            || i < measured_from
            || (!profiled && schedule.get(i + 1).is_none_or(|&next| next));
        if paired {
            interrupted = stop();
        }
    }
    Ok(RunResult {
        prefill,
        prefill_profile,
        stats,
        samples,
        unprofiled,
        interrupted: interrupted && done < total,
        nonfinite_steps,
    })
}
