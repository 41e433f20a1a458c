//! One parsed command line to the subcommand that runs it.

use super::args::{Cli, Command};
use super::device::{resolve_devices, setup_threads};
use super::error::CliError;
use super::{
    compare, doctor, generate, headless, history, inspect, live, schema, sinks, synth, tokenize,
};

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
        Some(Command::History(a)) => history::run(a),
        Some(Command::Schema) => schema::run(),
        Some(Command::Doctor) => doctor::run(),
        None if cli.profile.headless => headless::run_headless(cli.profile),
        None => {
            // Arguments, then the model, then the device (docs/DESIGN.md): a bad model is one error
            // line before any probing. The live view runs the engine `--device` picks, as
            // headless does; a fallback from auto to the CPU is said in the status line
            // (stderr is hidden behind the view).
            setup_threads(&cli.profile.engine)?;
            let metrics = sinks::start_metrics(&cli.profile)?;
            let mut src = headless::load_model(cli.profile.model_path.as_deref())?;
            let extended = cli.profile.engine.ctx.and_then(|c| src.extend_context(c));
            let (devices, note) = resolve_devices(&cli.profile.engine)?;
            let note = match (extended, note) {
                (Some(w), Some(n)) => Some(format!("{w}; {n}")),
                (w, n) => w.or(n),
            };
            live::run(cli.profile, src, devices, note, metrics)
        }
    }
}
