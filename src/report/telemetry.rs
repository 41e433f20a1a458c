//! The report's `telemetry` section and the trace's telemetry counters, from the telemetry
//! thread's samples. Exists apart from `build` so the arithmetic (which samples count, means,
//! extremes, the reasons when there are none) is tested on hand-made samples, without a GPU.
//!
//! Honest data only: a sample counts when it was taken inside the measured decode window; a
//! reading a device did not answer is left out of its statistic, never filled in; nothing is
//! interpolated between samples.

use super::trace::TraceCounter;
use super::types::{StatSummary, Telemetry};
use crate::telemetry::TelemetrySample;

/// Where a run's samples came from and when the measured decode ran, on the sampler's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// First measured step's start, milliseconds since the sampler started.
    pub start_ms: f64,
    /// Last measured step's end, same clock.
    pub end_ms: f64,
    /// The sampler's period, milliseconds.
    pub period_ms: f64,
}

impl Window {
    pub fn len_ms(&self) -> f64 {
        (self.end_ms - self.start_ms).max(0.0)
    }

    /// The samples taken inside the window, in order.
    pub fn select<'a>(&self, samples: &'a [TelemetrySample]) -> Vec<&'a TelemetrySample> {
        samples
            .iter()
            .filter(|s| {
                let t = s.at_ms as f64;
                t >= self.start_ms && t <= self.end_ms
            })
            .collect()
    }
}

/// The section when there is no GPU telemetry, with its one-line reason.
pub fn unavailable(reason: impl Into<String>) -> Telemetry {
    Telemetry {
        available: false,
        source: "none".to_string(),
        reason: Some(reason.into()),
        samples: 0,
        gpu_name: None,
        period_ms: None,
        window_ms: None,
        note: None,
        gpu_util_percent: None,
        mem_util_percent: None,
        memory_used_bytes: None,
        memory_total_bytes: None,
        power_w: None,
        power_limit_w: None,
        sm_clock_mhz: None,
        mem_clock_mhz: None,
        temperature_c: None,
        pcie_tx_kbps: None,
        pcie_rx_kbps: None,
    }
}

/// Mean, min and max of the values present; None when there are none.
pub fn stat(values: impl IntoIterator<Item = Option<f64>>) -> Option<StatSummary> {
    let (mut n, mut sum, mut min, mut max) = (0u64, 0.0, f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().flatten() {
        n += 1;
        sum += v;
        min = min.min(v);
        max = max.max(v);
    }
    (n > 0).then(|| StatSummary {
        mean: sum / n as f64,
        min,
        max,
    })
}

/// The section for a run. `gpu` is the sampler's status: Ok(GPU name) when NVML opened the GPU,
/// Err(reason) when not, None when the sampler had not tried yet. `samples` is everything the
/// sampler kept; only those inside `window` count.
pub fn summarize(
    gpu: Option<Result<String, String>>,
    samples: &[TelemetrySample],
    window: &Window,
) -> Telemetry {
    let name = match gpu {
        Some(Ok(name)) => name,
        Some(Err(reason)) => return unavailable(reason),
        None => return unavailable("no GPU telemetry: NVML was still starting when the run ended"),
    };
    let inside = window.select(samples);
    let gpus: Vec<_> = inside.iter().filter_map(|s| s.gpu.as_ref()).collect();
    let mut t = unavailable("");
    t.source = "nvml".to_string();
    t.gpu_name = Some(name);
    t.period_ms = Some(window.period_ms);
    t.window_ms = Some(window.len_ms());
    t.samples = gpus.len() as u64;
    let period = format!(
        "the measured decode took {:.1} ms and NVML is sampled every {:.0} ms",
        window.len_ms(),
        window.period_ms
    );
    if gpus.is_empty() {
        t.reason = Some(format!(
            "no GPU telemetry sample fell inside the measured decode: {period}; measure more \
             --tokens"
        ));
        return t;
    }
    t.available = true;
    t.reason = None;
    if window.len_ms() < window.period_ms {
        t.note = Some(format!(
            "shorter than one sampling period: {period}, so {} sample{} cover{} it",
            gpus.len(),
            if gpus.len() == 1 { "" } else { "s" },
            if gpus.len() == 1 { "s" } else { "" },
        ));
    }
    let f = |v: Option<u32>| v.map(f64::from);
    t.gpu_util_percent = stat(gpus.iter().map(|g| f(g.util_pct)));
    t.mem_util_percent = stat(gpus.iter().map(|g| f(g.mem_util_pct)));
    t.memory_used_bytes = stat(gpus.iter().map(|g| g.mem_used_bytes.map(|v| v as f64)));
    t.memory_total_bytes = gpus.iter().filter_map(|g| g.mem_total_bytes).max();
    t.power_w = stat(gpus.iter().map(|g| g.power_w));
    t.power_limit_w = gpus.iter().filter_map(|g| g.power_limit_w).reduce(f64::max);
    t.sm_clock_mhz = stat(gpus.iter().map(|g| f(g.sm_clock_mhz)));
    t.mem_clock_mhz = stat(gpus.iter().map(|g| f(g.mem_clock_mhz)));
    t.temperature_c = stat(gpus.iter().map(|g| f(g.temperature_c)));
    t.pcie_tx_kbps = stat(gpus.iter().map(|g| f(g.pcie_tx_kbps)));
    t.pcie_rx_kbps = stat(gpus.iter().map(|g| f(g.pcie_rx_kbps)));
    t
}

/// Counter tracks for the trace: one point per GPU sample and reading present, at the sample's
/// time moved onto the trace's clock (`offset_ms` = sampler start minus trace origin).
pub fn trace_counters(samples: &[&TelemetrySample], offset_ms: f64) -> Vec<TraceCounter> {
    type Pick = fn(&crate::telemetry::GpuSample) -> Option<f64>;
    const TRACKS: [(&str, Pick); 6] = [
        ("gpu_util_%", |g| g.util_pct.map(f64::from)),
        ("gpu_power_W", |g| g.power_w),
        ("sm_clock_MHz", |g| g.sm_clock_mhz.map(f64::from)),
        ("mem_clock_MHz", |g| g.mem_clock_mhz.map(f64::from)),
        ("gpu_mem_used_MiB", |g| {
            g.mem_used_bytes.map(|b| b as f64 / (1u64 << 20) as f64)
        }),
        ("gpu_temp_C", |g| g.temperature_c.map(f64::from)),
    ];
    let mut out = Vec::new();
    for s in samples {
        let Some(g) = &s.gpu else { continue };
        let ts_us = (s.at_ms as f64 + offset_ms) * 1e3;
        for (name, pick) in TRACKS {
            if let Some(value) = pick(g) {
                out.push(TraceCounter {
                    name: name.to_string(),
                    ts_us,
                    value,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{GpuSample, HostSample};

    fn sample(at_ms: u64, util: Option<u32>, power: f64) -> TelemetrySample {
        TelemetrySample {
            at_ms,
            gpu: Some(GpuSample {
                name: "Test GPU".into(),
                util_pct: util,
                mem_util_pct: Some(10),
                mem_used_bytes: Some(1 << 30),
                mem_total_bytes: Some(80 << 30),
                power_w: Some(power),
                power_limit_w: Some(700.0),
                sm_clock_mhz: Some(1980),
                mem_clock_mhz: Some(2619),
                temperature_c: Some(40 + at_ms as u32 / 100),
                pcie_tx_kbps: None,
                pcie_rx_kbps: Some(100),
            }),
            host: HostSample::default(),
        }
    }

    fn window(start_ms: f64, end_ms: f64) -> Window {
        Window {
            start_ms,
            end_ms,
            period_ms: 100.0,
        }
    }

    #[test]
    fn summarises_only_samples_inside_the_window() {
        let s = vec![
            sample(0, Some(0), 60.0), // before the decode: left out
            sample(100, Some(50), 200.0),
            sample(200, None, 300.0), // utilisation not answered: left out of util only
            sample(300, Some(100), 400.0),
            sample(400, Some(0), 70.0), // after: left out
        ];
        let t = summarize(Some(Ok("Test GPU".into())), &s, &window(50.0, 350.0));
        assert!(t.available && t.reason.is_none() && t.note.is_none());
        assert_eq!(t.source, "nvml");
        assert_eq!(t.samples, 3);
        assert_eq!(t.gpu_name.as_deref(), Some("Test GPU"));
        assert_eq!(t.window_ms, Some(300.0));
        let u = t.gpu_util_percent.unwrap();
        assert_eq!((u.mean, u.min, u.max), (75.0, 50.0, 100.0));
        let p = t.power_w.unwrap();
        assert_eq!((p.mean, p.min, p.max), (300.0, 200.0, 400.0));
        assert_eq!(t.power_limit_w, Some(700.0));
        assert_eq!(t.memory_total_bytes, Some(80 << 30));
        assert_eq!(t.sm_clock_mhz.unwrap().max, 1980.0);
        let temp = t.temperature_c.unwrap();
        assert_eq!((temp.min, temp.max), (41.0, 43.0));
        assert_eq!(t.pcie_tx_kbps, None, "never answered: absent, not zero");
        assert_eq!(t.pcie_rx_kbps.unwrap().mean, 100.0);
    }

    #[test]
    fn no_samples_in_the_window_is_a_reason() {
        let s = vec![sample(0, Some(10), 60.0), sample(100, Some(10), 60.0)];
        let t = summarize(Some(Ok("Test GPU".into())), &s, &window(10.0, 42.0));
        assert!(!t.available);
        assert_eq!(t.samples, 0);
        assert_eq!(t.source, "nvml");
        let r = t.reason.unwrap();
        assert!(r.contains("32.0 ms") && r.contains("100 ms"), "{r}");
        assert!(t.gpu_util_percent.is_none() && t.power_w.is_none());
        let empty = summarize(Some(Ok("Test GPU".into())), &[], &window(0.0, 500.0));
        assert!(!empty.available && empty.reason.is_some());
    }

    #[test]
    fn a_window_shorter_than_a_period_says_so_with_the_count() {
        let s = vec![sample(100, Some(90), 300.0)];
        let t = summarize(Some(Ok("Test GPU".into())), &s, &window(60.0, 120.0));
        assert!(t.available);
        assert_eq!(t.samples, 1);
        let n = t.note.unwrap();
        assert!(n.contains("shorter than one sampling period") && n.contains("1 sample"));
    }

    #[test]
    fn no_nvml_keeps_the_reason() {
        let t = summarize(
            Some(Err("no GPU telemetry: NVML library not found".into())),
            &[sample(100, Some(1), 1.0)],
            &window(0.0, 1000.0),
        );
        assert!(!t.available);
        assert_eq!(t.source, "none");
        assert_eq!(
            t.reason.as_deref(),
            Some("no GPU telemetry: NVML library not found")
        );
        assert_eq!(summarize(None, &[], &window(0.0, 1.0)).samples, 0);
    }

    #[test]
    fn stat_of_nothing_is_none() {
        assert_eq!(stat([None, None]), None);
        let s = stat([Some(1.0), None, Some(3.0)]).unwrap();
        assert_eq!((s.mean, s.min, s.max), (2.0, 1.0, 3.0));
    }

    #[test]
    fn trace_counters_per_sample_and_reading() {
        let a = sample(100, Some(50), 200.0);
        let mut b = sample(200, None, 250.0);
        b.gpu.as_mut().unwrap().temperature_c = None;
        let host_only = TelemetrySample {
            at_ms: 300,
            gpu: None,
            host: HostSample::default(),
        };
        let c = trace_counters(&[&a, &b, &host_only], -50.0);
        // a: all six tracks; b: util and temperature missing; host-only: nothing
        assert_eq!(c.len(), 6 + 4);
        let util: Vec<_> = c.iter().filter(|x| x.name == "gpu_util_%").collect();
        assert_eq!(util.len(), 1);
        assert_eq!((util[0].ts_us, util[0].value), (50_000.0, 50.0));
        let power: Vec<_> = c.iter().filter(|x| x.name == "gpu_power_W").collect();
        assert_eq!(power[1].ts_us, 150_000.0);
        assert_eq!(power[1].value, 250.0);
        let mem = c.iter().find(|x| x.name == "gpu_mem_used_MiB").unwrap();
        assert_eq!(mem.value, 1024.0);
        assert!(trace_counters(&[], 0.0).is_empty());
    }
}
