//! Command-line glue for the live view: load the model, turn `ProfileArgs` into the engine's
//! configuration (prompt tokens, context, timing, header), then hand over to `run_live`.
//!
//! Without `--model-path` the embedded default (a synthetic model, labelled as such) is built,
//! exactly as the headless mode does.

use super::engine::EngineConfig;
use super::snapshot::Header;
use super::Source;
use crate::cli::args::{ProfileArgs, TimingArg};
use crate::cli::headless::{budgets, load_model};
use crate::cli::CliError;

/// Decoded when no `--prompt` is given; decoding restarts from it whenever the context fills.
pub const DEFAULT_PROMPT: &str =
    "The history of computing is a story of machines that learned to do arithmetic faster. \
     Tell it from the beginning.";
/// Context when `--ctx` is not given: long enough for steady numbers, short enough that the
/// attention cost stays close to the decode of a chat turn.
pub const DEFAULT_CTX: usize = 512;

/// `cbtop [--model-path FILE] ...`: the live view.
pub fn run(args: ProfileArgs) -> Result<(), CliError> {
    let src = load_model(args.model_path.as_deref())?;
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
    )
}

/// The live view on an already-loaded model.
pub fn run_source(source: Source, args: &ProfileArgs) -> Result<(), CliError> {
    let (cfg, status) = config(&source, args)?;
    super::run_live(source, cfg, status).map_err(|e| CliError::runtime(format!("terminal: {e}")))
}

/// The engine configuration for `args`, and a first status line (or empty).
pub fn config(source: &Source, args: &ProfileArgs) -> Result<(EngineConfig, String), CliError> {
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
        device: format!("cpu · {} threads", rayon::current_num_threads()),
        timing: if args.timing == TimingArg::Off {
            "off (no per-brick timing)".into()
        } else {
            "cpu_timer".into()
        },
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
        },
        status,
    ))
}
