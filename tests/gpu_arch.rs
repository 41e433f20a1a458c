//! The GPU engine against the CPU engine on every conformance model (the llama and qwen2
//! models, and qwen3's, gemma3's, phi3's and Mistral's where the fixtures have them): under
//! `exact` the GPU's logits at every prompt position and every step (llama.cpp's tokens fed
//! to both) are the CPU engine's bit for bit; under `fast` they stay within the fixture's
//! bound of the CPU's (the llama.cpp bounds themselves are tests/gpu_conformance.rs's). The
//! new architectures' operations (per-head Q/K norms, post norms, GeGLU, sliding windows,
//! scaled embeddings and queries, per-layer RoPE, heads of 256) all run in these passes.
//! Skips (saying why) without a GPU.

mod common;
mod gpu;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaEngine, GpuDesc, Timing};
use cbtop::engine::{CpuEngine, LogitsFor, Numerics};
use common::max_abs_diff;

/// Logits of `prompt` at every position, then of each of `steps` fed one at a time.
type Run = (Vec<Vec<f32>>, Vec<Vec<f32>>);

fn on_cpu(model: &std::sync::Arc<cbtop::model::Model>, prompt: &[u32], steps: &[u32]) -> Run {
    let mut e = CpuEngine::new(model.clone(), 64).with_numerics(Numerics::Exact);
    let all = e.eval(prompt, LogitsFor::All).unwrap();
    let each = steps
        .iter()
        .map(|&t| e.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap())
        .collect();
    (all, each)
}

fn on_gpu(
    g: &GpuDesc,
    model: &std::sync::Arc<cbtop::model::Model>,
    numerics: Numerics,
    prompt: &[u32],
    steps: &[u32],
) -> Result<Run, String> {
    let mut e =
        CudaEngine::new(model.clone(), g, 64, Timing::Off, numerics).map_err(|e| e.to_string())?;
    let rec = &mut Recorder::off();
    let all = e
        .eval(prompt, LogitsFor::All, rec)
        .map_err(|e| e.to_string())?;
    let mut each = Vec::new();
    for &t in steps {
        each.push(
            e.eval(&[t], LogitsFor::Last, rec)
                .map_err(|e| e.to_string())?
                .pop()
                .unwrap(),
        );
    }
    Ok((all, each))
}

/// Rows of `a` and `b` side by side, labelled: (label, a row, b row).
fn rows<'a>(a: &'a Run, b: &'a Run) -> impl Iterator<Item = (String, &'a [f32], &'a [f32])> {
    let prompt = a.0.iter().zip(&b.0).enumerate();
    let steps = a.1.iter().zip(&b.1).enumerate();
    prompt
        .map(|(i, (x, y))| (format!("prompt position {i}"), &x[..], &y[..]))
        .chain(steps.map(|(i, (x, y))| (format!("step {i}"), &x[..], &y[..])))
}

#[test]
fn gpu_exact_is_the_cpu_engine_bit_for_bit_and_fast_within_bounds() {
    let Some(g) = gpu::gpu("gpu_arch") else {
        return;
    };
    let mut failures = Vec::new();
    let mut archs = std::collections::BTreeSet::new();
    for name in common::conformance_names() {
        let (model, reference, bound) = common::conformance_case(&name);
        if let Some(why) = cbtop::engine::cpu::unsupported(&model.config) {
            // Nothing to compare against until the CPU engine runs it.
            eprintln!("{name}: skipped: {why}");
            continue;
        }
        archs.insert(model.config.arch.name());
        let prompt = common::ids(&reference["prompt_ids"]);
        let steps: Vec<u32> = reference["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["token"].as_u64().unwrap() as u32)
            .collect();
        let cpu = on_cpu(&model, &prompt, &steps);
        for numerics in [Numerics::Exact, Numerics::Fast] {
            let gpu = match on_gpu(&g, &model, numerics, &prompt, &steps) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{name} ({}): {e}", numerics.name()));
                    continue;
                }
            };
            let mut worst = 0f32;
            let mut differ = 0usize;
            let mut first_bad = None;
            for (what, c, d) in rows(&cpu, &gpu) {
                let e = max_abs_diff(c, d);
                worst = worst.max(e);
                let n = c
                    .iter()
                    .zip(d)
                    .filter(|(x, y)| x.to_bits() != y.to_bits())
                    .count();
                differ += n;
                let bad = match numerics {
                    Numerics::Exact => n > 0,
                    Numerics::Fast => e > bound,
                };
                if bad && first_bad.is_none() {
                    first_bad = Some(format!("{what}: {n} logits differ, max {e:.6}"));
                }
            }
            eprintln!(
                "{name} ({}): GPU vs CPU max |diff| {worst:.6}, {differ} logits not the CPU's \
                 bits",
                numerics.name()
            );
            if let Some(b) = first_bad {
                failures.push(format!("{name} ({}): {b} (bound {bound})", numerics.name()));
            }
        }
    }
    eprintln!("architectures compared: {archs:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
