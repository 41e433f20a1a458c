//! Choosing the next token from logits: greedy, or temperature with top-k and top-p, from a
//! seeded generator so runs repeat exactly.

use crate::rng::SplitMix64;

/// Sampling settings. `temperature <= 0` means greedy.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (1.0 = all).
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            seed: 42,
        }
    }
}

impl SamplerConfig {
    pub fn greedy() -> Self {
        SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        }
    }
}

/// A sampler with its own random stream.
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: SplitMix64,
}

/// Index of the largest logit (the lowest index on ties), or 0 for an empty slice: the answer
/// of `argmax_serial`, in which a NaN is never larger, so a NaN at index 0 wins and one
/// elsewhere never does.
pub fn argmax(logits: &[f32]) -> u32 {
    match logits.first() {
        Some(v) if !v.is_nan() => first_max(logits).unwrap_or(0) as u32,
        _ => 0,
    }
}

/// The first index of the largest value that is not NaN (None if every value is NaN), in two
/// passes that vectorise: the largest value, kept per lane with `>` (a NaN never replaces a
/// lane's value, and for the other values the largest is the same in any order; `-0.0` and
/// `0.0` compare equal, and either finds the same first index), then the first index holding
/// a value equal to it. Pieces of a slice combine in order, a later piece's answer replacing
/// an earlier one only where its value is larger (`cpu::ops::argmax`).
pub fn first_max(logits: &[f32]) -> Option<usize> {
    const LANES: usize = 16;
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = logits.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = if v > *m { v } else { *m };
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &v in lanes.iter().chain(chunks.remainder()) {
        if v > max {
            max = v;
        }
    }
    logits.iter().position(|&v| v == max)
}

/// `argmax` one value at a time: the reference.
pub fn argmax_serial(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The `k` largest logits as (id, logit), highest first.
pub fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    let k = k.min(idx.len());
    if k == 0 {
        return Vec::new();
    }
    let by_logit = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    idx.select_nth_unstable_by(k - 1, by_logit);
    idx.truncate(k);
    idx.sort_by(by_logit);
    idx.into_iter().map(|i| (i, logits[i as usize])).collect()
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Sampler {
        let rng = SplitMix64::new(cfg.seed);
        Sampler { cfg, rng }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Pick the next token.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.cfg.temperature <= 0.0 || logits.len() <= 1 {
            return argmax(logits);
        }
        let k = if self.cfg.top_k == 0 {
            logits.len()
        } else {
            self.cfg.top_k
        };
        let cands = top_k(logits, k);
        let t = self.cfg.temperature as f64;
        let max = cands[0].1 as f64;
        let mut probs: Vec<f64> = cands
            .iter()
            .map(|&(_, l)| ((l as f64 - max) / t).exp())
            .collect();
        let total: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        // top-p: keep the smallest prefix reaching top_p (at least one token).
        let mut keep = probs.len();
        let mut cum = 0.0;
        for (i, p) in probs.iter().enumerate() {
            cum += p;
            if cum >= self.cfg.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
        let total: f64 = probs[..keep].iter().sum();
        let mut r = self.rng.next_f64() * total;
        for (i, p) in probs[..keep].iter().enumerate() {
            if r < *p {
                return cands[i].0;
            }
            r -= p;
        }
        cands[keep - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_argmax_and_first_on_ties() {
        let mut s = Sampler::new(SamplerConfig::greedy());
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 3.0]), 1);
        assert_eq!(argmax(&[]), 0);
    }

    /// Random logits with ties, signed zeros, infinities and NaNs, at every length up to
    /// past two chunks of lanes: the two-pass `argmax` always picks the serial loop's index.
    #[test]
    fn argmax_equals_the_serial_reference() {
        let mut rng = SplitMix64::new(9);
        let special = [
            0.0f32,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.0,
        ];
        for len in (0..70).chain([1000, 151_936]) {
            for round in 0..40 {
                let l: Vec<f32> = (0..len)
                    .map(|_| {
                        let r = rng.next_signed();
                        match round % 4 {
                            0 => r,
                            // few distinct values: many ties
                            1 => (r * 3.0).round(),
                            2 if r.abs() < 0.3 => special[((r.abs() * 20.0) as usize) % 6],
                            _ => -r.abs() * 0.001,
                        }
                    })
                    .collect();
                assert_eq!(argmax(&l), argmax_serial(&l), "len {len} round {round}");
            }
        }
        assert_eq!(argmax(&[f32::NAN, 5.0]), 0);
        assert_eq!(argmax(&[-0.0, 0.0, -0.0]), 0);
        assert_eq!(argmax(&[1.0, f32::NAN, 2.0, 2.0]), 2);
    }

    #[test]
    fn top_k_orders_and_limits() {
        let l = [0.5, 2.0, -1.0, 2.0, 1.0];
        assert_eq!(top_k(&l, 3), vec![(1, 2.0), (3, 2.0), (4, 1.0)]);
        assert_eq!(top_k(&l, 10).len(), 5);
    }

    #[test]
    fn sampling_is_seeded_and_respects_top_k_and_top_p() {
        let logits: Vec<f32> = (0..100).map(|i| (i as f32) * 0.05).collect();
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_k: 5,
            top_p: 1.0,
            seed: 7,
        };
        let a: Vec<u32> = {
            let mut s = Sampler::new(cfg.clone());
            (0..50).map(|_| s.sample(&logits)).collect()
        };
        let b: Vec<u32> = {
            let mut s = Sampler::new(cfg.clone());
            (0..50).map(|_| s.sample(&logits)).collect()
        };
        assert_eq!(a, b);
        assert!(
            a.iter().all(|&t| t >= 95),
            "top-k 5 keeps ids 95..99: {a:?}"
        );
        assert!(a.iter().collect::<std::collections::HashSet<_>>().len() > 1);
        // A dominant token with top_p below its probability is always chosen.
        let mut l = vec![0f32; 10];
        l[3] = 10.0;
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.5,
            seed: 1,
        });
        assert!((0..100).all(|_| s.sample(&l) == 3));
    }

    #[test]
    fn temperature_spreads_choices() {
        let logits = [1.0f32, 1.1, 0.9, 1.05];
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 3,
        });
        let seen: std::collections::HashSet<u32> = (0..200).map(|_| s.sample(&logits)).collect();
        assert_eq!(seen.len(), 4);
    }
}
