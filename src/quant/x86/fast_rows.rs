//! A prompt's Q4_0 and Q8_0 products for the CPU's `fast` numerics (docs/DESIGN.md
//! "Numerics"): eight weight rows interleaved four weights at a time, so that one vector holds
//! a block's four weights of all eight rows and one broadcast activation word multiplies them
//! all; a block's eight row sums then take one conversion and one fused multiply-add together,
//! where the exact kernels (`prompt_rows`) spend those per row and token. Each row's sum is one
//! float chain over its blocks in order (the reference keeps eight lane sums and adds them at
//! the end), so results differ from the exact ones by float reordering only; the integer part
//! of each block is exact.
//!
//! The kernel goes word by word over several tokens (one weight vector live at a time, the
//! tokens' integer sums in registers). Q4_0 keeps signed levels against activations biased
//! to unsigned bytes, the bias taken out by a per-row constant made at interleaving, so the
//! inner loop is a broadcast, a `maddubs` and a 16-bit add; Q8_0 keeps its levels and their
//! magnitudes, the signs moved onto the activations.

use std::arch::x86_64::*;

use super::loads::{f16_pair, nibbles};
use crate::quant::blocks::BlockQ8_0;
use crate::quant::GgmlType;

/// One block of eight interleaved rows in the layout a type's kernel reads: weights `4c..4c +
/// 4` of rows 0..8 in one vector (row r at bytes `4r..4r + 4`), and the rows' scales.
pub trait Interleaved: Copy + Default {
    /// The weight type these blocks hold.
    const TYPE: GgmlType;
    /// An activation block in the form the kernel takes.
    type Act: Copy + Sync + 'static;
    /// A Q8_0 activation block in that form.
    fn act(a: &BlockQ8_0) -> Self::Act;
    /// An activation block's scale.
    fn act_scale(a: &Self::Act) -> f32;
    /// A block of eight rows from the rows' eight words `c` (`words[r]`: row r's 32 levels as
    /// loaded by `levels`) and scales.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    unsafe fn from_words(words: [__m256i; 8], d: [f32; 8]) -> Self;
    /// Row `r`'s block as 32 byte levels in order (`blk`: the type's block bytes).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    unsafe fn levels(blk: &[u8]) -> __m256i;
    /// The eight rows' integer dots with each activation block of `y`, in eight i32 lanes
    /// each (word by word over the tokens, so that one weight vector is live at a time).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    unsafe fn isums<const T: usize>(&self, y: [&Self::Act; T]) -> [__m256i; T];
    /// The eight rows' scales.
    fn scales(&self) -> &[f32; 8];
}

/// Q4_0's eight rows: the signed levels (-8..=7), against activations biased to unsigned
/// bytes (`BiasedBlock`), and each row's `-128 * Σ level`, which takes the bias back out.
#[derive(Clone, Copy)]
pub struct Nibbles8 {
    q: [[u8; 32]; 8],
    unbias: [i32; 8],
    d: [f32; 8],
}

impl Default for Nibbles8 {
    fn default() -> Nibbles8 {
        Nibbles8 {
            q: [[0; 32]; 8],
            unbias: [0; 8],
            d: [0.0; 8],
        }
    }
}

/// A Q8_0 activation block with its levels biased to unsigned bytes (level + 128), the
/// operand `maddubs` takes unsigned against Q4_0's signed levels.
#[derive(Clone, Copy)]
pub struct BiasedBlock {
    d: f32,
    qs: [u8; 32],
}

impl BiasedBlock {
    pub fn new(a: &BlockQ8_0) -> BiasedBlock {
        BiasedBlock {
            d: a.d,
            qs: a.qs.map(|q| q as u8 ^ 0x80),
        }
    }
}

/// Q8_0's eight rows: the levels' magnitudes (`maddubs`'s unsigned operand) and the levels
/// themselves (whose signs go to the activations), both kept so that the kernel's inner loop
/// reads them instead of recomputing the magnitudes.
#[derive(Clone, Copy)]
pub struct Signed8 {
    abs: [[u8; 32]; 8],
    q: [[u8; 32]; 8],
    d: [f32; 8],
}

impl Default for Signed8 {
    fn default() -> Signed8 {
        Signed8 {
            abs: [[0; 32]; 8],
            q: [[0; 32]; 8],
            d: [0.0; 8],
        }
    }
}

/// A 32-bit activation word broadcast: bytes `4c..4c + 4` of a block's 32 levels.
#[inline(always)]
unsafe fn word<Q>(qs: &[Q; 32], c: usize) -> __m256i {
    assert!(std::mem::size_of::<Q>() == 1);
    // SAFETY: callers pass c < 8, so bytes 4c..4c + 4 lie within the 32 of `qs`.
    _mm256_set1_epi32(unsafe { (qs.as_ptr().add(4 * c) as *const i32).read_unaligned() })
}

#[inline(always)]
unsafe fn load(v: &[u8; 32]) -> __m256i {
    _mm256_loadu_si256(v.as_ptr() as *const __m256i)
}

impl Interleaved for Nibbles8 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    type Act = BiasedBlock;

    fn act(a: &BlockQ8_0) -> BiasedBlock {
        BiasedBlock::new(a)
    }

    fn act_scale(a: &BiasedBlock) -> f32 {
        a.d
    }

    #[inline(always)]
    unsafe fn from_words(words: [__m256i; 8], d: [f32; 8]) -> Nibbles8 {
        let mut b = Nibbles8 {
            d,
            ..Nibbles8::default()
        };
        let mut sum = _mm256_setzero_si256();
        for (q, v) in b.q.iter_mut().zip(words) {
            let level = _mm256_sub_epi8(v, _mm256_set1_epi8(8));
            _mm256_storeu_si256(q.as_mut_ptr() as *mut __m256i, level);
            // Lane r: the sum of row r's four levels in this word.
            let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), level);
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        }
        _mm256_storeu_si256(
            b.unbias.as_mut_ptr() as *mut __m256i,
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<7>(sum)),
        );
        b
    }

    #[inline(always)]
    unsafe fn levels(blk: &[u8]) -> __m256i {
        nibbles(&blk[2..18])
    }

    #[inline(always)]
    unsafe fn isums<const T: usize>(&self, y: [&BiasedBlock; T]) -> [__m256i; T] {
        // Biased activations (0..=255) times levels (-8..=7): pairs within +-4080, eight of
        // them within i16.
        let mut s16 = [_mm256_setzero_si256(); T];
        for c in 0..8 {
            let w = load(&self.q[c]);
            for t in 0..T {
                s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(word(&y[t].qs, c), w));
            }
        }
        let unbias = _mm256_loadu_si256(self.unbias.as_ptr() as *const __m256i);
        // A loop, not a closure: closures do not inherit the caller's target features.
        for s in &mut s16 {
            *s = _mm256_add_epi32(_mm256_madd_epi16(*s, _mm256_set1_epi16(1)), unbias);
        }
        s16
    }

    fn scales(&self) -> &[f32; 8] {
        &self.d
    }
}

impl Interleaved for Signed8 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    type Act = BlockQ8_0;

    fn act(a: &BlockQ8_0) -> BlockQ8_0 {
        *a
    }

    fn act_scale(a: &BlockQ8_0) -> f32 {
        a.d
    }

    #[inline(always)]
    unsafe fn from_words(words: [__m256i; 8], d: [f32; 8]) -> Signed8 {
        let mut b = Signed8 {
            d,
            ..Signed8::default()
        };
        for ((q, abs), v) in b.q.iter_mut().zip(&mut b.abs).zip(words) {
            _mm256_storeu_si256(q.as_mut_ptr() as *mut __m256i, v);
            _mm256_storeu_si256(abs.as_mut_ptr() as *mut __m256i, _mm256_sign_epi8(v, v));
        }
        b
    }

    #[inline(always)]
    unsafe fn levels(blk: &[u8]) -> __m256i {
        _mm256_loadu_si256(blk[2..34].as_ptr() as *const __m256i)
    }

    #[inline(always)]
    unsafe fn isums<const T: usize>(&self, y: [&BlockQ8_0; T]) -> [__m256i; T] {
        // |w| times a with w's sign: pairs within +-32512, one i16 each, widened at once.
        let ones = _mm256_set1_epi16(1);
        let mut s32 = [_mm256_setzero_si256(); T];
        for c in 0..8 {
            let (abs, w) = (load(&self.abs[c]), load(&self.q[c]));
            for t in 0..T {
                let p = _mm256_maddubs_epi16(abs, _mm256_sign_epi8(word(&y[t].qs, c), w));
                s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(p, ones));
            }
        }
        s32
    }

    fn scales(&self) -> &[f32; 8] {
        &self.d
    }
}

/// Whether `ty`'s prompt products have a fast kernel here.
pub fn interleaves(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q8_0)
}

/// Rows of `B::TYPE` blocks (`row_bytes` each, whole blocks) in groups of eight into `out`
/// (cleared first): group g's block i at `g * per_row + i`. Rows past the last whole group of
/// eight are left out (the caller takes them on the exact kernels).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn interleave<B: Interleaved>(rows: &[u8], row_bytes: usize, out: &mut Vec<B>) {
    let bytes = B::TYPE.block_bytes();
    assert_eq!(row_bytes % bytes, 0, "whole {} blocks", B::TYPE);
    let (n_rows, per_row) = (rows.len() / row_bytes, row_bytes / bytes);
    out.clear();
    for g in 0..n_rows / 8 {
        for i in 0..per_row {
            let mut d = [0f32; 8];
            // Row r's 32 levels as eight words (word c: weights 4c..4c + 4), transposed so
            // that word c of every row lands in vector c.
            let words: [__m256; 8] = std::array::from_fn(|r| {
                let blk = &rows[(g * 8 + r) * row_bytes + i * bytes..][..bytes];
                d[r] = f16_pair(blk, 0).0;
                _mm256_castsi256_ps(B::levels(blk))
            });
            let t = transpose8(words).map(|v| _mm256_castps_si256(v));
            out.push(B::from_words(t, d));
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

/// A group of eight interleaved rows (`per_row` blocks from `interleave`) against `T`
/// activation rows: `out[t][0..8]` = the eight rows dotted with `a[t]`.
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
        let dw = _mm256_loadu_ps(b.scales().as_ptr());
        // SAFETY: every activation row holds `per_row` blocks (asserted above).
        let y: [&B::Act; T] = std::array::from_fn(|t| unsafe { a[t].get_unchecked(i) });
        let isums = b.isums(y);
        for t in 0..T {
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(B::act_scale(y[t])));
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isums[t]), acc[t]);
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        _mm256_storeu_ps(o.as_mut_ptr(), s);
    }
}
