//! The seam between a backend and the profiler: a backend hands each timed brick to a
//! `Recorder` as a finished `Span` labelled with its source. The CPU backend times with the
//! host clock; a GPU backend pushes spans resolved from event pairs at the end of the token.
//! Nothing above this seam knows how a span was timed beyond `source`.
//!
//! With profiling off `time` is one predictable branch around the work, so the unprofiled
//! decode pays (almost) nothing.

use std::time::Instant;

use super::id::Brick;
use super::kernel::KernelSpan;
use super::source::Source;
use super::test_delay;

/// One timed execution of a brick in one layer of one token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub brick: Brick,
    /// Layer index for per-layer bricks.
    pub layer: Option<u32>,
    /// Start, nanoseconds since the recorder's origin.
    pub start_ns: u64,
    pub dur_ns: u64,
    pub source: Source,
}

/// Collects the spans of one step (a token, or the prompt).
pub struct Recorder {
    enabled: bool,
    origin: Instant,
    spans: Vec<Span>,
    /// The kernels of the step's bricks, where the backend names them.
    kernels: Vec<KernelSpan>,
    /// GPU idle time between the step's kernels, where the backend measures it.
    gaps_ns: Option<u64>,
}

impl Recorder {
    /// A recorder measuring from `origin` (shared by a whole run so spans line up on a trace).
    pub fn new(enabled: bool, origin: Instant) -> Recorder {
        Recorder {
            enabled,
            origin,
            spans: Vec::with_capacity(512),
            kernels: Vec::new(),
            gaps_ns: None,
        }
    }

    /// A recorder that records nothing.
    pub fn off() -> Recorder {
        Recorder::new(false, Instant::now())
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Nanoseconds from the origin to `t`.
    pub fn since_origin(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// Run `work` and, when enabled, record it as a `cpu_timer` span of `brick`.
    #[inline(always)]
    pub fn time<R>(
        &mut self,
        brick: impl Into<Brick>,
        layer: Option<usize>,
        work: impl FnOnce() -> R,
    ) -> R {
        let brick = brick.into();
        if !self.enabled {
            let r = work();
            test_delay::after(brick);
            return r;
        }
        let t0 = Instant::now();
        let r = work();
        test_delay::after(brick);
        let t1 = Instant::now();
        self.spans.push(Span {
            brick,
            layer: layer.map(|l| l as u32),
            start_ns: self.since_origin(t0),
            dur_ns: t1.saturating_duration_since(t0).as_nanos() as u64,
            source: Source::CpuTimer,
        });
        r
    }

    /// Add a span timed elsewhere (e.g. from GPU events).
    pub fn push(&mut self, span: Span) {
        if self.enabled {
            self.spans.push(span);
        }
    }

    /// Add a kernel the backend ran for a brick.
    pub fn push_kernel(&mut self, k: KernelSpan) {
        if self.enabled {
            self.kernels.push(k);
        }
    }

    /// Hand over this step's kernels (room kept as `take` does).
    pub fn take_kernels(&mut self) -> Vec<KernelSpan> {
        let room = self.kernels.capacity();
        std::mem::replace(&mut self.kernels, Vec::with_capacity(room))
    }

    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// Add idle time between kernels (measured on the GPU, outside every brick).
    pub fn add_gaps(&mut self, ns: u64) {
        if self.enabled {
            *self.gaps_ns.get_or_insert(0) += ns;
        }
    }

    /// Hand over this step's spans and start the next step empty, with room for as many (one
    /// allocation per step instead of a growing vector's dozen: a GPU step hands over a few
    /// hundred spans between two tokens).
    pub fn take(&mut self) -> Vec<Span> {
        let room = self.spans.capacity();
        std::mem::replace(&mut self.spans, Vec::with_capacity(room))
    }

    /// Hand over this step's gaps (None: the backend does not measure them).
    pub fn take_gaps(&mut self) -> Option<u64> {
        self.gaps_ns.take()
    }

    pub fn clear(&mut self) {
        self.spans.clear();
        self.kernels.clear();
        self.gaps_ns = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brick::BrickId;

    #[test]
    fn records_only_when_enabled() {
        let mut r = Recorder::off();
        assert_eq!(r.time(BrickId::Qkv, Some(3), || 7), 7);
        assert!(r.spans().is_empty());
        r.set_enabled(true);
        r.time(BrickId::Qkv, Some(3), || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        let s = r.take();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].layer, Some(3));
        assert!(s[0].dur_ns >= 2_000_000);
        assert_eq!(s[0].source, Source::CpuTimer);
        assert!(r.spans().is_empty());
    }
}
