//! AVX2 dot products of Q2_K rows with Q8_K activations, for one activation row (decode) and
//! four at once (a prompt: each block unpacked once for four tokens), bit for bit what the
//! scalar reference `kquants::vec_dot_q2_k_q8_k` gives: per 256-weight block two integers (the scaled level
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

/// One weight block, unpacked once for however many activation rows use it.
struct Unpacked {
    /// Weights `32c ..` (c = 4n + j: half n, shift j) as levels 0..3.
    levels: [__m256i; 8],
    /// Chunk c's two groups' scales, 8 16-bit copies each.
    scales: [__m256i; 8],
    /// The 16 groups' mins as 16-bit values.
    mins: __m256i,
    d: f32,
    dmin: f32,
}

#[inline(always)]
unsafe fn unpack(b: &[u8]) -> Unpacked {
    debug_assert_eq!(b.len(), Q2_K_BYTES);
    let sc = _mm_loadu_si128(b.as_ptr() as *const __m128i);
    let low4 = _mm_set1_epi8(0x0F);
    let mut sc16 = [0i16; 16];
    _mm256_storeu_si256(
        sc16.as_mut_ptr() as *mut __m256i,
        _mm256_cvtepu8_epi16(_mm_and_si128(sc, low4)),
    );
    let three = _mm256_set1_epi8(3);
    let mut levels = [_mm256_setzero_si256(); 8];
    let mut scales = [_mm256_setzero_si256(); 8];
    for n in 0..2 {
        let q = _mm256_loadu_si256(b.as_ptr().add(16 + 32 * n) as *const __m256i);
        for j in 0..4 {
            let (c, g) = (4 * n + j, 8 * n + 2 * j);
            let shift = _mm_cvtsi32_si128(2 * j as i32);
            levels[c] = _mm256_and_si256(_mm256_srl_epi16(q, shift), three);
            scales[c] = _mm256_setr_m128i(_mm_set1_epi16(sc16[g]), _mm_set1_epi16(sc16[g + 1]));
        }
    }
    Unpacked {
        levels,
        scales,
        mins: _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), low4)),
        d: f16_one(b, 80),
        dmin: f16_one(b, 82),
    }
}

/// A block's `Σ scale(group) · Σ level·q8` and `Σ min(group) · bsum(group)` against `y`.
#[inline(always)]
unsafe fn block_sums(u: &Unpacked, y: &BlockQ8K) -> (i32, i32) {
    let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
    let summs = hsum(_mm256_madd_epi16(bsums, u.mins));
    let mut acc = _mm256_setzero_si256();
    for c in 0..8 {
        let act = _mm256_loadu_si256(y.qs.as_ptr().add(32 * c) as *const __m256i);
        let pairs = _mm256_maddubs_epi16(u.levels[c], act);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, u.scales[c]));
    }
    (hsum(acc), summs)
}

/// One Q2_K row against `N` activation rows, each result the reference's for its row.
#[inline(always)]
unsafe fn dot_rows<const N: usize>(w: &[u8], a: [&[BlockQ8K]; N]) -> [f32; N] {
    for a in a {
        assert_eq!(
            w.len(),
            a.len() * Q2_K_BYTES,
            "Q2_K row against Q8_K blocks"
        );
    }
    let mut sumf = [0f32; N];
    for (i, b) in w.chunks_exact(Q2_K_BYTES).enumerate() {
        let u = unpack(b);
        for t in 0..N {
            let y = &a[t][i];
            let (isum, summs) = block_sums(&u, y);
            let dall = y.d * u.d;
            let dmin = y.d * u.dmin;
            sumf[t] += dall * isum as f32 - dmin * summs as f32;
        }
    }
    sumf
}

/// Q2_K · Q8_K over a row, as `kquants::vec_dot_q2_k_q8_k`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q2_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    dot_rows(w, [a])[0]
}

/// Four activation rows against one Q2_K row (each weight block unpacked once for the four);
/// each result bit-identical to `vec_dot_q2_k_q8_k`'s for that row.
///
/// # Safety
/// As `vec_dot_q2_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q2_k_q8_k_x4(w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
    dot_rows(w, a)
}

row_loops!(rows_q2_k_q8_k = vec_dot_q2_k_q8_k, BlockQ8K);
row_loops!(rows_q2_k_q8_k_x4 = vec_dot_q2_k_q8_k_x4 x4, BlockQ8K);

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
