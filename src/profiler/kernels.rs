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
    /// Run time per token, summed over its launches, over every step the brick was measured
    /// in (a step that took another kernel counts zero: a brick whose kernel changes with the
    /// context, such as attention, adds up; None: the backend names kernels without timing
    /// them).
    pub mean_us: Option<f64>,
    /// The 99th percentile over the steps that ran it.
    pub p99_us: Option<f64>,
    /// Share of the brick's mean time.
    pub share_percent: Option<f64>,
    /// Device idle time before its launches, per token (as `mean_us`).
    pub gap_before_us: Option<f64>,
    /// Steps that ran it, of the brick's measured steps.
    pub steps: u64,
}

/// `brick`'s kernels in the order they first ran, from `stats` and the backend's catalogue
/// (an entry the catalogue lacks is left out).
pub fn rows(stats: &Stats, catalogue: &Catalogue, brick: Brick) -> Vec<KernelRow> {
    let (brick_us, brick_steps) = stats
        .brick(brick)
        .map_or((0.0, 0), |b| (b.per_token.mean_us(), b.per_token.count()));
    let per_step = |total: f64| total / brick_steps.max(1) as f64;
    stats
        .kernels_of(brick)
        .filter_map(|k| {
            let info = catalogue.get(k.kernel)?.clone();
            let timed = k.per_token.count() > 0;
            let mean = per_step(k.total_us());
            Some(KernelRow {
                info,
                launches: k.launches,
                mean_us: timed.then_some(mean),
                p99_us: timed.then(|| k.per_token.quantile_us(0.99)),
                share_percent: (timed && brick_us > 0.0).then(|| 100.0 * mean / brick_us),
                gap_before_us: timed.then(|| per_step(k.gap_before_total_us())),
                steps: k.steps(),
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

    /// A brick whose kernel changes between steps (attention past a context length): each
    /// kernel's time per token counts the steps it did not run as zero, so they still add up.
    #[test]
    fn kernels_that_take_turns_still_add_up_to_the_brick() {
        let mut c = Catalogue::default();
        let (short, long) = (
            named(&mut c, "attention_split"),
            named(&mut c, "attention_group_mma"),
        );
        let mut st = Stats::new(1);
        for (kernel, ns) in [(short, 4_000), (short, 6_000), (long, 20_000)] {
            st.add(&TokenSample {
                total_ns: 50_000,
                spans: vec![Span {
                    brick: BrickId::Attention.into(),
                    layer: Some(0),
                    start_ns: 0,
                    dur_ns: ns,
                    source: Source::GpuGlobaltimer,
                }],
                kernels: vec![run(BrickId::Attention, kernel, 0, ns)],
                ..Default::default()
            });
        }
        let rows = rows(&st, &c, BrickId::Attention.into());
        let means: Vec<f64> = rows.iter().map(|r| r.mean_us.unwrap()).collect();
        assert!((means[0] - 10.0 / 3.0).abs() < 1e-9 && (means[1] - 20.0 / 3.0).abs() < 1e-9);
        let brick = st
            .brick(BrickId::Attention.into())
            .unwrap()
            .per_token
            .mean_us();
        assert!((means.iter().sum::<f64>() - brick).abs() < 1e-9);
        assert_eq!((rows[0].steps, rows[1].steps), (2, 1));
        // The percentile is over the steps that ran it.
        assert!((rows[1].p99_us.unwrap() - 20.0).abs() < 0.5);
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
