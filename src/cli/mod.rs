//! The command line: argument definitions (clap) and one module per subcommand. Every failure
//! becomes a `CliError` with DESIGN.md's exit code and one sentence.

pub mod args;
mod compare;
pub mod doctor;
mod generate;
pub mod headless;
mod inspect;
pub mod interrupt;
mod live;
pub mod output;
mod schema;
mod synth;
mod tokenize;

use std::fmt::Display;

pub use args::Cli;
use args::{Command, DeviceArg};

pub use crate::engine::backend::Device;
use crate::engine::cuda::probe::probe;

/// Exit codes (DESIGN.md).
pub mod exit {
    pub const OK: i32 = 0;
    pub const GATE_FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const RUNTIME: i32 = 3;
    /// Ended by a signal: 128 + its number (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
    pub const SIGNALLED: i32 = 128;
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

/// clap's usage error as one line: its message lines joined, without the `error: ` prefix, the
/// usage block and the `--help` hint.
pub fn one_line(clap_error: &str) -> String {
    let mut out = String::new();
    for line in clap_error.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') || line.starts_with('[') {
                " "
            } else {
                "; "
            });
        }
        out.push_str(line);
    }
    out
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Some(Command::Inspect(a)) => inspect::run(a),
        Some(Command::Tokenize(a)) => tokenize::run(a),
        Some(Command::Generate(a)) => {
            setup_threads(&a.engine)?;
            generate::run(a)
        }
        Some(Command::Synth(a)) => synth::run(a),
        Some(Command::Compare(a)) => compare::run(a),
        Some(Command::Schema) => schema::run(),
        Some(Command::Doctor) => doctor::run(),
        None if cli.profile.headless => headless::run_headless(cli.profile),
        None => {
            // Arguments, then the model, then the device (DESIGN.md): a bad model is one error
            // line before any probing. The live view runs the engine `--device` picks, as
            // headless does; a fallback from auto to the CPU is said in the status line
            // (stderr is hidden behind the view).
            setup_threads(&cli.profile.engine)?;
            let src = headless::load_model(cli.profile.model_path.as_deref())?;
            let (device, note) = resolve_device(&cli.profile.engine, true)?;
            live::run(cli.profile, src, device, note)
        }
    }
}

/// The NVML index of the GPU `device` is, found by its PCI address (else its CUDA ordinal), for
/// the telemetry thread; None on the CPU.
pub fn nvml_index(device: &Device) -> Option<u32> {
    let Device::Cuda(g) = device else { return None };
    Some(
        crate::engine::gpu_pci::pci_bus_id(g.ordinal)
            .and_then(|id| crate::telemetry::gpu::nvml_index_of(&id).ok())
            .unwrap_or(g.ordinal as u32),
    )
}

/// Resolve `--device`: auto is the GPU when `gpu_capable` and one is usable, else the CPU, with
/// the reason returned as a note (`running on the CPU: ...`) for the caller to print and
/// record; cuda when unusable is exit 3 with the reason. Called once the arguments and the
/// model have been checked, so a bad input is never preceded by device messages.
pub fn resolve_device(
    e: &args::EngineArgs,
    gpu_capable: bool,
) -> Result<(Device, Option<String>), CliError> {
    Ok(match e.device {
        DeviceArg::Cpu => (Device::Cpu, None),
        DeviceArg::Auto if !gpu_capable => (Device::Cpu, None),
        DeviceArg::Auto => match probe().gpu(0) {
            Ok(g) => (Device::Cuda(g.clone()), None),
            Err(reason) => (Device::Cpu, Some(format!("running on the CPU: {reason}"))),
        },
        DeviceArg::Cuda(n) => match probe().gpu(n) {
            Ok(g) => (Device::Cuda(g.clone()), None),
            Err(reason) => {
                return Err(CliError::runtime(format!(
                    "--device cuda:{n}: no usable CUDA GPU: {reason}"
                )))
            }
        },
    })
}

/// Apply `--threads` (an argument check, before the model is read: loading may already use
/// the thread pool).
pub fn setup_threads(e: &args::EngineArgs) -> Result<(), CliError> {
    if let Some(n) = e.threads {
        if n == 0 {
            return Err(CliError::usage("--threads must be at least 1"));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|err| CliError::runtime(format!("--threads {n}: {err}")))?;
        crate::engine::cpu::pool::init(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let invalid = "error: invalid value 'bogus' for '--numerics <NUMERICS>'\n  \
                       [possible values: fast, exact]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(invalid),
            "invalid value 'bogus' for '--numerics <NUMERICS>' [possible values: fast, exact]"
        );
        let missing = "error: the following required arguments were not provided:\n  \
                       --prompt <PROMPT>\n\nUsage: cbtop generate --model-path <MODEL_PATH> \
                       --prompt <PROMPT>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(missing),
            "the following required arguments were not provided: --prompt <PROMPT>"
        );
    }
}
