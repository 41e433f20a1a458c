//! The command line: argument definitions (clap) and one module per subcommand. Every failure
//! becomes a `CliError` with DESIGN.md's exit code and one sentence.

pub mod args;
mod compare;
mod generate;
pub mod headless;
mod inspect;
mod schema;
mod synth;
mod tokenize;

use std::fmt::Display;

pub use args::Cli;
use args::{Command, DeviceArg};

/// Exit codes (DESIGN.md).
pub mod exit {
    pub const OK: i32 = 0;
    pub const GATE_FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const RUNTIME: i32 = 3;
}

/// A failed command: the exit code and the one-line message.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

impl CliError {
    pub fn usage(m: impl Display) -> CliError {
        CliError {
            code: exit::USAGE,
            message: m.to_string(),
        }
    }
    pub fn runtime(m: impl Display) -> CliError {
        CliError {
            code: exit::RUNTIME,
            message: m.to_string(),
        }
    }
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Some(Command::Inspect(a)) => inspect::run(a),
        Some(Command::Tokenize(a)) => tokenize::run(a),
        Some(Command::Generate(a)) => {
            setup_engine(&a.engine)?;
            generate::run(a)
        }
        Some(Command::Synth(a)) => synth::run(a),
        Some(Command::Compare(a)) => compare::run(a),
        Some(Command::Schema) => schema::run(),
        None if cli.profile.headless => {
            setup_engine(&cli.profile.engine)?;
            headless::run_headless(cli.profile)
        }
        None => {
            setup_engine(&cli.profile.engine)?;
            crate::tui::run(cli.profile)
        }
    }
}

/// Apply `--threads` and `--device` before any engine work.
fn setup_engine(e: &args::EngineArgs) -> Result<(), CliError> {
    match e.device {
        DeviceArg::Auto | DeviceArg::Cpu => {}
        DeviceArg::Cuda(_) => {
            return Err(CliError::runtime(
                "--device cuda: this build of cbtop has no CUDA backend yet; use --device cpu",
            ))
        }
    }
    if let Some(n) = e.threads {
        if n == 0 {
            return Err(CliError::usage("--threads must be at least 1"));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|err| CliError::runtime(format!("--threads {n}: {err}")))?;
    }
    Ok(())
}
