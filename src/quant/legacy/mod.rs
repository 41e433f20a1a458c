//! Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: 32-weight blocks with an f16 scale (and min), plus the
//! Q8_0/Q8_1 activation formats llama.cpp pairs with them.
//!
//! Block layouts (little-endian, no padding, blocks are *not* aligned in a GGUF file, so every
//! field is read from bytes):
//!
//! | type | bytes | layout                              | weight                 |
//! |------|-------|-------------------------------------|------------------------|
//! | Q4_0 | 18    | `d: f16, qs: [u8; 16]`              | `d * (q - 8)`          |
//! | Q4_1 | 20    | `d: f16, m: f16, qs: [u8; 16]`      | `d * q + m`            |
//! | Q5_0 | 22    | `d: f16, qh: u32, qs: [u8; 16]`     | `d * (q - 16)`         |
//! | Q5_1 | 24    | `d: f16, m: f16, qh: u32, qs: [u8; 16]` | `d * q + m`        |
//! | Q8_0 | 34    | `d: f16, qs: [i8; 32]`              | `d * q`                |
//!
//! In the 4/5-bit types weight `j < 16` takes the low nibble of `qs[j]` and weight `j + 16` the
//! high nibble; the 5th bit of weight `j` (all 32) is bit `j` of `qh`.
//!
//! Which llama.cpp code each function follows:
//! - `dequantize_*`: `dequantize_row_*` in `ggml-quants.c`.
//! - `quantize_q8_0`, `quantize_q4_0`: `quantize_row_q8_0_ref` / `quantize_row_q4_0_ref`
//!   (what `llama-quantize` writes), bit-exact for finite input.
//! - `quantize_act_q8_0`, `quantize_act_q8_1`: the AVX2 `quantize_row_q8_0` / `quantize_row_q8_1`
//!   of `ggml-cpu/arch/x86/quants.c` (what the CPU backend does to activations on x86).
//! - `vec_dot_*`: the block arithmetic of `ggml_vec_dot_*_generic` in `ggml-cpu/quants.c`.

//!
//! Files: `layout` (block sizes and field readers), `dequant`, `quantize` (the weight
//! quantizers and the activation quantizers), `dot`; the activation blocks themselves are
//! `quant::blocks`'.

mod dequant;
mod dot;
mod layout;
mod quantize;
#[cfg(test)]
mod tests;

pub use super::blocks::{BlockQ8_0, BlockQ8_1};
pub use dequant::{
    dequantize_q4_0, dequantize_q4_1, dequantize_q5_0, dequantize_q5_1, dequantize_q8_0,
};
pub use dot::{
    vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1, vec_dot_q8_0_q8_0,
};
#[cfg(test)]
pub(crate) use layout::LEGACY;
pub use quantize::{quantize_act_q8_0, quantize_act_q8_1, quantize_q4_0, quantize_q8_0};
