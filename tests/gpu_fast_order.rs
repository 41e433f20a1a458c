//! Fast numerics keep the CPU's float order where it costs little: one token's products on
//! the legacy 32-weight types and, for a model whose products are all of those types, decode
//! attention up to 128 positions. On such a model a short decode under fast numerics must give
//! exactly the logits of `--numerics exact` (the CPU's bits); the engine must claim it for
//! exactly the conformance models whose products are all legacy. (Float and k-quant products
//! take free-order kernels under fast numerics; `gpu_conformance` holds them to its bounds.)
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
fn fast_decode_gives_the_exact_bits_on_legacy_models() {
    let Some(g) = gpu::gpu("gpu_fast_order") else {
        return;
    };
    let names = common::conformance_names();
    let mut failures = Vec::new();
    let mut checked = 0;
    for name in &names {
        let (model, reference, _) = common::conformance_case(name);
        let w = &model.weights;
        let in_order = std::iter::once(&w.output)
            .chain(
                w.layers
                    .iter()
                    .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]),
            )
            .all(|m| m.ty.is_quantized() && m.ty.block_size() == 32)
            // A query scaled before attention (gemma3, phi3) takes the free kernels.
            && !model.config.attn_scale_on_q;
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
    eprintln!("{checked} legacy models checked");
    assert!(
        checked >= 6,
        "expected at least the 6 legacy conformance models"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
