//! `--device all`: one engine per GPU, each on its own thread with its own model copy and NVML
//! device. The headless report has a section per GPU, the OpenMetrics exposition labels every
//! family by GPU (each family once), the trace has a process per GPU, and `/metrics` served
//! during the run carries every GPU. Without a GPU, `--device all` is exit 3 naming the reason,
//! and a command that runs on one device refuses it (exit 2).

mod common;
mod gpu;

use cbtop::engine::cuda::probe;
use common::{cbtop, stderr};
use serde_json::Value;

const NAME: &str = "conf-qwen2-Q4_K_M";

fn model() -> String {
    common::fixture(&format!("conformance/models/{NAME}.gguf"))
        .display()
        .to_string()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-gpu-multi-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A quiet headless run of the fixture model on every GPU: 6 steps after 2 warm-up.
fn all_gpus(m: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--headless",
        "--ci",
        "--model-path",
        m,
        "--device",
        "all",
        "--tokens",
        "6",
        "--warmup",
        "2",
    ];
    args.extend_from_slice(extra);
    cbtop(&args)
}

#[test]
fn device_all_without_a_gpu_is_exit_3_naming_why() {
    if let Some(g) = probe().gpus.first().filter(|_| probe().unusable.is_none()) {
        eprintln!(
            "skipped: a GPU is usable here ({}), so --device all runs",
            g.name
        );
        return;
    }
    let o = all_gpus(&model(), &["--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("--device all: no usable CUDA GPU"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn one_device_commands_refuse_device_all() {
    let o = cbtop(&[
        "generate",
        "--model-path",
        &model(),
        "--ids",
        "1 2 3",
        "--max-tokens",
        "1",
        "--device",
        "all",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--device all profiles every GPU"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn every_gpu_gets_its_own_engine_report_metrics_and_trace() {
    if gpu::gpu("every_gpu_gets_its_own_engine_report_metrics_and_trace").is_none() {
        return;
    }
    let n = probe().gpus.len();
    eprintln!(
        "{n} GPU(s): {:?}",
        probe().gpus.iter().map(|g| &g.name).collect::<Vec<_>>()
    );
    let m = model();
    let trace = scratch("trace.json");
    let o = all_gpus(&m, &["--json", "--trace", trace.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let devices = r["devices"].as_array().expect("a devices section");
    assert_eq!(devices.len(), n, "one section per GPU");
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(
            d["hardware"]["gpu"]["ordinal"], i,
            "sections in ordinal order"
        );
        assert_eq!(d["hardware"]["backend"], r["hardware"]["backend"]);
        assert!(d["throughput"]["tokens_per_sec"].as_f64().unwrap() > 0.0);
        assert_eq!(d["config"]["measured_tokens"], 6);
        assert!(
            d["devices"].is_null(),
            "a section has no sections of its own"
        );
        let bricks = d["bricks"].as_array().unwrap();
        assert!(
            bricks.iter().any(|b| b["id"] == "lm_head"),
            "cuda:{i}: no lm_head"
        );
        eprintln!(
            "cuda:{i} {}: {:.1} tok/s",
            d["hardware"]["gpu"]["name"],
            d["throughput"]["tokens_per_sec"].as_f64().unwrap()
        );
    }
    assert_eq!(r["status"], "PASS");
    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let processes: Vec<String> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(processes.len(), n, "{processes:?}");
    for (i, p) in processes.iter().enumerate() {
        assert!(p.ends_with(&format!("on cuda:{i}")), "{p}");
    }

    let o = all_gpus(&m, &["--format", "openmetrics"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.matches("# TYPE cbtop_tokens_per_second ").count(), 1);
    for i in 0..n {
        let dev = format!("device=\"cuda:{i}\"");
        for family in [
            "cbtop_tokens_per_second{",
            "cbtop_brick_latency_seconds_bucket{",
            "cbtop_gpu_power_watts{",
        ] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(family) && l.contains(&dev)),
                "no {family}..{dev} sample:\n{text}"
            );
        }
    }

    let o = all_gpus(&m, &["--format", "md"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = String::from_utf8(o.stdout).unwrap();
    for i in 0..n {
        assert!(md.contains(&format!("## cuda:{i} ")), "{md}");
    }
}

/// `/metrics` during an `--device all` run (held after it) carries every GPU's families.
#[test]
fn metrics_served_during_device_all_carry_every_gpu() {
    if gpu::gpu("metrics_served_during_device_all_carry_every_gpu").is_none() {
        return;
    }
    let n = probe().gpus.len();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cbtop"))
        .args([
            "--headless",
            "--ci",
            "--json",
            "--model-path",
            &model(),
            "--device",
            "all",
            // About a second of decoding, so NVML (10 Hz) has read each GPU during the run.
            "--tokens",
            "1500",
            "--warmup",
            "1",
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-hold",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    use std::io::BufRead;
    let addr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no address line");
        if let Some(rest) = line
            .trim()
            .strip_prefix("cbtop: serving /metrics on http://")
        {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let text = loop {
        let (code, body) = common::http::get(&addr, "/metrics").unwrap_or((0, String::new()));
        let every = (0..n).all(|i| {
            body.lines().any(|l| {
                l.starts_with("cbtop_tokens_per_second{")
                    && l.contains(&format!("device=\"cuda:{i}\""))
            })
        });
        if code == 200 && every {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never saw every GPU:\n{body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        text.matches("# TYPE cbtop_brick_latency_seconds ").count(),
        1
    );
    eprintln!(
        "{}",
        text.lines()
            .filter(|l| l.starts_with("cbtop_tokens_per_second"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
