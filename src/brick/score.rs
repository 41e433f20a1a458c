//! Budgets, gap factors, scores and grades (docs/DESIGN.md "Scores and budgets"). Pure functions of
//! measured times and the roofline, so every formula is checked on hand-computed cases.

/// Default share of the roofline a brick is expected to reach.
pub const DEFAULT_TARGET_EFFICIENCY: f64 = 0.7;

/// Where a brick's budget came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetSource {
    Profile,
    Roofline,
}

impl BudgetSource {
    pub fn name(self) -> &'static str {
        match self {
            BudgetSource::Profile => "profile",
            BudgetSource::Roofline => "roofline",
        }
    }
}

/// A brick's budget: the profile's figure when it has one, else `roofline / target`.
pub fn budget_us(
    profile_us: Option<f64>,
    roofline_us: f64,
    target_efficiency: f64,
) -> (f64, BudgetSource) {
    match profile_us {
        Some(b) => (b, BudgetSource::Profile),
        None => (roofline_us / target_efficiency, BudgetSource::Roofline),
    }
}

/// `actual / budget` (infinite when the budget is zero and time was spent).
pub fn gap_factor(actual_us: f64, budget_us: f64) -> f64 {
    if budget_us > 0.0 {
        actual_us / budget_us
    } else if actual_us > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}

/// `roofline / actual`, capped at 1.
pub fn efficiency(roofline_us: f64, actual_us: f64) -> f64 {
    if actual_us > 0.0 {
        (roofline_us / actual_us).min(1.0)
    } else {
        1.0
    }
}

/// Brick score 0..100 =
/// `100 × (0.55 × efficiency + 0.25 × min(budget/actual, 1) + 0.20 × max(1 − CV, 0))`.
pub fn brick_score(roofline_us: f64, budget_us: f64, actual_us: f64, cv_percent: f64) -> f64 {
    let on_budget = if actual_us > 0.0 {
        (budget_us / actual_us).min(1.0)
    } else {
        1.0
    };
    let steady = (1.0 - cv_percent / 100.0).max(0.0);
    100.0 * (0.55 * efficiency(roofline_us, actual_us) + 0.25 * on_budget + 0.20 * steady)
}

/// Model score: brick scores weighted by their time.
pub fn model_score(scores_and_times: &[(f64, f64)]) -> f64 {
    let total: f64 = scores_and_times.iter().map(|&(_, t)| t).sum();
    if total <= 0.0 {
        return 0.0;
    }
    scores_and_times.iter().map(|&(s, t)| s * t).sum::<f64>() / total
}

/// A ≥ 90, B ≥ 80, C ≥ 70, D ≥ 60, F below.
pub fn grade(score: f64) -> &'static str {
    match score {
        s if s >= 90.0 => "A",
        s if s >= 80.0 => "B",
        s if s >= 70.0 => "C",
        s if s >= 60.0 => "D",
        _ => "F",
    }
}

/// Indices of bricks ordered by time over budget (`actual − budget`), largest first, at most
/// `n`. The first is the bottleneck: the brick with the most time over budget (or, when all
/// are within budget, the one with the least slack).
pub fn worst_over_budget(actual_and_budget: &[(f64, f64)], n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..actual_and_budget.len()).collect();
    let over = |i: usize| actual_and_budget[i].0 - actual_and_budget[i].1;
    idx.sort_by(|&a, &b| over(b).total_cmp(&over(a)));
    idx.truncate(n);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_from_roofline_or_profile() {
        assert_eq!(budget_us(None, 7.0, 0.7), (10.0, BudgetSource::Roofline));
        assert_eq!(budget_us(Some(3.0), 7.0, 0.7), (3.0, BudgetSource::Profile));
        assert_eq!(gap_factor(25.0, 10.0), 2.5);
    }

    #[test]
    fn score_by_hand() {
        // roofline 10, budget 20, actual 40, CV 10%:
        // efficiency 0.25, on budget 0.5, steady 0.9
        // 100 x (0.55 x 0.25 + 0.25 x 0.5 + 0.2 x 0.9) = 13.75 + 12.5 + 18 = 44.25
        let s = brick_score(10.0, 20.0, 40.0, 10.0);
        assert!((s - 44.25).abs() < 1e-9, "{s}");
        // at the roofline, on budget, no variation: 100
        assert!((brick_score(10.0, 14.0, 10.0, 0.0) - 100.0).abs() < 1e-9);
        // CV above 100% contributes nothing, not a negative
        assert!((brick_score(10.0, 10.0, 10.0, 250.0) - 80.0).abs() < 1e-9);
        assert_eq!(grade(90.0), "A");
        assert_eq!(grade(89.99), "B");
        assert_eq!(grade(80.0), "B");
        assert_eq!(grade(70.0), "C");
        assert_eq!(grade(60.0), "D");
        assert_eq!(grade(59.9), "F");
    }

    #[test]
    fn model_score_is_time_weighted() {
        // 90 for 1 us and 50 for 3 us: (90 + 150) / 4 = 60
        assert!((model_score(&[(90.0, 1.0), (50.0, 3.0)]) - 60.0).abs() < 1e-12);
        assert_eq!(model_score(&[]), 0.0);
    }

    #[test]
    fn bottleneck_is_most_time_over_budget() {
        // over: 5, -1, 20, 3
        let v = [(10.0, 5.0), (1.0, 2.0), (30.0, 10.0), (4.0, 1.0)];
        assert_eq!(worst_over_budget(&v, 3), vec![2, 0, 3]);
    }
}
