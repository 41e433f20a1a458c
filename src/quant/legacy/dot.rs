//! Dot products of legacy weight rows with quantized activations, as
//! `ggml_vec_dot_*_generic` in ggml-cpu/quants.c, summed in the order of llama.cpp's x86
//! kernels (`simd_order`): the scalar references the AVX2 kernels (`x86`) match bit for bit.

use super::layout::{
    f16_at, nibbles, nibbles_with_high_bits, u32_at, Q4_0_BYTES, Q4_1_BYTES, Q5_0_BYTES,
    Q5_1_BYTES, Q8_0_BYTES, QK,
};
use crate::quant::blocks::{BlockQ8_0, BlockQ8_1};
use crate::quant::simd_order::{lane_sums, Lanes8};

// ---------------------------------------------------------------------------------------------
// Dot products (`ggml_vec_dot_*_generic` in ggml-cpu/quants.c): per block an exact integer
// dot, then `sumf += (d_w * d_a) * isum` (`+ m_w * s_a` for the `_1` types), f32, block order.

/// Pairs each weight block of `w` with its activation block; panics on a length mismatch.
fn weight_blocks<'a, A>(
    w: &'a [u8],
    bytes: usize,
    a: &'a [A],
) -> impl Iterator<Item = (&'a [u8], &'a A)> {
    assert_eq!(
        w.len(),
        a.len() * bytes,
        "weight row of {} bytes does not match {} activation blocks",
        w.len(),
        a.len()
    );
    w.chunks_exact(bytes).zip(a)
}

/// Per-lane sums of `(q - offset) · a` over four consecutive weights (see `simd_order`).
#[inline(always)]
fn lanes(q: &[u8; QK], offset: i32, a: &[i8; QK]) -> [i32; 8] {
    std::array::from_fn(|l| {
        (4 * l..4 * l + 4)
            .map(|k| (q[k] as i32 - offset) * a[k] as i32)
            .sum()
    })
}

// The dots below follow llama.cpp's x86 kernels (arch/x86/quants.c): per block, the eight lane
// sums are scaled by `d_w * d_a` into an 8-lane FMA accumulator reduced by `hsum_float_8`; the
// Q4_1/Q5_1 min terms accumulate separately (`summs`, an FMA once the compiler contracts it).

#[inline(always)]
pub fn vec_dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Lanes8::default();
    for (b, y) in weight_blocks(w, Q4_0_BYTES, a) {
        acc.fma(f16_at(b, 0) * y.d, lanes(&nibbles(&b[2..18]), 8, &y.qs));
    }
    acc.hsum()
}

#[inline(always)]
pub fn vec_dot_q5_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Lanes8::default();
    for (b, y) in weight_blocks(w, Q5_0_BYTES, a) {
        let q = nibbles_with_high_bits(&b[6..22], u32_at(b, 2));
        acc.fma(f16_at(b, 0) * y.d, lanes(&q, 16, &y.qs));
    }
    acc.hsum()
}

#[inline(always)]
pub fn vec_dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Lanes8::default();
    for (b, y) in weight_blocks(w, Q8_0_BYTES, a) {
        let q: &[i8; QK] = &std::array::from_fn(|k| b[2 + k] as i8);
        acc.fma(f16_at(b, 0) * y.d, lane_sums(q, &y.qs));
    }
    acc.hsum()
}

#[inline(always)]
pub fn vec_dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let mut acc = Lanes8::default();
    let mut summs = 0f32;
    for (b, y) in weight_blocks(w, Q4_1_BYTES, a) {
        summs += f16_at(b, 2) * y.s;
        acc.fma(f16_at(b, 0) * y.d, lanes(&nibbles(&b[4..20]), 0, &y.qs));
    }
    acc.hsum() + summs
}

#[inline(always)]
pub fn vec_dot_q5_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let mut acc = Lanes8::default();
    let mut summs = 0f32;
    for (b, y) in weight_blocks(w, Q5_1_BYTES, a) {
        summs += f16_at(b, 2) * y.s;
        let q = nibbles_with_high_bits(&b[8..24], u32_at(b, 4));
        acc.fma(f16_at(b, 0) * y.d, lanes(&q, 0, &y.qs));
    }
    acc.hsum() + summs
}
