//! Unit tests of the k-quants: hand-built blocks, llama.cpp's reference quantizers, the Q8_K
//! activations, and the dot products against dequantized dots, through the row dispatch
//! (`dequantize_row`, `quantize_row`, `quantize_act`, `vec_dot`), which is why they sit above
//! this directory's files.

use super::decode::*;
use super::q8_k::*;
use super::quantize::*;
use crate::quant::blocks::{BlockQ8K, QK_K};
use crate::quant::{dot_f32, quantize_act, vec_dot, ActType, GgmlType, QuantizedAct};
use half::f16;
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
