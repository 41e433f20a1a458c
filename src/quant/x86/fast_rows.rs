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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::x86::available;
    use crate::quant::{legacy, quantize_act, ActType, QuantizedAct};
    use crate::rng::SplitMix64 as Rng;
    use half::f16;

    /// Rows of random `ty` blocks with finite scales.
    fn rows(rng: &mut Rng, ty: GgmlType, n: usize, per_row: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..n * per_row {
            let mut b: Vec<u8> = (0..ty.block_bytes())
                .map(|_| rng.next_u64() as u8)
                .collect();
            if ty == GgmlType::Q8_0 {
                // Levels within +-127, as quantizing gives.
                b.iter_mut()
                    .skip(2)
                    .for_each(|q| *q = (*q as i8).max(-127) as u8);
            }
            b[..2].copy_from_slice(&f16::from_f32(rng.next_signed() * 0.05).to_le_bytes());
            out.extend(b);
        }
        out
    }

    /// Weight k of a `ty` block.
    fn level(ty: GgmlType, blk: &[u8], k: usize) -> i32 {
        match ty {
            GgmlType::Q4_0 if k < 16 => (blk[2 + k] & 15) as i32 - 8,
            GgmlType::Q4_0 => (blk[2 + k - 16] >> 4) as i32 - 8,
            _ => blk[2 + k] as i8 as i32,
        }
    }

    /// The dot in f64 from the same integer block sums and f32 scale products, and the sum
    /// of the blocks' magnitudes (the reordering bound's scale).
    fn exact_f64(ty: GgmlType, w: &[u8], a: &[BlockQ8_0]) -> (f64, f64) {
        let (mut sum, mut mag) = (0f64, 0f64);
        for (blk, y) in w.chunks_exact(ty.block_bytes()).zip(a) {
            let d = f16::from_le_bytes([blk[0], blk[1]]).to_f32() * y.d;
            let isum: i32 = (0..32).map(|k| level(ty, blk, k) * y.qs[k] as i32).sum();
            sum += d as f64 * isum as f64;
            mag += (d as f64 * isum as f64).abs();
        }
        (sum, mag)
    }

    #[test]
    fn interleaved_rows_match_the_reference_within_float_reordering() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C");
            return;
        }
        let mut rng = Rng::new(7);
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
            for per_row in [1usize, 3, 28, 152] {
                let n_rows = 19; // two groups of eight and three rows left out
                let w = rows(&mut rng, ty, n_rows, per_row);
                let rb = per_row * ty.block_bytes();
                let acts: Vec<Vec<BlockQ8_0>> = (0..5)
                    .map(|_| {
                        let x: Vec<f32> =
                            (0..per_row * 32).map(|_| rng.next_signed() * 3.0).collect();
                        match quantize_act(ActType::Q8_0, &x) {
                            QuantizedAct::Q8_0(a) => a,
                            _ => unreachable!(),
                        }
                    })
                    .collect();
                let mut blocks = Vec::new();
                // SAFETY: `available()` was checked above.
                unsafe { interleave(ty, &w, rb, &mut blocks) };
                assert_eq!(blocks.len(), 2 * per_row, "whole groups only");
                for g in 0..2 {
                    let group = &blocks[g * per_row..(g + 1) * per_row];
                    let mut o = [[0f32; 8]; 5];
                    let [o0, o1, o2, o3, o4] = &mut o;
                    let a = [&acts[0][..], &acts[1][..], &acts[2][..], &acts[3][..]];
                    // SAFETY: as above.
                    unsafe {
                        if ty == GgmlType::Q8_0 {
                            rows8::<4, true>(group, a, [o0, o1, o2, o3]);
                            rows8::<1, true>(group, [&acts[4][..]], [o4]);
                        } else {
                            rows8::<4, false>(group, a, [o0, o1, o2, o3]);
                            rows8::<1, false>(group, [&acts[4][..]], [o4]);
                        }
                    }
                    for (t, o) in o.iter().enumerate() {
                        for (r, &got) in o.iter().enumerate() {
                            let row = &w[(g * 8 + r) * rb..][..rb];
                            let (want, mag) = exact_f64(ty, row, &acts[t]);
                            let bound = per_row as f64 * 1.2e-7 * mag + 1e-6;
                            assert!(
                                (got as f64 - want).abs() <= bound,
                                "{ty} {per_row} blocks, group {g} row {r} token {t}: {got} vs \
                                 {want} (bound {bound})"
                            );
                            let reference = match ty {
                                GgmlType::Q4_0 => legacy::vec_dot_q4_0_q8_0(row, &acts[t]),
                                _ => legacy::vec_dot_q8_0_q8_0(row, &acts[t]),
                            };
                            // The exact kernel's own rounding: its eight lane sums and their
                            // adding up.
                            let reference_bound = (per_row + 8) as f64 * 1.2e-7 * mag + 1e-6;
                            assert!(
                                (got - reference).abs() as f64 <= bound + reference_bound,
                                "{ty}: {got} vs the exact kernel's {reference}"
                            );
                        }
                    }
                }
            }
        }
    }
}
