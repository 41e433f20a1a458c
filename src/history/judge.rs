//! `compare --db`: is the newest run slower than the runs before it, brick by brick? A brick
//! moved when four things hold: the Mann-Whitney test of its per-step times against the
//! baseline runs' pooled per-step times rejects at `alpha` divided by the number of bricks
//! tested (Bonferroni); its median changed by more than the larger of `min_effect` and `k`
//! times the baseline runs' own spread (the robust standard deviation of their medians); the
//! change is at least `min_share` of the token time; and the new median lies outside every
//! baseline run's median. The test alone flags tiny shifts that thousands of steps make
//! significant; the rest is what "knows the noise" of a machine whose runs differ from one
//! another more than steps within a run do, and of bricks of a microsecond, whose medians
//! move by the timer's own granularity.

use std::fmt::Write;

use serde::Serialize;

use super::db::RunRow;
use super::stats::{mann_whitney, median, robust_sd};

/// How the verdict is made.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Family-wise significance level over all bricks.
    pub alpha: f64,
    /// Smallest change that counts, percent of the baseline median.
    pub min_effect_percent: f64,
    /// A change must also exceed this many run-to-run standard deviations.
    pub spread_k: f64,
    /// A brick's change must also be this share of the token time, percent (the sum of the
    /// bricks' baseline medians).
    pub min_share_percent: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            alpha: 0.01,
            min_effect_percent: 10.0,
            spread_k: 3.0,
            min_share_percent: 0.2,
        }
    }
}

/// Which way a figure went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Move {
    Slower,
    Faster,
    Unchanged,
    /// Not enough samples on one side to test.
    Untested,
}

/// One brick's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BrickVerdict {
    pub id: String,
    /// Median per-step time over the baseline runs' steps, microseconds.
    pub baseline_us: Option<f64>,
    /// Median per-step time of the new run, microseconds.
    pub new_us: Option<f64>,
    pub change_percent: Option<f64>,
    /// The robust standard deviation of the baseline runs' medians, percent of their median.
    pub run_spread_percent: Option<f64>,
    /// The change that had to be exceeded, percent.
    pub threshold_percent: f64,
    pub p_value: Option<f64>,
    pub moved: Move,
}

/// Throughput of the new run against the baseline runs' (judged by the runs' spread alone:
/// there is one figure a run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThroughputVerdict {
    pub new: f64,
    pub baseline_median: f64,
    pub change_percent: f64,
    pub threshold_percent: f64,
    pub moved: Move,
}

/// The whole verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judgement {
    pub new_run: i64,
    pub new_commit: Option<String>,
    pub baseline_runs: Vec<i64>,
    pub alpha: f64,
    /// `alpha` over the bricks tested.
    pub corrected_alpha: f64,
    pub min_effect_percent: f64,
    /// The smallest change of a brick that counts, microseconds (`min_share` of the token).
    pub min_change_us: f64,
    pub tokens_per_sec: ThroughputVerdict,
    pub bricks: Vec<BrickVerdict>,
    /// Bricks that got slower (and faster), by id.
    pub slower: Vec<String>,
    pub faster: Vec<String>,
}

impl Judgement {
    /// The gate: a brick or the throughput got slower.
    pub fn regressed(&self) -> bool {
        !self.slower.is_empty() || self.tokens_per_sec.moved == Move::Slower
    }
}

/// The threshold for a figure whose baseline runs gave `runs` (percent).
fn threshold(runs: &[f64], o: &Options) -> (Option<f64>, f64) {
    let spread = match (robust_sd(runs), median(runs)) {
        (Some(sd), Some(m)) if runs.len() >= 3 && m > 0.0 => Some(100.0 * sd / m),
        _ => None,
    };
    let t = o.min_effect_percent.max(o.spread_k * spread.unwrap_or(0.0));
    (spread, t)
}

/// Judge `new` against `baseline` (runs of the same model, device and numerics).
pub fn judge(new: &RunRow, baseline: &[RunRow], o: &Options) -> Judgement {
    let tested: Vec<&str> = new
        .bricks
        .iter()
        .filter(|b| {
            !b.samples_us.is_empty()
                && baseline.iter().any(|r| {
                    r.bricks
                        .iter()
                        .any(|x| x.id == b.id && !x.samples_us.is_empty())
                })
        })
        .map(|b| b.id.as_str())
        .collect();
    let corrected = o.alpha / tested.len().max(1) as f64;
    let pooled = |id: &str| -> Vec<f64> {
        baseline
            .iter()
            .filter_map(|r| r.bricks.iter().find(|x| x.id == id))
            .flat_map(|x| x.samples_us.iter().copied())
            .collect()
    };
    let token_us: f64 = new
        .bricks
        .iter()
        .filter_map(|b| median(&pooled(&b.id)))
        .sum();
    let floor_us = token_us * o.min_share_percent / 100.0;
    let bricks: Vec<BrickVerdict> = new
        .bricks
        .iter()
        .map(|b| {
            let runs: Vec<&[f64]> = baseline
                .iter()
                .filter_map(|r| r.bricks.iter().find(|x| x.id == b.id))
                .map(|x| &x.samples_us[..])
                .filter(|s| !s.is_empty())
                .collect();
            let pool: Vec<f64> = runs.iter().flat_map(|s| s.iter().copied()).collect();
            let run_medians: Vec<f64> = runs.iter().filter_map(|s| median(s)).collect();
            let (spread, t) = threshold(&run_medians, o);
            let (base, now) = (median(&pool), median(&b.samples_us));
            let change = match (base, now) {
                (Some(x), Some(y)) if x > 0.0 => Some(100.0 * (y / x - 1.0)),
                _ => None,
            };
            let test = mann_whitney(&b.samples_us, &pool);
            let hi = run_medians
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max);
            let lo = run_medians.iter().copied().fold(f64::INFINITY, f64::min);
            let big = match (base, now) {
                (Some(x), Some(y)) => (y - x).abs() >= floor_us,
                _ => false,
            };
            let moved = match (test, change, now) {
                (Some(m), Some(c), Some(y)) if m.p < corrected && big => {
                    if c > t && y > hi {
                        Move::Slower
                    } else if c < -t && y < lo {
                        Move::Faster
                    } else {
                        Move::Unchanged
                    }
                }
                (Some(_), Some(_), _) => Move::Unchanged,
                _ => Move::Untested,
            };
            BrickVerdict {
                id: b.id.clone(),
                baseline_us: base,
                new_us: now,
                change_percent: change,
                run_spread_percent: spread,
                threshold_percent: t,
                p_value: test.map(|m| m.p),
                moved,
            }
        })
        .collect();
    let tps: Vec<f64> = baseline.iter().map(|r| r.tokens_per_sec).collect();
    let (_, t) = threshold(&tps, o);
    let base_tps = median(&tps).unwrap_or(0.0);
    let change = if base_tps > 0.0 {
        100.0 * (new.tokens_per_sec / base_tps - 1.0)
    } else {
        0.0
    };
    let lowest = tps.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = tps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let moved = if change < -t && new.tokens_per_sec < lowest {
        Move::Slower
    } else if change > t && new.tokens_per_sec > highest {
        Move::Faster
    } else {
        Move::Unchanged
    };
    let named = |m: Move| {
        bricks
            .iter()
            .filter(|b| b.moved == m)
            .map(|b| b.id.clone())
            .collect::<Vec<_>>()
    };
    Judgement {
        new_run: new.id,
        new_commit: new.commit.clone(),
        baseline_runs: baseline.iter().map(|r| r.id).collect(),
        alpha: o.alpha,
        corrected_alpha: corrected,
        min_effect_percent: o.min_effect_percent,
        min_change_us: floor_us,
        tokens_per_sec: ThroughputVerdict {
            new: new.tokens_per_sec,
            baseline_median: base_tps,
            change_percent: change,
            threshold_percent: t,
            moved,
        },
        slower: named(Move::Slower),
        faster: named(Move::Faster),
        bricks,
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// A plain-text table: the runs compared, tok/s, then each brick.
pub fn to_text(j: &Judgement) -> String {
    let mut s = String::new();
    let ids = |v: &[i64]| match (v.first(), v.last()) {
        (Some(a), Some(b)) => format!("{} runs ({a}..{b})", v.len()),
        _ => "no runs".into(),
    };
    let _ = writeln!(
        s,
        "run {}{} against the last {}; alpha {} over {} bricks, min effect {}% and {:.1} us",
        j.new_run,
        j.new_commit.as_deref().map_or(String::new(), |c| format!(
            " (commit {})",
            &c[..c.len().min(12)]
        )),
        ids(&j.baseline_runs),
        j.alpha,
        (j.alpha / j.corrected_alpha).round(),
        j.min_effect_percent,
        j.min_change_us
    );
    let t = &j.tokens_per_sec;
    let _ = writeln!(
        s,
        "tok/s: {:.2} against a median of {:.2} ({:+.1}%, threshold {:.1}%): {}",
        t.new,
        t.baseline_median,
        t.change_percent,
        t.threshold_percent,
        word(t.moved)
    );
    let _ = writeln!(
        s,
        "{:<24} {:>12} {:>12} {:>9} {:>9} {:>10}  verdict",
        "brick", "base p50 us", "new p50 us", "change", "needed", "p"
    );
    for b in &j.bricks {
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12} {:>9} {:>9} {:>10}  {}",
            b.id,
            opt(b.baseline_us, 1),
            opt(b.new_us, 1),
            b.change_percent.map_or("-".into(), |c| format!("{c:+.1}%")),
            format!("{:.1}%", b.threshold_percent),
            b.p_value.map_or("-".into(), |p| format!("{p:.2e}")),
            word(b.moved)
        );
    }
    let _ = writeln!(
        s,
        "{}",
        match (j.slower.is_empty(), j.faster.is_empty()) {
            (true, true) => "no brick moved".to_string(),
            _ => format!("slower: {}; faster: {}", list(&j.slower), list(&j.faster)),
        }
    );
    s
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn word(m: Move) -> &'static str {
    match m {
        Move::Slower => "SLOWER",
        Move::Faster => "faster",
        Move::Unchanged => "unchanged",
        Move::Untested => "untested",
    }
}

#[cfg(test)]
mod tests {
    use super::super::db::BrickRow;
    use super::*;
    use crate::rng::SplitMix64 as Rng;

    /// A run whose bricks' per-step times are `base * factor` with multiplicative noise.
    fn run(id: i64, rng: &mut Rng, bricks: &[(&str, f64)]) -> RunRow {
        RunRow {
            id,
            timestamp: String::new(),
            commit: None,
            model: "m".into(),
            device: "cpu".into(),
            numerics: "exact".into(),
            status: "PASS".into(),
            tokens_per_sec: 1e6 / bricks.iter().map(|b| b.1).sum::<f64>(),
            bricks: bricks
                .iter()
                .map(|&(id, us)| BrickRow {
                    id: id.into(),
                    mean_us: us,
                    samples_us: (0..32).map(|_| us * (1.0 + 0.2 * rng.next_f64())).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_doubled_brick_is_named_and_unchanged_runs_are_not() {
        let mut rng = Rng::new(7);
        let normal = [("qkv", 100.0), ("ffn_down", 300.0), ("lm_head", 50.0)];
        let base: Vec<RunRow> = (1..=10).map(|i| run(i, &mut rng, &normal)).collect();
        let same = run(11, &mut rng, &normal);
        let j = judge(&same, &base, &Options::default());
        assert!(!j.regressed(), "{}", to_text(&j));
        let slow = run(
            12,
            &mut rng,
            &[("qkv", 100.0), ("ffn_down", 600.0), ("lm_head", 50.0)],
        );
        let j = judge(&slow, &base, &Options::default());
        assert_eq!(j.slower, ["ffn_down"], "{}", to_text(&j));
        assert!(j.regressed());
        assert_eq!(j.tokens_per_sec.moved, Move::Slower);
        assert!(to_text(&j).contains("slower: ffn_down"));
    }

    #[test]
    fn a_brick_of_a_microsecond_moving_a_fraction_of_one_is_not_a_regression() {
        let mut rng = Rng::new(5);
        let normal = [("final_norm", 1.0), ("ffn_down", 900.0)];
        let base: Vec<RunRow> = (1..=10).map(|i| run(i, &mut rng, &normal)).collect();
        let j = judge(
            &run(11, &mut rng, &[("final_norm", 1.5), ("ffn_down", 900.0)]),
            &base,
            &Options::default(),
        );
        assert!(j.bricks[0].change_percent.unwrap() > 30.0);
        assert!(j.min_change_us > 1.5, "{}", j.min_change_us);
        assert_eq!(j.bricks[0].moved, Move::Unchanged, "{}", to_text(&j));
    }

    #[test]
    fn a_small_significant_shift_is_not_a_regression() {
        let mut rng = Rng::new(3);
        let base: Vec<RunRow> = (1..=10)
            .map(|i| run(i, &mut rng, &[("qkv", 100.0)]))
            .collect();
        // 5% slower on every step: significant over 320 steps, under the effect size.
        let j = judge(
            &run(11, &mut rng, &[("qkv", 105.0)]),
            &base,
            &Options::default(),
        );
        assert!(j.bricks[0].p_value.unwrap() < j.corrected_alpha);
        assert_eq!(j.bricks[0].moved, Move::Unchanged);
    }
}
