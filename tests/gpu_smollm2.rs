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
use cbtop::profiler::session::Session;

#[test]
fn greedy_generation_matches_llama_cpp_on_the_gpu() {
    let Some(g) = gpu::gpu("gpu_smollm2") else {
        return;
    };
    let (model, cases) = smollm2_and_cases();
    assert_eq!(cases.len(), 8);
    let mut engine = CudaEngine::new(model.clone(), &g, 128, Timing::Off, Numerics::Exact).unwrap();
    let mut failures = Vec::new();
    for case in &cases {
        let want = common::ids(&case["generated_ids"]);
        let steps = case["steps"].as_array().unwrap();
        let got = greedy(&mut engine, &model, &common::ids(&case["prompt_ids"]));
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

/// The pipelined decode loop (each step launched while the one before it is read, on the token
/// the GPU left) gives the step-by-step loop's tokens, also when a step is stamped and when the
/// step launched ahead is not the one asked for next (it is then forgotten and the step runs
/// again from the host's position). Exact numerics, so the tokens must be llama.cpp's.
#[test]
fn pipelined_decode_gives_the_same_tokens() {
    let Some(g) = gpu::gpu("gpu_smollm2") else {
        return;
    };
    let (model, cases) = smollm2_and_cases();
    for (c, case) in cases.iter().enumerate().take(3) {
        let want = common::ids(&case["generated_ids"]);
        let engine =
            CudaEngine::new(model.clone(), &g, 128, Timing::Events, Numerics::Exact).unwrap();
        let mut session = Session::new(engine, common::ids(&case["prompt_ids"]));
        session.prefill().unwrap();
        for i in 0..want.len() - 1 {
            // Profiled on two steps of three; the hint for the next step is wrong on every
            // fifth step (case 2: no hint at all on odd steps).
            let profiled = |i: usize| i % 3 != 2;
            let hint = match (c, i % 5) {
                (2, _) if i % 2 == 1 => None,
                (_, 4) => Some(!profiled(i + 1)),
                _ => Some(profiled(i + 1)),
            };
            let s = session.step_then(profiled(i), hint).unwrap();
            assert_eq!(
                !s.spans.is_empty(),
                profiled(i),
                "step {i}: spans iff profiled"
            );
        }
        let got = session.generated();
        assert_eq!(got, &want[..got.len()], "case {c}: pipelined tokens");
        assert_eq!(got.len(), want.len(), "case {c}");
    }
}

/// The SmolLM2 model and llama.cpp's greedy generations for it (the fixture's 8 prompts).
fn smollm2_and_cases() -> (Arc<Model>, Vec<serde_json::Value>) {
    let model = Arc::new(Model::load(&common::smollm2()).unwrap());
    let cases = common::jsonl(&common::fixture("smollm2/generation.jsonl"));
    (model, cases)
}

/// Up to 32 greedy tokens after `prompt`, argmax on the GPU.
fn greedy(engine: &mut CudaEngine, model: &Model, prompt: &[u32]) -> Vec<u32> {
    let rec = &mut Recorder::off();
    engine.reset();
    let mut got = vec![engine.eval_argmax(prompt, rec).unwrap()];
    while got.len() < 32 && !model.tokenizer.is_eog(*got.last().unwrap()) {
        got.push(engine.eval_argmax(&[*got.last().unwrap()], rec).unwrap());
    }
    got
}

/// `fast` numerics reorder float sums, so greedy tokens may part from llama.cpp's CPU output
/// where its top two logits are close, as llama.cpp's own CUDA backend does: measured on these
/// 8 prompts, llama.cpp CUDA's greedy tokens match its CPU's for 181 of 231 tokens in total
/// (matching prefixes). The fast path must match at least as many.
#[test]
fn fast_greedy_generation_stays_as_close_as_llama_cpp_cuda() {
    const LLAMA_CUDA_MATCHED: usize = 181;
    let Some(g) = gpu::gpu("gpu_smollm2") else {
        return;
    };
    let (model, cases) = smollm2_and_cases();
    let mut engine = CudaEngine::new(model.clone(), &g, 128, Timing::Off, Numerics::Fast).unwrap();
    let (mut matched, mut total) = (0, 0);
    for case in &cases {
        let want = common::ids(&case["generated_ids"]);
        let got = greedy(&mut engine, &model, &common::ids(&case["prompt_ids"]));
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        eprintln!(
            "fast {:?}: {same} of {} tokens match",
            case["prompt"],
            want.len()
        );
        matched += same;
        total += want.len();
    }
    eprintln!("fast: {matched} of {total} tokens match llama.cpp's CPU output (llama.cpp CUDA: {LLAMA_CUDA_MATCHED})");
    assert!(
        matched >= LLAMA_CUDA_MATCHED,
        "fast numerics match {matched} of {total} tokens, fewer than llama.cpp CUDA's {LLAMA_CUDA_MATCHED}"
    );
}
