//! The history database: one SQLite file, marked as cbtop's by SQLite's `application_id` and
//! versioned by its `user_version`, so a file that is someone else's database or from a newer
//! cbtop is refused by name instead of being written into. Each run keeps its whole JSON
//! report, the columns runs are looked up by (time, commit, model, device, numerics, tok/s),
//! and per brick its mean and per-step times (what `compare --db` tests).
//!
//! rusqlite with SQLite built in (`bundled`): CI machines need no system library, and the
//! file is readable by any `sqlite3` for ad-hoc queries.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};

use crate::report::Report;

/// `PRAGMA application_id` of a cbtop history: "cbtp".
pub const APPLICATION_ID: i32 = 0x6362_7470;
/// `PRAGMA user_version`: this layout. A newer number is refused, an older one migrated.
pub const SCHEMA_VERSION: i32 = 1;
/// How long a write waits for another process's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    timestamp TEXT NOT NULL,
    git_commit TEXT,
    model TEXT NOT NULL,
    device TEXT NOT NULL,
    numerics TEXT NOT NULL,
    status TEXT NOT NULL,
    tokens_per_sec REAL NOT NULL,
    report TEXT NOT NULL
);
CREATE INDEX runs_by_key ON runs (model, device, numerics, id);
CREATE TABLE bricks (
    run_id INTEGER NOT NULL REFERENCES runs (id),
    brick TEXT NOT NULL,
    mean_us REAL NOT NULL,
    samples_us TEXT NOT NULL,
    PRIMARY KEY (run_id, brick)
);
";

/// Why the database cannot be used: bad input (exit 2) or a failure while using it (exit 3,
/// e.g. locked). The message is one line naming the file.
#[derive(Debug, PartialEq)]
pub enum DbError {
    Input(String),
    Runtime(String),
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Input(m) | DbError::Runtime(m) => f.write_str(m),
        }
    }
}

/// One brick of a stored run.
#[derive(Clone, Debug, PartialEq)]
pub struct BrickRow {
    pub id: String,
    pub mean_us: f64,
    /// Its time in each measured step, microseconds.
    pub samples_us: Vec<f64>,
}

/// One stored run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub timestamp: String,
    pub commit: Option<String>,
    pub model: String,
    pub device: String,
    pub numerics: String,
    pub status: String,
    pub tokens_per_sec: f64,
    /// In pipeline order.
    pub bricks: Vec<BrickRow>,
}

impl RunRow {
    /// Runs with the same key are comparable: same model, device and numerics.
    pub fn same_key(&self, o: &RunRow) -> bool {
        (&self.model, &self.device, &self.numerics) == (&o.model, &o.device, &o.numerics)
    }
}

/// An open history.
pub struct Db {
    conn: Connection,
    path: PathBuf,
}

/// The key columns of a report: its model, device and numerics.
pub fn key_of(r: &Report) -> (String, String, String) {
    let device = match &r.hardware.gpu {
        Some(g) => format!("{} {}", r.hardware.backend, g.name),
        None => r.hardware.backend.clone(),
    };
    (
        r.model.name.clone(),
        device,
        r.config.numerics.name().to_string(),
    )
}

impl Db {
    /// Open `path`, creating an empty history when `create` and the file is new or empty.
    /// Refused: a file that is not SQLite, a SQLite database that is not cbtop's, a newer
    /// layout; without `create`, a missing file.
    pub fn open(path: &Path, create: bool) -> Result<Db, DbError> {
        let name = path.display().to_string();
        let input = |m: &str| DbError::Input(format!("{name}: {m}"));
        if !create && !path.exists() {
            return Err(input("no such file"));
        }
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(path, flags).map_err(|e| classify(&name, &e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| classify(&name, &e))?;
        let db = Db {
            conn,
            path: path.to_path_buf(),
        };
        let app: i32 = db.pragma("application_id")?;
        let version: i32 = db.pragma("user_version")?;
        let tables: i64 = db
            .conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| classify(&name, &e))?;
        if app == 0 && tables == 0 {
            if !create {
                return Err(input("an empty database, no cbtop runs in it"));
            }
            db.create()?;
            return Ok(db);
        }
        if app != APPLICATION_ID {
            return Err(input(&format!(
                "a SQLite database that is not a cbtop history (application_id {app:#x}, \
                 cbtop's is {APPLICATION_ID:#x})"
            )));
        }
        if version > SCHEMA_VERSION {
            return Err(input(&format!(
                "cbtop history schema {version}, newer than this cbtop's {SCHEMA_VERSION}: \
                 use a newer cbtop"
            )));
        }
        Ok(db)
    }

    fn pragma(&self, p: &str) -> Result<i32, DbError> {
        self.conn
            .query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
            .map_err(|e| classify(&self.name(), &e))
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }

    fn create(&self) -> Result<(), DbError> {
        let sql = format!(
            "BEGIN IMMEDIATE; {SCHEMA} PRAGMA application_id = {APPLICATION_ID}; \
             PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        );
        self.conn.execute_batch(&sql).map_err(|e| {
            let _ = self.conn.execute_batch("ROLLBACK");
            classify(&self.name(), &e)
        })
    }

    /// Append a report, its per-brick step times (`(brick, µs per step)`) and the commit it
    /// measured; returns the run's id. One transaction: a failed append leaves no part of it.
    pub fn append(
        &mut self,
        r: &Report,
        samples: &[(String, Vec<f64>)],
        commit: Option<&str>,
    ) -> Result<i64, DbError> {
        let name = self.name();
        let fail = |e: rusqlite::Error| classify(&name, &e);
        let json = serde_json::to_string(r).map_err(|e| DbError::Runtime(e.to_string()))?;
        let (model, device, numerics) = key_of(r);
        let status = serde_json::to_value(r.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.execute(
            "INSERT INTO runs (timestamp, git_commit, model, device, numerics, status, \
             tokens_per_sec, report) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                r.timestamp,
                commit,
                model,
                device,
                numerics,
                status,
                r.throughput.tokens_per_sec,
                json
            ],
        )
        .map_err(fail)?;
        let id = tx.last_insert_rowid();
        for b in &r.bricks {
            let steps = samples
                .iter()
                .find(|(id, _)| *id == b.id)
                .map_or(&[][..], |(_, s)| &s[..]);
            let steps = serde_json::to_string(steps).unwrap_or_else(|_| "[]".into());
            tx.execute(
                "INSERT INTO bricks (run_id, brick, mean_us, samples_us) VALUES (?1, ?2, ?3, ?4)",
                params![id, b.id, b.mean_us, steps],
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok(id)
    }

    /// Every stored run, oldest first, with its bricks.
    pub fn runs(&self) -> Result<Vec<RunRow>, DbError> {
        let name = self.name();
        let fail = |e: rusqlite::Error| classify(&name, &e);
        let mut q = self
            .conn
            .prepare(
                "SELECT id, timestamp, git_commit, model, device, numerics, status, \
                 tokens_per_sec FROM runs ORDER BY id",
            )
            .map_err(fail)?;
        let mut runs = q
            .query_map([], |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    timestamp: r.get(1)?,
                    commit: r.get(2)?,
                    model: r.get(3)?,
                    device: r.get(4)?,
                    numerics: r.get(5)?,
                    status: r.get(6)?,
                    tokens_per_sec: r.get(7)?,
                    bricks: Vec::new(),
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let mut q = self
            .conn
            .prepare("SELECT run_id, brick, mean_us, samples_us FROM bricks ORDER BY run_id, rowid")
            .map_err(fail)?;
        let rows = q
            .query_map([], |r| {
                let samples: String = r.get(3)?;
                Ok((
                    r.get::<_, i64>(0)?,
                    BrickRow {
                        id: r.get(1)?,
                        mean_us: r.get(2)?,
                        samples_us: serde_json::from_str(&samples).unwrap_or_default(),
                    },
                ))
            })
            .map_err(fail)?;
        for row in rows {
            let (run, b) = row.map_err(fail)?;
            if let Some(r) = runs.iter_mut().find(|r| r.id == run) {
                r.bricks.push(b);
            }
        }
        Ok(runs)
    }

    /// The stored JSON report of run `id`.
    pub fn report(&self, id: i64) -> Result<Option<String>, DbError> {
        self.conn
            .query_row("SELECT report FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(|e| classify(&self.name(), &e))
    }
}

/// A SQLite error as one line naming the file: not a database is bad input, anything else
/// (locked, read-only, disk full) a runtime failure.
fn classify(name: &str, e: &rusqlite::Error) -> DbError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => DbError::Input(format!(
            "{name}: not a SQLite database (so not a cbtop history)"
        )),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => DbError::Runtime(format!(
            "{name}: the database is locked by another process (waited {} s)",
            BUSY_TIMEOUT.as_secs()
        )),
        Some(ErrorCode::CannotOpen) => DbError::Input(format!("{name}: cannot open ({e})")),
        _ => DbError::Runtime(format!("{name}: {e}")),
    }
}

/// Each brick's time in each measured step, microseconds (summed over layers), from the run's
/// spans, in the order bricks first appear.
pub fn step_samples(samples: &[crate::brick::stats::TokenSample]) -> Vec<(String, Vec<f64>)> {
    let mut out: Vec<(String, Vec<f64>)> = Vec::new();
    for (i, t) in samples.iter().enumerate() {
        for s in &t.spans {
            let id = s.brick.to_string();
            let k = match out.iter().position(|(b, _)| *b == id) {
                Some(k) => k,
                None => {
                    out.push((id, Vec::new()));
                    out.len() - 1
                }
            };
            let v = &mut out[k].1;
            v.resize(i + 1, 0.0);
            v[i] += s.dur_ns as f64 / 1e3;
        }
    }
    for (_, v) in &mut out {
        v.resize(samples.len(), 0.0);
    }
    out
}

/// The commit a run measured: `CBTOP_COMMIT`, else CI's own variable (`GITHUB_SHA`,
/// `CI_COMMIT_SHA`), else `git rev-parse HEAD` in the working directory, else none.
pub fn current_commit() -> Option<String> {
    for var in ["CBTOP_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA"] {
        if let Some(v) = std::env::var(var).ok().filter(|v| !v.trim().is_empty()) {
            return Some(v.trim().to_string());
        }
    }
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !s.trim().is_empty()).then(|| s.trim().to_string())
}
