//! Weight quantization to Q4_K and Q6_K, as `quantize_row_q4_K_ref` (with `make_qkx2_quants`)
//! and `quantize_row_q6_K_ref` (with `make_qx_quants`) in ggml-quants.c: what `synth` writes.

use half::f16;

use super::decode::{scale_min_k4, Q4_K_BYTES, Q6_K_BYTES};
use crate::quant::blocks::{nearest_int, QK_K};

/// ggml's `GROUP_MAX_EPS`: a group whose largest |x| is below this is treated as all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `make_qkx2_quants` for 32 values: fits `x ≈ scale * L - min` with L in 0..=nmax,
/// minimising the `weights`-weighted squared error over a small grid of trial scales.
/// Returns `(scale, min)` (min as a positive offset, `the_min` in ggml) and fills `l`.
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l[..n].fill(0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * q as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let w = weights[i];
            let lf = q as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's `make_qx_quants` with `rmse_type = 1` and no importance weights (what
/// `quantize_row_q6_K_ref` uses): symmetric levels `L - nmax` in -nmax..nmax-1, weighted by x²,
/// trying 18 perturbed scales. Returns the scale and fills `l` with `level + nmax`.
fn make_qx_quants_rmse1(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let n = x.len();
    let mut max = 0f32;
    let mut amax = 0f32;
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l[..n].fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let mut iscale = -nmaxf / max;
    let mut sumlx = 0f32;
    let mut suml2 = 0f32;
    for i in 0..n {
        let q = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l[i] = (q + nmax) as i8;
        let w = x[i] * x[i];
        let qf = q as f32;
        sumlx += w * x[i] * qf;
        suml2 += w * qf * qf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmaxf + 0.1f32 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for &v in x {
            let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                let q = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
                l[i] = (q + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// f32 -> f16 -> f32, as ggml stores and reloads a block's super-scale.
#[inline]
fn f16_round(v: f32) -> (f32, [u8; 2]) {
    let h = f16::from_f32(v);
    (h.to_f32(), h.to_le_bytes())
}

/// Quantize to Q4_K exactly as `quantize_row_q4_K_ref`: per 32-weight sub-block a
/// `make_qkx2_quants` fit (weights `rms + |x|`, 21 trial scales from nmax - 1 in steps of 0.1),
/// the 8 scales and mins quantized to 6 bits against the block's largest, then every weight
/// re-quantized against its rounded scale and min. Appends `src.len() / 256` blocks.
pub fn quantize_q4_k(src: &[f32], dst: &mut Vec<u8>) {
    assert!(
        src.len().is_multiple_of(QK_K),
        "Q4_K needs whole blocks of {QK_K}"
    );
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut mins = [0f32; 8];
    let mut scales = [0f32; 8];
    dst.reserve(src.len() / QK_K * Q4_K_BYTES);

    for x in src.chunks_exact(QK_K) {
        let mut max_scale = 0f32;
        let mut max_min = 0f32;
        for j in 0..8 {
            let xs = &x[32 * j..32 * j + 32];
            let mut sum_x2 = 0f32;
            for &v in xs {
                sum_x2 += v * v;
            }
            let av_x = (sum_x2 / 32.0).sqrt();
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = av_x + v.abs();
            }
            let (s, m) = make_qkx2_quants(
                15,
                xs,
                &weights,
                &mut l[32 * j..32 * j + 32],
                &mut laux,
                -1.0,
                0.1,
                20,
            );
            scales[j] = s;
            mins[j] = m;
            if s > max_scale {
                max_scale = s;
            }
            if m > max_min {
                max_min = m;
            }
        }

        let inv_scale = if max_scale > 0.0 {
            63.0 / max_scale
        } else {
            0.0
        };
        let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
        let mut packed = [0u8; 12];
        for j in 0..8 {
            // ggml stores nearest_int into a uint8_t (wrapping), then takes MIN(63, ..).
            let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
            let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
            if j < 4 {
                packed[j] = ls;
                packed[j + 4] = lm;
            } else {
                packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
                packed[j - 4] |= (ls >> 4) << 6;
                packed[j] |= (lm >> 4) << 6;
            }
        }
        let (d, d_bytes) = f16_round(max_scale / 63.0);
        let (dmin, dmin_bytes) = f16_round(max_min / 63.0);

        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, &packed);
            let dj = d * sc as f32;
            if dj == 0.0 {
                continue;
            }
            let dm = dmin * m as f32;
            for ii in 0..32 {
                l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dj).clamp(0, 15) as u8;
            }
        }

        dst.extend_from_slice(&d_bytes);
        dst.extend_from_slice(&dmin_bytes);
        dst.extend_from_slice(&packed);
        for g in 0..4 {
            let base = 64 * g;
            for i in 0..32 {
                dst.push(l[base + i] | (l[base + i + 32] << 4));
            }
        }
    }
}

/// Quantize to Q6_K exactly as `quantize_row_q6_K_ref`: per 16-weight sub-block a
/// `make_qx_quants` fit (nmax 32, x²-weighted), the 16 scales quantized to int8 against the
/// largest-magnitude one (iscale = -128 / that scale), then every weight re-quantized against
/// its rounded scale. An (almost) all-zero block is written as zeros. Appends blocks.
pub fn quantize_q6_k(src: &[f32], dst: &mut Vec<u8>) {
    assert!(
        src.len().is_multiple_of(QK_K),
        "Q6_K needs whole blocks of {QK_K}"
    );
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; 16];
    dst.reserve(src.len() / QK_K * Q6_K_BYTES);

    for x in src.chunks_exact(QK_K) {
        let mut max_scale = 0f32;
        let mut max_abs_scale = 0f32;
        for ib in 0..16 {
            let s =
                make_qx_quants_rmse1(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            scales[ib] = s;
            if s.abs() > max_abs_scale {
                max_abs_scale = s.abs();
                max_scale = s;
            }
        }

        if max_abs_scale < GROUP_MAX_EPS {
            dst.extend(std::iter::repeat_n(0u8, Q6_K_BYTES));
            continue;
        }

        let iscale = -128.0 / max_scale;
        let (d, d_bytes) = f16_round(1.0 / iscale);
        let mut sc = [0i8; 16];
        for (o, &s) in sc.iter_mut().zip(&scales) {
            // Range is [-128, 128] by construction; ggml clamps the top only.
            *o = nearest_int(iscale * s).min(127) as i8;
        }

        for j in 0..16 {
            let dj = d * sc[j] as f32;
            if dj == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(x[16 * j + ii] / dj).clamp(-32, 31);
                l[16 * j + ii] = (q + 32) as i8;
            }
        }

        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        for h in 0..2 {
            let lh = &l[128 * h..128 * h + 128];
            for i in 0..32 {
                let q = [
                    lh[i] as u8,
                    lh[i + 32] as u8,
                    lh[i + 64] as u8,
                    lh[i + 96] as u8,
                ];
                ql[64 * h + i] = (q[0] & 0xF) | ((q[2] & 0xF) << 4);
                ql[64 * h + i + 32] = (q[1] & 0xF) | ((q[3] & 0xF) << 4);
                qh[32 * h + i] =
                    (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6);
            }
        }
        dst.extend_from_slice(&ql);
        dst.extend_from_slice(&qh);
        dst.extend(sc.iter().map(|&s| s as u8));
        dst.extend_from_slice(&d_bytes);
    }
}
