//! Command-line arguments, as docs/DESIGN.md's CLI section lists them.

use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, Parser, Subcommand};

use crate::engine::{Device, Numerics, Timing};

#[derive(Parser, Debug)]
#[command(
    name = "cbtop",
    version,
    about = "top for LLM inference: where each microsecond of a token goes"
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Profile a model: the live view, or a report with --headless.
    #[command(flatten)]
    pub profile: ProfileArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print a GGUF file's metadata and tensor table.
    Inspect(InspectArgs),
    /// Tokenize text with a model's tokenizer (no engine runs: there is no --device).
    Tokenize(TokenizeArgs),
    /// Generate text (or token ids and logits with --json).
    Generate(GenerateArgs),
    /// Write a synthetic model (random weights, real shape) as GGUF.
    Synth(SynthArgs),
    /// Compare two headless reports, or the newest run of a --db history with the runs
    /// before it.
    Compare(CompareArgs),
    /// Plot tok/s and each brick's time over the runs of a --db history.
    History(HistoryArgs),
    /// Print the JSON Schema of the headless report.
    Schema,
    /// Report the CUDA driver, NVRTC and GPUs, or why no GPU is usable.
    Doctor,
}

/// Per-brick timing method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TimingArg {
    /// Every kernel stamps its start and end on the GPU clock while the step replays as one
    /// CUDA graph; the GPU idle time between kernels is its own line (on the CPU: the host clock).
    Events,
    /// Stream sync + host clock around each brick (on the CPU: the host clock).
    Sync,
    /// No per-brick timing: headline tok/s only.
    Off,
}

impl From<TimingArg> for Timing {
    fn from(t: TimingArg) -> Timing {
        match t {
            TimingArg::Events => Timing::Events,
            TimingArg::Sync => Timing::Sync,
            TimingArg::Off => Timing::Off,
        }
    }
}

/// Floating-point numerics (docs/DESIGN.md "Numerics").
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NumericsArg {
    /// Kernels may reorder floating-point sums (held to llama.cpp's CUDA-vs-CPU spread).
    Fast,
    /// The CPU engine's bits (llama.cpp's plain x86 arithmetic), on either device.
    Exact,
}

impl From<NumericsArg> for Numerics {
    fn from(n: NumericsArg) -> Numerics {
        match n {
            NumericsArg::Fast => Numerics::Fast,
            NumericsArg::Exact => Numerics::Exact,
        }
    }
}

/// Headless report formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Json,
    Md,
    Csv,
    /// OpenMetrics text (Prometheus): for a pushgateway or a textfile collector.
    Openmetrics,
}

/// The profiler: live view by default, a report with `--headless`.
#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// The GGUF model (default: an embedded synthetic model, labelled "synthetic weights").
    #[arg(long)]
    pub model_path: Option<PathBuf>,
    /// Prompt to evaluate before decoding (default: a built-in one).
    #[arg(long)]
    pub prompt: Option<String>,
    /// Budget profile: a name from profiles/ or a TOML file.
    #[arg(long)]
    pub profile: Option<String>,
    /// Per-brick timing: events, sync or off.
    #[arg(long, value_enum, default_value = "events")]
    pub timing: TimingArg,
    /// Run without the TUI and write a report.
    #[arg(long)]
    pub headless: bool,
    /// With --headless: print the JSON report on stdout (same as --format json).
    #[arg(long)]
    pub json: bool,
    /// Write the report to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Report format.
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Decode steps discarded before measuring.
    #[arg(long, default_value_t = 8)]
    pub warmup: usize,
    /// Decode steps measured.
    #[arg(long, default_value_t = 128)]
    pub tokens: usize,
    /// Prompt length in tokens (the prompt is cut or repeated to this length).
    #[arg(long)]
    pub prefill: Option<usize>,
    /// Write a Chrome/Perfetto trace of every brick span to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// After the run, decode N sequences together (each its own prompt and KV cache, one
    /// pass per step) for each N of a list such as 1,2,4,8; the report gets a `batch`
    /// section.
    #[arg(
        long,
        alias = "concurrent",
        value_name = "N[,N...]",
        value_delimiter = ','
    )]
    pub batch: Vec<usize>,
    /// With --batch: the sequences' prompts, one a line, taken in turn (default: the run's
    /// prompt, varied per sequence).
    #[arg(long, value_name = "FILE", requires = "batch")]
    pub prompt_file: Option<PathBuf>,
    /// CI mode: no progress output. Gates are enforced whenever given.
    #[arg(long)]
    pub ci: bool,
    /// Gate: decode tok/s at least X.
    #[arg(long, value_name = "X")]
    pub min_tok_s: Option<f64>,
    /// Gate: model score at least X (0..100).
    #[arg(long, value_name = "X")]
    pub min_score: Option<f64>,
    /// Gate: per-token time CV at most PCT percent.
    #[arg(long, value_name = "PCT")]
    pub max_cv: Option<f64>,
    /// Gate: brick ID's mean time per token at most X microseconds (repeatable).
    #[arg(long, value_name = "ID=X")]
    pub max_brick_us: Vec<String>,
    /// Baseline report to compare tok/s against.
    #[arg(long, value_name = "FILE", requires = "max_regression")]
    pub baseline: Option<PathBuf>,
    /// Gate: tok/s may drop at most PCT percent below the baseline.
    #[arg(long, value_name = "PCT", requires = "baseline")]
    pub max_regression: Option<f64>,
    /// Serve /metrics (OpenMetrics: brick latency histograms, tok/s, TTFT, NVML gauges) on
    /// ADDR, e.g. 127.0.0.1:9464 (port 0: any free port, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// With --headless and --metrics-listen: keep serving the finished run's metrics this
    /// many seconds after the report is written, so a scraper sees the final state.
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "metrics_listen",
        requires = "headless"
    )]
    pub metrics_hold: Option<f64>,
    /// With --headless: append the report to this SQLite history (created when new); see
    /// `cbtop history` and `cbtop compare --db`.
    #[arg(long, value_name = "FILE", requires = "headless")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The history database (`--db FILE` of headless runs).
    pub file: PathBuf,
    /// Show the newest N runs of the newest run's model, device and numerics.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub last: usize,
    /// Width of the plots in columns.
    #[arg(long, default_value_t = 80, value_name = "COLUMNS")]
    pub width: u16,
}

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Model shape: a name from profiles/ (e.g. qwen2.5-0.5b) or a TOML file.
    #[arg(long)]
    pub shape: String,
    /// Weight mix, as llama-quantize names them: q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k_m,
    /// q4_k_m, q5_k_m, q6_k, f16 or bf16.
    #[arg(long)]
    pub quant: String,
    /// Output GGUF file.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Seed for the random weights (same seed, same bytes).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Baseline report (JSON).
    #[arg(required_unless_present = "db", conflicts_with = "db")]
    pub a: Option<PathBuf>,
    /// New report (JSON).
    #[arg(required_unless_present = "db", conflicts_with = "db")]
    pub b: Option<PathBuf>,
    /// Exit 1 when B's tok/s is more than PCT percent below A's.
    #[arg(long, value_name = "PCT", conflicts_with = "db")]
    pub max_regression: Option<f64>,
    /// Judge the newest run of this history against the runs before it (same model, device
    /// and numerics) with a Mann-Whitney test on per-step brick times; exit 1 when a brick or
    /// tok/s got slower.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// With --db: how many earlier runs make the baseline.
    #[arg(long, value_name = "N", default_value_t = 10, requires = "db")]
    pub last: usize,
    /// With --db: judge this run id instead of the newest.
    #[arg(long, value_name = "ID", requires = "db")]
    pub run: Option<i64>,
    /// With --db: family-wise significance level, split over the bricks (Bonferroni).
    #[arg(long, value_name = "P", default_value_t = 0.01, requires = "db")]
    pub alpha: f64,
    /// With --db: the smallest change that counts, percent (the runs' own spread may ask for
    /// more).
    #[arg(long, value_name = "PCT", default_value_t = 10.0, requires = "db")]
    pub min_effect: f64,
    /// With --db: a brick's change must also be at least this share of the token time,
    /// percent (so a brick of a microsecond moving by the timer's granularity is not news).
    #[arg(long, value_name = "PCT", default_value_t = 0.2, requires = "db")]
    pub min_share: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The GGUF file.
    pub file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    /// The GGUF model whose tokenizer to use.
    #[arg(long)]
    pub model_path: PathBuf,
    /// The text to tokenize.
    pub text: String,
    /// Treat special-token text (e.g. <|im_start|>) as plain text.
    #[arg(long)]
    pub no_parse_special: bool,
    /// Print `{"ids": [...], "pieces": [...]}`.
    #[arg(long)]
    pub json: bool,
}

/// Where the engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceArg {
    Auto,
    Cpu,
    Cuda(usize),
    /// Every usable GPU, one engine each (the profile only: headless and live view).
    All,
}

impl FromStr for DeviceArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DeviceArg::Auto),
            "cpu" => Ok(DeviceArg::Cpu),
            "cuda" => Ok(DeviceArg::Cuda(0)),
            "all" => Ok(DeviceArg::All),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceArg::Cuda)
                .ok_or_else(|| format!("{s:?} is not auto, cpu, cuda, cuda:N or all")),
        }
    }
}

/// Options shared by every command that runs the engine.
#[derive(Args, Debug)]
pub struct EngineArgs {
    /// auto, cpu, cuda, cuda:N, or all (every GPU, one engine each; the profile only).
    #[arg(long, default_value = "auto")]
    pub device: DeviceArg,
    /// fast or exact (bit for bit the CPU reference's). Default: fast on a GPU, exact on the
    /// CPU, whose fast path reorders the sums of a prompt's Q4_0 and Q8_0 products.
    #[arg(long, value_enum)]
    pub numerics: Option<NumericsArg>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Context length in tokens (default: prompt + max tokens). Past the model's trained
    /// context it runs with a warning, as llama.cpp's -c does (the live view and headless).
    #[arg(long)]
    pub ctx: Option<usize>,
}

impl EngineArgs {
    /// The numerics the engine on `device` runs with: `--numerics`, else the device's default.
    pub fn numerics_on(&self, device: &Device) -> Numerics {
        self.numerics
            .map_or_else(|| device.default_numerics(), Numerics::from)
    }
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The GGUF model.
    #[arg(long)]
    pub model_path: PathBuf,
    /// Prompt text (special tokens are parsed); several --prompt decode together (CPU).
    #[arg(long, conflicts_with = "ids", required_unless_present = "ids")]
    pub prompt: Vec<String>,
    /// Prompt as token ids, e.g. "1 5 9".
    #[arg(long)]
    pub ids: Option<String>,
    /// Each --prompt is a user's turn, laid out by the model's chat template
    /// (`tokenizer.chat_template`) with the assistant's turn opened after it.
    #[arg(long, conflicts_with = "ids")]
    pub chat: bool,
    /// A system turn before the user's (with --chat).
    #[arg(long, requires = "chat")]
    pub system: Option<String>,
    /// Tokens to generate.
    #[arg(long, default_value_t = 32)]
    pub max_tokens: usize,
    /// Sequences decoded together, one pass per step: the prompts given, taken in turn
    /// (default: one per --prompt). Each sequence samples with the seed plus its index.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Greedy decoding (same as --temperature 0).
    #[arg(long)]
    pub greedy: bool,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f32,
    /// Sample from the K most likely tokens (0 = all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Nucleus sampling threshold.
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Random seed for sampling.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// With --json: the K highest logits of each step.
    #[arg(long, default_value_t = 5)]
    pub top_k_logits: usize,
    /// With --json: every step's full logit vector.
    #[arg(long)]
    pub full_logits: bool,
    /// With --json: full logits at every prompt position too.
    #[arg(long)]
    pub prompt_logits: bool,
    /// Keep generating after an end-of-generation token.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Print one JSON line in the reference fixtures' layout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}
