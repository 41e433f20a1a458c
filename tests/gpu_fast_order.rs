//! Fast numerics keep the CPU's float order where it costs little: one token's products on
//! the legacy 32-weight types and on float weights, and, for a model whose products all keep
//! it, decode attention up to 128 positions. On such a model a short decode under fast
//! numerics must give exactly the logits of `--numerics exact` (the CPU's bits); the engine
//! must claim it for exactly the conformance models whose tensors are all legacy or float.
//! Skips without a GPU.

mod common;
mod gpu;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaEngine, Timing};
use cbtop::engine::{LogitsFor, Numerics};

/// Logits at every prompt position and after each of the reference's steps.
fn logits(engine: &mut CudaEngine, prompt: &[u32], steps: &[u32]) -> Vec<Vec<f32>> {
    let rec = &mut Recorder::off();
    let mut all = engine.eval(prompt, LogitsFor::All, rec).unwrap();
    for &t in steps {
        all.extend(engine.eval(&[t], LogitsFor::Last, rec).unwrap());
    }
    all
}

#[test]
fn fast_decode_gives_the_exact_bits_on_legacy_and_float_models() {
    let Some(g) = gpu::gpu("gpu_fast_order") else {
        return;
    };
    let names = common::conformance_names();
    let mut failures = Vec::new();
    let mut checked = 0;
    for name in &names {
        let (model, reference, _) = common::conformance_case(name);
        let in_order = model
            .file
            .tensors
            .iter()
            .all(|t| !t.ty.is_quantized() || t.ty.block_size() == 32);
        let mut fast = CudaEngine::new(model.clone(), &g, 64, Timing::Off, Numerics::Fast).unwrap();
        let claims = fast.cpu_bits_upto() >= 64;
        if claims != in_order {
            failures.push(format!(
                "{name}: the engine claims the CPU's bits up to {} positions; its types say {in_order}",
                fast.cpu_bits_upto()
            ));
        }
        if !in_order {
            continue;
        }
        let prompt = common::ids(&reference["prompt_ids"]);
        let steps: Vec<u32> = reference["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["token"].as_u64().unwrap() as u32)
            .collect();
        assert!(prompt.len() + steps.len() <= 64, "{name}: a short context");
        let mut exact =
            CudaEngine::new(model.clone(), &g, 64, Timing::Off, Numerics::Exact).unwrap();
        let want = logits(&mut exact, &prompt, &steps);
        let got = logits(&mut fast, &prompt, &steps);
        let differ: Vec<usize> = (0..want.len())
            .filter(|&i| {
                want[i]
                    .iter()
                    .zip(&got[i])
                    .any(|(a, b)| a.to_bits() != b.to_bits())
            })
            .collect();
        eprintln!(
            "{name}: fast logits are exact's bits at {} of {} positions",
            want.len() - differ.len(),
            want.len()
        );
        if !differ.is_empty() {
            failures.push(format!(
                "{name}: fast differs from exact at positions {differ:?}"
            ));
        }
        checked += 1;
    }
    eprintln!("{checked} legacy or float models checked");
    assert!(
        checked >= 9,
        "expected the 9 legacy and float conformance models"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
