//! Token ids as `generate` reads them (`--ids "1 5 9"`) and token bytes as it prints them in
//! JSON, shared by the one-sequence and the batched `generate`.

use super::error::CliError;

/// `--ids`: token ids split by whitespace or commas.
pub(super) fn parse_ids(s: &str) -> Result<Vec<u32>, CliError> {
    let ids: Result<Vec<u32>, _> = s
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .map(str::parse)
        .collect();
    match ids {
        Ok(v) if !v.is_empty() => Ok(v),
        Ok(_) => Err(CliError::usage("--ids: no token ids given")),
        Err(_) => Err(CliError::usage(format!(
            "--ids {s:?}: not a list of non-negative integers"
        ))),
    }
}

/// Bytes as lowercase hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
