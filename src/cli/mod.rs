//! The command line: argument definitions (clap) and one module per subcommand. Every failure
//! becomes a `CliError` with docs/DESIGN.md's exit code and one sentence.

pub mod args;
mod compare;
mod device;
mod dispatch;
pub mod doctor;
mod error;
mod generate;
mod generate_batch;
pub mod headless;
mod history;
mod ids;
mod inspect;
pub mod interrupt;
mod live;
pub mod output;
mod prompt;
mod schema;
mod sinks;
mod synth;
mod tokenize;

pub use args::Cli;
pub use device::{nvml_index, resolve_device, setup_threads};
pub use dispatch::run;
pub use error::{exit, one_line, CliError};
