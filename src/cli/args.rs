//! Command-line arguments, as DESIGN.md's CLI section lists them.

use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "cbtop",
    version,
    about = "top for LLM inference: where each microsecond of a token goes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print a GGUF file's metadata and tensor table.
    Inspect(InspectArgs),
    /// Tokenize text with a model's tokenizer.
    Tokenize(TokenizeArgs),
    /// Generate text (or token ids and logits with --json).
    Generate(GenerateArgs),
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
}

impl FromStr for DeviceArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DeviceArg::Auto),
            "cpu" => Ok(DeviceArg::Cpu),
            "cuda" => Ok(DeviceArg::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceArg::Cuda)
                .ok_or_else(|| format!("{s:?} is not auto, cpu, cuda or cuda:N")),
        }
    }
}

/// Options shared by every command that runs the engine.
#[derive(Args, Debug)]
pub struct EngineArgs {
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: DeviceArg,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Context length in tokens (default: prompt + max tokens).
    #[arg(long)]
    pub ctx: Option<usize>,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The GGUF model.
    #[arg(long)]
    pub model_path: PathBuf,
    /// Prompt text (special tokens are parsed).
    #[arg(long, conflicts_with = "ids", required_unless_present = "ids")]
    pub prompt: Option<String>,
    /// Prompt as token ids, e.g. "1 5 9".
    #[arg(long)]
    pub ids: Option<String>,
    /// Tokens to generate.
    #[arg(long, default_value_t = 32)]
    pub max_tokens: usize,
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
