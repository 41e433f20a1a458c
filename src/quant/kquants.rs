//! Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: 256-weight super-blocks with 6-bit (or 4-bit) sub-block scales,
//! plus the Q8_K activation format llama.cpp pairs with them.
//! (Being written: see the helper brief.)

/// A Q8_K activation block: 256 int8 values, an f32 scale, and sums of each 16 values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; 256],
    pub bsums: [i16; 16],
}

pub fn dequantize_q2_k(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q3_k(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q4_k(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q5_k(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q6_k(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn quantize_q4_k(_src: &[f32], _dst: &mut Vec<u8>) { todo!() }
pub fn quantize_q6_k(_src: &[f32], _dst: &mut Vec<u8>) { todo!() }
pub fn quantize_act_q8_k(_x: &[f32]) -> Vec<BlockQ8K> { todo!() }
pub fn vec_dot_q2_k_q8_k(_w: &[u8], _a: &[BlockQ8K]) -> f32 { todo!() }
pub fn vec_dot_q3_k_q8_k(_w: &[u8], _a: &[BlockQ8K]) -> f32 { todo!() }
pub fn vec_dot_q4_k_q8_k(_w: &[u8], _a: &[BlockQ8K]) -> f32 { todo!() }
pub fn vec_dot_q5_k_q8_k(_w: &[u8], _a: &[BlockQ8K]) -> f32 { todo!() }
pub fn vec_dot_q6_k_q8_k(_w: &[u8], _a: &[BlockQ8K]) -> f32 { todo!() }
