//! The fast products of a few tokens (kernels/matvec_few.cu: 2 tokens up to the tensor cores'
//! threshold, in chunks of at most 8) on every quantized type: the engine must pick them under
//! fast numerics (and keep the CPU-order batch kernels under exact), and each output must lie
//! within float reordering of the f64 dot of the same quantized operands (the dequantized
//! weights against the activations as the GPU quantized them, which are the CPU's) and of the
//! one-token fast kernel run on that token alone. The integer tensor-core kernels, which take
//! Q4_K/Q6_K/Q8_0 batches first, are turned off here (`CBTOP_QMMA=0`; tests/gpu_qmma.rs tests
//! them). Skips without a GPU.

mod common;
mod gpu;

use cbtop::engine::cuda::KernelCheck;
use cbtop::engine::Numerics;
use cbtop::quant::GgmlType;
use cbtop::rng::SplitMix64;
use gpu::seen::{dequantized, worst_seen};

/// Token counts: one chunk (2, 3, 5, 8), uneven chunks (11: 6 + 5), whole chunks (16), many
/// chunks with a short last one (37: 8 x 4 + 5), and the largest below the tensor cores (63).
const TOKENS: [usize; 8] = [2, 3, 5, 8, 11, 16, 37, 63];

/// The batch from which fast products on quantized weights take the tensor cores: the
/// quantized-weight kernels' threshold (16) or the expansion's (64), whichever comes first.
fn tensor_cores_from() -> usize {
    let expand = gpu::tensor_cores_from();
    gpu::qgemm_range().map_or(expand, |(from, _)| from.min(expand))
}

/// The few-token kernel for `n` tokens of type `ty`: chunks of at most 8, as even as that
/// allows (src/engine/cuda/launch_params.rs `few_launch`).
fn few_kernel(ty: GgmlType, n: usize) -> String {
    let nt = n.div_ceil(n.div_ceil(8));
    format!("mvf{nt}_{}", ty.name().to_lowercase())
}

#[test]
fn few_token_products_match_the_f64_dot_and_the_one_token_kernel() {
    let Some(g) = gpu::gpu("gpu_few_tokens") else {
        return;
    };
    gpu::qmma_off("gpu_few_tokens");
    let k = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let from = tensor_cores_from();
    let mut failures = Vec::new();
    // Rows that leave the last block of eight, and a warp's second row, partly empty; rows of
    // fewer units than a warp's lanes (256, 512) and of more (2560: 80 legacy blocks); short
    // matrices of long rows, whose row pairs take two warps (4096: 128 legacy blocks; 8192
    // k-quant rows) or four (8192 legacy rows), the last block's second pair past the rows
    // (launch_params.rs `few_split`).
    for (rows, cols, seed) in [
        (37, 512, 41),
        (131, 2560, 42),
        (9, 256, 43),
        (61, 4096, 44),
        (45, 8192, 45),
    ] {
        let mut rng = SplitMix64::new(seed);
        for ty in GgmlType::ALL.into_iter().filter(|t| t.is_quantized()) {
            let w = gpu::random_rows(ty, rows, cols, &mut rng);
            let deq = dequantized(ty, &w, rows, cols);
            for n in TOKENS {
                if n >= from {
                    eprintln!(
                        "few {ty}: {n} tokens skipped: the tensor cores take them from {from}"
                    );
                    continue;
                }
                let kernel = k.product_kernel(ty, rows, cols, n);
                let want = few_kernel(ty, n);
                if kernel != want {
                    failures.push(format!(
                        "{ty} n={n}: the product takes {kernel}, not {want}"
                    ));
                }
                let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
                let got = k.matvec(ty, &w, rows, cols, &x).unwrap();
                let (worst_f64, worst_one) =
                    worst_seen(ty, &w, &deq, rows, cols, &x, &got, |_, xt| {
                        Some(k.matvec(ty, &w, rows, cols, xt).unwrap())
                    });
                eprintln!(
                    "few {ty} {rows}x{cols}, {n} tokens ({kernel}): max |gpu - f64| / sum|w a| = \
                     {worst_f64:.2e}, max |gpu - one token| / sum|w a| = {worst_one:.2e}"
                );
                if worst_f64 > 2e-5 || worst_one > 2e-5 {
                    failures.push(format!(
                        "{ty} {rows}x{cols} n={n}: {worst_f64:.2e} of sum|w a| from the f64 dot, \
                         {worst_one:.2e} from the one-token kernel"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Where the few-token kernels take over and where they stop: one token keeps the one-token
/// kernel, the tensor cores start at their threshold (16 by default, the kernels that read the
/// quantized weights, kernels/gemm_q.cu; `CBTOP_QGEMM_FROM`, `CBTOP_QGEMM=0` and
/// `CBTOP_TENSOR_CORES_FROM` move it, and this test then follows them), and exact numerics
/// keep the CPU-order batch kernel at every batch.
#[test]
fn few_token_kernels_cover_the_batches_below_the_tensor_cores() {
    let Some(g) = gpu::gpu("gpu_few_tokens") else {
        return;
    };
    gpu::qmma_off("gpu_few_tokens");
    let fast = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let exact = KernelCheck::new(&g, Numerics::Exact).unwrap();
    let from = tensor_cores_from();
    let mut failures = Vec::new();
    for ty in [GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K] {
        let name = ty.name().to_lowercase();
        for n in [1, 2, 8, 9, from - 1, from, from + 1] {
            let got = fast.product_kernel(ty, 64, 512, n);
            let want = match n {
                1 => format!("mvf_{name}"),
                n if n >= from => {
                    gpu::qgemm_kernel(ty, n).unwrap_or_else(|| "tensor cores".to_string())
                }
                n => few_kernel(ty, n),
            };
            if got != want {
                failures.push(format!("fast {ty} n={n}: {got}, want {want}"));
            }
            let got = exact.product_kernel(ty, 64, 512, n);
            let want = if n == 1 {
                format!("qmv1_{name}")
            } else {
                format!("qmv8_{name}")
            };
            if got != want {
                failures.push(format!("exact {ty} n={n}: {got}, want {want}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two to four tokens against two or three matrices of one activation format in one launch
/// (`mvfm<n>`, a step's Q, K and V or gate and up): each matrix's output is the one-matrix
/// few-token kernel's, bit for bit (the same per-type code over the same blocks), for k-quants
/// of mixed types (Q4_K_M's Q4_K Q and K beside a Q6_K V) and for legacy ones of one format,
/// wherever every matrix of the set takes the few-token kernel on its own (the engine's rule).
#[test]
fn few_token_products_share_a_launch_bit_for_bit() {
    let Some(g) = gpu::gpu("gpu_few_tokens") else {
        return;
    };
    let k = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let cols = 512;
    let mut rng = SplitMix64::new(44);
    let mut failures = Vec::new();
    for set in [
        &[
            (GgmlType::Q4_K, 67),
            (GgmlType::Q4_K, 16),
            (GgmlType::Q6_K, 9),
        ][..],
        &[
            (GgmlType::Q8_0, 40),
            (GgmlType::Q8_0, 8),
            (GgmlType::Q8_0, 8),
        ][..],
        &[(GgmlType::Q4_0, 24), (GgmlType::Q5_0, 13)][..],
        &[(GgmlType::Q5_K, 33), (GgmlType::Q2_K, 7)][..],
    ] {
        let ws: Vec<Vec<u8>> = set
            .iter()
            .map(|&(ty, rows)| gpu::random_rows(ty, rows, cols, &mut rng))
            .collect();
        let mats: Vec<(GgmlType, &[u8], usize)> = set
            .iter()
            .zip(&ws)
            .map(|(&(ty, rows), w)| (ty, w.as_slice(), rows))
            .collect();
        for n in [2, 3, 4] {
            let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
            let few = format!("mvf{n}_");
            if !mats
                .iter()
                .all(|&(ty, _, rows)| k.product_kernel(ty, rows, cols, n).starts_with(&few))
            {
                eprintln!("few set {set:?}, {n} tokens: not every matrix takes {few}*: skipped");
                continue;
            }
            let Some(got) = k.matvec_set(&mats, cols, &x).unwrap() else {
                failures.push(format!("{set:?} n={n}: no one-launch set kernel"));
                continue;
            };
            for (i, &(ty, w, rows)) in mats.iter().enumerate() {
                let want = k.matvec(ty, w, rows, cols, &x).unwrap();
                if got[i] != want {
                    let worst = got[i]
                        .iter()
                        .zip(&want)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0f32, f32::max);
                    failures.push(format!(
                        "{ty} ({rows} rows) of {set:?}, n={n}: differs from its own launch by \
                         up to {worst:e}"
                    ));
                }
            }
            eprintln!("few set {set:?}, {n} tokens: compared with each matrix's own launch");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
