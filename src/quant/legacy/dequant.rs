//! Dequantization of the legacy blocks, as `dequantize_row_*` in ggml-quants.c.

use super::layout::{
    blocks_mut, f16_at, nibbles, nibbles_with_high_bits, u32_at, Q4_0_BYTES, Q4_1_BYTES,
    Q5_0_BYTES, Q5_1_BYTES, Q8_0_BYTES,
};

pub fn dequantize_q4_0(src: &[u8], dst: &mut [f32]) {
    for (b, out) in blocks_mut(src, Q4_0_BYTES, dst) {
        let d = f16_at(b, 0);
        for (o, &q) in out.iter_mut().zip(&nibbles(&b[2..18])) {
            *o = (q as i32 - 8) as f32 * d;
        }
    }
}

pub fn dequantize_q4_1(src: &[u8], dst: &mut [f32]) {
    for (b, out) in blocks_mut(src, Q4_1_BYTES, dst) {
        let d = f16_at(b, 0);
        let m = f16_at(b, 2);
        for (o, &q) in out.iter_mut().zip(&nibbles(&b[4..20])) {
            *o = q as f32 * d + m;
        }
    }
}

pub fn dequantize_q5_0(src: &[u8], dst: &mut [f32]) {
    for (b, out) in blocks_mut(src, Q5_0_BYTES, dst) {
        let d = f16_at(b, 0);
        let q = nibbles_with_high_bits(&b[6..22], u32_at(b, 2));
        for (o, &q) in out.iter_mut().zip(&q) {
            *o = (q as i32 - 16) as f32 * d;
        }
    }
}

pub fn dequantize_q5_1(src: &[u8], dst: &mut [f32]) {
    for (b, out) in blocks_mut(src, Q5_1_BYTES, dst) {
        let d = f16_at(b, 0);
        let m = f16_at(b, 2);
        let q = nibbles_with_high_bits(&b[8..24], u32_at(b, 4));
        for (o, &q) in out.iter_mut().zip(&q) {
            *o = q as f32 * d + m;
        }
    }
}

pub fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) {
    for (b, out) in blocks_mut(src, Q8_0_BYTES, dst) {
        let d = f16_at(b, 0);
        for (o, &q) in out.iter_mut().zip(&b[2..34]) {
            *o = q as i8 as f32 * d;
        }
    }
}
