//! The GPU engine against the CPU engine on every conformance model (the llama and qwen2
//! models, and the synthesized qwen3, gemma3, phi3 and Mistral ones of synth.tsv): under `exact` the
//! GPU's logits at every prompt position and every step (the same tokens fed to both) are the
//! CPU engine's bit for bit; under `fast` they stay within the fixture's bound of the CPU's, or
//! llama.cpp's own CUDA-vs-CPU spread on the same case where that is wider
//! (tests/fixtures/conformance/llama-cuda-spread.tsv; the llama.cpp bounds themselves are
//! tests/gpu_conformance.rs's). The new architectures'
//! operations (per-head Q/K norms, post norms, GeGLU, sliding windows, scaled embeddings and
//! queries, per-layer RoPE) all run in these passes.
//!
//! The second test runs the same comparison on the tiny conformance shapes
//! (tests/fixtures/conformance/shapes/tiny-*.toml) synthesized (seed 0, where the fixtures'
//! are seed 38) in the fixtures' mixes F32, F16, Q8_0, Q4_K_M and Q6_K, with a short and an
//! 80-token prompt. Skips (saying why) without a GPU.

mod common;
mod gpu;

use std::sync::Arc;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaEngine, GpuDesc, Timing};
use cbtop::engine::{CpuEngine, LogitsFor, Numerics};
use cbtop::model::Model;
use common::max_abs_diff;

/// The prompt the architectures' conformance fixtures use.
const PROMPT: [u32; 10] = [1, 5, 9, 200, 300, 17, 42, 499, 3, 256];

/// Room the engines are made with: the longest prompt and its steps.
const CTX: usize = 128;

/// Logits of a prompt at every position, then of each step's token fed one at a time.
type Run = (Vec<Vec<f32>>, Vec<Vec<f32>>);

fn on_cpu(model: &Arc<Model>, prompt: &[u32], steps: &[u32]) -> Run {
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
    model: &Arc<Model>,
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
        let mut l = e
            .eval(&[t], LogitsFor::Last, rec)
            .map_err(|e| e.to_string())?;
        each.push(l.pop().unwrap());
    }
    Ok((all, each))
}

/// Rows of `a` and `b` side by side, labelled (as many as both have).
fn rows<'a>(a: &'a Run, b: &'a Run) -> impl Iterator<Item = (String, &'a [f32], &'a [f32])> {
    let prompt = a.0.iter().zip(&b.0).enumerate();
    let steps = a.1.iter().zip(&b.1).enumerate();
    prompt
        .map(|(i, (x, y))| (format!("prompt position {i}"), &x[..], &y[..]))
        .chain(steps.map(|(i, (x, y))| (format!("step {i}"), &x[..], &y[..])))
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

impl Bound {
    fn limit(self, cpu_row: &[f32]) -> f32 {
        match self {
            Bound::Abs(b) => b,
            Bound::OfRange(share) => share * row_range(cpu_row),
        }
    }
}

/// A row's max - min.
fn row_range(row: &[f32]) -> f32 {
    let hi = row.iter().fold(f32::MIN, |m, v| m.max(*v));
    let lo = row.iter().fold(f32::MAX, |m, v| m.min(*v));
    hi - lo
}

/// One model's run to check on the GPU.
struct Case<'a> {
    name: String,
    model: &'a Arc<Model>,
    prompt: &'a [u32],
    steps: &'a [u32],
    /// How far fast numerics may move a logit from the CPU's.
    bound: Bound,
}

/// `case` on the CPU, then on the GPU under both numerics: exact the CPU's bits, fast within
/// the bound; what failed, as sentences.
fn compare(g: &GpuDesc, case: &Case) -> Vec<String> {
    let cpu = on_cpu(case.model, case.prompt, case.steps);
    let name = &case.name;
    let mut failures = Vec::new();
    for numerics in [Numerics::Exact, Numerics::Fast] {
        let gpu = match on_gpu(g, case.model, numerics, case.prompt, case.steps) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{name} ({}): {e}", numerics.name()));
                continue;
            }
        };
        let (mut worst, mut worst_share, mut differ, mut first_bad) = (0f32, 0f32, 0usize, None);
        for (what, c, d) in rows(&cpu, &gpu) {
            let e = max_abs_diff(c, d);
            worst = worst.max(e);
            let n = c
                .iter()
                .zip(d)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
            differ += n;
            let share = e / row_range(c);
            worst_share = worst_share.max(share);
            let bad = match numerics {
                Numerics::Exact => n > 0,
                Numerics::Fast => e > case.bound.limit(c),
            };
            if bad && first_bad.is_none() {
                first_bad = Some(format!(
                    "{what}: {n} logits differ from the CPU's, max {e:.6}, {share:.5} of the \
                     row's range (bound {:?})",
                    case.bound
                ));
            }
        }
        eprintln!(
            "{name} ({}): GPU vs CPU max |diff| {worst:.6} ({worst_share:.5} of a row's range), \
             {differ} logits not the CPU's bits (bound {:?})",
            numerics.name(),
            case.bound
        );
        if let Some(b) = first_bad {
            failures.push(format!("{name} ({}): {b}", numerics.name()));
        }
    }
    failures
}

/// The prompt and greedy tokens of llama.cpp's reference record.
fn reference_tokens(reference: &serde_json::Value) -> (Vec<u32>, Vec<u32>) {
    let prompt = common::ids(&reference["prompt_ids"]);
    let steps = reference["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["token"].as_u64().unwrap() as u32)
        .collect();
    (prompt, steps)
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
        let (prompt, steps) = reference_tokens(&reference);
        let bound = common::fast_bound(&name, bound);
        failures.extend(compare(
            &g,
            &Case {
                name,
                model: &model,
                prompt: &prompt,
                steps: &steps,
                bound: Bound::Abs(bound),
            },
        ));
    }
    eprintln!("architectures compared: {archs:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every tiny conformance shape in every fixture mix, synthesized (seed 0): the
/// fixtures' prompt and 8 of the CPU's greedy steps, then an 80-token prompt and the same
/// steps (the CPU's tiled attention and, under fast numerics, the tensor-core products and
/// flash attention, sliding windows included, within 2% of each row's range).
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
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("tiny-") && name.ends_with(".toml")
        })
        .collect();
    shapes.sort();
    assert!(
        !shapes.is_empty(),
        "no tiny-*.toml shapes in {}",
        dir.display()
    );
    let mut failures = Vec::new();
    for path in &shapes {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let shape = Profile::shape(path.to_str().unwrap()).unwrap();
        for mix in ["f32", "f16", "q8_0", "q4_k_m", "q6_k"] {
            let bytes = synth::build(&shape, QuantMix::from_name(mix).unwrap(), 0);
            let name = format!("{stem} {mix}");
            let model = Arc::new(Model::from_bytes(&format!("{stem}.gguf"), bytes).unwrap());
            if let Some(why) = cbtop::engine::cpu::unsupported(&model.config) {
                eprintln!("{name}: skipped: {why}");
                continue;
            }
            // The CPU's own greedy continuation, 8 steps.
            let mut e = CpuEngine::new(model.clone(), CTX);
            let mut steps = Vec::new();
            let mut last = e.eval(&PROMPT, LogitsFor::Last).unwrap().pop().unwrap();
            for _ in 0..8 {
                let t = argmax(&last);
                steps.push(t);
                last = e.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap();
            }
            let bound = if mix.starts_with('f') { 0.005 } else { 0.05 };
            failures.extend(compare(
                &g,
                &Case {
                    name: name.clone(),
                    model: &model,
                    prompt: &PROMPT,
                    steps: &steps,
                    bound: Bound::Abs(common::fast_bound(&name, bound)),
                },
            ));
            let vocab = model.config.vocab_size as u64;
            let mut rng = cbtop::rng::SplitMix64::new(80);
            let long: Vec<u32> = (0..80).map(|_| (rng.next_u64() % vocab) as u32).collect();
            failures.extend(compare(
                &g,
                &Case {
                    name: format!("{name}, 80-token prompt"),
                    model: &model,
                    prompt: &long,
                    steps: &steps,
                    bound: Bound::OfRange(common::fast_bound(
                        &format!("{name}, 80-token prompt"),
                        0.02,
                    )),
                },
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
