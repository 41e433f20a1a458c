//! Q5_0 blocks unpacked to their stored 5-bit values: the step the single-row and four-row
//! Q5_0 kernels share, and a prompt's rows unpacked once per task (`unpack_q5_0`) for
//! `rows_q5_0_unpacked`.

use std::arch::x86_64::*;

use super::loads::{f16_pair, high_bits, hsum, load32, u32_at};
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

/// A Q5_0 block unpacked for a prompt's products: its 32 stored values (the level plus 16,
/// 0..31) one per byte, and its scale widened to f32 (exact).
#[derive(Clone, Copy)]
pub struct Q5_0Unpacked {
    u: [u8; 32],
    d: f32,
}

/// Every block of `rows` (whole Q5_0 rows) unpacked into `out` (cleared first). A prompt's
/// task dots a few rows against every token of the prompt; the 5-bit unpacking, a third of
/// the per-block work, then happens once per task instead of once per four tokens.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn unpack_q5_0(rows: &[u8], out: &mut Vec<Q5_0Unpacked>) {
    assert_eq!(rows.len() % 22, 0, "whole Q5_0 blocks");
    out.clear();
    out.extend(rows.chunks_exact(22).map(|b| {
        let mut u = [0u8; 32];
        _mm256_storeu_si256(u.as_mut_ptr() as *mut __m256i, q5_0_unsigned(b));
        Q5_0Unpacked {
            u,
            d: f16_pair(b, 0).0,
        }
    }));
}

/// `vec_dot_q5_0_q8_0` of every row of `blocks` (rows of `per_row` unpacked blocks) with `T`
/// activation rows: `out[t][r]`. Per (row, token) the same operations in the same block
/// order as the single-row kernel (`q5_0_tile`), so the same bits; each block's values are
/// loaded once for the `T` tokens.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q5_0_unpacked<const T: usize>(
    blocks: &[Q5_0Unpacked],
    per_row: usize,
    a: [&[BlockQ8_0]; T],
    out: [&mut [f32]; T],
) {
    assert!(per_row > 0 && blocks.len().is_multiple_of(per_row));
    let rows = blocks.len() / per_row;
    for t in 0..T {
        assert_eq!(a[t].len(), per_row, "activation rows differ in length");
        assert!(out[t].len() >= rows, "an output row is short");
    }
    for (r, row) in blocks.chunks_exact(per_row).enumerate() {
        let mut acc = [_mm256_setzero_ps(); T];
        for (i, b) in row.iter().enumerate() {
            let u = _mm256_loadu_si256(b.u.as_ptr() as *const __m256i);
            let dw = _mm256_set1_ps(b.d);
            for t in 0..T {
                // SAFETY: every activation row holds `per_row` blocks (asserted above).
                let y = unsafe { a[t].get_unchecked(i) };
                let d = _mm256_mul_ps(dw, _mm256_set1_ps(y.d));
                acc[t] = _mm256_fmadd_ps(d, lanes_q5_0(u, y), acc[t]);
            }
        }
        for t in 0..T {
            out[t][r] = hsum(acc[t]);
        }
    }
}
