//! `--db` history on real runs: 21 short headless runs into a database, `cbtop history`
//! plotting them, `compare --db` passing each of the last 10 unchanged runs against the 10
//! before it, and naming `ffn_down` when a run slows it on purpose (`CBTOP_TEST_SLOW_BRICK`);
//! and the bad inputs: a file that is not cbtop's, a newer schema, a locked database (the
//! report still written to `--output`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{cbtop, stderr};

/// The tests here run one at a time: a run measured while another test's run competes for the
/// cores and memory really is slower, and the verdicts below are about unchanged runs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-history-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A short headless run on one CPU thread, appended to `db`, with `env` set.
fn run_into(db: &Path, out: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cbtop"))
        .args(common::HEADLESS_CPU)
        .args(["--tokens", "24", "--warmup", "4", "--db"])
        .arg(db)
        .arg("--output")
        .arg(out)
        .env_remove("CBTOP_TEST_SLOW_BRICK")
        .envs(env.iter().copied())
        .output()
        .expect("run cbtop")
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn history_plots_runs_and_compare_flags_only_a_brick_made_slower() {
    let _alone = alone();
    let dir = scratch("runs");
    let db = dir.join("history.db");
    let out = dir.join("report.json");
    for i in 0..21 {
        let commit = format!("commit{i:02}");
        let o = run_into(&db, &out, &[("CBTOP_COMMIT", &commit)]);
        assert_eq!(o.status.code(), Some(0), "run {i}: {}", stderr(&o));
    }
    let dbs = db.to_str().unwrap();
    let h = cbtop(&["history", dbs, "--width", "70"]);
    assert_eq!(h.status.code(), Some(0), "{}", stderr(&h));
    let page = text(&h);
    assert!(page.contains(": 21 of 21 runs of SmolLM2-135M"), "{page}");
    // The tok/s chart (braille), a sparkline row per brick, a table row per run.
    assert!(
        page.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
        "{page}"
    );
    for brick in ["qkv", "attention", "ffn_down", "lm_head"] {
        assert!(
            page.lines().any(|l| l.starts_with(brick)),
            "{brick}\n{page}"
        );
    }
    for i in 0..21 {
        assert!(page.contains(&format!("commit{i:02}")), "{page}");
    }

    // Each of the last 10 unchanged runs against the 10 before it: nothing moved. The smallest
    // effect is generous (150%, the default is 10%): a run measured while something else takes
    // the machine (a build beside the tests, another guest on a shared host's memory) really is
    // slower, every brick at once; the slowed brick below grows sixfold.
    let judge = |extra: &[&str]| {
        let mut args = vec!["compare", "--db", dbs, "--min-effect", "150"];
        args.extend_from_slice(extra);
        cbtop(&args)
    };
    for run in 12..=21 {
        let c = judge(&["--run", &run.to_string()]);
        assert_eq!(
            c.status.code(),
            Some(0),
            "unchanged run {run} flagged: {}{}",
            text(&c),
            stderr(&c)
        );
        assert!(
            text(&c).contains("against the last 10 runs (") && text(&c).contains("no brick moved"),
            "{}",
            text(&c)
        );
    }

    // ffn_down slowed on purpose: 500 us more in each of the 30 layers, about six times its
    // own time.
    let o = run_into(
        &db,
        &out,
        &[
            ("CBTOP_COMMIT", "slow"),
            ("CBTOP_TEST_SLOW_BRICK", "ffn_down:500"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let c = judge(&[]);
    let e = stderr(&c);
    assert_eq!(c.status.code(), Some(1), "{}{e}", text(&c));
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with(
            "cbtop: error: CI gate failed: run 22 is slower than the last 10 runs: ffn_down (+"
        ),
        "{e}"
    );
    let j = judge(&["--json"]);
    assert_eq!(j.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&text(&j)).unwrap();
    assert_eq!(v["slower"], serde_json::json!(["ffn_down"]), "{v}");
    assert_eq!(v["new_commit"], "slow");
    assert_eq!(v["baseline_runs"].as_array().unwrap().len(), 10);
    let _ = std::fs::remove_dir_all(dir);
}

/// One `cbtop: error:` line naming `path`, with exit `code`.
fn refused(o: &Output, code: i32, path: &Path, says: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("cbtop: error: --db "), "{e}");
    assert!(
        e.contains(&path.display().to_string()) && e.contains(says),
        "{e}"
    );
}

#[test]
fn a_database_that_is_not_cbtops_or_is_newer_is_refused_before_the_run() {
    let _alone = alone();
    let dir = scratch("bad");
    let out = dir.join("report.json");
    // Someone else's SQLite database.
    let other = dir.join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .unwrap();
    let o = run_into(&other, &out, &[]);
    refused(&o, 2, &other, "not a cbtop history");
    assert!(!out.exists(), "refused before the run");
    for args in [
        vec!["history", other.to_str().unwrap()],
        vec!["compare", "--db", other.to_str().unwrap()],
    ] {
        refused(&cbtop(&args), 2, &other, "not a cbtop history");
    }
    // Not SQLite at all.
    let text_file = dir.join("notes.txt");
    std::fs::write(
        &text_file,
        "these are not the runs you are looking for\n".repeat(40),
    )
    .unwrap();
    refused(
        &run_into(&text_file, &out, &[]),
        2,
        &text_file,
        "not a SQLite database",
    );
    // A history from a newer cbtop.
    let newer = dir.join("newer.db");
    drop(cbtop::history::Db::open(&newer, true).unwrap());
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    refused(&run_into(&newer, &out, &[]), 2, &newer, "schema 99, newer");
    refused(
        &cbtop(&["history", newer.to_str().unwrap()]),
        2,
        &newer,
        "schema 99, newer",
    );
    // A missing history to read.
    let missing = dir.join("missing.db");
    refused(
        &cbtop(&["history", missing.to_str().unwrap()]),
        2,
        &missing,
        "no such file",
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_locked_database_is_exit_3_and_the_report_is_still_written() {
    let _alone = alone();
    let dir = scratch("locked");
    let db = dir.join("history.db");
    let out = dir.join("report.json");
    drop(cbtop::history::Db::open(&db, true).unwrap());
    // Another writer holds the write lock for the whole run (readers may still read).
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let o = run_into(&db, &out, &[]);
    refused(&o, 3, &db, "locked by another process");
    assert!(
        stderr(&o).contains(&format!("the report was written to {}", out.display())),
        "{}",
        stderr(&o)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r["status"], "PASS");
    holder.execute_batch("ROLLBACK;").unwrap();
    // Unlocked, the next run goes in.
    let o = run_into(&db, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let runs = cbtop::history::Db::open(&db, false)
        .unwrap()
        .runs()
        .unwrap();
    assert_eq!(runs.len(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn flags_out_of_place_are_one_line_and_exit_2() {
    for args in [
        &["--db", "x.db"][..],
        &["--headless", "--metrics-hold", "5"],
        &[
            "--headless",
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-hold",
            "-1",
        ],
        &["compare"],
        &["compare", "--db", "x.db", "a.json"],
        &["compare", "--db", "x.db", "--alpha", "2"],
        &["compare", "--db", "x.db", "--min-share", "-1"],
        &["compare", "a.json", "b.json", "--last", "3"],
        &["history", "x.db", "--width", "5"],
    ] {
        let o = cbtop(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert!(e.starts_with("cbtop: error: "), "{args:?}: {e}");
    }
}
