//! Unit tests of the legacy formats: hand-built blocks, the quantizers' bytes and error bounds,
//! and the dot products against f32 dots, through the row dispatch (`dequantize_row`,
//! `quantize_act`, `vec_dot`), which is why they sit above this directory's files.

use super::dequant::*;
use super::dot::*;
use super::layout::*;
use super::quantize::*;
use crate::quant::blocks::{round_f16, BlockQ8_0, BlockQ8_1};
use crate::quant::{dot_f32, quantize_act, vec_dot, ActType, GgmlType};
use half::f16;
use proptest::prelude::*;

/// xorshift64*: a small deterministic PRNG for the random-block tests.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    fn byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }
}

fn h(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

fn dequant(ty: GgmlType, src: &[u8]) -> Vec<f32> {
    let n = src.len() / ty.block_bytes() * QK;
    let mut out = vec![0f32; n];
    crate::quant::dequantize_row(ty, src, &mut out);
    out
}

/// Offset of the f16 `m` field, for the types that have one.
fn min_offset(ty: GgmlType) -> Option<usize> {
    matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1).then_some(2)
}

/// A random row of `nb` blocks of `ty`: random quant bytes, finite scales.
fn random_row(rng: &mut Rng, ty: GgmlType, nb: usize) -> Vec<u8> {
    let bytes = ty.block_bytes();
    let mut row = Vec::with_capacity(nb * bytes);
    for _ in 0..nb {
        let start = row.len();
        row.extend((0..bytes).map(|_| rng.byte()));
        let d = rng.uniform(-0.1, 0.1);
        row[start..start + 2].copy_from_slice(&h(d));
        if let Some(m) = min_offset(ty) {
            let mv = rng.uniform(-0.5, 0.5);
            row[start + m..start + m + 2].copy_from_slice(&h(mv));
        }
    }
    row
}

// --- dequantization of hand-built blocks -----------------------------------------------

#[test]
fn dequantize_q4_0_known_block() {
    // d = 1.0 (0x3c00). qs[j] = j | (15 - j) << 4: weight j = j - 8, weight j+16 = 7 - j.
    let mut b = vec![0x00, 0x3c];
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let w = dequant(GgmlType::Q4_0, &b);
    assert_eq!(w[0], -8.0);
    assert_eq!(w[15], 7.0);
    assert_eq!(w[16], 7.0);
    assert_eq!(w[31], -8.0);
    for j in 0..16 {
        assert_eq!(w[j], j as f32 - 8.0);
        assert_eq!(w[j + 16], 7.0 - j as f32);
    }
    // d = -0.5 (0xb800), all bytes 0x9A: low nibble 10 -> -1.0, high nibble 9 -> -0.5.
    let mut b = vec![0x00, 0xb8];
    b.extend([0x9A; 16]);
    let w = dequant(GgmlType::Q4_0, &b);
    assert_eq!(&w[..16], &[-1.0; 16]);
    assert_eq!(&w[16..], &[-0.5; 16]);
}

#[test]
fn dequantize_q4_1_known_block() {
    // d = 0.5 (0x3800), m = -1.0 (0xbc00); qs[j] = j | (15 - j) << 4.
    let mut b = vec![0x00, 0x38, 0x00, 0xbc];
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let w = dequant(GgmlType::Q4_1, &b);
    assert_eq!(w[0], -1.0);
    assert_eq!(w[15], 6.5);
    assert_eq!(w[16], 6.5);
    for j in 0..16 {
        assert_eq!(w[j], 0.5 * j as f32 - 1.0);
        assert_eq!(w[j + 16], 0.5 * (15 - j) as f32 - 1.0);
    }
}

#[test]
fn dequantize_q5_0_known_block() {
    // d = 2.0 (0x4000); qs all zero; qh = bit 16 only: weight 16 gets the 5th bit (the
    // high nibble's bit is bit j+16 of qh, not bit j+4 or a byte-wise layout).
    let mut b = vec![0x00, 0x40];
    b.extend(0x0001_0000u32.to_le_bytes());
    b.extend([0u8; 16]);
    let w = dequant(GgmlType::Q5_0, &b);
    for (j, &v) in w.iter().enumerate() {
        assert_eq!(v, if j == 16 { 0.0 } else { -32.0 }, "weight {j}");
    }
    // qh = 0x8000_0001 (weights 0 and 31 high), qs[j] = 0xF0 | j: weight j = (j | hi) - 16,
    // weight j+16 = (15 | hi) - 16; d = 1.
    let mut b = vec![0x00, 0x3c];
    b.extend(0x8000_0001u32.to_le_bytes());
    b.extend((0..16u8).map(|j| 0xF0 | j));
    let w = dequant(GgmlType::Q5_0, &b);
    assert_eq!(w[0], 0.0); // 16 - 16
    assert_eq!(w[1], -15.0);
    assert_eq!(w[15], -1.0);
    assert_eq!(w[16], -1.0);
    assert_eq!(w[30], -1.0);
    assert_eq!(w[31], 15.0); // 31 - 16
}

#[test]
fn dequantize_q5_1_known_block() {
    // d = 0.25 (0x3400), m = 1.0 (0x3c00); qh = 0x0000_FFFF: weights 0..16 have bit 4.
    // qs[j] = j | (15 - j) << 4.
    let mut b = vec![0x00, 0x34, 0x00, 0x3c];
    b.extend(0x0000_FFFFu32.to_le_bytes());
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let w = dequant(GgmlType::Q5_1, &b);
    assert_eq!(w[0], 5.0); // 16 * 0.25 + 1
    assert_eq!(w[15], 8.75); // 31 * 0.25 + 1
    assert_eq!(w[16], 4.75); // 15 * 0.25 + 1
    assert_eq!(w[31], 1.0); // 0 * 0.25 + 1
    for j in 0..16 {
        assert_eq!(w[j], (16 + j) as f32 * 0.25 + 1.0);
        assert_eq!(w[j + 16], (15 - j) as f32 * 0.25 + 1.0);
    }
}

#[test]
fn dequantize_q8_0_known_block() {
    // d = 0.25 (0x3400); qs = -128, -127, ..., -97 ; then a second block with d = -2.
    let mut b = vec![0x00, 0x34];
    b.extend((0..32).map(|j: i32| (j - 128) as i8 as u8));
    b.extend([0x00, 0xc0]);
    b.extend([0x01, 0xFF, 0x7F, 0x80]);
    b.extend([0u8; 28]);
    let w = dequant(GgmlType::Q8_0, &b);
    assert_eq!(w[0], -32.0);
    assert_eq!(w[31], -24.25);
    assert_eq!(&w[32..36], &[-2.0, 2.0, -254.0, 256.0]);
    assert!(w[36..].iter().all(|&v| v == 0.0));
}

#[test]
#[should_panic]
fn dequantize_rejects_short_rows() {
    let mut out = [0f32; 32];
    dequantize_q4_0(&[0u8; 17], &mut out);
}

// --- weight quantizers ---------------------------------------------------------------

#[test]
fn quantize_q8_0_known_bytes() {
    // amax = 127 -> d = 1 exactly, id = 1: quants are roundf(x), ties away from zero.
    let mut x = [0f32; 32];
    x[..8].copy_from_slice(&[127.0, 2.5, -2.5, 0.5, -0.5, 1.5, -1.49, -126.6]);
    let mut out = Vec::new();
    quantize_q8_0(&x, &mut out);
    let mut want = vec![0x00, 0x3c];
    want.extend([127i8, 3, -3, 1, -1, 2, -1, -127].map(|q| q as u8));
    want.extend([0u8; 24]);
    assert_eq!(out, want);

    // An all-zero block: d = 0, all quants 0; appended after what is there.
    let before = out.len();
    quantize_q8_0(&[0.0; 32], &mut out);
    assert_eq!(&out[before..], &[0u8; 34]);
}

#[test]
fn quantize_q4_0_known_bytes() {
    // The largest |x| is -8 (negative), so d = -8 / -8 = 1, id = 1 and
    // q = min(15, trunc(x + 8.5)).
    let lo = [
        -8.0, 7.0, 7.5, 0.0, -0.5, 0.49, 0.5, -3.2, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -1.0, -2.0,
    ];
    let hi = [0.0; 16];
    let x: Vec<f32> = lo.iter().chain(&hi).copied().collect();
    let mut out = Vec::new();
    quantize_q4_0(&x, &mut out);
    let qlo: [u8; 16] = [0, 15, 15, 8, 8, 8, 9, 5, 9, 10, 11, 12, 13, 14, 7, 6];
    let mut want = vec![0x00, 0x3c];
    want.extend(qlo.iter().map(|&q| q | (8 << 4)));
    assert_eq!(out, want);

    // Positive max: max = 8 -> d = -1 (0xbc00), id = -1; x = 8 -> q 0, x = -8 -> 16 -> 15,
    // in the high nibbles here.
    let mut x = [0f32; 32];
    x[16] = 8.0;
    x[17] = -8.0;
    x[18] = 3.0; // -3 + 8.5 = 5.5 -> 5
    let mut out = Vec::new();
    quantize_q4_0(&x, &mut out);
    assert_eq!(&out[..2], &[0x00, 0xbc]);
    assert_eq!(out[2], 0x08);
    assert_eq!(out[3], 0xF8);
    assert_eq!(out[4], 0x58);
    assert!(out[5..].iter().all(|&b| b == 0x88));
    let w = dequant(GgmlType::Q4_0, &out);
    assert_eq!(&w[16..19], &[8.0, -7.0, 3.0]);
}

/// Asserts |dequantize(quantize_q8_0(x)) - x| <= d/2 + (f16 rounding of d) per weight.
fn check_q8_0_round_trip(x: &[f32]) {
    let mut bytes = Vec::new();
    quantize_q8_0(x, &mut bytes);
    assert_eq!(bytes.len(), x.len() / 32 * 34);
    let back = dequant(GgmlType::Q8_0, &bytes);
    for (xb, wb) in x.chunks(32).zip(back.chunks(32)) {
        let amax = abs_max(xb);
        let d = amax / 127.0;
        // rounding: d/2; f16 d: 127 * d * 2^-11 relative (+ subnormal spacing); f32 slop.
        let tol = d * 0.5 + 127.0 * (d * 2f32.powi(-11) + 2f32.powi(-25)) + amax * 1e-6;
        for (&a, &b) in xb.iter().zip(wb) {
            assert!((a - b).abs() <= tol, "x {a} -> {b}, tol {tol}");
        }
    }
}

/// Asserts |dequantize(quantize_q4_0(x)) - x| <= |d|/2 per weight (|d| at the clamped end),
/// plus the f16 rounding of d.
fn check_q4_0_round_trip(x: &[f32]) {
    let mut bytes = Vec::new();
    quantize_q4_0(x, &mut bytes);
    assert_eq!(bytes.len(), x.len() / 32 * 18);
    let back = dequant(GgmlType::Q4_0, &bytes);
    for (xb, wb) in x.chunks(32).zip(back.chunks(32)) {
        let d = abs_max(xb) / 8.0;
        let f16_err = 8.0 * (d * 2f32.powi(-11) + 2f32.powi(-25)) + d * 1e-5;
        for (&a, &b) in xb.iter().zip(wb) {
            // Values of the sign opposite to max beyond 7.5 d are clamped to q = 15 (7 d).
            let clamped = a.abs() > 7.5 * d;
            let tol = if clamped { d } else { d * 0.5 } + f16_err;
            assert!((a - b).abs() <= tol, "x {a} -> {b}, tol {tol}");
        }
    }
}

#[test]
fn quantize_round_trips_random() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for scale in [1e-3f32, 1.0, 300.0] {
        let x: Vec<f32> = (0..32 * 64).map(|_| rng.uniform(-scale, scale)).collect();
        check_q8_0_round_trip(&x);
        check_q4_0_round_trip(&x);
    }
}

// --- activation quantizers -----------------------------------------------------------

#[test]
fn act_quantizers_round_half_to_even() {
    // amax = 127 -> d = 1, id = 1: the AVX2 path rounds ties to even (2.5 -> 2, 0.5 -> 0).
    let mut x = [0f32; 32];
    x[..8].copy_from_slice(&[127.0, 2.5, -2.5, 0.5, -0.5, 1.5, -1.5, 3.5]);
    let want: [i8; 8] = [127, 2, -2, 0, 0, 2, -2, 4];
    let a0 = quantize_act_q8_0(&x);
    assert_eq!(a0.len(), 1);
    assert_eq!(a0[0].d, 1.0);
    assert_eq!(&a0[0].qs[..8], &want);
    assert!(a0[0].qs[8..].iter().all(|&q| q == 0));
    let a1 = quantize_act_q8_1(&x);
    assert_eq!(a1[0].d, 1.0);
    assert_eq!(a1[0].qs, a0[0].qs);
    assert_eq!(a1[0].s, 131.0);
    // All zero: d = 0, s = 0, no NaN.
    let z = quantize_act_q8_1(&[0.0; 64]);
    assert_eq!(z.len(), 2);
    assert!(z
        .iter()
        .all(|b| b.d == 0.0 && b.s == 0.0 && b.qs == [0; 32]));
}

#[test]
fn act_quantizers_dequantize_close_and_s_uses_f32_d() {
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let x: Vec<f32> = (0..32 * 256).map(|_| rng.uniform(-3.0, 3.0)).collect();
    let a0 = quantize_act_q8_0(&x);
    let a1 = quantize_act_q8_1(&x);
    assert_eq!(a0.len(), 256);
    let mut s_differs_from_f16_d = 0;
    for ((xb, b0), b1) in x.chunks(32).zip(&a0).zip(&a1) {
        let amax = abs_max(xb);
        let d32 = amax / 127.0;
        assert_eq!(b0.d, round_f16(d32));
        assert_eq!(b1.d, b0.d);
        assert_eq!(b1.qs, b0.qs);
        let tol = d32 * 0.5 + amax * 2f32.powi(-11) + amax * 1e-6;
        for (&v, &q) in xb.iter().zip(&b0.qs) {
            assert!(
                (v - b0.d * q as f32).abs() <= tol,
                "{v} vs {}",
                b0.d * q as f32
            );
        }
        let sum: i32 = b1.qs.iter().map(|&q| q as i32).sum();
        assert_eq!(b1.s, round_f16(d32 * sum as f32), "s is f16(f32 d * sum)");
        if round_f16(b1.d * sum as f32) != b1.s {
            s_differs_from_f16_d += 1;
        }
    }
    // The check above distinguishes the f32-d from the f16-d formula on these blocks.
    assert!(s_differs_from_f16_d > 0);
}

// --- dot products --------------------------------------------------------------------

/// Bound on |vec_dot - dot_f32| from quantizing the activations: per weight
/// |x - x_q| <= d_a/2 + amax*2^-11 (f16 d_a), plus for Q8_1 the f16 rounding of s
/// (|m| * 2 * 2^-11 * |d_a * sum q| <= |m| * amax * 32 * 2^-10), plus f32 accumulation.
fn dot_tolerance(ty: GgmlType, w: &[u8], x: &[f32]) -> f32 {
    let wf = dequant(ty, w);
    let bytes = ty.block_bytes();
    let mut tol = 0f64;
    let mut mag = 0f64;
    for (b, (wb, xb)) in wf.chunks(32).zip(x.chunks(32)).enumerate() {
        let amax = abs_max(xb) as f64;
        let wsum: f64 = wb.iter().map(|v| v.abs() as f64).sum();
        tol += wsum * (amax / 254.0 + amax * 2f64.powi(-11));
        if let Some(m) = min_offset(ty) {
            let mv = f16_at(&w[b * bytes..], m).abs() as f64;
            tol += mv * amax * 32.0 * 2f64.powi(-10);
        }
        mag += wb
            .iter()
            .zip(xb)
            .map(|(a, b)| (a * b).abs() as f64)
            .sum::<f64>();
    }
    (tol * 1.01 + mag * 1e-5 + 1e-6) as f32
}

#[test]
fn vec_dot_matches_f32_dot_on_random_blocks() {
    let mut rng = Rng(0x0BAD_5EED_0000_0001);
    for ty in LEGACY {
        for nb in [1usize, 2, 7, 32] {
            let w = random_row(&mut rng, ty, nb);
            let x: Vec<f32> = (0..nb * 32).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let want = dot_f32(ty, &w, &x);
            let act = quantize_act(ActType::for_weights(ty), &x);
            let got = vec_dot(ty, &w, &act);
            let tol = dot_tolerance(ty, &w, &x);
            assert!(
                (got - want).abs() <= tol,
                "{ty} nb {nb}: vec_dot {got} vs f32 {want}, tol {tol}"
            );
            // The bound is not loose to the point of uselessness: about 1% of sum|w||x|.
            let wf = dequant(ty, &w);
            let mag: f32 = wf.iter().zip(&x).map(|(a, b)| (a * b).abs()).sum();
            assert!(
                (got - want).abs() <= 1e-2 * mag + 1e-3,
                "{ty}: {got} vs {want}"
            );
        }
    }
}

/// With the activation already quantized, vec_dot is the dot of the dequantized weights with
/// the dequantized activation (`m * s` standing in for `m * d * sum q`), to f32 rounding.
/// This pins down the integer arithmetic far tighter than the activation-error test.
#[test]
fn vec_dot_equals_dot_of_dequantized_operands() {
    let mut rng = Rng(0x5151_7777_2222_9999);
    for ty in LEGACY {
        for _ in 0..20 {
            let nb = 1 + (rng.next_u64() % 8) as usize;
            let w = random_row(&mut rng, ty, nb);
            let x: Vec<f32> = (0..nb * 32).map(|_| rng.uniform(-2.0, 2.0)).collect();
            let act = quantize_act(ActType::for_weights(ty), &x);
            let wf = dequant(ty, &w);
            let (mut want, mut mag) = (0f64, 0f64);
            for b in 0..nb {
                let (d, s, qs) = match &act {
                    crate::quant::QuantizedAct::Q8_0(a) => (a[b].d, 0.0, a[b].qs),
                    crate::quant::QuantizedAct::Q8_1(a) => (a[b].d, a[b].s, a[b].qs),
                    _ => unreachable!(),
                };
                let m = min_offset(ty).map_or(0.0, |o| f16_at(&w[b * ty.block_bytes()..], o));
                for (wv, q) in wf[b * 32..(b + 1) * 32].iter().zip(qs) {
                    let t = (*wv - m) as f64 * (d as f64 * q as f64);
                    want += t;
                    mag += t.abs();
                }
                want += m as f64 * s as f64;
                mag += (m as f64 * s as f64).abs();
                // |m * x_q| too: `w - m` above cancels, leaving an f32 error of ulp(w).
                mag += qs
                    .iter()
                    .map(|&q| (m as f64 * d as f64 * q as f64).abs())
                    .sum::<f64>();
            }
            let got = vec_dot(ty, &w, &act) as f64;
            assert!(
                (got - want).abs() <= mag * 1e-5 + 1e-7,
                "{ty} nb {nb}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn vec_dot_known_values() {
    // Q8_0 weight block d = 0.5, qs = 1..=32; activation d = 0.25, qs = 2 everywhere:
    // sum = 2 * (32 * 33 / 2) = 1056 -> 0.5 * 0.25 * 1056 = 132.
    let mut w = vec![0x00, 0x38];
    w.extend(1..=32u8);
    let a = [BlockQ8_0::new(0.25, [2; 32])];
    assert_eq!(vec_dot_q8_0_q8_0(&w, &a), 132.0);
    // Q4_1: d = 1, m = 2, all nibbles 3 (byte 0x33); activation d = 0.5, qs = 1, s = 16:
    // (1 * 0.5) * (32 * 3) + 2 * 16 = 48 + 32 = 80.
    let mut w = vec![0x00, 0x3c, 0x00, 0x40];
    w.extend([0x33u8; 16]);
    let a = [BlockQ8_1 {
        d: 0.5,
        s: 16.0,
        qs: [1; 32],
    }];
    assert_eq!(vec_dot_q4_1_q8_1(&w, &a), 80.0);
}

#[test]
#[should_panic]
fn vec_dot_rejects_mismatched_lengths() {
    let a = quantize_act_q8_0(&[0.0; 64]);
    vec_dot_q4_0_q8_0(&[0u8; 18], &a);
}

// --- properties ----------------------------------------------------------------------

fn blocks_of(range: f32) -> impl Strategy<Value = Vec<f32>> {
    (1usize..5).prop_flat_map(move |nb| prop::collection::vec(-range..range, nb * 32))
}

proptest! {
    #[test]
    fn prop_q8_0_round_trip_error_bound(x in blocks_of(1000.0)) {
        check_q8_0_round_trip(&x);
    }

    #[test]
    fn prop_q4_0_round_trip_error_bound(x in blocks_of(1000.0)) {
        check_q4_0_round_trip(&x);
    }

    #[test]
    fn prop_act_q8_1_dequantizes_close(x in blocks_of(50.0)) {
        for (xb, b) in x.chunks(32).zip(quantize_act_q8_1(&x)) {
            let amax = abs_max(xb);
            let tol = amax / 254.0 + amax * 2f32.powi(-11) + 127.0 * 2f32.powi(-25) + amax * 1e-6;
            for (&v, &q) in xb.iter().zip(&b.qs) {
                prop_assert!((v - b.d * q as f32).abs() <= tol);
            }
            let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
            prop_assert_eq!(b.s, round_f16(amax / 127.0 * sum as f32));
        }
    }
}
