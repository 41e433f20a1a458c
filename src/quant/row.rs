//! Whole rows of any block type: dequantization, quantization and the exact f32 reference dot,
//! dispatched on `GgmlType`.

use super::{float, kquants, legacy, GgmlType};

/// Errors from the block-format layer. Callers have validated shapes already (the GGUF reader
/// checks them against the file), so these name the mismatch for the rare internal misuse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QuantError {
    #[error("{len} values is not a whole number of {ty} blocks of {block}")]
    NotBlockMultiple {
        ty: GgmlType,
        len: usize,
        block: usize,
    },
    #[error("quantizing to {0} is not supported")]
    Unsupported(GgmlType),
}

/// Dequantize one row of `dst.len()` weights stored as `ty` in `src`.
///
/// `src.len()` must equal `ty.row_bytes(dst.len())`; `dst.len()` must be a multiple of the
/// block size. Panics otherwise (an internal invariant: the reader validated the tensor).
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) {
    assert_eq!(Some(src.len()), ty.row_bytes(dst.len()), "{ty} row size");
    match ty {
        GgmlType::F32 => float::dequantize_f32(src, dst),
        GgmlType::F16 => float::dequantize_f16(src, dst),
        GgmlType::BF16 => float::dequantize_bf16(src, dst),
        GgmlType::Q4_0 => legacy::dequantize_q4_0(src, dst),
        GgmlType::Q4_1 => legacy::dequantize_q4_1(src, dst),
        GgmlType::Q5_0 => legacy::dequantize_q5_0(src, dst),
        GgmlType::Q5_1 => legacy::dequantize_q5_1(src, dst),
        GgmlType::Q8_0 => legacy::dequantize_q8_0(src, dst),
        GgmlType::Q2_K => kquants::dequantize_q2_k(src, dst),
        GgmlType::Q3_K => kquants::dequantize_q3_k(src, dst),
        GgmlType::Q4_K => kquants::dequantize_q4_k(src, dst),
        GgmlType::Q5_K => kquants::dequantize_q5_k(src, dst),
        GgmlType::Q6_K => kquants::dequantize_q6_k(src, dst),
    }
}

/// Reference dot product of a `ty` row with f32 `x`: dequantize, then an f64-accumulated dot.
/// Slow and exact; the yardstick for every faster dot.
pub fn dot_f32(ty: GgmlType, src: &[u8], x: &[f32]) -> f32 {
    let mut w = vec![0f32; x.len()];
    dequantize_row(ty, src, &mut w);
    w.iter()
        .zip(x)
        .map(|(&a, &b)| a as f64 * b as f64)
        .sum::<f64>() as f32
}

/// Quantize `src` into `ty` blocks appended to `dst`. Supported: F32, F16, BF16, Q8_0, Q4_0,
/// Q4_K, Q6_K (what `synth` writes).
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut Vec<u8>) -> Result<(), QuantError> {
    let block = ty.block_size();
    if !src.len().is_multiple_of(block) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            len: src.len(),
            block,
        });
    }
    match ty {
        GgmlType::F32 => float::quantize_f32(src, dst),
        GgmlType::F16 => float::quantize_f16(src, dst),
        GgmlType::BF16 => float::quantize_bf16(src, dst),
        GgmlType::Q8_0 => legacy::quantize_q8_0(src, dst),
        GgmlType::Q4_0 => legacy::quantize_q4_0(src, dst),
        GgmlType::Q4_K => kquants::quantize_q4_k(src, dst),
        GgmlType::Q6_K => kquants::quantize_q6_k(src, dst),
        other => return Err(QuantError::Unsupported(other)),
    }
    Ok(())
}
