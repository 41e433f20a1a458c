//! Each typed kernel against the CPU reference on random blocks: the matrix product (the
//! activations quantized on the GPU, then the type's product kernel) must equal the CPU
//! engine's `quantize_act` + `vec_dot` bit for bit, and lie near the f64 dot of the
//! dequantized weights; the embedding gather must equal `dequantize_row`. The fast products
//! (`--numerics fast`, one token) must equal the CPU's within float reordering, and the fast
//! prompt products (tensor cores, f16 operands) the f64 dot within f16 rounding. Skips without
//! a GPU.

mod common;
mod gpu;

use cbtop::engine::cuda::KernelCheck;
use cbtop::engine::Numerics;
use cbtop::quant::{dequantize_row, quantize_act, vec_dot, ActType, GgmlType};
use cbtop::rng::SplitMix64;

#[test]
fn every_type_matches_the_cpu_dequantization() {
    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let k = KernelCheck::new(&g, Numerics::Exact).unwrap();
    let mut failures = Vec::new();
    // One token (the decode kernel) and a batch of 11 (two tiles of the batch kernel); a
    // short row and a long one (past the product's 64-block chunk for the 32-weight types).
    // Types whose blocks do not divide a shape's rows skip it.
    // Rows of the float types only: a last tile half full (520), rows whose f16 bytes are not
    // whole 16-byte chunks (36: the batch kernel takes them), a long row (4864).
    for (rows, cols, n, seed) in [
        (37, 512, 1, 7),
        (37, 512, 11, 8),
        (5, 2560, 3, 9),
        (7, 520, 1, 10),
        (3, 36, 1, 11),
        (9, 4864, 1, 12),
    ] {
        check_shape(&k, rows, cols, n, seed, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fast one-token products against the CPU's: the same integer block sums (or the same
/// float products), only the f32 sums reordered, so within 2e-5 of the sum of |w x|;
/// the legacy 32-weight types' CPU-order kernels (`KernelCheck::fast_in_cpu_order`) give its
/// bits.
#[test]
fn fast_products_match_the_cpu_within_reordering() {
    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let free = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let ordered = KernelCheck::fast_in_cpu_order(&g).unwrap();
    let mut failures = Vec::new();
    // Rows that leave a block of four partly empty; rows shorter and longer than a warp's 32
    // units; a matrix tall enough to take eight rows per block (`fast_rows_for`), its last
    // block partly empty.
    let shapes = [
        (37, 512, 17),
        (5, 2560, 18),
        (130, 3584, 19),
        (3, 256, 20),
        (65541, 256, 21),
    ];
    let kernels = [("free", &free), ("in CPU order", &ordered)];
    for ((rows, cols, seed), (order, k)) in shapes.into_iter().flat_map(|s| kernels.map(|k| (s, k)))
    {
        let mut rng = SplitMix64::new(seed);
        for ty in GgmlType::ALL {
            let rb = ty.row_bytes(cols).unwrap();
            let w = gpu::random_rows(ty, rows, cols, &mut rng);
            let x: Vec<f32> = (0..cols).map(|_| rng.next_signed()).collect();
            let got = k.matvec(ty, &w, rows, cols, &x).unwrap();
            let act = quantize_act(ActType::for_weights(ty), &x);
            let mut row = vec![0f32; cols];
            let mut worst = 0f64;
            let mut not_bits = 0;
            for r in 0..rows {
                let wr = &w[r * rb..(r + 1) * rb];
                let cpu = vec_dot(ty, wr, &act);
                not_bits += usize::from(got[r].to_bits() != cpu.to_bits());
                let cpu = cpu as f64;
                dequantize_row(ty, wr, &mut row);
                let mag: f64 = row
                    .iter()
                    .zip(&x)
                    .map(|(a, b)| (*a as f64 * *b as f64).abs())
                    .sum();
                worst = worst.max((got[r] as f64 - cpu).abs() / (mag + 1e-6));
            }
            let what = format!("fast {ty} {rows}x{cols} ({order})");
            eprintln!(
                "{what}: max |gpu - cpu| / sum|w x| = {worst:.2e}, {not_bits} rows not the CPU's bits"
            );
            if worst > 2e-5 {
                failures.push(format!("{what}: {worst:.2e} of sum|w x|"));
            }
            if order != "free" && ty.block_size() == 32 && not_bits > 0 {
                failures.push(format!(
                    "{what}: {not_bits} of {rows} rows differ from the CPU's bits"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The tensor-core prompt products (fast numerics, 64 tokens or more): f16 operands with f32
/// accumulation, so within 2e-3 of the sum of |w x| of the f64 dot of the dequantized weights
/// (each operand rounded to f16 moves by at most 2^-11 of itself). Shapes with a partial
/// output tile in both directions, and taller than the check's 128-row weight scratch; run as
/// if the GPU had one multiprocessor (the 128 x 128 tile), 2 (64 x 128 on the 256-wide shape,
/// K split in two on the 1024-wide one) and 1000 (K split in five on the 2560-wide shape, the
/// 64 x 64 tile on the 256-wide one). On Hopper the 128 x 128 tile is the wgmma kernel's, and
/// rows of 4096 take its 128 x 256 tile (whole on one multiprocessor, K split in four on 4).
/// Quantized types at these batches (up to 256 tokens) take the kernels that read the quantized
/// weights instead (kernels/gemm_q.cu), under the same bound; tests/gpu_qgemm.rs checks them
/// against the expansion (`CBTOP_QGEMM=0`).
#[test]
fn tensor_core_products_match_the_f64_dot_within_f16_rounding() {
    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let mut failures = Vec::new();
    for (sms, rows, cols, n, seed) in [
        (1, 300, 512, 70, 27),
        (2, 130, 256, 100, 30),
        (2, 130, 1024, 100, 31),
        (1000, 37, 256, 200, 28),
        (1000, 129, 2560, 64, 29),
        (1, 300, 4096, 70, 32),
        (4, 130, 4096, 100, 33),
    ] {
        let k = KernelCheck::with_multiprocessors(&g, Numerics::Fast, Some(sms)).unwrap();
        let mut rng = SplitMix64::new(seed);
        for ty in GgmlType::ALL {
            let w = gpu::random_rows(ty, rows, cols, &mut rng);
            let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
            let got = k.matvec(ty, &w, rows, cols, &x).unwrap();
            let worst = gpu::worst_error(ty, &w, rows, cols, &x, &got);
            eprintln!(
                "tensor cores {ty} {rows}x{cols}, {n} tokens, {sms} SMs: max |gpu - f64| / \
                 sum|w x| = {worst:.2e}"
            );
            if worst > 2e-3 {
                failures.push(format!(
                    "tensor cores {ty} {rows}x{cols} n={n}: {worst:.2e}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check_shape(
    k: &KernelCheck,
    rows: usize,
    cols: usize,
    n: usize,
    seed: u64,
    failures: &mut Vec<String>,
) {
    let mut rng = SplitMix64::new(seed);
    for ty in GgmlType::ALL
        .into_iter()
        .filter(|t| cols.is_multiple_of(t.block_size()))
    {
        let rb = ty.row_bytes(cols).unwrap();
        let w = gpu::random_rows(ty, rows, cols, &mut rng);
        let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
        let mut deq = vec![0f32; rows * cols];
        for (r, out) in deq.chunks_exact_mut(cols).enumerate() {
            dequantize_row(ty, &w[r * rb..(r + 1) * rb], out);
        }
        let got = k.matvec(ty, &w, rows, cols, &x).unwrap();
        let mut unequal = 0usize;
        for t in 0..n {
            let act = quantize_act(ActType::for_weights(ty), &x[t * cols..(t + 1) * cols]);
            for r in 0..rows {
                let cpu = vec_dot(ty, &w[r * rb..(r + 1) * rb], &act);
                if cpu.to_bits() != got[t * rows + r].to_bits() {
                    unequal += 1;
                }
            }
        }
        // Against the exact dot: the activation rounding (8-bit blocks with an f16 scale, or
        // f16/bf16) moves each value by at most max|x| / 200, so the product by at most
        // sum|w| * max|x| / 200. `worst` is the error in units of that bound.
        let mut worst = 0f64;
        for t in 0..n {
            let xt = &x[t * cols..(t + 1) * cols];
            let xmax = xt.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
            for r in 0..rows {
                let wr = &deq[r * cols..(r + 1) * cols];
                let want: f64 = wr.iter().zip(xt).map(|(a, b)| *a as f64 * *b as f64).sum();
                let bound = wr.iter().map(|v| v.abs() as f64).sum::<f64>() * xmax / 200.0 + 1e-4;
                worst = worst.max((got[t * rows + r] as f64 - want).abs() / bound);
            }
        }
        let tokens = [0u32, rows as u32 - 1, rows as u32 / 2, rows as u32 / 2];
        let emb = k.embed(ty, &w, rows, cols, &tokens).unwrap();
        let mut emb_worst = 0f32;
        for (i, &t) in tokens.iter().enumerate() {
            let want = &deq[t as usize * cols..(t as usize + 1) * cols];
            emb_worst = emb_worst.max(common::max_abs_diff(&emb[i * cols..(i + 1) * cols], want));
        }
        eprintln!(
            "{ty} {rows}x{cols}, {n} tokens: {unequal} of {} products differ from the CPU's bits; \
             vs the f64 dot {worst:.3} of the rounding bound; embed max |diff| {emb_worst:.2e}",
            n * rows
        );
        if unequal > 0 || worst > 1.0 || emb_worst != 0.0 {
            failures.push(format!(
                "{ty} {rows}x{cols} n={n}: {unequal} products differ from the CPU, \
                 f64 diff {worst}, embed {emb_worst}"
            ));
        }
    }
}

/// A decode step's random operands: the token's q, k and v before RoPE (scales 3, 3, 1) and
/// `pos` cached K and V rows as f16 (scales 3, 1), drawn in that order from `seed`.
struct RandomStep {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    keys: Vec<half::f16>,
    values: Vec<half::f16>,
}

fn random_step(
    shape: cbtop::engine::cpu::attention::AttnShape,
    pos: usize,
    seed: u64,
) -> RandomStep {
    let mut rng = SplitMix64::new(seed);
    let kv_dim = shape.n_kv_heads * shape.head_dim;
    let mut draw =
        |n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| s * rng.next_signed()).collect() };
    let (q, k, v) = (
        draw(shape.n_heads * shape.head_dim, 3.0),
        draw(kv_dim, 3.0),
        draw(kv_dim, 1.0),
    );
    let mut half = |s: f32| -> Vec<half::f16> {
        draw(pos * kv_dim, s)
            .into_iter()
            .map(half::f16::from_f32)
            .collect()
    };
    let (keys, values) = (half(3.0), half(1.0));
    RandomStep {
        q,
        k,
        v,
        keys,
        values,
    }
}

/// f16 values as their bits (the cache's layout).
fn f16_bits(x: &[half::f16]) -> Vec<u16> {
    x.iter().map(|h| h.to_bits()).collect()
}

/// The fast numerics' prompt attention on tensor cores (kernels/attention_prefill.cu) against
/// causal softmax attention in f64 on the same f16 cache, for every head size it has a kernel
/// for (64, 96, 128, and 256, whose output columns two blocks share), grouped and one query
/// head per KV head, batches that start mid-tile and end mid-tile, and sliding windows. The
/// kernel rounds the scaled query and the softmax weights to f16, so a query's output may
/// move by 2^-11 · (3 + 2 · the largest scaled sum of |q_i k_i| over its keys) of the largest
/// |v| (the scores' rounding error, doubled through the softmax, and the weights'); the test
/// allows twice that.
#[test]
fn fast_prefill_attention_matches_f64_attention() {
    use cbtop::engine::cpu::attention::AttnShape;
    use cbtop::engine::cuda::PrefillStep;
    use half::f16;

    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let kc = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let mut failures = Vec::new();
    // (n_heads, n_kv_heads, head_dim, first position, queries, window, query scale)
    for (n_heads, n_kv_heads, head_dim, pos, n, window, q_scale) in [
        (4usize, 2usize, 64usize, 0usize, 100usize, 0usize, 1.0f32),
        (6, 2, 96, 37, 130, 0, 1.0),
        (4, 4, 96, 0, 64, 0, 0.3),
        (6, 2, 96, 3, 90, 40, 1.0),
        (4, 2, 128, 10, 200, 0, 1.0),
        (4, 1, 256, 0, 150, 0, 1.0),
        (8, 4, 256, 70, 200, 48, 1.0),
        (4, 1, 256, 500, 120, 512, 0.0625),
        (2, 2, 256, 0, 64, 0, 1.0),
    ] {
        let shape = AttnShape {
            n_heads,
            n_kv_heads,
            head_dim,
        };
        let (q_dim, kv_dim) = (n_heads * head_dim, n_kv_heads * head_dim);
        let mut rng = SplitMix64::new((pos * 7919 + head_dim * 31 + n) as u64);
        let q: Vec<f32> = (0..n * q_dim)
            .map(|_| q_scale * rng.next_signed())
            .collect();
        let mut half = |len: usize| -> Vec<f16> {
            (0..len).map(|_| f16::from_f32(rng.next_signed())).collect()
        };
        let (keys, values) = (half((pos + n) * kv_dim), half((pos + n) * kv_dim));
        // gemma3 and phi3 scale the query instead, and the scores by 1.
        let scale = if q_scale == 1.0 {
            1.0 / (head_dim as f32).sqrt()
        } else {
            1.0
        };
        let name = format!(
            "{n_heads}/{n_kv_heads} heads of {head_dim}, {n} queries from {pos}, window {window}"
        );
        let got = match kc.prefill_attention(&PrefillStep {
            shape,
            scale,
            window,
            q: &q,
            keys: &f16_bits(&keys),
            values: &f16_bits(&values),
        }) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let group = n_heads / n_kv_heads;
        let mut worst = 0f64;
        'rows: for t in 0..n {
            let p = pos + t;
            let first = if window > 0 {
                (p + 1).saturating_sub(window)
            } else {
                0
            };
            for h in 0..n_heads {
                let qh = &q[t * q_dim + h * head_dim..][..head_dim];
                let kvo = (h / group) * head_dim;
                let row = |c: &[f16], j: usize| -> Vec<f64> {
                    c[j * kv_dim + kvo..][..head_dim]
                        .iter()
                        .map(|x| x.to_f64())
                        .collect()
                };
                let mut scores = Vec::new();
                let mut most_abs = 0f64;
                for j in first..=p {
                    let k = row(&keys, j);
                    let dot: f64 = qh.iter().zip(&k).map(|(a, b)| *a as f64 * b).sum();
                    let abs: f64 = qh.iter().zip(&k).map(|(a, b)| (*a as f64 * b).abs()).sum();
                    scores.push(dot * scale as f64);
                    most_abs = most_abs.max(abs * scale as f64);
                }
                let m = scores.iter().fold(f64::MIN, |a, b| a.max(*b));
                let weights: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let sum: f64 = weights.iter().sum();
                let mut want = vec![0f64; head_dim];
                let mut vmax = 0f64;
                for (w, j) in weights.iter().zip(first..=p) {
                    for (o, v) in want.iter_mut().zip(row(&values, j)) {
                        *o += w / sum * v;
                        vmax = vmax.max(v.abs());
                    }
                }
                let bound = 2.0 * vmax * (3.0 + 2.0 * most_abs) / 2048.0;
                let out = &got[t * q_dim + h * head_dim..][..head_dim];
                for (d, (o, w)) in out.iter().zip(&want).enumerate() {
                    let e = (*o as f64 - w).abs();
                    worst = worst.max(e / bound);
                    if e > bound || !o.is_finite() {
                        failures.push(format!(
                            "{name}: query {t} head {h} dim {d}: {o} against {w} (bound {bound:.2e})"
                        ));
                        break 'rows;
                    }
                }
            }
        }
        eprintln!("{name}: worst error {worst:.3} of the bound");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fast numerics' decode attention (RoPE on the query and the step's K, the step's cache
/// rows written, attention split over the context, in one launch) against the CPU engine. The
/// kernel sums in f32 while the CPU rounds its running sum of V to f16 at every position, so
/// the outputs agree within 2^-11 · (1 + sqrt(positions)) of the largest output (a random
/// walk of f16 roundings, and the last one); the step's cache rows are the CPU's f16 bits.
/// Asked to keep the CPU's order up to 128 positions (as the engine asks for models whose
/// products all keep it), contexts that short give the CPU's output bits. Contexts of one chunk and of
/// several (128 positions each, so the splits are combined); head sizes 64 and 128 (the
/// kernel's instantiations), 80 (its general one) and 256 (gemma3's heads: the wide kernel,
/// which has no CPU-order path, and the grouped tensor-core kernel for heads of 256); NORM and
/// NEOX RoPE. Each step also runs
/// on the grouped path (a KV head's query heads in one block: groups of 3, 7, 3 and 8 query
/// heads here), held to the same bound; one head per KV head and 16 per KV head take the
/// one-head blocks either way.
#[test]
fn fast_decode_attention_matches_the_cpu() {
    use cbtop::engine::cpu::attention::{attention, AttnShape};
    use cbtop::engine::cpu::ops::{rope, rope_table};
    use cbtop::engine::cuda::DecodeStep;
    use cbtop::model::RopeStyle;
    use half::f16;

    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let kc = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let mut failures = Vec::new();
    for (n_heads, n_kv_heads, head_dim, neox) in [
        (9, 3, 64, false),
        (14, 2, 128, true),
        (6, 2, 80, true),
        (16, 2, 128, false),
        (4, 4, 64, true),
        (16, 1, 64, true),
        (4, 1, 256, true),
        (8, 4, 256, false),
    ] {
        for pos in [0usize, 1, 57, 127, 128, 300, 1000, 301, 999, 4200, 4201] {
            let shape = AttnShape {
                n_heads,
                n_kv_heads,
                head_dim,
            };
            let kv_dim = n_kv_heads * head_dim;
            let RandomStep {
                q,
                k,
                v,
                mut keys,
                mut values,
            } = random_step(shape, pos, (pos * 131 + head_dim) as u64);
            let bits = f16_bits;
            let step = DecodeStep {
                shape,
                n_rot: head_dim,
                neox,
                rope_base: 10000.0,
                window: 0,
                q: &q,
                k: &k,
                v: &v,
                keys: &bits(&keys),
                values: &bits(&values),
            };
            // Eight splits keep chunks of 128 positions; two make longer ones past 256.
            let splits = if pos % 2 == 0 { 8 } else { 2 };
            let got = kc.decode_attention(&step, splits, 0, 0, None).unwrap();
            let ordered = kc.decode_attention(&step, splits, 0, 128, None).unwrap();
            // The grouped path: many chunks, or few long ones (at 4201, chunks of 20 tiles).
            let group_splits = if pos % 2 == 0 { 64 } else { 3 };
            let grouped = kc
                .decode_attention(&step, splits, group_splits, 0, None)
                .unwrap();

            let table = rope_table(pos, head_dim, 10000.0);
            let style = if neox {
                RopeStyle::Neox
            } else {
                RopeStyle::Norm
            };
            let (mut qr, mut kr) = (q.clone(), k.clone());
            rope(&mut qr, head_dim, &table, style);
            rope(&mut kr, head_dim, &table, style);
            keys.extend(kr.iter().map(|&x| f16::from_f32(x)));
            values.extend(v.iter().map(|&x| f16::from_f32(x)));
            let mut want = vec![0f32; n_heads * head_dim];
            attention(shape, &qr, &keys, &values, pos, &mut want);

            let what = format!(
                "heads {n_heads}/{n_kv_heads} x {head_dim}, position {pos}, {splits} splits"
            );
            for out in [&got, &ordered, &grouped] {
                if out.key_row != bits(&keys[pos * kv_dim..])
                    || out.value_row != bits(&values[pos * kv_dim..])
                {
                    failures.push(format!(
                        "{what}: the step's cache rows differ from the CPU's"
                    ));
                }
            }
            // Heads of 256 take the wide kernel, which has no CPU-order path.
            let in_order = pos < 128 && head_dim <= 128;
            let same_bits = ordered
                .out
                .iter()
                .zip(&want)
                .filter(|(a, b)| a.to_bits() == b.to_bits())
                .count();
            eprintln!(
                "{what}, CPU order asked: {same_bits} of {} outputs are the CPU's bits",
                want.len()
            );
            if in_order && same_bits != want.len() {
                failures.push(format!(
                    "{what}: in the CPU's order, {} outputs differ from the CPU's bits",
                    want.len() - same_bits
                ));
            }
            if !in_order && ordered.out != got.out {
                failures.push(format!(
                    "{what}: past 128 positions, asking for the CPU's order changed the output"
                ));
            }
            let top = want.iter().fold(0f32, |m, x| m.max(x.abs()));
            let bound = (1.0 + ((pos + 1) as f32).sqrt()) / 2048.0;
            for (path, out) in [("one head a block", &got), ("grouped", &grouped)] {
                let worst = common::max_abs_diff(&out.out, &want);
                eprintln!(
                    "{what}, {path}: max |gpu - cpu| = {worst:.2e} (largest output {top:.2e})"
                );
                if worst > bound * top {
                    failures.push(format!(
                        "{what}, {path}: {worst:.2e} off, over {bound:.2e} of {top:.2e}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The decode attention quantizes its output for the output projection (the engine then runs
/// no act_quant launch before attn_out): in every format it does that in, the bits are the
/// CPU quantizer's of the kernel's own float output. One chunk, several combined, and the
/// CPU-order path, and the grouped path (one chunk and several); head sizes 64 and 128.
#[test]
fn fast_decode_attention_quantizes_its_output_as_the_cpu_quantizer() {
    use cbtop::engine::cpu::attention::AttnShape;
    use cbtop::engine::cuda::DecodeStep;
    use cbtop::quant::QuantizedAct;

    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let kc = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let mut failures = Vec::new();
    for (n_heads, n_kv_heads, head_dim) in [(9, 3, 64), (14, 2, 128), (4, 1, 256)] {
        for (pos, splits, group_splits, ordered_upto) in [
            (0usize, 8, 0, 0),
            (300, 8, 0, 0),
            (57, 2, 0, 128),
            (300, 8, 1, 0),
            (1000, 8, 4, 0),
        ] {
            let shape = AttnShape {
                n_heads,
                n_kv_heads,
                head_dim,
            };
            let r = random_step(shape, pos, (pos * 7 + head_dim) as u64);
            let step = DecodeStep {
                shape,
                n_rot: head_dim,
                neox: true,
                rope_base: 10000.0,
                window: 0,
                q: &r.q,
                k: &r.k,
                v: &r.v,
                keys: &f16_bits(&r.keys),
                values: &f16_bits(&r.values),
            };
            for kind in [
                ActType::Q8_0,
                ActType::Q8_1,
                ActType::F16,
                ActType::BF16,
                ActType::F32,
            ] {
                let what = format!(
                    "{n_heads} heads x {head_dim}, position {pos}, {group_splits} grouped \
                     chunks, {kind:?}"
                );
                let got = kc
                    .decode_attention(&step, splits, group_splits, ordered_upto, Some(kind))
                    .unwrap();
                let plain = kc
                    .decode_attention(&step, splits, group_splits, ordered_upto, None)
                    .unwrap();
                if got.out != plain.out {
                    failures.push(format!("{what}: quantizing changed the float output"));
                }
                let gq = got.quantized.expect("asked for");
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
                let same = match quantize_act(kind, &got.out) {
                    QuantizedAct::F32(x) | QuantizedAct::F16(x) | QuantizedAct::BF16(x) => {
                        bits(&x) == bits(&gq.xf[..x.len()])
                    }
                    QuantizedAct::Q8_0(b) => b.iter().enumerate().all(|(i, b)| {
                        b.d.to_bits() == gq.d[i].to_bits() && b.qs[..] == gq.q[32 * i..32 * i + 32]
                    }),
                    QuantizedAct::Q8_1(b) => b.iter().enumerate().all(|(i, b)| {
                        b.d.to_bits() == gq.d[i].to_bits()
                            && b.s.to_bits() == gq.x[i].to_bits()
                            && b.qs[..] == gq.q[32 * i..32 * i + 32]
                    }),
                    QuantizedAct::Q8_K(_) => unreachable!("not asked"),
                };
                if !same {
                    failures.push(format!("{what}: not the CPU quantizer's bits"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A sliding-window layer's decode attention (gemma3): with a window of W positions the step at
/// position p sees only the keys at p - W + 1 ..= p, and the kernels read only those. Against
/// the CPU engine's attention over the window's rows alone (the keys before it are random
/// here, so any read of them shows): the CPU-order path gives the CPU's bits, the one-head and
/// grouped paths (head sizes 64, 128 and 256: the tensor-core grouped kernels; 80: the
/// CUDA-core one) agree within the bound of `fast_decode_attention_matches_the_cpu`. Windows shorter
/// and longer than the context, and contexts that split into several chunks.
#[test]
fn windowed_decode_attention_reads_only_the_window() {
    use cbtop::engine::cpu::attention::{attention_layer, AttnLayer, AttnShape};
    use cbtop::engine::cpu::ops::{rope, rope_table};
    use cbtop::engine::cuda::DecodeStep;
    use cbtop::model::RopeStyle;
    use half::f16;

    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let kc = KernelCheck::new(&g, Numerics::Fast).unwrap();
    let mut failures = Vec::new();
    for (n_heads, n_kv_heads, head_dim) in [(8, 2, 64), (4, 1, 128), (6, 2, 80), (4, 1, 256)] {
        for (pos, window) in [
            (0usize, 4usize),
            (5, 4),
            (100, 32),
            (127, 128),
            (600, 512),
            (1300, 1024),
            (300, 4096),
        ] {
            let shape = AttnShape {
                n_heads,
                n_kv_heads,
                head_dim,
            };
            let kv_dim = n_kv_heads * head_dim;
            let RandomStep {
                q,
                k,
                v,
                mut keys,
                mut values,
            } = random_step(shape, pos, (pos * 17 + window + head_dim) as u64);
            let step = DecodeStep {
                shape,
                n_rot: head_dim,
                neox: true,
                rope_base: 10000.0,
                window,
                q: &q,
                k: &k,
                v: &v,
                keys: &f16_bits(&keys),
                values: &f16_bits(&values),
            };
            let got = kc.decode_attention(&step, 8, 0, 0, None).unwrap();
            let ordered = kc.decode_attention(&step, 8, 0, 128, None).unwrap();
            let grouped = kc.decode_attention(&step, 8, 16, 0, None).unwrap();

            let table = rope_table(pos, head_dim, 10000.0);
            let (mut qr, mut kr) = (q.clone(), k.clone());
            rope(&mut qr, head_dim, &table, RopeStyle::Neox);
            rope(&mut kr, head_dim, &table, RopeStyle::Neox);
            keys.extend(kr.iter().map(|&x| f16::from_f32(x)));
            values.extend(v.iter().map(|&x| f16::from_f32(x)));
            let first = (pos + 1).saturating_sub(window);
            let mut want = vec![0f32; n_heads * head_dim];
            // The CPU engine's own window: it starts at the window's first key.
            let layer = AttnLayer {
                window: Some(window),
                ..AttnLayer::causal(head_dim)
            };
            attention_layer(shape, layer, &qr, &keys, &values, pos, &mut want);
            let what = format!(
                "heads {n_heads}/{n_kv_heads} x {head_dim}, position {pos}, window {window}"
            );
            for out in [&got, &ordered, &grouped] {
                if out.key_row != f16_bits(&keys[pos * kv_dim..]) {
                    failures.push(format!("{what}: the step's K row differs from the CPU's"));
                }
            }
            if pos - first < 128 && head_dim <= 128 && ordered.out != want {
                failures.push(format!("{what}: the CPU-order path is not the CPU's bits"));
            }
            let top = want.iter().fold(0f32, |m, x| m.max(x.abs()));
            let bound = (1.0 + ((pos - first + 1) as f32).sqrt()) / 2048.0;
            for (path, out) in [("one head a block", &got), ("grouped", &grouped)] {
                let worst = common::max_abs_diff(&out.out, &want);
                eprintln!("{what}, {path}: max |gpu - cpu| = {worst:.2e} (largest {top:.2e})");
                if worst > bound * top {
                    failures.push(format!(
                        "{what}, {path}: {worst:.2e} over {bound:.2e} of {top:.2e}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The exact numerics' attention kernel (kernels/attention.cu, prompts and decode alike)
/// against the CPU engine's, bit for bit: a few queries (the f16 decode order) and 64 or more
/// (the tiled f32 order), heads of 128 and of 256 (gemma3-1b's, four query heads on one KV
/// head), with and without a sliding window. Each case takes thousands to hundreds of
/// thousands of softmax weights, so an exp that is not glibc's expf bit for bit (about one
/// of its results in 2,000 is not the correctly rounded one) shows in the outputs.
#[test]
fn exact_attention_is_the_cpu_engines_bit_for_bit() {
    use cbtop::engine::cpu::attention::{attention_layer, AttnLayer, AttnShape};
    use half::f16;

    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let kc = KernelCheck::new(&g, Numerics::Exact).unwrap();
    let mut rng = SplitMix64::new(256);
    let mut failures = Vec::new();
    for (n_heads, n_kv_heads, head_dim) in [(4usize, 2usize, 128usize), (4, 1, 256)] {
        for (n, pos0, window) in [
            (1usize, 300usize, None),
            (3, 200, Some(64usize)),
            (80, 0, Some(4)),
            (160, 0, None),
            (96, 500, Some(512)),
        ] {
            let shape = AttnShape {
                n_heads,
                n_kv_heads,
                head_dim,
            };
            let cache = (pos0 + n) * n_kv_heads * head_dim;
            let mut rows = |len: usize| -> Vec<f16> {
                (0..len).map(|_| f16::from_f32(rng.next_signed())).collect()
            };
            let (keys, values) = (rows(cache), rows(cache));
            let q: Vec<f32> = (0..n * n_heads * head_dim)
                .map(|_| 2.0 * rng.next_signed())
                .collect();
            let layer = AttnLayer {
                window,
                ..AttnLayer::causal(head_dim)
            };
            let mut want = vec![0f32; q.len()];
            attention_layer(shape, layer, &q, &keys, &values, pos0, &mut want);
            let got = kc
                .attention(
                    shape,
                    layer,
                    &q,
                    (&f16_bits(&keys), &f16_bits(&values)),
                    pos0,
                )
                .unwrap();
            let differ = f32_bits(&got)
                .iter()
                .zip(f32_bits(&want))
                .filter(|(a, b)| **a != *b)
                .count();
            let what = format!(
                "heads {n_heads}/{n_kv_heads} x {head_dim}, {n} queries from position {pos0}, \
                 window {window:?}"
            );
            eprintln!(
                "{what}: {differ} of {} outputs differ from the CPU's bits",
                q.len()
            );
            if differ > 0 {
                failures.push(format!("{what}: {differ} outputs are not the CPU's bits"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// f32 values as their bits, for comparisons that must be bit for bit.
fn f32_bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// The architectures' extra per-row kernels against the CPU engine's functions, bit for bit
/// (both numerics launch the same kernels): qwen3's and gemma3's per-head Q/K RMSNorm (head
/// sizes 64, 128, 256 and an odd 80, several tokens), gemma3's post norm added to the
/// residual (rows of 640 and of 2560, more than one 1024-thread block a row), and GeGLU from
/// the CPU's f16 GELU table (the cut-offs at +-10 and values across the table's range).
#[test]
fn arch_row_kernels_give_the_cpu_engines_bits() {
    use cbtop::engine::cpu::geglu::geglu;
    use cbtop::engine::cpu::ops::{add_in_place, rms_norm};

    let Some(g) = gpu::gpu("gpu_kernels") else {
        return;
    };
    let kc = KernelCheck::new(&g, Numerics::Exact).unwrap();
    let mut rng = SplitMix64::new(38);
    let mut draw =
        |n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| s * rng.next_signed()).collect() };
    let mut failures = Vec::new();
    for (hd, heads, kv_heads, tokens) in [
        (64, 8, 2, 3),
        (128, 16, 8, 1),
        (256, 4, 1, 5),
        (80, 6, 2, 2),
    ] {
        let (q, k) = (
            draw(tokens * heads * hd, 4.0),
            draw(tokens * kv_heads * hd, 4.0),
        );
        let (qw, kw) = (draw(hd, 2.0), draw(hd, 2.0));
        let eps = 1e-6;
        let (gq, gk) = kc
            .qk_norm(&q, &k, (&qw, &kw), (heads, kv_heads), eps)
            .unwrap();
        let per_head = |x: &[f32], w: &[f32]| -> Vec<f32> {
            let mut out = vec![0f32; x.len()];
            for (o, r) in out.chunks_exact_mut(hd).zip(x.chunks_exact(hd)) {
                rms_norm(r, w, eps, o);
            }
            out
        };
        if f32_bits(&gq) != f32_bits(&per_head(&q, &qw))
            || f32_bits(&gk) != f32_bits(&per_head(&k, &kw))
        {
            failures.push(format!("qk_norm, head_dim {hd}: not the CPU's bits"));
        }
    }
    for (cols, rows) in [(640usize, 3usize), (2560, 2)] {
        let (y, w, x) = (
            draw(rows * cols, 30.0),
            draw(cols, 1.5),
            draw(rows * cols, 10.0),
        );
        let got = kc.post_norm(&y, &w, &x, 1e-6).unwrap();
        let mut want = x.clone();
        for (xr, yr) in want.chunks_exact_mut(cols).zip(y.chunks_exact(cols)) {
            let mut normed = vec![0f32; cols];
            rms_norm(yr, &w, 1e-6, &mut normed);
            add_in_place(xr, &normed);
        }
        if f32_bits(&got) != f32_bits(&want) {
            failures.push(format!(
                "post_norm_residual, {cols} columns: not the CPU's bits"
            ));
        }
    }
    let mut gate = draw(6912, 14.0);
    gate[..8].copy_from_slice(&[-10.0, 10.0, -9.999, 9.999, -10.001, 10.001, 0.0, -0.0]);
    let up = draw(6912, 3.0);
    let got = kc.geglu(&gate, &up).unwrap();
    let mut want = gate.clone();
    geglu(&mut want, &up);
    if f32_bits(&got) != f32_bits(&want) {
        failures.push("geglu: not the CPU's bits".to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
