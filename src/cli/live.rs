//! `cbtop` without `--headless`: the live view's command-line glue. Turns `ProfileArgs` into
//! the engine thread's configuration (prompt tokens, context, device, timing, header), hands
//! over to `tui::run_live`, and turns how the view ended into an exit code.
//!
//! Without `--model-path` the embedded default (a synthetic model, labelled as such) is built,
//! exactly as the headless mode does.

use super::args::ProfileArgs;
use super::device::nvml_index;
use super::error::CliError;
use super::interrupt;
use super::sinks::device_metric_label;
use crate::engine::backend::{timing_label, Device};
use crate::engine::Timing;
use crate::metrics::{Labels, MetricsServer, Shared};
use crate::model::Model;
use crate::profiler::analysis::Budgets;
use crate::profiler::batch::{context_needed, prompt_lines, Sweep, MAX_BATCH};
use crate::profiler::model_source::{chat_default_prompt, ModelSource};
use crate::telemetry::GpuProbe;
use crate::tui::snapshot::Header;
use crate::tui::worker::{EngineConfig, BATCH_STEPS};
use crate::tui::{LiveError, Pane, Source};

/// Context when `--ctx` is not given: long enough for steady numbers, short enough that the
/// attention cost stays close to the decode of a chat turn.
pub const DEFAULT_CTX: usize = 512;

/// `cbtop [--model-path FILE] ...`: the live view of `src` (loaded from `--model-path`) on
/// `devices` (`--device` resolved: one, or every GPU for `all`).
pub fn run(
    args: ProfileArgs,
    src: ModelSource,
    devices: Vec<Device>,
    status: Option<String>,
    metrics: Option<(MetricsServer, Shared)>,
) -> Result<(), CliError> {
    let label = src.label();
    run_source(
        Source {
            model: src.model.clone(),
            label,
            synthetic: src.synthetic,
        },
        &args,
        devices,
        status,
        metrics,
    )
}

/// The live view on an already-loaded model, one engine per device; `status` is a first
/// status line to show (e.g. why `--device auto` fell back to the CPU); `metrics` is the
/// `--metrics-listen` server, already bound, that each snapshot's metrics go to (one slot per
/// engine, labelled by its device).
pub fn run_source(
    source: Source,
    args: &ProfileArgs,
    devices: Vec<Device>,
    status: Option<String>,
    metrics: Option<(MetricsServer, Shared)>,
) -> Result<(), CliError> {
    let mut panes = Vec::with_capacity(devices.len());
    let mut first = String::new();
    for (i, device) in devices.into_iter().enumerate() {
        let nvml_index = nvml_index(&device);
        let nvml_peak = nvml_index.and_then(|i| GpuProbe::open(i).ok()?.peak_bandwidth_gbps().ok());
        if let Device::Cuda(g) = &device {
            eprintln!(
                "cbtop: starting the CUDA engine on cuda:{} ({}): uploading weights, compiling kernels",
                g.ordinal, g.name
            );
        }
        let (mut cfg, note) = config(&source, args, device)?;
        cfg.nvml_peak_gbps = nvml_peak;
        if let Some((_, shared)) = &metrics {
            let labels = Labels {
                model: source.model.name(),
                device: device_metric_label(&cfg.device),
                numerics: cfg.numerics.name().to_string(),
            };
            cfg.metrics = Some((shared.slot(i), labels));
        }
        if i == 0 {
            first = note;
        }
        panes.push(Pane {
            cfg,
            nvml_index: nvml_index.unwrap_or(0),
        });
    }
    let _server = match metrics {
        Some((server, _)) => {
            let at = format!("serving /metrics on http://{}/metrics", server.local_addr());
            first = if first.is_empty() {
                at
            } else {
                format!("{first}; {at}")
            };
            Some(server)
        }
        None => None,
    };
    let status = match (status, first.is_empty()) {
        (Some(s), true) => s,
        (Some(s), false) => format!("{s}; {first}"),
        (None, _) => first,
    };
    crate::tui::run_live(source, panes, status).map_err(|e| match e {
        LiveError::Engine(m) | LiveError::Terminal(m) => CliError::runtime(m),
        LiveError::Interrupted(sig) => CliError {
            code: interrupt::exit_code(sig),
            message: format!("interrupted by {}", interrupt::name(sig)),
        },
    })
}

/// How `--timing` reads in the header on `device`.
pub fn header_timing(device: &Device, timing: Timing) -> String {
    match timing {
        Timing::Off => "off (no per-brick timing)".to_string(),
        _ => timing_label(device, timing).to_string(),
    }
}

/// How the device reads in the header.
pub fn device_label(device: &Device) -> String {
    match device {
        Device::Cpu => format!("cpu · {} threads", rayon::current_num_threads()),
        Device::Cuda(g) => format!(
            "cuda:{} {} · {} · {:.0} GiB",
            g.ordinal,
            g.name,
            g.arch(),
            g.memory_total_bytes as f64 / (1u64 << 30) as f64
        ),
    }
}

/// `--batch`: the sweep's prompts (`--prompt-file`'s lines, or the run's prompt), checked
/// with the sizes before anything runs: sizes 1 to `MAX_BATCH`, and room in `ctx` for the
/// longest prompt and the sweep's steps.
fn batch_prompts(
    args: &ProfileArgs,
    model: &Model,
    prompt: &[u32],
    ctx: usize,
) -> Result<Vec<Vec<u32>>, CliError> {
    if args.batch.is_empty() {
        return Ok(Vec::new());
    }
    if let Some(&bad) = args.batch.iter().find(|&&n| n == 0 || n > MAX_BATCH) {
        return Err(CliError::usage(format!(
            "--batch {bad}: a batch size is 1 to {MAX_BATCH}"
        )));
    }
    let prompts = match &args.prompt_file {
        None => vec![prompt.to_vec()],
        Some(path) => prompt_lines(model, path).map_err(CliError::usage)?,
    };
    let sweep = Sweep {
        warmup: 2,
        tokens: BATCH_STEPS,
        profiled: true,
    };
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let need = context_needed(longest, sweep);
    if need > ctx {
        return Err(CliError::usage(format!(
            "--batch: a prompt of {longest} tokens and the sweep's steps need {need} positions a \
             sequence, over --ctx {ctx}"
        )));
    }
    Ok(prompts)
}

/// The engine configuration for `args` on `device`, and a first status line (or empty).
pub fn config(
    source: &Source,
    args: &ProfileArgs,
    device: Device,
) -> Result<(EngineConfig, String), CliError> {
    let model = &source.model;
    let (text, chat_note) = match args.prompt.as_deref() {
        Some(p) => (p.to_string(), None),
        None => chat_default_prompt(model),
    };
    let mut prompt = model.tokenizer.encode(&text, true);
    if prompt.is_empty() {
        return Err(CliError::usage("--prompt: the prompt encodes to no tokens"));
    }
    let ctx = args
        .engine
        .ctx
        .unwrap_or(DEFAULT_CTX)
        .min(model.config.context_length);
    if ctx < 2 {
        return Err(CliError::usage("--ctx must be at least 2"));
    }
    // Leave room to decode: a prompt longer than half the context is cut to its end.
    if prompt.len() > ctx / 2 {
        prompt.drain(..prompt.len() - ctx / 2);
    }
    let timing = Timing::from(args.timing);
    let numerics = args.engine.numerics_on(&device);
    let c = &model.config;
    let wtype = model.weights.layers.first().map_or("-", |l| l.wq.ty.name());
    let header = Header {
        model: source.label.clone(),
        model_detail: format!(
            "{} · {} layers · d{} · {}",
            c.arch.name(),
            c.n_layers,
            c.n_embd,
            wtype
        ),
        device: device_label(&device),
        timing: header_timing(&device, timing),
        numerics: numerics.name().to_string(),
        synthetic: source.synthetic,
    };
    let batch_prompts = batch_prompts(args, model, &prompt, ctx)?;
    let budgets = Budgets::from_profile(args.profile.as_deref()).map_err(CliError::usage)?;
    let status = match (&args.profile, chat_note) {
        (Some(p), _) => format!("budgets from profile {p}"),
        (None, Some(note)) => note,
        (None, None) => String::new(),
    };
    Ok((
        EngineConfig {
            prompt,
            ctx,
            warmup: args.warmup,
            profiled: timing != Timing::Off,
            budgets,
            header,
            device,
            timing,
            numerics,
            nvml_peak_gbps: None,
            batch: args.batch.clone(),
            batch_prompts,
            metrics: None,
        },
        status,
    ))
}
