//! AVX2 forms of the k-quant decoders: the dots' integer core and the Q4_K/Q5_K/Q6_K level
//! unpacking, the same integers as the scalar references in `kquants` (tested below).

use std::arch::x86_64::*;

/// The k-quants' integer core (`kquants::lane_sums`): over a 256-weight block, lane `l`
/// collects `scale(i / sub) * level[i] * q8[i]` for every `i % 8 == l`. Sixteen products at a
/// time in i16 (|level| <= 32, |q8| <= 128: no overflow), widened so element `j` of each eight
/// lands in lane `j`, summed per sub-block, then scaled once per sub-block: the same integers
/// in another order, so exactly the reference's.
///
/// # Safety
/// AVX2 must be available (`available()`).
#[target_feature(enable = "avx2")]
pub unsafe fn kquant_lane_sums(
    levels: &[i8; 256],
    q8: &[i8; 256],
    sub: usize,
    scale: impl Fn(usize) -> i32,
) -> [i32; 8] {
    debug_assert!(sub == 16 || sub == 32);
    let mut aux = _mm256_setzero_si256();
    for s in 0..256 / sub {
        let mut part = _mm256_setzero_si256();
        for c in (s * sub..(s + 1) * sub).step_by(16) {
            let l = _mm256_cvtepi8_epi16(_mm_loadu_si128(levels.as_ptr().add(c) as *const __m128i));
            let q = _mm256_cvtepi8_epi16(_mm_loadu_si128(q8.as_ptr().add(c) as *const __m128i));
            let p = _mm256_mullo_epi16(l, q);
            let lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(p));
            let hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(p));
            part = _mm256_add_epi32(part, _mm256_add_epi32(lo, hi));
        }
        aux = _mm256_add_epi32(aux, _mm256_mullo_epi32(part, _mm256_set1_epi32(scale(s))));
    }
    let mut out = [0i32; 8];
    _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, aux);
    out
}

/// Q4_K/Q5_K levels (`kquants::q45_levels`), 32 at a time: in each 64-weight group, the low
/// nibbles of its 32 bytes then the high nibbles, plus Q5_K's fifth bit `j` of `qh[w % 32]`
/// for sub-block `j`.
///
/// # Safety
/// AVX2 must be available; `qs` holds 128 bytes and `qh` (when given) 32.
#[target_feature(enable = "avx2")]
pub unsafe fn q45_levels(qs: &[u8], qh: Option<&[u8]>, out: &mut [i8; 256]) {
    assert!(qs.len() >= 128 && qh.is_none_or(|h| h.len() >= 32));
    let m4 = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let high = qh.map(|h| _mm256_loadu_si256(h.as_ptr() as *const __m256i));
    for g in 0..4 {
        let v = _mm256_loadu_si256(qs.as_ptr().add(32 * g) as *const __m256i);
        for (half, mut q) in [
            (0, _mm256_and_si256(v, m4)),
            (1, _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4)),
        ] {
            let j = 2 * g + half;
            if let Some(h) = high {
                let bit = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(j as i32)), one);
                q = _mm256_or_si256(q, _mm256_slli_epi16::<4>(bit));
            }
            _mm256_storeu_si256(out.as_mut_ptr().add(32 * j) as *mut __m256i, q);
        }
    }
}

/// Q6_K levels (`kquants::q6_levels`), 32 at a time: for half `h` and quarter `k`, nibble
/// `k / 2` of `ql[64h + 32(k % 2) ..]`, bits `2k..2k+2` of `qh[32h ..]` above it, minus 32.
///
/// # Safety
/// AVX2 must be available; `b` holds a 210-byte Q6_K block.
#[target_feature(enable = "avx2")]
pub unsafe fn q6_levels(b: &[u8], out: &mut [i8; 256]) {
    assert!(b.len() >= 192);
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    for h in 0..2 {
        let qh = _mm256_loadu_si256(b.as_ptr().add(128 + 32 * h) as *const __m256i);
        for k in 0..4 {
            let ql = _mm256_loadu_si256(b.as_ptr().add(64 * h + 32 * (k % 2)) as *const __m256i);
            let low = if k < 2 {
                _mm256_and_si256(ql, m4)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql), m4)
            };
            let top = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k as i32)), m2);
            let q = _mm256_or_si256(low, _mm256_slli_epi16::<4>(top));
            let lv = _mm256_sub_epi8(q, _mm256_set1_epi8(32));
            _mm256_storeu_si256(out.as_mut_ptr().add(128 * h + 32 * k) as *mut __m256i, lv);
        }
    }
}

/// Q3_K levels (`kquants::q3_levels`, -4..3), 32 at a time: for half `n` and quarter `j`,
/// bits `2j..2j+2` of `qs[32n ..]`, minus 4 where bit `4n + j` of `hmask` is clear.
///
/// # Safety
/// AVX2 must be available; `b` holds a 110-byte Q3_K block.
#[target_feature(enable = "avx2")]
pub unsafe fn q3_levels(b: &[u8], out: &mut [i8; 256]) {
    assert!(b.len() >= 96);
    let hmask = _mm256_loadu_si256(b.as_ptr() as *const __m256i);
    let m2 = _mm256_set1_epi8(0x03);
    let four = _mm256_set1_epi8(4);
    for n in 0..2 {
        let qs = _mm256_loadu_si256(b.as_ptr().add(32 + 32 * n) as *const __m256i);
        for j in 0..4 {
            let low = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * j as i32)), m2);
            let bit = _mm256_set1_epi8((1u8 << (4 * n + j)) as i8);
            let clear = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), _mm256_setzero_si256());
            let lv = _mm256_sub_epi8(low, _mm256_and_si256(clear, four));
            _mm256_storeu_si256(out.as_mut_ptr().add(128 * n + 32 * j) as *mut __m256i, lv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::x86::available;
    use crate::rng::SplitMix64 as Rng;

    #[test]
    fn kquant_levels_equal_the_reference() {
        if !available() {
            eprintln!("skipped: no AVX2 on this CPU");
            return;
        }
        let mut rng = Rng::new(0x1e7e1);
        for _ in 0..100 {
            let b: Vec<u8> = (0..210).map(|_| rng.next_u64() as u8).collect();
            let (mut want, mut got) = ([0i8; 256], [0i8; 256]);
            crate::quant::kquants::q6_levels_scalar(&b, &mut want);
            // SAFETY: AVX2 was just detected; b is a whole Q6_K block.
            unsafe { q6_levels(&b, &mut got) };
            assert_eq!(got, want, "Q6_K");
            crate::quant::kquants::q3_levels_scalar(&b[..110], &mut want);
            // SAFETY: as above; b holds a whole Q3_K block.
            unsafe { q3_levels(&b[..110], &mut got) };
            assert_eq!(got, want, "Q3_K");
            for qh in [None, Some(&b[128..160])] {
                crate::quant::kquants::q45_levels_scalar(&b[..128], qh, &mut want);
                // SAFETY: as above; 128 bytes of nibbles and 32 of high bits.
                unsafe { q45_levels(&b[..128], qh, &mut got) };
                assert_eq!(got, want, "Q4_K/Q5_K, high bits: {}", qh.is_some());
            }
        }
    }

    #[test]
    fn kquant_lane_sums_equal_the_reference() {
        if !available() {
            eprintln!("skipped: no AVX2 on this CPU");
            return;
        }
        let mut rng = Rng::new(0x5eed);
        for sub in [16usize, 32] {
            for _ in 0..200 {
                let lv: [i8; 256] = std::array::from_fn(|_| (rng.next_u64() % 64) as i8 - 32);
                let q8: [i8; 256] = std::array::from_fn(|_| (rng.next_u64() % 256) as u8 as i8);
                let sc: Vec<i32> = (0..256 / sub)
                    .map(|_| (rng.next_u64() % 128) as i32 - 64)
                    .collect();
                let want = crate::quant::kquants::lane_sums_scalar(&lv, &q8, sub, |s| sc[s]);
                // SAFETY: AVX2 was just detected.
                let got = unsafe { kquant_lane_sums(&lv, &q8, sub, |s| sc[s]) };
                assert_eq!(got, want, "sub {sub}");
            }
        }
    }
}
