//! A measuring aid for the pipelined decode loop (`CBTOP_STEP_TRACE=FILE`): one CSV line per
//! decode step with the host's times around it and, for a stamped step, its first kernel's
//! start and last kernel's end on the GPU's clock. The report sees a step as one number (token
//! arrival to token arrival); this shows where the host was meanwhile and how long the GPU sat
//! idle between consecutive stamped steps: a stall in one step shows as that step, where a
//! mean over many steps spreads it thin (docs/measurements/profiler.md has the stall it
//! found). `bench/step-trace.py FILE` summarises a trace. Off (no file named) it costs one
//! branch per step.

use std::io::Write;
use std::time::Instant;

/// Header of the CSV the trace writes (host times in ns since the engine was made, GPU times
/// on `%globaltimer`, 0 for an unstamped step).
pub const HEADER: &str =
    "stamped,ahead,call_ns,launched_ns,arrived_ns,done_ns,gpu_first_ns,gpu_end_ns";

/// One decode step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepRow {
    /// Its kernels stamped their times.
    pub stamped: bool,
    /// It was launched by the call before (pipelined).
    pub ahead: bool,
    /// The engine was asked for it.
    pub call_ns: u64,
    /// The step after it was launched (or would have been).
    pub launched_ns: u64,
    /// Its token was on the host.
    pub arrived_ns: u64,
    /// The engine returned (its stamps read).
    pub done_ns: u64,
    pub gpu_first_ns: u64,
    pub gpu_end_ns: u64,
}

impl StepRow {
    fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{}\n",
            u8::from(self.stamped),
            u8::from(self.ahead),
            self.call_ns,
            self.launched_ns,
            self.arrived_ns,
            self.done_ns,
            self.gpu_first_ns,
            self.gpu_end_ns
        )
    }
}

/// Rows kept before they are appended to the file (so the decode loop writes once in a while).
const BATCH: usize = 1024;

/// The trace: rows since the last write, and where they go.
pub struct StepTrace {
    path: String,
    origin: Instant,
    rows: Vec<StepRow>,
    /// The file could not be written: said once on stderr, then the trace stops.
    failed: bool,
}

impl StepTrace {
    /// The trace `CBTOP_STEP_TRACE` names, if any (the file is started with its header).
    pub fn from_env() -> Option<StepTrace> {
        let path = std::env::var("CBTOP_STEP_TRACE")
            .ok()
            .filter(|p| !p.is_empty())?;
        Some(StepTrace::new(path))
    }

    pub fn new(path: String) -> StepTrace {
        let failed = std::fs::write(&path, format!("{HEADER}\n")).is_err();
        if failed {
            eprintln!("cbtop: CBTOP_STEP_TRACE: cannot write {path}; no step trace");
        }
        StepTrace {
            path,
            origin: Instant::now(),
            rows: Vec::with_capacity(BATCH),
            failed,
        }
    }

    /// Nanoseconds from the trace's origin to `t`.
    pub fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }

    pub fn push(&mut self, row: StepRow) {
        if self.failed {
            return;
        }
        self.rows.push(row);
        if self.rows.len() >= BATCH {
            self.flush();
        }
    }

    /// Append the rows kept so far to the file.
    pub fn flush(&mut self) {
        if self.failed || self.rows.is_empty() {
            return;
        }
        let text: String = self.rows.drain(..).map(|r| r.csv()).collect();
        let written = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if written.is_err() {
            eprintln!(
                "cbtop: CBTOP_STEP_TRACE: cannot write {}; trace stopped",
                self.path
            );
            self.failed = true;
        }
    }
}

impl Drop for StepTrace {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_land_in_the_file_under_the_header_in_order() {
        let dir = crate::scratch::dir("step-trace");
        let path = dir.join("t.csv");
        {
            let mut t = StepTrace::new(path.to_string_lossy().into_owned());
            for i in 0..(BATCH as u64 + 3) {
                t.push(StepRow {
                    stamped: i % 2 == 1,
                    ahead: true,
                    call_ns: 10 * i,
                    launched_ns: 10 * i + 1,
                    arrived_ns: 10 * i + 2,
                    done_ns: 10 * i + 3,
                    gpu_first_ns: i,
                    gpu_end_ns: 2 * i,
                });
            }
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HEADER);
        assert_eq!(lines.len(), 1 + BATCH + 3);
        assert_eq!(lines[1], "0,1,0,1,2,3,0,0");
        assert_eq!(
            lines[BATCH + 3],
            format!(
                "0,1,{0}0,{0}1,{0}2,{0}3,{0},{1}",
                BATCH + 2,
                2 * (BATCH + 2)
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_file_stops_the_trace_without_failing() {
        let mut t = StepTrace::new("/nonexistent-dir-cbtop/x.csv".into());
        t.push(StepRow::default());
        t.flush();
        assert!(t.failed && t.rows.is_empty());
    }
}
