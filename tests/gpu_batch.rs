//! Several sequences decoded together on the GPU (`CudaBatch`): each sequence's tokens and
//! logits in a batch are its tokens and logits alone on the GPU, bit for bit under `exact`
//! (and the CPU engine's bits, which `exact` reproduces), within the conformance bounds under
//! `fast`, with prompts of different lengths and sequences that stop at different steps; the
//! picks made on the device are the host's picks from the same logits; and a batch too large
//! for the device's memory is refused with the figure. Skips (saying why) without a GPU.

mod common;
mod gpu;

use cbtop::brick::Recorder;
use cbtop::engine::cpu::CpuEngine;
use cbtop::engine::cuda::{CudaBatch, CudaEngine, GpuDesc, Timing};
use cbtop::engine::sampler::argmax;
use cbtop::engine::{Batched, EngineError, LogitsFor, Numerics};
use common::batch::{
    alone, assert_same_bits, assert_within, batched, one_sitting_out, requests, Run,
};

const MODELS: [&str; 5] = [
    "conf-qwen2-Q4_0",
    "conf-qwen2-Q8_0",
    "conf-llama-Q4_K_S",
    "conf-qwen2-Q6_K",
    "conf-qwen2-F16",
];

fn engine(g: &GpuDesc, model: &std::sync::Arc<cbtop::model::Model>, n: Numerics) -> CudaEngine {
    CudaEngine::new(model.clone(), g, 64, Timing::Off, n).unwrap()
}

/// One request alone on the GPU (the engine's cache cleared first).
fn gpu_alone(e: &mut CudaEngine, prompt: &[u32], max: usize) -> Run {
    e.reset();
    let rec = &mut Recorder::off();
    alone(
        |t| e.eval(t, LogitsFor::Last, rec).unwrap().pop().unwrap(),
        prompt,
        max,
    )
}

#[test]
fn a_sequence_in_a_gpu_batch_is_itself_alone() {
    let Some(g) = gpu::gpu("gpu_batch") else {
        return;
    };
    for numerics in [Numerics::Exact, Numerics::Fast] {
        for name in MODELS {
            let (model, prompts, max, bound) = requests(name);
            let what = format!("{name} ({})", numerics.name());
            let mut e = engine(&g, &model, numerics);
            let all = {
                let mut b = CudaBatch::new(&mut e, 64, prompts.len() + 1).unwrap();
                batched(&mut b, &prompts, &max)
            };
            let mut cpu = CpuEngine::new(model.clone(), 64);
            let mut worst = 0f32;
            for (s, (prompt, &m)) in prompts.iter().zip(&max).enumerate() {
                let one = gpu_alone(&mut e, prompt, m);
                match numerics {
                    Numerics::Exact => {
                        assert_same_bits(&what, s, &all[s], &one, m);
                        cpu.reset();
                        let on_cpu = alone(
                            |t| cpu.eval(t, LogitsFor::Last).unwrap().pop().unwrap(),
                            prompt,
                            m,
                        );
                        assert_same_bits(
                            &format!("{what} against the CPU"),
                            s,
                            &all[s],
                            &on_cpu,
                            m,
                        );
                    }
                    Numerics::Fast => {
                        worst = worst.max(assert_within(&what, s, &all[s], &one, bound));
                    }
                }
            }
            eprintln!("{what}: batch against alone, max |logit diff| {worst:.5} (bound {bound})");
        }
    }
}

#[test]
fn a_gpu_batch_picks_on_the_device_what_the_host_picks() {
    let Some(g) = gpu::gpu("gpu_batch") else {
        return;
    };
    let (model, prompts, _, _) = requests("conf-qwen2-Q8_0");
    for numerics in [Numerics::Exact, Numerics::Fast] {
        let (mut e1, mut e2) = (engine(&g, &model, numerics), engine(&g, &model, numerics));
        let mut picked = CudaBatch::new(&mut e1, 64, prompts.len()).unwrap();
        let mut hosted = CudaBatch::new(&mut e2, 64, prompts.len()).unwrap();
        let rec = &mut Recorder::off();
        let mut last: Vec<Vec<u32>> = prompts.clone();
        for step in 0..6 {
            let w = one_sitting_out(&last, step);
            let dev = picked.greedy(&w, rec).unwrap();
            let host: Vec<u32> = hosted
                .eval(&w, LogitsFor::Last, rec)
                .unwrap()
                .iter()
                .map(|rows| argmax(rows.last().unwrap()))
                .collect();
            assert_eq!(dev, host, "{}: step {step}", numerics.name());
            let ran: Vec<usize> = w.iter().map(|&(s, _)| s).collect();
            for (s, t) in ran.into_iter().zip(dev) {
                last[s] = vec![t];
            }
        }
        for s in 0..prompts.len() {
            assert_eq!(picked.position(s), hosted.position(s));
        }
    }
}

#[test]
fn a_gpu_batch_too_large_for_memory_is_refused_with_the_figure() {
    let Some(g) = gpu::gpu("gpu_batch") else {
        return;
    };
    let (model, _, _) = common::conformance_case("conf-qwen2-Q4_0");
    let mut e = engine(&g, &model, Numerics::Fast);
    match CudaBatch::new(&mut e, 64, 1 << 30) {
        Err(err @ EngineError::BatchTooLarge { .. }) => {
            let text = err.to_string();
            assert!(
                text.contains("--batch 1073741824") && text.contains("MiB"),
                "{text}"
            );
        }
        Err(err) => panic!("another error: {err}"),
        Ok(_) => panic!("a batch of 2^30 sequences was made"),
    }
    // The engine runs on its own cache after a batch.
    let rec = &mut Recorder::off();
    assert!(e.eval(&[1, 2, 3], LogitsFor::Last, rec).is_ok());
}
