//! `fast_rows`' Q4_0, Q4_1, Q5_1 and Q8_0 kernels on AVX-512 VNNI: two repacked groups of eight
//! rows side by side in one 512-bit vector (sixteen rows), and `vpdpbusd` adding a broadcast
//! activation word's four products into each row's 32-bit sum in one instruction, where AVX2 takes
//! a `maddubs` and a widening `madd` (and for Q8_0 a sign transfer). Its operands are an unsigned
//! and a signed byte: Q4_0's nibbles are unsigned (eight times the activations' sum taken out
//! after), Q4_1's too (its minimums added as `rows8` adds them), Q5_1's five-bit levels as well
//! (the fifth bits put back as `rows8` puts them), Q8_0's activations are offset by 128 (128 times
//! the row's level sum taken out first). Same arithmetic as `fast_rows::rows8`, bit for bit (exact
//! integer block sums, each row's float chain in the same order).

use std::arch::x86_64::*;

use super::fast_rows::{Interleaved, Q4_0x8, Q4_1x8, Q5_1x8, Q8_0x8, SummedBlock};
use super::loads::halves;
use super::prefetch::{prefetch_ahead, PREFETCH_AHEAD};
use crate::quant::blocks::{BlockQ8_0, BlockQ8_1};

/// Whether the CPU runs `rows16` (cached by std after the first call).
pub fn available() -> bool {
    super::features::available()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// A Q8_0 activation block with its levels offset by 128 (unsigned bytes, `vpdpbusd`'s
/// unsigned operand), for `Q8_0x8`'s signed levels.
#[derive(Clone, Copy)]
pub struct BiasedBlock {
    d: f32,
    qs: [u8; 32],
}

/// Repacked groups that `rows16` takes two at a time, and the activation blocks it takes.
pub trait Pairs: Interleaved {
    /// An activation block in the form `rows16` takes.
    type Wide: Copy + Sync + 'static;
    /// A Q8_0 activation block in that form.
    fn wide(a: &BlockQ8_0) -> Self::Wide;
    /// Its scale.
    fn wide_scale(a: &Self::Wide) -> f32;
    /// Its `d * Σ q`, the factor of the rows' minimums (`Interleaved::mins`).
    #[inline(always)]
    fn wide_sum(_a: &Self::Wide) -> f32 {
        0.0
    }
    /// The two groups' sixteen rows' integer dots with each activation block of `y`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW and VNNI.
    unsafe fn isums16<const T: usize>(b0: &Self, b1: &Self, y: [&Self::Wide; T]) -> [__m512i; T];
}

/// Bytes `4c..4c + 4` of a block's 32 levels, broadcast.
#[inline(always)]
unsafe fn word(qs: *const u8, c: usize) -> __m512i {
    // SAFETY: callers pass c < 8 and a 32-byte block.
    _mm512_set1_epi32(unsafe { (qs.add(4 * c) as *const i32).read_unaligned() })
}

/// Two groups' unsigned nibbles (`q`, laid out as `Q4_0x8::q`) dotted with each token's
/// levels `y`: sixteen rows' i32 sums each.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI.
#[inline(always)]
unsafe fn nibble_sums16<const T: usize>(
    (q0, q1): (&[[u8; 32]; 4], &[[u8; 32]; 4]),
    y: [&[i8; 32]; T],
) -> [__m512i; T] {
    let mask = _mm512_set1_epi8(0x0F);
    let mut s = [_mm512_setzero_si512(); T];
    for v in 0..4 {
        let packed = halves(q0[v].as_ptr(), q1[v].as_ptr());
        let lo = _mm512_and_si512(packed, mask);
        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(packed), mask);
        for t in 0..T {
            let qs = y[t].as_ptr() as *const u8;
            s[t] = _mm512_dpbusd_epi32(s[t], lo, word(qs, v));
            s[t] = _mm512_dpbusd_epi32(s[t], hi, word(qs, v + 4));
        }
    }
    s
}

impl Pairs for Q4_0x8 {
    type Wide = SummedBlock;

    fn wide(a: &BlockQ8_0) -> SummedBlock {
        Q4_0x8::act(a)
    }

    fn wide_scale(a: &SummedBlock) -> f32 {
        a.d
    }

    #[inline(always)]
    unsafe fn isums16<const T: usize>(b0: &Self, b1: &Self, y: [&SummedBlock; T]) -> [__m512i; T] {
        let mut s = nibble_sums16((&b0.q, &b1.q), y.map(|y| &y.qs));
        for t in 0..T {
            s[t] = _mm512_sub_epi32(s[t], _mm512_set1_epi32(y[t].eight_sum));
        }
        s
    }
}

impl Pairs for Q4_1x8 {
    type Wide = BlockQ8_1;

    fn wide(a: &BlockQ8_0) -> BlockQ8_1 {
        Q4_1x8::act(a)
    }

    fn wide_scale(a: &BlockQ8_1) -> f32 {
        a.d
    }

    #[inline(always)]
    fn wide_sum(a: &BlockQ8_1) -> f32 {
        a.s
    }

    #[inline(always)]
    unsafe fn isums16<const T: usize>(b0: &Self, b1: &Self, y: [&BlockQ8_1; T]) -> [__m512i; T] {
        nibble_sums16((&b0.q, &b1.q), y.map(|y| &y.qs))
    }
}

impl Pairs for Q5_1x8 {
    type Wide = BlockQ8_1;

    fn wide(a: &BlockQ8_0) -> BlockQ8_1 {
        Q5_1x8::act(a)
    }

    fn wide_scale(a: &BlockQ8_1) -> f32 {
        a.d
    }

    #[inline(always)]
    fn wide_sum(a: &BlockQ8_1) -> f32 {
        a.s
    }

    #[inline(always)]
    unsafe fn isums16<const T: usize>(b0: &Self, b1: &Self, y: [&BlockQ8_1; T]) -> [__m512i; T] {
        let (mask, bit4) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x10));
        let qh = halves(b0.qh.as_ptr(), b1.qh.as_ptr());
        // As `fast_rows::five_bit_sums`: bit 4 of each byte holds vector v's fifth bits after v
        // shifts.
        let (mut lo_h, mut hi_h) = (_mm512_slli_epi16::<4>(qh), qh);
        let mut s = [_mm512_setzero_si512(); T];
        for v in 0..4 {
            let packed = halves(b0.q[v].as_ptr(), b1.q[v].as_ptr());
            let lo = _mm512_or_si512(_mm512_and_si512(packed, mask), _mm512_and_si512(lo_h, bit4));
            let hi = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(packed), mask),
                _mm512_and_si512(hi_h, bit4),
            );
            lo_h = _mm512_srli_epi16::<1>(lo_h);
            hi_h = _mm512_srli_epi16::<1>(hi_h);
            for t in 0..T {
                let qs = y[t].qs.as_ptr() as *const u8;
                s[t] = _mm512_dpbusd_epi32(s[t], lo, word(qs, v));
                s[t] = _mm512_dpbusd_epi32(s[t], hi, word(qs, v + 4));
            }
        }
        s
    }
}

impl Pairs for Q8_0x8 {
    type Wide = BiasedBlock;

    fn wide(a: &BlockQ8_0) -> BiasedBlock {
        BiasedBlock {
            d: a.d,
            qs: a.qs.map(|q| (q as u8) ^ 0x80),
        }
    }

    fn wide_scale(a: &BiasedBlock) -> f32 {
        a.d
    }

    #[inline(always)]
    unsafe fn isums16<const T: usize>(b0: &Self, b1: &Self, y: [&BiasedBlock; T]) -> [__m512i; T] {
        // (a + 128) * w summed from -128 * Σ w: exactly Σ a * w.
        let bias = halves(b0.bias.as_ptr().cast(), b1.bias.as_ptr().cast());
        let mut s = [bias; T];
        for c in 0..8 {
            let w = halves(b0.q[c].as_ptr(), b1.q[c].as_ptr());
            for t in 0..T {
                s[t] = _mm512_dpbusd_epi32(s[t], word(y[t].qs.as_ptr(), c), w);
            }
        }
        s
    }
}

/// Groups `g0` and `g1` (eight rows each, `per_row` blocks from `fast_rows::repack`) against
/// `T` activation rows: `out[t][0..8]` = group `g0`'s rows dotted with `a[t]`, `out[t][8..16]`
/// group `g1`'s.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI (`available()`).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn rows16<B: Pairs, const T: usize>(
    g0: &[B],
    g1: &[B],
    a: [&[B::Wide]; T],
    mut out: [&mut [f32]; T],
) {
    let per_row = g0.len();
    assert_eq!(g1.len(), per_row, "groups differ in length");
    for t in 0..T {
        assert_eq!(a[t].len(), per_row, "activation rows differ in length");
        assert!(out[t].len() >= 16, "an output row is short");
    }
    let mut acc = [_mm512_setzero_ps(); T];
    let (size, group_bytes) = (std::mem::size_of::<B>(), std::mem::size_of_val(g0));
    for i in 0..per_row {
        // SAFETY: i < per_row, the length of both groups and of every activation row.
        let (b0, b1) = unsafe { (g0.get_unchecked(i), g1.get_unchecked(i)) };
        if T == 1 {
            // One token streams the blocks from memory once (`prefetch_ahead` says why). The
            // caller's pairs lie one after another (group g1 after g0, the next pair after
            // g1). Groups longer than the distance ahead: once `g0`'s stream ahead would run
            // into `g1`, which its own stream fetches, it asks for the next pair's second
            // group instead (else that group's first lines were all demand misses).
            let (p0, p1) = ((b0 as *const B).cast::<u8>(), (b1 as *const B).cast::<u8>());
            let p0 = if group_bytes <= PREFETCH_AHEAD || i * size + PREFETCH_AHEAD < group_bytes {
                p0
            } else {
                p1.wrapping_add(group_bytes)
            };
            for p in [p0, p1] {
                for line in (0..size).step_by(64) {
                    prefetch_ahead(p.wrapping_add(line));
                }
            }
        }
        let y: [&B::Wide; T] = std::array::from_fn(|t| unsafe { a[t].get_unchecked(i) });
        let d = _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(
            _mm256_castsi128_si256(_mm_loadu_si128(b0.scales().as_ptr() as *const __m128i)),
            _mm_loadu_si128(b1.scales().as_ptr() as *const __m128i),
        ));
        let isums = B::isums16(b0, b1, y);
        for t in 0..T {
            let dd = _mm512_mul_ps(d, _mm512_set1_ps(B::wide_scale(y[t])));
            acc[t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isums[t]), acc[t]);
        }
        if let (Some(m0), Some(m1)) = (b0.mins(), b1.mins()) {
            // As `rows8`: each row's minimum times the activation block's sum, after the levels.
            let m = _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(m0.as_ptr() as *const __m128i)),
                _mm_loadu_si128(m1.as_ptr() as *const __m128i),
            ));
            for t in 0..T {
                acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(B::wide_sum(y[t])), acc[t]);
            }
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        _mm512_storeu_ps(o.as_mut_ptr(), s);
    }
}
