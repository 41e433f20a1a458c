//! Host telemetry of this process from /proc: CPU use (all threads, so 200% is two cores busy)
//! and resident memory. On systems without /proc the fields stay empty.

use std::time::Instant;

use serde::Serialize;

/// One reading of the cbtop process.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostSample {
    /// CPU time over wall time since the previous reading, percent (100 per busy core).
    pub cpu_pct: Option<f64>,
    pub rss_bytes: Option<u64>,
}

/// Remembers the previous CPU-time reading to turn it into a rate.
pub struct HostProbe {
    last: Option<(Instant, f64)>,
    ticks_per_s: f64,
    page_bytes: u64,
}

impl Default for HostProbe {
    fn default() -> Self {
        HostProbe::new()
    }
}

impl HostProbe {
    pub fn new() -> HostProbe {
        HostProbe {
            last: None,
            // USER_HZ and the page size are 100 and 4096 on every Linux cbtop targets.
            ticks_per_s: 100.0,
            page_bytes: 4096,
        }
    }

    pub fn sample(&mut self) -> HostSample {
        let now = Instant::now();
        let cpu_s = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| cpu_seconds(&s, self.ticks_per_s));
        let cpu_pct = match (cpu_s, self.last) {
            (Some(c), Some((t0, c0))) => {
                let dt = now.duration_since(t0).as_secs_f64();
                (dt > 0.0).then(|| 100.0 * (c - c0).max(0.0) / dt)
            }
            _ => None,
        };
        if let Some(c) = cpu_s {
            self.last = Some((now, c));
        }
        let rss_bytes = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|pages| pages * self.page_bytes);
        HostSample { cpu_pct, rss_bytes }
    }
}

/// utime + stime of a /proc/PID/stat line, seconds. The command name may hold spaces and
/// parentheses, so fields are counted after the last `)`.
fn cpu_seconds(stat: &str, ticks_per_s: f64) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3 of the line, so utime (14) and stime (15) are at 11 and 12.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_name() {
        let line = "42 (a b) c) R 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1 0";
        assert_eq!(cpu_seconds(line, 100.0), Some(2.0));
        assert_eq!(cpu_seconds("garbage", 100.0), None);
    }

    #[test]
    fn second_sample_has_a_rate() {
        let mut p = HostProbe::new();
        let _ = p.sample();
        let s = p.sample();
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(s.cpu_pct.is_some() && s.rss_bytes.unwrap_or(0) > 0);
        }
    }
}
