//! Shared by the GPU tests: which GPU to test on, or why they skip. CI has no GPU, so without
//! one every GPU test prints its reason and passes; with `CBTOP_TEST_DEVICE=cuda` a missing GPU
//! is a failure instead (so a device run cannot skip silently). `CBTOP_TEST_DEVICE=cpu` skips.
//! Also random weight rows of every type for the kernel tests (`random_rows`), and how far a
//! product's outputs lie from the f64 dot (`worst_error`).
#![allow(dead_code)]

pub mod seen;

use cbtop::engine::cuda::{probe, GpuDesc};
use cbtop::quant::{dequantize_row, GgmlType};
use cbtop::rng::SplitMix64;

/// The GPU to test on, or `None` (reason printed) when the GPU tests skip.
pub fn gpu(test: &str) -> Option<GpuDesc> {
    let want = std::env::var("CBTOP_TEST_DEVICE").unwrap_or_default();
    if want == "cpu" {
        eprintln!("{test}: skipped: CBTOP_TEST_DEVICE=cpu");
        return None;
    }
    match probe().gpu(0) {
        Ok(g) => Some(g.clone()),
        Err(reason) if want == "cuda" => panic!("{test}: CBTOP_TEST_DEVICE=cuda but {reason}"),
        Err(reason) => {
            eprintln!("{test}: skipped: no usable GPU ({reason})");
            None
        }
    }
}

/// `rows` rows of random `ty` blocks: synth's generator where it draws the type, else random
/// bytes with every f16 scale field set to a small finite value (any bit pattern is a valid
/// quant or packed scale).
pub fn random_rows(ty: GgmlType, rows: usize, cols: usize, rng: &mut SplitMix64) -> Vec<u8> {
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

/// The batch from which fast products take the tensor cores after expanding the weights to
/// f16: 64, or what `CBTOP_TENSOR_CORES_FROM` says (src/engine/cuda/gemm.rs).
pub fn tensor_cores_from() -> usize {
    std::env::var("CBTOP_TENSOR_CORES_FROM")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(64)
}

/// The batch range in which fast products on Q4_K/Q6_K/Q8_0 weights take the integer
/// tensor-core kernels (src/engine/cuda/qmma.rs): from 4 (`CBTOP_QMMA_FROM`; Q8_0 from 5
/// where it is unset, `qmma_kernel`) up to 256
/// (`CBTOP_QMMA_UNTIL`); None under `CBTOP_QMMA=0`.
pub fn qmma_range() -> Option<(usize, usize)> {
    if std::env::var("CBTOP_QMMA").is_ok_and(|v| v.trim() == "0") {
        return None;
    }
    let read = |var: &str| std::env::var(var).ok().and_then(|v| v.trim().parse().ok());
    Some((
        read("CBTOP_QMMA_FROM").unwrap_or(4),
        read("CBTOP_QMMA_UNTIL").unwrap_or(256),
    ))
}

/// The kernel of kernels/gemm_qmma.cu a product of `n` tokens against `ty` rows of `cols`
/// values takes, where it takes one.
pub fn qmma_kernel(ty: GgmlType, cols: usize, n: usize) -> Option<String> {
    let (from, until) = qmma_range()?;
    // Q8_0 starts at 5 tokens unless `CBTOP_QMMA_FROM` says otherwise.
    let from = match ty {
        GgmlType::Q8_0 if std::env::var_os("CBTOP_QMMA_FROM").is_none() => 5,
        _ => from,
    };
    let typed = matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K | GgmlType::Q8_0);
    if !typed || !cols.is_multiple_of(256) || n < from || n > until {
        return None;
    }
    // The largest tile is 64 tokens for Q8_0 and 32 for the others unless `CBTOP_QMMA_TILE`
    // says otherwise.
    let cap = std::env::var("CBTOP_QMMA_TILE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(if ty == GgmlType::Q8_0 { 64 } else { 32 });
    let bt = [8, 16, 32, 64]
        .into_iter()
        .find(|&bt| n.min(cap) <= bt)
        .unwrap_or(64);
    Some(format!("qmma_{}_{bt}", ty.name().to_lowercase()))
}

/// Turns the integer tensor-core kernels off for a test of the kernels they take batches
/// from (engines read `CBTOP_QMMA` when created).
pub fn qmma_off(test: &str) {
    if qmma_range().is_some() {
        std::env::set_var("CBTOP_QMMA", "0");
        eprintln!("{test}: CBTOP_QMMA=0: the kernels under test take these batches only without the integer ones");
    }
}

/// The batch range in which fast products on quantized weights take the tensor-core kernels
/// that read those weights (src/engine/cuda/gemm_q.rs): from 16 (`CBTOP_QGEMM_FROM`) up to
/// 256 (`CBTOP_QGEMM_UNTIL`); None under `CBTOP_QGEMM=0`.
pub fn qgemm_range() -> Option<(usize, usize)> {
    if std::env::var("CBTOP_QGEMM").is_ok_and(|v| v.trim() == "0") {
        return None;
    }
    let read = |var: &str| std::env::var(var).ok().and_then(|v| v.trim().parse().ok());
    Some((
        read("CBTOP_QGEMM_FROM").unwrap_or(16),
        read("CBTOP_QGEMM_UNTIL").unwrap_or(256),
    ))
}

/// The kernel of kernels/gemm_q.cu a product of `n` tokens against quantized `ty` takes,
/// where it takes one (`cols`: a multiple of 64, and of 256 for the k-quants).
pub fn qgemm_kernel(ty: GgmlType, n: usize) -> Option<String> {
    let (from, until) = qgemm_range()?;
    if !ty.is_quantized() || n < from || n > until {
        return None;
    }
    let bt = [16, 32, 64].into_iter().find(|&bt| n <= bt).unwrap_or(64);
    Some(format!("gemm_q_{}_{bt}", ty.name().to_lowercase()))
}

/// The largest |got - f64 dot| / sum|w x| over the rows and tokens.
pub fn worst_error(
    ty: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    got: &[f32],
) -> f64 {
    let rb = ty.row_bytes(cols).unwrap();
    let n = x.len() / cols;
    let mut row = vec![0f32; cols];
    let mut worst = 0f64;
    for r in 0..rows {
        dequantize_row(ty, &w[r * rb..(r + 1) * rb], &mut row);
        for t in 0..n {
            let xt = &x[t * cols..(t + 1) * cols];
            let (want, mag) = row.iter().zip(xt).fold((0f64, 0f64), |(s, m), (a, b)| {
                let p = *a as f64 * *b as f64;
                (s + p, m + p.abs())
            });
            worst = worst.max((got[t * rows + r] as f64 - want).abs() / (mag + 1e-6));
        }
    }
    worst
}
