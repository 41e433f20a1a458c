//! Each typed kernel against the CPU reference on random blocks: the matrix product against
//! f64 dots of `dequantize_row` output, the embedding gather against `dequantize_row` itself.
//! Skips without a GPU.

mod gpu;

use cbtop::engine::cuda::KernelCheck;
use cbtop::quant::{dequantize_row, GgmlType};
use cbtop::rng::SplitMix64;

/// `rows` rows of random `ty` blocks: synth's generator where it draws the type, else random
/// bytes with every f16 scale field set to a small finite value (any bit pattern is a valid
/// quant or packed scale).
fn random_rows(ty: GgmlType, rows: usize, cols: usize, rng: &mut SplitMix64) -> Vec<u8> {
    let rb = ty.row_bytes(cols).unwrap();
    let mut w = vec![0u8; rows * rb];
    let scales: &[usize] = match ty {
        GgmlType::BF16 => {
            let x: Vec<f32> = (0..rows * cols).map(|_| rng.next_signed()).collect();
            let mut out = Vec::new();
            cbtop::quant::quantize_row(ty, &x, &mut out).unwrap();
            return out;
        }
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        _ => {
            cbtop::synth::blocks::fill(ty, 0.5, rng, &mut w);
            return w;
        }
    };
    for b in w.iter_mut() {
        *b = (rng.next_u64() >> 56) as u8;
    }
    for block in w.chunks_exact_mut(ty.block_bytes()) {
        for &at in scales {
            let v = half::f16::from_f32(0.01 + 0.02 * (rng.next_signed().abs()));
            block[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    w
}

#[test]
fn every_type_matches_the_cpu_dequantization() {
    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let k = KernelCheck::new(&g).unwrap();
    let (rows, cols, n) = (37, 512, 5);
    let mut rng = SplitMix64::new(7);
    let mut failures = Vec::new();
    for ty in GgmlType::ALL {
        let rb = ty.row_bytes(cols).unwrap();
        let w = random_rows(ty, rows, cols, &mut rng);
        let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
        let mut deq = vec![0f32; rows * cols];
        for (r, out) in deq.chunks_exact_mut(cols).enumerate() {
            dequantize_row(ty, &w[r * rb..(r + 1) * rb], out);
        }
        let got = k.matvec(ty, &w, rows, cols, &x).unwrap();
        let mut worst = 0f64;
        for t in 0..n {
            for r in 0..rows {
                let want: f64 = (0..cols)
                    .map(|j| deq[r * cols + j] as f64 * x[t * cols + j] as f64)
                    .sum();
                worst = worst.max((got[t * rows + r] as f64 - want).abs());
            }
        }
        let tokens = [0u32, 36, 5, 5];
        let emb = k.embed(ty, &w, rows, cols, &tokens).unwrap();
        let mut emb_worst = 0f32;
        for (i, &t) in tokens.iter().enumerate() {
            let want = &deq[t as usize * cols..(t as usize + 1) * cols];
            emb_worst = emb_worst.max(gpu::max_abs_diff(&emb[i * cols..(i + 1) * cols], want));
        }
        eprintln!("{ty}: matvec max |diff| {worst:.2e}, embed max |diff| {emb_worst:.2e}");
        if worst > 1e-3 || emb_worst > 1e-6 {
            failures.push(format!("{ty}: matvec {worst}, embed {emb_worst}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
