//! Sizes of the legacy blocks and readers of their fields (blocks are not aligned in a GGUF
//! file, so every field is read from bytes), shared by dequantization, quantization and the
//! dot products. All readers return fixed-size stack arrays: no allocation per block.

use half::f16;

/// Weights per block in every format of this module.
pub(super) const QK: usize = 32;

pub(super) const Q4_0_BYTES: usize = 18;
pub(super) const Q4_1_BYTES: usize = 20;
pub(super) const Q5_0_BYTES: usize = 22;
pub(super) const Q5_1_BYTES: usize = 24;
pub(super) const Q8_0_BYTES: usize = 34;

/// The f16 at `b[at..at + 2]`, as f32.
#[inline]
pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The little-endian u32 at `b[at..at + 4]`.
#[inline]
pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The 32 unsigned 4-bit quants packed in `qs[..16]`, in weight order: weight `j` is the low
/// nibble of `qs[j]`, weight `j + 16` the high nibble.
#[inline]
pub(super) fn nibbles(qs: &[u8]) -> [u8; QK] {
    let mut q = [0u8; QK];
    for (j, &b) in qs[..QK / 2].iter().enumerate() {
        q[j] = b & 0x0F;
        q[j + QK / 2] = b >> 4;
    }
    q
}

/// The 32 unsigned 5-bit quants of a Q5 block: the nibbles of `qs` with bit `j` of `qh` as the
/// 5th bit of weight `j` (so weights 16..32 use bits 16..32 of `qh`).
#[inline]
pub(super) fn nibbles_with_high_bits(qs: &[u8], qh: u32) -> [u8; QK] {
    let mut q = nibbles(qs);
    for (j, v) in q.iter_mut().enumerate() {
        *v |= (((qh >> j) & 1) as u8) << 4;
    }
    q
}

/// Splits a row into `bytes`-sized blocks and pairs each with its 32 outputs.
pub(super) fn blocks_mut<'a>(
    src: &'a [u8],
    bytes: usize,
    dst: &'a mut [f32],
) -> impl Iterator<Item = (&'a [u8], &'a mut [f32])> {
    assert_eq!(
        dst.len() % QK,
        0,
        "row of {} weights is not whole blocks",
        dst.len()
    );
    assert_eq!(
        src.len(),
        dst.len() / QK * bytes,
        "row bytes do not match weight count"
    );
    src.chunks_exact(bytes).zip(dst.chunks_exact_mut(QK))
}

/// Largest absolute value of a block (0 for an all-zero block).
#[inline]
pub(super) fn abs_max(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// The block types of this module, for the tests here and of their fast kernels.
#[cfg(test)]
pub(crate) const LEGACY: [crate::quant::GgmlType; 5] = {
    use crate::quant::GgmlType::{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
    [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0]
};
