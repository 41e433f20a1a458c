//! Dequantization of the k-quant blocks, as `dequantize_row_q*_K` in ggml-quants.c.

use super::accel::{q45_levels, q6_levels};
use super::decode::{
    check_blocks, f16_at, k4_scales_mins, q2_levels, q3_levels_scalar, q3_scales, Q2_K_BYTES,
    Q3_K_BYTES, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES,
};
use crate::quant::blocks::QK_K;

/// Q2_K: `d * (scale & 15) * q - dmin * (scale >> 4)` per 16-weight sub-block.
pub fn dequantize_q2_k(src: &[u8], dst: &mut [f32]) {
    check_blocks(src.len(), Q2_K_BYTES, dst.len());
    let mut lv = [0i8; QK_K];
    for (b, y) in src.chunks_exact(Q2_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, 80);
        let dmin = f16_at(b, 82);
        q2_levels(b, &mut lv);
        for (s, (ys, ls)) in y.chunks_exact_mut(16).zip(lv.chunks_exact(16)).enumerate() {
            let sc = b[s];
            let dl = d * (sc & 0xF) as f32;
            let ml = dmin * (sc >> 4) as f32;
            for (o, &q) in ys.iter_mut().zip(ls) {
                *o = dl * q as f32 - ml;
            }
        }
    }
}

/// Q3_K: `d * (scale - 32) * q` with q in -4..3, 16-weight sub-blocks.
pub fn dequantize_q3_k(src: &[u8], dst: &mut [f32]) {
    check_blocks(src.len(), Q3_K_BYTES, dst.len());
    let mut lv = [0i8; QK_K];
    for (b, y) in src.chunks_exact(Q3_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, 108);
        let scales = q3_scales(&b[96..108]);
        q3_levels_scalar(b, &mut lv);
        for ((ys, ls), &sc) in y.chunks_exact_mut(16).zip(lv.chunks_exact(16)).zip(&scales) {
            let dl = d * sc as f32;
            for (o, &q) in ys.iter_mut().zip(ls) {
                *o = dl * q as f32;
            }
        }
    }
}

/// Q4_K/Q5_K share everything but the level decoding.
fn dequantize_k45(b: &[u8], lv: &[i8; QK_K], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (sc, m) = k4_scales_mins(&b[4..16]);
    for (s, (ys, ls)) in y.chunks_exact_mut(32).zip(lv.chunks_exact(32)).enumerate() {
        let d1 = d * sc[s] as f32;
        let m1 = dmin * m[s] as f32;
        for (o, &q) in ys.iter_mut().zip(ls) {
            *o = d1 * q as f32 - m1;
        }
    }
}

/// Q4_K: `d * sc * q - dmin * m` per 32-weight sub-block, q in 0..15.
pub fn dequantize_q4_k(src: &[u8], dst: &mut [f32]) {
    check_blocks(src.len(), Q4_K_BYTES, dst.len());
    let mut lv = [0i8; QK_K];
    for (b, y) in src.chunks_exact(Q4_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        q45_levels(&b[16..144], None, &mut lv);
        dequantize_k45(b, &lv, y);
    }
}

/// Q5_K: as Q4_K with a fifth bit from `qh`, q in 0..31.
pub fn dequantize_q5_k(src: &[u8], dst: &mut [f32]) {
    check_blocks(src.len(), Q5_K_BYTES, dst.len());
    let mut lv = [0i8; QK_K];
    for (b, y) in src.chunks_exact(Q5_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        q45_levels(&b[48..176], Some(&b[16..48]), &mut lv);
        dequantize_k45(b, &lv, y);
    }
}

/// Q6_K: `d * scale * (q - 32)`, int8 scales per 16-weight sub-block.
pub fn dequantize_q6_k(src: &[u8], dst: &mut [f32]) {
    check_blocks(src.len(), Q6_K_BYTES, dst.len());
    let mut lv = [0i8; QK_K];
    for (b, y) in src.chunks_exact(Q6_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, 208);
        q6_levels(b, &mut lv);
        for (s, (ys, ls)) in y.chunks_exact_mut(16).zip(lv.chunks_exact(16)).enumerate() {
            let ds = d * (b[192 + s] as i8) as f32;
            for (o, &q) in ys.iter_mut().zip(ls) {
                *o = ds * q as f32;
            }
        }
    }
}
