//! A `Frame` in the OpenMetrics text format (version 1.0.0), the format Prometheus scrapes and
//! `promtool check metrics` reads. Names follow Prometheus's conventions: base units in the
//! name (`_seconds`, `_bytes`, `_watts`, `_hertz`, `_celsius`, `_ratio`). There is no counter
//! family of its own: the measured steps are `cbtop_token_latency_seconds_count` (a separate
//! `_total` counter would read as a family without help to the 0.0.4 text parser that
//! `promtool check metrics` uses, and would repeat that count). Written by hand: the format is a few line shapes, and the crates that write it
//! want to own the registry and its update path, which here is one plain struct.

use std::fmt::Write;

use super::frame::{Frame, Histogram, Labels};

/// The HTTP content type of this text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every family name `render` can write (a dashboard's queries are checked against these).
pub const FAMILIES: &[&str] = &[
    "cbtop_brick_latency_seconds",
    "cbtop_brick_budget_seconds",
    "cbtop_brick_roofline_seconds",
    "cbtop_brick_bandwidth_bytes_per_second",
    "cbtop_brick_score",
    "cbtop_token_latency_seconds",
    "cbtop_tokens_per_second",
    "cbtop_ttft_seconds",
    "cbtop_prefill_tokens_per_second",
    "cbtop_gaps_seconds",
    "cbtop_other_seconds",
    "cbtop_profiler_overhead_ratio",
    "cbtop_score",
    "cbtop_batch_tokens_per_second",
    "cbtop_batch_sequence_tokens_per_second",
    "cbtop_gpu_utilization_ratio",
    "cbtop_gpu_memory_utilization_ratio",
    "cbtop_gpu_memory_used_bytes",
    "cbtop_gpu_memory_total_bytes",
    "cbtop_gpu_power_watts",
    "cbtop_gpu_power_limit_watts",
    "cbtop_gpu_sm_clock_hertz",
    "cbtop_gpu_memory_clock_hertz",
    "cbtop_gpu_temperature_celsius",
    "cbtop_gpu_pcie_tx_bytes_per_second",
    "cbtop_gpu_pcie_rx_bytes_per_second",
];

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `{model="..",device="..",numerics=".."<extra>}`.
fn labels(l: &Labels, extra: &[(&str, &str)]) -> String {
    let mut s = format!(
        "{{model=\"{}\",device=\"{}\",numerics=\"{}\"",
        escape(&l.model),
        escape(&l.device),
        escape(&l.numerics)
    );
    for (k, v) in extra {
        let _ = write!(s, ",{k}=\"{}\"", escape(v));
    }
    s.push('}');
    s
}

/// A float as OpenMetrics spells it (`NaN`, `+Inf`, `-Inf`, else Rust's shortest form).
fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// One metric family of one frame: its metadata lines and its samples.
struct Family {
    name: String,
    head: String,
    samples: String,
}

struct Out<'a> {
    families: Vec<Family>,
    labels: &'a Labels,
}

impl Out<'_> {
    /// `# TYPE`, `# UNIT` (when the name ends in one) and `# HELP` of a family; the samples
    /// that follow belong to it.
    fn head(&mut self, name: &str, kind: &str, unit: Option<&str>, help: &str) {
        let mut head = format!("# TYPE {name} {kind}\n");
        if let Some(u) = unit {
            let _ = writeln!(head, "# UNIT {name} {u}");
        }
        let _ = writeln!(head, "# HELP {name} {help}");
        self.families.push(Family {
            name: name.to_string(),
            head,
            samples: String::new(),
        });
    }

    fn sample(&mut self, name: &str, extra: &[(&str, &str)], v: f64) {
        let line = format!("{name}{} {}\n", labels(self.labels, extra), num(v));
        if let Some(f) = self.families.last_mut() {
            f.samples.push_str(&line);
        }
    }

    /// A gauge family with one sample, left out when there is no value.
    fn gauge(&mut self, name: &str, unit: Option<&str>, help: &str, v: Option<f64>) {
        if let Some(v) = v {
            self.head(name, "gauge", unit, help);
            self.sample(name, &[], v);
        }
    }

    fn histogram(&mut self, name: &str, extra: &[(&str, &str)], h: &Histogram) {
        for &(le, n) in &h.buckets {
            let le = num(le);
            let mut l = extra.to_vec();
            l.push(("le", &le));
            self.sample(&format!("{name}_bucket"), &l, n as f64);
        }
        let mut l = extra.to_vec();
        l.push(("le", "+Inf"));
        self.sample(&format!("{name}_bucket"), &l, h.count as f64);
        self.sample(&format!("{name}_count"), extra, h.count as f64);
        self.sample(&format!("{name}_sum"), extra, h.sum_seconds.max(0.0));
    }

    /// A gauge family with a sample per brick that has the value.
    fn per_brick(
        &mut self,
        f: &Frame,
        name: &str,
        unit: Option<&str>,
        help: &str,
        get: impl Fn(&super::frame::BrickFrame) -> Option<f64>,
    ) {
        let rows: Vec<(&str, f64)> = f
            .bricks
            .iter()
            .filter_map(|b| get(b).map(|v| (b.id.as_str(), v)))
            .collect();
        if rows.is_empty() {
            return;
        }
        self.head(name, "gauge", unit, help);
        for (id, v) in rows {
            self.sample(name, &[("brick", id)], v);
        }
    }
}

/// The frame as an OpenMetrics exposition, ending in `# EOF`.
pub fn render(f: &Frame) -> String {
    render_all(std::slice::from_ref(f))
}

/// Several engines' frames (`--device all`: one per GPU, told apart by their `device` label)
/// as one exposition: each family once, with every frame's samples, as the format requires.
pub fn render_all(frames: &[Frame]) -> String {
    let mut merged: Vec<Family> = Vec::new();
    for f in frames {
        for fam in families(f) {
            match merged.iter_mut().find(|m| m.name == fam.name) {
                Some(m) => m.samples.push_str(&fam.samples),
                None => merged.push(fam),
            }
        }
    }
    let mut s = String::new();
    for m in &merged {
        s.push_str(&m.head);
        s.push_str(&m.samples);
    }
    s.push_str("# EOF\n");
    s
}

/// The families of one frame, in exposition order.
fn families(f: &Frame) -> Vec<Family> {
    let mut o = Out {
        families: Vec::new(),
        labels: &f.labels,
    };
    if !f.bricks.is_empty() {
        o.head(
            "cbtop_brick_latency_seconds",
            "histogram",
            Some("seconds"),
            "Time per decode token of each brick, summed over layers.",
        );
        for b in &f.bricks {
            o.histogram(
                "cbtop_brick_latency_seconds",
                &[("brick", &b.id)],
                &b.latency,
            );
        }
    }
    o.per_brick(
        f,
        "cbtop_brick_budget_seconds",
        Some("seconds"),
        "Each brick's budget per token (profile or roofline / target efficiency).",
        |b| b.budget_seconds,
    );
    o.per_brick(
        f,
        "cbtop_brick_roofline_seconds",
        Some("seconds"),
        "Each brick's roofline time per token at the measured peaks.",
        |b| b.roofline_seconds,
    );
    o.per_brick(
        f,
        "cbtop_brick_bandwidth_bytes_per_second",
        None,
        "Each brick's achieved bandwidth (bytes moved over its mean time).",
        |b| b.bytes_per_second,
    );
    o.per_brick(
        f,
        "cbtop_brick_score",
        None,
        "Each brick's score, 0 to 100.",
        |b| b.score,
    );
    if f.token.count > 0 {
        o.head(
            "cbtop_token_latency_seconds",
            "histogram",
            Some("seconds"),
            "Wall time of each measured decode step.",
        );
        o.histogram("cbtop_token_latency_seconds", &[], &f.token);
    }
    o.gauge(
        "cbtop_tokens_per_second",
        None,
        "Decode tokens per second over the measured steps.",
        f.tokens_per_second,
    );
    o.gauge(
        "cbtop_ttft_seconds",
        Some("seconds"),
        "Time to first token: prompt evaluation plus the first sample.",
        f.ttft_seconds,
    );
    o.gauge(
        "cbtop_prefill_tokens_per_second",
        None,
        "Prompt tokens evaluated per second.",
        f.prefill_tokens_per_second,
    );
    o.gauge(
        "cbtop_gaps_seconds",
        Some("seconds"),
        "Mean GPU idle time per token between kernels, outside every brick.",
        f.gaps_seconds,
    );
    o.gauge(
        "cbtop_other_seconds",
        Some("seconds"),
        "Mean time per token covered by no brick and no gap.",
        f.other_seconds,
    );
    o.gauge(
        "cbtop_profiler_overhead_ratio",
        Some("ratio"),
        "cbtop's own cost: profiled over unprofiled step time, minus one.",
        f.overhead_ratio,
    );
    o.gauge(
        "cbtop_score",
        None,
        "The model score (time-weighted brick scores), 0 to 100.",
        f.score,
    );
    if !f.batch.is_empty() {
        for (name, help, per_seq) in [
            (
                "cbtop_batch_tokens_per_second",
                "Tokens per second over all sequences of a --batch size.",
                false,
            ),
            (
                "cbtop_batch_sequence_tokens_per_second",
                "Tokens per second of each sequence of a --batch size.",
                true,
            ),
        ] {
            o.head(name, "gauge", None, help);
            for b in &f.batch {
                let n = b.n.to_string();
                let v = if per_seq {
                    b.per_sequence_tokens_per_second
                } else {
                    b.tokens_per_second
                };
                o.sample(name, &[("batch", &n)], v);
            }
        }
    }
    if let Some(g) = &f.gpu {
        gpu(&mut o, g);
    }
    o.families
}

/// The NVML gauges, in base units (ratios, bytes, watts, hertz, bytes per second).
fn gpu(o: &mut Out, g: &crate::telemetry::GpuSample) {
    let pct = |v: Option<u32>| v.map(|x| f64::from(x) / 100.0);
    let mhz = |v: Option<u32>| v.map(|x| f64::from(x) * 1e6);
    let kbps = |v: Option<u32>| v.map(|x| f64::from(x) * 1e3);
    let rows: [(&str, Option<&str>, &str, Option<f64>); 11] = [
        (
            "cbtop_gpu_utilization_ratio",
            Some("ratio"),
            "Share of the sample period with a kernel running (NVML; not SM occupancy).",
            pct(g.util_pct),
        ),
        (
            "cbtop_gpu_memory_utilization_ratio",
            Some("ratio"),
            "Share of the sample period with device memory being read or written (NVML).",
            pct(g.mem_util_pct),
        ),
        (
            "cbtop_gpu_memory_used_bytes",
            Some("bytes"),
            "Device memory in use (NVML).",
            g.mem_used_bytes.map(|v| v as f64),
        ),
        (
            "cbtop_gpu_memory_total_bytes",
            Some("bytes"),
            "Device memory in all (NVML).",
            g.mem_total_bytes.map(|v| v as f64),
        ),
        (
            "cbtop_gpu_power_watts",
            Some("watts"),
            "Power draw (NVML).",
            g.power_w,
        ),
        (
            "cbtop_gpu_power_limit_watts",
            Some("watts"),
            "Enforced power limit (NVML).",
            g.power_limit_w,
        ),
        (
            "cbtop_gpu_sm_clock_hertz",
            Some("hertz"),
            "SM clock (NVML).",
            mhz(g.sm_clock_mhz),
        ),
        (
            "cbtop_gpu_memory_clock_hertz",
            Some("hertz"),
            "Memory clock (NVML).",
            mhz(g.mem_clock_mhz),
        ),
        (
            "cbtop_gpu_temperature_celsius",
            Some("celsius"),
            "GPU temperature (NVML).",
            g.temperature_c.map(f64::from),
        ),
        (
            "cbtop_gpu_pcie_tx_bytes_per_second",
            None,
            "PCIe transmit throughput over NVML's 20 ms window.",
            kbps(g.pcie_tx_kbps),
        ),
        (
            "cbtop_gpu_pcie_rx_bytes_per_second",
            None,
            "PCIe receive throughput over NVML's 20 ms window.",
            kbps(g.pcie_rx_kbps),
        ),
    ];
    for (name, unit, help, v) in rows {
        if let Some(v) = v {
            o.head(name, "gauge", unit, help);
            o.sample(name, &[("gpu", &g.name)], v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::frame::BrickFrame;
    use super::*;
    use crate::telemetry::GpuSample;

    fn frame() -> Frame {
        Frame {
            labels: Labels {
                model: "m \"q\"\\x".into(),
                device: "cpu".into(),
                numerics: "exact".into(),
            },
            bricks: vec![BrickFrame {
                id: "qkv".into(),
                latency: Histogram {
                    buckets: vec![(1e-6, 0), (2e-6, 3)],
                    count: 4,
                    sum_seconds: 9e-6,
                },
                budget_seconds: Some(1e-6),
                ..BrickFrame::default()
            }],
            tokens_per_second: Some(40.5),
            gpu: Some(GpuSample {
                name: "H100".into(),
                util_pct: Some(97),
                sm_clock_mhz: Some(1980),
                ..GpuSample::default()
            }),
            ..Frame::default()
        }
    }

    /// `--device all`: two GPUs' frames in one exposition, each family's metadata once and
    /// every sample of both devices under it (the format forbids a family written twice).
    #[test]
    fn two_devices_share_each_family_once() {
        let mut a = frame();
        a.labels.device = "cuda:0".into();
        let mut b = frame();
        b.labels.device = "cuda:1".into();
        b.tokens_per_second = Some(41.0);
        let t = render_all(&[a, b]);
        assert!(
            t.ends_with("# EOF\n") && t.matches("# EOF").count() == 1,
            "{t}"
        );
        for family in [
            "cbtop_brick_latency_seconds",
            "cbtop_tokens_per_second",
            "cbtop_gpu_utilization_ratio",
        ] {
            assert_eq!(
                t.matches(&format!("# TYPE {family} ")).count(),
                1,
                "{family}: {t}"
            );
        }
        let per_second: Vec<&str> = t
            .lines()
            .filter(|l| l.starts_with("cbtop_tokens_per_second{"))
            .collect();
        assert_eq!(per_second.len(), 2, "{t}");
        assert!(per_second[0].contains(r#"device="cuda:0""#) && per_second[0].ends_with(" 40.5"));
        assert!(per_second[1].contains(r#"device="cuda:1""#) && per_second[1].ends_with(" 41"));
        // Each family's samples directly follow its own metadata.
        let family_of = |l: &str| l.split(['{', ' ']).next().unwrap().to_string();
        let mut current = String::new();
        for l in t.lines().filter(|l| *l != "# EOF") {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                current = rest.split(' ').next().unwrap().to_string();
            } else if !l.starts_with('#') {
                assert!(family_of(l).starts_with(&current), "{l} outside {current}");
            }
        }
        assert_eq!(render_all(std::slice::from_ref(&frame())), render(&frame()));
    }

    #[test]
    fn families_have_type_unit_help_and_the_text_ends_in_eof() {
        let t = render(&frame());
        assert!(t.ends_with("# EOF\n"), "{t}");
        assert!(t.contains("# TYPE cbtop_brick_latency_seconds histogram\n# UNIT cbtop_brick_latency_seconds seconds\n# HELP cbtop_brick_latency_seconds "));
        let l = r#"model="m \"q\"\\x",device="cpu",numerics="exact""#;
        for line in [
            format!("cbtop_brick_latency_seconds_bucket{{{l},brick=\"qkv\",le=\"0.000002\"}} 3"),
            format!("cbtop_brick_latency_seconds_bucket{{{l},brick=\"qkv\",le=\"+Inf\"}} 4"),
            format!("cbtop_brick_latency_seconds_count{{{l},brick=\"qkv\"}} 4"),
            format!("cbtop_brick_latency_seconds_sum{{{l},brick=\"qkv\"}} 0.000009"),
            format!("cbtop_brick_budget_seconds{{{l},brick=\"qkv\"}} 0.000001"),
            format!("cbtop_tokens_per_second{{{l}}} 40.5"),
            format!("cbtop_gpu_utilization_ratio{{{l},gpu=\"H100\"}} 0.97"),
            format!("cbtop_gpu_sm_clock_hertz{{{l},gpu=\"H100\"}} 1980000000"),
        ] {
            assert!(t.lines().any(|x| x == line), "no line {line} in\n{t}");
        }
        // Absent values are left out, not written as zero.
        assert!(!t.contains("cbtop_ttft_seconds") && !t.contains("cbtop_gpu_power_watts"));
        // Every family written is one FAMILIES lists.
        for name in t.lines().filter_map(|x| x.strip_prefix("# TYPE ")) {
            let name = name.split(' ').next().unwrap();
            assert!(FAMILIES.contains(&name), "{name}");
        }
    }
}
