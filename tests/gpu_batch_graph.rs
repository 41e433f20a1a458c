//! A GPU batch step replayed from its CUDA graph (one per batch size,
//! src/engine/cuda/batch_graphs.rs) gives the bits of the same step launched kernel by kernel
//! from the host (`CBTOP_BATCH_GRAPH=0`): the logits of three sequences that stop at different
//! steps (steps of 3, 2 and 1 rows), and the greedy picks made on the device with a sequence
//! sitting out every other step while the kernels stamp themselves (`--timing events`), with
//! the same bricks and kernels timed; and batches of 20 and 64 sequences, whose products take
//! the tensor-core kernels under `fast`. Skips (saying why) without a GPU.
//!
//! One test function: it sets `CBTOP_BATCH_GRAPH`, which `CudaBatch::new` reads, so no other
//! test of this binary may run beside it.

mod common;
mod gpu;

use std::time::Instant;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaBatch, CudaEngine, GpuDesc, Timing};
use cbtop::engine::{Batched, Numerics};
use common::batch::{assert_same_bits, batched, one_sitting_out, requests, Run};

const MODELS: [&str; 5] = [
    "conf-qwen2-Q4_0",
    "conf-qwen2-Q8_0",
    "conf-llama-Q4_K_S",
    "conf-qwen2-Q6_K",
    "conf-qwen2-F16",
];

/// `f` with the batch graphs on or off.
fn with_graph<T>(on: bool, f: impl FnOnce() -> T) -> T {
    std::env::set_var("CBTOP_BATCH_GRAPH", if on { "1" } else { "0" });
    let r = f();
    std::env::remove_var("CBTOP_BATCH_GRAPH");
    r
}

/// The three requests in one batch: each sequence's tokens and logits, and the steps captured.
fn logits_run(g: &GpuDesc, name: &str, numerics: Numerics, on: bool) -> (Vec<Run>, usize) {
    let (model, prompts, max, _) = requests(name);
    with_graph(on, || {
        let mut e = CudaEngine::new(model.clone(), g, 64, Timing::Off, numerics).unwrap();
        let mut b = CudaBatch::new(&mut e, 64, prompts.len()).unwrap();
        let out = batched(&mut b, &prompts, &max);
        (out, b.captured_steps())
    })
}

/// `n` sequences (the three prompts in turn, stopping after 2 to 5 tokens) in one batch:
/// each sequence's tokens and logits, the steps captured, and the distinct step sizes (each
/// step's rows: the sequences not yet done).
fn many_run(
    g: &GpuDesc,
    name: &str,
    numerics: Numerics,
    n: usize,
    on: bool,
) -> (Vec<Run>, usize, usize) {
    let (model, three, _, _) = requests(name);
    let prompts: Vec<Vec<u32>> = (0..n).map(|s| three[s % 3].clone()).collect();
    let max: Vec<usize> = (0..n).map(|s| 2 + s % 4).collect();
    let mut sizes: Vec<usize> = (1..5)
        .map(|k| max.iter().filter(|&&m| m > k).count())
        .filter(|&rows| rows > 0)
        .collect();
    sizes.dedup();
    with_graph(on, || {
        let mut e = CudaEngine::new(model.clone(), g, 64, Timing::Off, numerics).unwrap();
        let mut b = CudaBatch::new(&mut e, 64, n).unwrap();
        let out = batched(&mut b, &prompts, &max);
        (out, b.captured_steps(), sizes.len())
    })
}

/// What a timed one-token step recorded: its bricks and layers (sorted), and its count of
/// kernels.
type Timed = (Vec<String>, usize);

/// Six greedy steps (the prompts, then one token each, sequence 1 sitting out every other
/// step) on an engine timing by kernel stamps: each step's picks, each one-token step's
/// timing, and the steps captured.
fn picks_run(g: &GpuDesc, numerics: Numerics, on: bool) -> (Vec<Vec<u32>>, Vec<Timed>, usize) {
    let (model, prompts, _, _) = requests("conf-qwen2-Q8_0");
    with_graph(on, || {
        let mut e = CudaEngine::new(model.clone(), g, 64, Timing::Events, numerics).unwrap();
        let mut b = CudaBatch::new(&mut e, 64, prompts.len()).unwrap();
        let mut rec = Recorder::new(true, Instant::now());
        let mut last: Vec<Vec<u32>> = prompts.clone();
        let (mut picks, mut timed) = (Vec::new(), Vec::new());
        for step in 0..6 {
            let w = one_sitting_out(&last, step);
            rec.take();
            rec.take_kernels();
            let dev = b.greedy(&w, &mut rec).unwrap();
            if step > 0 {
                let spans = rec.take();
                assert!(
                    spans.iter().map(|s| s.dur_ns).sum::<u64>() > 0,
                    "step {step}: the bricks were timed"
                );
                let mut owners: Vec<String> = spans
                    .iter()
                    .map(|s| format!("{:?} {:?}", s.brick, s.layer))
                    .collect();
                owners.sort();
                timed.push((owners, rec.take_kernels().len()));
            }
            let ran: Vec<usize> = w.iter().map(|&(s, _)| s).collect();
            for (&s, &t) in ran.iter().zip(&dev) {
                last[s] = vec![t];
            }
            picks.push(dev);
        }
        (picks, timed, b.captured_steps())
    })
}

#[test]
fn a_batch_step_replayed_from_its_graph_is_the_step_launched_from_the_host() {
    let Some(g) = gpu::gpu("gpu_batch_graph") else {
        return;
    };
    for numerics in [Numerics::Exact, Numerics::Fast] {
        for name in MODELS {
            let what = format!("{name} ({}), graph against host", numerics.name());
            let (host, none) = logits_run(&g, name, numerics, false);
            let (graphed, captured) = logits_run(&g, name, numerics, true);
            assert_eq!(none, 0, "{what}: CBTOP_BATCH_GRAPH=0 captured steps");
            // Steps of 3, 2 and 1 rows, logits copied back, unstamped: one graph each.
            assert_eq!(captured, 3, "{what}: one graph per batch size");
            let (_, _, max, _) = requests(name);
            for (s, &m) in max.iter().enumerate() {
                assert_same_bits(&what, s, &graphed[s], &host[s], m);
            }
        }

        // Batches whose products take the few-token kernels, the tensor-core kernels on
        // quantized weights (16 rows and more) and the f16 products (64 rows) under fast.
        for (name, n) in [
            ("conf-qwen2-Q4_0", 20),
            ("conf-qwen2-Q4_0", 64),
            ("conf-qwen2-F16", 64),
        ] {
            let what = format!("{name} ({}), {n} sequences", numerics.name());
            let (host, none, _) = many_run(&g, name, numerics, n, false);
            let (graphed, captured, sizes) = many_run(&g, name, numerics, n, true);
            assert_eq!(none, 0, "{what}: CBTOP_BATCH_GRAPH=0 captured steps");
            assert_eq!(captured, sizes, "{what}: one graph per batch size");
            for (s, run) in graphed.iter().enumerate() {
                assert_same_bits(&what, s, run, &host[s], 2 + s % 4);
            }
        }

        let what = format!("conf-qwen2-Q8_0 ({}), stamped picks", numerics.name());
        let (host_picks, host_timed, none) = picks_run(&g, numerics, false);
        let (picks, timed, captured) = picks_run(&g, numerics, true);
        assert_eq!(none, 0, "{what}: CBTOP_BATCH_GRAPH=0 captured steps");
        // Steps of 2 and 3 rows, picked on the device, each stamped and (captured with it
        // under events timing) unstamped.
        assert_eq!(captured, 4, "{what}: one graph per batch size and stamping");
        assert_eq!(picks, host_picks, "{what}: the picks");
        for (i, (a, b)) in timed.iter().zip(&host_timed).enumerate() {
            assert!(!a.0.is_empty() && a.1 > 0, "{what}: step {} timed", i + 1);
            assert_eq!(a, b, "{what}: step {}: bricks and kernels timed", i + 1);
        }
        assert_eq!(timed.len(), host_timed.len());
    }
}
