//! Random weights, written directly in their block format. Quantizing random f32 weights with
//! llama.cpp's iterative K-quant search would take minutes for a 1.5B model; drawing the
//! quantized fields (scales, mins, packed integers) at random gives valid blocks of the same
//! size, layout and value range in the time it takes to generate random bytes. The scales are
//! chosen so every weight lies in `[-amax, amax]` with a mean near zero (checked in tests by
//! dequantizing), which keeps activations of a many-layer random model finite.

use half::{bf16, f16};

use crate::quant::GgmlType;
use crate::rng::SplitMix64;

fn put_f16(out: &mut [u8], v: f32) {
    out.copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// Fill `out` (whole blocks of `ty`) with random weights bounded by `amax`.
pub fn fill(ty: GgmlType, amax: f32, rng: &mut SplitMix64, out: &mut [u8]) {
    let bb = ty.block_bytes();
    debug_assert_eq!(out.len() % bb, 0);
    match ty {
        GgmlType::F32 => {
            for c in out.chunks_exact_mut(4) {
                c.copy_from_slice(&(amax * rng.next_signed()).to_le_bytes());
            }
        }
        GgmlType::F16 => {
            for c in out.chunks_exact_mut(2) {
                put_f16(c, amax * rng.next_signed());
            }
        }
        GgmlType::BF16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&bf16::from_f32(amax * rng.next_signed()).to_le_bytes());
            }
        }
        _ => {
            for b in out.chunks_exact_mut(bb) {
                block(ty, amax, rng, b);
            }
        }
    }
}

/// One quantized block. Layouts are ggml's `block_*` structs.
fn block(ty: GgmlType, amax: f32, rng: &mut SplitMix64, b: &mut [u8]) {
    match ty {
        // d, qs[32] (i8): w = d * q
        GgmlType::Q8_0 => {
            put_f16(&mut b[0..2], amax / 127.0);
            for q in &mut b[2..34] {
                *q = (rng.range(0, 254) as i32 - 127) as i8 as u8;
            }
        }
        // d, qs[16] (nibbles): w = d * (q - 8)
        GgmlType::Q4_0 => {
            put_f16(&mut b[0..2], amax / 8.0);
            rng.fill(&mut b[2..18]);
        }
        // d, m, qs[16] (nibbles): w = d * q + m; m = -7.5 d centres q's 0..15
        GgmlType::Q4_1 => {
            let d = amax / 7.5;
            put_f16(&mut b[0..2], d);
            put_f16(&mut b[2..4], -7.5 * d);
            rng.fill(&mut b[4..20]);
        }
        // d, m, qh[4], qs[16]: w = d * q + m, q 5 bits; m = -15.5 d centres q's 0..31
        GgmlType::Q5_1 => {
            let d = amax / 15.5;
            put_f16(&mut b[0..2], d);
            put_f16(&mut b[2..4], -15.5 * d);
            rng.fill(&mut b[4..24]);
        }
        // d, qh[4], qs[16]: w = d * (q - 16), q 5 bits
        GgmlType::Q5_0 => {
            put_f16(&mut b[0..2], amax / 16.0);
            rng.fill(&mut b[2..22]);
        }
        // Q4_K: d, dmin, scales[12] (6-bit sc and m per 32), qs[128]: w = d*sc*q - dmin*m, q 4
        // bits; Q5_K the same with qh[32] for a fifth bit. With m = sc/2 (rounded down) and
        // dmin = 2h d (h = 7.5 or 15.5, half the top level), w ≈ d*sc*(q - h): centred,
        // |w| <= 64h d.
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let h = if ty == GgmlType::Q4_K { 7.5 } else { 15.5 };
            let d = amax / (64.0 * h);
            put_f16(&mut b[0..2], d);
            put_f16(&mut b[2..4], 2.0 * h * d);
            let mut sc = [0u8; 8];
            let mut m = [0u8; 8];
            for j in 0..8 {
                sc[j] = rng.range(32, 63) as u8;
                m[j] = sc[j] / 2;
            }
            pack_k4_scales(&sc, &m, &mut b[4..16]);
            rng.fill(&mut b[16..]);
        }
        // scales[16] (4-bit sc, 4-bit m), qs[64] (2 bits), d, dmin: w = d*sc*q - dmin*m.
        // With dmin = d and m = 3sc/2 (rounded down), w ≈ d*sc*(q - 1.5): centred, |w| <= 15.5 d.
        GgmlType::Q2_K => {
            for s in &mut b[0..16] {
                let sc = rng.range(6, 10) as u8;
                *s = sc | ((3 * sc / 2) << 4);
            }
            rng.fill(&mut b[16..80]);
            let d = amax / 15.5;
            put_f16(&mut b[80..82], d);
            put_f16(&mut b[82..84], d);
        }
        // hmask[32], qs[64], scales[12] (6-bit, stored + 32), d: w = d * sc * q, q in -4..3.
        // One scale per block, its sign drawn, so the blocks' -0.5 mean level cancels out.
        GgmlType::Q3_K => {
            rng.fill(&mut b[0..96]);
            let mag = rng.range(8, 12) as u8;
            let s = if rng.range(0, 1) == 0 {
                32 - mag
            } else {
                32 + mag
            };
            let (lo, hi) = (s & 0xF, s >> 4);
            b[96..104].fill(lo | (lo << 4));
            b[104..108].fill(hi * 0x55);
            put_f16(&mut b[108..110], amax / 48.0);
        }
        // ql[128], qh[64], scales[16] (i8), d: w = d * sc * (q - 32), q 6 bits.
        GgmlType::Q6_K => {
            rng.fill(&mut b[0..192]);
            for s in &mut b[192..208] {
                *s = rng.range(64, 127) as u8;
            }
            put_f16(&mut b[208..210], amax / (127.0 * 32.0));
        }
        _ => unreachable!("synth does not draw {ty} blocks"),
    }
}

/// The inverse of ggml's `get_scale_min_k4`: eight 6-bit scales and mins into 12 bytes.
pub fn pack_k4_scales(sc: &[u8; 8], m: &[u8; 8], out: &mut [u8]) {
    for j in 0..4 {
        out[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        out[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        out[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4);
    }
}

/// Block types `fill` can draw: every type a synthetic mix places.
pub const DRAWABLE: [GgmlType; 13] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dequantize_row;

    #[test]
    fn random_blocks_stay_in_range_and_centred() {
        for ty in DRAWABLE {
            let n = 256 * 16;
            let mut bytes = vec![0u8; ty.row_bytes(n).unwrap()];
            let mut rng = SplitMix64::new(7);
            fill(ty, 0.1, &mut rng, &mut bytes);
            let mut w = vec![0f32; n];
            dequantize_row(ty, &bytes, &mut w);
            let max = w.iter().fold(0f32, |a, &x| a.max(x.abs()));
            let mean = w.iter().sum::<f32>() / n as f32;
            let rms = (w.iter().map(|x| x * x).sum::<f32>() / n as f32).sqrt();
            assert!(w.iter().all(|x| x.is_finite()), "{ty}");
            assert!(max <= 0.1 * 1.02, "{ty}: max {max}");
            assert!(mean.abs() < 0.01, "{ty}: mean {mean}");
            assert!(rms > 0.02, "{ty}: rms {rms} (weights should not collapse)");
        }
    }

    #[test]
    fn k4_scale_packing_round_trips_through_the_dequantizer() {
        // a Q4_K block with known scales/mins and all-ones nibbles: w = d*sc*1 - dmin*m
        let sc = [1, 2, 3, 4, 40, 50, 60, 63];
        let m = [5, 6, 7, 8, 17, 33, 48, 62];
        let mut b = vec![0u8; 144];
        put_f16(&mut b[0..2], 1.0);
        put_f16(&mut b[2..4], 0.5);
        pack_k4_scales(&sc, &m, &mut b[4..16]);
        b[16..].fill(0x11);
        let mut w = vec![0f32; 256];
        dequantize_row(GgmlType::Q4_K, &b, &mut w);
        for j in 0..8 {
            let want = sc[j] as f32 - 0.5 * m[j] as f32;
            assert_eq!(w[j * 32], want, "sub-block {j}");
        }
    }

    #[test]
    fn q3_k_blocks_carry_one_scale_for_all_sixteen_sub_blocks() {
        // With every level at +3 (high bit set, low bits 3) each weight is d * (s - 32) * 3:
        // the same in all sixteen sub-blocks only if the scale's 12-byte packing is right.
        let mut rng = SplitMix64::new(3);
        for _ in 0..32 {
            let mut b = vec![0u8; 110];
            block(GgmlType::Q3_K, 0.1, &mut rng, &mut b);
            b[0..96].fill(0xFF);
            let mut w = vec![0f32; 256];
            dequantize_row(GgmlType::Q3_K, &b, &mut w);
            let mag = (w[0] / (3.0 * f16::from_le_bytes([b[108], b[109]]).to_f32())).abs();
            assert!((8.0..=12.0).contains(&mag), "scale {mag}");
            assert!(w.iter().all(|&x| x == w[0]), "{:?}", &w[..32]);
        }
    }
}
