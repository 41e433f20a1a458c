//! A prompt's Q2_K, Q3_K, Q4_K, Q5_K and Q6_K products under `fast` numerics. The exact kernels
//! (`kquants`) keep ggml's eight float lane sums per block; here each block's integer sum
//! is one `maddubs` and one `madd` with the sub-block scales per 32 weights and token, and
//! the float work is two fused multiply-adds per block and token (the scales' and the
//! mins' terms), so the sums are reordered and the results differ from the reference by
//! float rounding only.
//!
//! A task unpacks its rows once (`unpack`: unsigned levels in weight order, each 32-weight
//! chunk's scales spread over its sixteen 16-bit pair sums, the per-16 weights of the
//! activations' block sums) and takes them against the prompt's tokens four at a time, or on
//! AVX-512 eight at a time, two per 512-bit vector (`rows512`, the same integers and the same
//! float steps per token, so the same bits).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::kquant_core::{q3_levels, q45_levels, q6_levels};
use super::kquants::q3_scales_words;
use super::loads::{f16_one, f16_pair, halves, hsum};
use crate::quant::blocks::BlockQ8K;
use crate::quant::kquants::{
    scale_min_k4, Q2_K_BYTES, Q3_K_BYTES, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES,
};
use crate::quant::GgmlType;

/// One row's 256-weight block, unpacked for `rows`.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub struct KBlock {
    /// Levels as unsigned bytes (Q6_K's stored 0..63, not less 32), in weight order.
    u: [u8; 256],
    /// Chunk `c`'s pair sums' scales: slots 0..8 take weights `32c..32c + 16`, 8..16 the rest.
    sc: [[i16; 16]; 8],
    /// What each 16 weights' activation sum is multiplied by, for the `m` term.
    mins: [i16; 16],
    d: f32,
    /// The float factor of the mins' term: `-dmin` (Q4_K, Q5_K) or `-32 d` (Q6_K).
    m: f32,
}

impl KBlock {
    const ZERO: KBlock = KBlock {
        u: [0; 256],
        sc: [[0; 16]; 8],
        mins: [0; 16],
        d: 0.0,
        m: 0.0,
    };
}

/// Whether `ty` has a kernel here.
pub fn unpacks(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K
    )
}

/// `rows` (whole rows of `ty`, `rb` bytes each) unpacked into `out`, row after row.
///
/// # Safety
/// AVX2, FMA and F16C must be available (`x86::available`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn unpack(ty: GgmlType, rows: &[u8], out: &mut Vec<KBlock>) {
    let bytes = match ty {
        GgmlType::Q2_K => Q2_K_BYTES,
        GgmlType::Q3_K => Q3_K_BYTES,
        GgmlType::Q4_K => Q4_K_BYTES,
        GgmlType::Q5_K => Q5_K_BYTES,
        GgmlType::Q6_K => Q6_K_BYTES,
        _ => unreachable!("`unpacks` said no to {ty:?}"),
    };
    out.clear();
    out.resize(rows.len() / bytes, KBlock::ZERO);
    for (b, k) in rows.chunks_exact(bytes).zip(out.iter_mut()) {
        let mut lv = [0i8; 256];
        let mut s16 = [0i16; 16];
        match ty {
            GgmlType::Q2_K => {
                // Weights `128n + 32j + i`: bits `2j..2j + 2` of `qs[32n + i]`, levels 0..3.
                let m2 = _mm256_set1_epi8(3);
                for n in 0..2 {
                    let qs = _mm256_loadu_si256(b.as_ptr().add(16 + 32 * n) as *const __m256i);
                    for j in 0..4 {
                        let shift = _mm_cvtsi32_si128(2 * j as i32);
                        let u = _mm256_and_si256(_mm256_srl_epi16(qs, shift), m2);
                        let at = k.u.as_mut_ptr().add(128 * n + 32 * j);
                        _mm256_storeu_si256(at as *mut __m256i, u);
                    }
                }
                for (g, &packed) in b[..16].iter().enumerate() {
                    s16[g] = (packed & 0x0F) as i16;
                    k.mins[g] = (packed >> 4) as i16;
                }
                let (d, dmin) = f16_pair(b, 80);
                k.d = d;
                k.m = -dmin;
            }
            GgmlType::Q3_K => {
                q3_levels(b, &mut lv);
                for (g, &sc) in q3_scales_words(&b[96..108]).iter().enumerate() {
                    s16[g] = sc as i16;
                }
                offset_levels(k, &lv, s16, 4, f16_one(b, 108));
            }
            GgmlType::Q6_K => {
                q6_levels(b, &mut lv);
                for (s, sc) in s16.iter_mut().enumerate() {
                    *sc = b[192 + s] as i8 as i16;
                }
                offset_levels(k, &lv, s16, 32, f16_one(b, 208));
            }
            _ => {
                let (qs, qh) = if ty == GgmlType::Q4_K {
                    (&b[16..144], None)
                } else {
                    (&b[48..176], Some(&b[16..48]))
                };
                q45_levels(qs, qh, &mut lv);
                k.u = std::mem::transmute::<[i8; 256], [u8; 256]>(lv);
                for j in 0..8 {
                    let (sc, mn) = scale_min_k4(j, &b[4..16]);
                    s16[2 * j] = sc as i16;
                    s16[2 * j + 1] = sc as i16;
                    k.mins[2 * j] = mn as i16;
                    k.mins[2 * j + 1] = mn as i16;
                }
                let (d, dmin) = f16_pair(b, 0);
                k.d = d;
                k.m = -dmin;
            }
        }
        for (c, sc) in k.sc.iter_mut().enumerate() {
            sc[..8].fill(s16[2 * c]);
            sc[8..].fill(s16[2 * c + 1]);
        }
    }
}

/// A Q3_K or Q6_K block (signed levels `lv`, 16-weight scales `s16`, scale `d`) whose
/// levels are stored `offset` above the weights': the levels unsigned, and the offset taken
/// off as a min term, `-offset · d` times each group's scale times its activation sum.
#[inline(always)]
unsafe fn offset_levels(k: &mut KBlock, lv: &[i8; 256], s16: [i16; 16], offset: i8, d: f32) {
    let bias = _mm256_set1_epi8(offset);
    for c in 0..8 {
        let v = _mm256_loadu_si256(lv.as_ptr().add(32 * c) as *const __m256i);
        let u = _mm256_add_epi8(v, bias);
        _mm256_storeu_si256(k.u.as_mut_ptr().add(32 * c) as *mut __m256i, u);
    }
    k.mins = s16;
    k.d = d;
    k.m = -f32::from(offset) * d;
}

/// Rows a pass of `rows` takes together: each block's tokens stay in L1 while these rows'
/// blocks go past them, and their float sums wait on the stack.
const ROWS_PER_PASS: usize = 16;

/// `out[t][r] = row r · act[t]` for the unpacked rows `blocks` (`per_row` blocks each) and
/// `T` tokens' Q8_K rows. Up to `ROWS_PER_PASS` rows at a time go block by block, each block
/// against every row of the pass, so a block's activations are read from L1 however long
/// the rows are.
///
/// # Safety
/// AVX2, FMA and F16C must be available; every `act[t]` holds `per_row` blocks and every
/// `out[t]` one result per row.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows<const T: usize>(
    blocks: &[KBlock],
    per_row: usize,
    act: [&[BlockQ8K]; T],
    out: [&mut [f32]; T],
) {
    for a in &act {
        assert_eq!(a.len(), per_row);
    }
    let n_rows = blocks.len() / per_row;
    for r in (0..n_rows).step_by(ROWS_PER_PASS) {
        let pass = ROWS_PER_PASS.min(n_rows - r);
        let mut acc = [[_mm256_setzero_ps(); T]; ROWS_PER_PASS];
        for b in 0..per_row {
            let a: [&BlockQ8K; T] = std::array::from_fn(|t| act[t].get_unchecked(b));
            for (i, acc) in acc.iter_mut().enumerate().take(pass) {
                let w = blocks.get_unchecked((r + i) * per_row + b);
                block(w, a, acc);
            }
        }
        for t in 0..T {
            for (i, acc) in acc.iter().enumerate().take(pass) {
                *out[t].get_unchecked_mut(r + i) = hsum(acc[t]);
            }
        }
    }
}

/// One weight block against `T` tokens' blocks, into each token's float sums.
#[inline(always)]
unsafe fn block<const T: usize>(w: &KBlock, a: [&BlockQ8K; T], acc: &mut [__m256; T]) {
    let mut sums = [_mm256_setzero_si256(); T];
    for c in 0..8 {
        let u = _mm256_load_si256(w.u.as_ptr().add(32 * c) as *const __m256i);
        let sc = _mm256_load_si256(w.sc[c].as_ptr() as *const __m256i);
        for t in 0..T {
            let q = _mm256_loadu_si256(a[t].qs.as_ptr().add(32 * c) as *const __m256i);
            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), sc);
            sums[t] = _mm256_add_epi32(sums[t], p);
        }
    }
    let mins = _mm256_load_si256(w.mins.as_ptr() as *const __m256i);
    for t in 0..T {
        let bs = _mm256_loadu_si256(a[t].bsums.as_ptr() as *const __m256i);
        let m = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bs));
        let s = _mm256_cvtepi32_ps(sums[t]);
        acc[t] = _mm256_fmadd_ps(s, _mm256_set1_ps(w.d * a[t].d), acc[t]);
        acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(w.m * a[t].d), acc[t]);
    }
}

/// `rows` on AVX-512 for `P` pairs of tokens: each 512-bit vector holds one pair, a token a
/// 256-bit half, the weight block's levels and scales broadcast to both halves, so a pair
/// takes one `maddubs`, `madd` and add per 32 weights where `rows` takes two of each.
///
/// # Safety
/// AVX-512 F and BW must be available (`kquants512::available`); every `act[p][h]` holds
/// `per_row` blocks and every `out[p][h]` one result per row.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
pub unsafe fn rows512<const P: usize>(
    blocks: &[KBlock],
    per_row: usize,
    act: [[&[BlockQ8K]; 2]; P],
    mut out: [[&mut [f32]; 2]; P],
) {
    for a in act.iter().flatten() {
        assert_eq!(a.len(), per_row);
    }
    let n_rows = blocks.len() / per_row;
    for r in (0..n_rows).step_by(ROWS_PER_PASS) {
        let pass = ROWS_PER_PASS.min(n_rows - r);
        let mut acc = [[_mm512_setzero_ps(); P]; ROWS_PER_PASS];
        for b in 0..per_row {
            let a: [[&BlockQ8K; 2]; P] =
                std::array::from_fn(|p| act[p].map(|a| a.get_unchecked(b)));
            for (i, acc) in acc.iter_mut().enumerate().take(pass) {
                let w = blocks.get_unchecked((r + i) * per_row + b);
                block512(w, a, acc);
            }
        }
        for (p, out) in out.iter_mut().enumerate() {
            for (i, acc) in acc.iter().enumerate().take(pass) {
                let v = acc[p];
                let lo = _mm512_castps512_ps256(v);
                let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
                *out[0].get_unchecked_mut(r + i) = hsum(lo);
                *out[1].get_unchecked_mut(r + i) = hsum(hi);
            }
        }
    }
}

/// `block` for `P` pairs of tokens.
#[inline(always)]
unsafe fn block512<const P: usize>(w: &KBlock, a: [[&BlockQ8K; 2]; P], acc: &mut [__m512; P]) {
    let mut sums = [_mm512_setzero_si512(); P];
    for c in 0..8 {
        let u =
            _mm512_broadcast_i64x4(_mm256_load_si256(w.u.as_ptr().add(32 * c) as *const __m256i));
        let sc = _mm512_broadcast_i64x4(_mm256_load_si256(w.sc[c].as_ptr() as *const __m256i));
        for p in 0..P {
            // Two tokens' 32 bytes side by side.
            let q = halves(
                a[p][0].qs.as_ptr().add(32 * c).cast(),
                a[p][1].qs.as_ptr().add(32 * c).cast(),
            );
            let s = _mm512_madd_epi16(_mm512_maddubs_epi16(u, q), sc);
            sums[p] = _mm512_add_epi32(sums[p], s);
        }
    }
    let mins = _mm512_broadcast_i64x4(_mm256_load_si256(w.mins.as_ptr() as *const __m256i));
    for p in 0..P {
        let bs = halves(a[p][0].bsums.as_ptr().cast(), a[p][1].bsums.as_ptr().cast());
        let m = _mm512_cvtepi32_ps(_mm512_madd_epi16(mins, bs));
        let s = _mm512_cvtepi32_ps(sums[p]);
        let (d0, d1) = (a[p][0].d, a[p][1].d);
        let dd = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(w.d * d0), _mm512_set1_ps(w.d * d1));
        let md = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(w.m * d0), _mm512_set1_ps(w.m * d1));
        acc[p] = _mm512_fmadd_ps(s, dd, acc[p]);
        acc[p] = _mm512_fmadd_ps(m, md, acc[p]);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::random_kquant_blocks;
    use super::*;
    use crate::quant::kquants::{quantize_act_q8_k, quantize_q4_k, quantize_q6_k};
    use crate::quant::x86::available;
    use crate::rng::SplitMix64 as Rng;

    /// Every type's rows against random tokens, within float reordering of an f64 dot of the
    /// dequantized rows and the Q8_K activations; Q5_K's blocks are random bytes (no
    /// quantizer here), the others quantized from random values.
    #[test]
    fn fast_kquant_rows_match_an_f64_dot() {
        if !available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = Rng::new(0x00fa_574b);
        let (cols, n_rows) = (512, 19);
        let rand = |rng: &mut Rng, n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
                .collect()
        };
        for ty in [
            GgmlType::Q2_K,
            GgmlType::Q3_K,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ] {
            let w = rand(&mut rng, cols * n_rows);
            let mut bytes = Vec::new();
            match ty {
                GgmlType::Q4_K => quantize_q4_k(&w, &mut bytes),
                GgmlType::Q6_K => quantize_q6_k(&w, &mut bytes),
                _ => bytes = random_kquant_blocks(ty, cols / 256 * n_rows, &mut rng),
            }
            let per_row = cols / 256;
            let acts: Vec<Vec<BlockQ8K>> = (0..5)
                .map(|_| quantize_act_q8_k(&rand(&mut rng, cols)))
                .collect();
            let mut blocks = Vec::new();
            // SAFETY: AVX2/FMA/F16C were just detected.
            unsafe { unpack(ty, &bytes, &mut blocks) };
            let mut got = vec![vec![0f32; n_rows]; 5];
            {
                let (four, one) = got.split_at_mut(4);
                let [o0, o1, o2, o3] = four else {
                    unreachable!()
                };
                let a4 = [&acts[0][..], &acts[1][..], &acts[2][..], &acts[3][..]];
                // SAFETY: as above; per_row blocks per token, one result per row.
                unsafe { rows::<4>(&blocks, per_row, a4, [o0, o1, o2, o3]) };
                // SAFETY: as above.
                unsafe { rows::<1>(&blocks, per_row, [&acts[4][..]], [&mut one[0]]) };
            }
            if crate::quant::x86_kquants512::available() {
                let mut wide = vec![vec![0f32; n_rows]; 4];
                let [w0, w1, w2, w3] = &mut wide[..] else {
                    unreachable!()
                };
                let a = |t: usize| acts[t].as_slice();
                // SAFETY: AVX-512 F/BW were just detected; as above otherwise.
                unsafe {
                    rows512::<2>(
                        &blocks,
                        per_row,
                        [[a(0), a(1)], [a(2), a(3)]],
                        [[w0, w1], [w2, w3]],
                    )
                };
                for (t, w) in wide.iter().enumerate() {
                    let same = w
                        .iter()
                        .zip(&got[t])
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{ty:?} token {t}: AVX-512 {w:?} vs AVX2 {:?}", got[t]);
                }
            } else {
                eprintln!("AVX-512 form skipped: no AVX-512 F/BW on this CPU");
            }
            super::super::tests::assert_near_f64_dot(ty, &bytes, n_rows, cols, &acts, &got);
        }
    }
}
