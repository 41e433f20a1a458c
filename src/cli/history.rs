//! `cbtop history FILE`: the runs of a `--db` history as plots and a table (see
//! `crate::history::plot`), and the history's errors as `CliError`s with their exit codes.

use std::path::Path;

use super::args::HistoryArgs;
use super::error::CliError;
use crate::history::plot::page;
use crate::history::{Db, DbError};

/// A history error: bad input (not cbtop's, newer, missing) is exit 2, the rest exit 3.
pub fn db_error(e: DbError) -> CliError {
    match e {
        DbError::Input(m) => CliError::usage(format!("--db {m}")),
        DbError::Runtime(m) => CliError::runtime(format!("--db {m}")),
    }
}

/// Open an existing history to read.
pub fn open_history(path: &Path) -> Result<Db, CliError> {
    Db::open(path, false).map_err(db_error)
}

pub fn run(a: HistoryArgs) -> Result<(), CliError> {
    if a.last == 0 {
        return Err(CliError::usage("--last must be at least 1"));
    }
    if a.width < 20 {
        return Err(CliError::usage(format!(
            "--width {}: at least 20 columns",
            a.width
        )));
    }
    let db = open_history(&a.file)?;
    let runs = db.runs().map_err(db_error)?;
    let Some(newest) = runs.last() else {
        return Err(CliError::usage(format!(
            "{}: no runs yet",
            a.file.display()
        )));
    };
    let mut shown: Vec<_> = runs
        .iter()
        .filter(|r| r.same_key(newest))
        .cloned()
        .collect();
    let of = shown.len();
    shown.drain(..shown.len().saturating_sub(a.last));
    let title = format!(
        "{}: {} of {} runs of {} on {} ({} numerics)",
        a.file.display(),
        shown.len(),
        of,
        newest.model,
        newest.device,
        newest.numerics
    );
    print!("{}", page(&title, &shown, a.width));
    Ok(())
}
