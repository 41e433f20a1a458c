//! Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: 256-weight super-blocks with 6-bit (or 4-bit) sub-block scales,
//! plus the Q8_K activation format llama.cpp pairs with them.
//!
//! Everything here follows llama.cpp (ggml) operation for operation, so that results agree bit
//! for bit where ggml's own code is deterministic:
//! - `dequantize_q*_k`: `dequantize_row_q*_K` (ggml/src/ggml-quants.c);
//! - `quantize_q4_k` / `quantize_q6_k`: `quantize_row_q4_K_ref` (with `make_qkx2_quants`) and
//!   `quantize_row_q6_K_ref` (with `make_qx_quants`), ggml-quants.c;
//! - `quantize_act_q8_k`: `quantize_row_q8_K_ref`, which is what the x86 CPU backend runs
//!   (ggml-cpu/arch/x86/quants.c: `quantize_row_q8_K` just calls the reference);
//! - `vec_dot_q*_k_q8_k`: `ggml_vec_dot_q*_K_q8_K_generic` (ggml-cpu/quants.c): exact integer
//!   sums per super-block, then f32 accumulation in the generic code's order. The AVX2 kernels
//!   compute the same integers; they differ only in how the f32 partial sums are grouped.
//!   Q4_K, Q5_K and Q6_K run here one weight at a time (the reference): `quant::vec_dot` takes
//!   `x86_kquants`' AVX2 kernels for them, tested bit for bit against these.
//!
//! Blocks are read as bytes (they are not aligned in a GGUF file); f16 fields are little-endian.

//!
//! Files: `decode` (block sizes, packed scales and levels, the dots' integer core, one weight at
//! a time), `accel` (the decoders with an AVX2 form), `dequant`, `quantize` (weights),
//! `q8_k` (activations), `dot`; the Q8_K block itself is `quant::blocks`'.

mod accel;
mod decode;
mod dequant;
mod dot;
mod q8_k;
mod quantize;
#[cfg(test)]
mod tests;

pub use super::blocks::{pair_order, BlockQ8K, PAIR_ORDER, QK_K};
#[cfg(test)]
pub(crate) use decode::q3_scales;
pub(crate) use decode::scale_min_k4;
#[cfg(test)]
pub(crate) use decode::{lane_sums_scalar, q3_levels_scalar, q45_levels_scalar, q6_levels_scalar};
pub use decode::{Q2_K_BYTES, Q3_K_BYTES, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES};
pub use dequant::{
    dequantize_q2_k, dequantize_q3_k, dequantize_q4_k, dequantize_q5_k, dequantize_q6_k,
};
pub use dot::{
    vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k, vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k,
};
pub use q8_k::quantize_act_q8_k;
pub use quantize::{quantize_q4_k, quantize_q6_k};
