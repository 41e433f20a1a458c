//! Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 products for the CPU's `fast` numerics (docs/DESIGN.md
//! "Numerics"), on weights repacked at load eight rows at a time (`repack`): one vector holds a
//! block's four weights of all eight rows, so one broadcast activation word multiplies them all,
//! and a block's eight row sums take one conversion and one fused multiply-add together where
//! the exact kernels (`legacy`, `prompt_rows`) spend those per row and token. The repacked blocks
//! are as large as the file's (same bytes, other order), so a decode step streams no more.
//!
//! Each row's sum is one float chain over its blocks in order (the reference keeps eight lane
//! sums and adds them at the end), so results differ from the exact ones by float reordering
//! only; the integer part of each block is exact. The kernel goes word by word over `T` tokens
//! (one weight vector live at a time, the tokens' integer sums in registers): Q4_0's unsigned
//! nibbles against the activations, less eight times each activation block's sum (made once
//! per call, `SummedBlock`); Q4_1's nibbles as they are, each block's minimum times the
//! activation block's sum (Q8_1's `s`) added by one more fused multiply-add; Q5_1's as Q4_1's
//! with each weight's fifth bit put back from the rows' high bits (`Q5_1x8::qh`, one shift and
//! mask a vector), and Q5_0's as Q4_0's with those bits (less sixteen times the sum); Q8_0's
//! levels with their signs moved onto the activations.

use std::arch::x86_64::*;

use super::loads::u32_at;
use super::prefetch::prefetch_ahead;
use crate::quant::blocks::{round_f16, BlockQ8_0, BlockQ8_1};
use crate::quant::GgmlType;

/// Blocks of eight rows repacked for `rows8`, and the activation blocks they take.
pub trait Interleaved: Copy + Default + Send + Sync + 'static {
    /// The weight type these blocks hold.
    const TYPE: GgmlType;
    /// An activation block in the form the kernel takes.
    type Act: Copy + Sync + 'static;
    /// A Q8_0 activation block in that form.
    fn act(a: &BlockQ8_0) -> Self::Act;
    /// An activation block's scale.
    fn act_scale(a: &Self::Act) -> f32;
    /// Block `i` of rows `8g..8g + 8` of `rows` (`row_bytes` each) repacked.
    fn repack(rows: &[u8], row_bytes: usize, g: usize, i: usize) -> Self;
    /// The eight rows' integer dots with each activation block of `y`, in eight i32 lanes
    /// each.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    unsafe fn isums<const T: usize>(&self, y: [&Self::Act; T]) -> [__m256i; T];
    /// The eight rows' scales as f16 bits.
    fn scales(&self) -> &[u16; 8];
    /// The eight rows' block minimums as f16 bits, where the type's weights are `d * q + m`
    /// (Q4_1); none where they are `d * q`.
    #[inline(always)]
    fn mins(&self) -> Option<&[u16; 8]> {
        None
    }
    /// An activation block's `d * Σ q`, the factor of the rows' minimums (`mins`).
    #[inline(always)]
    fn act_sum(_a: &Self::Act) -> f32 {
        0.0
    }
}

/// Q4_0's eight rows: `q[v]` holds bytes `4v..4v + 4` of each row's packed nibbles (row r at
/// bytes `4r..4r + 4`), so its low nibbles are weights `4v..4v + 4` and its high nibbles
/// weights `16 + 4v..16 + 4v + 4`: words v and v + 4.
#[derive(Clone, Copy, Default)]
pub struct Q4_0x8 {
    pub(super) d: [u16; 8],
    pub(super) q: [[u8; 32]; 4],
}

/// Q4_1's eight rows: as `Q4_0x8`, with each row's block minimum (`m[r]`, f16 bits).
#[derive(Clone, Copy, Default)]
pub struct Q4_1x8 {
    pub(super) d: [u16; 8],
    pub(super) m: [u16; 8],
    pub(super) q: [[u8; 32]; 4],
}

/// Q5_1's eight rows: as `Q4_1x8`, with the weights' fifth bits in `qh`, laid out so that bit
/// k of byte `4r + j` is the fifth bit of the weight whose nibble sits at byte `4r + j` of the
/// vector that pairs with activation word k (`q[k]`'s low nibbles for k < 4, `q[k - 4]`'s high
/// ones after): row r's high bit `4k + j`. Moving bit k of every byte to bit 4 is then one
/// 16-bit shift and a mask.
#[derive(Clone, Copy, Default)]
pub struct Q5_1x8 {
    pub(super) d: [u16; 8],
    pub(super) m: [u16; 8],
    pub(super) qh: [u8; 32],
    pub(super) q: [[u8; 32]; 4],
}

/// Q5_0's eight rows on AVX2 without AVX-512 VNNI (which takes Q5_0 as `Q8_0x8`): as `Q4_0x8`,
/// with the weights' fifth bits in `qh` laid out as `Q5_1x8::qh`. The same bytes as the file's
/// block (22 a row), so a decode step streams no more.
#[derive(Clone, Copy, Default)]
pub struct Q5_0x8 {
    pub(super) d: [u16; 8],
    pub(super) qh: [u8; 32],
    pub(super) q: [[u8; 32]; 4],
}

/// Q8_0's eight rows: `q[c]` holds weights `4c..4c + 4` of each row (row r at bytes
/// `4r..4r + 4`); `bias[r]` is `-128` times row r's sum of levels, which the AVX-512 VNNI
/// kernel starts each row's sum at (it takes the activations offset by 128).
#[derive(Clone, Copy, Default)]
pub struct Q8_0x8 {
    pub(super) d: [u16; 8],
    pub(super) bias: [i32; 8],
    pub(super) q: [[u8; 32]; 8],
}

/// A Q8_0 activation block with eight times its levels' sum, which takes Q4_0's offset of 8
/// back out of the unsigned nibbles' products.
#[derive(Clone, Copy)]
pub struct SummedBlock {
    pub(super) d: f32,
    pub(super) eight_sum: i32,
    pub(super) qs: [i8; 32],
}

/// A 32-bit activation word broadcast: bytes `4c..4c + 4` of a block's 32 levels.
#[inline(always)]
unsafe fn word(qs: &[i8; 32], c: usize) -> __m256i {
    // SAFETY: callers pass c < 8, so bytes 4c..4c + 4 lie within the 32 of `qs`.
    _mm256_set1_epi32(unsafe { (qs.as_ptr().add(4 * c) as *const i32).read_unaligned() })
}

#[inline(always)]
unsafe fn load(v: &[u8; 32]) -> __m256i {
    _mm256_loadu_si256(v.as_ptr() as *const __m256i)
}

/// Block `i` of rows `8g..8g + 8` (`block` bytes each: an f16 scale, `head - 2` more bytes,
/// then the levels' bytes) spread over `d` (row r's scale bits) and `q` (vector c: bytes
/// `4c..4c + 4` of the levels of every row, row r at `4r..4r + 4`).
fn spread(
    rows: &[u8],
    (row_bytes, block, head): (usize, usize, usize),
    (g, i): (usize, usize),
    d: &mut [u16; 8],
    q: &mut [[u8; 32]],
) {
    for r in 0..8 {
        let blk = &rows[(8 * g + r) * row_bytes + i * block..][..block];
        d[r] = u16::from_le_bytes([blk[0], blk[1]]);
        for (c, q) in q.iter_mut().enumerate() {
            q[4 * r..4 * r + 4].copy_from_slice(&blk[head + 4 * c..head + 4 + 4 * c]);
        }
    }
}

/// The eight rows' integer dots of unsigned nibbles (`q`, laid out as `Q4_0x8::q`) with each
/// token's levels `y`, in eight i32 lanes each.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn nibble_sums<const T: usize>(q: &[[u8; 32]; 4], y: [&[i8; 32]; T]) -> [__m256i; T] {
    // Nibbles (0..=15) times int8 pairs are within +-3840 and eight of them within i16.
    let mask = _mm256_set1_epi8(0x0F);
    let mut s16 = [_mm256_setzero_si256(); T];
    for (v, q) in q.iter().enumerate() {
        let packed = load(q);
        let lo = _mm256_and_si256(packed, mask);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(packed), mask);
        for t in 0..T {
            let p = _mm256_maddubs_epi16(lo, word(y[t], v));
            let p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi, word(y[t], v + 4)));
            s16[t] = _mm256_add_epi16(s16[t], p);
        }
    }
    // A loop, not a closure: closures do not inherit the caller's target features.
    for s in &mut s16 {
        *s = _mm256_madd_epi16(*s, _mm256_set1_epi16(1));
    }
    s16
}

impl Interleaved for Q4_0x8 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    type Act = SummedBlock;

    fn act(a: &BlockQ8_0) -> SummedBlock {
        SummedBlock {
            d: a.d,
            eight_sum: 8 * a.qs.iter().map(|&q| q as i32).sum::<i32>(),
            qs: a.qs,
        }
    }

    fn act_scale(a: &SummedBlock) -> f32 {
        a.d
    }

    fn repack(rows: &[u8], row_bytes: usize, g: usize, i: usize) -> Q4_0x8 {
        let mut b = Q4_0x8::default();
        spread(rows, (row_bytes, 18, 2), (g, i), &mut b.d, &mut b.q);
        b
    }

    #[inline(always)]
    unsafe fn isums<const T: usize>(&self, y: [&SummedBlock; T]) -> [__m256i; T] {
        let mut s = nibble_sums(&self.q, y.map(|y| &y.qs));
        // A loop, not a closure: closures do not inherit the caller's target features.
        for t in 0..T {
            s[t] = _mm256_sub_epi32(s[t], _mm256_set1_epi32(y[t].eight_sum));
        }
        s
    }

    fn scales(&self) -> &[u16; 8] {
        &self.d
    }
}

impl Interleaved for Q4_1x8 {
    const TYPE: GgmlType = GgmlType::Q4_1;
    /// A prompt's Q4_1 products are quantized as Q8_1 already: the kernel takes those blocks.
    type Act = BlockQ8_1;

    fn act(a: &BlockQ8_0) -> BlockQ8_1 {
        q8_1_of(a)
    }

    fn act_scale(a: &BlockQ8_1) -> f32 {
        a.d
    }

    fn repack(rows: &[u8], row_bytes: usize, g: usize, i: usize) -> Q4_1x8 {
        let mut b = Q4_1x8::default();
        spread(rows, (row_bytes, 20, 4), (g, i), &mut b.d, &mut b.q);
        b.m = mins_of(rows, (row_bytes, 20), (g, i));
        b
    }

    #[inline(always)]
    unsafe fn isums<const T: usize>(&self, y: [&BlockQ8_1; T]) -> [__m256i; T] {
        nibble_sums(&self.q, y.map(|y| &y.qs))
    }

    fn scales(&self) -> &[u16; 8] {
        &self.d
    }

    #[inline(always)]
    fn mins(&self) -> Option<&[u16; 8]> {
        Some(&self.m)
    }

    #[inline(always)]
    fn act_sum(a: &BlockQ8_1) -> f32 {
        a.s
    }
}

/// The Q8_1 block of a Q8_0 block's levels (Q8_1's scale and levels are Q8_0's), its sum from
/// the rounded scale (`quantize_act`'s from the unrounded one, an f16 rounding apart).
fn q8_1_of(a: &BlockQ8_0) -> BlockQ8_1 {
    let sum: i32 = a.qs.iter().map(|&q| q as i32).sum();
    BlockQ8_1 {
        d: a.d,
        s: round_f16(a.d * sum as f32),
        qs: a.qs,
    }
}

/// Rows `8g..8g + 8`'s block `i` minimums (f16 bits at byte 2 of each block of `block` bytes).
fn mins_of(rows: &[u8], (row_bytes, block): (usize, usize), (g, i): (usize, usize)) -> [u16; 8] {
    std::array::from_fn(|r| {
        let at = (8 * g + r) * row_bytes + i * block;
        u16::from_le_bytes([rows[at + 2], rows[at + 3]])
    })
}

/// Bits 0, 4, 8, .. 28 of `x` as bits 0..8 of a byte.
fn every_fourth_bit(x: u32) -> u8 {
    let x = x & 0x1111_1111;
    let x = (x | x >> 3) & 0x0303_0303;
    let x = (x | x >> 6) & 0x000F_000F;
    (x | x >> 12) as u8
}

/// Rows `8g..8g + 8`'s block `i` fifth bits (the 32-bit field at byte `at` of each block of
/// `block` bytes) laid out as `Q5_1x8::qh`.
fn fifth_bits(
    rows: &[u8],
    (row_bytes, block, at): (usize, usize, usize),
    (g, i): (usize, usize),
) -> [u8; 32] {
    let mut out = [0u8; 32];
    for r in 0..8 {
        let qh = u32_at(rows, (8 * g + r) * row_bytes + i * block + at);
        for j in 0..4 {
            out[4 * r + j] = every_fourth_bit(qh >> j);
        }
    }
    out
}

/// The eight rows' integer dots of 5-bit levels (0..=31: `q`'s nibbles, laid out as
/// `Q4_0x8::q`, with the fifth bits of `qh`, laid out as `Q5_1x8::qh`) with each token's
/// levels `y`, in eight i32 lanes each.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn five_bit_sums<const T: usize>(
    q: &[[u8; 32]; 4],
    qh: &[u8; 32],
    y: [&[i8; 32]; T],
) -> [__m256i; T] {
    // Levels (0..=31) times int8 pairs are within +-7936: four of them fit an i16, so the
    // sums widen every two vectors.
    let (mask, bit4) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x10));
    let ones = _mm256_set1_epi16(1);
    let qh = load(qh);
    // Bit 4 of each byte: the low nibbles' fifth bits (`lo_h`) and the high ones' (`hi_h`)
    // for vector v, each shifted right once a vector.
    let (mut lo_h, mut hi_h) = (_mm256_slli_epi16::<4>(qh), qh);
    let mut s32 = [_mm256_setzero_si256(); T];
    for half in 0..2 {
        let mut s16 = [_mm256_setzero_si256(); T];
        for (v, q) in q.iter().enumerate().skip(2 * half).take(2) {
            let packed = load(q);
            let lo = _mm256_or_si256(_mm256_and_si256(packed, mask), _mm256_and_si256(lo_h, bit4));
            let hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(packed), mask),
                _mm256_and_si256(hi_h, bit4),
            );
            lo_h = _mm256_srli_epi16::<1>(lo_h);
            hi_h = _mm256_srli_epi16::<1>(hi_h);
            for t in 0..T {
                let p = _mm256_maddubs_epi16(lo, word(y[t], v));
                let p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi, word(y[t], v + 4)));
                s16[t] = _mm256_add_epi16(s16[t], p);
            }
        }
        // A loop, not a closure: closures do not inherit the caller's target features.
        for t in 0..T {
            s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(s16[t], ones));
        }
    }
    s32
}

impl Interleaved for Q5_1x8 {
    const TYPE: GgmlType = GgmlType::Q5_1;
    /// A prompt's Q5_1 products are quantized as Q8_1 already: the kernel takes those blocks.
    type Act = BlockQ8_1;

    fn act(a: &BlockQ8_0) -> BlockQ8_1 {
        q8_1_of(a)
    }

    fn act_scale(a: &BlockQ8_1) -> f32 {
        a.d
    }

    fn repack(rows: &[u8], row_bytes: usize, g: usize, i: usize) -> Q5_1x8 {
        let mut b = Q5_1x8::default();
        spread(rows, (row_bytes, 24, 8), (g, i), &mut b.d, &mut b.q);
        b.m = mins_of(rows, (row_bytes, 24), (g, i));
        b.qh = fifth_bits(rows, (row_bytes, 24, 4), (g, i));
        b
    }

    #[inline(always)]
    unsafe fn isums<const T: usize>(&self, y: [&BlockQ8_1; T]) -> [__m256i; T] {
        five_bit_sums(&self.q, &self.qh, y.map(|y| &y.qs))
    }

    fn scales(&self) -> &[u16; 8] {
        &self.d
    }

    #[inline(always)]
    fn mins(&self) -> Option<&[u16; 8]> {
        Some(&self.m)
    }

    #[inline(always)]
    fn act_sum(a: &BlockQ8_1) -> f32 {
        a.s
    }
}

impl Interleaved for Q5_0x8 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    type Act = SummedBlock;

    fn act(a: &BlockQ8_0) -> SummedBlock {
        Q4_0x8::act(a)
    }

    fn act_scale(a: &SummedBlock) -> f32 {
        a.d
    }

    fn repack(rows: &[u8], row_bytes: usize, g: usize, i: usize) -> Q5_0x8 {
        let mut b = Q5_0x8::default();
        spread(rows, (row_bytes, 22, 6), (g, i), &mut b.d, &mut b.q);
        b.qh = fifth_bits(rows, (row_bytes, 22, 2), (g, i));
        b
    }

    #[inline(always)]
    unsafe fn isums<const T: usize>(&self, y: [&SummedBlock; T]) -> [__m256i; T] {
        let mut s = five_bit_sums(&self.q, &self.qh, y.map(|y| &y.qs));
        // The levels are the stored values less 16: twice the activations' `eight_sum` out.
        for t in 0..T {
            s[t] = _mm256_sub_epi32(s[t], _mm256_set1_epi32(2 * y[t].eight_sum));
        }
        s
    }

    fn scales(&self) -> &[u16; 8] {
        &self.d
    }
}

impl Interleaved for Q8_0x8 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    type Act = BlockQ8_0;

    fn act(a: &BlockQ8_0) -> BlockQ8_0 {
        *a
    }

    fn act_scale(a: &BlockQ8_0) -> f32 {
        a.d
    }

    fn repack(rows: &[u8], row_bytes: usize, g: usize, i: usize) -> Q8_0x8 {
        let mut b = Q8_0x8::default();
        let at = |r: usize| (8 * g + r) * row_bytes + i * 34;
        let levels: [&[u8]; 8] = std::array::from_fn(|r| &rows[at(r) + 2..][..32]);
        if super::available() {
            // A prompt repacks its Q8_0 rows on every call: a transpose, not 64 word copies.
            for (r, d) in b.d.iter_mut().enumerate() {
                *d = u16::from_le_bytes([rows[at(r)], rows[at(r) + 1]]);
            }
            // SAFETY: AVX2 was just detected; each slice holds 32 bytes.
            unsafe { transpose_words(levels, &mut b.q) };
        } else {
            spread(rows, (row_bytes, 34, 2), (g, i), &mut b.d, &mut b.q);
        }
        for (bias, levels) in b.bias.iter_mut().zip(levels) {
            *bias = -128 * levels.iter().map(|&q| q as i8 as i32).sum::<i32>();
        }
        b
    }

    #[inline(always)]
    unsafe fn isums<const T: usize>(&self, y: [&BlockQ8_0; T]) -> [__m256i; T] {
        // |w| times a with w's sign: pairs within +-32512, one i16 each, widened at once.
        let ones = _mm256_set1_epi16(1);
        let mut s32 = [_mm256_setzero_si256(); T];
        for c in 0..8 {
            let w = load(&self.q[c]);
            let abs = _mm256_sign_epi8(w, w);
            for t in 0..T {
                let p = _mm256_maddubs_epi16(abs, _mm256_sign_epi8(word(&y[t].qs, c), w));
                s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(p, ones));
            }
        }
        s32
    }

    fn scales(&self) -> &[u16; 8] {
        &self.d
    }
}

/// A Q5_0 block (22 bytes) as a Q8_0 block (34): the same scale and the same levels
/// (-16..15), one signed byte each, so the Q8_0 kernels take Q5_0 rows.
pub fn q5_0_as_q8_0(b: &[u8]) -> [u8; 34] {
    let mut out = [0u8; 34];
    out[..2].copy_from_slice(&b[..2]);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for j in 0..16 {
        let lo = (b[6 + j] & 0x0F) | (((qh >> j) & 1) << 4) as u8;
        let hi = (b[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4) as u8;
        out[2 + j] = (lo as i8 - 16) as u8;
        out[18 + j] = (hi as i8 - 16) as u8;
    }
    out
}

/// `q[c]` = word `c` (bytes `4c..4c + 4`) of each of the eight rows, row r at `4r..4r + 4`:
/// an 8 x 8 transpose of 32-bit words.
///
/// # Safety
/// AVX2 must be available; every `rows[r]` holds at least 32 bytes.
#[target_feature(enable = "avx2")]
unsafe fn transpose_words(rows: [&[u8]; 8], q: &mut [[u8; 32]; 8]) {
    let r: [__m256i; 8] = std::array::from_fn(|i| {
        assert!(rows[i].len() >= 32);
        _mm256_loadu_si256(rows[i].as_ptr() as *const __m256i)
    });
    // Pairs of rows, then fours, within each 128-bit half (words c and c + 4), then halves.
    let t = [
        _mm256_unpacklo_epi32(r[0], r[1]),
        _mm256_unpackhi_epi32(r[0], r[1]),
        _mm256_unpacklo_epi32(r[2], r[3]),
        _mm256_unpackhi_epi32(r[2], r[3]),
        _mm256_unpacklo_epi32(r[4], r[5]),
        _mm256_unpackhi_epi32(r[4], r[5]),
        _mm256_unpacklo_epi32(r[6], r[7]),
        _mm256_unpackhi_epi32(r[6], r[7]),
    ];
    let u = [
        _mm256_unpacklo_epi64(t[0], t[2]),
        _mm256_unpackhi_epi64(t[0], t[2]),
        _mm256_unpacklo_epi64(t[1], t[3]),
        _mm256_unpackhi_epi64(t[1], t[3]),
        _mm256_unpacklo_epi64(t[4], t[6]),
        _mm256_unpackhi_epi64(t[4], t[6]),
        _mm256_unpacklo_epi64(t[5], t[7]),
        _mm256_unpackhi_epi64(t[5], t[7]),
    ];
    for c in 0..4 {
        let low = _mm256_permute2x128_si256::<0x20>(u[c], u[c + 4]);
        let high = _mm256_permute2x128_si256::<0x31>(u[c], u[c + 4]);
        _mm256_storeu_si256(q[c].as_mut_ptr() as *mut __m256i, low);
        _mm256_storeu_si256(q[c + 4].as_mut_ptr() as *mut __m256i, high);
    }
}

/// Rows of `B::TYPE` blocks (`row_bytes` each, whole blocks) repacked in groups of eight into
/// `out` (cleared first): group g's block i at `g * per_row + i`. Rows past the last whole
/// group of eight are left out (the caller takes them on the exact kernels).
pub fn repack<B: Interleaved>(rows: &[u8], row_bytes: usize, out: &mut Vec<B>) {
    let bytes = B::TYPE.block_bytes();
    assert_eq!(row_bytes % bytes, 0, "whole {} blocks", B::TYPE);
    let (n_rows, per_row) = (rows.len() / row_bytes, row_bytes / bytes);
    out.clear();
    out.extend(
        (0..n_rows / 8).flat_map(|g| (0..per_row).map(move |i| B::repack(rows, row_bytes, g, i))),
    );
}

/// A group of eight repacked rows (`per_row` blocks from `repack`) against `T` activation
/// rows: `out[t][0..8]` = the eight rows dotted with `a[t]`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows8<B: Interleaved, const T: usize>(
    blocks: &[B],
    a: [&[B::Act]; T],
    mut out: [&mut [f32]; T],
) {
    let per_row = blocks.len();
    for t in 0..T {
        assert_eq!(a[t].len(), per_row, "activation rows differ in length");
        assert!(out[t].len() >= 8, "an output row is short");
    }
    let mut acc = [_mm256_setzero_ps(); T];
    for (i, b) in blocks.iter().enumerate() {
        if T == 1 {
            // One token streams the blocks from memory once (`prefetch_ahead` says why).
            let p = (b as *const B).cast::<u8>();
            for line in (0..std::mem::size_of::<B>()).step_by(64) {
                prefetch_ahead(p.wrapping_add(line));
            }
        }
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.scales().as_ptr() as *const __m128i));
        // SAFETY: every activation row holds `per_row` blocks (asserted above).
        let y: [&B::Act; T] = std::array::from_fn(|t| unsafe { a[t].get_unchecked(i) });
        let isums = b.isums(y);
        for t in 0..T {
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(B::act_scale(y[t])));
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isums[t]), acc[t]);
        }
        if let Some(m) = b.mins() {
            // Each row's block minimum times the activation block's sum, after the levels.
            let m = _mm256_cvtph_ps(_mm_loadu_si128(m.as_ptr() as *const __m128i));
            for t in 0..T {
                acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(B::act_sum(y[t])), acc[t]);
            }
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        _mm256_storeu_ps(o.as_mut_ptr(), s);
    }
}

/// `out[r] = row r · a` for Q8_0 rows in the file's layout (`row_bytes` each) and one token
/// under `fast` numerics: `legacy`'s block step (the same exact integer lanes and one fused
/// multiply-add by `d_w · d_a`), but the blocks go round four accumulators, so four chains
/// are in flight where the exact row has one (a decode step's Q8_0 rows, the tied output head
/// above all, stream from memory no faster than one chain's latency allowed).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`); every row holds `a.len()`
/// blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q8_0_one(rows: &[u8], row_bytes: usize, a: &[BlockQ8_0], out: &mut [f32]) {
    use super::loads::{f16_pair, hsum, lanes_signed, load32};
    assert_eq!(
        row_bytes,
        34 * a.len(),
        "a row of {row_bytes} bytes against {} blocks",
        a.len()
    );
    #[inline(always)]
    unsafe fn step(b: &[u8], y: &BlockQ8_0, acc: &mut __m256) {
        prefetch_ahead(b.as_ptr());
        let q = _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i);
        let d = _mm256_set1_ps(f16_pair(b, 0).0 * y.d);
        *acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), *acc);
    }
    for (row, o) in rows.chunks_exact(row_bytes).zip(out) {
        // Four blocks a step, each into its own accumulator (constant indices, so the four
        // stay in registers).
        let mut acc = [_mm256_setzero_ps(); 4];
        let blocks = row.chunks_exact(4 * 34).zip(a.chunks_exact(4));
        for (b4, y4) in blocks {
            for (k, acc) in acc.iter_mut().enumerate() {
                step(&b4[34 * k..34 * (k + 1)], &y4[k], acc);
            }
        }
        let done = a.len() / 4 * 4;
        for (k, (b, y)) in row[34 * done..]
            .chunks_exact(34)
            .zip(&a[done..])
            .enumerate()
        {
            step(b, y, &mut acc[k]);
        }
        *o = hsum(_mm256_add_ps(
            _mm256_add_ps(acc[0], acc[1]),
            _mm256_add_ps(acc[2], acc[3]),
        ));
    }
}

#[cfg(test)]
mod tests {

    /// Q8_0 rows against one token on the fast one-token kernel, within float reordering of
    /// the exact kernel's result (the same integer block sums, other float order).
    #[test]
    fn q8_0_one_token_rows_match_the_exact_ones() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = crate::rng::SplitMix64::new(0x0008_0001);
        for cols in [32usize, 96, 896] {
            let n_rows = 7;
            let w: Vec<f32> = (0..cols * n_rows).map(|_| rng.next_signed()).collect();
            let x: Vec<f32> = (0..cols).map(|_| rng.next_signed()).collect();
            let mut rows = Vec::new();
            crate::quant::quantize_row(GgmlType::Q8_0, &w, &mut rows).unwrap();
            let crate::quant::QuantizedAct::Q8_0(a) =
                crate::quant::quantize_act(crate::quant::ActType::Q8_0, &x)
            else {
                unreachable!()
            };
            let rb = rows.len() / n_rows;
            let mut got = vec![0f32; n_rows];
            // SAFETY: the features were just detected; `a` has a block per 32 columns.
            unsafe { rows_q8_0_one(&rows, rb, &a, &mut got) };
            for (r, row) in rows.chunks_exact(rb).enumerate() {
                let act = crate::quant::QuantizedAct::Q8_0(a.clone());
                let want = crate::quant::vec_dot(GgmlType::Q8_0, row, &act);
                let scale: f32 = row
                    .chunks_exact(34)
                    .zip(&a)
                    .map(|(b, y)| {
                        let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32() * y.d;
                        let ints: i32 = b[2..]
                            .iter()
                            .zip(&y.qs)
                            .map(|(&q, &v)| (q as i8 as i32 * v as i32).abs())
                            .sum();
                        d.abs() * ints as f32
                    })
                    .sum();
                assert!(
                    (got[r] - want).abs() <= 1e-5 * scale.max(1.0),
                    "{cols} columns, row {r}: {} vs {want}",
                    got[r]
                );
            }
        }
    }

    use super::*;
    use crate::rng::SplitMix64 as Rng;

    #[test]
    fn every_fourth_bit_gathers_bits_0_4_to_28() {
        let mut rng = Rng::new(0x5151);
        for _ in 0..1000 {
            let x = rng.next_u64() as u32;
            let want: u8 = (0..8).map(|k| (((x >> (4 * k)) & 1) as u8) << k).sum();
            assert_eq!(every_fourth_bit(x), want, "{x:#010x}");
        }
    }

    #[test]
    fn q5_0_blocks_as_q8_0_hold_the_same_weights() {
        use crate::quant::{dequantize_row, GgmlType};
        let mut rng = Rng::new(0x0050);
        for _ in 0..50 {
            let mut b: Vec<u8> = (0..22).map(|_| rng.next_u64() as u8).collect();
            b[..2].copy_from_slice(&half::f16::from_f32(0.03125).to_le_bytes());
            let (mut want, mut got) = ([0f32; 32], [0f32; 32]);
            dequantize_row(GgmlType::Q5_0, &b, &mut want);
            dequantize_row(GgmlType::Q8_0, &q5_0_as_q8_0(&b), &mut got);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn q8_0_transpose_equals_the_word_copies() {
        if !super::super::available() {
            eprintln!("skipped: no AVX2 on this CPU");
            return;
        }
        let mut rng = Rng::new(0x7a05);
        let (row_bytes, n_rows) = (3 * 34, 16);
        let rows: Vec<u8> = (0..row_bytes * n_rows)
            .map(|_| rng.next_u64() as u8)
            .collect();
        for (g, i) in [(0, 0), (0, 2), (1, 1)] {
            let got = Q8_0x8::repack(&rows, row_bytes, g, i);
            let mut want = Q8_0x8::default();
            spread(&rows, (row_bytes, 34, 2), (g, i), &mut want.d, &mut want.q);
            assert_eq!((got.d, got.q), (want.d, want.q), "group {g}, block {i}");
        }
    }
}
