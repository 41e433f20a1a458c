//! Test inputs and checks shared by the prompt kernels' tests (`x86`, `x86_vnni`): random
//! Q4_0, Q5_0 or Q8_0 rows with eight activation rows, and the bit-for-bit comparison of a
//! kernel's products with the scalar reference dot.

use super::legacy::{self, BlockQ8_0};
use super::{quantize_act, ActType, GgmlType, QuantizedAct};
use crate::rng::SplitMix64;

/// The types whose prompt kernels take Q8_0 activations.
pub const Q8_0_ACT_TYPES: [GgmlType; 3] = [GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0];

/// `rows` random `ty` rows of `blocks` blocks (random bytes, finite scales) and eight
/// activation rows quantized to Q8_0, the last with large values.
pub fn rows_and_acts(
    rng: &mut SplitMix64,
    ty: GgmlType,
    rows: usize,
    blocks: usize,
) -> (Vec<u8>, Vec<Vec<BlockQ8_0>>) {
    let bytes = ty.block_bytes();
    let mut w: Vec<u8> = (0..rows * blocks * bytes)
        .map(|_| rng.next_u64() as u8)
        .collect();
    for b in w.chunks_exact_mut(bytes) {
        let d = half::f16::from_f32(rng.next_signed() * 0.05);
        b[..2].copy_from_slice(&d.to_le_bytes());
        if ty == GgmlType::Q8_0 {
            // Stored levels of -128 as well as the quantizer's -127..127.
            b[2] = 0x80;
        }
    }
    let acts = (0..8)
        .map(|k| {
            let scale = if k == 7 { 1e4 } else { 3.0 };
            let x: Vec<f32> = (0..blocks * 32)
                .map(|_| rng.next_signed() * scale)
                .collect();
            match quantize_act(ActType::Q8_0, &x) {
                QuantizedAct::Q8_0(a) => a,
                _ => unreachable!("Q8_0 activations"),
            }
        })
        .collect();
    (w, acts)
}

/// `out[t][r]` is the scalar `legacy::vec_dot_*_q8_0(row r of w, acts[t])`, bit for bit.
pub fn assert_products(
    ty: GgmlType,
    w: &[u8],
    blocks: usize,
    acts: &[&[BlockQ8_0]],
    out: &[&[f32]],
    what: &str,
) {
    let dot = match ty {
        GgmlType::Q4_0 => legacy::vec_dot_q4_0_q8_0,
        GgmlType::Q5_0 => legacy::vec_dot_q5_0_q8_0,
        GgmlType::Q8_0 => legacy::vec_dot_q8_0_q8_0,
        _ => panic!("{ty} takes no Q8_0 activations"),
    };
    for (r, wr) in w.chunks_exact(ty.block_bytes() * blocks).enumerate() {
        for (t, a) in acts.iter().enumerate() {
            assert_eq!(
                out[t][r].to_bits(),
                dot(wr, a).to_bits(),
                "{what}: {ty}, {blocks} blocks, row {r}, token {t}"
            );
        }
    }
}
