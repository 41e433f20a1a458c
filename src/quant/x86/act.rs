//! AVX2 activation quantizers: Q8_0, Q8_1 and Q8_K blocks, each bit for bit what the scalar
//! references `legacy::quantize_act_q8_0` / `quantize_act_q8_1` and
//! `kquants::quantize_act_q8_k` give for finite input, except blocks whose largest magnitude is
//! below 127 / f32::MAX (~3.7e-37): their inverse scale overflows, and the AVX2 conversion
//! gives -128 where the scalar cast gives 127 or 0 (the stored scale then rounds to 0, so
//! their dot products are 0 either way; llama.cpp's AVX2 quantizer converts as this does).
//!
//! Every product quantizes its input row first, on one thread for a decode step, so the scalar
//! loops were a measurable share of a token's serial time. The steps are those of llama.cpp's
//! AVX2 `quantize_row_q8_0`/`q8_1` (largest magnitude, one scale, round to nearest even,
//! saturating packs), and of `quantize_row_q8_K_ref` for Q8_K (the signed value of largest
//! magnitude, the first on ties; `min(127, nearest_int(iscale * x))`).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use crate::quant::blocks::{round_f16, BlockQ8K, BlockQ8_0, BlockQ8_1, PAIR_ORDER, QK_K};

/// Values per Q8_0/Q8_1 block.
const QK: usize = 32;

const ROUND: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

#[inline(always)]
unsafe fn abs_ps(v: __m256) -> __m256 {
    _mm256_andnot_ps(_mm256_set1_ps(-0.0), v)
}

/// The largest of the eight lanes.
#[inline(always)]
unsafe fn hmax(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
}

/// Four vectors of eight i32 (values 0..32 in order) as 32 i8, saturating: the two packs
/// interleave 128-bit halves, which the permute puts back in order.
#[inline(always)]
unsafe fn pack32(r: [__m256i; 4]) -> __m256i {
    let lo = _mm256_packs_epi32(r[0], r[1]);
    let hi = _mm256_packs_epi32(r[2], r[3]);
    let q = _mm256_packs_epi16(lo, hi);
    _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// A 32-value block scaled by `127 / amax` and rounded: the block's largest magnitude and the
/// rounded values as i32, eight per vector.
#[inline(always)]
unsafe fn round_block32(x: &[f32]) -> (f32, [__m256i; 4]) {
    debug_assert_eq!(x.len(), QK);
    let p = x.as_ptr();
    let v = [
        _mm256_loadu_ps(p),
        _mm256_loadu_ps(p.add(8)),
        _mm256_loadu_ps(p.add(16)),
        _mm256_loadu_ps(p.add(24)),
    ];
    let m = _mm256_max_ps(
        _mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])),
        _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])),
    );
    let amax = hmax(m);
    let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
    let r = [
        _mm256_cvtps_epi32(_mm256_round_ps::<ROUND>(_mm256_mul_ps(v[0], id))),
        _mm256_cvtps_epi32(_mm256_round_ps::<ROUND>(_mm256_mul_ps(v[1], id))),
        _mm256_cvtps_epi32(_mm256_round_ps::<ROUND>(_mm256_mul_ps(v[2], id))),
        _mm256_cvtps_epi32(_mm256_round_ps::<ROUND>(_mm256_mul_ps(v[3], id))),
    ];
    (amax, r)
}

#[inline(always)]
unsafe fn store_qs(q: __m256i) -> [i8; QK] {
    let mut qs = [0i8; QK];
    _mm256_storeu_si256(qs.as_mut_ptr() as *mut __m256i, q);
    qs
}

/// Sums of each four consecutive i8 of `q`, as eight i32 in order.
#[inline(always)]
unsafe fn sums_of_four(q: __m256i) -> __m256i {
    let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

/// `legacy::quantize_act_q8_0`, into `out` (cleared first: a decode step reuses the buffer).
///
/// # Safety
/// The CPU must support AVX2 (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_q8_0(x: &[f32], out: &mut Vec<BlockQ8_0>) {
    assert!(x.len().is_multiple_of(QK), "{} activations", x.len());
    out.clear();
    out.reserve(x.len() / QK);
    for xb in x.chunks_exact(QK) {
        let (amax, r) = round_block32(xb);
        let q = pack32(r);
        let mut sums16 = [0i32; 8];
        let s = _mm256_slli_epi32::<4>(sums_of_four(q));
        _mm256_storeu_si256(sums16.as_mut_ptr() as *mut __m256i, s);
        out.push(BlockQ8_0 {
            d: round_f16(amax / 127.0),
            qs: store_qs(q),
            sums16,
        });
    }
}

/// `legacy::quantize_act_q8_1`, into `out` (as `quantize_q8_0`).
///
/// # Safety
/// The CPU must support AVX2 (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_q8_1(x: &[f32], out: &mut Vec<BlockQ8_1>) {
    assert!(x.len().is_multiple_of(QK), "{} activations", x.len());
    out.clear();
    out.reserve(x.len() / QK);
    for xb in x.chunks_exact(QK) {
        let (amax, r) = round_block32(xb);
        let all = _mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3]));
        let mut lanes = [0i32; 8];
        _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, all);
        let sum: i32 = lanes.iter().sum();
        let d = amax / 127.0;
        out.push(BlockQ8_1 {
            d: round_f16(d),
            s: round_f16(d * sum as f32),
            qs: store_qs(pack32(r)),
        });
    }
}

/// `kquants::quantize_act_q8_k`, into `out` (as `quantize_q8_0`).
///
/// # Safety
/// The CPU must support AVX2 (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_q8_k(x: &[f32], out: &mut Vec<BlockQ8K>) {
    assert!(x.len().is_multiple_of(QK_K), "{} activations", x.len());
    out.clear();
    out.reserve(x.len() / QK_K);
    let order = _mm_loadu_si128(PAIR_ORDER.as_ptr() as *const __m128i);
    let order = _mm256_set_m128i(order, order);
    for xb in x.chunks_exact(QK_K) {
        let p = xb.as_ptr();
        let mut m = _mm256_setzero_ps();
        for c in (0..QK_K).step_by(8) {
            m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(p.add(c))));
        }
        let amax = hmax(m);
        let mut blk = BlockQ8K::ZERO;
        if amax == 0.0 {
            out.push(blk);
            continue;
        }
        // The first value whose magnitude is the largest, with its sign.
        let target = _mm256_set1_ps(amax);
        let mut max = amax;
        for c in (0..QK_K).step_by(8) {
            let hit = _mm256_cmp_ps::<_CMP_EQ_OQ>(abs_ps(_mm256_loadu_ps(p.add(c))), target);
            let mask = _mm256_movemask_ps(hit);
            if mask != 0 {
                max = xb[c + mask.trailing_zeros() as usize];
                break;
            }
        }
        let iscale = -127.0 / max;
        let s = _mm256_set1_ps(iscale);
        let top = _mm256_set1_epi32(127);
        for g in (0..QK_K).step_by(QK) {
            let mut r = [_mm256_setzero_si256(); 4];
            for (i, r) in r.iter_mut().enumerate() {
                let v = _mm256_loadu_ps(p.add(g + 8 * i));
                let q = _mm256_cvtps_epi32(_mm256_round_ps::<ROUND>(_mm256_mul_ps(s, v)));
                *r = _mm256_min_epi32(q, top);
            }
            let q = pack32(r);
            _mm256_storeu_si256(blk.qs.as_mut_ptr().add(g) as *mut __m256i, q);
            let paired = _mm256_shuffle_epi8(q, order);
            _mm256_storeu_si256(blk.qs_pairs.as_mut_ptr().add(g) as *mut __m256i, paired);
            let mut fours = [0i32; 8];
            _mm256_storeu_si256(fours.as_mut_ptr() as *mut __m256i, sums_of_four(q));
            let j = g / 16;
            blk.bsums[j] = (fours[0] + fours[1] + fours[2] + fours[3]) as i16;
            blk.bsums[j + 1] = (fours[4] + fours[5] + fours[6] + fours[7]) as i16;
        }
        blk.d = 1.0 / iscale;
        out.push(blk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::x86::available;
    use crate::quant::{kquants, legacy};
    use crate::rng::SplitMix64;

    /// Rows that exercise the rounding and the scale: random values of several magnitudes,
    /// halves that round to even, zero blocks, a lone spike, and equal magnitudes of both
    /// signs (the first one sets Q8_K's sign).
    fn rows(len: usize) -> Vec<Vec<f32>> {
        let mut rng = SplitMix64::new(17);
        let mut out = Vec::new();
        for scale in [1e-3f32, 0.7, 3.0, 250.0] {
            out.push((0..len).map(|_| rng.next_signed() * scale).collect());
        }
        out.push((0..len).map(|i| (i as f32 - 60.0) * 0.5).collect());
        out.push(vec![0.0; len]);
        let mut spike = vec![0.0; len];
        spike[len / 3] = -4.25;
        out.push(spike);
        let mut ties: Vec<f32> = (0..len).map(|_| rng.next_signed()).collect();
        for (i, v) in ties.iter_mut().enumerate() {
            if i % 37 == 5 {
                *v = if i % 2 == 0 { 2.0 } else { -2.0 };
            }
        }
        out.push(ties.iter().map(|v| -v).collect());
        out.push(ties);
        // Every product an exact half: each 32-value group leads with -127, so Q8_0/Q8_1's
        // inverse scale and Q8_K's (the first largest magnitude, negative) are exactly 1 and
        // every other value k + 0.5 is a rounding tie (to even, not away from zero).
        out.push(
            (0..len)
                .map(|i| {
                    if i % 32 == 0 {
                        -127.0
                    } else {
                        (i % 200) as f32 - 100.0 + 0.5
                    }
                })
                .collect(),
        );
        out
    }

    #[test]
    fn avx2_activation_quantizers_equal_the_scalar_references_bit_for_bit() {
        if !available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        // One set of buffers for every row, as a decode loop reuses them: each call must
        // replace what the last one left.
        let (mut q0, mut q1, mut qk) = (Vec::new(), Vec::new(), Vec::new());
        for x in rows(2 * QK_K) {
            // SAFETY: the features were just detected.
            unsafe {
                quantize_q8_0(&x, &mut q0);
                quantize_q8_1(&x, &mut q1);
                quantize_q8_k(&x, &mut qk);
            }
            let (r0, r1, rk) = (
                legacy::quantize_act_q8_0(&x),
                legacy::quantize_act_q8_1(&x),
                kquants::quantize_act_q8_k(&x),
            );
            for (a, b) in q0.iter().zip(&r0) {
                assert_eq!(
                    (a.d.to_bits(), a.qs, a.sums16),
                    (b.d.to_bits(), b.qs, b.sums16)
                );
            }
            for (a, b) in q1.iter().zip(&r1) {
                let bits = |q: &BlockQ8_1| (q.d.to_bits(), q.s.to_bits(), q.qs);
                assert_eq!(bits(a), bits(b));
            }
            for (a, b) in qk.iter().zip(&rk) {
                assert_eq!(a.d.to_bits(), b.d.to_bits());
                assert_eq!((a.qs, a.bsums, a.qs_pairs), (b.qs, b.bsums, b.qs_pairs));
            }
            assert_eq!(
                (q0.len(), q1.len(), qk.len()),
                (r0.len(), r1.len(), rk.len())
            );
        }
    }
}
