//! `cbtop generate`: run the engine on a prompt and print the text, or one JSON line in the
//! reference fixtures' layout (prompt ids, per-step top logits, generated ids and text).
//!
//! The engine is the one `--device` picks (the CPU, or the CUDA engine with `--numerics`);
//! either way each step's logits come to the host and are sampled there, so the output's
//! layout and the sampling are the same on both.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::args::GenerateArgs;
use super::device::resolve_device;
use super::error::CliError;
use super::ids::{hex, parse_ids};
use super::prompt::prompt_ids;
use crate::engine::backend::{Backend, Device};
use crate::engine::sampler::{top_k, Sampler, SamplerConfig};
use crate::engine::{generate, Timing};
use crate::model::Model;

/// What the whole-step times are read from: the host clock, which on the GPU waits for each
/// step's logits to be copied back (a stream sync).
fn timing_source(device: &Device) -> &'static str {
    match device {
        Device::Cpu => "cpu_timer",
        Device::Cuda(_) => "host_sync",
    }
}

pub fn run(a: GenerateArgs) -> Result<(), CliError> {
    let model = Arc::new(Model::load(&a.model_path).map_err(CliError::usage)?);
    let tok = &model.tokenizer;
    if a.prompt.len() > 1 || a.batch.is_some() {
        return super::generate_batch::run(&a, &model);
    }
    let prompt_ids = match (a.prompt.first(), &a.ids) {
        (_, Some(ids)) => parse_ids(ids)?,
        (Some(p), None) => prompt_ids(&a, &model, p)?,
        (None, None) => return Err(CliError::usage("give --prompt or --ids")),
    };
    if let Some(bad) = prompt_ids
        .iter()
        .find(|&&id| id as usize >= model.config.vocab_size)
    {
        return Err(CliError::usage(format!(
            "--ids: token id {bad} is outside the vocabulary of {} ({})",
            model.config.vocab_size,
            a.model_path.display()
        )));
    }
    if prompt_ids.is_empty() {
        return Err(CliError::usage("--prompt: the prompt encodes to no tokens"));
    }
    let ctx = a.engine.ctx.unwrap_or(prompt_ids.len() + a.max_tokens);
    if prompt_ids.len() + a.max_tokens > ctx.min(model.config.context_length) {
        return Err(CliError::usage(format!(
            "--ctx {ctx}: prompt ({}) plus --max-tokens ({}) do not fit (model context {})",
            prompt_ids.len(),
            a.max_tokens,
            model.config.context_length
        )));
    }
    // Arguments and model are good: only now the device.
    let (device, note) = resolve_device(&a.engine, true)?;
    if let Some(n) = &note {
        eprintln!("cbtop: note: {n}");
    }
    // No per-brick timing: the steps are timed whole, on the host.
    let mut engine = Backend::open(
        &model,
        ctx,
        &device,
        Timing::Off,
        a.engine.numerics_on(&device),
    )
    .map_err(|e| CliError::runtime(format!("--device {e}")))?;
    let temperature = if a.greedy { 0.0 } else { a.temperature };
    let mut sampler = Sampler::new(SamplerConfig {
        temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        seed: a.seed,
    });

    let start = Instant::now();
    let mut first_token_at = None;
    let mut steps: Vec<Value> = Vec::new();
    let mut generated = Vec::new();
    let mut text_bytes = Vec::new();
    let stdout = std::io::stdout();
    let prompt_logits = generate(
        &mut engine,
        &prompt_ids,
        a.max_tokens,
        &mut sampler,
        !a.ignore_eos,
        a.json && a.prompt_logits,
        |step| {
            first_token_at.get_or_insert_with(Instant::now);
            let piece = tok.token_bytes(step.token);
            generated.push(step.token);
            if a.json {
                let mut s = json!({
                    "top": top_k(&step.logits, a.top_k_logits).iter().map(|&(i, l)| json!([i, l])).collect::<Vec<_>>(),
                    "token": step.token,
                    "piece_hex": hex(&piece),
                    "piece": String::from_utf8_lossy(&piece),
                });
                if a.full_logits {
                    s["logits"] = json!(step.logits);
                }
                steps.push(s);
            } else {
                text_bytes.extend_from_slice(&piece);
                // Print whole UTF-8 characters as they complete.
                let valid = match std::str::from_utf8(&text_bytes) {
                    Ok(_) => text_bytes.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(_) => text_bytes.len(),
                };
                let mut out = stdout.lock();
                let _ = out.write_all(String::from_utf8_lossy(&text_bytes[..valid]).as_bytes());
                let _ = out.flush();
                text_bytes.drain(..valid);
            }
        },
    )
    .map_err(CliError::runtime)?;
    let end = Instant::now();
    let text = tok.decode(&generated);
    let prefill_s = first_token_at
        .map(|t| (t - start).as_secs_f64())
        .unwrap_or_default();
    let decode_s = first_token_at
        .map(|t| (end - t).as_secs_f64())
        .unwrap_or_default();
    let decoded = generated.len().saturating_sub(1);
    let decode_tok_s = if decode_s > 0.0 {
        decoded as f64 / decode_s
    } else {
        0.0
    };
    if a.json {
        let mut out = json!({
            "prompt": a.prompt.first(),
            "prompt_ids": prompt_ids,
            "steps": steps,
            "generated_ids": generated,
            "generated_text": text,
            "engine": {"device": device.name(), "numerics": engine.numerics().name()},
            "timing": {"source": timing_source(&device), "prefill_ms": prefill_s * 1e3, "decode_tokens": decoded, "decode_ms": decode_s * 1e3, "decode_tokens_per_sec": decode_tok_s},
        });
        if a.prompt_logits {
            out["prompt_logits"] = json!(prompt_logits);
        }
        println!("{out}");
    } else {
        let mut out = stdout.lock();
        let _ = out.write_all(String::from_utf8_lossy(&text_bytes).as_bytes());
        let _ = writeln!(out);
        eprintln!(
            "prompt {} tokens in {:.1} ms ({:.1} tok/s); {} tokens decoded in {:.1} ms ({:.2} tok/s)",
            prompt_ids.len(), prefill_s * 1e3, prompt_ids.len() as f64 / prefill_s.max(1e-9),
            decoded, decode_s * 1e3, decode_tok_s
        );
    }
    Ok(())
}
