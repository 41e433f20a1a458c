//! Two to eight tokens (sequences decoding together) against Q4_0, Q5_0 or Q8_0 rows in the
//! file's layout on AVX-512 VNNI: each weight block is read and made signed once, and the
//! tokens' dots with it go two per 512-bit register (`vnni::BiasedPair`), so a few-token
//! product reads its weights once, as one token's does, at about four instructions per block
//! and pair of tokens. Same bits as `legacy::vec_dot_q*_0_q8_0`, for the reason `vnni` gives:
//! each half of an accumulator is one token's eight-lane accumulator, updated block after
//! block in the reference's order, from the same exact integers.
//!
//! A prompt's rows are unpacked once per task instead (`vnni::rows_signed`): there each block
//! serves many tokens, here a block's unpacking is a share of two to four pairs' work and
//! storing it would cost as much as redoing it.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::loads::f16_pair;
use super::prefetch::prefetch_ahead;
use super::vnni::{levels_q4_0, levels_q5_0, levels_q8_0, pair_sums, BiasedPair};
use crate::quant::GgmlType;

/// Most pairs of tokens `rows_few` takes (eight tokens).
pub const MAX_PAIRS: usize = 4;

/// Whether `rows_few` takes `ty` rows on this CPU.
pub fn takes(ty: GgmlType) -> bool {
    super::vnni::SignedRows::unpacks(ty) && super::vnni::available()
}

/// A weight type's signed levels of a block (a type per weight type, so each kernel is
/// compiled with its decoding inlined).
trait Levels {
    /// The block at the start of `b`'s 32 levels.
    unsafe fn levels(b: &[u8]) -> __m256i;
}

struct Q4_0;
struct Q5_0;
struct Q8_0;

impl Levels for Q4_0 {
    #[inline(always)]
    unsafe fn levels(b: &[u8]) -> __m256i {
        levels_q4_0(b)
    }
}

impl Levels for Q5_0 {
    #[inline(always)]
    unsafe fn levels(b: &[u8]) -> __m256i {
        levels_q5_0(b)
    }
}

impl Levels for Q8_0 {
    #[inline(always)]
    unsafe fn levels(b: &[u8]) -> __m256i {
        levels_q8_0(b)
    }
}

/// `R` consecutive rows (`w`, from the first, `row_bytes` apart) against `P` pairs of
/// tokens: per block, each row's levels (`L`), the `-128 * Σ level` lane sums that start
/// `vpdpbusd`'s sums (the tokens are biased by +128) and the scale, then one `vpdpbusd`,
/// conversion, multiply and FMA per row and pair.
#[inline(always)]
unsafe fn tile<L: Levels, const R: usize, const P: usize>(
    w: &[u8],
    (row_bytes, bytes): (usize, usize),
    a: [&BiasedPair; P],
) -> [[__m512; P]; R] {
    let blocks = a[0].qs.len();
    debug_assert!(w.len() >= (R - 1) * row_bytes + blocks * bytes);
    let mut acc = [[_mm512_setzero_ps(); P]; R];
    let (zero, bias) = (_mm512_setzero_si512(), _mm512_set1_epi8(-128));
    // The prefetches walk the rows' bytes in address order (`legacy::two_rows` says why).
    let mut ahead = w.as_ptr();
    for i in 0..blocks {
        let mut lv = [zero; R];
        let mut start = [zero; R];
        let mut dw = [_mm512_setzero_ps(); R];
        for r in 0..R {
            prefetch_ahead(ahead);
            ahead = ahead.wrapping_add(bytes);
            // SAFETY: row r holds `blocks` blocks of `bytes` (the caller's slices).
            let b = unsafe { w.get_unchecked(r * row_bytes + i * bytes..) };
            lv[r] = _mm512_broadcast_i64x4(L::levels(b));
            // 128 * (four levels' sum) per lane, exact in 32 bits, negated.
            start[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, lv[r]));
            dw[r] = _mm512_set1_ps(f16_pair(b, 0).0);
        }
        for p in 0..P {
            let q = _mm512_loadu_si512(a[p].qs.as_ptr().add(i) as *const _);
            let da = _mm512_loadu_ps(a[p].d.as_ptr().add(i) as *const f32);
            for r in 0..R {
                let lanes = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start[r], q, lv[r]));
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da), lanes, acc[r][p]);
            }
        }
    }
    acc
}

/// Every row of `rows` against the `P` pairs, `R` rows at a time (then one by one):
/// `out[2p + k][r]` for token `k` of pair `p`.
#[inline(always)]
unsafe fn run<L: Levels, const R: usize, const P: usize>(
    rows: &[u8],
    (row_bytes, bytes): (usize, usize),
    pairs: &[BiasedPair],
    out: &mut [&mut [f32]],
) {
    let a: [&BiasedPair; P] = std::array::from_fn(|p| &pairs[p]);
    let count = rows.len() / row_bytes;
    let whole = count / R * R;
    for r in (0..whole).step_by(R) {
        let acc = tile::<L, R, P>(&rows[r * row_bytes..], (row_bytes, bytes), a);
        for (k, acc) in acc.into_iter().enumerate() {
            put(out, r + k, acc);
        }
    }
    for r in whole..count {
        let [acc] = tile::<L, 1, P>(&rows[r * row_bytes..], (row_bytes, bytes), a);
        put(out, r, acc);
    }
}

/// Row `r`'s results of the `P` pairs' accumulators into `out[2p + k][r]`.
#[inline(always)]
unsafe fn put<const P: usize>(out: &mut [&mut [f32]], r: usize, acc: [__m512; P]) {
    for (p, v) in acc.into_iter().enumerate() {
        let [s0, s1] = pair_sums(v);
        out[2 * p][r] = s0;
        out[2 * p + 1][r] = s1;
    }
}

/// `out[2p + k][r]` = `legacy::vec_dot_q*_0_q8_0(row r of rows, token k of pairs[p])`, bit
/// for bit, for `ty` rows (Q4_0, Q5_0 or Q8_0) of `row_bytes` and one to `MAX_PAIRS` pairs
/// (an odd last token paired with itself, its twin's results going to a spare `out` row).
///
/// # Safety
/// The CPU must support what `vnni::available()` checks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn rows_few(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    pairs: &[BiasedPair],
    out: &mut [&mut [f32]],
) {
    let bytes = ty.block_bytes();
    let count = rows.len() / row_bytes;
    assert!(
        (1..=MAX_PAIRS).contains(&pairs.len()) && out.len() == 2 * pairs.len(),
        "one to {MAX_PAIRS} pairs, two outputs each"
    );
    assert!(
        rows.len() == count * row_bytes
            && pairs
                .iter()
                .all(|p| p.blocks() * bytes == row_bytes && p.d.len() == p.blocks()),
        "whole {ty} rows as long as every token's row"
    );
    assert!(
        out.iter().all(|o| o.len() >= count),
        "an output row is short"
    );
    match ty {
        GgmlType::Q4_0 => by_pairs::<Q4_0>(rows, (row_bytes, bytes), pairs, out),
        GgmlType::Q5_0 => by_pairs::<Q5_0>(rows, (row_bytes, bytes), pairs, out),
        GgmlType::Q8_0 => by_pairs::<Q8_0>(rows, (row_bytes, bytes), pairs, out),
        _ => panic!("{ty} rows are not Q4_0, Q5_0 or Q8_0"),
    }
}

/// `run` with its row tile for the number of pairs.
#[inline(always)]
unsafe fn by_pairs<L: Levels>(
    rows: &[u8],
    g: (usize, usize),
    pairs: &[BiasedPair],
    out: &mut [&mut [f32]],
) {
    // SAFETY (each arm): `rows_few`'s checks and target features.
    unsafe {
        match pairs.len() {
            1 => run::<L, 4, 1>(rows, g, pairs, out),
            2 => run::<L, 2, 2>(rows, g, pairs, out),
            3 => run::<L, 2, 3>(rows, g, pairs, out),
            _ => run::<L, 2, 4>(rows, g, pairs, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::blocks::BlockQ8_0;
    use crate::quant::test_rows::{assert_products, rows_and_acts, Q8_0_ACT_TYPES};
    use crate::rng::SplitMix64 as Rng;

    /// Two to eight tokens (odd counts with a twin) against rows of odd and even block counts
    /// and row counts not a multiple of the row tile: the reference's bits.
    #[test]
    fn few_tokens_equal_the_reference_bit_for_bit() {
        if !super::super::vnni::available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (F, BW, VL and VNNI)");
            return;
        }
        let mut rng = Rng::new(37);
        for ty in Q8_0_ACT_TYPES {
            for blocks in [1usize, 2, 3, 28, 29, 152] {
                for rows in [1usize, 2, 5, 7] {
                    let (w, acts) = rows_and_acts(&mut rng, ty, rows, blocks);
                    for n in 2..=8 {
                        let tok = |t: usize| acts[t.min(n - 1)].as_slice();
                        let pairs: Vec<BiasedPair> = (0..n.div_ceil(2))
                            .map(|p| BiasedPair::new(tok(2 * p), tok(2 * p + 1)))
                            .collect();
                        let mut outs = vec![vec![f32::NAN; rows]; 2 * pairs.len()];
                        let mut o: Vec<&mut [f32]> =
                            outs.iter_mut().map(|v| v.as_mut_slice()).collect();
                        // SAFETY: AVX-512 VNNI was just detected.
                        unsafe { rows_few(ty, &w, blocks * ty.block_bytes(), &pairs, &mut o) };
                        let all: Vec<&[BlockQ8_0]> = (0..2 * pairs.len()).map(tok).collect();
                        let got: Vec<&[f32]> = outs.iter().map(|v| v.as_slice()).collect();
                        let what = format!("{n} tokens, {rows} rows of {blocks} blocks");
                        assert_products(ty, &w, blocks, &all, &got, &what);
                    }
                }
            }
        }
    }
}
