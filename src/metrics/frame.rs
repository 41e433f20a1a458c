//! One picture of a run for the metrics export: labels, per-brick latency histograms (the
//! profiler's hdrhistogram read out as cumulative buckets), headline throughput, and the
//! latest NVML reading. Plain data, so the headless run, the live view and the tests all fill
//! the same thing and `openmetrics` has one input.

use crate::brick::stats::{Series, Stats};
use crate::report::Report;
use crate::telemetry::GpuSample;

/// Upper bounds of the latency buckets, nanoseconds: 1-2-5 steps from 1 µs to 10 s, which
/// covers a GPU norm kernel and a CPU output head of a large model alike.
pub const BUCKETS_NS: [u64; 22] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// The labels every family carries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labels {
    pub model: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// `fast` or `exact`.
    pub numerics: String,
}

/// A latency distribution as cumulative buckets, seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// (upper bound in seconds, observations at or below it), bounds increasing; the
    /// `+Inf` bucket is `count`.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Histogram {
    /// The series' counts at each of `BUCKETS_NS` (one pass over the hdrhistogram, so a
    /// scrape or a run in progress pays little for it).
    pub fn from_series(s: &Series) -> Histogram {
        let counts = s.cumulative_at(&BUCKETS_NS);
        Histogram {
            buckets: BUCKETS_NS
                .iter()
                .zip(counts)
                .map(|(&ns, n)| (ns as f64 / 1e9, n))
                .collect(),
            count: s.count(),
            sum_seconds: s.sum_ns() / 1e9,
        }
    }
}

/// One brick: its per-token latency (summed over layers) and, where the run judged it, its
/// budget, roofline time, achieved bandwidth and score.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BrickFrame {
    pub id: String,
    pub latency: Histogram,
    pub budget_seconds: Option<f64>,
    pub roofline_seconds: Option<f64>,
    pub bytes_per_second: Option<f64>,
    pub score: Option<f64>,
}

impl BrickFrame {
    /// The brick's judged figures, in the units they are shown in (µs, GB/s).
    pub fn judged(&mut self, budget_us: f64, roofline_us: f64, gbps: f64, score: f64) {
        self.budget_seconds = Some(budget_us / 1e6);
        self.roofline_seconds = Some(roofline_us / 1e6);
        self.bytes_per_second = Some(gbps * 1e9);
        self.score = Some(score);
    }
}

/// The `--batch` sweep: one batch size's aggregate and per-sequence throughput.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchFrame {
    pub n: usize,
    pub tokens_per_second: f64,
    pub per_sequence_tokens_per_second: f64,
}

/// Everything one scrape shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    pub labels: Labels,
    pub bricks: Vec<BrickFrame>,
    /// The whole decode step.
    pub token: Histogram,
    /// Mean decode tokens per second over the measured steps.
    pub tokens_per_second: Option<f64>,
    pub ttft_seconds: Option<f64>,
    pub prefill_tokens_per_second: Option<f64>,
    /// Mean time per token outside every brick: GPU idle between kernels (where measured) and
    /// the rest.
    pub gaps_seconds: Option<f64>,
    pub other_seconds: Option<f64>,
    /// Profiled over unprofiled step time, minus one (a ratio, not percent).
    pub overhead_ratio: Option<f64>,
    /// The model score, 0..100.
    pub score: Option<f64>,
    pub batch: Vec<BatchFrame>,
    /// The latest NVML reading of the GPU the engine runs on.
    pub gpu: Option<GpuSample>,
}

impl Frame {
    /// What the profiler's statistics say by themselves (the live view and a run in
    /// progress): histograms, mean tok/s from the mean step time, gaps and other.
    pub fn from_stats(labels: Labels, stats: &Stats) -> Frame {
        let token_us = stats.token.mean_us();
        Frame {
            labels,
            bricks: stats
                .bricks
                .iter()
                .map(|b| BrickFrame {
                    id: b.brick.to_string(),
                    latency: Histogram::from_series(&b.per_token),
                    ..BrickFrame::default()
                })
                .collect(),
            token: Histogram::from_series(&stats.token),
            tokens_per_second: (token_us > 0.0).then(|| 1e6 / token_us),
            gaps_seconds: (stats.gaps.count() > 0).then(|| stats.gaps.mean_us() / 1e6),
            other_seconds: (stats.other.count() > 0).then(|| stats.other.mean_us() / 1e6),
            ..Frame::default()
        }
    }

    /// A finished run: the statistics' histograms, with the report's judged figures
    /// (throughput over wall time, TTFT, overhead, budgets, roofline, scores, the sweep).
    pub fn from_report(labels: Labels, stats: &Stats, r: &Report) -> Frame {
        let mut f = Frame::from_stats(labels, stats);
        let t = &r.throughput;
        f.tokens_per_second = Some(t.tokens_per_sec);
        f.ttft_seconds = Some(t.ttft_ms / 1e3);
        f.prefill_tokens_per_second = Some(t.prefill_tokens_per_sec);
        f.overhead_ratio = t.overhead_percent.map(|p| p / 100.0);
        f.gaps_seconds = r.gaps_us.map(|us| us / 1e6);
        f.other_seconds = Some(r.other_us / 1e6);
        f.score = Some(r.score);
        for b in &mut f.bricks {
            if let Some(x) = r.bricks.iter().find(|x| x.id == b.id) {
                b.judged(x.budget_us, x.roofline_us, x.gbps, x.score);
            }
        }
        f.batch = r
            .batch
            .iter()
            .flatten()
            .map(|p| BatchFrame {
                n: p.n,
                tokens_per_second: p.tokens_per_sec,
                per_sequence_tokens_per_second: p.per_sequence_tokens_per_sec,
            })
            .collect();
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_end_at_the_count() {
        let mut s = Series::new(3);
        for ns in [1_500u64, 3_000, 3_000, 40_000, 9_000_000, 70_000_000_000] {
            s.record(ns);
        }
        let h = Histogram::from_series(&s);
        assert_eq!(h.count, 6);
        let at = |le: f64| h.buckets.iter().find(|b| b.0 == le).unwrap().1;
        assert_eq!(at(1e-6), 0);
        assert_eq!(at(2e-6), 1);
        assert_eq!(at(5e-6), 3);
        assert_eq!(at(50e-6), 4);
        assert_eq!(at(10e-3), 5);
        // The value over the histogram's range counts only in +Inf (the count).
        assert_eq!(h.buckets.last().unwrap().1, 5);
        assert!(h
            .buckets
            .windows(2)
            .all(|w| w[0].1 <= w[1].1 && w[0].0 < w[1].0));
        assert!((h.sum_seconds - 70.009_047_5).abs() < 1e-9);
    }
}
