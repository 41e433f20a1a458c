//! A decode step's Q2_K, Q3_K and Q6_K products under `fast` numerics on AVX2: one token against
//! rows in the file's layout, each block's levels built in registers 32 at a time and taken
//! against the token's bytes in weight order (`maddubs`, then `madd` by the 16-weight
//! groups' scales), the block's min or offset term from the token's group sums (`bsums`),
//! and one float step per block into eight lanes summed at the row's end. The exact kernels
//! (`kquants`, `q2k`) unpack each block into the reference's lane order first and fold its
//! floats per block as the reference does; here the integer sums are the same and only the
//! float order differs.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::kquants::q3_scales_vec;
use super::loads::{f16_one, f16_pair, hsum};
use super::prefetch::prefetch_ahead;
use crate::quant::blocks::BlockQ8K;
use crate::quant::kquants::{Q2_K_BYTES, Q3_K_BYTES, Q6_K_BYTES};
use crate::quant::GgmlType;

/// `pshufb` masks that spread 16-bit scale `2k` over the low 128 bits and scale `2k + 1`
/// over the high 128 bits of a vector whose halves both hold scales `0..8` (`k` 0..4).
#[inline(always)]
unsafe fn scale_masks() -> [__m256i; 4] {
    std::array::from_fn(|k| {
        let (lo, hi) = (4 * k as i8, 4 * k as i8 + 2);
        let half = |s: i8| _mm_set1_epi16(((s + 1) as i16) << 8 | s as i16);
        _mm256_set_m128i(half(hi), half(lo))
    })
}

/// The 16 group scales (16-bit, group `g` in lane `g`) as each 32-weight chunk's scale
/// vector: chunk `c`'s first 16 weights take group `2c`, its last 16 group `2c + 1`.
#[inline(always)]
unsafe fn chunk_scales(s: __m256i, masks: &[__m256i; 4]) -> [__m256i; 8] {
    let lo = _mm256_permute2x128_si256::<0x00>(s, s);
    let hi = _mm256_permute2x128_si256::<0x11>(s, s);
    std::array::from_fn(|c| _mm256_shuffle_epi8(if c < 4 { lo } else { hi }, masks[c % 4]))
}

/// The 32 bytes at `p`.
#[inline(always)]
unsafe fn load(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// One 32-weight chunk `c`'s levels `u` against the token's bytes, scaled by its two groups'
/// scales (`sc`): eight 32-bit partial sums.
#[inline(always)]
unsafe fn chunk(u: __m256i, y: &BlockQ8K, c: usize, sc: __m256i) -> __m256i {
    let q = load(y.qs.as_ptr().add(32 * c) as *const u8);
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), sc)
}

/// `out[r] = row r · a` for rows of `bytes`-byte blocks, `step` adding one block's product
/// into one of two float accumulators (blocks alternate between them), each block's lines
/// asked for ahead (`prefetch_ahead`).
#[inline(always)]
unsafe fn by_block(
    rows: &[u8],
    row_bytes: usize,
    a: &[BlockQ8K],
    out: &mut [f32],
    bytes: usize,
    step: impl Fn(&[u8], &BlockQ8K, __m256) -> __m256,
) {
    assert_eq!(
        row_bytes,
        a.len() * bytes,
        "k-quant row against Q8_K blocks"
    );
    let ahead = |b: &[u8]| {
        for line in (0..bytes).step_by(64) {
            prefetch_ahead(b.as_ptr().wrapping_add(line));
        }
    };
    for (row, o) in rows.chunks_exact(row_bytes).zip(out) {
        // Two blocks a step, one into each accumulator, so both stay in registers.
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let (mut pairs, mut ys) = (row.chunks_exact(2 * bytes), a.chunks_exact(2));
        for (b2, y2) in pairs.by_ref().zip(ys.by_ref()) {
            let (b0, b1) = b2.split_at(bytes);
            ahead(b0);
            acc0 = step(b0, &y2[0], acc0);
            ahead(b1);
            acc1 = step(b1, &y2[1], acc1);
        }
        // An odd last block (rows and token share their block count, asserted above).
        if let [y] = ys.remainder() {
            let b = pairs.remainder();
            ahead(b);
            acc0 = step(b, y, acc0);
        }
        *o = hsum(_mm256_add_ps(acc0, acc1));
    }
}

/// `out[r] = row r · a` for Q2_K, Q3_K or Q6_K (`ty`) rows (`row_bytes` each) and one token's
/// Q8_K row; None for another type.
///
/// # Safety
/// As `rows_q3_k_one`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_one(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    a: &[BlockQ8K],
    out: &mut [f32],
) -> Option<()> {
    match ty {
        GgmlType::Q2_K => rows_q2_k_one(rows, row_bytes, a, out),
        GgmlType::Q3_K => rows_q3_k_one(rows, row_bytes, a, out),
        GgmlType::Q6_K => rows_q6_k_one(rows, row_bytes, a, out),
        _ => return None,
    }
    Some(())
}

/// `out[r] = row r · a` for Q3_K rows (`row_bytes` each) and one token's Q8_K row.
///
/// # Safety
/// AVX2, FMA and F16C must be available (`x86::available()`); every row holds `a.len()`
/// blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q3_k_one(rows: &[u8], row_bytes: usize, a: &[BlockQ8K], out: &mut [f32]) {
    let masks = scale_masks();
    let m2 = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    by_block(rows, row_bytes, a, out, Q3_K_BYTES, |b, y, acc| {
        let p = b.as_ptr();
        let s = _mm256_cvtepi8_epi16(q3_scales_vec(&b[96..108]));
        let sc = chunk_scales(s, &masks);
        let hm = load(p);
        let mut sum = _mm256_setzero_si256();
        for n in 0..2 {
            let qs = load(p.add(32 + 32 * n));
            for j in 0..4 {
                let c = 4 * n + j;
                let low =
                    _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * j as i32)), m2);
                // Bit `c` of each hmask byte moved to bit 2 (the other bits masked off).
                let high = if c >= 2 {
                    _mm256_srl_epi16(hm, _mm_cvtsi32_si128(c as i32 - 2))
                } else {
                    _mm256_sll_epi16(hm, _mm_cvtsi32_si128(2 - c as i32))
                };
                let u = _mm256_or_si256(low, _mm256_and_si256(high, four));
                sum = _mm256_add_epi32(sum, chunk(u, y, c, sc[c]));
            }
        }
        // The levels are stored 4 above the weights': less 4 times each group's scaled sum.
        let bs = load(y.bsums.as_ptr() as *const u8);
        let offset = _mm256_slli_epi32::<2>(_mm256_madd_epi16(s, bs));
        let sum = _mm256_cvtepi32_ps(_mm256_sub_epi32(sum, offset));
        _mm256_fmadd_ps(_mm256_set1_ps(f16_one(b, 108) * y.d), sum, acc)
    })
}

/// `out[r] = row r · a` for Q2_K rows (`row_bytes` each) and one token's Q8_K row.
///
/// # Safety
/// As `rows_q3_k_one`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q2_k_one(rows: &[u8], row_bytes: usize, a: &[BlockQ8K], out: &mut [f32]) {
    let masks = scale_masks();
    let m2 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0x0F);
    by_block(rows, row_bytes, a, out, Q2_K_BYTES, |b, y, acc| {
        let p = b.as_ptr();
        let packed = _mm_loadu_si128(p as *const __m128i);
        let s = _mm256_cvtepu8_epi16(_mm_and_si128(packed, m4));
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(packed), m4));
        let sc = chunk_scales(s, &masks);
        let mut sum = _mm256_setzero_si256();
        for n in 0..2 {
            let qs = load(p.add(16 + 32 * n));
            for j in 0..4 {
                let c = 4 * n + j;
                let u = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * j as i32)), m2);
                sum = _mm256_add_epi32(sum, chunk(u, y, c, sc[c]));
            }
        }
        let bs = load(y.bsums.as_ptr() as *const u8);
        let m = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bs));
        let (d, dmin) = f16_pair(b, 80);
        let acc = _mm256_fmadd_ps(_mm256_set1_ps(d * y.d), _mm256_cvtepi32_ps(sum), acc);
        _mm256_fmadd_ps(_mm256_set1_ps(-dmin * y.d), m, acc)
    })
}

/// `out[r] = row r · a` for Q6_K rows (`row_bytes` each) and one token's Q8_K row.
///
/// # Safety
/// As `rows_q3_k_one`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q6_k_one(rows: &[u8], row_bytes: usize, a: &[BlockQ8K], out: &mut [f32]) {
    let masks = scale_masks();
    let m4 = _mm256_set1_epi8(0x0F);
    let top = _mm256_set1_epi8(0x30);
    by_block(rows, row_bytes, a, out, Q6_K_BYTES, |b, y, acc| {
        let p = b.as_ptr();
        let s = _mm256_cvtepi8_epi16(_mm_loadu_si128(p.add(192) as *const __m128i));
        let sc = chunk_scales(s, &masks);
        let mut sum = _mm256_setzero_si256();
        for n in 0..2 {
            // Half n: chunks 4n + k from the low (k = 0, 1) or high (k = 2, 3) nibbles of
            // `ql[64n ..]` or `ql[64n + 32 ..]`, and bits 2k..2k + 2 of `qh[32n ..]` as bits
            // 4 and 5.
            let ql = [load(p.add(64 * n)), load(p.add(64 * n + 32))];
            let qh = load(p.add(128 + 32 * n));
            for k in 0..4 {
                let nib = match k {
                    0 | 1 => _mm256_and_si256(ql[k], m4),
                    _ => _mm256_and_si256(_mm256_srli_epi16::<4>(ql[k - 2]), m4),
                };
                let high = match k {
                    0 => _mm256_slli_epi16::<4>(qh),
                    1 => _mm256_slli_epi16::<2>(qh),
                    2 => qh,
                    _ => _mm256_srli_epi16::<2>(qh),
                };
                let u = _mm256_or_si256(nib, _mm256_and_si256(high, top));
                sum = _mm256_add_epi32(sum, chunk(u, y, 4 * n + k, sc[4 * n + k]));
            }
        }
        // The levels are stored 32 above the weights'.
        let bs = load(y.bsums.as_ptr() as *const u8);
        let offset = _mm256_slli_epi32::<5>(_mm256_madd_epi16(s, bs));
        let sum = _mm256_cvtepi32_ps(_mm256_sub_epi32(sum, offset));
        _mm256_fmadd_ps(_mm256_set1_ps(f16_one(b, 208) * y.d), sum, acc)
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::random_kquant_blocks;
    use super::*;
    use crate::quant::kquants::quantize_act_q8_k;
    use crate::quant::x86::available;
    use crate::rng::SplitMix64 as Rng;

    /// The scales built in a vector are `kquants::q3_scales_words`'s.
    #[test]
    fn q3_scales_match_the_words() {
        if !available() {
            eprintln!("skipped: no AVX2 on this CPU");
            return;
        }
        let mut rng = Rng::new(0x0003_5ca1);
        for _ in 0..200 {
            let b: Vec<u8> = (0..Q3_K_BYTES).map(|_| rng.next_u64() as u8).collect();
            let mut got = [0i8; 16];
            // SAFETY: AVX2 was just detected; b is a whole Q3_K block.
            unsafe {
                _mm_storeu_si128(got.as_mut_ptr() as *mut __m128i, q3_scales_vec(&b[96..108]))
            };
            assert_eq!(got, super::super::kquants::q3_scales_words(&b[96..108]));
        }
    }

    /// Random Q2_K, Q3_K and Q6_K rows (random bytes, small finite scales) against random tokens,
    /// within float reordering of an f64 dot of the dequantized rows and the Q8_K values; rows
    /// of one, three and four blocks (the loop takes blocks in pairs, then an odd last one).
    #[test]
    fn one_token_rows_match_an_f64_dot() {
        if !available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = Rng::new(0x0002_0003);
        let n_rows = 11;
        let shapes = [256, 768, 1024]
            .map(|cols| [GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q6_K].map(|ty| (cols, ty)));
        for (cols, ty) in shapes.into_iter().flatten() {
            let bytes = random_kquant_blocks(ty, cols / 256 * n_rows, &mut rng);
            let acts: Vec<Vec<BlockQ8K>> = (0..3)
                .map(|_| {
                    let x: Vec<f32> = (0..cols)
                        .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
                        .collect();
                    quantize_act_q8_k(&x)
                })
                .collect();
            let rb = bytes.len() / n_rows;
            let got: Vec<Vec<f32>> = acts
                .iter()
                .map(|a| {
                    let mut o = vec![0f32; n_rows];
                    // SAFETY: the features were just detected; every row has a.len() blocks.
                    let ran = unsafe { rows_one(ty, &bytes, rb, a, &mut o) };
                    assert!(ran.is_some(), "{ty:?} has a one-token kernel");
                    o
                })
                .collect();
            super::super::tests::assert_near_f64_dot(ty, &bytes, n_rows, cols, &acts, &got);
        }
    }
}
