//! `cbtop compare A B`: two headless reports side by side (see `crate::report::compare`).

use super::args::CompareArgs;
use super::CliError;

pub fn run(_a: CompareArgs) -> Result<(), CliError> {
    Err(CliError::runtime("compare is not built yet"))
}
