//! `cbtop generate` with several sequences (`--batch N` or several `--prompt`): the sequences
//! decode together on the run's engine (`CpuBatch` or `CudaBatch`, one pass per step) and each one's text is
//! printed on its own line (`[s] text`), or with `--json` one JSON line per sequence in the
//! single-sequence layout plus its index (`sequence`).

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::args::GenerateArgs;
use super::device::resolve_device;
use super::error::CliError;
use super::ids::{hex, parse_ids};
use crate::engine::backend::Backend;
use crate::engine::cpu::CpuBatch;
use crate::engine::cuda::CudaBatch;
use crate::engine::generate::{generate_batch, Request};
use crate::engine::sampler::{top_k, Sampler, SamplerConfig};
use crate::engine::{Batched, EngineError, Timing};
use crate::model::Model;

/// Most sequences `generate --batch` takes.
const MAX_BATCH: usize = 1024;

pub fn run(a: &GenerateArgs, model: &Arc<Model>) -> Result<(), CliError> {
    let tok = &model.tokenizer;
    let given: Vec<Vec<u32>> = match &a.ids {
        Some(ids) => vec![parse_ids(ids)?],
        None => a
            .prompt
            .iter()
            .map(|p| super::prompt::prompt_ids(a, model, p))
            .collect::<Result<_, _>>()?,
    };
    if given.iter().any(Vec::is_empty) {
        return Err(CliError::usage("--prompt: a prompt encodes to no tokens"));
    }
    let vocab = model.config.vocab_size;
    if let Some(bad) = given.iter().flatten().find(|&&id| id as usize >= vocab) {
        return Err(CliError::usage(format!(
            "--ids: token id {bad} is outside the vocabulary of {vocab} ({})",
            a.model_path.display()
        )));
    }
    if a.prompt_logits {
        return Err(CliError::usage(
            "--prompt-logits: not with several sequences (--batch or several --prompt); \
             the batch keeps each prompt's last logits only",
        ));
    }
    let n = a.batch.unwrap_or(given.len());
    if n == 0 || n > MAX_BATCH {
        return Err(CliError::usage(format!(
            "--batch {n}: a batch is 1 to {MAX_BATCH} sequences"
        )));
    }
    let prompts: Vec<&Vec<u32>> = given.iter().cycle().take(n).collect();
    let longest = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
    let ctx = a.engine.ctx.unwrap_or(longest + a.max_tokens);
    if longest + a.max_tokens > ctx.min(model.config.context_length) {
        return Err(CliError::usage(format!(
            "--ctx {ctx}: the longest prompt ({longest}) plus --max-tokens ({}) do not fit \
             (model context {})",
            a.max_tokens, model.config.context_length
        )));
    }
    let (device, note) = resolve_device(&a.engine, true)?;
    if let Some(n) = &note {
        eprintln!("cbtop: note: {n}");
    }
    let numerics = a.engine.numerics_on(&device);
    let mut engine = Backend::open(model, ctx, &device, Timing::Off, numerics)
        .map_err(|e| CliError::runtime(format!("--device {e}")))?;
    let refused = |e| match e {
        EngineError::BatchTooLarge { .. } => CliError::usage(e.to_string()),
        e => CliError::runtime(e),
    };
    let (mut cpu, mut cuda);
    let batch: &mut dyn Batched = match &mut engine {
        Backend::Cpu(e) => {
            cpu = CpuBatch::new(e, ctx, n).map_err(refused)?;
            &mut cpu
        }
        Backend::Cuda(e) => {
            cuda = CudaBatch::new(e, ctx, n).map_err(refused)?;
            &mut cuda
        }
    };
    let temperature = if a.greedy { 0.0 } else { a.temperature };
    let mut requests: Vec<Request> = prompts
        .iter()
        .enumerate()
        .map(|(s, p)| Request {
            prompt: (*p).clone(),
            max_tokens: a.max_tokens,
            sampler: Sampler::new(SamplerConfig {
                temperature,
                top_k: a.top_k,
                top_p: a.top_p,
                seed: a.seed.wrapping_add(s as u64),
            }),
        })
        .collect();
    let mut generated: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut steps: Vec<Vec<Value>> = vec![Vec::new(); n];
    let start = Instant::now();
    generate_batch(batch, &mut requests, !a.ignore_eos, |s, step| {
        generated[s].push(step.token);
        if a.json {
            let piece = tok.token_bytes(step.token);
            let top = top_k(&step.logits, a.top_k_logits);
            let mut line = json!({
                "top": top.iter().map(|&(i, l)| json!([i, l])).collect::<Vec<_>>(),
                "token": step.token,
                "piece_hex": hex(&piece),
                "piece": String::from_utf8_lossy(&piece),
            });
            if a.full_logits {
                line["logits"] = json!(step.logits);
            }
            steps[s].push(line);
        }
    })
    .map_err(CliError::runtime)?;
    let secs = start.elapsed().as_secs_f64();
    let total: usize = generated.iter().map(Vec::len).sum();
    for (s, ids) in generated.iter().enumerate() {
        let text = tok.decode(ids);
        if a.json {
            println!(
                "{}",
                json!({
                    "sequence": s,
                    "prompt_ids": prompts[s],
                    "steps": steps[s],
                    "generated_ids": ids,
                    "generated_text": text,
                    "engine": {"device": device.name(), "numerics": numerics.name(), "batch": n},
                })
            );
        } else {
            println!("[{s}] {text}");
        }
    }
    if !a.json {
        eprintln!(
            "{n} sequences, {total} tokens in {:.1} ms ({:.1} tok/s over all sequences, prompts included)",
            secs * 1e3,
            total as f64 / secs.max(1e-9)
        );
    }
    Ok(())
}
