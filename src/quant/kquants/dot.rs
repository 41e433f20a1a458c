//! Dot products of k-quant weight rows with Q8_K activations, as
//! `ggml_vec_dot_q*_K_q8_K_generic` in ggml-cpu/quants.c: exact integer sums per super-block,
//! then f32 accumulation in the generic code's order.

use super::accel::{lane_sums, q3_levels};
use super::decode::{
    f16_at, k4_scales_mins, lane_sums_scalar, q2_levels, q3_scales, q45_levels_scalar,
    q6_levels_scalar, Q2_K_BYTES, Q3_K_BYTES, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES,
};
use crate::quant::blocks::{BlockQ8K, QK_K};

fn check_dot(w_len: usize, block_bytes: usize, a: &[BlockQ8K]) {
    assert_eq!(
        w_len,
        a.len() * block_bytes,
        "weight row of {w_len} bytes against {} Q8_K blocks",
        a.len()
    );
}

/// Q2_K · Q8_K: per block `d_a*d * Σ sc·(q·q8) - d_a*dmin * Σ m·bsum`, summed in f32.
pub fn vec_dot_q2_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    check_dot(w.len(), Q2_K_BYTES, a);
    let mut lv = [0i8; QK_K];
    let mut sumf = 0f32;
    for (b, y) in w.chunks_exact(Q2_K_BYTES).zip(a) {
        let sc = &b[0..16];
        let summs: i32 = y
            .bsums
            .iter()
            .zip(sc)
            .map(|(&s, &c)| s as i32 * (c >> 4) as i32)
            .sum();
        let dall = y.d * f16_at(b, 80);
        let dmin = y.d * f16_at(b, 82);
        q2_levels(b, &mut lv);
        let mut isum = 0i32;
        for (s, (ls, qs)) in lv.chunks_exact(16).zip(y.qs.chunks_exact(16)).enumerate() {
            let isuml: i32 = ls.iter().zip(qs).map(|(&l, &q)| l as i32 * q as i32).sum();
            isum += (sc[s] & 0xF) as i32 * isuml;
        }
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

/// Q3_K · Q8_K: `d_a*d * Σ (scale-32)·(q·q8)` with q in -4..3.
pub fn vec_dot_q3_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    check_dot(w.len(), Q3_K_BYTES, a);
    let mut lv = [0i8; QK_K];
    let mut sums = [0f32; 8];
    for (b, y) in w.chunks_exact(Q3_K_BYTES).zip(a) {
        q3_levels(b, &mut lv);
        let scales = q3_scales(&b[96..108]);
        let aux32 = lane_sums(&lv, &y.qs, 16, |s| scales[s] as i32);
        let d = f16_at(b, 108) * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux32) {
            *s += d * v as f32;
        }
    }
    sums.iter().fold(0f32, |acc, &s| acc + s)
}

/// Q4_K/Q5_K · Q8_K given decoded levels: scale part in lanes, min part through bsums.
fn dot_k45(b: &[u8], lv: &[i8; QK_K], y: &BlockQ8K, sums: &mut [f32; 8]) -> f32 {
    let (sc, m) = k4_scales_mins(&b[4..16]);
    let sumi: i32 = y
        .bsums
        .iter()
        .enumerate()
        .map(|(j, &s)| s as i32 * m[j / 2] as i32)
        .sum();
    let aux32 = lane_sums_scalar(lv, &y.qs, 32, |s| sc[s] as i32);
    let d = f16_at(b, 0) * y.d;
    for (s, &v) in sums.iter_mut().zip(&aux32) {
        *s += d * v as f32;
    }
    let dmin = f16_at(b, 2) * y.d;
    dmin * sumi as f32
}

/// Q4_K · Q8_K: `d_a*d * Σ sc·(q·q8) - d_a*dmin * Σ m·bsum`.
pub fn vec_dot_q4_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    check_dot(w.len(), Q4_K_BYTES, a);
    let mut lv = [0i8; QK_K];
    let mut sums = [0f32; 8];
    let mut sumf = 0f32;
    for (b, y) in w.chunks_exact(Q4_K_BYTES).zip(a) {
        q45_levels_scalar(&b[16..144], None, &mut lv);
        sumf -= dot_k45(b, &lv, y, &mut sums);
    }
    sums.iter().fold(sumf, |acc, &s| acc + s)
}

/// Q5_K · Q8_K: as Q4_K with 5-bit levels.
pub fn vec_dot_q5_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    check_dot(w.len(), Q5_K_BYTES, a);
    let mut lv = [0i8; QK_K];
    let mut sums = [0f32; 8];
    let mut sumf = 0f32;
    for (b, y) in w.chunks_exact(Q5_K_BYTES).zip(a) {
        q45_levels_scalar(&b[48..176], Some(&b[16..48]), &mut lv);
        sumf -= dot_k45(b, &lv, y, &mut sums);
    }
    sums.iter().fold(sumf, |acc, &s| acc + s)
}

/// Q6_K · Q8_K: `d_a*d * Σ scale·(q-32)·q8`.
pub fn vec_dot_q6_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    check_dot(w.len(), Q6_K_BYTES, a);
    let mut lv = [0i8; QK_K];
    let mut sums = [0f32; 8];
    for (b, y) in w.chunks_exact(Q6_K_BYTES).zip(a) {
        q6_levels_scalar(b, &mut lv);
        let aux32 = lane_sums_scalar(&lv, &y.qs, 16, |s| b[192 + s] as i8 as i32);
        let d = f16_at(b, 208) * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux32) {
            *s += d * v as f32;
        }
    }
    sums.iter().fold(0f32, |acc, &s| acc + s)
}
