//! A prompt's float-weight products (F16/BF16 rows widened to f32 once per task, F32 rows) for
//! the CPU's `fast` numerics: tiles of `R` rows by `T` tokens, each pair's dot in its own
//! register of fused multiply-adds across the whole row, summed across lanes at the end. Each
//! step loads `R` row vectors and `T` token vectors for `R * T` multiply-adds, where the exact
//! kernels (`float`) keep the reference's separate multiply and add in eight lanes. AVX2 takes
//! 3 x 4 tiles of eight lanes (twelve accumulators of sixteen registers); AVX-512 4 x 6 of
//! sixteen lanes (24 of 32). The sums' order differs from the reference's, so results are
//! within float reordering of it.

use std::arch::x86_64::*;

/// A vector of f32 lanes and the operations the tiles take.
trait Lanes: Copy {
    const N: usize;
    unsafe fn zero() -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    unsafe fn sum(self) -> f32;
}

impl Lanes for __m256 {
    const N: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn sum(self) -> f32 {
        let h = _mm_add_ps(
            _mm256_castps256_ps128(self),
            _mm256_extractf128_ps::<1>(self),
        );
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
    }
}

impl Lanes for __m512 {
    const N: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn sum(self) -> f32 {
        _mm512_reduce_add_ps(self)
    }
}

/// Weights per pass over a task's rows: the tokens' values of a pass (six tokens, 24 KB)
/// stay in L1 while every row group streams past them.
const PASS: usize = 1024;

/// Rows `r0..r0 + R` of `rows` (`cols` f32 each) against tokens `t0..t0 + T` over weights
/// `k0..k1` (whole vectors), adding into the pairs' accumulators `acc[r * n + t]` (`n`
/// tokens).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<V: Lanes, const R: usize, const T: usize>(
    rows: &[f32],
    cols: usize,
    (r0, t0): (usize, usize),
    x: &[&[f32]],
    (k0, k1): (usize, usize),
    acc: &mut [V],
    n: usize,
) {
    let row = |r: usize| rows.as_ptr().add((r0 + r) * cols);
    let tok = |t: usize| x[t0 + t].as_ptr();
    let at = |r: usize, t: usize| (r0 + r) * n + t0 + t;
    let mut a = [[V::zero(); T]; R];
    for (r, a) in a.iter_mut().enumerate() {
        for (t, a) in a.iter_mut().enumerate() {
            *a = acc[at(r, t)];
        }
    }
    for k in (k0..k1).step_by(V::N) {
        // A loop, not `array::from_fn`: closures do not inherit the target features.
        let mut w = [V::zero(); R];
        for (r, w) in w.iter_mut().enumerate() {
            *w = V::load(row(r).add(k));
        }
        for t in 0..T {
            let v = V::load(tok(t).add(k));
            for (a, w) in a.iter_mut().zip(&w) {
                a[t] = V::fma(*w, v, a[t]);
            }
        }
    }
    for (r, a) in a.iter().enumerate() {
        for (t, a) in a.iter().enumerate() {
            acc[at(r, t)] = *a;
        }
    }
}

/// Every row of `rows` (`cols` f32 each) against every token of `x`: the weights in passes of
/// `PASS`, each pass over the tokens `T` at a time and the rows `R` at a time (the edges in
/// smaller tiles), each pair's accumulator kept from pass to pass, summed across lanes at the
/// end.
#[inline(always)]
unsafe fn all<V: Lanes, const R: usize, const T: usize>(
    rows: &[f32],
    cols: usize,
    x: &[&[f32]],
    out: &mut [&mut [f32]],
) {
    let (n_rows, n) = (rows.len() / cols, x.len());
    assert!(
        out.len() >= n && out.iter().all(|o| o.len() >= n_rows),
        "short output"
    );
    assert!(x.iter().all(|t| t.len() >= cols), "short activation row");
    let (rw, tw) = (n_rows / R * R, n / T * T);
    let whole = cols / V::N * V::N;
    let mut acc = vec![V::zero(); n_rows * n];
    for k0 in (0..whole).step_by(PASS) {
        let k = (k0, (k0 + PASS).min(whole));
        // Rows outer, tokens inner: a row group's pass stays in L1 while the tokens stream.
        for r0 in (0..rw).step_by(R) {
            for t0 in (0..tw).step_by(T) {
                tile::<V, R, T>(rows, cols, (r0, t0), x, k, &mut acc, n);
            }
            for t0 in tw..n {
                tile::<V, R, 1>(rows, cols, (r0, t0), x, k, &mut acc, n);
            }
        }
        for r0 in rw..n_rows {
            for t0 in (0..tw).step_by(T) {
                tile::<V, 1, T>(rows, cols, (r0, t0), x, k, &mut acc, n);
            }
            for t0 in tw..n {
                tile::<V, 1, 1>(rows, cols, (r0, t0), x, k, &mut acc, n);
            }
        }
    }
    for r in 0..n_rows {
        let row = &rows[r * cols..(r + 1) * cols];
        for (t, o) in out.iter_mut().enumerate().take(n) {
            let mut s = acc[r * n + t].sum();
            for k in whole..cols {
                s += row[k] * x[t][k];
            }
            o[r] = s;
        }
    }
}

/// `out[t][r] = row r · x[t]` for every row of `rows` (`cols` f32 each) and token of `x`, on
/// AVX2 with FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`x86::available()`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn rows_avx2(rows: &[f32], cols: usize, x: &[&[f32]], out: &mut [&mut [f32]]) {
    all::<__m256, 3, 4>(rows, cols, x, out)
}

/// `rows_avx2` on AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F (`avx512_available()`).
#[target_feature(enable = "avx512f,avx2,fma")]
pub unsafe fn rows_avx512(rows: &[f32], cols: usize, x: &[&[f32]], out: &mut [&mut [f32]]) {
    all::<__m512, 4, 6>(rows, cols, x, out)
}

/// Whether the CPU runs `rows_avx512`.
pub fn avx512_available() -> bool {
    super::features::available() && is_x86_feature_detected!("avx512f")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// A tile kernel's signature (`rows_avx2`, `rows_avx512`).
    type Kernel = unsafe fn(&[f32], usize, &[&[f32]], &mut [&mut [f32]]);

    /// Every tile shape and edge (rows and tokens not multiples of the tile, columns not of
    /// the lanes) within float reordering of an f64 dot.
    #[test]
    fn tiles_match_an_f64_dot_within_reordering() {
        if !super::super::available() {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C");
            return;
        }
        let mut rng = SplitMix64::new(11);
        for (n_rows, cols, n) in [(1, 8, 1), (7, 37, 5), (13, 896, 11), (25, 200, 13)] {
            let mut v = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.next_signed()).collect() };
            let rows = v(n_rows * cols);
            let x: Vec<Vec<f32>> = (0..n).map(|_| v(cols)).collect();
            let xs: Vec<&[f32]> = x.iter().map(|t| t.as_slice()).collect();
            let mut kernels: Vec<(&str, Kernel)> = vec![("AVX2", rows_avx2)];
            if avx512_available() {
                kernels.push(("AVX-512", rows_avx512));
            } else {
                eprintln!("AVX-512 tiles skipped: no AVX-512F on this CPU");
            }
            for (name, kernel) in kernels {
                let mut out = vec![vec![f32::NAN; n_rows]; n];
                let mut outs: Vec<&mut [f32]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
                // SAFETY: the features were checked above.
                unsafe { kernel(&rows, cols, &xs, &mut outs) };
                for (t, o) in out.iter().enumerate() {
                    for (r, &got) in o.iter().enumerate() {
                        let row = &rows[r * cols..(r + 1) * cols];
                        let (want, mag) =
                            row.iter().zip(&x[t]).fold((0f64, 0f64), |(s, m), (a, b)| {
                                (s + *a as f64 * *b as f64, m + (*a as f64 * *b as f64).abs())
                            });
                        let bound = cols as f64 * 1.2e-7 * mag + 1e-6;
                        assert!(
                            (got as f64 - want).abs() <= bound,
                            "{name} {n_rows}x{cols}, {n} tokens: row {r} token {t}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
