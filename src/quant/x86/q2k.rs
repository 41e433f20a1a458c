//! AVX2 dot product of Q2_K rows with Q8_K activations, bit for bit what the scalar reference
//! `kquants::vec_dot_q2_k_q8_k` gives: per 256-weight block two integers (the scaled level
//! sum and the min sum), then the reference's float arithmetic on them. Integer sums are exact
//! in any order, so the 2-bit levels are taken 32 at a time against their 32 activations
//! (`maddubs`: levels 0..3 unsigned, activations signed), two 16-weight groups a register,
//! each group's 8 pair sums multiplied by its scale (`madd`) into eight 32-bit lanes.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::loads::f16_one;
use crate::quant::blocks::BlockQ8K;
use crate::quant::kquants::Q2_K_BYTES;

/// The eight 32-bit lanes of `v` added.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn hsum(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// One block's `Σ scale(group) · Σ level·q8` and `Σ min(group) · bsum(group)`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn block_sums(b: &[u8], y: &BlockQ8K) -> (i32, i32) {
    debug_assert_eq!(b.len(), Q2_K_BYTES);
    let sc = _mm_loadu_si128(b.as_ptr() as *const __m128i);
    let low4 = _mm_set1_epi8(0x0F);
    let scales = _mm_and_si128(sc, low4);
    let mins = _mm_and_si128(_mm_srli_epi16(sc, 4), low4);
    // The min sum: the activations' 16 group sums times the 16 mins.
    let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
    let summs = hsum(_mm256_madd_epi16(bsums, _mm256_cvtepu8_epi16(mins)));
    let mut sc16 = [0i16; 16];
    _mm256_storeu_si256(
        sc16.as_mut_ptr() as *mut __m256i,
        _mm256_cvtepu8_epi16(scales),
    );
    let three = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_si256();
    for n in 0..2 {
        let q = _mm256_loadu_si256(b.as_ptr().add(16 + 32 * n) as *const __m256i);
        for j in 0..4 {
            // Weights n*128 + j*32 .. +32: groups g and g + 1.
            let g = 8 * n + 2 * j;
            let shift = _mm_cvtsi32_si128(2 * j as i32);
            let levels = _mm256_and_si256(_mm256_srl_epi16(q, shift), three);
            let act = _mm256_loadu_si256(y.qs.as_ptr().add(128 * n + 32 * j) as *const __m256i);
            let pairs = _mm256_maddubs_epi16(levels, act);
            let scale = _mm256_setr_m128i(_mm_set1_epi16(sc16[g]), _mm_set1_epi16(sc16[g + 1]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scale));
        }
    }
    (hsum(acc), summs)
}

/// Q2_K · Q8_K over a row, as `kquants::vec_dot_q2_k_q8_k`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`); `w` holds `a.len()` Q2_K
/// blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q2_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    assert_eq!(
        w.len(),
        a.len() * Q2_K_BYTES,
        "Q2_K row against Q8_K blocks"
    );
    let mut sumf = 0f32;
    for (b, y) in w.chunks_exact(Q2_K_BYTES).zip(a) {
        let (isum, summs) = block_sums(b, y);
        let dall = y.d * f16_one(b, 80);
        let dmin = y.d * f16_one(b, 82);
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

row_loops!(rows_q2_k_q8_k = vec_dot_q2_k_q8_k, BlockQ8K);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kquants;
    use crate::rng::SplitMix64 as Rng;

    #[test]
    fn equals_the_reference_bit_for_bit_on_random_blocks() {
        if !crate::quant::x86::available() {
            eprintln!("q2k: skipped: this CPU lacks AVX2, FMA or F16C");
            return;
        }
        let mut rng = Rng::new(21);
        for blocks in [1, 3, 8] {
            for _ in 0..200 {
                let mut w: Vec<u8> = (0..blocks * Q2_K_BYTES)
                    .map(|_| rng.next_u64() as u8)
                    .collect();
                // Finite d and dmin (random bytes can be NaN or infinite).
                for b in w.chunks_exact_mut(Q2_K_BYTES) {
                    for at in [80, 82] {
                        let v = half::f16::from_f32(rng.next_signed() * 0.05);
                        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
                    }
                }
                let x: Vec<f32> = (0..blocks * 256).map(|_| rng.next_signed() * 3.0).collect();
                let a = kquants::quantize_act_q8_k(&x);
                let want = kquants::vec_dot_q2_k_q8_k(&w, &a);
                // SAFETY: the features were just detected; w holds `blocks` blocks.
                let got = unsafe { vec_dot_q2_k_q8_k(&w, &a) };
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{blocks} blocks: {got} vs {want}"
                );
            }
        }
    }
}
