//! The statistics `compare --db` rests on: the Mann-Whitney U test (two-sided, normal
//! approximation with the tie correction and a continuity correction), medians and a robust
//! spread. Rank tests fit brick times: their distributions are skewed with a long tail of
//! preempted steps, which would drag a mean-based test around. Written here because it is
//! forty lines and the statistics crates that have it bring much more.

/// The test's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample.
    pub u: f64,
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Mann-Whitney U of `a` against `b`; None when either is empty or every value is equal.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len() as f64;
    let (mut rank_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j+1 share their mean.
        let mean_rank = (i + j + 2) as f64 / 2.0;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        rank_a += mean_rank * all[i..=j].iter().filter(|x| x.1).count() as f64;
        i = j + 1;
    }
    let u = rank_a - na * (na + 1.0) / 2.0;
    let mean = na * nb / 2.0;
    let var = na * nb / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return None;
    }
    let d = u - mean;
    let z = (d.abs() - 0.5).max(0.0) * d.signum() / var.sqrt();
    Some(MannWhitney {
        u,
        z,
        p: (2.0 * normal_sf(z.abs())).min(1.0),
    })
}

/// P(Z > z) for a standard normal Z.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (W. J. Cody's rational Chebyshev fit as in Numerical
/// Recipes' `erfcc`: relative error under 1.2e-7 everywhere, enough for p-values).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The median (None for no values).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

/// The median absolute deviation scaled to a normal distribution's standard deviation
/// (x 1.4826): a spread that a single outlier run does not inflate.
pub fn robust_sd(v: &[f64]) -> Option<f64> {
    let m = median(v)?;
    let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    Some(1.4826 * median(&dev)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_known_values() {
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122),
            (1.0, 0.157_299_207),
            (2.0, 0.004_677_735),
            (-1.0, 1.842_700_793),
        ] {
            assert!((erfc(x) - want).abs() < 1e-6 * want.max(1e-3), "erfc({x})");
        }
        assert!((normal_sf(1.959_964) - 0.025).abs() < 1e-6);
    }

    #[test]
    fn mann_whitney_matches_a_worked_example() {
        // One tie across the samples (6.0): a's ranks 1..5 and 6.5, U = 21.5 - 21 = 0.5.
        let a = [1.1, 2.2, 3.3, 4.4, 5.5, 6.0];
        let b = [6.0, 7.7, 8.8, 9.9, 10.1, 11.2, 12.3];
        let r = mann_whitney(&a, &b).unwrap();
        assert_eq!(r.u, 0.5);
        assert!(r.z < 0.0);
        // Mean 21, variance 42/12 * (14 - 6/156) = 48.865, z = -(20.5 - 0.5) / 6.9904.
        assert!((r.z + 2.8611).abs() < 1e-3, "{}", r.z);
        assert!((r.p - 0.004_22).abs() < 1e-4, "{}", r.p);
        let same = mann_whitney(&a, &a).unwrap();
        assert!(same.p > 0.99);
        assert!(mann_whitney(&[1.0, 1.0], &[1.0]).is_none());
        assert!(mann_whitney(&[], &[1.0]).is_none());
    }

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        // One wild value leaves the spread alone.
        let sd = robust_sd(&[10.0, 11.0, 9.0, 10.0, 1000.0]).unwrap();
        assert!((sd - 1.4826).abs() < 1e-9, "{sd}");
    }
}
