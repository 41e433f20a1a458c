//! AVX2 kernels for the legacy-quant dot products (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights with
//! Q8_0/Q8_1 activations): the decode hot loop.
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

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use half::f16;

use super::legacy::{BlockQ8_0, BlockQ8_1};
use super::simd_order::Lanes8;

/// Whether the CPU runs these kernels (cached by std after the first call).
#[inline(always)]
pub fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// 16 packed bytes → 32 nibbles in weight order (low nibbles, then high nibbles).
#[inline(always)]
unsafe fn nibbles(qs: &[u8]) -> __m256i {
    debug_assert!(qs.len() >= 16);
    let lo = _mm_loadu_si128(qs.as_ptr() as *const __m128i);
    let hi = _mm_srli_epi16::<4>(lo);
    _mm256_and_si256(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(0x0F))
}

/// Bit `j` of `qh` → byte `j` = 0x10 (the fifth bit of weight `j`), else 0.
#[inline(always)]
unsafe fn high_bits(qh: u32) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(qh as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// Lane sums of four consecutive products of unsigned `q` (< 128) and signed `a`, as f32.
#[inline(always)]
unsafe fn lanes_unsigned(q: __m256i, a: __m256i) -> __m256 {
    let pairs = _mm256_maddubs_epi16(q, a);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// Lane sums for signed `q`: |q| times `a` with q's sign (no i16 overflow: |q| ≤ 128 and the
/// activations are within ±127).
#[inline(always)]
unsafe fn lanes_signed(q: __m256i, a: __m256i) -> __m256 {
    lanes_unsigned(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q))
}

#[inline(always)]
unsafe fn load32(p: &[i8; 32]) -> __m256i {
    _mm256_loadu_si256(p.as_ptr() as *const __m256i)
}

/// `hsum_float_8` of the accumulator (through `Lanes8`, the reference reduction).
#[inline(always)]
unsafe fn hsum(acc: __m256) -> f32 {
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    Lanes8::from(lanes).hsum()
}

fn check(w: &[u8], bytes: usize, blocks: usize) {
    assert_eq!(
        w.len(),
        blocks * bytes,
        "weight row of {} bytes does not match {blocks} activation blocks",
        w.len()
    );
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn vec_dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    check(w, 18, a.len());
    let mut acc = _mm256_setzero_ps();
    for (b, y) in w.chunks_exact(18).zip(a) {
        let q = _mm256_sub_epi8(nibbles(&b[2..18]), _mm256_set1_epi8(8));
        let d = _mm256_set1_ps(f16_at(b, 0) * y.d);
        acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), acc);
    }
    hsum(acc)
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn vec_dot_q5_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    check(w, 22, a.len());
    let mut acc = _mm256_setzero_ps();
    for (b, y) in w.chunks_exact(22).zip(a) {
        let q = _mm256_or_si256(nibbles(&b[6..22]), high_bits(u32_at(b, 2)));
        let q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        let d = _mm256_set1_ps(f16_at(b, 0) * y.d);
        acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), acc);
    }
    hsum(acc)
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn vec_dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    check(w, 34, a.len());
    let mut acc = _mm256_setzero_ps();
    for (b, y) in w.chunks_exact(34).zip(a) {
        let q = _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i);
        let d = _mm256_set1_ps(f16_at(b, 0) * y.d);
        acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), acc);
    }
    hsum(acc)
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn vec_dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    check(w, 20, a.len());
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0f32;
    for (b, y) in w.chunks_exact(20).zip(a) {
        summs += f16_at(b, 2) * y.s;
        let d = _mm256_set1_ps(f16_at(b, 0) * y.d);
        acc = _mm256_fmadd_ps(d, lanes_unsigned(nibbles(&b[4..20]), load32(&y.qs)), acc);
    }
    hsum(acc) + summs
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn vec_dot_q5_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    check(w, 24, a.len());
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0f32;
    for (b, y) in w.chunks_exact(24).zip(a) {
        summs += f16_at(b, 2) * y.s;
        let q = _mm256_or_si256(nibbles(&b[8..24]), high_bits(u32_at(b, 4)));
        let d = _mm256_set1_ps(f16_at(b, 0) * y.d);
        acc = _mm256_fmadd_ps(d, lanes_unsigned(q, load32(&y.qs)), acc);
    }
    hsum(acc) + summs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{legacy, quantize_act, ActType, GgmlType, QuantizedAct};

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn f(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
    }

    /// A random row: random quant bytes, finite f16 scale fields.
    fn row(rng: &mut Rng, ty: GgmlType, blocks: usize) -> Vec<u8> {
        let bytes = ty.block_bytes();
        let mut out = Vec::with_capacity(blocks * bytes);
        for _ in 0..blocks {
            let mut b: Vec<u8> = (0..bytes).map(|_| rng.next() as u8).collect();
            let scales = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                2
            } else {
                1
            };
            for s in 0..scales {
                let v = f16::from_f32(rng.f() * 0.05).to_le_bytes();
                b[2 * s..2 * s + 2].copy_from_slice(&v);
            }
            out.extend(b);
        }
        out
    }

    #[test]
    fn avx2_kernels_equal_the_reference_bit_for_bit() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA");
            return;
        }
        let mut rng = Rng(7);
        for ty in [
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q8_0,
        ] {
            for blocks in [1usize, 2, 7, 18, 48] {
                for _ in 0..20 {
                    let w = row(&mut rng, ty, blocks);
                    let x: Vec<f32> = (0..blocks * 32).map(|_| rng.f() * 3.0).collect();
                    let act = quantize_act(ActType::for_weights(ty), &x);
                    let (fast, slow) = unsafe {
                        match (&act, ty) {
                            (QuantizedAct::Q8_0(a), GgmlType::Q4_0) => {
                                (vec_dot_q4_0_q8_0(&w, a), legacy::vec_dot_q4_0_q8_0(&w, a))
                            }
                            (QuantizedAct::Q8_0(a), GgmlType::Q5_0) => {
                                (vec_dot_q5_0_q8_0(&w, a), legacy::vec_dot_q5_0_q8_0(&w, a))
                            }
                            (QuantizedAct::Q8_0(a), GgmlType::Q8_0) => {
                                (vec_dot_q8_0_q8_0(&w, a), legacy::vec_dot_q8_0_q8_0(&w, a))
                            }
                            (QuantizedAct::Q8_1(a), GgmlType::Q4_1) => {
                                (vec_dot_q4_1_q8_1(&w, a), legacy::vec_dot_q4_1_q8_1(&w, a))
                            }
                            (QuantizedAct::Q8_1(a), GgmlType::Q5_1) => {
                                (vec_dot_q5_1_q8_1(&w, a), legacy::vec_dot_q5_1_q8_1(&w, a))
                            }
                            _ => unreachable!(),
                        }
                    };
                    assert_eq!(
                        fast.to_bits(),
                        slow.to_bits(),
                        "{ty} x {blocks}: {fast} vs {slow}"
                    );
                }
            }
        }
    }
}
