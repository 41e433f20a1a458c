//! A measurement, not a check: one thread's rate of the few-token kernels (`few_vnni`,
//! `few_kquants`) and of the one-token row dots, on matrices of Qwen2.5-0.5B's shapes, in
//! GB/s of weights and GOP/s (a multiply and an add per weight and token). Run with
//! `cargo test --release --lib few_bench -- --ignored --nocapture`.

#![cfg(test)]

use std::time::Instant;

use crate::quant::blocks::{BlockQ8K, BlockQ8_0};
use crate::quant::quantize_row;
use crate::quant::{quantize_act, vec_dot_rows, ActType, GgmlType, QuantizedAct};
use crate::rng::SplitMix64 as Rng;

/// `rows` random `ty` rows of `cols` weights (legacy types: random bytes with small scales;
/// k-quants: random values quantized).
fn matrix(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
    match ty {
        GgmlType::Q4_K | GgmlType::Q6_K => {
            let x: Vec<f32> = (0..rows * cols).map(|_| rng.next_signed()).collect();
            let mut w = Vec::new();
            quantize_row(ty, &x, &mut w).expect("a quantizable type");
            w
        }
        _ => {
            let bytes = ty.block_bytes();
            let mut w = vec![0u8; rows * cols / ty.block_size() * bytes];
            rng.fill(&mut w);
            for b in w.chunks_exact_mut(bytes) {
                let d = half::f16::from_f32(0.01 + rng.next_signed().abs() * 0.01);
                b[..2].copy_from_slice(&d.to_le_bytes());
            }
            w
        }
    }
}

/// Seconds per product of `n` tokens (the best of several rounds of a few calls each).
fn time(mut f: impl FnMut()) -> f64 {
    f();
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..3 {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / 3.0);
    }
    best
}

#[test]
#[ignore = "measurement: prints one thread's GB/s and GOP/s of the few-token kernels"]
fn few_token_rates_one_thread() {
    use super::{few_kquants, few_vnni};
    if !super::vnni::available() {
        eprintln!("skipped: this CPU has no AVX-512 VNNI");
        return;
    }
    let mut rng = Rng::new(7);
    // (type, rows, cols): gate+up and Q of the 0.5b (Q5_0, 896 columns), lm_head's Q8_0 (a
    // slice), ffn_down's Q4_K/Q6_K (4864 columns).
    let shapes = [
        (GgmlType::Q5_0, 9728, 896),
        (GgmlType::Q5_0, 896, 896),
        (GgmlType::Q8_0, 16384, 896),
        (GgmlType::Q4_K, 3584, 4864),
        (GgmlType::Q6_K, 3584, 4864),
    ];
    let mut table = String::from(
        "| type | rows x cols | MB | n | us | GB/s weights | GOP/s | x 1-token time |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (ty, rows, cols) in shapes {
        let w = matrix(&mut rng, ty, rows, cols);
        let rb = w.len() / rows;
        let kind = ActType::for_weights(ty);
        let acts: Vec<QuantizedAct> = (0..8)
            .map(|_| {
                let x: Vec<f32> = (0..cols).map(|_| rng.next_signed() * 3.0).collect();
                quantize_act(kind, &x)
            })
            .collect();
        let mut outs = vec![vec![0f32; rows]; 8];
        let mut one = 0.0;
        for n in [1usize, 2, 3, 4, 5, 6, 8] {
            let secs = if n == 1 {
                time(|| vec_dot_rows(ty, &w, rb, &acts[0], &mut outs[0]))
            } else if matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K) {
                let a: Vec<&[BlockQ8K]> = acts[..n]
                    .iter()
                    .map(|a| a.q8_k().expect("Q8_K activations"))
                    .collect();
                let mut o: Vec<&mut [f32]> = outs[..n].iter_mut().map(|v| &mut v[..]).collect();
                // SAFETY: AVX-512 VNNI was detected above.
                time(|| unsafe { few_kquants::rows_few(ty, &w, rb, &a, &mut o) })
            } else {
                let q8: Vec<&[BlockQ8_0]> = acts[..n]
                    .iter()
                    .map(|a| a.q8_0().expect("Q8_0 activations"))
                    .collect();
                let mut few = few_vnni::FewTokens::default();
                few.set(&q8);
                let mut o: Vec<&mut [f32]> = outs[..n].iter_mut().map(|v| &mut v[..]).collect();
                // SAFETY: as above.
                time(|| unsafe { few_vnni::rows_few(ty, &w, rb, &few, &mut o) })
            };
            if n == 1 {
                one = secs;
                if few_vnni::takes(ty) {
                    let q8 = acts[0].q8_0().expect("Q8_0 activations");
                    let mut few = few_vnni::FewTokens::default();
                    few.set(&[q8]);
                    let mut o: Vec<&mut [f32]> = outs[..1].iter_mut().map(|v| &mut v[..]).collect();
                    // SAFETY: AVX-512 VNNI was detected above.
                    let s1 = time(|| unsafe { few_vnni::rows_few(ty, &w, rb, &few, &mut o) });
                    table += &format!(
                        "| {ty} | {rows} x {cols} | {:.2} | 1 (few_vnni) | {:.0} | {:.2} | {:.1} | {:.2} |\n",
                        w.len() as f64 / 1e6,
                        s1 * 1e6,
                        w.len() as f64 / s1 / 1e9,
                        2.0 * (rows * cols) as f64 / s1 / 1e9,
                        s1 / one
                    );
                }
            }
            let gbs = w.len() as f64 / secs / 1e9;
            let gops = 2.0 * (rows * cols * n) as f64 / secs / 1e9;
            table += &format!(
                "| {ty} | {rows} x {cols} | {:.2} | {n} | {:.0} | {gbs:.2} | {gops:.1} | {:.2} |\n",
                w.len() as f64 / 1e6,
                secs * 1e6,
                secs / one
            );
        }
    }
    eprintln!("{table}");
    // Under exact numerics a few tokens' Q4_K/Q6_K products take the one-token dots per
    // token (`few_tokens`, chunks of rows from L1) or, from four tokens, the four-token rows.
    let mut table = String::from(
        "| type (exact) | n | per-token dots us | four-token rows us | few_kquants_exact us |\n|---|---|---|---|---|\n",
    );
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
        let (rows, cols) = (3584, 4864);
        let w = matrix(&mut rng, ty, rows, cols);
        let rb = w.len() / rows;
        let acts: Vec<QuantizedAct> = (0..8)
            .map(|_| {
                let x: Vec<f32> = (0..cols).map(|_| rng.next_signed() * 3.0).collect();
                quantize_act(ActType::Q8_K, &x)
            })
            .collect();
        let mut outs = vec![vec![0f32; rows]; 8];
        for n in [1usize, 2, 3, 4, 6, 8] {
            let chunk = (16 << 10) / rb;
            let dots = time(|| {
                for r in (0..rows).step_by(chunk) {
                    let end = (r + chunk).min(rows);
                    for (t, a) in acts[..n].iter().enumerate() {
                        vec_dot_rows(ty, &w[r * rb..end * rb], rb, a, &mut outs[t][r..end]);
                    }
                }
            });
            let fours = time(|| {
                for t in (0..n / 4 * 4).step_by(4) {
                    let [o0, o1, o2, o3, ..] = &mut outs[t..] else {
                        unreachable!()
                    };
                    let four = std::array::from_fn(|i| &acts[t + i]);
                    crate::quant::vec_dot_rows_x4(ty, &w, rb, four, [o0, o1, o2, o3]);
                }
                for t in n / 4 * 4..n {
                    vec_dot_rows(ty, &w, rb, &acts[t], &mut outs[t]);
                }
            });
            let a: Vec<&[BlockQ8K]> = acts[..n]
                .iter()
                .map(|a| a.q8_k().expect("Q8_K activations"))
                .collect();
            let mut o: Vec<&mut [f32]> = outs[..n].iter_mut().map(|v| &mut v[..]).collect();
            // SAFETY: AVX-512 VNNI (so F and BW) was detected above.
            let few =
                time(|| unsafe { super::few_kquants_exact::rows_few(ty, &w, rb, &a, &mut o) });
            table += &format!(
                "| {ty} | {n} | {:.0} | {:.0} | {:.0} |\n",
                dots * 1e6,
                fours * 1e6,
                few * 1e6
            );
        }
    }
    eprintln!("{table}");
}
