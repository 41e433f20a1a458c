//! GPU against CPU on a synthetic qwen2.5-0.5b Q4_K_M (real shape, random weights): the same
//! 16 decode steps (CPU's greedy tokens fed to both) give logits within 0.05. Skips without a
//! GPU.

mod common;
mod gpu;

use std::sync::Arc;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaEngine, Timing};
use cbtop::engine::sampler::argmax;
use cbtop::engine::{Engine, LogitsFor, Numerics};
use cbtop::model::Model;
use cbtop::profile::Profile;
use cbtop::synth::{self, QuantMix};

#[test]
fn synth_qwen_0_5b_q4_k_m_gpu_matches_cpu_for_16_steps() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    let shape = Profile::shape("qwen2.5-0.5b").unwrap();
    let path = std::env::temp_dir().join(format!("cbtop-gpu-synth-{}.gguf", std::process::id()));
    synth::write_file(&shape, QuantMix::from_name("q4_k_m").unwrap(), 1, &path).unwrap();
    let model = Arc::new(Model::load(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    let prompt: Vec<u32> = vec![1, 17, 300, 4000, 52, 9];
    let mut cpu = Engine::new(model.clone(), 64);
    let mut gpu = CudaEngine::new(model, &g, 64, Timing::Off, Numerics::Exact).unwrap();
    let rec = &mut Recorder::off();
    let mut c = cpu.eval(&prompt, LogitsFor::Last).unwrap().pop().unwrap();
    let mut d = gpu
        .eval(&prompt, LogitsFor::Last, rec)
        .unwrap()
        .pop()
        .unwrap();
    let mut worst = 0f32;
    for step in 0..16 {
        let diff = common::max_abs_diff(&c, &d);
        eprintln!("step {step}: max |logit diff| GPU vs CPU {diff:.5}");
        worst = worst.max(diff);
        let t = argmax(&c);
        c = cpu.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap();
        d = gpu.eval(&[t], LogitsFor::Last, rec).unwrap().pop().unwrap();
    }
    eprintln!("synth qwen2.5-0.5b q4_k_m: worst GPU vs CPU {worst:.5} over 16 steps");
    assert!(worst <= 0.05, "GPU vs CPU logits differ by {worst} > 0.05");
}

/// Fast numerics on a long prompt: 600 tokens run as two chunks (512 + 88) of tensor-core
/// products and flash attention, then 8 decode steps on the fast one-token kernels. f16
/// operands move each logit by far more than the exact path's reordering, so the bound is
/// relative: within 2% of the CPU logits' range (max - min) at every step.
#[test]
fn synth_qwen_0_5b_fast_long_prompt_stays_near_the_cpu() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    let shape = Profile::shape("qwen2.5-0.5b").unwrap();
    let path =
        std::env::temp_dir().join(format!("cbtop-gpu-synth-fast-{}.gguf", std::process::id()));
    synth::write_file(&shape, QuantMix::from_name("q4_k_m").unwrap(), 2, &path).unwrap();
    let model = Arc::new(Model::load(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    let mut rng = cbtop::rng::SplitMix64::new(5);
    let prompt: Vec<u32> = (0..600)
        .map(|_| (rng.next_u64() % 150_000) as u32)
        .collect();
    let mut cpu = Engine::new(model.clone(), 640);
    let mut gpu = CudaEngine::new(model, &g, 640, Timing::Off, Numerics::Fast).unwrap();
    let rec = &mut Recorder::off();
    let mut c = cpu.eval(&prompt, LogitsFor::Last).unwrap().pop().unwrap();
    let mut d = gpu
        .eval(&prompt, LogitsFor::Last, rec)
        .unwrap()
        .pop()
        .unwrap();
    let mut worst = 0f32;
    for step in 0..8 {
        let range =
            c.iter().fold(f32::MIN, |m, v| m.max(*v)) - c.iter().fold(f32::MAX, |m, v| m.min(*v));
        let diff = common::max_abs_diff(&c, &d) / range;
        eprintln!(
            "step {step}: max |logit diff| fast GPU vs CPU = {diff:.5} of the range {range:.3}"
        );
        worst = worst.max(diff);
        let t = argmax(&c);
        c = cpu.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap();
        d = gpu.eval(&[t], LogitsFor::Last, rec).unwrap().pop().unwrap();
    }
    eprintln!("synth qwen2.5-0.5b fast, 600-token prompt: worst {worst:.5} of the logits' range");
    assert!(
        worst <= 0.02,
        "fast GPU vs CPU logits differ by {worst} of their range > 0.02"
    );
}
