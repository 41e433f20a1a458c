//! `cbtop compare A B`: two headless reports side by side: throughput change, and per brick
//! the mean time in each and the change, so a regression points at the brick that caused it.

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use super::gates::regression_percent;
use super::types::{Report, SCHEMA_VERSION};

/// One brick in both reports (a brick present in one only has `None` on the other side).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BrickDelta {
    pub id: String,
    pub a_us: Option<f64>,
    pub b_us: Option<f64>,
    /// `(b - a) / a`, percent.
    pub change_percent: Option<f64>,
}

/// The comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub a_tokens_per_sec: f64,
    pub b_tokens_per_sec: f64,
    /// How far B's tok/s is below A's, percent (negative: B is faster).
    pub regression_percent: f64,
    pub bricks: Vec<BrickDelta>,
    pub a_other_us: f64,
    pub b_other_us: f64,
}

/// Read a report written by `cbtop --headless --json`.
pub fn read_report(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_report(path, &text)
}

/// A report's text, read from `path` (which names it in errors).
pub fn parse_report(path: &Path, text: &str) -> Result<Report, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
    if v["schema_version"].as_u64() != Some(u64::from(SCHEMA_VERSION)) {
        return Err(format!(
            "{}: not a cbtop report of schema_version {SCHEMA_VERSION}",
            path.display()
        ));
    }
    serde_json::from_value(v).map_err(|e| format!("{}: malformed report ({e})", path.display()))
}

pub fn compare(a: &Report, b: &Report) -> Comparison {
    let mut ids: Vec<&str> = a.bricks.iter().map(|x| x.id.as_str()).collect();
    for x in &b.bricks {
        if !ids.contains(&x.id.as_str()) {
            ids.push(&x.id);
        }
    }
    let mean = |r: &Report, id: &str| r.bricks.iter().find(|x| x.id == id).map(|x| x.mean_us);
    let bricks = ids
        .into_iter()
        .map(|id| {
            let (a_us, b_us) = (mean(a, id), mean(b, id));
            BrickDelta {
                id: id.to_string(),
                a_us,
                b_us,
                change_percent: match (a_us, b_us) {
                    (Some(x), Some(y)) if x > 0.0 => Some(100.0 * (y - x) / x),
                    _ => None,
                },
            }
        })
        .collect();
    Comparison {
        a_tokens_per_sec: a.throughput.tokens_per_sec,
        b_tokens_per_sec: b.throughput.tokens_per_sec,
        regression_percent: regression_percent(
            a.throughput.tokens_per_sec,
            b.throughput.tokens_per_sec,
        ),
        bricks,
        a_other_us: a.other_us,
        b_other_us: b.other_us,
    }
}

fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}"))
}

/// A plain-text table.
pub fn to_text(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tok/s: A {:.2}  B {:.2}  ({:+.1}% {})",
        c.a_tokens_per_sec,
        c.b_tokens_per_sec,
        -c.regression_percent,
        if c.regression_percent > 0.0 {
            "slower"
        } else {
            "faster"
        }
    );
    let _ = writeln!(
        s,
        "{:<24} {:>12} {:>12} {:>9}",
        "brick", "A us", "B us", "change"
    );
    for b in &c.bricks {
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12} {:>9}",
            b.id,
            us(b.a_us),
            us(b.b_us),
            b.change_percent.map_or("-".into(), |p| format!("{p:+.1}%"))
        );
    }
    let _ = writeln!(
        s,
        "{:<24} {:>12.1} {:>12.1}",
        "other", c.a_other_us, c.b_other_us
    );
    s
}
