//! The `cbtop` binary: parse arguments, run, and turn every failure into one line on stderr
//! and docs/DESIGN.md's exit code.

use std::io::Write;

use clap::error::ErrorKind;
use clap::Parser;

use cbtop::cli::{self, exit, Cli};

fn main() {
    // A bug must still end in one line and exit code 3, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let loc = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        // Not eprintln!: it panics when stderr is gone (a closed terminal), inside this hook.
        let _ = writeln!(std::io::stderr(), "cbtop: internal error: {msg}{loc}");
        std::process::exit(exit::RUNTIME);
    }));
    // Rust ignores SIGPIPE, so `cbtop inspect model.gguf | head` would fail its next write
    // and end in an error; with the default action it ends quietly, as other Unix tools do.
    // SAFETY: setting a signal's disposition to the default, before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::try_parse().unwrap_or_else(|e| usage_error(e));
    if let Err(e) = cli::run(cli) {
        // A signal is not an error; after SIGHUP there may be no terminal left to print to.
        if e.code >= exit::SIGNALLED {
            if !e.message.is_empty() {
                let _ = writeln!(std::io::stderr(), "cbtop: {}", e.message);
            }
        } else {
            eprintln!("cbtop: error: {}", e.message);
        }
        std::process::exit(e.code);
    }
}

/// A command line clap rejects: help and version print as clap prints them; anything else is
/// one line naming the flag and exit 2 (docs/DESIGN.md: errors are one sentence).
fn usage_error(e: clap::Error) -> ! {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    eprintln!("cbtop: error: {}", cli::one_line(&e.render().to_string()));
    std::process::exit(exit::USAGE);
}
