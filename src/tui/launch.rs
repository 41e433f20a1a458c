//! Command-line glue for the live view: load the model, turn `ProfileArgs` into the engine's
//! configuration (prompt tokens, context, timing, header), then hand over to `run_live`.
//!
//! Without `--model-path` the embedded default (a synthetic model, labelled as such) is built,
//! exactly as the headless mode does.

use super::engine::EngineConfig;
use super::snapshot::Header;
use super::Source;
use crate::cli::args::{ProfileArgs, TimingArg};
use crate::cli::headless::budgets;
use crate::cli::{CliError, Device};
use crate::profiler::model_source::ModelSource;
use crate::telemetry::GpuProbe;

/// Decoded when no `--prompt` is given; decoding restarts from it whenever the context fills.
pub const DEFAULT_PROMPT: &str =
    "The history of computing is a story of machines that learned to do arithmetic faster. \
     Tell it from the beginning.";
/// Context when `--ctx` is not given: long enough for steady numbers, short enough that the
/// attention cost stays close to the decode of a chat turn.
pub const DEFAULT_CTX: usize = 512;

/// `cbtop [--model-path FILE] ...`: the live view of `src` (loaded from `--model-path`) on
/// `device` (`--device` resolved).
pub fn run(
    args: ProfileArgs,
    src: ModelSource,
    device: Device,
    status: Option<String>,
) -> Result<(), CliError> {
    let label = match &src.path {
        Some(p) => format!("{} ({p})", src.model.name()),
        None => format!("{} (embedded default)", src.model.name()),
    };
    run_source(
        Source {
            model: src.model.clone(),
            label,
            synthetic: src.synthetic,
        },
        &args,
        device,
        status,
    )
}

/// The live view on an already-loaded model; `status` is a first status line to show (e.g.
/// why `--device auto` fell back to the CPU).
pub fn run_source(
    source: Source,
    args: &ProfileArgs,
    device: Device,
    status: Option<String>,
) -> Result<(), CliError> {
    let nvml_index = device.nvml_index();
    let nvml_peak = nvml_index.and_then(|i| GpuProbe::open(i).ok()?.peak_bandwidth_gbps().ok());
    if let Device::Cuda(g) = &device {
        eprintln!(
            "cbtop: starting the CUDA engine on cuda:{} ({}): uploading weights, compiling kernels",
            g.ordinal, g.name
        );
    }
    let (mut cfg, first) = config(&source, args, device)?;
    cfg.nvml_peak_gbps = nvml_peak;
    let status = match (status, first.is_empty()) {
        (Some(s), true) => s,
        (Some(s), false) => format!("{s}; {first}"),
        (None, _) => first,
    };
    super::run_live(source, cfg, status, nvml_index.unwrap_or(0))
}

/// How `--timing` reads in the header on `device`.
pub fn timing_label(device: &Device, timing: TimingArg) -> &'static str {
    match (device, timing) {
        (_, TimingArg::Off) => "off (no per-brick timing)",
        (Device::Cpu, _) => "cpu_timer",
        (Device::Cuda(_), TimingArg::Events) => "gpu_globaltimer",
        (Device::Cuda(_), TimingArg::Sync) => "host_sync",
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

/// The engine configuration for `args` on `device`, and a first status line (or empty).
pub fn config(
    source: &Source,
    args: &ProfileArgs,
    device: Device,
) -> Result<(EngineConfig, String), CliError> {
    let model = &source.model;
    let text = args.prompt.as_deref().unwrap_or(DEFAULT_PROMPT);
    let mut prompt = model.tokenizer.encode(text, true);
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
        timing: timing_label(&device, args.timing).into(),
        synthetic: source.synthetic,
    };
    let budgets = budgets(args.profile.as_deref())?;
    let status = match &args.profile {
        Some(p) => format!("budgets from profile {p}"),
        None => String::new(),
    };
    Ok((
        EngineConfig {
            prompt,
            ctx,
            warmup: args.warmup,
            profiled: args.timing != TimingArg::Off,
            budgets,
            header,
            device,
            timing: args.timing,
            nvml_peak_gbps: None,
        },
        status,
    ))
}
