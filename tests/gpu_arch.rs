//! The GPU engine against the CPU engine on every conformance model (the llama and qwen2
//! models, and qwen3's, gemma3's, phi3's and Mistral's where the fixtures have them): under
//! `exact` the GPU's logits at every prompt position and every step (llama.cpp's tokens fed
//! to both) are the CPU engine's bit for bit; under `fast` they stay within the fixture's
//! bound of the CPU's (the llama.cpp bounds themselves are tests/gpu_conformance.rs's). The
//! new architectures' operations (per-head Q/K norms, post norms, GeGLU, sliding windows,
//! scaled embeddings and queries, per-layer RoPE, heads of 256) all run in these passes.
//! The second test runs the same comparison on the conformance shapes
//! (tests/fixtures/conformance/shapes/*.toml: gemma3's, and the other architectures' where
//! they are) synthesized in every weight type the fixtures use, so it needs no llama.cpp
//! reference. Skips (saying why) without a GPU.

mod common;
mod gpu;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaEngine, GpuDesc, Timing};
use cbtop::engine::{CpuEngine, LogitsFor, Numerics};
use common::max_abs_diff;

/// The prompt the architectures' conformance fixtures use.
const PROMPT: [u32; 10] = [1, 5, 9, 200, 300, 17, 42, 499, 3, 256];

/// Logits of `prompt` at every position, then of each of `steps` fed one at a time.
type Run = (Vec<Vec<f32>>, Vec<Vec<f32>>);

/// Room the engines are made with: the longest prompt and its steps.
const CTX: usize = 128;

fn on_cpu(model: &std::sync::Arc<cbtop::model::Model>, prompt: &[u32], steps: &[u32]) -> Run {
    let mut e = CpuEngine::new(model.clone(), CTX).with_numerics(Numerics::Exact);
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
        CudaEngine::new(model.clone(), g, CTX, Timing::Off, numerics).map_err(|e| e.to_string())?;
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

/// Every conformance model the CPU engine runs (llama.cpp's prompt and greedy tokens fed to
/// both engines): `compare`, with the fixture's bound.
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
        failures.extend(compare(
            &g,
            &name,
            &model,
            Bound::Abs(bound),
            &prompt,
            &steps,
            &cpu,
        ));
    }
    eprintln!("architectures compared: {archs:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// How far fast numerics may move a logit from the CPU's.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// At most this much.
    Abs(f32),
    /// At most this share of the CPU row's range (max - min): prompts of 64 tokens or more,
    /// whose products and attention take the tensor cores' f16 operands.
    OfRange(f32),
}

/// The GPU under both numerics against the CPU's run `cpu` of `prompt` then `steps`: exact
/// bit for bit, fast within `bound`; what failed, as sentences.
fn compare(
    g: &GpuDesc,
    name: &str,
    model: &std::sync::Arc<cbtop::model::Model>,
    bound: Bound,
    prompt: &[u32],
    steps: &[u32],
    cpu: &Run,
) -> Vec<String> {
    let mut failures = Vec::new();
    for numerics in [Numerics::Exact, Numerics::Fast] {
        let gpu = match on_gpu(g, model, numerics, prompt, steps) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{name} ({}): {e}", numerics.name()));
                continue;
            }
        };
        let mut worst = 0f32;
        let mut differ = 0usize;
        let mut first_bad = None;
        for (what, c, d) in rows(cpu, &gpu) {
            let e = max_abs_diff(c, d);
            worst = worst.max(e);
            let n = c
                .iter()
                .zip(d)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
            differ += n;
            let limit = match bound {
                Bound::Abs(b) => b,
                Bound::OfRange(share) => {
                    let hi = c.iter().fold(f32::MIN, |m, v| m.max(*v));
                    let lo = c.iter().fold(f32::MAX, |m, v| m.min(*v));
                    share * (hi - lo)
                }
            };
            let bad = match numerics {
                Numerics::Exact => n > 0,
                Numerics::Fast => e > limit,
            };
            if bad && first_bad.is_none() {
                first_bad = Some(format!("{what}: {n} logits differ, max {e:.6}"));
            }
        }
        eprintln!(
            "{name} ({}): GPU vs CPU max |diff| {worst:.6}, {differ} logits not the CPU's bits",
            numerics.name()
        );
        if let Some(b) = first_bad {
            failures.push(format!(
                "{name} ({}): {b} (bound {bound:?})",
                numerics.name()
            ));
        }
    }
    failures
}

/// Every conformance shape in every fixture weight type, synthesized (seed 0, as the
/// fixtures): the prompt and 8 of the CPU's greedy steps on the GPU under both numerics,
/// against the CPU engine (`compare`; bound 0.005 for float weights, 0.05 quantized); then
/// an 80-token prompt and 8 steps (the CPU's tiled attention and, under fast numerics, the
/// tensor-core products and flash attention, sliding windows included), fast within 2% of
/// each row's range.
#[test]
fn synthesized_conformance_shapes_match_the_cpu_engine_on_the_gpu() {
    use cbtop::engine::sampler::argmax;
    use cbtop::profile::Profile;
    use cbtop::synth::{self, QuantMix};

    let Some(g) = gpu::gpu("gpu_arch") else {
        return;
    };
    let dir = common::fixture("conformance/shapes");
    let mut shapes: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    shapes.sort();
    let mut failures = Vec::new();
    for path in &shapes {
        let shape = Profile::shape(path.to_str().unwrap()).unwrap();
        for mix in [
            "pure-f32",
            "pure-f16",
            "pure-q8_0",
            "pure-q4_k",
            "pure-q6_k",
        ] {
            let name = format!("{} {mix}", shape.name);
            let file = std::env::temp_dir().join(format!(
                "cbtop-gpu-arch-{}-{mix}-{}.gguf",
                shape.name,
                std::process::id()
            ));
            synth::write_file(&shape, QuantMix::from_name(mix).unwrap(), 0, &file).unwrap();
            let model = std::sync::Arc::new(cbtop::model::Model::load(&file).unwrap());
            let _ = std::fs::remove_file(&file);
            if let Some(why) = cbtop::engine::cpu::unsupported(&model.config) {
                eprintln!("{name}: skipped: {why}");
                continue;
            }
            // The CPU's own greedy continuation, 8 steps.
            let mut e = CpuEngine::new(model.clone(), CTX).with_numerics(Numerics::Exact);
            let mut steps = Vec::new();
            let mut last = e.eval(&PROMPT, LogitsFor::Last).unwrap().pop().unwrap();
            for _ in 0..8 {
                let t = argmax(&last);
                steps.push(t);
                last = e.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap();
            }
            let bound = if mix.ends_with("f32") || mix.ends_with("f16") {
                0.005
            } else {
                0.05
            };
            let cpu = on_cpu(&model, &PROMPT, &steps);
            failures.extend(compare(
                &g,
                &name,
                &model,
                Bound::Abs(bound),
                &PROMPT,
                &steps,
                &cpu,
            ));
            let vocab = model.config.vocab_size as u64;
            let mut rng = cbtop::rng::SplitMix64::new(80);
            let long: Vec<u32> = (0..80).map(|_| (rng.next_u64() % vocab) as u32).collect();
            let cpu = on_cpu(&model, &long, &steps);
            let what = format!("{name}, 80-token prompt");
            failures.extend(compare(
                &g,
                &what,
                &model,
                Bound::OfRange(0.02),
                &long,
                &steps,
                &cpu,
            ));
        }
    }
    assert!(!shapes.is_empty(), "no shapes in {}", dir.display());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
