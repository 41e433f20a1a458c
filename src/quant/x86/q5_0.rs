//! Q5_0 blocks unpacked to their stored 5-bit values: the step the single-row and four-row
//! Q5_0 kernels share, and a prompt's rows unpacked once per task (`prompt_rows`).

use std::arch::x86_64::*;

use super::loads::{high_bits, load32, u32_at};
use crate::quant::blocks::BlockQ8_0;

/// Q5_0's stored 5-bit values (0..31: the level plus 16), weight order. The 16 nibble bytes
/// are loaded into both halves and the high half's shifted right by 4 in one `vpsrlvd` (the
/// bits it pulls into each byte's top are masked away).
#[inline(always)]
pub(super) unsafe fn q5_0_unsigned(b: &[u8]) -> __m256i {
    debug_assert!(b.len() >= 22);
    let qs = _mm_loadu_si128(b.as_ptr().add(6) as *const __m128i);
    let shifts = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    let nib = _mm256_srlv_epi32(_mm256_broadcastsi128_si256(qs), shifts);
    _mm256_or_si256(
        _mm256_and_si256(nib, _mm256_set1_epi8(0x0F)),
        high_bits(u32_at(b, 2)),
    )
}

/// Lane sums of Q5_0 levels (`u - 16`) with an activation block: `maddubs` on the unsigned
/// values (|pair| <= 2 * 31 * 128, no saturation) minus `16 * Σ a` per lane, which the block
/// carries (`BlockQ8_0::sums16`): the same integers as the signed products, two `vpsignb`
/// fewer per block.
#[inline(always)]
pub(super) unsafe fn lanes_q5_0(u: __m256i, y: &BlockQ8_0) -> __m256 {
    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, load32(&y.qs)), _mm256_set1_epi16(1));
    let off = _mm256_loadu_si256(y.sums16.as_ptr() as *const __m256i);
    _mm256_cvtepi32_ps(_mm256_sub_epi32(p, off))
}
