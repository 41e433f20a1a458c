//! A prompt's Q4_0 and Q8_0 products for the CPU's `fast` numerics (docs/DESIGN.md
//! "Numerics"): eight weight rows interleaved four weights at a time, so that one vector holds
//! a block's four weights of all eight rows and one broadcast activation word multiplies them
//! all; a block's eight row sums then take one conversion and one fused multiply-add together,
//! where the exact kernels (`prompt_rows`) spend those per row and token. Each row's sum is one
//! float chain over its blocks in order (the reference keeps eight lane sums and adds them at
//! the end), so results differ from the exact ones by float reordering only; the integer part
//! of each block is exact.

use std::arch::x86_64::*;

use super::loads::{f16_pair, nibbles};
use crate::quant::blocks::BlockQ8_0;
use crate::quant::GgmlType;

/// One block of eight interleaved rows: `q[c]` holds weights `4c..4c + 4` of rows 0..8 (row r
/// at bytes `4r..4r + 4`), Q4_0's as unsigned nibbles (the level plus 8), Q8_0's as its signed
/// levels; `d` the rows' scales.
#[derive(Clone, Copy)]
pub struct Block8 {
    q: [[u8; 32]; 8],
    d: [f32; 8],
}

impl Default for Block8 {
    fn default() -> Block8 {
        Block8 {
            q: [[0; 32]; 8],
            d: [0.0; 8],
        }
    }
}

/// Whether `ty`'s prompt products have a fast kernel here.
pub fn interleaves(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q8_0)
}

/// Rows of `ty` blocks (Q4_0 or Q8_0; `row_bytes` each, whole blocks) in groups of eight into
/// `out` (cleared first): group g's block i at `g * per_row + i`. Rows past the last whole
/// group of eight are left out (the caller takes them on the exact kernels).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn interleave(ty: GgmlType, rows: &[u8], row_bytes: usize, out: &mut Vec<Block8>) {
    assert!(interleaves(ty), "{ty} has no interleaved kernel");
    let bytes = ty.block_bytes();
    assert_eq!(row_bytes % bytes, 0, "whole {ty} blocks");
    let (n_rows, per_row) = (rows.len() / row_bytes, row_bytes / bytes);
    out.clear();
    for g in 0..n_rows / 8 {
        for i in 0..per_row {
            let mut b = Block8::default();
            // Row r's 32 nibbles as eight words (word c: weights 4c..4c + 4), transposed so
            // that word c of every row lands in q[c].
            let words: [__m256; 8] = std::array::from_fn(|r| {
                let blk = &rows[(g * 8 + r) * row_bytes + i * bytes..][..bytes];
                b.d[r] = f16_pair(blk, 0).0;
                _mm256_castsi256_ps(if ty == GgmlType::Q4_0 {
                    nibbles(&blk[2..18])
                } else {
                    _mm256_loadu_si256(blk[2..34].as_ptr() as *const __m256i)
                })
            });
            for (q, v) in b.q.iter_mut().zip(transpose8(words)) {
                _mm256_storeu_ps(q.as_mut_ptr() as *mut f32, v);
            }
            out.push(b);
        }
    }
}

/// The 8 x 8 transpose of 32-bit elements: element c of row r to element r of row c (as
/// floats: only moved, never computed on).
#[inline(always)]
unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (a, b) = (r[2 * (i / 2)], r[2 * (i / 2) + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(a, b)
        } else {
            _mm256_unpackhi_ps(a, b)
        }
    });
    // s[0..4]: words 0/4, 1/5, 2/6, 3/7 of rows 0..4; s[4..8]: the same of rows 4..8.
    let s = [
        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    std::array::from_fn(|c| {
        if c < 4 {
            _mm256_permute2f128_ps::<0x20>(s[c], s[c + 4])
        } else {
            _mm256_permute2f128_ps::<0x31>(s[c - 4], s[c])
        }
    })
}

/// A group of eight interleaved rows (`per_row` blocks from `interleave`; `Q8`: of Q8_0, else
/// of Q4_0) against `T` activation rows: `out[t][0..8]` = the eight rows dotted with `a[t]`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows8<const T: usize, const Q8: bool>(
    blocks: &[Block8],
    a: [&[BlockQ8_0]; T],
    mut out: [&mut [f32]; T],
) {
    let per_row = blocks.len();
    for t in 0..T {
        assert_eq!(a[t].len(), per_row, "activation rows differ in length");
        assert!(out[t].len() >= 8, "an output row is short");
    }
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    for (i, b) in blocks.iter().enumerate() {
        let w: [__m256i; 8] =
            std::array::from_fn(|c| _mm256_loadu_si256(b.q[c].as_ptr() as *const __m256i));
        let dw = _mm256_loadu_ps(b.d.as_ptr());
        for t in 0..T {
            // SAFETY: every activation row holds `per_row` blocks (asserted above).
            let y = unsafe { a[t].get_unchecked(i) };
            let word = |c: usize| {
                // SAFETY: c < 8, so bytes 4c..4c + 4 lie within the 32 of `qs`.
                _mm256_set1_epi32(unsafe {
                    (y.qs.as_ptr().add(4 * c) as *const i32).read_unaligned()
                })
            };
            let isum = if Q8 {
                // |w| times a with w's sign (pairs within +-32512: one i16 each, widened at
                // once).
                let mut s32 = _mm256_setzero_si256();
                for (c, wc) in w.iter().enumerate() {
                    let p = _mm256_maddubs_epi16(
                        _mm256_sign_epi8(*wc, *wc),
                        _mm256_sign_epi8(word(c), *wc),
                    );
                    s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(p, ones));
                }
                s32
            } else {
                // Nibble times int8 pairs are within +-3840 and eight of them within i16.
                let mut s16 = _mm256_maddubs_epi16(w[0], word(0));
                for (c, wc) in w.iter().enumerate().skip(1) {
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(*wc, word(c)));
                }
                // Levels are nibble - 8: take 8 x the block's activation sum (sums16 holds
                // 16 x the sums of its four-value lanes).
                let eight_sum = y.sums16.iter().sum::<i32>() / 2;
                _mm256_sub_epi32(_mm256_madd_epi16(s16, ones), _mm256_set1_epi32(eight_sum))
            };
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(y.d));
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[t]);
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        _mm256_storeu_ps(o.as_mut_ptr(), s);
    }
}
