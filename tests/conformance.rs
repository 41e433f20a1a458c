//! Conformance with llama.cpp on the tiny models of every tensor type: logits at every prompt
//! position and every greedy step within the fixture README's bounds, and the same greedy token
//! wherever llama.cpp's top-1 margin exceeds 0.05.

mod common;

use cbtop::engine::{CpuEngine, LogitsFor, Numerics};
use common::max_abs_diff;

/// Compare one model against its reference (room for the long prompt's 72 tokens and its
/// steps); returns the largest logit difference seen.
fn check(name: &str) -> f32 {
    check_with(name, Numerics::Exact)
}

/// `check` with the engine's `numerics`.
fn check_with(name: &str, numerics: Numerics) -> f32 {
    let (model, reference, bound) = common::conformance_case(name);
    // Fast numerics may move a logit as far as llama.cpp's own CUDA build does from its CPU.
    let bound = match numerics {
        Numerics::Exact => bound,
        Numerics::Fast => common::fast_bound(name, bound),
    };
    let prompt = common::ids(&reference["prompt_ids"]);
    let mut engine = CpuEngine::new(model, 128).with_numerics(numerics);
    let ours = engine.eval(&prompt, LogitsFor::All).unwrap();
    let theirs = reference["prompt_logits"].as_array().unwrap();
    assert_eq!(ours.len(), theirs.len());
    let mut worst = 0f32;
    for (pos, (o, t)) in ours.iter().zip(theirs).enumerate() {
        let d = max_abs_diff(o, &common::floats(t));
        assert!(
            d <= bound,
            "{name}: prompt position {pos}: max |logit diff| {d} > {bound}"
        );
        worst = worst.max(d);
    }
    let mut logits = ours.last().unwrap().clone();
    for (i, step) in reference["steps"].as_array().unwrap().iter().enumerate() {
        let want = common::floats(&step["logits"]);
        let d = max_abs_diff(&logits, &want);
        assert!(
            d <= bound,
            "{name}: step {i}: max |logit diff| {d} > {bound}"
        );
        worst = worst.max(d);
        let token = step["token"].as_u64().unwrap() as u32;
        let top = step["top"].as_array().unwrap();
        let margin = top[0][1].as_f64().unwrap() - top[1][1].as_f64().unwrap();
        let our_token = cbtop::engine::sampler::argmax(&logits);
        if margin > 0.05 {
            assert_eq!(
                our_token, token,
                "{name}: step {i}: greedy token differs (margin {margin})"
            );
        }
        // Continue with llama.cpp's token so one near-tie cannot cascade.
        logits = engine
            .eval(&[token], LogitsFor::Last)
            .unwrap()
            .pop()
            .unwrap();
    }
    eprintln!("{name}: max |logit diff| {worst:.5} (bound {bound})");
    worst
}

macro_rules! conformance {
    ($($test:ident => $name:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            check($name);
        }
    )*};
}

conformance! {
    llama_q4_k_s => "conf-llama-Q4_K_S",
    llama_q6_k => "conf-llama-Q6_K",
    llama_q8_0 => "conf-llama-Q8_0",
    qwen2_bf16 => "conf-qwen2-BF16",
    qwen2_f16 => "conf-qwen2-F16",
    qwen2_f32 => "conf-qwen2-F32",
    qwen2_q2_k => "conf-qwen2-Q2_K",
    qwen2_q3_k_s => "conf-qwen2-Q3_K_S",
    qwen2_q4_0 => "conf-qwen2-Q4_0",
    qwen2_q4_1 => "conf-qwen2-Q4_1",
    qwen2_q4_k_m => "conf-qwen2-Q4_K_M",
    qwen2_q4_k_s => "conf-qwen2-Q4_K_S",
    qwen2_q5_0 => "conf-qwen2-Q5_0",
    qwen2_q5_1 => "conf-qwen2-Q5_1",
    qwen2_q5_k_s => "conf-qwen2-Q5_K_S",
    qwen2_q6_k => "conf-qwen2-Q6_K",
    qwen2_q8_0 => "conf-qwen2-Q8_0",
    // Synthesized (tests/fixtures/conformance/synth.tsv, scripts/arch-fixtures.sh).
    qwen3_f32 => "synth-qwen3-F32",
    qwen3_f16 => "synth-qwen3-F16",
    qwen3_q8_0 => "synth-qwen3-Q8_0",
    qwen3_q4_k_m => "synth-qwen3-Q4_K_M",
    qwen3_q6_k => "synth-qwen3-Q6_K",
    gemma3_f32 => "synth-gemma3-F32",
    gemma3_f16 => "synth-gemma3-F16",
    gemma3_q8_0 => "synth-gemma3-Q8_0",
    gemma3_q4_k_m => "synth-gemma3-Q4_K_M",
    gemma3_q6_k => "synth-gemma3-Q6_K",
    phi3_f32 => "synth-phi3-F32",
    phi3_f16 => "synth-phi3-F16",
    phi3_q8_0 => "synth-phi3-Q8_0",
    phi3_q4_k_m => "synth-phi3-Q4_K_M",
    phi3_q6_k => "synth-phi3-Q6_K",
    mistral_f32 => "synth-mistral-F32",
    mistral_q4_k_m => "synth-mistral-Q4_K_M",
    // Linear RoPE scaling (factor 4).
    llama_linear_f32 => "synth-llama-linear-F32",
    // A 72-token prompt: the tiled attention path (64 queries or more).
    qwen3_long_f32 => "synth-long-qwen3-F32",
    phi3_long_f32 => "synth-long-phi3-F32",
}

/// `fast` numerics on the CPU (Q4_0, Q4_1 and Q5_1 matrices repacked at load and taken on the fast
/// kernels for prompts and single tokens; a prompt's Q8_0, Q5_0 and k-quant products too, Q2_K and
/// Q3_K where AVX-512 VNNI takes them) stay within every model's bounds, and on the Q4_0, Q4_1,
/// Q5_1, Q8_0 and k-quant models the prompt's logits are not the exact bits (the fast kernels ran:
/// the 10-token prompts take the batch products); on the Q4_0, Q4_1 and Q5_1 models the same holds
/// token by token (the one-token products run on the repacked rows as well). The Q5_0 model's small
/// levels leave its prompt's sums exact in either order, so there the test checks that its matrices
/// were repacked.
///
/// Fast numerics are held to the wider of the fixture's bound and llama.cpp's own CUDA-vs-CPU
/// spread on the model (tests/fixtures/conformance/llama-cuda-spread.tsv), as on the GPU.
#[test]
fn fast_numerics_on_the_cpu_stay_within_the_bounds() {
    for name in common::conformance_names() {
        check_with(&name, Numerics::Fast);
    }
    #[cfg(target_arch = "x86_64")]
    if cbtop::quant::x86::available() {
        let (model, _, _) = common::conformance_case("conf-qwen2-Q5_0");
        let engine = CpuEngine::new(model, 64).with_numerics(Numerics::Fast);
        let bytes = engine.repacked().map_or(0, |(bytes, _)| bytes);
        assert!(bytes > 0, "conf-qwen2-Q5_0: no matrix repacked under fast");
    }
    for (name, one_by_one) in [
        ("conf-qwen2-Q4_0", true),
        ("conf-qwen2-Q4_1", true),
        ("conf-qwen2-Q5_1", true),
        ("conf-qwen2-Q8_0", false),
        ("conf-llama-Q4_K_S", false),
        ("conf-qwen2-Q5_K_S", false),
        ("conf-qwen2-Q6_K", false),
        ("conf-qwen2-Q2_K", false),
        ("conf-qwen2-Q3_K_S", false),
    ] {
        let (model, reference, bound) = common::conformance_case(name);
        let prompt = common::ids(&reference["prompt_ids"]);
        let engine = |numerics| CpuEngine::new(model.clone(), 64).with_numerics(numerics);
        let batch = |numerics| engine(numerics).eval(&prompt, LogitsFor::All).unwrap();
        let tokens = |numerics| {
            let mut e = engine(numerics);
            let logits: Vec<Vec<f32>> = prompt
                .iter()
                .map(|&t| e.eval(&[t], LogitsFor::Last).unwrap().pop().unwrap())
                .collect();
            logits
        };
        let worst = |fast: Vec<Vec<f32>>, exact: Vec<Vec<f32>>| {
            fast.iter()
                .zip(&exact)
                .map(|(f, e)| max_abs_diff(f, e))
                .fold(0f32, f32::max)
        };
        let mut runs = vec![(
            "prompt",
            worst(batch(Numerics::Fast), batch(Numerics::Exact)),
        )];
        if one_by_one {
            runs.push((
                "one by one",
                worst(tokens(Numerics::Fast), tokens(Numerics::Exact)),
            ));
        }
        for (how, worst) in runs {
            assert!(
                worst > 0.0,
                "{name} ({how}): the exact bits under fast numerics"
            );
            assert!(
                worst <= bound,
                "{name} ({how}): fast vs exact {worst} > {bound}"
            );
        }
    }
}

#[test]
fn every_fixture_model_has_a_test() {
    let names = common::conformance_names();
    let src = include_str!("conformance.rs");
    for n in &names {
        assert!(
            src.contains(&format!("\"{n}\"")),
            "no conformance test for {n}"
        );
    }
    // Every synthesized model has its reference, and every reference its model.
    for c in common::synth_cases() {
        let r = common::fixture(&format!("conformance/ref/{}.jsonl", c.name));
        assert!(r.exists(), "{}: no reference {}", c.name, r.display());
    }
    let refs = std::fs::read_dir(common::fixture("conformance/ref")).unwrap();
    for r in refs {
        let file = r.unwrap().file_name().to_string_lossy().into_owned();
        if file.starts_with("tokenizer-") {
            continue; // the tokenizer fixture (tests/tokenizer.rs), no model's logits
        }
        let name = file.trim_end_matches(".jsonl");
        assert!(
            names.iter().any(|n| n == name),
            "reference {file} has no model"
        );
    }
}

/// A prompt evaluated in one batch gives every position's logits with exactly the bits of the
/// same tokens fed one at a time: the batch products (several tokens per weight block, the
/// prompt kernels of each CPU) must compute what the one-token dot computes. 19 tokens: two
/// passes of eight, then an odd three, below the tiled-attention batch size (64).
#[test]
fn a_prompt_batch_equals_its_tokens_one_by_one_bit_for_bit() {
    let names = [
        "conf-qwen2-Q5_0",
        "conf-qwen2-Q4_1",
        "conf-qwen2-Q8_0",
        "conf-qwen2-Q4_K_M",
        "conf-qwen2-Q5_K_S",
        "conf-qwen2-Q6_K",
    ];
    for name in names {
        let (model, reference, _) = common::conformance_case(name);
        let ids = common::ids(&reference["prompt_ids"]);
        let prompt: Vec<u32> = ids.iter().cycle().take(19).copied().collect();
        let batch = CpuEngine::new(model.clone(), 64)
            .eval(&prompt, LogitsFor::All)
            .unwrap();
        let mut engine = CpuEngine::new(model, 64);
        for (pos, &token) in prompt.iter().enumerate() {
            let one = engine
                .eval(&[token], LogitsFor::Last)
                .unwrap()
                .pop()
                .unwrap();
            assert!(
                common::bits(&one) == common::bits(&batch[pos]),
                "{name}: position {pos}: batch and one-by-one logits differ (max {})",
                max_abs_diff(&one, &batch[pos])
            );
        }
    }
}

/// A prompt evaluated for its last logits only (the last layer then runs only its last row
/// past the attention) gives, under `exact`, the bits of the last row of the same prompt's
/// logits at every position, and under `fast` stays within llama.cpp's bound at that position.
/// Biases (qwen2), post-norms (gemma3), a fused QKV (phi3) and the tiled attention's 72 tokens.
#[test]
fn a_prompt_wanting_its_last_logits_gets_the_last_row_of_all() {
    let names = [
        "conf-qwen2-Q4_K_M",
        "conf-llama-Q8_0",
        "conf-qwen2-F16",
        "synth-gemma3-Q4_K_M",
        "synth-phi3-F16",
        "synth-long-qwen3-F32",
    ];
    for name in names {
        let (model, reference, bound) = common::conformance_case(name);
        let prompt = common::ids(&reference["prompt_ids"]);
        let eval = |numerics, want| {
            let mut engine = CpuEngine::new(model.clone(), 128).with_numerics(numerics);
            engine.eval(&prompt, want).unwrap()
        };
        let all = eval(Numerics::Exact, LogitsFor::All);
        let last = eval(Numerics::Exact, LogitsFor::Last);
        assert_eq!(last.len(), 1, "{name}: one row of logits");
        assert!(
            common::bits(&last[0]) == common::bits(&all[prompt.len() - 1]),
            "{name}: the last row alone differs (max {})",
            max_abs_diff(&last[0], &all[prompt.len() - 1])
        );
        let fast = eval(Numerics::Fast, LogitsFor::Last);
        let theirs = common::floats(&reference["prompt_logits"][prompt.len() - 1]);
        let diff = max_abs_diff(&fast[0], &theirs);
        let bound = common::fast_bound(name, bound);
        assert!(
            diff <= bound,
            "{name}: fast, last row alone: {diff} > {bound}"
        );
    }
}

/// The GPU tests hold fast numerics to llama.cpp's own CUDA-vs-CPU spread where it is wider
/// than their bound: every synthesized conformance model has it recorded, as a finite,
/// non-negative figure.
#[test]
fn every_synthesized_model_has_llama_cpps_cuda_spread() {
    for case in common::synth_cases() {
        let spread = common::llama_cuda_spread(&case.name)
            .unwrap_or_else(|| panic!("{}: no llama.cpp CUDA-vs-CPU spread recorded", case.name));
        assert!(
            spread.is_finite() && spread >= 0.0,
            "{}: {spread}",
            case.name
        );
        assert!(common::fast_bound(&case.name, 0.05) >= 0.05);
    }
}
