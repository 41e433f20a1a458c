//! CI gates: thresholds from the command line checked against a finished report. A failed gate
//! turns the report's status to FAIL and the exit code to 1; a gate that cannot be evaluated
//! (a brick id the run did not record, an unreadable baseline) is a usage error, caught before
//! the run wherever possible.

use std::path::{Path, PathBuf};

use super::types::{Gate, Report, Status, SCHEMA_VERSION};

/// The gate flags as given.
pub struct GateFlags<'a> {
    pub min_tok_s: Option<f64>,
    pub min_score: Option<f64>,
    pub max_cv: Option<f64>,
    /// `ID=X` strings.
    pub max_brick_us: &'a [String],
    pub baseline: Option<&'a Path>,
    pub max_regression: Option<f64>,
}

/// A baseline report's throughput.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    pub path: PathBuf,
    pub tokens_per_sec: f64,
}

/// Validated gates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GateSpec {
    pub min_tok_s: Option<f64>,
    pub min_score: Option<f64>,
    pub max_cv: Option<f64>,
    /// (brick id, microseconds per token).
    pub max_brick_us: Vec<(String, f64)>,
    /// The baseline and the allowed drop in percent.
    pub regression: Option<(Baseline, f64)>,
}

fn number(flag: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !x.is_finite() || x < 0.0 => {
            Err(format!("{flag} {x}: must be a non-negative number"))
        }
        v => Ok(v),
    }
}

/// `tokens_per_sec` of a report written by `cbtop --headless --json`.
pub fn read_baseline(path: &Path) -> Result<Baseline, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--baseline {}: {e}", path.display()))?;
    parse_baseline(path, &text)
}

/// A baseline report's text, read from `path` (which names it in errors).
pub fn parse_baseline(path: &Path, text: &str) -> Result<Baseline, String> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("--baseline {}: not a JSON report ({e})", path.display()))?;
    if v["schema_version"].as_u64() != Some(u64::from(SCHEMA_VERSION)) {
        return Err(format!(
            "--baseline {}: not a cbtop report of schema_version {SCHEMA_VERSION}",
            path.display()
        ));
    }
    match v["throughput"]["tokens_per_sec"].as_f64() {
        Some(t) if t > 0.0 => Ok(Baseline {
            path: path.to_path_buf(),
            tokens_per_sec: t,
        }),
        _ => Err(format!(
            "--baseline {}: throughput.tokens_per_sec is missing or not positive",
            path.display()
        )),
    }
}

impl GateSpec {
    pub fn from_flags(f: GateFlags) -> Result<GateSpec, String> {
        let mut max_brick_us = Vec::new();
        for s in f.max_brick_us {
            let (id, x) = s
                .split_once('=')
                .ok_or_else(|| format!("--max-brick-us {s}: expected ID=MICROSECONDS"))?;
            let x: f64 = x
                .trim()
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("--max-brick-us {s}: {x:?} is not a non-negative number"))?;
            max_brick_us.push((id.trim().to_string(), x));
        }
        let regression = match (f.baseline, f.max_regression) {
            (Some(p), Some(pct)) => Some((
                read_baseline(p)?,
                number("--max-regression", Some(pct))?.unwrap_or(0.0),
            )),
            (None, None) => None,
            _ => return Err("--baseline and --max-regression go together".to_string()),
        };
        Ok(GateSpec {
            min_tok_s: number("--min-tok-s", f.min_tok_s)?,
            min_score: number("--min-score", f.min_score)?,
            max_cv: number("--max-cv", f.max_cv)?,
            max_brick_us,
            regression,
        })
    }

    pub fn is_empty(&self) -> bool {
        *self == GateSpec::default()
    }
}

/// Percent by which `new` tok/s is below `base` (negative when faster).
pub fn regression_percent(base: f64, new: f64) -> f64 {
    100.0 * (base - new) / base
}

/// Check every gate against `r`, in the order the flags are listed in `--help`.
pub fn evaluate(spec: &GateSpec, r: &Report) -> Result<Vec<Gate>, String> {
    let mut gates = Vec::new();
    let mut at_least = |name: String, threshold: f64, actual: f64| {
        gates.push(Gate {
            name,
            threshold,
            actual,
            pass: actual >= threshold,
        })
    };
    if let Some(t) = spec.min_tok_s {
        at_least("min_tok_s".into(), t, r.throughput.tokens_per_sec);
    }
    if let Some(t) = spec.min_score {
        at_least("min_score".into(), t, r.score);
    }
    let mut at_most = |name: String, threshold: f64, actual: f64| {
        gates.push(Gate {
            name,
            threshold,
            actual,
            pass: actual <= threshold,
        })
    };
    if let Some(t) = spec.max_cv {
        at_most("max_cv".into(), t, r.throughput.cv_percent);
    }
    for (id, t) in &spec.max_brick_us {
        let b = r.bricks.iter().find(|b| &b.id == id).ok_or_else(|| {
            format!(
                "--max-brick-us {id}: this run recorded no brick {id} (recorded: {})",
                if r.bricks.is_empty() {
                    "none, per-brick timing is off".to_string()
                } else {
                    r.bricks
                        .iter()
                        .map(|b| b.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )
        })?;
        at_most(format!("max_brick_us:{id}"), *t, b.mean_us);
    }
    if let Some((base, pct)) = &spec.regression {
        at_most(
            "max_regression".into(),
            *pct,
            regression_percent(base.tokens_per_sec, r.throughput.tokens_per_sec),
        );
    }
    Ok(gates)
}

/// Store the gates in the report and set its status.
pub fn apply_gates(r: &mut Report, gates: Vec<Gate>) -> Status {
    r.status = if gates.iter().all(|g| g.pass) {
        Status::Pass
    } else {
        Status::Fail
    };
    r.gates = gates;
    r.status
}

/// One line naming every failed gate, or `None` when all passed.
pub fn failure_summary(gates: &[Gate]) -> Option<String> {
    let failed: Vec<String> = gates
        .iter()
        .filter(|g| !g.pass)
        .map(|g| {
            format!(
                "{} (actual {:.3}, threshold {:.3})",
                g.name, g.actual, g.threshold
            )
        })
        .collect();
    (!failed.is_empty()).then(|| format!("CI gate failed: {}", failed.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_reject() {
        let ids = vec![
            "qkv=12.5".to_string(),
            "ffn_norm+ffn_gate_up = 3".to_string(),
        ];
        let s = GateSpec::from_flags(GateFlags {
            min_tok_s: Some(10.0),
            min_score: None,
            max_cv: None,
            max_brick_us: &ids,
            baseline: None,
            max_regression: None,
        })
        .unwrap();
        assert_eq!(
            s.max_brick_us,
            vec![("qkv".into(), 12.5), ("ffn_norm+ffn_gate_up".into(), 3.0)]
        );
        for bad in ["qkv", "qkv=x", "qkv=-1"] {
            let v = vec![bad.to_string()];
            let e = GateSpec::from_flags(GateFlags {
                min_tok_s: None,
                min_score: None,
                max_cv: None,
                max_brick_us: &v,
                baseline: None,
                max_regression: None,
            })
            .unwrap_err();
            assert!(e.contains("--max-brick-us"), "{e}");
        }
        assert!((regression_percent(100.0, 90.0) - 10.0).abs() < 1e-12);
        assert!(regression_percent(100.0, 110.0) < 0.0);
    }

    #[test]
    fn summary_names_failed_gates() {
        let g = |name: &str, pass| Gate {
            name: name.into(),
            threshold: 1.0,
            actual: 2.0,
            pass,
        };
        assert_eq!(failure_summary(&[g("a", true)]), None);
        let s = failure_summary(&[g("a", true), g("min_tok_s", false)]).unwrap();
        assert!(s.contains("min_tok_s") && !s.contains("a ("), "{s}");
    }
}
