//! `cbtop synth`: write a synthetic model (see `crate::synth`).

use std::time::Instant;

use super::args::SynthArgs;
use super::error::CliError;
use crate::profile::Profile;
use crate::synth::{self, QuantMix};

pub fn run(a: SynthArgs) -> Result<(), CliError> {
    let mix = QuantMix::from_name(&a.quant).ok_or_else(|| {
        CliError::usage(format!(
            "--quant {}: not a mix synth writes ({})",
            a.quant,
            QuantMix::ALL.map(|m| m.name()).join(", ")
        ))
    })?;
    let shape = Profile::shape(&a.shape).map_err(|e| CliError::usage(format!("--shape: {e}")))?;
    let t0 = Instant::now();
    let size = synth::write_file(&shape, mix, a.seed, &a.output)
        .map_err(|e| CliError::runtime(format!("-o {}: {e}", a.output.display())))?;
    eprintln!(
        "wrote {} ({} {} synthetic weights, seed {}): {:.1} MB in {:.2} s",
        a.output.display(),
        shape.name,
        mix.name(),
        a.seed,
        size as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
