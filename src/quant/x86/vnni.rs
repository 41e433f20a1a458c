//! AVX-512 VNNI kernel for a prompt's Q4_0, Q5_0 and Q8_0 products (Q5_0 is the bulk of a
//! q4_k_m Qwen2.5-0.5b's prefill: 896 columns are not a multiple of 256, so its Q, K, O, gate
//! and up are Q5_0), used where the CPU has AVX-512 F/BW/VL and VNNI (detected at run time;
//! never AMX). Same bits as `legacy::vec_dot_q*_0_q8_0`.
//!
//! Why the results are the same: the reference's block arithmetic is eight exact integer lane
//! sums (lane `l` holds the products of weights `4l..4l + 4`), converted to f32, then
//! `acc = fma(d_w * d_a, lanes, acc)` block after block, then `hsum_float_8`. `vpdpbusd` makes
//! the same eight integers (each 32-bit element sums the products of its four bytes), two
//! blocks per 512-bit register; the two halves then go through the reference's two FMAs in
//! block order. Its operands are an unsigned and a signed byte, so the activations are biased
//! to unsigned (`a + 128`, once per token) and the weights kept signed (`level`: -8..7,
//! -16..15 or -128..127); the `128 * Σ level` that the bias adds per lane is subtracted by
//! starting the sum at its negation (made once per weight block). Every step is exact integer
//! arithmetic until the conversion, so the integers, and hence the floats, are the reference's.
//!
//! A prompt's task unpacks its few rows once (`SignedRows`) and takes them against the tokens
//! sixteen at a time, two per 512-bit register (`BiasedPair`: the same block of two tokens side
//! by side, each half its token's accumulator): per block and pair of tokens one `vpdpbusd`,
//! one conversion, one multiply and one FMA, against about eight instructions per block and
//! token in the AVX2 kernel. (One token's two consecutive blocks per register instead needed an
//! extract and two FMAs per pair, the reference's block order being sequential, and was
//! slower.)

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::loads::{f16_pair, nibbles};
use super::q5_0::q5_0_unsigned;
use crate::quant::blocks::BlockQ8_0;
use crate::quant::simd_order::Lanes8;
use crate::quant::GgmlType;

/// Whether the CPU runs these kernels (cached by std after the first call).
pub fn available() -> bool {
    super::features::available()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

/// Q4_0, Q5_0 or Q8_0 rows unpacked for a prompt's products: per block the 32 signed levels,
/// minus 128 times their four-weight lane sums (the start of `vpdpbusd`'s sum), and the scale
/// as f32.
#[derive(Default)]
pub struct SignedRows {
    levels: Vec<[i8; 32]>,
    neg_bias: Vec<[i32; 8]>,
    d: Vec<f32>,
    per_row: usize,
}

impl SignedRows {
    /// Whether `unpack` takes rows of `ty`.
    pub fn unpacks(ty: GgmlType) -> bool {
        matches!(ty, GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0)
    }

    /// Unpack the whole `ty` rows of `rows` (`per_row` blocks each), reusing the buffers: the
    /// levels (Q4_0: nibble - 8; Q5_0: `x86`'s 5-bit value - 16; Q8_0: as stored) and their
    /// four-weight lane sums (`maddubs` by one, then `madd` by one: exact) times -128.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C (`x86::available()`).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn unpack(&mut self, ty: GgmlType, rows: &[u8], per_row: usize) {
        assert!(
            Self::unpacks(ty),
            "{ty} rows do not unpack into signed levels"
        );
        let bytes = ty.block_bytes();
        assert!(
            per_row > 0 && rows.len().is_multiple_of(bytes * per_row),
            "whole {ty} rows"
        );
        self.per_row = per_row;
        self.levels.clear();
        self.neg_bias.clear();
        self.d.clear();
        for b in rows.chunks_exact(bytes) {
            let level = match ty {
                GgmlType::Q4_0 => levels_q4_0(b),
                GgmlType::Q5_0 => levels_q5_0(b),
                _ => levels_q8_0(b),
            };
            let fours = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_set1_epi8(1), level),
                _mm256_set1_epi16(1),
            );
            let neg_bias = _mm256_mullo_epi32(fours, _mm256_set1_epi32(-128));
            let (mut l, mut nb) = ([0i8; 32], [0i32; 8]);
            _mm256_storeu_si256(l.as_mut_ptr() as *mut __m256i, level);
            _mm256_storeu_si256(nb.as_mut_ptr() as *mut __m256i, neg_bias);
            self.levels.push(l);
            self.neg_bias.push(nb);
            self.d.push(f16_pair(b, 0).0);
        }
    }

    fn rows(&self) -> usize {
        self.levels.len().checked_div(self.per_row).unwrap_or(0)
    }
}

/// A Q4_0 block's 32 signed levels (nibble - 8), weight order.
#[inline(always)]
pub(super) unsafe fn levels_q4_0(b: &[u8]) -> __m256i {
    _mm256_sub_epi8(nibbles(&b[2..18]), _mm256_set1_epi8(8))
}

/// A Q5_0 block's 32 signed levels (the 5-bit value - 16).
#[inline(always)]
pub(super) unsafe fn levels_q5_0(b: &[u8]) -> __m256i {
    _mm256_sub_epi8(q5_0_unsigned(b), _mm256_set1_epi8(16))
}

/// A Q8_0 block's 32 levels as stored.
#[inline(always)]
pub(super) unsafe fn levels_q8_0(b: &[u8]) -> __m256i {
    _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i)
}

/// Two tokens' Q8_0 activation rows laid out for `vpdpbusd`, so one 512-bit register holds
/// the same block of both: per block, the first token's 32 values biased to unsigned
/// (`a + 128`) then the second's, and the two scales, each repeated over eight lanes.
#[derive(Clone, Default)]
pub struct BiasedPair {
    pub(super) qs: Vec<[u8; 64]>,
    pub(super) d: Vec<[f32; 16]>,
}

impl BiasedPair {
    /// Tokens `a` and `b` (the same length); for an odd token out, pass it twice.
    pub fn new(a: &[BlockQ8_0], b: &[BlockQ8_0]) -> BiasedPair {
        let mut pair = BiasedPair::default();
        pair.set(a, b);
        pair
    }

    /// `new(a, b)` into this pair's buffers (a decode step makes its pairs for every product).
    pub fn set(&mut self, a: &[BlockQ8_0], b: &[BlockQ8_0]) {
        assert_eq!(a.len(), b.len(), "activation rows differ in length");
        // Plain loops over the two halves: the compiler makes them a few vector moves (a
        // per-byte `array::from_fn` choosing its half cost about as much as the products).
        let (qs, d) = (&mut self.qs, &mut self.d);
        qs.resize(a.len(), [0u8; 64]);
        d.resize(a.len(), [0f32; 16]);
        for (((q, s), x), y) in qs.iter_mut().zip(d.iter_mut()).zip(a).zip(b) {
            let (qa, qb) = q.split_at_mut(32);
            for (o, &v) in qa.iter_mut().zip(&x.qs) {
                *o = (v as u8) ^ 0x80;
            }
            for (o, &v) in qb.iter_mut().zip(&y.qs) {
                *o = (v as u8) ^ 0x80;
            }
            s[..8].fill(x.d);
            s[8..].fill(y.d);
        }
    }

    /// Blocks per token.
    pub fn blocks(&self) -> usize {
        self.qs.len()
    }
}

/// Blocks per pass over a task's rows in `rows_signed`: one pass's activation blocks of eight
/// pairs (32 blocks of 128 bytes each) stay in L1 while every row of the task takes them; a
/// row of 4864 weights (152 blocks) would otherwise stream them from L2 once per row.
const PASS_BLOCKS: usize = 32;

thread_local! {
    /// `rows_signed`'s accumulators between passes, one per row and pair.
    static LANES: std::cell::RefCell<Vec<__m512>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `legacy::vec_dot_q*_0_q8_0` of every row of `w` with `P` pairs of activation rows:
/// `out[p][k][r]` for token `k` of pair `p`. The two halves of each 512-bit accumulator are the
/// two tokens' eight-lane accumulators, updated block after block as the reference's; the
/// blocks go in passes of `PASS_BLOCKS` over all the rows, each accumulator kept between
/// passes, so the order per pair is unchanged.
///
/// # Safety
/// The CPU must support what `available()` checks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn rows_signed<const P: usize>(
    w: &SignedRows,
    a: [&BiasedPair; P],
    out: [[&mut [f32]; 2]; P],
) {
    let (per_row, rows) = (w.per_row, w.rows());
    for p in 0..P {
        assert!(
            a[p].qs.len() == per_row && a[p].d.len() == per_row,
            "activation length"
        );
        assert!(
            out[p].iter().all(|o| o.len() >= rows),
            "an output row is short"
        );
    }
    // Taken out of the thread-local, not borrowed in a closure: a closure would not inherit
    // this function's target features.
    let mut acc = LANES.take();
    acc.clear();
    acc.resize(rows * P, _mm512_setzero_ps());
    for c0 in (0..per_row).step_by(PASS_BLOCKS) {
        let c1 = (c0 + PASS_BLOCKS).min(per_row);
        for r in 0..rows {
            let base = r * per_row;
            let mut sums: [__m512; P] = std::array::from_fn(|p| acc[r * P + p]);
            for i in c0..c1 {
                let levels = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    w.levels.as_ptr().add(base + i) as *const __m256i,
                ));
                let start = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    w.neg_bias.as_ptr().add(base + i) as *const __m256i,
                ));
                let dw = _mm512_set1_ps(*w.d.as_ptr().add(base + i));
                for p in 0..P {
                    let q = _mm512_loadu_si512(a[p].qs.as_ptr().add(i) as *const _);
                    let lanes = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, q, levels));
                    let d =
                        _mm512_mul_ps(dw, _mm512_loadu_ps(a[p].d.as_ptr().add(i) as *const f32));
                    sums[p] = _mm512_fmadd_ps(d, lanes, sums[p]);
                }
            }
            acc[r * P..(r + 1) * P].copy_from_slice(&sums);
        }
    }
    for r in 0..rows {
        for p in 0..P {
            let [s0, s1] = pair_sums(acc[r * P + p]);
            (out[p][0][r], out[p][1][r]) = (s0, s1);
        }
    }
    LANES.set(acc);
}

/// The two tokens' dots of a pair's accumulator: each half reduced as `hsum_float_8` does.
///
/// # Safety
/// The CPU must support AVX-512 F.
#[inline(always)]
pub(super) unsafe fn pair_sums(v: __m512) -> [f32; 2] {
    let halves = [
        _mm512_castps512_ps256(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))),
    ];
    halves.map(|h| {
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` holds eight floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), h) };
        Lanes8::from(lanes).hsum()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::test_rows::{assert_products, rows_and_acts, Q8_0_ACT_TYPES};
    use crate::rng::SplitMix64 as Rng;

    #[test]
    fn vnni_rows_equal_the_reference_bit_for_bit() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (F, BW, VL and VNNI)");
            return;
        }
        let mut rng = Rng::new(31);
        for ty in Q8_0_ACT_TYPES {
            for blocks in [1usize, 2, 3, 28, 29, 70] {
                let rows = 5;
                let (w, acts) = rows_and_acts(&mut rng, ty, rows, blocks);
                let pairs: Vec<BiasedPair> = (0..4)
                    .map(|p| BiasedPair::new(&acts[2 * p], &acts[2 * p + 1]))
                    .collect();
                let odd = BiasedPair::new(&acts[2], &acts[2]);
                let mut unpacked = SignedRows::default();
                // SAFETY: AVX-512 VNNI (so AVX2) was just detected.
                unsafe { unpacked.unpack(ty, &w, blocks) };
                let mut eight = vec![vec![0f32; rows]; 8];
                let (mut one, mut twin) = (vec![0f32; rows], vec![0f32; rows]);
                let [o0, o1, o2, o3, o4, o5, o6, o7] = &mut eight[..] else {
                    unreachable!()
                };
                // SAFETY: the features were just detected.
                unsafe {
                    let a = std::array::from_fn(|p| &pairs[p]);
                    rows_signed::<4>(&unpacked, a, [[o0, o1], [o2, o3], [o4, o5], [o6, o7]]);
                    rows_signed::<1>(&unpacked, [&odd], [[&mut one, &mut twin]]);
                }
                let all: Vec<&[BlockQ8_0]> = acts.iter().map(|a| a.as_slice()).collect();
                let outs: Vec<&[f32]> = eight.iter().map(|o| o.as_slice()).collect();
                assert_products(ty, &w, blocks, &all, &outs, "eight tokens in pairs");
                let odd_one = [acts[2].as_slice(), acts[2].as_slice()];
                assert_products(ty, &w, blocks, &odd_one, &[&one, &twin], "an odd token");
            }
        }
    }
}
