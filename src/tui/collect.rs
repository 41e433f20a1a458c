//! Turning the profiler's statistics and analysis into a `Snapshot`: the one place engine
//! types meet the view's plain data. Every time copied here is a measurement (its source kept);
//! rates and roofline figures are `derived` from those measurements and the cost model.

use std::collections::VecDeque;

use super::snapshot::{BatchRow, BrickView, KernelLine, Peaks, Throughput, TimelineLine};
use crate::brick::peaks::MeasuredPeaks;
use crate::brick::stats::{Series, Stats};
use crate::brick::Catalogue;
use crate::profiler::analysis::Analysis;
use crate::profiler::batch::BatchPoint;
use crate::profiler::kernels::{self, KernelRow, TimelineRow};

/// Histogram bins kept per distribution; views regroup them to the rows they have.
pub const HIST_BINS: usize = 32;
/// Recent tok/s values kept for the sparkline.
pub const SPARK_LEN: usize = 240;
/// Steps averaged for "tok/s now".
const NOW_WINDOW: usize = 8;

fn kernel_line(r: KernelRow) -> KernelLine {
    let launch = r.info.launch;
    let res = r.info.resources;
    KernelLine {
        name: r.info.name,
        reads: r.info.reads,
        launch: launch.map(|l| {
            let [x, y, z] = l.grid;
            format!("grid {x},{y},{z} block {}", l.block)
        }),
        registers: res.map(|r| r.registers_per_thread),
        shared_bytes: res
            .map(|r| r.static_shared_bytes + launch.map_or(0, |l| l.dynamic_shared_bytes)),
        occupancy_pct: res.map(|r| r.occupancy_percent),
        launches: r.launches,
        mean_us: r.mean_us,
        p99_us: r.p99_us,
        share_pct: r.share_percent,
        gap_before_us: r.gap_before_us,
    }
}

/// The last measured step's kernels for the timeline view.
pub fn timeline(stats: &Stats, catalogue: &Catalogue) -> Vec<TimelineLine> {
    kernels::timeline(stats, catalogue)
        .into_iter()
        .map(|r: TimelineRow| TimelineLine {
            brick: match r.layer {
                Some(l) => format!("{}[{l}]", r.brick),
                None => r.brick.to_string(),
            },
            name: r.name,
            start_us: r.start_us,
            dur_us: r.dur_us,
            gap_before_us: r.gap_before_us,
        })
        .collect()
}

/// One row per analysed brick, with its histogram and the kernels `catalogue` names.
pub fn bricks(stats: &Stats, analysis: &Analysis, catalogue: &Catalogue) -> Vec<BrickView> {
    analysis
        .rows
        .iter()
        .map(|r| BrickView {
            id: r.id.clone(),
            source: r.source.name().to_string(),
            count: r.count,
            mean_us: r.mean_us,
            p50_us: r.p50_us,
            p90_us: r.p90_us,
            p99_us: r.p99_us,
            p999_us: r.p999_us,
            max_us: r.max_us,
            cv_pct: r.cv_percent,
            share_pct: r.share_percent,
            budget_us: r.budget_us,
            budget_source: r.budget_source.name().to_string(),
            gap_factor: r.gap_factor,
            bytes_read: r.cost.bytes_read,
            bytes_written: r.cost.bytes_written,
            flops: r.cost.flops,
            intensity: r.cost.intensity(),
            gbps: r.gbps,
            gflops: r.gflops,
            roof_gbps: r.roof_gbps,
            roofline_us: r.roofline_us,
            efficiency: r.efficiency,
            score: r.score,
            grade: r.grade.to_string(),
            per_layer_us: r.per_layer_us.clone(),
            hist: stats
                .brick(r.brick)
                .map(|b| b.per_token.bins(HIST_BINS))
                .unwrap_or_default(),
            kernels: kernels::rows(stats, catalogue, r.brick)
                .into_iter()
                .map(kernel_line)
                .collect(),
        })
        .collect()
}

fn tok_s(us: f64) -> f64 {
    if us > 0.0 {
        1e6 / us
    } else {
        0.0
    }
}

/// Throughput from the profiled step times (`token`, `recent`) and, when measured, the
/// interleaved unprofiled steps (for the overhead).
pub fn throughput(
    token: &Series,
    recent_us: &VecDeque<f64>,
    unprofiled: &Series,
    ttft_ms: Option<f64>,
    prefill_tok_s: Option<f64>,
) -> Throughput {
    let n = recent_us.len();
    let now: Vec<f64> = recent_us
        .iter()
        .skip(n.saturating_sub(NOW_WINDOW))
        .copied()
        .collect();
    let now_mean = if now.is_empty() {
        0.0
    } else {
        now.iter().sum::<f64>() / now.len() as f64
    };
    let overhead_pct =
        (unprofiled.count() >= 2 && token.count() >= 2 && unprofiled.mean_us() > 0.0)
            .then(|| 100.0 * (token.mean_us() / unprofiled.mean_us() - 1.0));
    Throughput {
        tok_s_now: tok_s(now_mean),
        tok_s_avg: tok_s(token.mean_us()),
        recent_tok_s: recent_us
            .iter()
            .skip(n.saturating_sub(SPARK_LEN))
            .map(|&us| tok_s(us))
            .collect(),
        p50_ms: token.quantile_us(0.5) / 1e3,
        p99_ms: token.quantile_us(0.99) / 1e3,
        ttft_ms,
        prefill_tok_s,
        overhead_pct,
        tokens: token.count(),
        hist: token.bins(HIST_BINS),
    }
}

/// The roofline's peaks, with the GPU's bandwidth figures beside them: the measured
/// device-to-device copy (when that is the roofline's peak) and NVML's theoretical one.
pub fn peaks(p: &MeasuredPeaks, nvml_bus_gbps: Option<f64>) -> Peaks {
    Peaks {
        bandwidth_gbps: p.bandwidth.value,
        bandwidth_source: p.bandwidth.source.to_string(),
        compute_gflops: p.compute.value,
        compute_source: p.compute.source.to_string(),
        d2d_copy_gbps: (p.bandwidth.source == "d2d_copy").then_some(p.bandwidth.value),
        nvml_bus_gbps,
        cache_gbps: p.cache_bandwidth.as_ref().map(|c| c.value),
    }
}

/// One batch size's row of the sweep panel.
pub fn batch_row(p: &BatchPoint) -> BatchRow {
    BatchRow {
        n: p.n,
        tok_s: p.tokens_per_sec,
        tok_s_each: p.per_sequence_tokens_per_sec,
        step_us: p.step_us,
        shares: p
            .bricks
            .iter()
            .map(|b| (b.id.clone(), b.share_percent))
            .collect(),
    }
}

/// The tail of `text` of at most `max` characters, cut at a character boundary.
pub fn tail(text: &str, max: usize) -> String {
    let n = text.chars().count();
    text.chars().skip(n.saturating_sub(max)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_from_series() {
        let mut token = Series::new(3);
        let mut recent = VecDeque::new();
        for us in [10_000.0, 10_000.0, 20_000.0] {
            token.record((us * 1e3) as u64);
            recent.push_back(us);
        }
        let mut unprof = Series::new(3);
        for _ in 0..2 {
            unprof.record(10_000_000);
        }
        let t = throughput(&token, &recent, &unprof, Some(5.0), None);
        // mean 13333 µs → 75 tok/s; profiled 13.33 ms vs unprofiled 10 ms → 33% overhead
        assert!((t.tok_s_avg - 75.0).abs() < 1e-6);
        assert!((t.overhead_pct.unwrap() - 100.0 / 3.0).abs() < 1e-6);
        assert_eq!(t.recent_tok_s, vec![100.0, 100.0, 50.0]);
        assert_eq!(t.tokens, 3);
        let none = throughput(&token, &recent, &Series::new(3), None, None);
        assert_eq!(none.overhead_pct, None);
    }

    #[test]
    fn tail_cuts_on_chars() {
        assert_eq!(tail("héllo", 3), "llo");
        assert_eq!(tail("hé", 5), "hé");
    }
}
