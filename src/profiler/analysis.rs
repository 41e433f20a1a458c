//! From statistics to judgement: each brick's cost, achieved bandwidth and FLOP rate, roofline
//! time, budget, gap, score and grade, plus `other`, the model score and the bottleneck. Plain
//! rows that the report and the live view both render.

use std::collections::BTreeMap;

use crate::brick::cost::{Cost, Roof, Shapes};
use crate::brick::peaks::MeasuredPeaks;
use crate::brick::peaks::Peak;
use crate::brick::score::{self, BudgetSource};
use crate::brick::stats::{Stats, TokenSample};
use crate::brick::{Brick, BrickId, Source};
use crate::profile::{Profile, ProfileError};

/// Budgets to judge against: per-brick figures from a profile, else `roofline / target`.
#[derive(Clone, Debug, PartialEq)]
pub struct Budgets {
    pub target_efficiency: f64,
    /// Brick id → microseconds per token.
    pub bricks_us: BTreeMap<String, f64>,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            target_efficiency: score::DEFAULT_TARGET_EFFICIENCY,
            bricks_us: BTreeMap::new(),
        }
    }
}

impl Budgets {
    /// The budgets of profile `name` (`--profile`: a built-in name or a TOML file), else the
    /// roofline-derived default.
    pub fn from_profile(name: Option<&str>) -> Result<Budgets, ProfileError> {
        let Some(name) = name else {
            return Ok(Budgets::default());
        };
        let p = Profile::load(name)?;
        let mut b = Budgets::default();
        if let Some(t) = p.budget.target_efficiency {
            b.target_efficiency = t;
        }
        b.bricks_us = p.budget.bricks_us;
        Ok(b)
    }
}

/// One brick, measured and judged.
#[derive(Clone, Debug)]
pub struct BrickRow {
    pub brick: Brick,
    pub id: String,
    pub source: Source,
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub cv_percent: f64,
    pub share_percent: f64,
    pub cost: Cost,
    pub gbps: f64,
    pub gflops: f64,
    /// The bandwidth the brick's bytes are judged against, GB/s (`Roof::bandwidth_for`).
    pub roof_gbps: f64,
    pub roofline_us: f64,
    pub efficiency: f64,
    pub budget_us: f64,
    pub budget_source: BudgetSource,
    pub gap_factor: f64,
    pub score: f64,
    pub grade: &'static str,
    pub per_layer_us: Vec<f64>,
}

/// The whole picture of a run.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub rows: Vec<BrickRow>,
    pub token_us: f64,
    /// GPU idle time between kernels per token, where measured (kernel timestamps).
    pub gaps_us: Option<f64>,
    pub gaps_share_percent: Option<f64>,
    pub other_us: f64,
    pub other_share_percent: f64,
    pub score: f64,
    pub grade: &'static str,
    /// Indices into `rows`, most time over budget first (at most 3); the first is the
    /// bottleneck.
    pub worst: Vec<usize>,
    /// Mean context length the attention cost was computed at.
    pub kv_len: f64,
    /// The prompt's own brick table, when the prefill was profiled.
    pub prefill: Option<PrefillAnalysis>,
}

/// One brick of the profiled prompt evaluation.
#[derive(Clone, Debug)]
pub struct PrefillRow {
    pub brick: Brick,
    pub id: String,
    pub source: Source,
    /// Time over the whole prompt, summed over layers.
    pub us: f64,
    pub share_percent: f64,
    pub cost: Cost,
    pub gbps: f64,
    pub gflops: f64,
    pub roofline_us: f64,
    pub efficiency: f64,
    pub per_layer_us: Vec<f64>,
    /// The compute peak its roofline used (`PrefillAnalysis::compute` or `int8`).
    pub compute_source: &'static str,
}

/// The prompt evaluation brick by brick: bricks + gaps + other = its wall time.
#[derive(Clone, Debug)]
pub struct PrefillAnalysis {
    pub tokens: usize,
    /// The measured compute peak the rows' roofline used (the tensor cores' when the
    /// prompt's products ran on them), but for the rows that used `int8`.
    pub compute: Peak,
    /// The int8 dot peak the quantized products' rows used instead, where any did.
    pub int8: Option<Peak>,
    pub rows: Vec<PrefillRow>,
    pub total_us: f64,
    pub gaps_us: Option<f64>,
    pub other_us: f64,
}

/// `amount` (bytes or FLOPs) done in `us` microseconds, in billions per second (0 for no time).
fn giga_per_s(amount: f64, us: f64) -> f64 {
    if us > 0.0 {
        amount / (us * 1e3)
    } else {
        0.0
    }
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// Judge a profiled prompt evaluation of `tokens` tokens, its last layer past the attention
/// on `tail` of them (`Shapes::prefill_cost`), against the roofline of `peaks` (its compute
/// roof the tensor cores' when `tensor_cores`: `MeasuredPeaks::prefill_roof`).
/// The bricks covering one of `int8_products` (products whose weights are quantized, on the
/// CPU) take the int8 dot peak as their compute roof where it was measured: their dots are
/// integer multiply-adds, which the FMA peak understates.
pub fn analyze_prefill(
    sample: &TokenSample,
    (tokens, tail): (usize, usize),
    n_layers: usize,
    shapes: &Shapes,
    peaks: &MeasuredPeaks,
    tensor_cores: bool,
    int8_products: &[BrickId],
) -> PrefillAnalysis {
    let base = peaks.prefill_compute(tensor_cores);
    let int8 = peaks.int8.as_ref().filter(|_| !tensor_cores);
    let compute_of = |brick: Brick| match int8 {
        Some(p) if brick.covers().iter().any(|b| int8_products.contains(b)) => p,
        _ => base,
    };
    let mut stats = Stats::new(n_layers);
    stats.add(sample);
    let total_us = stats.token.mean_us();
    let rows: Vec<PrefillRow> = stats
        .bricks
        .iter()
        .map(|b| {
            let us = b.per_token.mean_us();
            let cost = shapes.prefill_cost(b.brick, tokens, tail);
            let compute = compute_of(b.brick);
            let roofline_us = peaks.roof_with(compute).time_us(&cost);
            PrefillRow {
                brick: b.brick,
                compute_source: compute.source,
                id: b.brick.to_string(),
                source: b.source,
                us,
                share_percent: if total_us > 0.0 {
                    100.0 * us / total_us
                } else {
                    0.0
                },
                cost,
                gbps: giga_per_s(cost.bytes(), us),
                gflops: giga_per_s(cost.flops, us),
                roofline_us,
                efficiency: score::efficiency(roofline_us, us),
                per_layer_us: b.per_layer.iter().map(|l| l.mean_us()).collect(),
            }
        })
        .collect();
    let int8 = int8.filter(|p| rows.iter().any(|r| r.compute_source == p.source));
    PrefillAnalysis {
        tokens,
        compute: base.clone(),
        int8: int8.cloned(),
        rows,
        total_us,
        gaps_us: (stats.gaps.count() > 0).then(|| stats.gaps.mean_us()),
        other_us: stats.other.mean_us(),
    }
}

/// Judge `stats` against the roofline and budgets.
pub fn analyze(stats: &Stats, shapes: &Shapes, roof: &Roof, budgets: &Budgets) -> Analysis {
    let token_us = stats.token.mean_us();
    let share = |us: f64| percent(us, token_us);
    // The step at position p attends over p + 1 cached positions.
    let kv_len = stats.mean_position() + 1.0;
    let rows: Vec<BrickRow> = stats
        .bricks
        .iter()
        .map(|b| {
            let s = &b.per_token;
            let mean = s.mean_us();
            let cost = shapes.cost(b.brick, kv_len);
            let roofline_us = roof.time_us(&cost);
            let id = b.brick.to_string();
            let (budget_us, budget_source) = score::budget_us(
                budgets.bricks_us.get(&id).copied(),
                roofline_us,
                budgets.target_efficiency,
            );
            let sc = score::brick_score(roofline_us, budget_us, mean, s.cv_percent());
            BrickRow {
                brick: b.brick,
                id,
                source: b.source,
                count: s.count(),
                mean_us: mean,
                p50_us: s.quantile_us(0.5),
                p90_us: s.quantile_us(0.9),
                p99_us: s.quantile_us(0.99),
                p999_us: s.quantile_us(0.999),
                max_us: s.max_us(),
                cv_percent: s.cv_percent(),
                share_percent: share(mean),
                cost,
                gbps: giga_per_s(cost.bytes(), mean),
                gflops: giga_per_s(cost.flops, mean),
                roof_gbps: roof.bandwidth_for(&cost),
                roofline_us,
                efficiency: score::efficiency(roofline_us, mean),
                budget_us,
                budget_source,
                gap_factor: score::gap_factor(mean, budget_us),
                score: sc,
                grade: score::grade(sc),
                per_layer_us: b.per_layer.iter().map(|l| l.mean_us()).collect(),
            }
        })
        .collect();
    let model_score = score::model_score(
        &rows
            .iter()
            .map(|r| (r.score, r.mean_us))
            .collect::<Vec<_>>(),
    );
    let worst = score::worst_over_budget(
        &rows
            .iter()
            .map(|r| (r.mean_us, r.budget_us))
            .collect::<Vec<_>>(),
        3,
    );
    let other_us = stats.other.mean_us();
    let gaps_us = (stats.gaps.count() > 0).then(|| stats.gaps.mean_us());
    Analysis {
        rows,
        token_us,
        gaps_us,
        gaps_share_percent: gaps_us.map(share),
        other_us,
        other_share_percent: share(other_us),
        score: model_score,
        grade: score::grade(model_score),
        worst,
        kv_len,
        prefill: None,
    }
}
