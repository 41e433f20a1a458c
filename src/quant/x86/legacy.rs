//! AVX2 kernels for the legacy-quant dot products (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights with
//! Q8_0/Q8_1 activations), the decode hot loop, one row at a time, in pairs, or against four
//! activation rows.
//!
//! They compute exactly what the scalar reference in `legacy` computes, bit for bit, because
//! the reference already follows the order of llama.cpp's x86 kernels (`simd_order`): per block,
//! eight integer lane sums of four consecutive products (exact, so `maddubs`+`madd` gives the
//! same integers), converted to f32 and accumulated by one 8-lane FMA with `d_w * d_a`, reduced
//! at the end by `hsum_float_8`; the min terms of Q4_1/Q5_1 accumulate in a scalar. The tests
//! compare every kernel with the reference on random rows by bit pattern.
//!
//! Written by hand with `std::arch` (no portable-SIMD crate gives `maddubs`), used only after
//! run-time detection of AVX2 and FMA.

use std::arch::x86_64::*;

use super::loads::{
    f16_pair, f16_splat, high_bits, hsum, lanes_signed, lanes_unsigned, load32, nibbles, u32_at,
};
use super::prefetch::prefetch_ahead;
use super::q5_0::{lanes_q5_0, q5_0_unsigned};
use crate::quant::blocks::{BlockQ8_0, BlockQ8_1};

fn check(w: &[u8], bytes: usize, blocks: usize) {
    assert_eq!(
        w.len(),
        blocks * bytes,
        "weight row of {} bytes does not match {blocks} activation blocks",
        w.len()
    );
}

/// A row's dot through its type's block step (`q4_0_block`, ...): the blocks in order, each
/// line `PREFETCH_AHEAD` past it asked for (a decode product streams its matrix), and `fin`
/// reducing the accumulators.
#[inline(always)]
unsafe fn one_row<B>(
    w: &[u8],
    bytes: usize,
    a: &[B],
    step: unsafe fn(&[u8], &B, &mut __m256, &mut f32),
    fin: unsafe fn(__m256, f32) -> f32,
) -> f32 {
    check(w, bytes, a.len());
    let (mut acc, mut summs) = (_mm256_setzero_ps(), 0f32);
    for (b, y) in w.chunks_exact(bytes).zip(a) {
        prefetch_ahead(b.as_ptr());
        step(b, y, &mut acc, &mut summs);
    }
    fin(acc, summs)
}

/// Two consecutive rows' dots with one activation row, block by block side by side: each row
/// keeps its own accumulators and takes exactly `one_row`'s steps in its order (same bits), and
/// the two chains are independent, so the core overlaps one row's FMA and min-sum latencies
/// with the other's work (a one-token product's rows are short: 18 blocks for a 576-wide row).
/// The prefetches walk the pair's bytes in address order: step `i` asks for the lines
/// `PREFETCH_AHEAD` past the pair's blocks `2i` and `2i + 1`, counting through row 0 and then
/// row 1 as one stream. Asking past each row's own block `i` instead (two ranges a row apart,
/// interleaved) made Q8_0 streamed from memory slower than one row at a time. Used for Q4_1
/// alone (`rows_q4_1_q8_1` says why).
#[inline(always)]
unsafe fn two_rows<B>(
    w: [&[u8]; 2],
    bytes: usize,
    a: &[B],
    step: unsafe fn(&[u8], &B, &mut __m256, &mut f32),
    fin: unsafe fn(__m256, f32) -> f32,
) -> [f32; 2] {
    w.iter().for_each(|w| check(w, bytes, a.len()));
    let (mut acc, mut summs) = ([_mm256_setzero_ps(); 2], [0f32; 2]);
    let mut ahead = w[0].as_ptr();
    for ((b0, b1), y) in w[0]
        .chunks_exact(bytes)
        .zip(w[1].chunks_exact(bytes))
        .zip(a)
    {
        prefetch_ahead(ahead);
        prefetch_ahead(ahead.wrapping_add(bytes));
        ahead = ahead.wrapping_add(2 * bytes);
        step(b0, y, &mut acc[0], &mut summs[0]);
        step(b1, y, &mut acc[1], &mut summs[1]);
    }
    [fin(acc[0], summs[0]), fin(acc[1], summs[1])]
}

/// The reduction of a type without min terms: `hsum_float_8`.
#[inline(always)]
unsafe fn sum_plain(acc: __m256, _summs: f32) -> f32 {
    hsum(acc)
}

/// The reduction of Q4_1/Q5_1: `hsum_float_8` plus the min terms' sum.
#[inline(always)]
unsafe fn sum_with_mins(acc: __m256, summs: f32) -> f32 {
    hsum(acc) + summs
}

/// `out[r]` = the dot of row `r` of `rows` with `a`, through `two_rows` for each pair of rows
/// and `one_row` for an odd last one.
#[inline(always)]
unsafe fn row_pairs<B>(
    rows: &[u8],
    row_bytes: usize,
    bytes: usize,
    a: &[B],
    out: &mut [f32],
    step: unsafe fn(&[u8], &B, &mut __m256, &mut f32),
    fin: unsafe fn(__m256, f32) -> f32,
) {
    let mut pairs = rows.chunks_exact(2 * row_bytes);
    let mut outs = out.chunks_exact_mut(2);
    for (p, o) in (&mut pairs).zip(&mut outs) {
        let (w0, w1) = p.split_at(row_bytes);
        let [v0, v1] = two_rows([w0, w1], bytes, a, step, fin);
        (o[0], o[1]) = (v0, v1);
    }
    let tail = pairs.remainder().chunks_exact(row_bytes);
    for (r, o) in tail.zip(outs.into_remainder()) {
        *o = one_row(r, bytes, a, step, fin);
    }
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    one_row(w, 18, a, q4_0_block, sum_plain)
}

/// One Q4_0 block of a row's dot: `acc` advanced as llama.cpp's loop does.
#[inline(always)]
unsafe fn q4_0_block(b: &[u8], y: &BlockQ8_0, acc: &mut __m256, _summs: &mut f32) {
    let q = _mm256_sub_epi8(nibbles(&b[2..18]), _mm256_set1_epi8(8));
    let d = _mm256_set1_ps(f16_pair(b, 0).0 * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), *acc);
}

/// `R` Q5_0 weight rows against `T` activation rows: each weight block unpacked once for the
/// `T` tokens, each (row, token) pair its own accumulator. Every result is exactly the
/// single-row kernel's: the same operations per pair in the same block order. (R stays 1 in
/// use: two rows for one token gained nothing in the engine, see `rows_q4_1_q8_1`.)
#[inline(always)]
unsafe fn q5_0_tile<const R: usize, const T: usize>(
    w: [&[u8]; R],
    a: [&[BlockQ8_0]; T],
) -> [[f32; T]; R] {
    let blocks = a[0].len();
    w.iter().for_each(|w| check(w, 22, blocks));
    a.iter()
        .for_each(|a| assert_eq!(a.len(), blocks, "activation rows differ in length"));
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    for i in 0..blocks {
        for r in 0..R {
            // SAFETY: `check` above: every row holds `blocks` blocks of 22 bytes.
            let b = unsafe { w[r].get_unchecked(22 * i..22 * i + 22) };
            let u = q5_0_unsigned(b);
            let dw = f16_splat(b);
            for t in 0..T {
                // SAFETY: every activation row holds `blocks` blocks (asserted above).
                let y = unsafe { a[t].get_unchecked(i) };
                let d = _mm256_mul_ps(dw, _mm256_set1_ps(y.d));
                acc[r][t] = _mm256_fmadd_ps(d, lanes_q5_0(u, y), acc[r][t]);
            }
        }
    }
    std::array::from_fn(|r| std::array::from_fn(|t| hsum(acc[r][t])))
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    one_row(w, 22, a, q5_0_block, sum_plain)
}

/// One Q5_0 block of a row's dot: `q5_0_tile`'s operations for one (row, token) pair.
#[inline(always)]
unsafe fn q5_0_block(b: &[u8], y: &BlockQ8_0, acc: &mut __m256, _summs: &mut f32) {
    let d = _mm256_mul_ps(f16_splat(b), _mm256_set1_ps(y.d));
    *acc = _mm256_fmadd_ps(d, lanes_q5_0(q5_0_unsigned(b), y), *acc);
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    one_row(w, 34, a, q8_0_block, sum_plain)
}

/// One Q8_0 block of a row's dot (see `q4_0_block`).
#[inline(always)]
unsafe fn q8_0_block(b: &[u8], y: &BlockQ8_0, acc: &mut __m256, _summs: &mut f32) {
    let q = _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i);
    let d = _mm256_set1_ps(f16_pair(b, 0).0 * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), *acc);
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    one_row(w, 20, a, q4_1_block, sum_with_mins)
}

/// One Q4_1 block of a row's dot: `acc` and the min terms' scalar `summs` advanced as
/// llama.cpp's loop does.
#[inline(always)]
unsafe fn q4_1_block(b: &[u8], y: &BlockQ8_1, acc: &mut __m256, summs: &mut f32) {
    let (dw, mw) = f16_pair(b, 0);
    *summs += mw * y.s;
    let d = _mm256_set1_ps(dw * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_unsigned(nibbles(&b[4..20]), load32(&y.qs)), *acc);
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    one_row(w, 24, a, q5_1_block, sum_with_mins)
}

/// One Q5_1 block of a row's dot (see `q4_1_block`).
#[inline(always)]
unsafe fn q5_1_block(b: &[u8], y: &BlockQ8_1, acc: &mut __m256, summs: &mut f32) {
    let (dw, mw) = f16_pair(b, 0);
    *summs += mw * y.s;
    let q = _mm256_or_si256(nibbles(&b[8..24]), high_bits(u32_at(b, 4)));
    let d = _mm256_set1_ps(dw * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_unsigned(q, load32(&y.qs)), *acc);
}

/// Four activation rows against one weight row (a prompt's products): each block's weights
/// are unpacked once for the four. Every result is exactly its single-row kernel's: the same
/// operations per (row, activation) pair, in the same block order, with its own accumulators.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_1_q8_1_x4(w: &[u8], a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    a.iter().for_each(|a| check(w, 20, a.len()));
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut summs = [0f32; 4];
    for (i, b) in w.chunks_exact(20).enumerate() {
        let (dw, mw) = f16_pair(b, 0);
        let q = nibbles(&b[4..20]);
        for t in 0..4 {
            let y = &a[t][i];
            summs[t] += mw * y.s;
            let d = _mm256_set1_ps(dw * y.d);
            acc[t] = _mm256_fmadd_ps(d, lanes_unsigned(q, load32(&y.qs)), acc[t]);
        }
    }
    std::array::from_fn(|t| hsum(acc[t]) + summs[t])
}

/// The Q8_0-activation four-row loop: `levels` gives a block's 32 signed weight levels; the
/// rest is `vec_dot_q*_0_q8_0`'s per-pair arithmetic (see `vec_dot_q4_1_q8_1_x4`).
#[inline(always)]
unsafe fn q8_0_acts_x4(
    w: &[u8],
    bytes: usize,
    a: [&[BlockQ8_0]; 4],
    levels: impl Fn(&[u8]) -> __m256i,
) -> [f32; 4] {
    a.iter().for_each(|a| check(w, bytes, a.len()));
    let mut acc = [_mm256_setzero_ps(); 4];
    for (i, b) in w.chunks_exact(bytes).enumerate() {
        let q = levels(b);
        let dw = f16_pair(b, 0).0;
        for t in 0..4 {
            let y = &a[t][i];
            let d = _mm256_set1_ps(dw * y.d);
            acc[t] = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), acc[t]);
        }
    }
    std::array::from_fn(|t| hsum(acc[t]))
}

/// `vec_dot_q5_0_q8_0` for four activation rows (see `vec_dot_q4_1_q8_1_x4`).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_0_q8_0_x4(w: &[u8], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    q5_0_tile([w], a)[0]
}

/// `vec_dot_q8_0_q8_0` for four activation rows (see `vec_dot_q4_1_q8_1_x4`).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q8_0_q8_0_x4(w: &[u8], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    q8_0_acts_x4(w, 34, a, |b| {
        _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i)
    })
}
/// `out[r] = vec_dot_q4_1_q8_1(row r, a)` for every row of `rows`, two rows at a time
/// (`row_pairs`).
///
/// Q4_1 alone goes in pairs: in the engine its products gained from the second chain, while
/// the other types' heavier block steps, streamed by two threads at once, gained nothing or
/// lost, though the kernel bench had them faster.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q4_1_q8_1(rows: &[u8], row_bytes: usize, a: &[BlockQ8_1], out: &mut [f32]) {
    row_pairs(rows, row_bytes, 20, a, out, q4_1_block, sum_with_mins)
}

row_loops!(rows_q4_0_q8_0 = vec_dot_q4_0_q8_0, BlockQ8_0);
row_loops!(rows_q5_0_q8_0 = vec_dot_q5_0_q8_0, BlockQ8_0);
row_loops!(rows_q8_0_q8_0 = vec_dot_q8_0_q8_0, BlockQ8_0);
row_loops!(rows_q5_1_q8_1 = vec_dot_q5_1_q8_1, BlockQ8_1);
row_loops!(rows_q4_1_q8_1_x4 = vec_dot_q4_1_q8_1_x4 x4, BlockQ8_1);
row_loops!(rows_q5_0_q8_0_x4 = vec_dot_q5_0_q8_0_x4 x4, BlockQ8_0);
row_loops!(rows_q8_0_q8_0_x4 = vec_dot_q8_0_q8_0_x4 x4, BlockQ8_0);
