//! The k-quant decoders that have an AVX2 form (`x86::kquant_core`): taken where the CPU has
//! it, the scalar reference (`decode`) otherwise; the same integers either way.

use super::decode::{lane_sums_scalar, q3_levels_scalar, q45_levels_scalar, q6_levels_scalar};
use crate::quant::blocks::QK_K;

/// Q4_K/Q5_K 4-bit levels: in each 64-weight group `g`, weights 0..32 are the low nibbles of
/// `qs[32g..32g + 32]`, weights 32..64 the high nibbles. `qh` (Q5_K) adds 16 where bit `w / 32`
/// of `qh[w % 32]` is set.
#[inline]
pub(super) fn q45_levels(qs: &[u8], qh: Option<&[u8]>, out: &mut [i8; QK_K]) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        // SAFETY: AVX2 was just detected; the callers pass whole blocks' fields.
        return unsafe { crate::quant::x86::q45_levels(qs, qh, out) };
    }
    q45_levels_scalar(qs, qh, out)
}

/// Q3_K levels (-4..3): the 2 low bits as in Q2_K, minus 4 where bit `w / 32` of
/// `hmask[w % 32]` is clear.
#[inline]
pub(super) fn q3_levels(b: &[u8], out: &mut [i8; QK_K]) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        // SAFETY: AVX2 was just detected; `b` is a whole Q3_K block.
        return unsafe { crate::quant::x86::q3_levels(b, out) };
    }
    q3_levels_scalar(b, out)
}

/// Q6_K levels (-32..31): in each 128-weight half `h`, weight `32k + l` takes the low (k < 2)
/// or high (k >= 2) nibble of `ql[64h + l + 32 * (k % 2)]` and bits `2k..2k+2` of
/// `qh[32h + l]` as its top two bits.
#[inline]
pub(super) fn q6_levels(b: &[u8], out: &mut [i8; QK_K]) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        // SAFETY: AVX2 was just detected; `b` is a whole Q6_K block.
        return unsafe { crate::quant::x86::q6_levels(b, out) };
    }
    q6_levels_scalar(b, out)
}

/// The generic kernels' integer core for Q3_K..Q6_K: eight lane sums, lane `i % 8` collecting
/// `scale[i / sub] * a[i] * q8[i]`. Exact integers; the lanes only fix the later f32 order, so
/// the AVX2 version (`x86::kquant_lane_sums`) gives the same sums.
#[inline]
pub(super) fn lane_sums(
    levels: &[i8; QK_K],
    q8: &[i8; QK_K],
    sub: usize,
    scale: impl Fn(usize) -> i32,
) -> [i32; 8] {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        // SAFETY: AVX2 was just detected.
        return unsafe { crate::quant::x86::kquant_lane_sums(levels, q8, sub, scale) };
    }
    lane_sums_scalar(levels, q8, sub, scale)
}
