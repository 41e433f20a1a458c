//! The CPU attention under `fast` numerics (heads of 64, 128 and 256, AVX2/FMA/F16C): for one
//! (query, head) pair the keys are taken sixteen at a time, their scores first (independent
//! dot products), then one maximum and the sixteen exponentials eight lanes at a time
//! (`ops_x86::expf8`), then the weighted sum of their V rows in f32. The exact path
//! (`attention.rs`) follows llama.cpp's CPU kernel key by key: a scalar exponential and a
//! running-maximum test per key, and for short prompts and decode an f16 accumulator rounded
//! after every key. Here the softmax's running maximum moves once a block and the weights are
//! summed in another order, so the results are within the `fast` bounds, not the same bits.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use half::f16;

use super::attention_tiled::TiledRows;
use super::ops_x86::expf8;

/// Keys per block: two registers of scores.
const BLOCK: usize = 16;

/// The head widths with a kernel here (eight f32 lanes a register: 8, 16 and 32 registers).
pub fn takes(head_dim: usize) -> bool {
    matches!(head_dim, 64 | 128 | 256)
}

/// The sum of a register's eight lanes.
#[inline(always)]
unsafe fn hsum(x: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// One (query, head) pair over `n` keys: `k8(j, r)` and `v8(j, r)` give lanes `8r..8r+8` of
/// key `j`'s K and V rows as f32. Writes the unnormalised weighted sum of V to `o`; returns
/// the softmax denominator.
#[inline(always)]
unsafe fn head_by<const R: usize>(
    q: &[f32],
    n: usize,
    scale: f32,
    o: &mut [f32],
    k8: impl Fn(usize, usize) -> __m256,
    v8: impl Fn(usize, usize) -> __m256,
) -> f32 {
    let mut qs = [_mm256_setzero_ps(); R];
    let sc = _mm256_set1_ps(scale);
    for (r, x) in qs.iter_mut().enumerate() {
        *x = _mm256_mul_ps(_mm256_loadu_ps(q.as_ptr().add(8 * r)), sc);
    }
    let mut acc = [_mm256_setzero_ps(); R];
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    let mut s = [f32::NEG_INFINITY; BLOCK];
    let mut j0 = 0;
    while j0 < n {
        let nb = BLOCK.min(n - j0);
        for (i, si) in s.iter_mut().enumerate().take(nb) {
            let (mut a, mut b) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for r in (0..R).step_by(2) {
                a = _mm256_fmadd_ps(k8(j0 + i, r), qs[r], a);
                b = _mm256_fmadd_ps(k8(j0 + i, r + 1), qs[r + 1], b);
            }
            *si = hsum(_mm256_add_ps(a, b));
        }
        s[nb..].fill(f32::NEG_INFINITY);
        let top = s[..nb].iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        if top > max {
            // The first block finds max at -inf: exp(-inf) = 0 scales the empty sums.
            let f = (max - top).exp();
            let fv = _mm256_set1_ps(f);
            for a in acc.iter_mut() {
                *a = _mm256_mul_ps(*a, fv);
            }
            sum *= f;
            max = top;
        }
        let m = _mm256_set1_ps(max);
        for c in (0..BLOCK).step_by(8) {
            let e = expf8(_mm256_sub_ps(_mm256_loadu_ps(s.as_ptr().add(c)), m));
            _mm256_storeu_ps(s.as_mut_ptr().add(c), e);
        }
        sum += s[..nb].iter().sum::<f32>();
        for (i, &p) in s.iter().enumerate().take(nb) {
            let w = _mm256_set1_ps(p);
            for (r, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(v8(j0 + i, r), w, *a);
            }
        }
        j0 += nb;
    }
    for (r, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(o.as_mut_ptr().add(8 * r), *a);
    }
    sum
}

/// `head_by` over f32 rows (a prompt's tiled path, K and V converted once for the layer).
///
/// # Safety
/// AVX2, FMA and F16C must be available; `q` and `o` hold `8 * R` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tiled<const R: usize>(q: &[f32], rows: TiledRows, scale: f32, o: &mut [f32]) -> f32 {
    let hd = 8 * R;
    assert!(q.len() >= hd && o.len() >= hd);
    let end = rows.n.saturating_sub(1) * rows.stride + rows.at + hd;
    assert!(rows.n == 0 || end <= rows.k.len().min(rows.v.len()));
    let (pk, pv) = (rows.k.as_ptr(), rows.v.as_ptr());
    let at = |j: usize, r: usize| j * rows.stride + rows.at + 8 * r;
    head_by::<R>(
        q,
        rows.n,
        scale,
        o,
        |j, r| _mm256_loadu_ps(pk.add(at(j, r))),
        |j, r| _mm256_loadu_ps(pv.add(at(j, r))),
    )
}

/// `head_by` over the cache's f16 rows (decode and short prompts): row `j`'s lanes start at
/// `j * stride + at`.
///
/// # Safety
/// AVX2, FMA and F16C must be available; `q` and `o` hold `8 * R` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn cached<const R: usize>(
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    (stride, at, n): (usize, usize, usize),
    scale: f32,
    o: &mut [f32],
) -> f32 {
    let hd = 8 * R;
    assert!(q.len() >= hd && o.len() >= hd);
    assert!(n == 0 || (n - 1) * stride + at + hd <= keys.len().min(values.len()));
    let (pk, pv) = (
        keys.as_ptr() as *const __m128i,
        values.as_ptr() as *const __m128i,
    );
    let lane = |j: usize, r: usize| (j * stride + at + 8 * r) / 8;
    // Rows start at multiples of 8 halves (stride and `at` are multiples of the head width).
    debug_assert!(stride.is_multiple_of(8) && at.is_multiple_of(8));
    head_by::<R>(
        q,
        n,
        scale,
        o,
        |j, r| _mm256_cvtph_ps(_mm_loadu_si128(pk.add(lane(j, r)))),
        |j, r| _mm256_cvtph_ps(_mm_loadu_si128(pv.add(lane(j, r)))),
    )
}

/// One (query, head) pair of a prompt's tiled path under `fast` (f32 rows).
///
/// # Safety
/// AVX2, FMA and F16C must be available and `takes(o.len())`.
pub unsafe fn tiled_head(q: &[f32], rows: TiledRows, scale: f32, o: &mut [f32]) -> f32 {
    match o.len() {
        64 => tiled::<8>(q, rows, scale, o),
        128 => tiled::<16>(q, rows, scale, o),
        256 => tiled::<32>(q, rows, scale, o),
        hd => unreachable!("no fast attention kernel for heads of {hd}"),
    }
}

/// One (query, head) pair over the cache's f16 rows under `fast`.
///
/// # Safety
/// AVX2, FMA and F16C must be available and `takes(o.len())`; strides and offsets are
/// multiples of 8 halves.
pub unsafe fn cached_head(
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    rows: (usize, usize, usize),
    scale: f32,
    o: &mut [f32],
) -> f32 {
    match o.len() {
        64 => cached::<8>(q, keys, values, rows, scale, o),
        128 => cached::<16>(q, keys, values, rows, scale, o),
        256 => cached::<32>(q, keys, values, rows, scale, o),
        hd => unreachable!("no fast attention kernel for heads of {hd}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::attention_tiled::tiled_head_scalar;
    use crate::rng::SplitMix64;

    fn random(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| 2.0 * rng.next_signed()).collect()
    }

    /// Both kernels against the exact tiled path (f64-free reference: the same softmax key by
    /// key) on random heads of every width, row counts around the block size, rows strided
    /// inside wider K/V rows: the normalised outputs agree to 1e-5 of their scale.
    #[test]
    fn fast_heads_match_the_exact_tiled_path() {
        if !crate::quant::x86::available() {
            eprintln!("attention_fast: skipped: no AVX2/FMA/F16C");
            return;
        }
        for hd in [64usize, 128, 256] {
            for n in [1usize, 2, 15, 16, 17, 33, 100] {
                let stride = 3 * hd;
                let at = hd;
                let q = random(hd, (hd * 1000 + n) as u64);
                let k16: Vec<f16> = random(n * stride, 7 + n as u64)
                    .iter()
                    .map(|&x| f16::from_f32(x * 2.0))
                    .collect();
                let v16: Vec<f16> = random(n * stride, 9 + n as u64)
                    .iter()
                    .map(|&x| f16::from_f32(x))
                    .collect();
                let (k, v): (Vec<f32>, Vec<f32>) = (
                    k16.iter().map(|x| x.to_f32()).collect(),
                    v16.iter().map(|x| x.to_f32()).collect(),
                );
                let rows = TiledRows {
                    k: &k,
                    v: &v,
                    stride,
                    at,
                    n,
                };
                let scale = 1.0 / (hd as f32).sqrt();
                let mut want = vec![0f32; hd];
                let ws = tiled_head_scalar(&q, rows, scale, &mut want);
                let mut got = vec![0f32; hd];
                let mut got16 = vec![0f32; hd];
                // SAFETY: the features were detected above; every width here has a kernel.
                let (gs, gs16) = unsafe {
                    (
                        tiled_head(&q, rows, scale, &mut got),
                        cached_head(&q, &k16, &v16, (stride, at, n), scale, &mut got16),
                    )
                };
                for (what, out, s) in [("tiled", &got, gs), ("cached", &got16, gs16)] {
                    for d in 0..hd {
                        let (a, b) = (out[d] / s, want[d] / ws);
                        assert!(
                            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                            "{what} hd {hd} n {n} d {d}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
}
