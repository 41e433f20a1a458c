//! Float-weight dots (F32, F16, BF16) on AVX2: `float::dot_lanes`' eight partial sums are one
//! 256-bit register (lane l adds w[i] * x[i] for i % 8 == l, multiply and add rounded
//! separately, in index order), so the bits are the scalar reference's; the lanes are then
//! summed as it sums them.
//!
//! A prompt's products take two rows against four tokens per step (`rows_*_x4`): each pair
//! keeps its own register in the single dot's order, the rows' weights are widened once for
//! the four tokens and each token's eight values loaded once for the two rows, and the eight
//! independent chains hide the add latency that bounds a single dot.

use std::arch::x86_64::*;

use half::{bf16, f16};

/// Eight weights of a row from `w` at weight `i` as f32.
trait Wide {
    const BYTES: usize;
    unsafe fn load8(w: *const u8) -> __m256;
    fn one(w: &[u8], i: usize) -> f32;
}

struct F32;
struct F16;
struct BF16;

impl Wide for F32 {
    const BYTES: usize = 4;
    #[inline(always)]
    unsafe fn load8(w: *const u8) -> __m256 {
        _mm256_loadu_ps(w as *const f32)
    }
    fn one(w: &[u8], i: usize) -> f32 {
        f32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]])
    }
}

impl Wide for F16 {
    const BYTES: usize = 2;
    #[inline(always)]
    unsafe fn load8(w: *const u8) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(w as *const __m128i))
    }
    fn one(w: &[u8], i: usize) -> f32 {
        f16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32()
    }
}

impl Wide for BF16 {
    const BYTES: usize = 2;
    #[inline(always)]
    unsafe fn load8(w: *const u8) -> __m256 {
        let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(w as *const __m128i));
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(h))
    }
    fn one(w: &[u8], i: usize) -> f32 {
        bf16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32()
    }
}

/// `float::dot_lanes` of a row of `T` weights and `x`, eight lanes at a time.
#[inline(always)]
unsafe fn dot<T: Wide>(w: &[u8], x: &[f32]) -> f32 {
    let n = x.len().min(w.len() / T::BYTES);
    let mut acc = _mm256_setzero_ps();
    let whole = n / 8 * 8;
    for i in (0..whole).step_by(8) {
        let wv = T::load8(w.as_ptr().add(i * T::BYTES));
        let xv = _mm256_loadu_ps(x.as_ptr().add(i));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(wv, xv));
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    for i in whole..n {
        lanes[i % 8] += T::one(w, i) * x[i];
    }
    lanes.iter().sum()
}

/// `dot` of `R` rows with `T` activation rows: `[row][token]`, each pair with its own lanes.
#[inline(always)]
unsafe fn tile<W: Wide, const R: usize, const T: usize>(
    w: [&[u8]; R],
    x: [&[f32]; T],
) -> [[f32; T]; R] {
    let n = x[0].len();
    for r in 0..R {
        assert!(w[r].len() >= n * W::BYTES, "a weight row is short");
    }
    for t in 0..T {
        assert_eq!(x[t].len(), n, "activation rows differ in length");
    }
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    let whole = n / 8 * 8;
    for i in (0..whole).step_by(8) {
        let wv: [__m256; R] = std::array::from_fn(|r| W::load8(w[r].as_ptr().add(i * W::BYTES)));
        for t in 0..T {
            let xv = _mm256_loadu_ps(x[t].as_ptr().add(i));
            for r in 0..R {
                acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(wv[r], xv));
            }
        }
    }
    std::array::from_fn(|r| {
        std::array::from_fn(|t| {
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r][t]);
            for i in whole..n {
                lanes[i % 8] += W::one(w[r], i) * x[t][i];
            }
            lanes.iter().sum()
        })
    })
}

/// `out[t][r] = dot(row r, x[t])` for every row of `rows` and four tokens, two rows at a
/// time (`tile`), an odd last row alone.
#[inline(always)]
unsafe fn rows_x4<W: Wide>(rows: &[u8], row_bytes: usize, x: [&[f32]; 4], out: [&mut [f32]; 4]) {
    let mut pairs = rows.chunks_exact(2 * row_bytes);
    let mut r = 0;
    for p in &mut pairs {
        let (w0, w1) = p.split_at(row_bytes);
        let v = tile::<W, 2, 4>([w0, w1], x);
        for t in 0..4 {
            (out[t][r], out[t][r + 1]) = (v[0][t], v[1][t]);
        }
        r += 2;
    }
    for w in pairs.remainder().chunks_exact(row_bytes) {
        let [v] = tile::<W, 1, 4>([w], x);
        for t in 0..4 {
            out[t][r] = v[t];
        }
        r += 1;
    }
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_f32_x4(rows: &[u8], row_bytes: usize, x: [&[f32]; 4], out: [&mut [f32]; 4]) {
    rows_x4::<F32>(rows, row_bytes, x, out)
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_f16_x4(rows: &[u8], row_bytes: usize, x: [&[f32]; 4], out: [&mut [f32]; 4]) {
    rows_x4::<F16>(rows, row_bytes, x, out)
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_bf16_x4(rows: &[u8], row_bytes: usize, x: [&[f32]; 4], out: [&mut [f32]; 4]) {
    rows_x4::<BF16>(rows, row_bytes, x, out)
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f32_row(w: &[u8], x: &[f32]) -> f32 {
    dot::<F32>(w, x)
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16_row(w: &[u8], x: &[f32]) -> f32 {
    dot::<F16>(w, x)
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_bf16_row(w: &[u8], x: &[f32]) -> f32 {
    dot::<BF16>(w, x)
}

row_loops!(rows_f32 = dot_f32_row, f32);
row_loops!(rows_f16 = dot_f16_row, f32);
row_loops!(rows_bf16 = dot_bf16_row, f32);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::float;
    use crate::rng::SplitMix64;

    #[test]
    fn float_dots_are_the_scalar_references_bits() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C");
            return;
        }
        let mut rng = SplitMix64::new(5);
        for n in [0usize, 1, 7, 8, 9, 31, 64, 250, 896, 4867] {
            let w: Vec<f32> = (0..n).map(|_| rng.next_signed() * 3.0).collect();
            let x: Vec<f32> = (0..n).map(|_| rng.next_signed()).collect();
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            float::quantize_f32(&w, &mut a);
            float::quantize_f16(&w, &mut b);
            float::quantize_bf16(&w, &mut c);
            let (xh, xb) = (float::round_f16(&x), float::round_bf16(&x));
            // SAFETY: the features were just checked.
            let got = unsafe {
                [
                    dot_f32_row(&a, &x),
                    dot_f16_row(&b, &xh),
                    dot_bf16_row(&c, &xb),
                ]
            };
            let want = [
                float::dot_f32_row(&a, &x),
                float::dot_f16_row(&b, &xh),
                float::dot_bf16_row(&c, &xb),
            ];
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.to_bits(), w.to_bits(), "n = {n}: {g} against {w}");
            }
        }
    }

    #[test]
    fn prompt_tiles_are_the_scalar_references_bits() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C");
            return;
        }
        let mut rng = SplitMix64::new(6);
        for (rows, n) in [(1usize, 8usize), (2, 9), (3, 64), (5, 250), (4, 896)] {
            let w: Vec<f32> = (0..rows * n).map(|_| rng.next_signed() * 3.0).collect();
            let x: Vec<Vec<f32>> = (0..4)
                .map(|_| (0..n).map(|_| rng.next_signed()).collect())
                .collect();
            type Rows4 = unsafe fn(&[u8], usize, [&[f32]; 4], [&mut [f32]; 4]);
            type Scalar = fn(&[u8], &[f32]) -> f32;
            let kinds: [(
                usize,
                fn(&[f32], &mut Vec<u8>),
                fn(&[f32]) -> Vec<f32>,
                Rows4,
                Scalar,
            ); 3] = [
                (
                    4,
                    float::quantize_f32,
                    |x| x.to_vec(),
                    rows_f32_x4,
                    float::dot_f32_row,
                ),
                (
                    2,
                    float::quantize_f16,
                    float::round_f16,
                    rows_f16_x4,
                    float::dot_f16_row,
                ),
                (
                    2,
                    float::quantize_bf16,
                    float::round_bf16,
                    rows_bf16_x4,
                    float::dot_bf16_row,
                ),
            ];
            for (bytes, quantize, round, kernel, scalar) in kinds {
                let mut m = Vec::new();
                quantize(&w, &mut m);
                let xr: Vec<Vec<f32>> = x.iter().map(|v| round(v)).collect();
                let mut out = vec![vec![0f32; rows]; 4];
                let [o0, o1, o2, o3] = &mut out[..] else {
                    unreachable!()
                };
                // SAFETY: the features were just checked.
                unsafe {
                    kernel(
                        &m,
                        n * bytes,
                        std::array::from_fn(|t| xr[t].as_slice()),
                        [o0, o1, o2, o3],
                    )
                };
                for (r, row) in m.chunks_exact(n * bytes).enumerate() {
                    for t in 0..4 {
                        let want = scalar(row, &xr[t]);
                        assert_eq!(
                            out[t][r].to_bits(),
                            want.to_bits(),
                            "{rows}x{n} row {r} token {t}"
                        );
                    }
                }
            }
        }
    }
}
