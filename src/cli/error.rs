//! How a command fails: docs/DESIGN.md's exit codes, and `CliError`, one sentence with its code.

use std::fmt::Display;

/// Exit codes (docs/DESIGN.md).
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
