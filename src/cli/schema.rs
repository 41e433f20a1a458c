//! `cbtop schema`: print the JSON Schema of the headless report.

use super::CliError;

pub fn run() -> Result<(), CliError> {
    Err(CliError::runtime("schema is not built yet"))
}
