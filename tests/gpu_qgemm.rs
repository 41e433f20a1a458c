//! The tensor-core products that read quantized weights (kernels/gemm_q.cu, fast numerics,
//! batches of 16 tokens or more): for every quantized type at 16, 17, 33, 64 and 100 tokens
//! the engine must pick them, and each output must lie within f16 rounding of the f64 dot of
//! the dequantized weights with the f32 activations (2e-3 of the sum of |w x|, the bound of
//! the f16-expanding tensor-core products in tests/gpu_kernels.rs), with K whole and split
//! (as if the GPU had 1 or 1000 multiprocessors). Then with `CBTOP_QGEMM=0` the same products
//! take the expanding path again, and the two agree within the same bound. Skips without a
//! GPU. The integer tensor-core kernels, which take Q4_K/Q6_K/Q8_0 batches first, are turned off
//! (`CBTOP_QMMA=0`; tests/gpu_qmma.rs tests them). One test in this binary: it sets `CBTOP_QGEMM`, which engines read when created.

mod common;
mod gpu;

use cbtop::engine::cuda::KernelCheck;
use cbtop::engine::Numerics;
use cbtop::quant::GgmlType;
use cbtop::rng::SplitMix64;

const TOKENS: [usize; 5] = [16, 17, 33, 64, 100];

#[test]
fn quantized_weight_tensor_core_products_match_the_f64_dot_within_f16_rounding() {
    let Some(g) = gpu::gpu("gpu_qgemm") else {
        return;
    };
    gpu::qmma_off("gpu_qgemm");
    if gpu::qgemm_range() != Some((16, 256)) {
        std::env::remove_var("CBTOP_QGEMM");
        std::env::remove_var("CBTOP_QGEMM_FROM");
        std::env::remove_var("CBTOP_QGEMM_UNTIL");
        eprintln!("gpu_qgemm: CBTOP_QGEMM* cleared: this test sets its own");
    }
    // Rows leaving the last block of 64 (and a warp's 16) partly empty; rows of one k-quant
    // block (256), of 28 legacy blocks (896: qwen2.5-0.5b's width, not a k-quant multiple),
    // and long ones; 1000 multiprocessors split every K, one splits none.
    let shapes = [(83, 512, 51), (40, 256, 52), (130, 896, 53), (37, 2560, 54)];
    let mut failures = Vec::new();
    let mut outputs = Vec::new();
    for sms in [1, 1000] {
        let k = KernelCheck::with_multiprocessors(&g, Numerics::Fast, Some(sms)).unwrap();
        for (rows, cols, seed) in shapes {
            let mut rng = SplitMix64::new(seed);
            for ty in GgmlType::ALL.into_iter().filter(|t| t.is_quantized()) {
                if ty.row_bytes(cols).is_none() {
                    continue;
                }
                let w = gpu::random_rows(ty, rows, cols, &mut rng);
                for n in TOKENS {
                    let kernel = k.product_kernel(ty, rows, cols, n);
                    let want = gpu::qgemm_kernel(ty, n).expect("quantized, 16 tokens or more");
                    if kernel != want {
                        failures.push(format!(
                            "{ty} {rows}x{cols} n={n}: the product takes {kernel}, not {want}"
                        ));
                    }
                    let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
                    let got = k.matvec(ty, &w, rows, cols, &x).unwrap();
                    let worst = gpu::worst_error(ty, &w, rows, cols, &x, &got);
                    eprintln!(
                        "qgemm {ty} {rows}x{cols}, {n} tokens, {sms} SMs ({kernel}): \
                         max |gpu - f64| / sum|w x| = {worst:.2e}"
                    );
                    if worst > 2e-3 {
                        failures.push(format!(
                            "qgemm {ty} {rows}x{cols} n={n} {sms} SMs: {worst:.2e}"
                        ));
                    }
                    if sms == 1 {
                        outputs.push((ty, rows, cols, w.clone(), x, got));
                    }
                }
            }
        }
    }
    // The expanding path on the same operands (the f16 values are the same, so only the
    // summation order differs).
    std::env::set_var("CBTOP_QGEMM", "0");
    let k = KernelCheck::new(&g, Numerics::Fast).unwrap();
    for (ty, rows, cols, w, x, got) in &outputs {
        let n = x.len() / cols;
        let kernel = k.product_kernel(*ty, *rows, *cols, n);
        if gpu::qgemm_kernel(*ty, n).is_some() || kernel.starts_with("gemm_q") {
            failures.push(format!("CBTOP_QGEMM=0: {ty} n={n} still takes {kernel}"));
        }
        let other = k.matvec(*ty, w, *rows, *cols, x).unwrap();
        let worst = gpu::worst_error(*ty, w, *rows, *cols, x, &other);
        let apart = got
            .iter()
            .zip(&other)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!(
            "CBTOP_QGEMM=0 {ty} {rows}x{cols}, {n} tokens ({kernel}): max |gpu - f64| / \
             sum|w x| = {worst:.2e}, max |qgemm - it| = {apart:.2e}"
        );
        if worst > 2e-3 {
            failures.push(format!(
                "CBTOP_QGEMM=0 {ty} {rows}x{cols} n={n}: {worst:.2e}"
            ));
        }
    }
    std::env::remove_var("CBTOP_QGEMM");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
