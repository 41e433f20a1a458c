//! What a product on quantized weights sees of its activations (the CPU's quantization of
//! them) and the f64 dot a fast kernel's output is held to.

use cbtop::quant::{dequantize_row, quantize_act, ActType, GgmlType, QuantizedAct};

/// The activations a product sees, dequantized (value i: d * q), and for the Q8_1 types each
/// block's stored sum `s` beside d times the sum of its values (the kernels add the weights'
/// minimum times the stored, f16-rounded sum).
pub struct SeenAct {
    pub values: Vec<f64>,
    /// (stored s, d * sum q) per 32 values (Q8_1 only).
    pub sums: Vec<(f64, f64)>,
}

pub fn seen(act: &QuantizedAct) -> SeenAct {
    let mut values = Vec::new();
    let mut sums = Vec::new();
    match act {
        QuantizedAct::Q8_0(blocks) => {
            for b in blocks {
                values.extend(b.qs.iter().map(|&q| b.d as f64 * q as f64));
            }
        }
        QuantizedAct::Q8_1(blocks) => {
            for b in blocks {
                values.extend(b.qs.iter().map(|&q| b.d as f64 * q as f64));
                let total: i32 = b.qs.iter().map(|&q| q as i32).sum();
                sums.push((b.s as f64, b.d as f64 * total as f64));
            }
        }
        QuantizedAct::Q8_K(blocks) => {
            for b in blocks {
                values.extend(b.qs.iter().map(|&q| b.d as f64 * q as f64));
            }
        }
        other => panic!("not a quantized activation: {:?}", other.act_type()),
    }
    SeenAct { values, sums }
}

/// Q4_1 / Q5_1 block `i`'s minimum (the f16 after the block's scale).
fn block_min(ty: GgmlType, row: &[u8], i: usize) -> f64 {
    let b = &row[i * ty.block_bytes()..];
    half::f16::from_le_bytes([b[2], b[3]]).to_f64()
}

/// The f64 dot of a dequantized weight row with the activations the kernel sees, and the sum
/// of the magnitudes of its terms (the scale of a float reordering's error).
pub fn reference(ty: GgmlType, row: &[u8], deq: &[f32], act: &SeenAct) -> (f64, f64) {
    let (mut sum, mut mag) = (0f64, 0f64);
    for (w, a) in deq.iter().zip(&act.values) {
        let p = *w as f64 * a;
        sum += p;
        mag += p.abs();
    }
    // The weights' minimum meets the stored sum, not the values' own.
    for (i, (stored, own)) in act.sums.iter().enumerate() {
        let m = block_min(ty, row, i);
        sum += m * (stored - own);
        mag += (m * stored).abs();
    }
    (sum, mag)
}

/// A batch product's outputs `got` (n tokens of `rows`) against the f64 dot of each weight row
/// (`w`, dequantized in `deq`) with each token's activations as the CPU quantizes them for
/// `ty`, and against `one(t, token)` (the one-token kernel's output) where it gives one: the
/// largest difference of each, over the rows and tokens, as a share of the sum of |w a|.
#[allow(clippy::too_many_arguments)]
pub fn worst_seen(
    ty: GgmlType,
    w: &[u8],
    deq: &[f32],
    rows: usize,
    cols: usize,
    x: &[f32],
    got: &[f32],
    mut one: impl FnMut(usize, &[f32]) -> Option<Vec<f32>>,
) -> (f64, f64) {
    let rb = w.len() / rows;
    let n = x.len() / cols;
    let (mut worst_f64, mut worst_one) = (0f64, 0f64);
    for t in 0..n {
        let xt = &x[t * cols..(t + 1) * cols];
        let act = seen(&quantize_act(ActType::for_weights(ty), xt));
        let alone = one(t, xt);
        for r in 0..rows {
            let (want, mag) = reference(
                ty,
                &w[r * rb..(r + 1) * rb],
                &deq[r * cols..(r + 1) * cols],
                &act,
            );
            let v = got[t * rows + r] as f64;
            worst_f64 = worst_f64.max((v - want).abs() / (mag + 1e-6));
            if let Some(alone) = &alone {
                worst_one = worst_one.max((v - alone[r] as f64).abs() / (mag + 1e-6));
            }
        }
    }
    (worst_f64, worst_one)
}

/// `rows` rows of `ty` weights `w`, dequantized (rows of `cols` values).
pub fn dequantized(ty: GgmlType, w: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let rb = w.len() / rows;
    let mut deq = vec![0f32; rows * cols];
    for (r, out) in deq.chunks_exact_mut(cols).enumerate() {
        dequantize_row(ty, &w[r * rb..(r + 1) * rb], out);
    }
    deq
}
