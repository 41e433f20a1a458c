//! `cbtop schema`: print the JSON Schema of the headless report (derived from the report
//! types, so it cannot drift from what `--json` writes).

use super::error::CliError;
use crate::report::Report;

pub fn run() -> Result<(), CliError> {
    println!("{}", report_schema());
    Ok(())
}

/// The schema as pretty JSON.
pub fn report_schema() -> String {
    let schema = schemars::schema_for!(Report);
    serde_json::to_string_pretty(&schema).expect("a schema always serialises")
}
