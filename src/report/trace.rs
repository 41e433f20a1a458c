//! Chrome/Perfetto trace export (`--trace FILE`): one complete event (`ph: "X"`) per measured
//! brick span, on one track per timing source, one per timed kernel on a kernels track under
//! them (a brick's span is its kernels' summed run time, which need not contain every kernel
//! when the GPU idled between them, so kernels get their own track), and counter tracks (`ph: "C"`) for per-token
//! tok/s, step time and telemetry. Open in ui.perfetto.dev or chrome://tracing.
//!
//! The trace format is a JSON object with a `traceEvents` array; timestamps and durations are
//! microseconds (floats keep the nanoseconds).

use std::io::Write;

use serde_json::json;

use super::types::Source;

/// One brick span to export.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSpan {
    pub name: String,
    pub layer: Option<u32>,
    /// Index of the measured token.
    pub token: u64,
    pub start_us: f64,
    pub dur_us: f64,
    pub source: Source,
    /// A kernel of the brick named `brick`, rather than a brick.
    pub kernel_of: Option<String>,
}

/// One counter sample.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceCounter {
    pub name: String,
    pub ts_us: f64,
    pub value: f64,
}

/// The kernels track.
const KERNEL_TID: u32 = 6;

fn tid(source: Source) -> u32 {
    match source {
        Source::CpuTimer => 1,
        Source::CudaEvent => 2,
        Source::HostSync => 3,
        Source::Derived => 4,
        Source::GpuGlobaltimer => 5,
    }
}

/// One process track of a trace: an engine's spans and counters under its title.
pub struct TraceProcess<'a> {
    pub title: String,
    pub spans: &'a [TraceSpan],
    pub counters: &'a [TraceCounter],
}

/// Write the trace; `title` names the process track.
pub fn write_trace(
    out: impl Write,
    title: &str,
    spans: &[TraceSpan],
    counters: &[TraceCounter],
) -> std::io::Result<()> {
    write_processes(
        out,
        &[TraceProcess {
            title: title.to_string(),
            spans,
            counters,
        }],
    )
}

/// Write a trace with one process per engine (`--device all`: one per GPU), numbered from 1.
pub fn write_processes(out: impl Write, processes: &[TraceProcess]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(out);
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut first = true;
    let mut event = |w: &mut std::io::BufWriter<_>, v: serde_json::Value| -> std::io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *w, &v).map_err(std::io::Error::other)
    };
    for (i, p) in processes.iter().enumerate() {
        let pid = i + 1;
        let (spans, counters) = (p.spans, p.counters);
        event(
            &mut w,
            json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": p.title}}),
        )?;
        if spans.iter().any(|s| s.kernel_of.is_some()) {
            event(
                &mut w,
                json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": KERNEL_TID,
                       "args": {"name": "kernels"}}),
            )?;
        }
        let mut sources: Vec<Source> = spans
            .iter()
            .filter(|s| s.kernel_of.is_none())
            .map(|s| s.source)
            .collect();
        sources.sort_by_key(|s| tid(*s));
        sources.dedup();
        for s in sources {
            event(
                &mut w,
                json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid(s),
                       "args": {"name": format!("bricks ({})", s.name())}}),
            )?;
        }
        for s in spans {
            let v = match &s.kernel_of {
                None => json!({
                    "name": s.name, "cat": "brick", "ph": "X", "pid": pid, "tid": tid(s.source),
                    "ts": s.start_us, "dur": s.dur_us,
                    "args": {"layer": s.layer, "token": s.token, "source": s.source.name()},
                }),
                Some(brick) => json!({
                    "name": s.name, "cat": "kernel", "ph": "X", "pid": pid, "tid": KERNEL_TID,
                    "ts": s.start_us, "dur": s.dur_us,
                    "args": {"brick": brick, "layer": s.layer, "token": s.token,
                             "source": s.source.name()},
                }),
            };
            event(&mut w, v)?;
        }
        for c in counters {
            event(
                &mut w,
                json!({"name": c.name, "ph": "C", "pid": pid, "ts": c.ts_us,
                       "args": {c.name.as_str(): c.value}}),
            )?;
        }
    }
    w.write_all(b"\n]}\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_is_json_with_one_event_per_span() {
        let spans = vec![
            TraceSpan {
                name: "qkv".into(),
                layer: Some(0),
                token: 0,
                start_us: 1.5,
                dur_us: 2.25,
                source: Source::CpuTimer,
                kernel_of: None,
            };
            3
        ];
        let mut spans = spans;
        spans.push(TraceSpan {
            name: "mvf_q4_k".into(),
            layer: Some(0),
            token: 0,
            start_us: 1.6,
            dur_us: 1.0,
            source: Source::GpuGlobaltimer,
            kernel_of: Some("qkv".into()),
        });
        let counters = vec![TraceCounter {
            name: "tok/s".into(),
            ts_us: 10.0,
            value: 99.0,
        }];
        let mut out = Vec::new();
        write_trace(&mut out, "t", &spans, &counters).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        assert_eq!(ev.iter().filter(|e| e["ph"] == "X").count(), 4);
        let k = ev.iter().find(|e| e["cat"] == "kernel").unwrap();
        assert_eq!(
            (&k["tid"], &k["args"]["brick"]),
            (&KERNEL_TID.into(), &"qkv".into())
        );
        let tracks: Vec<&serde_json::Value> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| &e["args"]["name"])
            .collect();
        assert!(tracks.contains(&&"kernels".into()), "{tracks:?}");
        assert_eq!(ev.iter().filter(|e| e["ph"] == "C").count(), 1);
        let x = ev.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(x["dur"], 2.25);
        assert_eq!(x["args"]["source"], "cpu_timer");
    }

    /// `--device all`: one process per engine, each with its own tracks and title.
    #[test]
    fn each_engine_is_a_process_of_its_own() {
        let span = TraceSpan {
            name: "qkv".into(),
            layer: Some(0),
            token: 0,
            start_us: 1.0,
            dur_us: 2.0,
            source: Source::GpuGlobaltimer,
            kernel_of: None,
        };
        let spans = [span];
        let processes = [0, 1].map(|i| TraceProcess {
            title: format!("cuda:{i}"),
            spans: &spans,
            counters: &[],
        });
        let mut out = Vec::new();
        write_processes(&mut out, &processes).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        for pid in [1, 2] {
            let name = ev
                .iter()
                .find(|e| e["name"] == "process_name" && e["pid"] == pid)
                .unwrap();
            assert_eq!(name["args"]["name"], format!("cuda:{}", pid - 1));
            assert_eq!(
                ev.iter()
                    .filter(|e| e["ph"] == "X" && e["pid"] == pid)
                    .count(),
                1
            );
        }
    }
}
