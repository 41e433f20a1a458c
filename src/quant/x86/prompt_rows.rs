//! A prompt's legacy-quant products on AVX2: a task's few weight rows unpacked once, then
//! taken against the prompt's tokens several at a time (`rows_unpacked` for Q4_0, Q5_0 and
//! Q8_0 with Q8_0 activations, in tiles of `R` rows by `T` tokens; `rows_unpacked_q8_1` for
//! Q4_1 and Q5_1 with Q8_1 activations, one row by `T` tokens), each block's weights loaded
//! once for the tile's tokens and each activation block once for its rows. Unpacking is a
//! third of a Q5_0 block's work and a fifth of a Q4_0 block's, and the four-token kernels
//! redid it for every four tokens.
//!
//! Every result is bit for bit the single-row kernel's (`legacy`): per (row, token) the same
//! eight integer lane sums, the same `fma(d_w * d_a, lanes, acc)` block after block and the
//! same `hsum_float_8`. The blocks are unpacked in one of three forms:
//!
//! - `OffsetBlock` (Q4_0, Q5_0): unsigned values `u` with levels `u - 16`, so a lane sum is
//!   `maddubs(u, a)` less `16 * Σ a` (`BlockQ8_0::sums16`, made once per activation row), with
//!   no sign fix-up per token. Q4_0's levels (nibble - 8) are stored doubled (`u = 2 * nibble`)
//!   with the scale halved: the lane sums come out as exactly twice the reference's (integers
//!   far below 2^24, so the conversion is exact), and `fma(d / 2, 2 s, acc)` rounds the same
//!   exact product as `fma(d, s, acc)` (halving a product of two f16 values is exact in f32).
//! - `SignedBlock` (Q8_0): the levels span a signed byte, whose unsigned offset would overflow
//!   `maddubs`' 16-bit sums, so the block keeps its levels and their magnitudes and takes
//!   llama.cpp's sign trick per token.
//! - `MinBlock` (Q4_1, Q5_1): the unsigned levels, the scale and the min, whose term
//!   `m_w * s_a` each pair adds into its own scalar sum block after block, as the reference.

use std::arch::x86_64::*;

use super::loads::{f16_pair, high_bits, hsum, lanes_unsigned, load32, nibbles, u32_at};
use super::q5_0::{lanes_q5_0, q5_0_unsigned};
use crate::quant::blocks::{BlockQ8_0, BlockQ8_1};
use crate::quant::GgmlType;

/// One block of a prompt's unpacked weight rows: its lane sums with an activation block and
/// its scale.
pub trait Unpacked: Copy + Default {
    /// The eight lane sums with `y`, as f32, in the scale `d` expects.
    ///
    /// # Safety
    /// The CPU must support AVX2 (`available()`).
    unsafe fn lanes(&self, y: &BlockQ8_0) -> __m256;
    /// The scale the lane sums are multiplied by (with the activation's).
    fn d(&self) -> f32;
}

/// A Q4_0 or Q5_0 block: levels `u - 16` (see the module notes for Q4_0) and the scale.
#[derive(Clone, Copy, Default)]
pub struct OffsetBlock {
    u: [u8; 32],
    d: f32,
}

impl Unpacked for OffsetBlock {
    #[inline(always)]
    unsafe fn lanes(&self, y: &BlockQ8_0) -> __m256 {
        lanes_q5_0(_mm256_loadu_si256(self.u.as_ptr() as *const __m256i), y)
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        self.d
    }
}

/// A Q8_0 block: its levels, their magnitudes, and the scale.
#[derive(Clone, Copy, Default)]
pub struct SignedBlock {
    abs: [u8; 32],
    q: [i8; 32],
    d: f32,
}

impl Unpacked for SignedBlock {
    #[inline(always)]
    unsafe fn lanes(&self, y: &BlockQ8_0) -> __m256 {
        let q = load32(&self.q);
        let abs = _mm256_loadu_si256(self.abs.as_ptr() as *const __m256i);
        lanes_unsigned(abs, _mm256_sign_epi8(load32(&y.qs), q))
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        self.d
    }
}

/// A Q4_1 or Q5_1 block: its unsigned levels, scale and min.
#[derive(Clone, Copy, Default)]
pub struct MinBlock {
    u: [u8; 32],
    d: f32,
    m: f32,
}

/// Whether a prompt's `ty` products are unpacked (`OffsetBlock`s for Q4_0/Q5_0, `SignedBlock`s
/// for Q8_0, `MinBlock`s for Q4_1/Q5_1).
pub fn unpacks(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::Q4_1 | GgmlType::Q5_1
    )
}

/// Every block of `rows` (whole Q4_1 or Q5_1 rows) unpacked into `out` (cleared first).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn unpack_min(ty: GgmlType, rows: &[u8], out: &mut Vec<MinBlock>) {
    assert!(
        matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1),
        "{ty} does not unpack into min blocks"
    );
    let bytes = ty.block_bytes();
    assert_eq!(rows.len() % bytes, 0, "whole {ty} blocks");
    out.clear();
    out.extend(rows.chunks_exact(bytes).map(|b| {
        let u = if ty == GgmlType::Q4_1 {
            nibbles(&b[4..20])
        } else {
            _mm256_or_si256(nibbles(&b[8..24]), high_bits(u32_at(b, 4)))
        };
        let (d, m) = f16_pair(b, 0);
        let mut block = MinBlock { u: [0; 32], d, m };
        _mm256_storeu_si256(block.u.as_mut_ptr() as *mut __m256i, u);
        block
    }));
}

/// `vec_dot_q4_1_q8_1` / `vec_dot_q5_1_q8_1` of every row of `blocks` (rows of `per_row`
/// unpacked blocks) with `T` activation rows: `out[t][r]`, the single-row kernel's operations
/// per pair in its block order (lanes by FMA, the min terms in a scalar), so its bits.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_unpacked_q8_1<const T: usize>(
    blocks: &[MinBlock],
    per_row: usize,
    a: [&[BlockQ8_1]; T],
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
        let mut summs = [0f32; T];
        for (i, b) in row.iter().enumerate() {
            let u = _mm256_loadu_si256(b.u.as_ptr() as *const __m256i);
            let dw = _mm256_set1_ps(b.d);
            for t in 0..T {
                // SAFETY: every activation row holds `per_row` blocks (asserted above).
                let y = unsafe { a[t].get_unchecked(i) };
                summs[t] += b.m * y.s;
                let d = _mm256_mul_ps(dw, _mm256_set1_ps(y.d));
                acc[t] = _mm256_fmadd_ps(d, lanes_unsigned(u, load32(&y.qs)), acc[t]);
            }
        }
        for t in 0..T {
            out[t][r] = hsum(acc[t]) + summs[t];
        }
    }
}

/// Every block of `rows` (whole Q4_0 or Q5_0 rows) unpacked into `out` (cleared first).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn unpack_offset(ty: GgmlType, rows: &[u8], out: &mut Vec<OffsetBlock>) {
    out.clear();
    let unpack = |u: __m256i, d: f32| {
        let mut b = OffsetBlock { u: [0; 32], d };
        _mm256_storeu_si256(b.u.as_mut_ptr() as *mut __m256i, u);
        b
    };
    match ty {
        GgmlType::Q4_0 => {
            assert_eq!(rows.len() % 18, 0, "whole Q4_0 blocks");
            out.extend(rows.chunks_exact(18).map(|b| {
                let doubled = _mm256_add_epi8(nibbles(&b[2..18]), nibbles(&b[2..18]));
                unpack(doubled, f16_pair(b, 0).0 * 0.5)
            }));
        }
        GgmlType::Q5_0 => {
            assert_eq!(rows.len() % 22, 0, "whole Q5_0 blocks");
            out.extend(
                rows.chunks_exact(22)
                    .map(|b| unpack(q5_0_unsigned(b), f16_pair(b, 0).0)),
            );
        }
        _ => panic!("{ty} does not unpack into offset blocks"),
    }
}

/// Every block of `rows` (whole Q8_0 rows) unpacked into `out` (cleared first).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn unpack_signed(rows: &[u8], out: &mut Vec<SignedBlock>) {
    assert_eq!(rows.len() % 34, 0, "whole Q8_0 blocks");
    out.clear();
    out.extend(rows.chunks_exact(34).map(|b| {
        let q = _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i);
        let mut s = SignedBlock {
            abs: [0; 32],
            q: [0; 32],
            d: f16_pair(b, 0).0,
        };
        _mm256_storeu_si256(s.q.as_mut_ptr() as *mut __m256i, q);
        _mm256_storeu_si256(s.abs.as_mut_ptr() as *mut __m256i, _mm256_sign_epi8(q, q));
        s
    }));
}

/// The single-row dot of every row of `blocks` (rows of `per_row` unpacked blocks) with `T`
/// activation rows: `out[t][r]`. Rows are taken `R` at a time (the rest one by one), each
/// block step loading every token's activation block once for the `R` rows and every row's
/// block once for the `T` tokens. Per (row, token) the single-row kernel's operations in its
/// block order, so its bits.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_unpacked<B: Unpacked, const R: usize, const T: usize>(
    blocks: &[B],
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
    let whole = rows / R * R;
    for r in (0..whole).step_by(R) {
        let sums = tile::<B, R, T>(&blocks[r * per_row..(r + R) * per_row], per_row, a);
        for (i, s) in sums.iter().enumerate() {
            for t in 0..T {
                out[t][r + i] = s[t];
            }
        }
    }
    for r in whole..rows {
        let [s] = tile::<B, 1, T>(&blocks[r * per_row..(r + 1) * per_row], per_row, a);
        for t in 0..T {
            out[t][r] = s[t];
        }
    }
}

/// `R` rows (`R * per_row` blocks) against `T` activation rows of `per_row` blocks (both
/// checked by the caller): `[row][token]`.
#[inline(always)]
unsafe fn tile<B: Unpacked, const R: usize, const T: usize>(
    blocks: &[B],
    per_row: usize,
    a: [&[BlockQ8_0]; T],
) -> [[f32; T]; R] {
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    for i in 0..per_row {
        let b: [&B; R] = std::array::from_fn(|r| blocks.get_unchecked(r * per_row + i));
        let dw: [__m256; R] = std::array::from_fn(|r| _mm256_set1_ps(b[r].d()));
        for t in 0..T {
            let y = a[t].get_unchecked(i);
            let dy = _mm256_set1_ps(y.d);
            for r in 0..R {
                let d = _mm256_mul_ps(dw[r], dy);
                acc[r][t] = _mm256_fmadd_ps(d, b[r].lanes(y), acc[r][t]);
            }
        }
    }
    std::array::from_fn(|r| std::array::from_fn(|t| hsum(acc[r][t])))
}
