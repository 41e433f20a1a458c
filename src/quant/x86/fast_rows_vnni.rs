//! `fast_rows`' Q4_0 kernel on AVX-512 VNNI: two repacked groups of eight rows side by side in
//! one 512-bit vector (sixteen rows), and `vpdpbusd` multiplying the unsigned nibbles by a
//! broadcast activation word and adding the four products into each row's 32-bit sum in one
//! instruction, where AVX2 takes a `maddubs`, a 16-bit add and a widening `madd`. Same
//! arithmetic as `fast_rows::rows8`, bit for bit (exact integer block sums, each row's float
//! chain in the same order).

use std::arch::x86_64::*;

use super::fast_rows::{Q4_0x8, SummedBlock};
use super::prefetch::prefetch_ahead;

/// Whether the CPU runs `rows16` (cached by std after the first call).
pub fn available() -> bool {
    super::features::available()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// Groups `g0` and `g1` (eight rows each, `per_row` blocks from `fast_rows::repack`) against
/// `T` activation rows: `out[t][0..8]` = group `g0`'s rows dotted with `a[t]`, `out[t][8..16]`
/// group `g1`'s.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI (`available()`).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn rows16<const T: usize>(
    g0: &[Q4_0x8],
    g1: &[Q4_0x8],
    a: [&[SummedBlock]; T],
    mut out: [&mut [f32]; T],
) {
    let per_row = g0.len();
    assert_eq!(g1.len(), per_row, "groups differ in length");
    for t in 0..T {
        assert_eq!(a[t].len(), per_row, "activation rows differ in length");
        assert!(out[t].len() >= 16, "an output row is short");
    }
    let mask = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); T];
    for i in 0..per_row {
        // SAFETY: i < per_row, the length of both groups and of every activation row.
        let (b0, b1) = unsafe { (g0.get_unchecked(i), g1.get_unchecked(i)) };
        if T == 1 {
            // One token streams the blocks from memory once (`prefetch_ahead` says why).
            for b in [b0, b1] {
                let p = (b as *const Q4_0x8).cast::<u8>();
                for line in (0..std::mem::size_of::<Q4_0x8>()).step_by(64) {
                    prefetch_ahead(p.wrapping_add(line));
                }
            }
        }
        let y: [&SummedBlock; T] = std::array::from_fn(|t| unsafe { a[t].get_unchecked(i) });
        let d = _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(
            _mm256_castsi128_si256(_mm_loadu_si128(b0.d.as_ptr() as *const __m128i)),
            _mm_loadu_si128(b1.d.as_ptr() as *const __m128i),
        ));
        let mut s = [_mm512_setzero_si512(); T];
        for v in 0..4 {
            let packed = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_loadu_si256(b0.q[v].as_ptr() as *const __m256i)),
                _mm256_loadu_si256(b1.q[v].as_ptr() as *const __m256i),
            );
            let lo = _mm512_and_si512(packed, mask);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(packed), mask);
            for t in 0..T {
                let word = |c: usize| {
                    // SAFETY: c < 8, so bytes 4c..4c + 4 lie within the 32 of `qs`.
                    unsafe { (y[t].qs.as_ptr().add(4 * c) as *const i32).read_unaligned() }
                };
                s[t] = _mm512_dpbusd_epi32(s[t], lo, _mm512_set1_epi32(word(v)));
                s[t] = _mm512_dpbusd_epi32(s[t], hi, _mm512_set1_epi32(word(v + 4)));
            }
        }
        for t in 0..T {
            let isum = _mm512_sub_epi32(s[t], _mm512_set1_epi32(y[t].eight_sum));
            let dd = _mm512_mul_ps(d, _mm512_set1_ps(y[t].d));
            acc[t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isum), acc[t]);
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        _mm512_storeu_ps(o.as_mut_ptr(), s);
    }
}
