//! GPU against CPU on synthetic Q4_K_M models of real shapes (random weights): qwen2.5-0.5b's
//! 16 decode steps (CPU's greedy tokens fed to both) give logits within 0.05; the issue-38
//! architectures' shapes (gemma3-1b, qwen3-0.6b, phi3-mini) give the CPU's bits under exact
//! numerics and stay within 2% of the logits' range under fast (5% on phi3-mini's long
//! prompt, where llama.cpp's own CUDA build is 52% from its CPU). Skips without a GPU.

mod common;
mod gpu;

use std::sync::Arc;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaEngine, GpuDesc, Timing};
use cbtop::engine::sampler::argmax;
use cbtop::engine::{CpuEngine, LogitsFor, Numerics};
use cbtop::model::Model;
use cbtop::profile::Profile;
use cbtop::synth::{self, QuantMix};

/// A synthetic `shape` q4_k_m (weights from `seed`) on the CPU and on the GPU side by side:
/// `prompt`, then `steps` greedy steps with the CPU's tokens fed to both; `diff` of each
/// step's logits (CPU, GPU) is printed and the worst returned; None (the reason printed) where
/// the CPU engine does not run the shape's architecture.
fn side_by_side(
    g: &GpuDesc,
    shape: &str,
    seed: u64,
    prompt: &[u32],
    numerics: Numerics,
    steps: usize,
    diff: impl Fn(&[f32], &[f32]) -> f32,
) -> Option<f32> {
    let shape = Profile::shape(shape).unwrap();
    let path = std::env::temp_dir().join(format!(
        "cbtop-gpu-synth-{seed}-{}.gguf",
        std::process::id()
    ));
    synth::write_file(&shape, QuantMix::from_name("q4_k_m").unwrap(), seed, &path).unwrap();
    let model = Arc::new(Model::load(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    if let Some(why) = cbtop::engine::cpu::unsupported(&model.config) {
        // No reference to compare the GPU with.
        eprintln!("{}: skipped: {why}", shape.name);
        return None;
    }
    let ctx = prompt.len() + steps + 8;
    let mut cpu = CpuEngine::new(model.clone(), ctx);
    let mut gpu = CudaEngine::new(model, g, ctx, Timing::Off, numerics).unwrap();
    let rec = &mut Recorder::off();
    let mut c = cpu.eval(prompt, LogitsFor::Last).unwrap().pop().unwrap();
    let mut d = gpu
        .eval(prompt, LogitsFor::Last, rec)
        .unwrap()
        .pop()
        .unwrap();
    let mut worst = 0f32;
    for step in 0..steps {
        let e = diff(&c, &d);
        eprintln!("step {step}: {numerics:?} GPU vs CPU {e:.5}");
        worst = worst.max(e);
        let t = argmax(&c);
        c = cpu.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap();
        d = gpu.eval(&[t], LogitsFor::Last, rec).unwrap().pop().unwrap();
    }
    Some(worst)
}

#[test]
fn synth_qwen_0_5b_q4_k_m_gpu_matches_cpu_for_16_steps() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    let prompt: Vec<u32> = vec![1, 17, 300, 4000, 52, 9];
    let Some(worst) = side_by_side(
        &g,
        "qwen2.5-0.5b",
        1,
        &prompt,
        Numerics::Exact,
        16,
        common::max_abs_diff,
    ) else {
        return;
    };
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
    assert_fast_near(&g, "qwen2.5-0.5b", 2, &random_prompt(5, 600, 150_000), 8);
}

/// The largest logit difference as a share of the CPU logits' range (max - min).
fn of_range(c: &[f32], d: &[f32]) -> f32 {
    let hi = c.iter().fold(f32::MIN, |m, v| m.max(*v));
    let lo = c.iter().fold(f32::MAX, |m, v| m.min(*v));
    common::max_abs_diff(c, d) / (hi - lo)
}

/// Fast decode of a model whose products take Q8_K activations throughout (qwen2.5-1.5b's
/// Q4_K/Q6_K weights, 128-wide heads): 12 steps within 2% of the CPU logits' range.
#[test]
fn synth_qwen_1_5b_fast_decode_stays_near_the_cpu() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    let prompt: Vec<u32> = vec![1, 17, 300, 4000, 52, 9];
    let Some(worst) = side_by_side(&g, "qwen2.5-1.5b", 3, &prompt, Numerics::Fast, 12, of_range)
    else {
        return;
    };
    eprintln!("synth qwen2.5-1.5b fast decode: worst {worst:.5} of the logits' range");
    assert!(
        worst <= 0.02,
        "fast GPU vs CPU logits differ by {worst} of their range > 0.02"
    );
}

/// Bits of `d` that are not `c`'s, counted (0: the same logits bit for bit).
fn bits_differ(c: &[f32], d: &[f32]) -> f32 {
    c.iter()
        .zip(d)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count() as f32
}

/// `len` token ids below `vocab` from `seed` (a prompt long enough to reach the tiled paths).
fn random_prompt(seed: u64, len: usize, vocab: u64) -> Vec<u32> {
    let mut rng = cbtop::rng::SplitMix64::new(seed);
    (0..len).map(|_| (rng.next_u64() % vocab) as u32).collect()
}

/// `shape` under exact numerics: every step's logits the CPU engine's bit for bit.
fn assert_exact(g: &GpuDesc, shape: &str, seed: u64, prompt: &[u32], steps: usize) {
    let Some(worst) = side_by_side(g, shape, seed, prompt, Numerics::Exact, steps, bits_differ)
    else {
        return;
    };
    assert_eq!(
        worst, 0.0,
        "{worst} logits of a step are not the CPU's bits"
    );
}

/// `shape` under fast numerics: every step within 2% of the CPU logits' range.
fn assert_fast_near(g: &GpuDesc, shape: &str, seed: u64, prompt: &[u32], steps: usize) {
    assert_fast_within(g, shape, seed, prompt, steps, 0.02);
}

/// `shape` under fast numerics: every step within `bound` of the CPU logits' range.
fn assert_fast_within(
    g: &GpuDesc,
    shape: &str,
    seed: u64,
    prompt: &[u32],
    steps: usize,
    bound: f32,
) {
    let Some(worst) = side_by_side(g, shape, seed, prompt, Numerics::Fast, steps, of_range) else {
        return;
    };
    eprintln!(
        "synth {shape} fast, {}-token prompt: worst {worst:.5} of the logits' range",
        prompt.len()
    );
    assert!(
        worst <= bound,
        "fast GPU vs CPU logits differ by {worst} of their range > {bound}"
    );
}

/// gemma3-1b's real shape (heads of 256, a 512-position window on five layers of six, RoPE
/// bases 1e6 and 1e4, GeGLU, post norms, Q/K norms, scaled embeddings and queries, 262k
/// vocabulary) under exact numerics: a 600-token prompt (so the sliding layers' queries past
/// position 511 skip keys, on the tiled prompt path) and 8 decode steps past the window, the
/// GPU's logits the CPU engine's bit for bit.
#[test]
fn synth_gemma3_1b_exact_is_the_cpu_bit_for_bit_past_the_window() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    assert_exact(&g, "gemma3-1b", 4, &random_prompt(6, 600, 262_000), 8);
}

/// The same under fast numerics (tensor-core prompt products and flash attention on heads of
/// 256, each block a half of the output columns, windowed on the sliding layers, over both
/// prompt chunks; decode on the wide split kernel): within 2% of the CPU logits' range at
/// every step.
#[test]
fn synth_gemma3_1b_fast_stays_near_the_cpu() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    assert_fast_near(&g, "gemma3-1b", 5, &random_prompt(7, 600, 262_000), 8);
}

/// qwen3-0.6b's real shape (per-head Q/K norms, heads of 128 over a hidden size of 1024, so
/// the query is 2048 wide) under exact numerics: a short prompt and 16 steps, the GPU's
/// logits the CPU engine's bit for bit.
#[test]
fn synth_qwen3_0_6b_exact_is_the_cpu_bit_for_bit() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    assert_exact(&g, "qwen3-0.6b", 8, &[1, 17, 300, 4000, 52, 9], 16);
}

/// qwen3-0.6b under fast numerics with a 600-token prompt (tensor-core products and flash
/// attention after the Q/K norms), then 8 decode steps: within 2% of the CPU logits' range.
#[test]
fn synth_qwen3_0_6b_fast_long_prompt_stays_near_the_cpu() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    assert_fast_near(&g, "qwen3-0.6b", 9, &random_prompt(9, 600, 150_000), 8);
}

/// phi3-mini's real shape (fused QKV and gate-up tensors read through row views, heads of 96,
/// the query scaled before attention) under exact numerics: the CPU engine's bits for a
/// short prompt and 8 steps.
#[test]
fn synth_phi3_mini_exact_is_the_cpu_bit_for_bit() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    assert_exact(&g, "phi3-mini", 10, &[1, 17, 300, 4000, 52, 9], 8);
}

/// phi3-mini under fast numerics with a 600-token prompt (tensor-core products and flash
/// attention on heads of 96, the query scaled before it), then 8 decode steps: within 5% of
/// the CPU logits' range.
#[test]
fn synth_phi3_mini_fast_long_prompt_stays_near_the_cpu() {
    let Some(g) = gpu::gpu("gpu_synth") else {
        return;
    };
    // llama.cpp's own CUDA build is 0.517 of the range from its CPU build on this model,
    // prompt and steps (tests/fixtures/conformance/llama-cuda-spread.tsv): 2% does not hold
    // for reordered sums here; 5% still catches a kernel that goes wrong.
    assert_fast_within(
        &g,
        "phi3-mini",
        11,
        &random_prompt(11, 600, 32_000),
        8,
        0.05,
    );
}
