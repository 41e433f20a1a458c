//! Quantizers of the legacy formats: llama.cpp's deterministic reference quantizers for
//! weights (what `llama-quantize` writes) and the AVX2-order quantizers for activations (what
//! the CPU backend does to a product's input on x86).

use half::f16;

use super::layout::{abs_max, Q4_0_BYTES, Q8_0_BYTES, QK};
use crate::quant::blocks::{round_f16, round_half_even, BlockQ8_0, BlockQ8_1};

// ---------------------------------------------------------------------------------------------
// Weight quantization (llama.cpp's deterministic reference quantizers).

/// `quantize_row_q8_0_ref`: `d = amax / 127`, `q = roundf(x / d)` (round half away from zero,
/// unlike the AVX2 activation quantizer below). `d` is used unrounded for the quants and
/// stored as f16.
pub fn quantize_q8_0(src: &[f32], dst: &mut Vec<u8>) {
    assert_eq!(
        src.len() % QK,
        0,
        "{} values is not whole Q8_0 blocks",
        src.len()
    );
    dst.reserve(src.len() / QK * Q8_0_BYTES);
    for x in src.chunks_exact(QK) {
        let d = abs_max(x) / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        dst.extend_from_slice(&f16::from_f32(d).to_le_bytes());
        // `roundf` result is within [-127, 127] for finite input; `as` saturates otherwise.
        dst.extend(x.iter().map(|&v| (v * id).round() as i8 as u8));
    }
}

/// `quantize_row_q4_0_ref`: `max` = the value of largest magnitude (sign kept, first one on
/// ties), `d = max / -8`, `q = min(15, trunc(x / d + 8.5))`, low nibbles for weights 0..16 and
/// high nibbles for 16..32. `d` is used unrounded for the quants and stored as f16.
pub fn quantize_q4_0(src: &[f32], dst: &mut Vec<u8>) {
    assert_eq!(
        src.len() % QK,
        0,
        "{} values is not whole Q4_0 blocks",
        src.len()
    );
    dst.reserve(src.len() / QK * Q4_0_BYTES);
    for x in src.chunks_exact(QK) {
        let mut amax = 0f32;
        let mut max = 0f32;
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        dst.extend_from_slice(&f16::from_f32(d).to_le_bytes());
        // C: `MIN(15, (int8_t)(x*id + 8.5f))`; the float-to-int8 cast truncates toward zero.
        let q = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
        let (lo, hi) = x.split_at(QK / 2);
        dst.extend(lo.iter().zip(hi).map(|(&a, &b)| q(a) | (q(b) << 4)));
    }
}

// ---------------------------------------------------------------------------------------------
// Activation quantization: the AVX2 `quantize_row_q8_0` / `quantize_row_q8_1` of
// ggml-cpu/arch/x86/quants.c.

/// One block as the AVX2 code quantizes it: `amax` over the block, `d = amax / 127` (f32),
/// `id = 127 / amax` (0 if `amax == 0`), `q = round_half_even(x * id)` (`_mm256_round_ps` with
/// `_MM_ROUND_NEAREST`, then `_mm256_cvtps_epi32` and saturating packs). Note this is NOT the
/// reference `quantize_row_q8_0_ref` (`id = 1/d`, `roundf` = half away from zero).
///
/// Returns the f32 `d` (not yet f16-rounded), the quants, and their integer sum.
/// Non-finite input is not reproduced bit for bit (NaN ordering in `_mm256_max_ps`, and
/// `cvtps` of NaN giving -128 where Rust gives 0).
#[inline]
fn quantize_act_block(x: &[f32]) -> (f32, [i8; QK], i32) {
    let amax = abs_max(x);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut qs = [0i8; QK];
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        let r = round_half_even(v * id) as i32;
        sum += r;
        *q = r.clamp(-128, 127) as i8;
    }
    (d, qs, sum)
}

/// Quantize activations into Q8_0 blocks, matching the x86 AVX2 `quantize_row_q8_0`
/// (round half to even). `x.len()` must be a multiple of 32.
pub fn quantize_act_q8_0(x: &[f32]) -> Vec<BlockQ8_0> {
    assert_eq!(
        x.len() % QK,
        0,
        "{} activations is not whole Q8_0 blocks",
        x.len()
    );
    x.chunks_exact(QK)
        .map(|x| {
            let (d, qs, _) = quantize_act_block(x);
            BlockQ8_0::new(round_f16(d), qs)
        })
        .collect()
}

/// Quantize activations into Q8_1 blocks, matching the x86 AVX2 `quantize_row_q8_1`
/// (round half to even). As there, `s = f16(d * sum(qs))` uses the *unrounded f32* `d`,
/// not the f16 `d` stored in the block. `x.len()` must be a multiple of 32.
pub fn quantize_act_q8_1(x: &[f32]) -> Vec<BlockQ8_1> {
    assert_eq!(
        x.len() % QK,
        0,
        "{} activations is not whole Q8_1 blocks",
        x.len()
    );
    x.chunks_exact(QK)
        .map(|x| {
            let (d, qs, sum) = quantize_act_block(x);
            BlockQ8_1 {
                d: round_f16(d),
                s: round_f16(d * sum as f32),
                qs,
            }
        })
        .collect()
}
