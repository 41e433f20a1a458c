//! The integer tensor-core products on Q4_K, Q6_K and Q8_0 weights (kernels/gemm_qmma.cu, fast
//! numerics, 4 to 256 tokens by default, from 2 here through `CBTOP_QMMA_FROM`): the engine must
//! pick them for every batch in their range (and keep the one-token kernel for one token, the
//! few-token kernels below the range, the CPU-order kernels under exact numerics), and
//! each output must lie within float reordering (2e-5 of the sum of |w a|) of the f64 dot of
//! the same quantized operands (the dequantized weights against the activations as the CPU
//! quantizes them) and of the one-token fast kernel on that token alone, with K whole and split
//! (as if the GPU had 1 or 1000 multiprocessors). Skips without a GPU.

mod common;
mod gpu;

use cbtop::engine::cuda::KernelCheck;
use cbtop::engine::Numerics;
use cbtop::quant::GgmlType;
use cbtop::rng::SplitMix64;
use gpu::seen::{dequantized, worst_seen};

/// Token counts: within one 8-token tile (2, 3, 8), each larger tile (9, 16, 17, 33, 64), and
/// two 64-token tiles, the last short (100).
const TOKENS: [usize; 9] = [2, 3, 8, 9, 16, 17, 33, 64, 100];
const TYPES: [GgmlType; 3] = [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0];

#[test]
fn integer_tensor_core_products_match_the_f64_dot_and_the_one_token_kernel() {
    let Some(g) = gpu::gpu("gpu_qmma") else {
        return;
    };
    if gpu::qmma_range() != Some((4, 256)) || std::env::var("CBTOP_QMMA_MIN_STEPS").is_ok() {
        std::env::remove_var("CBTOP_QMMA");
        std::env::remove_var("CBTOP_QMMA_UNTIL");
        std::env::remove_var("CBTOP_QMMA_MIN_STEPS");
        eprintln!("gpu_qmma: CBTOP_QMMA* cleared: this test sets its own");
    }
    // Two and three tokens too: the 8-token tile must be right however few it holds; and the
    // 64-token tile, which only `CBTOP_QMMA_TILE` gives a batch.
    std::env::set_var("CBTOP_QMMA_FROM", "2");
    std::env::set_var("CBTOP_QMMA_TILE", "64");
    let mut failures = Vec::new();
    // Rows leaving the last block of 64 and a warp's 16 partly empty; one k step (256), a few
    // (1024), and many (4864: qwen2.5-0.5b's ffn_down); 1000 multiprocessors split every K.
    let shapes = [(83, 1024, 61), (40, 256, 62), (150, 4864, 63)];
    for sms in [1, 1000] {
        let k = KernelCheck::with_multiprocessors(&g, Numerics::Fast, Some(sms)).unwrap();
        for (rows, cols, seed) in shapes {
            let mut rng = SplitMix64::new(seed);
            for ty in TYPES {
                let w = gpu::random_rows(ty, rows, cols, &mut rng);
                let deq = dequantized(ty, &w, rows, cols);
                for n in TOKENS {
                    let kernel = k.product_kernel(ty, rows, cols, n);
                    let want = gpu::qmma_kernel(ty, cols, n).expect("in the default range");
                    if kernel != want {
                        failures.push(format!(
                            "{ty} {rows}x{cols} n={n}: the product takes {kernel}, not {want}"
                        ));
                    }
                    let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
                    let got = k.matvec(ty, &w, rows, cols, &x).unwrap();
                    // The one-token kernel on a few tokens only: it is the slow part.
                    let (worst_f64, worst_one) =
                        worst_seen(ty, &w, &deq, rows, cols, &x, &got, |t, xt| {
                            (t < 3 || t + 1 == n).then(|| k.matvec(ty, &w, rows, cols, xt).unwrap())
                        });
                    eprintln!(
                        "qmma {ty} {rows}x{cols}, {n} tokens, {sms} SMs ({kernel}): max |gpu - \
                         f64| / sum|w a| = {worst_f64:.2e}, max |gpu - one token| / sum|w a| \
                         = {worst_one:.2e}"
                    );
                    if worst_f64 > 2e-5 || worst_one > 2e-5 {
                        failures.push(format!(
                            "{ty} {rows}x{cols} n={n} {sms} SMs: {worst_f64:.2e} of sum|w a| \
                             from the f64 dot, {worst_one:.2e} from the one-token kernel"
                        ));
                    }
                }
            }
        }
    }
    std::env::remove_var("CBTOP_QMMA_FROM");
    std::env::remove_var("CBTOP_QMMA_TILE");
    routing(&g, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One token keeps the one-token kernel, exact numerics the CPU-order batch kernels, rows
/// that are not whole 256-value steps the other kernels, and `CBTOP_QMMA=0` turns them off
/// (the one test of this binary sets it, as engines read it when created).
fn routing(g: &cbtop::engine::cuda::GpuDesc, failures: &mut Vec<String>) {
    let fast = KernelCheck::new(g, Numerics::Fast).unwrap();
    let exact = KernelCheck::new(g, Numerics::Exact).unwrap();
    for ty in TYPES {
        let name = ty.name().to_lowercase();
        for n in [1, 2, 3, 4, 64, 256] {
            let got = fast.product_kernel(ty, 64, 512, n);
            let want = match n {
                1 => format!("mvf_{name}"),
                2 | 3 => format!("mvf{n}_{name}"),
                n => gpu::qmma_kernel(ty, 512, n).unwrap_or_else(|| format!("mvf{n}_{name}")),
            };
            if got != want {
                failures.push(format!("fast {ty} n={n}: {got}, want {want}"));
            }
            let got = exact.product_kernel(ty, 64, 512, n);
            if got.starts_with("qmma") {
                failures.push(format!("exact {ty} n={n}: {got}"));
            }
        }
    }
    // Q8_0 rows of 896 values (qwen2.5-0.5b's width) are not whole k steps; Q4_0 is not a type
    // of these kernels.
    for (ty, cols) in [(GgmlType::Q8_0, 896), (GgmlType::Q4_0, 512)] {
        let got = fast.product_kernel(ty, 64, cols, 8);
        if got.starts_with("qmma") {
            failures.push(format!("fast {ty} {cols} cols: {got}"));
        }
    }
    drop((fast, exact));
    std::env::set_var("CBTOP_QMMA", "0");
    let off = KernelCheck::new(g, Numerics::Fast).unwrap();
    for ty in TYPES {
        let got = off.product_kernel(ty, 64, 512, 8);
        if got.starts_with("qmma") {
            failures.push(format!("CBTOP_QMMA=0 {ty}: {got}"));
        }
    }
    std::env::remove_var("CBTOP_QMMA");
}
