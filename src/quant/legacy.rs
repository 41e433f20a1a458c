//! Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: 32-weight blocks with an f16 scale (and min), plus the
//! Q8_0/Q8_1 activation formats llama.cpp pairs with them.
//! (Being written: see the helper brief.)

/// A Q8_0 activation block: 32 int8 values and the scale (f16-rounded, kept as f32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0 {
    pub d: f32,
    pub qs: [i8; 32],
}

/// A Q8_1 activation block: as Q8_0, plus `s = d * sum(qs)` (f16-rounded, kept as f32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_1 {
    pub d: f32,
    pub s: f32,
    pub qs: [i8; 32],
}

pub fn dequantize_q4_0(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q4_1(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q5_0(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q5_1(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn dequantize_q8_0(_src: &[u8], _dst: &mut [f32]) { todo!() }
pub fn quantize_q8_0(_src: &[f32], _dst: &mut Vec<u8>) { todo!() }
pub fn quantize_q4_0(_src: &[f32], _dst: &mut Vec<u8>) { todo!() }
pub fn quantize_act_q8_0(_x: &[f32]) -> Vec<BlockQ8_0> { todo!() }
pub fn quantize_act_q8_1(_x: &[f32]) -> Vec<BlockQ8_1> { todo!() }
pub fn vec_dot_q4_0_q8_0(_w: &[u8], _a: &[BlockQ8_0]) -> f32 { todo!() }
pub fn vec_dot_q5_0_q8_0(_w: &[u8], _a: &[BlockQ8_0]) -> f32 { todo!() }
pub fn vec_dot_q8_0_q8_0(_w: &[u8], _a: &[BlockQ8_0]) -> f32 { todo!() }
pub fn vec_dot_q4_1_q8_1(_w: &[u8], _a: &[BlockQ8_1]) -> f32 { todo!() }
pub fn vec_dot_q5_1_q8_1(_w: &[u8], _a: &[BlockQ8_1]) -> f32 { todo!() }
