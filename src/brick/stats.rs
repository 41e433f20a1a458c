//! Statistics over measured decode steps: per brick (time per token, summed over layers), per
//! brick and layer, per token, and `other` (token time no brick covers). Percentiles come from
//! hdrhistogram; mean and CV from exact running sums (the histogram's buckets would round them).

use std::collections::{HashMap, VecDeque};

use hdrhistogram::Histogram;

use super::id::Brick;
use super::kernel::KernelSpan;
use super::recorder::Span;
use super::source::Source;

/// Longest value a histogram holds: one minute, in nanoseconds.
const MAX_NS: u64 = 60_000_000_000;
/// Recent per-token values kept for sparklines, correlation and export.
pub const RECENT: usize = 4096;

/// A distribution of durations in nanoseconds.
#[derive(Clone, Debug)]
pub struct Series {
    hist: Histogram<u64>,
    n: u64,
    sum: f64,
    sumsq: f64,
    max: u64,
}

impl Series {
    /// `sigfig` significant digits in the percentiles (2 or 3).
    pub fn new(sigfig: u8) -> Series {
        Series {
            hist: Histogram::new_with_bounds(1, MAX_NS, sigfig).expect("valid histogram bounds"),
            n: 0,
            sum: 0.0,
            sumsq: 0.0,
            max: 0,
        }
    }

    pub fn record(&mut self, ns: u64) {
        let v = ns.clamp(1, MAX_NS);
        self.hist.saturating_record(v);
        self.n += 1;
        let f = ns as f64;
        self.sum += f;
        self.sumsq += f * f;
        self.max = self.max.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean_us(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64 / 1e3
        }
    }

    /// Population standard deviation, microseconds.
    pub fn std_us(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let m = self.sum / self.n as f64;
        ((self.sumsq / self.n as f64 - m * m).max(0.0)).sqrt() / 1e3
    }

    /// Coefficient of variation in percent (0 for an empty or zero series).
    pub fn cv_percent(&self) -> f64 {
        let m = self.mean_us();
        if m > 0.0 {
            100.0 * self.std_us() / m
        } else {
            0.0
        }
    }

    /// The `q` quantile (0..=1), microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.hist.value_at_quantile(q) as f64 / 1e3
        }
    }

    pub fn max_us(&self) -> f64 {
        self.max as f64 / 1e3
    }

    /// Sum of the recorded values, nanoseconds (exact, not from the buckets).
    pub fn sum_ns(&self) -> f64 {
        self.sum
    }

    /// Recorded values at or below each of `bounds_ns` (increasing), from the histogram in one
    /// pass over its recorded values: cumulative counts, as a Prometheus histogram's buckets. A
    /// value counts by its bucket's highest equivalent value, so an edge is as precise as the
    /// histogram's significant figures; values above the last bound are in no entry.
    pub fn cumulative_at(&self, bounds_ns: &[u64]) -> Vec<u64> {
        let mut per = vec![0u64; bounds_ns.len()];
        for v in self.hist.iter_recorded() {
            let i = bounds_ns.partition_point(|&b| b < v.value_iterated_to());
            if let Some(c) = per.get_mut(i) {
                *c += v.count_at_value();
            }
        }
        let mut total = 0;
        for c in &mut per {
            total += *c;
            *c = total;
        }
        per
    }

    /// Histogram buckets for display: (upper bound µs, count) over `n` equal-width bins
    /// between the minimum and maximum recorded values.
    pub fn bins(&self, n: usize) -> Vec<(f64, u64)> {
        if self.n == 0 || n == 0 {
            return Vec::new();
        }
        let (lo, hi) = (self.hist.min(), self.hist.max().max(self.hist.min() + 1));
        let step = ((hi - lo) as f64 / n as f64).max(1.0);
        let mut out: Vec<(f64, u64)> = (0..n)
            .map(|i| ((lo as f64 + step * (i + 1) as f64) / 1e3, 0))
            .collect();
        for v in self.hist.iter_recorded() {
            let i = (((v.value_iterated_to() - lo) as f64 / step) as usize).min(n - 1);
            out[i].1 += v.count_at_value();
        }
        out
    }
}

/// Measurements of one brick.
#[derive(Clone, Debug)]
pub struct BrickStats {
    pub brick: Brick,
    pub source: Source,
    /// Time per token, summed over layers.
    pub per_token: Series,
    /// Per layer (empty for bricks outside the layers).
    pub per_layer: Vec<Series>,
    /// Recent per-token times, microseconds (oldest first).
    pub recent_us: VecDeque<f64>,
}

impl BrickStats {
    /// Empty statistics of `brick`, with a series per layer when it runs in every layer.
    fn new(brick: Brick, source: Source, n_layers: usize) -> BrickStats {
        let layers = if brick.per_layer() { n_layers } else { 0 };
        BrickStats {
            brick,
            source,
            per_token: Series::new(3),
            per_layer: (0..layers).map(|_| Series::new(2)).collect(),
            recent_us: VecDeque::new(),
        }
    }
}

/// One measured decode step: its wall time and the spans inside it.
#[derive(Clone, Debug, Default)]
pub struct TokenSample {
    /// Step start, nanoseconds since the run's origin.
    pub start_ns: u64,
    /// Wall time of the whole step (forward + sampling), nanoseconds.
    pub total_ns: u64,
    /// Position of the token in the context.
    pub position: usize,
    pub spans: Vec<Span>,
    /// GPU idle time between the step's kernels, outside every span (None: not measured).
    pub gaps_ns: Option<u64>,
    /// The kernels that ran for the bricks, where the backend names them.
    pub kernels: Vec<KernelSpan>,
}

/// Measurements of one kernel (a catalogue entry) inside one brick.
#[derive(Clone, Debug)]
pub struct KernelStats {
    pub brick: Brick,
    /// Index in the backend's kernel catalogue.
    pub kernel: u32,
    /// Its run time per step, summed over its launches (every layer); empty where the
    /// backend does not time kernels.
    pub per_token: Series,
    /// Launches per step (in the last step that ran it).
    pub launches: u32,
    /// Steps that ran it, and the device idle time before its launches over them.
    steps: u64,
    gap_before_ns: u64,
}

impl KernelStats {
    fn new(brick: Brick, kernel: u32) -> KernelStats {
        KernelStats {
            brick,
            kernel,
            per_token: Series::new(2),
            launches: 0,
            steps: 0,
            gap_before_ns: 0,
        }
    }

    /// Steps that ran it.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Its run time over all the steps that ran it, microseconds.
    pub fn total_us(&self) -> f64 {
        self.per_token.mean_us() * self.per_token.count() as f64
    }

    /// Device idle time before its launches over all the steps that ran it, microseconds.
    pub fn gap_before_total_us(&self) -> f64 {
        self.gap_before_ns as f64 / 1e3
    }
}

/// All statistics of a run.
#[derive(Clone, Debug)]
pub struct Stats {
    n_layers: usize,
    pub bricks: Vec<BrickStats>,
    /// Whole decode step.
    pub token: Series,
    /// GPU idle time between kernels, per step (empty where the backend does not measure it).
    pub gaps: Series,
    /// Step time no brick (and no gap) covers.
    pub other: Series,
    pub recent_token_us: VecDeque<f64>,
    /// Sum of the measured tokens' positions (for the cost model's mean context length).
    position_sum: u64,
    /// Bricks made ready by `prepare`, not yet recorded.
    spare: Vec<BrickStats>,
    /// Per kernel of each brick, in the order they first ran.
    pub kernels: Vec<KernelStats>,
    /// Where each (brick, kernel) is in `kernels`.
    kernel_at: HashMap<(Brick, u32), usize>,
    /// One step's run time, launches, idle time before and whether timed, per entry of
    /// `kernels` (kept between steps).
    kernel_step: Vec<(u64, u32, u64, bool)>,
    /// The last measured step's kernels, in launch order (the kernel timeline).
    pub last_kernels: Vec<KernelSpan>,
}

impl Stats {
    pub fn new(n_layers: usize) -> Stats {
        Stats {
            n_layers,
            bricks: Vec::new(),
            token: Series::new(3),
            gaps: Series::new(3),
            other: Series::new(3),
            recent_token_us: VecDeque::new(),
            position_sum: 0,
            spare: Vec::new(),
            kernels: Vec::new(),
            kernel_at: HashMap::new(),
            kernel_step: Vec::new(),
            last_kernels: Vec::new(),
        }
    }

    pub fn tokens(&self) -> u64 {
        self.token.count()
    }

    /// Mean position of the measured tokens.
    pub fn mean_position(&self) -> f64 {
        if self.tokens() == 0 {
            0.0
        } else {
            self.position_sum as f64 / self.tokens() as f64
        }
    }

    /// Make room for the bricks of a step like `t` (a warm-up step) without recording it: a
    /// brick's histograms (per token, and per layer) are ~10 MB for a 30-layer model (counted
    /// from their bounds and significant figures), and allocating them inside the first
    /// measured step stalls the host long enough for the GPU to run out of launched work
    /// (docs/measurements/profiler.md). They wait in `spare` until the brick is first
    /// recorded, so a brick shows in `bricks` only once it has a measurement.
    pub fn prepare(&mut self, t: &TokenSample) {
        for s in &t.spans {
            let known = |b: &BrickStats| b.brick == s.brick;
            if self.bricks.iter().any(known) || self.spare.iter().any(known) {
                continue;
            }
            self.spare
                .push(BrickStats::new(s.brick, s.source, self.n_layers));
        }
        for k in &t.kernels {
            self.kernel_entry(k.brick, k.kernel);
        }
    }

    /// Add one measured step.
    pub fn add(&mut self, t: &TokenSample) {
        let mut per_brick: Vec<(Brick, Source, u64, Vec<u64>)> = Vec::new();
        let mut covered = 0u64;
        for s in &t.spans {
            covered += s.dur_ns;
            let i = match per_brick.iter().position(|(b, ..)| *b == s.brick) {
                Some(i) => i,
                None => {
                    per_brick.push((s.brick, s.source, 0, vec![0; self.n_layers]));
                    per_brick.len() - 1
                }
            };
            let e = &mut per_brick[i];
            e.2 += s.dur_ns;
            if let Some(l) = s.layer.map(|l| l as usize).filter(|&l| l < self.n_layers) {
                e.3[l] += s.dur_ns;
            }
        }
        for (brick, source, total, layers) in per_brick {
            let bs = self.brick_mut(brick, source);
            bs.per_token.record(total);
            push_recent(&mut bs.recent_us, total as f64 / 1e3);
            // Empty for a brick outside the layers (`BrickStats::new`).
            for (s, ns) in bs.per_layer.iter_mut().zip(layers) {
                s.record(ns);
            }
        }
        if let Some(g) = t.gaps_ns {
            self.gaps.record(g);
            covered += g;
        }
        self.add_kernels(&t.kernels);
        self.token.record(t.total_ns);
        self.other.record(t.total_ns.saturating_sub(covered));
        push_recent(&mut self.recent_token_us, t.total_ns as f64 / 1e3);
        self.position_sum += t.position as u64;
    }

    /// The index in `kernels` of `brick`'s `kernel` (added when new).
    fn kernel_entry(&mut self, brick: Brick, kernel: u32) -> usize {
        let kernels = &mut self.kernels;
        *self.kernel_at.entry((brick, kernel)).or_insert_with(|| {
            kernels.push(KernelStats::new(brick, kernel));
            kernels.len() - 1
        })
    }

    /// Fold a step's kernels: per (brick, kernel) the summed run time, launches and idle time
    /// before them.
    fn add_kernels(&mut self, kernels: &[KernelSpan]) {
        if kernels.is_empty() {
            return;
        }
        let mut step = std::mem::take(&mut self.kernel_step);
        step.clear();
        for k in kernels {
            let i = self.kernel_entry(k.brick, k.kernel);
            if step.len() <= i {
                step.resize(i + 1, (0, 0, 0, false));
            }
            let e = &mut step[i];
            e.1 += 1;
            if let Some(t) = k.timed {
                e.0 += t.dur_ns;
                e.2 += t.gap_before_ns;
                e.3 = true;
            }
        }
        for (ks, &(ns, launches, gap, timed)) in self.kernels.iter_mut().zip(&step) {
            if launches == 0 {
                continue;
            }
            ks.launches = launches;
            ks.steps += 1;
            if timed {
                ks.per_token.record(ns);
                ks.gap_before_ns += gap;
            }
        }
        self.kernel_step = step;
        self.last_kernels.clear();
        self.last_kernels.extend_from_slice(kernels);
    }

    /// The kernels measured inside `brick`, in the order they first ran.
    pub fn kernels_of(&self, brick: Brick) -> impl Iterator<Item = &KernelStats> {
        self.kernels.iter().filter(move |k| k.brick == brick)
    }

    fn brick_mut(&mut self, brick: Brick, source: Source) -> &mut BrickStats {
        let i = match self.bricks.iter().position(|b| b.brick == brick) {
            Some(i) => i,
            None => {
                let bs = match self.spare.iter().position(|b| b.brick == brick) {
                    Some(j) => self.spare.swap_remove(j),
                    None => BrickStats::new(brick, source, self.n_layers),
                };
                self.bricks.push(bs);
                self.bricks.sort_by_key(|b| b.brick.order());
                self.bricks
                    .iter()
                    .position(|b| b.brick == brick)
                    .unwrap_or(0)
            }
        };
        &mut self.bricks[i]
    }

    pub fn brick(&self, brick: Brick) -> Option<&BrickStats> {
        self.bricks.iter().find(|b| b.brick == brick)
    }
}

fn push_recent(q: &mut VecDeque<f64>, v: f64) {
    if q.len() == RECENT {
        q.pop_front();
    }
    q.push_back(v);
}

/// Pearson correlation of two equally long series (0 when either is constant).
pub fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    if n < 2 {
        return 0.0;
    }
    let (ma, mb) = (
        a[..n].iter().sum::<f64>() / n as f64,
        b[..n].iter().sum::<f64>() / n as f64,
    );
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (da, db) = (a[i] - ma, b[i] - mb);
        sab += da * db;
        saa += da * da;
        sbb += db * db;
    }
    if saa == 0.0 || sbb == 0.0 {
        0.0
    } else {
        sab / (saa * sbb).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brick::BrickId;

    fn span(b: BrickId, layer: Option<u32>, dur_ns: u64) -> Span {
        Span {
            brick: b.into(),
            layer,
            start_ns: 0,
            dur_ns,
            source: Source::CpuTimer,
        }
    }

    fn kernel(b: BrickId, layer: u32, kernel: u32, start_ns: u64, dur_ns: u64) -> KernelSpan {
        KernelSpan {
            brick: b.into(),
            layer: Some(layer),
            kernel,
            timed: Some(crate::brick::KernelTime {
                start_ns,
                dur_ns,
                gap_before_ns: 100,
            }),
        }
    }

    #[test]
    fn a_kernel_sums_its_launches_over_the_layers_of_a_step() {
        let mut st = Stats::new(2);
        // qkv: kernel 0 (act_quant) and kernel 1 (the product) in both layers; kernel 0 also
        // under ffn_gate_up, a separate entry.
        let kernels = vec![
            kernel(BrickId::Qkv, 0, 0, 0, 1_000),
            kernel(BrickId::Qkv, 0, 1, 1_100, 4_000),
            kernel(BrickId::FfnGateUp, 0, 0, 5_200, 1_000),
            kernel(BrickId::Qkv, 1, 0, 6_300, 2_000),
            kernel(BrickId::Qkv, 1, 1, 8_400, 6_000),
        ];
        for _ in 0..2 {
            st.add(&TokenSample {
                total_ns: 20_000,
                spans: vec![span(BrickId::Qkv, Some(0), 5_000)],
                kernels: kernels.clone(),
                ..Default::default()
            });
        }
        let qkv: Vec<&KernelStats> = st.kernels_of(BrickId::Qkv.into()).collect();
        assert_eq!(qkv.len(), 2);
        assert_eq!((qkv[0].kernel, qkv[0].launches), (0, 2));
        assert!((qkv[0].per_token.mean_us() - 3.0).abs() < 1e-9);
        assert!((qkv[1].per_token.mean_us() - 10.0).abs() < 1e-9);
        assert!((qkv[1].gap_before_total_us() - 0.4).abs() < 1e-9);
        assert!((qkv[1].total_us() - 20.0).abs() < 1e-9);
        assert_eq!(qkv[1].steps(), 2);
        assert_eq!(qkv[1].per_token.count(), 2);
        let gate: Vec<&KernelStats> = st.kernels_of(BrickId::FfnGateUp.into()).collect();
        assert_eq!((gate.len(), gate[0].launches), (1, 1));
        assert_eq!(st.last_kernels, kernels);
    }

    #[test]
    fn an_untimed_kernel_counts_launches_without_times() {
        let mut st = Stats::new(1);
        st.add(&TokenSample {
            total_ns: 1_000,
            kernels: vec![KernelSpan {
                brick: BrickId::LmHead.into(),
                layer: None,
                kernel: 3,
                timed: None,
            }],
            ..Default::default()
        });
        let k = st.kernels_of(BrickId::LmHead.into()).next().unwrap();
        assert_eq!((k.kernel, k.launches, k.per_token.count()), (3, 1, 0));
    }

    #[test]
    fn series_mean_cv_quantiles() {
        let mut s = Series::new(3);
        for v in [1000u64, 2000, 3000, 4000] {
            s.record(v);
        }
        assert!((s.mean_us() - 2.5).abs() < 1e-12);
        // population std of 1,2,3,4 is sqrt(1.25)
        assert!((s.cv_percent() - 100.0 * 1.25f64.sqrt() / 2.5).abs() < 1e-9);
        assert!((s.quantile_us(0.5) - 2.0).abs() < 0.01);
        assert!((s.max_us() - 4.0).abs() < 1e-12);
        let bins = s.bins(3);
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), 4);
    }

    #[test]
    fn stats_sum_layers_and_count_other() {
        let mut st = Stats::new(2);
        st.add(&TokenSample {
            start_ns: 0,
            total_ns: 10_000,
            position: 5,
            spans: vec![
                span(BrickId::Qkv, Some(0), 1000),
                span(BrickId::Qkv, Some(1), 3000),
                span(BrickId::LmHead, None, 4000),
            ],
            gaps_ns: None,
            kernels: Vec::new(),
        });
        let qkv = st.brick(BrickId::Qkv.into()).unwrap();
        assert!((qkv.per_token.mean_us() - 4.0).abs() < 1e-12);
        assert!((qkv.per_layer[0].mean_us() - 1.0).abs() < 1e-12);
        assert!((qkv.per_layer[1].mean_us() - 3.0).abs() < 1e-12);
        assert!(st
            .brick(BrickId::LmHead.into())
            .unwrap()
            .per_layer
            .is_empty());
        assert!((st.other.mean_us() - 2.0).abs() < 1e-12);
        assert_eq!(st.bricks[0].brick, BrickId::Qkv.into());
        assert_eq!(st.mean_position(), 5.0);
    }

    #[test]
    fn prepared_bricks_stay_out_until_recorded_and_record_the_same() {
        let step = |qkv_ns| TokenSample {
            start_ns: 0,
            total_ns: 10_000,
            position: 3,
            spans: vec![
                span(BrickId::Qkv, Some(0), qkv_ns),
                span(BrickId::Qkv, Some(1), 2 * qkv_ns),
                span(BrickId::LmHead, None, 4000),
            ],
            gaps_ns: None,
            kernels: Vec::new(),
        };
        let mut plain = Stats::new(2);
        let mut ready = Stats::new(2);
        ready.prepare(&step(999));
        assert!(ready.bricks.is_empty() && ready.tokens() == 0);
        ready.prepare(&step(999));
        assert_eq!(ready.spare.len(), 2);
        for s in [step(1000), step(1500)] {
            plain.add(&s);
            ready.add(&s);
        }
        assert!(ready.spare.is_empty());
        let ids = |st: &Stats| st.bricks.iter().map(|b| b.brick).collect::<Vec<_>>();
        assert_eq!(ids(&ready), ids(&plain));
        for (a, b) in ready.bricks.iter().zip(&plain.bricks) {
            assert_eq!(a.per_token.count(), b.per_token.count());
            assert_eq!(a.per_token.mean_us(), b.per_token.mean_us());
            assert_eq!(a.per_layer.len(), b.per_layer.len());
            for (x, y) in a.per_layer.iter().zip(&b.per_layer) {
                assert_eq!((x.count(), x.mean_us()), (y.count(), y.mean_us()));
            }
        }
        assert_eq!(ready.other.mean_us(), plain.other.mean_us());
    }

    #[test]
    fn correlation_of_known_series() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!((correlation(&a, &[2.0, 4.0, 6.0, 8.0]) - 1.0).abs() < 1e-12);
        assert!((correlation(&a, &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(correlation(&a, &[1.0, 1.0, 1.0, 1.0]), 0.0);
    }
}
