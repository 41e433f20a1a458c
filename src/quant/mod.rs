//! Block formats of GGML tensors: their sizes, dequantization, reference dot products,
//! quantization, and the llama.cpp-compatible matrix-vector dot in which activations are
//! quantized once per product (so that our logits track llama.cpp's, not just f32 math).
//!
//! Layout of this module, lowest layer first:
//! - `types`: the `GgmlType` enum (ids as stored in GGUF) and block geometry.
//! - `blocks`: the Q8_0/Q8_1/Q8_K activation blocks and the rounding steps that make them.
//! - `float`: F32, F16, BF16 rows; `simd_order`: the summation orders of llama.cpp's SIMD code;
//!   `fma`: running a loop with fused multiply-adds where the CPU has them.
//! - `legacy`: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (32-weight blocks) and the Q8_0/Q8_1 activations.
//! - `kquants`: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (256-weight super-blocks) and Q8_K activations.
//! - `x86`: AVX2 (and AVX-512) kernels, bit-identical to the references above (the k-quant
//!   references call its decoders; the references' tests call nothing of it).
//! - `row`: whole rows of any type (`dequantize_row`, `quantize_row`, `dot_f32`).
//! - `act`: activation quantization dispatch (`QuantizedAct`) and `vec_dot`.
//!
//! Every function in `legacy`, `kquants` and `float` is a scalar reference: clear first, fast
//! paths later, tested against these.

pub mod act;
pub mod blocks;
pub mod float;
pub mod fma;
pub mod kquants;
pub mod legacy;
mod row;
pub mod simd_order;
#[cfg(test)]
mod test_rows;
mod types;
#[cfg(target_arch = "x86_64")]
pub mod x86;

pub use act::{
    has_x4, quantize_act, quantize_act_into, vec_dot, vec_dot_rows, vec_dot_rows_x4, vec_dot_x4,
    ActType, QuantizedAct,
};
pub use row::{dequantize_row, dot_f32, quantize_row, QuantError};
pub use types::GgmlType;
#[cfg(target_arch = "x86_64")]
pub use x86::{kquants as x86_kquants, kquants512 as x86_kquants512, vnni as x86_vnni};
