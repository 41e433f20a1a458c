//! SmolLM2-135M-Instruct Q4_1 on the GPU: greedy decoding (argmax on the GPU, one token id back
//! per step) must give exactly llama.cpp's tokens for every fixture prompt, the CPU suite's
//! bound (tests/smollm2.rs). Skips without a GPU.

mod common;
mod gpu;

use std::sync::Arc;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaEngine, Timing};
use cbtop::engine::Numerics;
use cbtop::model::Model;

#[test]
fn greedy_generation_matches_llama_cpp_on_the_gpu() {
    let Some(g) = gpu::gpu("gpu_smollm2") else {
        return;
    };
    let model = Arc::new(Model::load(&common::smollm2()).unwrap());
    let cases = common::jsonl(&common::fixture("smollm2/generation.jsonl"));
    assert_eq!(cases.len(), 8);
    let mut engine = CudaEngine::new(model.clone(), &g, 128, Timing::Off, Numerics::Exact).unwrap();
    let rec = &mut Recorder::off();
    let mut failures = Vec::new();
    for case in &cases {
        let prompt = common::ids(&case["prompt_ids"]);
        let want = common::ids(&case["generated_ids"]);
        let steps = case["steps"].as_array().unwrap();
        engine.reset();
        let mut got = vec![engine.eval_argmax(&prompt, rec).unwrap()];
        while got.len() < 32 && !model.tokenizer.is_eog(*got.last().unwrap()) {
            got.push(engine.eval_argmax(&[*got.last().unwrap()], rec).unwrap());
        }
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        let label = case["prompt"].as_str().unwrap_or("");
        eprintln!("{label:?}: {same} of {} tokens match", want.len());
        if got != want {
            let margin = steps.get(same).map(|s| {
                let top = s["top"].as_array().unwrap();
                top[0][1].as_f64().unwrap() - top[1][1].as_f64().unwrap()
            });
            failures.push(format!(
                "{label:?}: first {same} match; got {got:?}, want {want:?} \
                 (llama.cpp's top-1 margin there {margin:?})"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
