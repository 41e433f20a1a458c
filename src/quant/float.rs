//! Plain float rows: F32, F16 and BF16 (little-endian), their conversion and dots.
//!
//! F16 and BF16 dots follow llama.cpp: the activation is rounded to the weight's type, then the
//! products are summed in f32.

use half::{bf16, f16};

fn words<const N: usize>(src: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    src.chunks_exact(N).map(|c| {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        a
    })
}

pub fn dequantize_f32(src: &[u8], dst: &mut [f32]) {
    for (d, w) in dst.iter_mut().zip(words::<4>(src)) {
        *d = f32::from_le_bytes(w);
    }
}

pub fn dequantize_f16(src: &[u8], dst: &mut [f32]) {
    for (d, w) in dst.iter_mut().zip(words::<2>(src)) {
        *d = f16::from_le_bytes(w).to_f32();
    }
}

pub fn dequantize_bf16(src: &[u8], dst: &mut [f32]) {
    for (d, w) in dst.iter_mut().zip(words::<2>(src)) {
        *d = bf16::from_le_bytes(w).to_f32();
    }
}

pub fn quantize_f32(src: &[f32], dst: &mut Vec<u8>) {
    dst.extend(src.iter().flat_map(|v| v.to_le_bytes()));
}

pub fn quantize_f16(src: &[f32], dst: &mut Vec<u8>) {
    dst.extend(src.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()));
}

pub fn quantize_bf16(src: &[f32], dst: &mut Vec<u8>) {
    dst.extend(src.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()));
}

/// `x` rounded to the nearest f16, kept as f32 (`round_f16_into`).
pub fn round_f16(x: &[f32]) -> Vec<f32> {
    let mut out = Vec::new();
    round_f16_into(x, &mut out);
    out
}

/// `x` rounded to the nearest f16, kept as f32, into `out` (its buffer reused). Through
/// `half`'s slice conversions (F16C eight at a time where the CPU has it, the same rounding to
/// nearest even), since a value at a time checks the CPU's features for each one; a piece at
/// a time through a buffer on the stack, so nothing is allocated. (`quantize_act_into` takes
/// `x86::float::round_f16_into` instead where the CPU has F16C: one pass, no piece buffer.)
pub fn round_f16_into(x: &[f32], out: &mut Vec<f32>) {
    use half::slice::HalfFloatSliceExt;
    const PIECE: usize = 256;
    out.clear();
    out.resize(x.len(), 0.0);
    let mut h = [f16::ZERO; PIECE];
    for (xs, os) in x.chunks(PIECE).zip(out.chunks_mut(PIECE)) {
        let h = &mut h[..xs.len()];
        h.convert_from_f32_slice(xs);
        h.convert_to_f32_slice(os);
    }
}

/// `x` rounded to the nearest bf16, kept as f32.
pub fn round_bf16(x: &[f32]) -> Vec<f32> {
    let mut out = Vec::new();
    round_bf16_into(x, &mut out);
    out
}

/// `x` rounded to the nearest bf16, kept as f32, into `out` (its buffer reused).
pub fn round_bf16_into(x: &[f32], out: &mut Vec<f32>) {
    out.clear();
    out.extend(x.iter().map(|&v| bf16::from_f32(v).to_f32()));
}

/// f32 dot with eight independent partial sums (the shape of a SIMD accumulator).
pub fn dot_lanes(a: impl Iterator<Item = f32>, x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    for (i, (w, &v)) in a.zip(x).enumerate() {
        acc[i % 8] += w * v;
    }
    acc.iter().sum()
}

pub fn dot_f32_row(w: &[u8], x: &[f32]) -> f32 {
    dot_lanes(words::<4>(w).map(f32::from_le_bytes), x)
}

pub fn dot_f16_row(w: &[u8], x: &[f32]) -> f32 {
    dot_lanes(words::<2>(w).map(|b| f16::from_le_bytes(b).to_f32()), x)
}

pub fn dot_bf16_row(w: &[u8], x: &[f32]) -> f32 {
    dot_lanes(words::<2>(w).map(|b| bf16::from_le_bytes(b).to_f32()), x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_dots() {
        let x: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.37).collect();
        let mut bytes = Vec::new();
        quantize_f32(&x, &mut bytes);
        let mut back = vec![0f32; x.len()];
        dequantize_f32(&bytes, &mut back);
        assert_eq!(back, x);
        let expect: f32 = x.iter().map(|v| v * v).sum();
        assert!((dot_f32_row(&bytes, &x) - expect).abs() < 1e-3);

        let mut h = Vec::new();
        quantize_f16(&x, &mut h);
        dequantize_f16(&h, &mut back);
        for (a, b) in back.iter().zip(&x) {
            assert!((a - b).abs() <= b.abs() * 1e-3);
        }
        assert!((dot_f16_row(&h, &round_f16(&x)) - expect).abs() < expect * 1e-3);

        let mut bf = Vec::new();
        quantize_bf16(&x, &mut bf);
        dequantize_bf16(&bf, &mut back);
        for (a, b) in back.iter().zip(&x) {
            assert!((a - b).abs() <= b.abs() * 1e-2);
        }
        assert!((dot_bf16_row(&bf, &round_bf16(&x)) - expect).abs() < expect * 1e-2);
    }

    #[test]
    fn known_bit_patterns() {
        let mut out = [0f32; 3];
        dequantize_f16(&[0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c], &mut out);
        assert_eq!(out[..2], [1.0, -2.0]);
        assert!(out[2].is_infinite());
        dequantize_bf16(&[0x80, 0x3f, 0x40, 0xc0, 0x00, 0x00], &mut out);
        assert_eq!(out, [1.0, -3.0, 0.0]);
    }
}
