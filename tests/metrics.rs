//! The metrics export: `--format openmetrics` (and `promtool check metrics` on it where
//! Prometheus's tools are installed, as CI installs them), `/metrics` served during and after
//! a headless run, a real Prometheus server scraping it and answering a query for a brick's
//! histogram, an address in use, and the Grafana dashboard's queries.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cbtop::metrics::openmetrics::FAMILIES;
use common::http::{encode, get};
use common::{cbtop, stderr, HEADLESS_CPU};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-metrics-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An installed program's path, if `name` is on PATH.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

/// A child process killed when dropped (a failed assertion must not leave it running).
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start a headless run serving metrics on a free loopback port; returns the child and the
/// address it printed.
fn serving_run(extra: &[&str], out: &Path) -> (Kill, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cbtop"))
        .args(HEADLESS_CPU)
        .args(["--metrics-listen", "127.0.0.1:0", "--output"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cbtop");
    let err = child.stderr.take().unwrap();
    let child = Kill(child);
    let mut lines = BufReader::new(err).lines();
    let first = lines.next().expect("a line on stderr").unwrap();
    let addr = first
        .strip_prefix("cbtop: serving /metrics on http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("first stderr line: {first}"))
        .to_string();
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn format_openmetrics_is_valid_and_holds_every_brick() {
    let o = cbtop(&[
        "--headless",
        "--ci",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--tokens",
        "8",
        "--warmup",
        "2",
        "--format",
        "openmetrics",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.ends_with("# EOF\n"));
    for brick in ["embed", "qkv", "attention", "ffn_down", "lm_head", "sample"] {
        let inf = format!("brick=\"{brick}\",le=\"+Inf\"}} 8");
        assert!(
            text.lines()
                .any(|l| l.starts_with("cbtop_brick_latency_seconds_bucket{") && l.ends_with(&inf)),
            "no +Inf bucket of {brick} with 8 steps"
        );
    }
    for family in [
        "cbtop_token_latency_seconds",
        "cbtop_tokens_per_second",
        "cbtop_ttft_seconds",
        "cbtop_other_seconds",
        "cbtop_profiler_overhead_ratio",
        "cbtop_brick_budget_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family} missing"
        );
    }
    assert!(text.contains(r#"device="cpu",numerics="exact""#));
    let Some(promtool) = which("promtool") else {
        eprintln!("skipping promtool check metrics: promtool is not installed (CI installs it: scripts/test.sh)");
        return;
    };
    let mut p = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let r = p.wait_with_output().unwrap();
    assert!(
        r.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
}

#[test]
fn metrics_are_served_after_a_headless_run_until_the_hold_ends() {
    let dir = scratch("serve");
    let out = dir.join("report.json");
    let (mut child, addr) = serving_run(
        &["--tokens", "12", "--warmup", "2", "--metrics-hold", "60"],
        &out,
    );
    // The report is written before the hold, so its presence means the final state is served.
    let t0 = Instant::now();
    while !out.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no report");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, body) = get(&addr, "/metrics").unwrap();
    assert_eq!(code, 200);
    let r = report(&out);
    let steps = r["config"]["measured_tokens"].as_u64().unwrap();
    assert_eq!(steps, 12);
    for b in r["bricks"].as_array().unwrap() {
        let id = b["id"].as_str().unwrap();
        let count = body
            .lines()
            .find(|l| {
                l.starts_with("cbtop_brick_latency_seconds_count{")
                    && l.contains(&format!("brick=\"{id}\""))
            })
            .unwrap_or_else(|| panic!("no count of {id} in\n{body}"));
        assert!(count.ends_with(&format!(" {steps}")), "{count}");
    }
    // serde_json's float parsing is not always correctly rounded: within 1e-12.
    let tps = r["throughput"]["tokens_per_sec"].as_f64().unwrap();
    let served: f64 = body
        .lines()
        .find(|l| l.starts_with("cbtop_tokens_per_second{"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .expect("tok/s served");
    assert!(
        (served / tps - 1.0).abs() < 1e-12,
        "tok/s {served} against {tps}"
    );
    assert_eq!(get(&addr, "/elsewhere").unwrap().0, 404);
    // SIGTERM ends the hold; the run itself was complete, so it exits 0.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_address_in_use_is_one_line_and_exit_2_before_the_run() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    // Headless, and the live view (which fails before it would take the terminal).
    for headless in [true, false] {
        let mut args = vec!["--device", "cpu", "--metrics-listen", &addr];
        if headless {
            args.extend(["--headless", "--ci"]);
        }
        let o = cbtop(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.starts_with(&format!("cbtop: error: --metrics-listen {addr}: ")),
            "{e}"
        );
        assert!(o.stdout.is_empty());
    }
    let o = cbtop(&["--headless", "--metrics-listen", "nowhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--metrics-listen nowhere"));
}

/// A free loopback port (bound and released: another process could take it in between,
/// which would fail the test loudly, not pass it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Prometheus's answer to an instant query: the result vector.
fn query(prom: &str, q: &str) -> Vec<serde_json::Value> {
    match get(prom, &format!("/api/v1/query?query={}", encode(q))) {
        Ok((200, body)) => {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            v["data"]["result"].as_array().cloned().unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

fn value(sample: &serde_json::Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

#[test]
fn prometheus_scrapes_a_headless_run_and_answers_for_a_brick_histogram() {
    let Some(prometheus) = which("prometheus") else {
        eprintln!(
            "skipping: the prometheus server is not installed (CI installs Debian's \
             `prometheus` package: scripts/test.sh)"
        );
        return;
    };
    let dir = scratch("prometheus");
    let out = dir.join("report.json");
    let (_cbtop, target) = serving_run(
        &["--tokens", "48", "--warmup", "2", "--metrics-hold", "90"],
        &out,
    );
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: \
             cbtop\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let prom = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let _server = Kill(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={prom}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus"),
    );
    // Wait for the report (the run's end), then for a scrape of its final state.
    let t0 = Instant::now();
    let deadline = Duration::from_secs(80);
    while !out.exists() {
        assert!(t0.elapsed() < deadline, "no report");
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = report(&out);
    let steps = r["config"]["measured_tokens"].as_f64().unwrap();
    let ffn_down = r["bricks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "ffn_down")
        .unwrap()
        .clone();
    let inf = r#"cbtop_brick_latency_seconds_bucket{brick="ffn_down",le="+Inf",device="cpu"}"#;
    let mut last = Vec::new();
    while t0.elapsed() < deadline {
        last = query(&prom, inf);
        if last.len() == 1 && value(&last[0]) == steps {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    assert!(
        last.len() == 1 && value(&last[0]) == steps,
        "Prometheus never had the final +Inf bucket ({steps} steps): {last:?}\nprometheus log:\n{log}"
    );
    let labels = &last[0]["metric"];
    assert_eq!(labels["job"], "cbtop");
    assert_eq!(labels["numerics"], "exact");
    assert!(labels["model"].as_str().unwrap().contains("SmolLM2-135M"));
    // Every bucket came through, and the median Prometheus computes from them lies in the
    // bucket of the report's p50 (bounds a 1-2-5 step apart).
    let buckets = query(
        &prom,
        r#"cbtop_brick_latency_seconds_bucket{brick="ffn_down"}"#,
    );
    assert_eq!(buckets.len(), 23, "{buckets:?}");
    let q = query(
        &prom,
        r#"histogram_quantile(0.5, cbtop_brick_latency_seconds_bucket{brick="ffn_down"})"#,
    );
    assert_eq!(q.len(), 1, "{q:?}");
    let p50 = ffn_down["p50_us"].as_f64().unwrap() / 1e6;
    let got = value(&q[0]);
    assert!(
        got > p50 / 2.5 && got < p50 * 2.5,
        "Prometheus's median {got} s against the report's p50 {p50} s"
    );
    let tps = query(&prom, "cbtop_tokens_per_second");
    assert_eq!(tps.len(), 1);
    // Prometheus's float formatting may differ in the last digit.
    let want = r["throughput"]["tokens_per_sec"].as_f64().unwrap();
    assert!(
        (value(&tps[0]) / want - 1.0).abs() < 1e-12,
        "{tps:?} against {want}"
    );
    eprintln!(
        "prometheus at {prom} scraped cbtop at {target}: ffn_down +Inf bucket {steps}, \
         median {got:.6} s (report p50 {p50:.6} s)"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Every metric the Grafana dashboard queries is one cbtop exports, and it has a panel for
/// each view of the live TUI.
#[test]
fn the_grafana_dashboard_queries_only_exported_metrics() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/cbtop.json");
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let panels = d["panels"].as_array().unwrap();
    let mut exprs = Vec::new();
    for p in panels {
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if p["type"] != "row" {
            assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        }
        for t in targets {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    let mut names = 0;
    for e in &exprs {
        for (i, _) in e.match_indices("cbtop_") {
            let name: String = e[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let family = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|f| FAMILIES.contains(f))
                .unwrap_or(&name);
            assert!(FAMILIES.contains(&family), "{name} in {e} is not exported");
            names += 1;
        }
    }
    assert!(names >= 10, "{names} metric references");
    let titles: Vec<String> = panels
        .iter()
        .map(|p| p["title"].as_str().unwrap_or("").to_lowercase())
        .collect();
    for view in [
        "throughput",
        "brick pipeline",
        "histogram",
        "budget",
        "roofline",
        "gpu",
        "batch",
    ] {
        assert!(
            titles.iter().any(|t| t.contains(view)),
            "no panel for the {view} view: {titles:?}"
        );
    }
}
