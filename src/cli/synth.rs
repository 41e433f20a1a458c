//! `cbtop synth`: write a synthetic model (see `crate::synth`).

use super::args::SynthArgs;
use super::CliError;

pub fn run(_a: SynthArgs) -> Result<(), CliError> {
    Err(CliError::runtime("synth is not built yet"))
}
