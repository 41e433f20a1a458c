//! Float-weight dots (F32, F16, BF16) on AVX2: `float::dot_lanes`' eight partial sums are one
//! 256-bit register (lane l adds w[i] * x[i] for i % 8 == l, multiply and add rounded
//! separately, in index order), so the bits are the scalar reference's; the lanes are then
//! summed as it sums them.
//!
//! A prompt's products take two rows against four tokens per step (`rows_f32_x4`, and
//! `rows_wide_x4` on F16/BF16 rows widened to f32 once per task by `widen`): each pair keeps
//! its own register in the single dot's order, each token's eight values are loaded once for
//! the two rows and each row's once for the four tokens, and the eight
//! independent chains hide the add latency that bounds a single dot. The rows go in passes of
//! `PASS` weights so the tokens' values (f32, twice the weights' bytes) are read from L1.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::prefetch::prefetch_ahead;

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
        if (i * T::BYTES) % 64 == 0 {
            // A one-token product streams its rows (`prefetch_ahead` says why).
            prefetch_ahead(w.as_ptr().add(i * T::BYTES));
        }
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

/// Weights per pass of `rows_x4` over a task's rows: four tokens' values for one pass (8 KB)
/// stay in L1 while every row of the task streams past them.
const PASS: usize = 512;

/// `R` rows against `T` activation rows over weights `k0..k1` (multiples of 8 within the
/// rows), adding into the pairs' lanes `acc[row][token]` in index order.
#[inline(always)]
unsafe fn tile<W: Wide, const R: usize, const T: usize>(
    w: [&[u8]; R],
    x: [&[f32]; T],
    k0: usize,
    k1: usize,
    lanes: &mut [[__m256; T]; R],
) {
    let mut acc = *lanes;
    for i in (k0..k1).step_by(8) {
        let wv: [__m256; R] = std::array::from_fn(|r| W::load8(w[r].as_ptr().add(i * W::BYTES)));
        for t in 0..T {
            let xv = _mm256_loadu_ps(x[t].as_ptr().add(i));
            for r in 0..R {
                acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(wv[r], xv));
            }
        }
    }
    *lanes = acc;
}

/// `dot`'s end for one pair: the lanes, the weights past the last whole eight, the sum.
#[inline(always)]
unsafe fn finish<W: Wide>(acc: __m256, w: &[u8], x: &[f32], whole: usize) -> f32 {
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    for i in whole..x.len() {
        lanes[i % 8] += W::one(w, i) * x[i];
    }
    lanes.iter().sum()
}

/// `out[t][r] = dot(row r, x[t])` for every row of `rows` and four tokens. The weights go in
/// passes of `PASS`, each pass over all the rows (two at a time, an odd last one alone), so
/// the four tokens' values of a pass are read from L1 by every row; each pair's lanes carry
/// over from pass to pass in index order, so the bits are `dot`'s.
#[inline(always)]
unsafe fn rows_x4<W: Wide>(rows: &[u8], row_bytes: usize, x: [&[f32]; 4], out: [&mut [f32]; 4]) {
    let n = x[0].len();
    assert!(row_bytes >= n * W::BYTES, "a weight row is short");
    for xt in &x {
        assert_eq!(xt.len(), n, "activation rows differ in length");
    }
    let count = rows.len() / row_bytes;
    let row = |r: usize| &rows[r * row_bytes..(r + 1) * row_bytes];
    thread_local! {
        static LANES: std::cell::RefCell<Vec<[[__m256; 4]; 2]>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    // Taken out of the thread-local, not borrowed in a closure: a closure does not inherit
    // this function's target features, and the kernels inlined into it would not be AVX2.
    let mut acc = LANES.take();
    acc.clear();
    acc.resize(count.div_ceil(2), [[_mm256_setzero_ps(); 4]; 2]);
    let whole = n / 8 * 8;
    for k0 in (0..whole).step_by(PASS) {
        let k1 = (k0 + PASS).min(whole);
        for (p, a) in acc.iter_mut().enumerate() {
            if 2 * p + 1 < count {
                tile::<W, 2, 4>([row(2 * p), row(2 * p + 1)], x, k0, k1, a);
            } else {
                let mut one = [a[0]];
                tile::<W, 1, 4>([row(2 * p)], x, k0, k1, &mut one);
                a[0] = one[0];
            }
        }
    }
    for r in 0..count {
        for t in 0..4 {
            out[t][r] = finish::<W>(acc[r / 2][r % 2][t], row(r), x[t], whole);
        }
    }
    LANES.set(acc);
}

/// F16 or BF16 weights (`ty`) widened to f32 into `out` (cleared first): exact, so a prompt
/// task's rows can be widened once and then go through the F32 kernel with the same bits.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn widen(ty: crate::quant::GgmlType, w: &[u8], out: &mut Vec<f32>) {
    let n = w.len() / 2;
    out.clear();
    out.reserve(n);
    // Stored straight into the spare room (a copy through a stack array per eight weights
    // was most of a prompt task's widening).
    widen_to(ty, w, out.spare_capacity_mut().as_mut_ptr() as *mut f32);
    // SAFETY: `widen_to` wrote every one of the `n` values.
    out.set_len(n);
}

/// F16 or BF16 weights (`ty`) widened to f32 into the first `w.len() / 2` values of `out`,
/// exactly (`widen` into a buffer the caller keeps).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn widen_into(ty: crate::quant::GgmlType, w: &[u8], out: &mut [f32]) {
    assert!(out.len() >= w.len() / 2, "short widening buffer");
    widen_to(ty, w, out.as_mut_ptr())
}

/// Every weight of `w` widened into `dst`, which has room for `w.len() / 2` values.
#[inline(always)]
unsafe fn widen_to(ty: crate::quant::GgmlType, w: &[u8], dst: *mut f32) {
    use crate::quant::GgmlType;
    #[inline(always)]
    unsafe fn all<W: Wide>(w: &[u8], dst: *mut f32) {
        let n = w.len() / W::BYTES;
        let whole = n / 8 * 8;
        for i in (0..whole).step_by(8) {
            _mm256_storeu_ps(dst.add(i), W::load8(w.as_ptr().add(i * W::BYTES)));
        }
        for i in whole..n {
            dst.add(i).write(W::one(w, i));
        }
    }
    match ty {
        GgmlType::F16 => all::<F16>(w, dst),
        GgmlType::BF16 => all::<BF16>(w, dst),
        _ => panic!("{ty} weights are not widened"),
    }
}

/// `rows_f32_x4` on rows already in f32: `out[t][r] = dot(row r, x[t])` for the rows of
/// `rows` (`row_len` weights each).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_wide_x4(rows: &[f32], row_len: usize, x: [&[f32]; 4], out: [&mut [f32]; 4]) {
    // SAFETY: any f32 is four initialised bytes; the byte view covers the same memory.
    let bytes = std::slice::from_raw_parts(rows.as_ptr() as *const u8, rows.len() * 4);
    rows_x4::<F32>(bytes, row_len * 4, x, out)
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

/// `dot` under `fast` numerics: four independent fused multiply-add chains of eight lanes, so
/// a core takes 32 weights per chain latency instead of 8 (the exact dot's one chain of
/// unfused steps holds a one-token product well under the memory's rate); the sums are
/// reordered, so the result differs from the reference by float rounding. `AHEAD`: whether
/// it asks for the weights ahead in software (`features::f16_rows_prefetch`); the same sums
/// either way.
#[inline(always)]
unsafe fn dot_fast<T: Wide, const AHEAD: bool>(w: &[u8], x: &[f32]) -> f32 {
    dots_fast::<T, AHEAD, 1>([w], x)[0]
}

/// `dot_fast` of `N` rows at once, each row's sums in the single row's order (the same bits),
/// their loads interleaved step by step.
#[inline(always)]
unsafe fn dots_fast<T: Wide, const AHEAD: bool, const N: usize>(
    w: [&[u8]; N],
    x: &[f32],
) -> [f32; N] {
    let n = w.iter().fold(x.len(), |n, w| n.min(w.len() / T::BYTES));
    let mut acc = [[_mm256_setzero_ps(); 4]; N];
    let whole = n / 32 * 32;
    for i in (0..whole).step_by(32) {
        for w in w {
            if AHEAD && (i * T::BYTES) % 64 == 0 {
                prefetch_ahead(w.as_ptr().add(i * T::BYTES));
            }
            if AHEAD && T::BYTES == 4 {
                prefetch_ahead(w.as_ptr().add(i * T::BYTES + 64));
            }
        }
        for k in 0..4 {
            let xv = _mm256_loadu_ps(x.as_ptr().add(i + 8 * k));
            for (w, acc) in w.iter().zip(acc.iter_mut()) {
                let wv = T::load8(w.as_ptr().add((i + 8 * k) * T::BYTES));
                acc[k] = _mm256_fmadd_ps(wv, xv, acc[k]);
            }
        }
    }
    let mut sums = [0f32; N];
    for ((w, acc), s) in w.iter().zip(acc).zip(sums.iter_mut()) {
        let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
        let tail: f32 = (whole..n).map(|i| T::one(w, i) * x[i]).sum();
        *s = lanes.iter().sum::<f32>() + tail;
    }
    sums
}

/// `out[r] = dot_fast(row r, x)` for the rows of `rows`, taken as two streams: the first half
/// of the rows beside the second, a row of each per step. A single stream of rows dotted one
/// after another read memory at two thirds of what the two halves read together on an AMD
/// EPYC (docs/measurements/cpu-engine.md); the rows' sums are the same bits either way.
#[inline(always)]
unsafe fn rows_two_streams<T: Wide, const AHEAD: bool>(
    rows: &[u8],
    row_bytes: usize,
    x: &[f32],
    out: &mut [f32],
) {
    let n = out.len().min(rows.len() / row_bytes);
    let (first, second) = rows[..n * row_bytes].split_at(n / 2 * row_bytes);
    let (out_first, out_second) = out[..n].split_at_mut(n / 2);
    let pairs = first
        .chunks_exact(row_bytes)
        .zip(second.chunks_exact(row_bytes));
    for ((a, b), (oa, ob)) in pairs.zip(out_first.iter_mut().zip(out_second.iter_mut())) {
        [*oa, *ob] = dots_fast::<T, AHEAD, 2>([a, b], x);
    }
    if n % 2 == 1 {
        out_second[n / 2] = dot_fast::<T, AHEAD>(&second[n / 2 * row_bytes..], x);
    }
}

/// `out[r] = row r · x` for the F32, F16 or BF16 rows of `rows` (`row_bytes` each) under
/// `fast` numerics (`dot_fast`, two streams of rows; F16 rows with the software prefetch only
/// where this CPU streams them faster with it); None for another type.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_fast(
    ty: crate::quant::GgmlType,
    rows: &[u8],
    row_bytes: usize,
    x: &[f32],
    out: &mut [f32],
) -> Option<()> {
    use crate::quant::GgmlType as G;
    match ty {
        G::F32 => rows_two_streams::<F32, true>(rows, row_bytes, x, out),
        G::F16 if super::features::f16_rows_prefetch() => {
            rows_two_streams::<F16, true>(rows, row_bytes, x, out)
        }
        G::F16 => rows_two_streams::<F16, false>(rows, row_bytes, x, out),
        G::BF16 => rows_two_streams::<BF16, true>(rows, row_bytes, x, out),
        _ => return None,
    }
    Some(())
}

/// `x` rounded to the nearest f16 (to nearest even, as `half` rounds), kept as f32, into
/// `out`: eight values a conversion there and back, in one pass.
///
/// # Safety
/// The CPU must support AVX2 and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn round_f16_into(x: &[f32], out: &mut Vec<f32>) {
    out.clear();
    out.resize(x.len(), 0.0);
    let whole = x.len() / 8 * 8;
    for i in (0..whole).step_by(8) {
        let v = _mm256_loadu_ps(x.as_ptr().add(i));
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
        _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
    }
    for i in whole..x.len() {
        out[i] = f16::from_f32(x[i]).to_f32();
    }
}

row_loops!(rows_f32 = dot_f32_row, f32);
row_loops!(rows_f16 = dot_f16_row, f32);
row_loops!(rows_bf16 = dot_bf16_row, f32);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::float;
    use crate::rng::SplitMix64;

    /// The F16C rounding gives `half`'s bits for every value: random ones over f16's range,
    /// its subnormals, ties, overflow to infinity, signed zeros and NaN; a tail past the last
    /// eight.
    #[test]
    fn f16c_rounding_matches_half() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = SplitMix64::new(0x0f16);
        let mut x: Vec<f32> = (0..1000)
            .map(|i| rng.next_signed() * 2f32.powi(i % 40 - 26))
            .collect();
        x.extend([
            0.0,
            -0.0,
            65504.0,
            65519.9,
            65520.0,
            -1e9,
            1e-8,
            -5.9604645e-8,
            2.9802322e-8,
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            f32::NAN,
            f32::INFINITY,
        ]);
        let mut out = Vec::new();
        // SAFETY: the features were just detected.
        unsafe { round_f16_into(&x, &mut out) };
        assert_eq!(out.len(), x.len());
        for (&v, &got) in x.iter().zip(&out) {
            let want = f16::from_f32(v).to_f32();
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{v:e}: {got:e} against {want:e}"
            );
        }
    }

    /// The fast one-token rows of each float type (lengths with and without a tail past the
    /// 32-weight step; odd and even counts of rows, which `rows_two_streams` pairs) within
    /// float reordering of an f64 dot of the same values, each row the bits of its own dot.
    #[test]
    fn fast_float_rows_match_an_f64_dot() {
        use crate::quant::GgmlType as G;
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = SplitMix64::new(0xf1_0a75);
        for ty in [G::F32, G::F16, G::BF16] {
            for (cols, n_rows) in [(32usize, 1usize), (96, 4), (101, 5), (896, 5), (896, 6)] {
                let vals: Vec<f32> = (0..cols * n_rows).map(|_| rng.next_signed()).collect();
                let x: Vec<f32> = (0..cols).map(|_| rng.next_signed()).collect();
                let bytes: Vec<u8> = vals
                    .iter()
                    .flat_map(|&v| match ty {
                        G::F32 => v.to_le_bytes().to_vec(),
                        G::F16 => f16::from_f32(v).to_le_bytes().to_vec(),
                        _ => half::bf16::from_f32(v).to_le_bytes().to_vec(),
                    })
                    .collect();
                let rb = bytes.len() / n_rows;
                let mut out = vec![0f32; n_rows];
                // SAFETY: the features were just detected; one result per row.
                let ran = unsafe { rows_fast(ty, &bytes, rb, &x, &mut out) };
                assert!(ran.is_some());
                for (r, row) in bytes.chunks_exact(rb).enumerate() {
                    let w: Vec<f64> = (0..cols)
                        .map(|i| match ty {
                            G::F32 => F32::one(row, i) as f64,
                            G::F16 => F16::one(row, i) as f64,
                            _ => BF16::one(row, i) as f64,
                        })
                        .collect();
                    let want: f64 = w.iter().zip(&x).map(|(w, &x)| w * x as f64).sum();
                    let scale: f64 = w.iter().zip(&x).map(|(w, &x)| (w * x as f64).abs()).sum();
                    let got = out[r] as f64;
                    assert!(
                        (got - want).abs() <= 1e-5 * scale.max(1.0),
                        "{ty:?} x {cols}, row {r}: {got} vs {want}"
                    );
                    // SAFETY: as above.
                    let (ahead, not) = unsafe {
                        match ty {
                            G::F32 => both::<F32>(row, &x),
                            G::F16 => both::<F16>(row, &x),
                            _ => both::<BF16>(row, &x),
                        }
                    };
                    assert_eq!(
                        ahead.to_bits(),
                        not.to_bits(),
                        "prefetching or not, one sum"
                    );
                    assert_eq!(ahead.to_bits(), out[r].to_bits());
                }
            }
        }
        let mut out = [0f32; 1];
        // SAFETY: as above.
        let other = unsafe { rows_fast(G::Q8_0, &[0u8; 34], 34, &[0.0; 32], &mut out) };
        assert!(other.is_none(), "only the float types");
    }

    /// A row's `dot_fast` with and without the software prefetch.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn both<T: Wide>(row: &[u8], x: &[f32]) -> (f32, f32) {
        (dot_fast::<T, true>(row, x), dot_fast::<T, false>(row, x))
    }

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
        use crate::quant::GgmlType;
        let mut rng = SplitMix64::new(6);
        for (rows, n) in [
            (1usize, 8usize),
            (2, 9),
            (3, 64),
            (5, 250),
            (4, 896),
            (3, 1031),
        ] {
            let w: Vec<f32> = (0..rows * n).map(|_| rng.next_signed() * 3.0).collect();
            let x: Vec<Vec<f32>> = (0..4)
                .map(|_| (0..n).map(|_| rng.next_signed()).collect())
                .collect();
            type Scalar = fn(&[u8], &[f32]) -> f32;
            type Kind = (
                GgmlType,
                fn(&[f32], &mut Vec<u8>),
                fn(&[f32]) -> Vec<f32>,
                Scalar,
            );
            let kinds: [Kind; 3] = [
                (
                    GgmlType::F32,
                    float::quantize_f32,
                    |x| x.to_vec(),
                    float::dot_f32_row,
                ),
                (
                    GgmlType::F16,
                    float::quantize_f16,
                    float::round_f16,
                    float::dot_f16_row,
                ),
                (
                    GgmlType::BF16,
                    float::quantize_bf16,
                    float::round_bf16,
                    float::dot_bf16_row,
                ),
            ];
            for (ty, quantize, round, scalar) in kinds {
                let mut m = Vec::new();
                quantize(&w, &mut m);
                let xr: Vec<Vec<f32>> = x.iter().map(|v| round(v)).collect();
                let mut out = vec![vec![0f32; rows]; 4];
                let [o0, o1, o2, o3] = &mut out[..] else {
                    unreachable!()
                };
                let a = std::array::from_fn(|t| xr[t].as_slice());
                let mut wide = Vec::new();
                // SAFETY: the features were just checked.
                unsafe {
                    if ty == GgmlType::F32 {
                        rows_f32_x4(&m, n * 4, a, [o0, o1, o2, o3]);
                    } else {
                        widen(ty, &m, &mut wide);
                        rows_wide_x4(&wide, n, a, [o0, o1, o2, o3]);
                    }
                }
                let row_bytes = m.len() / rows;
                for (r, row) in m.chunks_exact(row_bytes).enumerate() {
                    for t in 0..4 {
                        let want = scalar(row, &xr[t]);
                        assert_eq!(
                            out[t][r].to_bits(),
                            want.to_bits(),
                            "{ty} {rows}x{n} row {r} token {t}"
                        );
                    }
                }
            }
        }
    }
}
