//! Block formats of GGML tensors: their sizes, dequantization, reference dot products,
//! quantization, and the llama.cpp-compatible matrix-vector dot in which activations are
//! quantized once per product (so that our logits track llama.cpp's, not just f32 math).
//!
//! Layout of this module:
//! - `types`: the `GgmlType` enum (ids as stored in GGUF) and block geometry.
//! - `float`: F32, F16, BF16 rows.
//! - `legacy`: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (32-weight blocks) and the Q8_0/Q8_1 activations.
//! - `kquants`: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (256-weight super-blocks) and Q8_K activations.
//! - `act`: activation quantization dispatch (`QuantizedAct`) and `vec_dot`.
//! - `x86`, `x86_kquants`: AVX2 kernels, bit-identical to the references above; `x86_act`
//!   the activation quantizers the same way.
//!
//! Every function here is a scalar reference: clear first, fast paths later, tested against
//! these.

/// Row-loop wrappers around an x86 kernel, so a whole task's rows run inside one
/// `target_feature` function (the kernel inlined, its constants loaded once, no feature check
/// or type dispatch per row): `$one(rows, row_bytes, act, out)` sets `out[r]` to the kernel's
/// dot of row `r`; `$four(rows, row_bytes, [acts; 4], [outs; 4])` sets `outs[t][r]` with the
/// four-row kernel.
#[cfg(target_arch = "x86_64")]
macro_rules! row_loops {
    ($one:ident = $kernel:ident, $blk:ty) => {
        /// `out[r] = kernel(row r, a)` for every row of `rows`.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C (`x86::available()`).
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $one(rows: &[u8], row_bytes: usize, a: &[$blk], out: &mut [f32]) {
            for (r, o) in rows.chunks_exact(row_bytes).zip(out) {
                *o = $kernel(r, a);
            }
        }
    };
    ($four:ident = $kernel:ident x4, $blk:ty) => {
        /// `out[t][r] = kernel(row r, a[t])` for every row of `rows` and the four tokens.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C (`x86::available()`).
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $four(rows: &[u8], row_bytes: usize, a: [&[$blk]; 4], out: [&mut [f32]; 4]) {
            let [o0, o1, o2, o3] = out;
            for (r, row) in rows.chunks_exact(row_bytes).enumerate() {
                let v = $kernel(row, a);
                (o0[r], o1[r], o2[r], o3[r]) = (v[0], v[1], v[2], v[3]);
            }
        }
    };
}

/// How far ahead of the weight block being dotted a one-token product asks for its weights
/// (`prefetch_ahead`). A token's products are a few hundred kilobytes to a few megabytes per
/// thread, short streams that the hardware prefetchers ramp up on slowly, and a kernel that
/// unpacks its blocks keeps the core busy between loads, so its own demand misses leave the
/// memory bus idle. Each single-row kernel asks for the line this far past every block it
/// dots, so the requests are spread over the work.
///
/// Measured on the 2-core EPYC dev machine, synthetic qwen2.5-0.5b q4_k_m, `--threads 2`,
/// brick GB/s, the schemes alternating within each of three rounds: the earlier one (each
/// row's lines asked for at once when the row began, 16 KiB ahead) gave `ffn_down` (Q6_K/Q4_K)
/// 7.8-9.6 GB/s, slower than no prefetch at all (8.9-11.9): a burst of ~60 requests per row
/// fills the core's miss buffers and stalls its own loads. Asking per block gave 13.3-16.9,
/// `lm_head` (Q8_0) 15.3-18.9 against 14.7-17.7, decode 33.5-40.0 tok/s against 28.2-33.9.
/// Old and new binaries alternating: `ffn_down` 12.0-12.5 -> 17.2-19.5 GB/s, decode
/// 38.3-39.5 -> 40.3-46.1 tok/s. 8 KiB ahead measured the same as 16; 32 and 64 KiB no better.
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 16 << 10;

/// Asks for the cache line `PREFETCH_AHEAD` bytes past `p` (see there). A prefetch never
/// faults, so running past the matrix's end is harmless (the next tensor is usually the next
/// product's).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn prefetch_ahead(p: *const u8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: a prefetch reads nothing architecturally and never faults, at any address.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_AHEAD) as *const i8) }
}

pub mod act;
pub mod float;
pub mod kquants;
pub mod legacy;
pub mod simd_order;
#[cfg(test)]
mod test_rows;
mod types;
#[cfg(target_arch = "x86_64")]
pub mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_act;
#[cfg(target_arch = "x86_64")]
pub mod x86_kquants;
#[cfg(target_arch = "x86_64")]
pub mod x86_kquants512;
#[cfg(target_arch = "x86_64")]
pub mod x86_vnni;

pub use act::{
    has_x4, quantize_act, quantize_act_into, vec_dot, vec_dot_rows, vec_dot_rows_x4, vec_dot_x4,
    ActType, QuantizedAct,
};
pub use types::GgmlType;

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
