//! A measured run: prefill, warm-up steps (discarded), then the measured steps. When asked,
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
    pub stats: Stats,
    /// The measured steps, spans included (for traces and series).
    pub samples: Vec<TokenSample>,
    /// Step times of the interleaved unprofiled steps.
    pub unprofiled: Option<Series>,
}

/// Run `plan` on `session`; `progress(done, total)` after every step.
pub fn run(
    session: &mut Session,
    n_layers: usize,
    plan: Plan,
    mut progress: impl FnMut(usize, usize),
) -> Result<RunResult, EngineError> {
    let total = plan.steps();
    let prefill = session.prefill()?;
    let mut done = 0;
    for _ in 0..plan.warmup {
        session.step(plan.profiled)?;
        done += 1;
        progress(done, total);
    }
    let mut stats = Stats::new(n_layers);
    let mut samples = Vec::with_capacity(plan.tokens);
    let overhead = plan.profiled && plan.measure_overhead;
    let mut unprofiled = overhead.then(|| Series::new(3));
    for _ in 0..plan.tokens {
        let s = session.step(plan.profiled)?;
        stats.add(&s);
        samples.push(s);
        done += 1;
        progress(done, total);
        if let Some(u) = unprofiled.as_mut() {
            u.record(session.step(false)?.total_ns);
            done += 1;
            progress(done, total);
        }
    }
    Ok(RunResult {
        prefill,
        stats,
        samples,
        unprofiled,
    })
}
