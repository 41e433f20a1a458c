//! Test inputs and checks shared by the prompt kernels' tests (`x86`, `x86_vnni`): random Q5_0
//! rows with eight activation rows, and the bit-for-bit comparison of a kernel's products
//! with the reference dot.

use super::legacy::{self, BlockQ8_0};
use super::{quantize_act, ActType, QuantizedAct};
use crate::rng::SplitMix64;

/// `rows` random Q5_0 rows of `blocks` blocks (random bytes, finite scales) and eight
/// activation rows quantized to Q8_0, the last with large values.
pub fn q5_0_rows_and_acts(
    rng: &mut SplitMix64,
    rows: usize,
    blocks: usize,
) -> (Vec<u8>, Vec<Vec<BlockQ8_0>>) {
    let mut w: Vec<u8> = (0..rows * blocks * 22)
        .map(|_| rng.next_u64() as u8)
        .collect();
    for b in w.chunks_exact_mut(22) {
        let d = half::f16::from_f32(rng.next_signed() * 0.05);
        b[..2].copy_from_slice(&d.to_le_bytes());
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

/// `out[t][r]` is `legacy::vec_dot_q5_0_q8_0(row r of w, acts[t])`, bit for bit.
pub fn assert_q5_0_products(
    w: &[u8],
    blocks: usize,
    acts: &[&[BlockQ8_0]],
    out: &[&[f32]],
    what: &str,
) {
    for (r, wr) in w.chunks_exact(22 * blocks).enumerate() {
        for (t, a) in acts.iter().enumerate() {
            let want = legacy::vec_dot_q5_0_q8_0(wr, a).to_bits();
            assert_eq!(
                out[t][r].to_bits(),
                want,
                "{what}: {blocks} blocks, row {r}, token {t}"
            );
        }
    }
}
