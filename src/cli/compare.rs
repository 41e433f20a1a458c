//! `cbtop compare A B`: two headless reports side by side (see `crate::report::compare`);
//! `cbtop compare --db FILE`: the newest run of a history against the runs before it (see
//! `crate::history::judge`).

use std::path::Path;

use super::args::CompareArgs;
use super::error::{exit, CliError};
use super::history::{db_error, open_history};
use crate::history::judge::{judge, to_text as judgement_text, Options};
use crate::report::compare::{compare, read_report, to_text};

pub fn run(a: CompareArgs) -> Result<(), CliError> {
    if let Some(db) = &a.db {
        return run_db(&a, db);
    }
    let (Some(pa), Some(pb)) = (&a.a, &a.b) else {
        return Err(CliError::usage(
            "compare: give two reports (A B) or --db FILE",
        ));
    };
    let ra = read_report(pa).map_err(CliError::usage)?;
    let rb = read_report(pb).map_err(CliError::usage)?;
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

/// `compare --db FILE`: the run to judge, the `--last` runs before it of the same model,
/// device and numerics (interrupted runs left out), the verdict, exit 1 when something got
/// slower.
fn run_db(a: &CompareArgs, path: &Path) -> Result<(), CliError> {
    if !(a.alpha > 0.0 && a.alpha < 1.0) {
        return Err(CliError::usage(format!(
            "--alpha {}: must be between 0 and 1",
            a.alpha
        )));
    }
    for (flag, v) in [("--min-effect", a.min_effect), ("--min-share", a.min_share)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(CliError::usage(format!(
                "{flag} {v}: must be a non-negative number"
            )));
        }
    }
    if a.last == 0 {
        return Err(CliError::usage("--last must be at least 1"));
    }
    let db = open_history(path)?;
    let runs = db.runs().map_err(db_error)?;
    let name = path.display();
    let new = match a.run {
        Some(id) => runs
            .iter()
            .find(|r| r.id == id)
            .ok_or_else(|| CliError::usage(format!("--run {id}: {name} has no run {id}")))?,
        None => runs
            .last()
            .ok_or_else(|| CliError::usage(format!("{name}: no runs yet")))?,
    };
    let mut base: Vec<_> = runs
        .iter()
        .filter(|r| r.id < new.id && r.same_key(new) && r.status != "INTERRUPTED")
        .cloned()
        .collect();
    base.drain(..base.len().saturating_sub(a.last));
    if base.len() < 2 {
        return Err(CliError::usage(format!(
            "{name}: run {} has {} earlier runs of {} on {} ({}); compare --db needs at least 2",
            new.id,
            base.len(),
            new.model,
            new.device,
            new.numerics
        )));
    }
    let j = judge(
        new,
        &base,
        &Options {
            alpha: a.alpha,
            min_effect_percent: a.min_effect,
            min_share_percent: a.min_share,
            ..Options::default()
        },
    );
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&j).expect("a judgement always serialises")
        );
    } else {
        print!("{}", judgement_text(&j));
    }
    if j.regressed() {
        let mut what: Vec<String> = j
            .bricks
            .iter()
            .filter(|b| j.slower.contains(&b.id))
            .map(|b| format!("{} ({:+.1}%)", b.id, b.change_percent.unwrap_or(0.0)))
            .collect();
        if j.tokens_per_sec.moved == crate::history::judge::Move::Slower {
            what.push(format!("tok/s ({:+.1}%)", j.tokens_per_sec.change_percent));
        }
        return Err(CliError {
            code: exit::GATE_FAILED,
            message: format!(
                "CI gate failed: run {} is slower than the last {} runs: {}",
                new.id,
                base.len(),
                what.join(", ")
            ),
        });
    }
    Ok(())
}
