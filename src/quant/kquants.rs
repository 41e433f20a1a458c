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

use half::f16;

/// Weights per super-block (`QK_K`).
pub const QK_K: usize = 256;
/// Bytes of one block of each type.
pub const Q2_K_BYTES: usize = 84;
pub const Q3_K_BYTES: usize = 110;
pub const Q4_K_BYTES: usize = 144;
pub const Q5_K_BYTES: usize = 176;
pub const Q6_K_BYTES: usize = 210;

/// ggml's `GROUP_MAX_EPS`: a group whose largest |x| is below this is treated as all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// A Q8_K activation block: 256 int8 values, an f32 scale, and sums of each 16 values.
/// `qs_pairs` holds the same values reordered within each 16 as `PAIR_ORDER`, the order the
/// AVX2 k-quant kernels (`x86_kquants`) read them in; made once per activation row so the
/// kernels do not reorder them again for every weight row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; 256],
    pub bsums: [i16; 16],
    pub qs_pairs: [i8; 256],
}

impl BlockQ8K {
    /// A block of zeros (what an all-zero activation block quantizes to).
    pub const ZERO: BlockQ8K = BlockQ8K {
        d: 0.0,
        qs: [0; QK_K],
        bsums: [0; 16],
        qs_pairs: [0; QK_K],
    };
}

/// Position `p` of each 16 values in `BlockQ8K::qs_pairs` holds value `PAIR_ORDER[p]`: values
/// `j` and `j + 8` side by side, the two that share lane `j % 8` of the k-quant lane sums.
pub const PAIR_ORDER: [u8; 16] = [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15];

/// `qs` in `PAIR_ORDER` within each 16.
pub fn pair_order(qs: &[i8; QK_K]) -> [i8; QK_K] {
    std::array::from_fn(|p| qs[p & !15 | PAIR_ORDER[p % 16] as usize])
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/// The little-endian f16 at `b[off..off + 2]`, as f32.
#[inline]
fn f16_at(b: &[u8], off: usize) -> f32 {
    f16::from_le_bytes([b[off], b[off + 1]]).to_f32()
}

/// ggml's `nearest_int`: round to nearest, ties to even (`round_half_even`, below). Outside
/// ggml's asserted range this saturates instead of returning garbage.
#[inline]
fn nearest_int(x: f32) -> i32 {
    round_half_even(x) as i32
}

/// `x.round_ties_even()` without the libm `rintf` call it compiles to on baseline x86-64 (no
/// SSE4.1 `roundss`): for |x| < 2^22, adding and subtracting 1.5 * 2^23 leaves x rounded to an
/// integer, ties to even (ggml's own trick; -0.0 may come out as +0.0); NaN stays NaN. Larger
/// values take the library call.
#[inline(always)]
pub(crate) fn round_half_even(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    if x.abs() < 4_194_304.0 {
        (x + MAGIC) - MAGIC
    } else {
        x.round_ties_even()
    }
}

/// ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block `j` (0..8) from the 12 packed
/// bytes of a Q4_K/Q5_K block. Bytes 0..4 hold scales 0..3 (low 6 bits) and the top 2 bits of
/// scales 4..7; bytes 4..8 the same for mins; bytes 8..12 the low nibbles of scales/mins 4..7.
#[inline]
pub(crate) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The 16 Q3_K sub-block scales (already minus 32) from its 12 packed bytes: scale `j` has low
/// nibble `q[j] & 15` (j < 8) or `q[j - 8] >> 4` (j >= 8), and its top 2 bits in
/// `q[8 + j % 4]` at bit `2 * (j / 4)`.
#[inline]
fn q3_scales(q: &[u8]) -> [i8; 16] {
    let mut s = [0i8; 16];
    for (j, out) in s.iter_mut().enumerate() {
        let low = if j < 8 { q[j] & 0xF } else { q[j - 8] >> 4 };
        let high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
        *out = (low | (high << 4)) as i8 - 32;
    }
    s
}

/// Q2_K block, decoded: 2-bit levels (0..3) in weight order, and the 4-bit scale/min bytes.
/// Weight `w` lives in `qs[32 * (w / 128) + w % 32]` at bit `2 * ((w % 128) / 32)`.
#[inline]
fn q2_levels(b: &[u8], out: &mut [i8; QK_K]) {
    let qs = &b[16..80];
    for (w, o) in out.iter_mut().enumerate() {
        let byte = qs[32 * (w / 128) + w % 32];
        *o = ((byte >> (2 * ((w % 128) / 32))) & 3) as i8;
    }
}

/// Q3_K block, decoded: signed 3-bit levels (-4..3): the 2 low bits as in Q2_K, minus 4 where the
/// `hmask[w % 32]` bit `w / 32` is clear.
#[inline]
fn q3_levels(b: &[u8], out: &mut [i8; QK_K]) {
    let hmask = &b[0..32];
    let qs = &b[32..96];
    for (w, o) in out.iter_mut().enumerate() {
        let low = (qs[32 * (w / 128) + w % 32] >> (2 * ((w % 128) / 32))) & 3;
        let high = (hmask[w % 32] >> (w / 32)) & 1;
        *o = low as i8 - if high != 0 { 0 } else { 4 };
    }
}

/// Q4_K/Q5_K 4-bit levels: in each 64-weight group `g`, weights 0..32 are the low nibbles of
/// `qs[32g..32g + 32]`, weights 32..64 the high nibbles. `qh` (Q5_K) adds 16 where bit `w / 32`
/// of `qh[w % 32]` is set.
#[inline]
fn q45_levels(qs: &[u8], qh: Option<&[u8]>, out: &mut [i8; QK_K]) {
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        // SAFETY: AVX2 was just detected; the callers pass whole blocks' fields.
        return unsafe { super::x86::q45_levels(qs, qh, out) };
    }
    q45_levels_scalar(qs, qh, out)
}

/// `q45_levels` one weight at a time: the reference.
pub(crate) fn q45_levels_scalar(qs: &[u8], qh: Option<&[u8]>, out: &mut [i8; QK_K]) {
    for (w, o) in out.iter_mut().enumerate() {
        let byte = qs[32 * (w / 64) + w % 32];
        let mut q = if (w / 32) % 2 == 0 {
            byte & 0xF
        } else {
            byte >> 4
        };
        if let Some(qh) = qh {
            q |= ((qh[w % 32] >> (w / 32)) & 1) << 4;
        }
        *o = q as i8;
    }
}

/// Q6_K levels (-32..31): in each 128-weight half `h`, weight `32k + l` takes the low (k < 2)
/// or high (k >= 2) nibble of `ql[64h + l + 32 * (k % 2)]` and bits `2k..2k+2` of
/// `qh[32h + l]` as its top two bits.
#[inline]
fn q6_levels(b: &[u8], out: &mut [i8; QK_K]) {
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        // SAFETY: AVX2 was just detected; `b` is a whole Q6_K block.
        return unsafe { super::x86::q6_levels(b, out) };
    }
    q6_levels_scalar(b, out)
}

/// `q6_levels` one weight at a time: the reference.
pub(crate) fn q6_levels_scalar(b: &[u8], out: &mut [i8; QK_K]) {
    let ql = &b[0..128];
    let qh = &b[128..192];
    for (w, o) in out.iter_mut().enumerate() {
        let (h, k, l) = (w / 128, (w % 128) / 32, w % 32);
        let byte = ql[64 * h + l + 32 * (k % 2)];
        let low = if k < 2 { byte & 0xF } else { byte >> 4 };
        let high = (qh[32 * h + l] >> (2 * k)) & 3;
        *o = (low | (high << 4)) as i8 - 32;
    }
}

/// Q4_K/Q5_K's 8 scales and 8 mins.
#[inline]
fn k4_scales_mins(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        (sc[j], m[j]) = scale_min_k4(j, packed);
    }
    (sc, m)
}

fn check_blocks(src_len: usize, block_bytes: usize, n: usize) {
    assert!(
        n.is_multiple_of(QK_K) && src_len == n / QK_K * block_bytes,
        "k-quant row: {src_len} bytes for {n} values"
    );
}

// ---------------------------------------------------------------------------------------------
// Dequantization (dequantize_row_q*_K)
// ---------------------------------------------------------------------------------------------

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
        q3_levels(b, &mut lv);
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

// ---------------------------------------------------------------------------------------------
// Weight quantization (quantize_row_q4_K_ref, quantize_row_q6_K_ref)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Activation quantization (quantize_row_q8_K_ref)
// ---------------------------------------------------------------------------------------------

/// Quantize activations to Q8_K as the x86 CPU backend does. ggml-cpu/arch/x86/quants.c's
/// `quantize_row_q8_K` is a plain call to `quantize_row_q8_K_ref` (no SIMD path), so this is the
/// reference: `iscale = -127 / max` where `max` is the signed value of largest magnitude (the
/// first one, on ties), `q = min(127, nearest_int(iscale * x))`, `d = 1 / iscale`, and `bsums`
/// the sums of each 16 q. A block of zeros gets `d = 0`, zero qs and zero bsums (ggml leaves its
/// bsums unwritten there; with d = 0 they cannot affect a dot product).
pub fn quantize_act_q8_k(x: &[f32]) -> Vec<BlockQ8K> {
    assert!(
        x.len().is_multiple_of(QK_K),
        "Q8_K needs whole blocks of {QK_K}, got {}",
        x.len()
    );
    x.chunks_exact(QK_K)
        .map(|xb| {
            let mut max = 0f32;
            let mut amax = 0f32;
            for &v in xb {
                let av = v.abs();
                if av > amax {
                    amax = av;
                    max = v;
                }
            }
            let mut blk = BlockQ8K::ZERO;
            if amax == 0.0 {
                return blk;
            }
            let iscale = -127.0 / max;
            for (q, &v) in blk.qs.iter_mut().zip(xb) {
                *q = nearest_int(iscale * v).min(127) as i8;
            }
            for (s, qs) in blk.bsums.iter_mut().zip(blk.qs.chunks_exact(16)) {
                *s = qs.iter().map(|&q| q as i16).sum();
            }
            blk.qs_pairs = pair_order(&blk.qs);
            blk.d = 1.0 / iscale;
            blk
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Dot products (ggml_vec_dot_q*_K_q8_K_generic)
// ---------------------------------------------------------------------------------------------

fn check_dot(w_len: usize, block_bytes: usize, a: &[BlockQ8K]) {
    assert_eq!(
        w_len,
        a.len() * block_bytes,
        "weight row of {w_len} bytes against {} Q8_K blocks",
        a.len()
    );
}

/// The generic kernels' integer core for Q3_K..Q6_K: eight lane sums, lane `i % 8` collecting
/// `scale[i / sub] * a[i] * q8[i]`. Exact integers; the lanes only fix the later f32 order, so
/// the AVX2 version (`x86::kquant_lane_sums`) gives the same sums.
#[inline]
fn lane_sums(
    levels: &[i8; QK_K],
    q8: &[i8; QK_K],
    sub: usize,
    scale: impl Fn(usize) -> i32,
) -> [i32; 8] {
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        // SAFETY: AVX2 was just detected.
        return unsafe { super::x86::kquant_lane_sums(levels, q8, sub, scale) };
    }
    lane_sums_scalar(levels, q8, sub, scale)
}

/// `lane_sums` one product at a time: the reference.
pub(crate) fn lane_sums_scalar(
    levels: &[i8; QK_K],
    q8: &[i8; QK_K],
    sub: usize,
    scale: impl Fn(usize) -> i32,
) -> [i32; 8] {
    let mut aux32 = [0i32; 8];
    for (s, (ls, qs)) in levels
        .chunks_exact(sub)
        .zip(q8.chunks_exact(sub))
        .enumerate()
    {
        let sc = scale(s);
        for (i, (&l, &q)) in ls.iter().zip(qs).enumerate() {
            aux32[i % 8] += sc * (l as i32 * q as i32);
        }
    }
    aux32
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

#[cfg(test)]
mod tests {
    #[test]
    fn round_half_even_matches_the_library_everywhere_it_is_used() {
        let mut rng = crate::rng::SplitMix64::new(11);
        let mut edge: Vec<f32> = vec![0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 127.5, -128.5];
        edge.extend([
            4_194_303.5,
            -4_194_303.5,
            4_194_304.5,
            8_388_609.0,
            1e30,
            -1e30,
        ]);
        edge.extend((0..100_000).map(|_| rng.next_signed() * 200.0));
        edge.extend((0..10_000).map(|i| i as f32 * 0.5 - 2500.0));
        for x in edge {
            // Equal as numbers (a negative value rounding to zero may give +0 for -0).
            assert_eq!(super::round_half_even(x), x.round_ties_even(), "{x}");
        }
        assert!(super::round_half_even(f32::NAN).is_nan());
        assert_eq!(super::round_half_even(f32::INFINITY), f32::INFINITY);
    }

    use super::*;
    use crate::quant::{dot_f32, quantize_act, vec_dot, ActType, GgmlType, QuantizedAct};
    use proptest::prelude::*;

    /// xorshift32: small, deterministic, and easy to mirror in C (the llama.cpp golden test).
    struct Rng(u32);
    impl Rng {
        fn next(&mut self) -> u32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 17;
            self.0 ^= self.0 << 5;
            self.0
        }
        /// Uniform in [-1, 1), exactly representable (24 random bits).
        fn uni(&mut self) -> f32 {
            (self.next() >> 8) as f32 / 16777216.0 * 2.0 - 1.0
        }
        fn byte(&mut self) -> u8 {
            (self.next() >> 24) as u8
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.byte()).collect()
        }
    }

    fn put_f16(b: &mut [u8], off: usize, v: f32) {
        b[off..off + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
    }

    fn dequant(ty: GgmlType, src: &[u8]) -> Vec<f32> {
        let mut out = vec![0f32; src.len() / ty.block_bytes() * QK_K];
        crate::quant::dequantize_row(ty, src, &mut out);
        out
    }

    // ---- hand-built blocks -------------------------------------------------------------------

    /// 12 packed Q4_K/Q5_K scale bytes and their decoding worked out by hand:
    /// j < 4: sc = q[j] & 63, m = q[j+4] & 63;
    /// j = 4: sc = (q[8] & 15) | (q[0] >> 6) << 4 = 1 | 16 = 17, m = (q[8] >> 4) | (q[4] >> 6) << 4 = 2;
    /// j = 5: sc = 3 | (q[1] >> 6) << 4 = 3, m = 4 | (q[5] >> 6) << 4 = 20;
    /// j = 6: sc = 5 | (q[2] >> 6) << 4 = 53, m = 6 | (q[6] >> 6) << 4 = 6;
    /// j = 7: sc = 7 | (q[3] >> 6) << 4 = 7, m = 8 | (q[7] >> 6) << 4 = 40.
    const K4_PACKED: [u8; 12] = [
        0x41, 0x02, 0xC3, 0x04, 0x05, 0x46, 0x07, 0x88, 0x21, 0x43, 0x65, 0x87,
    ];
    const K4_SC: [u8; 8] = [1, 2, 3, 4, 17, 3, 53, 7];
    const K4_M: [u8; 8] = [5, 6, 7, 8, 2, 20, 6, 40];

    #[test]
    fn k4_scale_packing_by_hand() {
        for j in 0..8 {
            assert_eq!(
                scale_min_k4(j, &K4_PACKED),
                (K4_SC[j], K4_M[j]),
                "sub-block {j}"
            );
        }
    }

    #[test]
    fn q4_k_hand_block() {
        let mut rng = Rng(7);
        let mut b = vec![0u8; Q4_K_BYTES];
        put_f16(&mut b, 0, 0.5);
        put_f16(&mut b, 2, 0.25);
        b[4..16].copy_from_slice(&K4_PACKED);
        let qs = rng.bytes(128);
        b[16..].copy_from_slice(&qs);
        b[16] = 0x9C; // weight 0: low nibble 12 (sub-block 0); weight 32: high nibble 9 (sub-block 1)
        let y = dequant(GgmlType::Q4_K, &b);
        assert_eq!(y[0], 0.5 * 1.0 * 12.0 - 0.25 * 5.0);
        assert_eq!(y[32], 0.5 * 2.0 * 9.0 - 0.25 * 6.0);
        let qs = &b[16..];
        for (w, &v) in y.iter().enumerate() {
            let (g, hi, l) = (w / 64, (w / 32) % 2 == 1, w % 32);
            let byte = qs[32 * g + l];
            let q = if hi { byte >> 4 } else { byte & 15 } as f32;
            let s = w / 32;
            assert_eq!(
                v,
                0.5 * K4_SC[s] as f32 * q - 0.25 * K4_M[s] as f32,
                "weight {w}"
            );
        }
        // Sub-blocks 4..8 use the 6-bit packing: weight 6*32 has scale 53, min 6.
        let byte = qs[32 * 3];
        assert_eq!(y[192], 0.5 * 53.0 * (byte & 15) as f32 - 0.25 * 6.0);
    }

    #[test]
    fn q5_k_hand_block() {
        let mut rng = Rng(11);
        let mut b = vec![0u8; Q5_K_BYTES];
        put_f16(&mut b, 0, 0.5);
        put_f16(&mut b, 2, 0.25);
        b[4..16].copy_from_slice(&K4_PACKED);
        let rest = rng.bytes(160);
        b[16..].copy_from_slice(&rest);
        b[16] = 0b0000_0010; // qh[0]: weight 0 no high bit, weight 32 high bit
        b[48] = 0x9C;
        let y = dequant(GgmlType::Q5_K, &b);
        assert_eq!(y[0], 0.5 * 1.0 * 12.0 - 0.25 * 5.0);
        assert_eq!(y[32], 0.5 * 2.0 * (9.0 + 16.0) - 0.25 * 6.0);
        let (qh, qs) = (&b[16..48], &b[48..]);
        for (w, &v) in y.iter().enumerate() {
            let (g, hi, l) = (w / 64, (w / 32) % 2 == 1, w % 32);
            let byte = qs[32 * g + l];
            let low = if hi { byte >> 4 } else { byte & 15 };
            let q = low as f32
                + if qh[l] & (1 << (w / 32)) != 0 {
                    16.0
                } else {
                    0.0
                };
            let s = w / 32;
            assert_eq!(
                v,
                0.5 * K4_SC[s] as f32 * q - 0.25 * K4_M[s] as f32,
                "weight {w}"
            );
        }
    }

    #[test]
    fn q2_k_hand_block() {
        let mut rng = Rng(3);
        let mut b = rng.bytes(Q2_K_BYTES);
        put_f16(&mut b, 80, 0.5);
        put_f16(&mut b, 82, 0.125);
        b[0] = 0x3A; // sub-block 0: scale 10, min 3
        b[1] = 0x07; // sub-block 1: scale 7, min 0
        b[16] = 0b11_10_01_00; // qs[0]: weights 0, 32, 64, 96 have q 0, 1, 2, 3
        let y = dequant(GgmlType::Q2_K, &b);
        assert_eq!(y[0], 0.5 * 10.0 * 0.0 - 0.125 * 3.0);
        let s2 = b[2]; // weight 32 is in sub-block 2
        assert_eq!(
            y[32],
            0.5 * (s2 & 15) as f32 * 1.0 - 0.125 * (s2 >> 4) as f32
        );
        let s6 = b[6];
        assert_eq!(
            y[96],
            0.5 * (s6 & 15) as f32 * 3.0 - 0.125 * (s6 >> 4) as f32
        );
        let qs = &b[16..80];
        for (w, &v) in y.iter().enumerate() {
            let byte = qs[(w / 128) * 32 + w % 32];
            let q = (byte >> (2 * ((w % 128) / 32))) & 3;
            let sc = b[w / 16];
            let expect = 0.5 * (sc & 15) as f32 * q as f32 - 0.125 * (sc >> 4) as f32;
            assert_eq!(v, expect, "weight {w}");
        }
    }

    #[test]
    fn q3_k_hand_block() {
        // Scales worked out by hand from the 12 bytes (6-bit value, then minus 32):
        // j 0..4: low = s[j] & 15, high = s[8+j] & 3 -> 0, 50, 4, 54
        // j 4..8: low = s[j] & 15, high = (s[4+j] >> 2) & 3 -> 24, 42, 12, 62
        // j 8..12: low = s[j-8] >> 4, high = (s[j] >> 4) & 3 -> 33, 19, 5, 55
        // j 12..16: low = s[j-8] >> 4, high = s[j-4] >> 6 -> 57, 11, 13, 63
        let packed = [
            0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0xE4, 0x1B, 0x00, 0xFF,
        ];
        let sc: [i32; 16] = [
            -32, 18, -28, 22, -8, 10, -20, 30, 1, -13, -27, 23, 25, -21, -19, 31,
        ];
        assert_eq!(q3_scales(&packed).map(i32::from), sc);

        let mut rng = Rng(5);
        let mut b = rng.bytes(Q3_K_BYTES);
        b[96..108].copy_from_slice(&packed);
        put_f16(&mut b, 108, 0.25);
        b[0] = 0b0000_0010; // hmask[0]: weight 0 high bit clear (-4), weight 32 set
        b[32] = 0b00_00_11_01; // qs[0]: weight 0 low bits 1, weight 32 low bits 3
        let y = dequant(GgmlType::Q3_K, &b);
        assert_eq!(y[0], 0.25 * -32.0 * (1.0 - 4.0));
        assert_eq!(y[32], 0.25 * -28.0 * 3.0);
        let (hm, qs) = (&b[0..32], &b[32..96]);
        for (w, &v) in y.iter().enumerate() {
            let low = (qs[(w / 128) * 32 + w % 32] >> (2 * ((w % 128) / 32))) & 3;
            let q = low as i32
                - if hm[w % 32] & (1 << (w / 32)) != 0 {
                    0
                } else {
                    4
                };
            assert_eq!(v, 0.25 * sc[w / 16] as f32 * q as f32, "weight {w}");
        }
    }

    #[test]
    fn q6_k_hand_block() {
        let mut rng = Rng(9);
        let mut b = rng.bytes(Q6_K_BYTES);
        put_f16(&mut b, 208, 0.5);
        b[192] = (-3i8) as u8; // sub-block 0 scale
        b[194] = 5; // sub-block 2 (weights 32..48)
        b[0] = 0x7A; // ql[0]: weight 0 low nibble 10, weight 64 high nibble 7
        b[32] = 0x0F; // ql[32]: weight 32 low nibble 15
        b[128] = 0b00_01_10_11; // qh[0]: weight 0 top 3, weight 32 top 2, weight 64 top 1, weight 96 top 0
        let y = dequant(GgmlType::Q6_K, &b);
        assert_eq!(y[0], 0.5 * -3.0 * ((10 | 3 << 4) - 32) as f32);
        assert_eq!(y[32], 0.5 * 5.0 * ((15 | 2 << 4) - 32) as f32);
        let s4 = b[196] as i8 as f32;
        assert_eq!(y[64], 0.5 * s4 * ((7 | 1 << 4) - 32) as f32);
        let (ql, qh) = (&b[0..128], &b[128..192]);
        for (w, &v) in y.iter().enumerate() {
            let (h, k, l) = (w / 128, (w % 128) / 32, w % 32);
            let byte = ql[64 * h + 32 * (k % 2) + l];
            let low = if k < 2 { byte & 15 } else { byte >> 4 };
            let q = (low | ((qh[32 * h + l] >> (2 * k)) & 3) << 4) as i32 - 32;
            let expect = 0.5 * (b[192 + w / 16] as i8) as f32 * q as f32;
            assert_eq!(v, expect, "weight {w}");
        }
    }

    // ---- dot products on random blocks -------------------------------------------------------

    /// A random row of `nb` blocks of `ty` with moderate, finite f16 scales.
    fn random_row(ty: GgmlType, nb: usize, rng: &mut Rng) -> Vec<u8> {
        let bb = ty.block_bytes();
        let mut row = rng.bytes(nb * bb);
        for b in row.chunks_exact_mut(bb) {
            let d = 0.001 + 0.01 * (rng.uni() + 1.0);
            let dmin = 0.001 + 0.01 * (rng.uni() + 1.0);
            match ty {
                GgmlType::Q2_K => {
                    put_f16(b, 80, d);
                    put_f16(b, 82, dmin);
                }
                GgmlType::Q3_K => put_f16(b, 108, d),
                GgmlType::Q4_K | GgmlType::Q5_K => {
                    put_f16(b, 0, d);
                    put_f16(b, 2, dmin);
                }
                GgmlType::Q6_K => put_f16(b, 208, d),
                _ => unreachable!(),
            }
        }
        row
    }

    const K_TYPES: [GgmlType; 5] = [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ];

    #[test]
    fn vec_dot_matches_dequantized_dot() {
        let mut rng = Rng(0xC0FFEE);
        for ty in K_TYPES {
            for nb in [1, 3] {
                let w = random_row(ty, nb, &mut rng);
                let x: Vec<f32> = (0..nb * QK_K)
                    .map(|i| rng.uni() * if i % 97 == 0 { 4.0 } else { 1.0 })
                    .collect();
                let wf = dequant(ty, &w);
                let act = quantize_act(ActType::Q8_K, &x);
                let got = vec_dot(ty, &w, &act);

                // 1. Against the f32 reference: the only approximation is the activation's
                // rounding, |x - d*q| <= |d|/2 = amax/254 per block, so the error is at most
                // sum over blocks of amax_b/254 * sum_b |w|, plus f32 summation noise.
                let reference = dot_f32(ty, &w, &x);
                let mut bound = 0f64;
                let mut mag = 0f64;
                for (wb, xb) in wf.chunks(QK_K).zip(x.chunks(QK_K)) {
                    let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
                    bound += amax / 254.0 * wb.iter().map(|v| v.abs() as f64).sum::<f64>();
                    mag += wb
                        .iter()
                        .zip(xb)
                        .map(|(a, b)| (a * b).abs() as f64)
                        .sum::<f64>();
                }
                let tol = bound * 1.001 + 1e-5 * mag;
                let err = (got as f64 - reference as f64).abs();
                assert!(
                    err <= tol,
                    "{ty} nb={nb}: vec_dot {got} vs f32 {reference}, err {err} > {tol}"
                );

                // 2. Against the dequantized activation: only f32 rounding remains.
                let QuantizedAct::Q8_K(blocks) = &act else {
                    panic!("not Q8_K")
                };
                let mut exact = 0f64;
                let mut mag_q = 0f64;
                for (wb, ab) in wf.chunks(QK_K).zip(blocks) {
                    for (&wv, &q) in wb.iter().zip(&ab.qs) {
                        let xv = ab.d as f64 * q as f64;
                        exact += wv as f64 * xv;
                        mag_q += (wv as f64 * xv).abs();
                    }
                }
                let err = (got as f64 - exact).abs();
                assert!(
                    err <= 1e-5 * mag_q + 1e-6,
                    "{ty} nb={nb}: vec_dot {got} vs exact {exact}, err {err}"
                );
            }
        }
    }

    #[test]
    fn vec_dot_of_zero_activation_is_zero() {
        let mut rng = Rng(1);
        let x = vec![0f32; 2 * QK_K];
        let act = quantize_act(ActType::Q8_K, &x);
        for ty in K_TYPES {
            let w = random_row(ty, 2, &mut rng);
            assert_eq!(vec_dot(ty, &w, &act), 0.0, "{ty}");
        }
    }

    // ---- Q8_K activations --------------------------------------------------------------------

    #[test]
    fn q8_k_blocks() {
        let mut rng = Rng(42);
        let mut x: Vec<f32> = (0..3 * QK_K).map(|_| rng.uni() * 3.0).collect();
        x[10] = -7.5; // block 0's extreme is negative
        x[QK_K + 200] = 9.0; // block 1's is positive
        x[2 * QK_K..].fill(0.0);
        let a = quantize_act_q8_k(&x);
        assert_eq!(a.len(), 3);
        // The extreme always lands on -127 (iscale = -127 / max), so d takes the opposite sign.
        assert_eq!(a[0].qs[10], -127);
        assert_eq!(a[0].d, 1.0 / (-127.0 / -7.5));
        assert!(a[0].d > 0.0);
        assert_eq!(a[1].qs[200], -127);
        assert!(a[1].d < 0.0);
        for (blk, xb) in a.iter().zip(x.chunks(QK_K)) {
            for (j, qs) in blk.qs.chunks(16).enumerate() {
                let s: i32 = qs.iter().map(|&q| q as i32).sum();
                assert_eq!(blk.bsums[j] as i32, s, "bsum {j}");
            }
            for (&q, &v) in blk.qs.iter().zip(xb) {
                assert!((blk.d * q as f32 - v).abs() <= blk.d.abs() * 0.5001 + 1e-7);
            }
        }
        assert_eq!(
            a[2],
            BlockQ8K {
                d: 0.0,
                qs: [0; QK_K],
                bsums: [0; 16],
                qs_pairs: [0; QK_K],
            }
        );
    }

    // ---- weight quantization ----------------------------------------------------------------

    fn rms(v: impl Iterator<Item = f32>) -> f64 {
        let (s, n) = v.fold((0f64, 0usize), |(s, n), x| (s + (x as f64).powi(2), n + 1));
        (s / n.max(1) as f64).sqrt()
    }

    fn round_trip_rel_rms(ty: GgmlType, x: &[f32]) -> f64 {
        let mut q = Vec::new();
        crate::quant::quantize_row(ty, x, &mut q).unwrap();
        assert_eq!(q.len(), ty.row_bytes(x.len()).unwrap());
        let y = dequant(ty, &q);
        assert!(y.iter().all(|v| v.is_finite()));
        rms(x.iter().zip(&y).map(|(a, b)| a - b)) / rms(x.iter().copied())
    }

    #[test]
    fn quantize_round_trip_error() {
        let mut rng = Rng(2024);
        // Roughly Gaussian weights (sum of four uniforms), plus a uniform row.
        let gauss: Vec<f32> = (0..8 * QK_K)
            .map(|_| (rng.uni() + rng.uni() + rng.uni() + rng.uni()) * 0.05)
            .collect();
        let unif: Vec<f32> = (0..4 * QK_K).map(|_| rng.uni()).collect();
        for x in [&gauss, &unif] {
            let e4 = round_trip_rel_rms(GgmlType::Q4_K, x);
            let e6 = round_trip_rel_rms(GgmlType::Q6_K, x);
            assert!(e4 < 0.08, "Q4_K relative RMS error {e4}");
            assert!(e6 < 0.02, "Q6_K relative RMS error {e6}");
        }
    }

    #[test]
    fn quantize_zeros_and_constants() {
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let mut q = Vec::new();
            crate::quant::quantize_row(ty, &[0.0; 2 * QK_K], &mut q).unwrap();
            assert_eq!(q.len(), 2 * ty.block_bytes());
            assert!(dequant(ty, &q).iter().all(|&v| v == 0.0), "{ty} zeros");
        }
        let mut q = Vec::new();
        quantize_q6_k(&[0.0; QK_K], &mut q);
        assert!(q.iter().all(|&b| b == 0));
        // A constant negative block is carried entirely by Q4_K's min; a positive one by scale.
        for c in [-0.75f32, 0.3] {
            let mut q = Vec::new();
            quantize_q4_k(&[c; QK_K], &mut q);
            for v in dequant(GgmlType::Q4_K, &q) {
                assert!((v - c).abs() <= c.abs() * 0.01, "Q4_K const {c}: got {v}");
            }
        }
    }

    /// Bit-exactness against llama.cpp: the input below was quantized by llama.cpp's own
    /// `quantize_row_q4_K_ref`, `quantize_row_q6_K_ref` and `quantize_row_q8_K_ref`
    /// (ggml-quants.c, compiled for baseline x86-64 as ggml-base is) from the same xorshift
    /// stream, and the FNV-1a 64 hashes of the output bytes recorded here.
    #[test]
    fn matches_llama_cpp_reference_quantizers() {
        let mut rng = Rng(0x12345678);
        let mut x = vec![0f32; 8 * QK_K];
        for (b, xb) in x.chunks_mut(QK_K).enumerate() {
            for (i, v) in xb.iter_mut().enumerate() {
                *v = match b {
                    0 => rng.uni(),
                    1 => {
                        let u = rng.uni() * 0.01;
                        if i % 37 == 0 {
                            u * 50.0
                        } else {
                            u
                        }
                    }
                    2 => rng.uni().abs() + 0.5,
                    3 => 0.0,
                    4 => -0.75,
                    5 => {
                        // C evaluates the four calls left to right here too.
                        let (a, b2, c, d) = (rng.uni(), rng.uni(), rng.uni(), rng.uni());
                        (a + b2 + c + d) * 3.0
                    }
                    6 => {
                        if i == 77 {
                            100.0
                        } else {
                            rng.uni() * 1e-3
                        }
                    }
                    _ => {
                        if i < 128 {
                            rng.uni() * 1e-6
                        } else {
                            rng.uni() * 2.0
                        }
                    }
                };
            }
        }
        fn fnv(bytes: &[u8], mut h: u64) -> u64 {
            for &b in bytes {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
            h
        }
        const H0: u64 = 0xcbf29ce484222325;
        let mut q4 = Vec::new();
        quantize_q4_k(&x, &mut q4);
        let mut q6 = Vec::new();
        quantize_q6_k(&x, &mut q6);
        let mut h8 = H0;
        for blk in quantize_act_q8_k(&x) {
            h8 = fnv(&blk.d.to_le_bytes(), h8);
            h8 = fnv(&blk.qs.map(|q| q as u8), h8);
            for s in blk.bsums {
                h8 = fnv(&s.to_le_bytes(), h8);
            }
        }
        assert_eq!(
            format!("{:016x}", fnv(&q4, H0)),
            "757ffd99b1dfef5b",
            "Q4_K bytes differ from llama.cpp"
        );
        assert_eq!(
            format!("{:016x}", fnv(&q6, H0)),
            "5ef5591086fab67a",
            "Q6_K bytes differ from llama.cpp"
        );
        assert_eq!(
            format!("{h8:016x}"),
            "549293ce8d4aa310",
            "Q8_K blocks differ from llama.cpp"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Round trip through Q4_K and Q6_K stays within a few percent of the signal on any
        /// vector of moderate values, at any overall scale.
        #[test]
        fn prop_round_trip_bounded(
            v in proptest::collection::vec(-1.0f32..1.0, QK_K..=QK_K),
            scale_exp in -8i32..8,
        ) {
            let s = 2f32.powi(scale_exp);
            let x: Vec<f32> = v.iter().map(|a| a * s).collect();
            prop_assume!(rms(x.iter().copied()) > 0.0);
            let e4 = round_trip_rel_rms(GgmlType::Q4_K, &x);
            let e6 = round_trip_rel_rms(GgmlType::Q6_K, &x);
            prop_assert!(e4 < 0.1, "Q4_K relative RMS error {}", e4);
            prop_assert!(e6 < 0.03, "Q6_K relative RMS error {}", e6);
        }

        /// Q8_K: bsums are the sums of qs and each value is within half a step.
        #[test]
        fn prop_q8_k_bsums(v in proptest::collection::vec(-100.0f32..100.0, QK_K..=QK_K)) {
            let blk = quantize_act_q8_k(&v)[0];
            for (j, qs) in blk.qs.chunks(16).enumerate() {
                prop_assert_eq!(blk.bsums[j] as i32, qs.iter().map(|&q| q as i32).sum::<i32>());
            }
            for (&q, &x) in blk.qs.iter().zip(&v) {
                prop_assert!((blk.d * q as f32 - x).abs() <= blk.d.abs() * 0.5001 + 1e-6);
            }
        }
    }
}
