//! The level below a brick: each brick's kernels as a table (what ran, how it was launched,
//! its own time per token and share of the brick) and the last step's kernels in launch
//! order (the timeline). The report and the live view both read these.

use crate::brick::stats::Stats;
use crate::brick::{Brick, Catalogue, KernelInfo};

/// One kernel of a brick, over the measured steps.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRow {
    pub info: KernelInfo,
    /// Launches per step (every layer's).
    pub launches: u32,
    /// Run time per token, summed over its launches (None: the backend names kernels without
    /// timing them).
    pub mean_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Share of the brick's mean time.
    pub share_percent: Option<f64>,
    /// Device idle time before its launches, per token.
    pub gap_before_us: Option<f64>,
}

/// `brick`'s kernels in the order they first ran, from `stats` and the backend's catalogue
/// (an entry the catalogue lacks is left out).
pub fn rows(stats: &Stats, catalogue: &Catalogue, brick: Brick) -> Vec<KernelRow> {
    let brick_us = stats.brick(brick).map_or(0.0, |b| b.per_token.mean_us());
    stats
        .kernels_of(brick)
        .filter_map(|k| {
            let info = catalogue.get(k.kernel)?.clone();
            let timed = k.per_token.count() > 0;
            let mean = k.per_token.mean_us();
            Some(KernelRow {
                info,
                launches: k.launches,
                mean_us: timed.then_some(mean),
                p99_us: timed.then(|| k.per_token.quantile_us(0.99)),
                share_percent: (timed && brick_us > 0.0).then(|| 100.0 * mean / brick_us),
                gap_before_us: timed.then(|| k.gap_before_us()),
            })
        })
        .collect()
}

/// One kernel of the last measured step, placed on the step's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineRow {
    pub brick: Brick,
    pub layer: Option<u32>,
    pub name: String,
    /// Start after the step's first kernel started, and run time, microseconds.
    pub start_us: f64,
    pub dur_us: f64,
    /// Device idle time just before it.
    pub gap_before_us: f64,
}

/// The last measured step's timed kernels in launch order (empty where the backend does not
/// time kernels).
pub fn timeline(stats: &Stats, catalogue: &Catalogue) -> Vec<TimelineRow> {
    let timed: Vec<_> = stats
        .last_kernels
        .iter()
        .filter_map(|k| Some((k, k.timed?)))
        .collect();
    let Some(first) = timed.iter().map(|(_, t)| t.start_ns).min() else {
        return Vec::new();
    };
    timed
        .iter()
        .map(|(k, t)| TimelineRow {
            brick: k.brick,
            layer: k.layer,
            name: catalogue
                .get(k.kernel)
                .map_or_else(|| format!("kernel {}", k.kernel), |i| i.name.clone()),
            start_us: (t.start_ns - first) as f64 / 1e3,
            dur_us: t.dur_ns as f64 / 1e3,
            gap_before_us: t.gap_before_ns as f64 / 1e3,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brick::recorder::Span;
    use crate::brick::stats::TokenSample;
    use crate::brick::{BrickId, KernelSpan, KernelTime, Source};

    fn named(c: &mut Catalogue, name: &str) -> u32 {
        c.intern(KernelInfo {
            name: name.into(),
            reads: None,
            launch: None,
            resources: None,
        })
    }

    fn run(brick: BrickId, kernel: u32, start_ns: u64, dur_ns: u64) -> KernelSpan {
        KernelSpan {
            brick: brick.into(),
            layer: Some(0),
            kernel,
            timed: Some(KernelTime {
                start_ns,
                dur_ns,
                gap_before_ns: 500,
            }),
        }
    }

    /// A step whose qkv brick is exactly its two kernels, as the GPU clock folds them.
    fn step(quant_ns: u64, product_ns: u64, c: &mut Catalogue) -> TokenSample {
        let (q, p) = (named(c, "act_quant"), named(c, "mvf_q4_k"));
        TokenSample {
            total_ns: 50_000,
            spans: vec![Span {
                brick: BrickId::Qkv.into(),
                layer: Some(0),
                start_ns: 1_000,
                dur_ns: quant_ns + product_ns,
                source: Source::GpuGlobaltimer,
            }],
            kernels: vec![
                run(BrickId::Qkv, q, 1_000, quant_ns),
                run(BrickId::Qkv, p, 1_500 + quant_ns, product_ns),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_bricks_kernels_add_up_to_the_brick() {
        let mut c = Catalogue::default();
        let mut st = Stats::new(1);
        for (a, b) in [(2_000, 8_000), (3_000, 9_000), (1_000, 7_000)] {
            st.add(&step(a, b, &mut c));
        }
        let rows = rows(&st, &c, BrickId::Qkv.into());
        assert_eq!(rows.len(), 2);
        let sum: f64 = rows.iter().map(|r| r.mean_us.unwrap()).sum();
        let brick = st.brick(BrickId::Qkv.into()).unwrap().per_token.mean_us();
        assert!((sum - brick).abs() < 1e-9, "{sum} vs {brick}");
        let shares: f64 = rows.iter().map(|r| r.share_percent.unwrap()).sum();
        assert!((shares - 100.0).abs() < 1e-9);
        assert_eq!(rows[0].info.name, "act_quant");
        assert!((rows[1].mean_us.unwrap() - 8.0).abs() < 1e-9);
        assert!((rows[1].gap_before_us.unwrap() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn the_timeline_is_the_last_step_from_its_first_kernel() {
        let mut c = Catalogue::default();
        let mut st = Stats::new(1);
        st.add(&step(2_000, 8_000, &mut c));
        st.add(&step(1_000, 4_000, &mut c));
        let t = timeline(&st, &c);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].name.as_str(), t[0].start_us), ("act_quant", 0.0));
        assert_eq!((t[1].start_us, t[1].dur_us), (1.5, 4.0));
    }
}
