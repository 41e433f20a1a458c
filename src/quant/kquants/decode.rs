//! Reading a k-quant block one weight at a time: block sizes, the packed sub-block scales,
//! the levels in weight order, and the dots' integer core (`lane_sums_scalar`). These are the
//! references the AVX2 forms (`x86::kquant_core`) are tested against, so they import nothing
//! that dispatches.

use half::f16;

use crate::quant::blocks::QK_K;

/// Bytes of one block of each type.
pub const Q2_K_BYTES: usize = 84;
pub const Q3_K_BYTES: usize = 110;
pub const Q4_K_BYTES: usize = 144;
pub const Q5_K_BYTES: usize = 176;
pub const Q6_K_BYTES: usize = 210;

/// The little-endian f16 at `b[off..off + 2]`, as f32.
#[inline]
pub(super) fn f16_at(b: &[u8], off: usize) -> f32 {
    f16::from_le_bytes([b[off], b[off + 1]]).to_f32()
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
pub(crate) fn q3_scales(q: &[u8]) -> [i8; 16] {
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
pub(super) fn q2_levels(b: &[u8], out: &mut [i8; QK_K]) {
    let qs = &b[16..80];
    for (w, o) in out.iter_mut().enumerate() {
        let byte = qs[32 * (w / 128) + w % 32];
        *o = ((byte >> (2 * ((w % 128) / 32))) & 3) as i8;
    }
}

/// Q3_K block, decoded: signed 3-bit levels (-4..3): the 2 low bits as in Q2_K, minus 4 where the
/// `hmask[w % 32]` bit `w / 32` is clear.
#[inline]
pub(crate) fn q3_levels_scalar(b: &[u8], out: &mut [i8; QK_K]) {
    let hmask = &b[0..32];
    let qs = &b[32..96];
    for (w, o) in out.iter_mut().enumerate() {
        let low = (qs[32 * (w / 128) + w % 32] >> (2 * ((w % 128) / 32))) & 3;
        let high = (hmask[w % 32] >> (w / 32)) & 1;
        *o = low as i8 - if high != 0 { 0 } else { 4 };
    }
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
pub(super) fn k4_scales_mins(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        (sc[j], m[j]) = scale_min_k4(j, packed);
    }
    (sc, m)
}

pub(super) fn check_blocks(src_len: usize, block_bytes: usize, n: usize) {
    assert!(
        n.is_multiple_of(QK_K) && src_len == n / QK_K * block_bytes,
        "k-quant row: {src_len} bytes for {n} values"
    );
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
