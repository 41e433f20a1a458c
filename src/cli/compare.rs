//! `cbtop compare A B`: two headless reports side by side (see `crate::report::compare`).

use super::args::CompareArgs;
use super::error::{exit, CliError};
use crate::report::compare::{compare, read_report, to_text};

pub fn run(a: CompareArgs) -> Result<(), CliError> {
    let ra = read_report(&a.a).map_err(CliError::usage)?;
    let rb = read_report(&a.b).map_err(CliError::usage)?;
    let c = compare(&ra, &rb);
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&c).expect("a comparison always serialises")
        );
    } else {
        print!("{}", to_text(&c));
    }
    if let Some(max) = a.max_regression {
        if !(max.is_finite() && max >= 0.0) {
            return Err(CliError::usage(format!(
                "--max-regression {max}: must be a non-negative number"
            )));
        }
        if c.regression_percent > max {
            return Err(CliError {
                code: exit::GATE_FAILED,
                message: format!(
                    "CI gate failed: max_regression (B is {:.2}% below A's tok/s, allowed {max}%)",
                    c.regression_percent
                ),
            });
        }
    }
    Ok(())
}
