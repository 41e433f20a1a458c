//! `cbtop --headless` end to end, on a two-layer conformance model so each run takes a second:
//! the report validates against `cbtop schema`, brick shares and `other` add up to the token
//! time, every gate passes and fails on purpose (exit 1), bad input exits 2 with one line, the
//! trace holds one event per span, and per-brick series are measured independently.

mod common;

use std::process::Output;

use common::{cbtop, stderr};

use serde_json::Value;

const MODEL: &str = "conformance/models/conf-qwen2-Q4_K_M.gguf";

fn model() -> String {
    common::fixture(MODEL).display().to_string()
}

/// A short headless run of the conformance model plus `extra` flags, on the CPU engine (the
/// checks below count its 15 unfused bricks; the GPU's reports are checked on the device by
/// the gpu_* tests and the device runs).
fn headless(extra: &[&str]) -> Output {
    let m = model();
    let mut args = vec![
        "--headless",
        "--ci",
        "--model-path",
        &m,
        "--threads",
        "2",
        "--device",
        "cpu",
    ];
    // defaults the caller may override
    for (flag, value) in [("--tokens", "24"), ("--warmup", "2")] {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    args.extend_from_slice(extra);
    cbtop(&args)
}

fn json_report(o: &Output) -> Value {
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "cbtop failed: {}",
        stderr(o)
    );
    serde_json::from_slice(&o.stdout).expect("stdout is one JSON report")
}

fn schema() -> Value {
    let o = cbtop(&["schema"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("schema is JSON")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn report_validates_against_schema_and_adds_up() {
    let o = headless(&["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json_report(&o);
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&r).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "report does not match schema: {errors:?}"
    );

    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["status"], "PASS");
    assert_eq!(r["model"]["synthetic"], false);
    assert_eq!(r["hardware"]["backend"], "cpu");
    let bricks = r["bricks"].as_array().unwrap();
    let ids: Vec<&str> = bricks.iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "embed",
            "attn_norm",
            "qkv",
            "rope",
            "attention",
            "attn_out",
            "attn_residual",
            "ffn_norm",
            "ffn_gate_up",
            "ffn_act",
            "ffn_down",
            "ffn_residual",
            "final_norm",
            "lm_head",
            "sample"
        ]
    );
    for b in bricks {
        assert_eq!(b["source"], "cpu_timer", "{}", b["id"]);
        assert_eq!(b["count"], 24, "{}", b["id"]);
        assert!(f(&b["mean_us"]) > 0.0, "{}", b["id"]);
        let per_layer = b["per_layer_us"].as_array().unwrap();
        let layered = !matches!(
            b["id"].as_str().unwrap(),
            "embed" | "final_norm" | "lm_head" | "sample"
        );
        assert_eq!(per_layer.len(), if layered { 2 } else { 0 }, "{}", b["id"]);
        // the layers add up to the brick's per-token time
        if layered {
            let sum: f64 = per_layer.iter().map(f).sum();
            assert!((sum - f(&b["mean_us"])).abs() < 1e-6 * sum.max(1.0) + 1e-9);
        }
        assert!(f(&b["efficiency"]) <= 1.0);
        assert!((0.0..=100.0).contains(&f(&b["score"])));
    }

    // bricks + other = the token time (within 2%), and shares add to 100%
    let token_us = f(&r["token_us"]);
    let covered: f64 = bricks.iter().map(|b| f(&b["mean_us"])).sum();
    let other = f(&r["other_us"]);
    assert!(other >= 0.0);
    assert!(
        ((covered + other) - token_us).abs() <= 0.02 * token_us,
        "bricks {covered} + other {other} vs token {token_us}"
    );
    let shares: f64 =
        bricks.iter().map(|b| f(&b["share_percent"])).sum::<f64>() + f(&r["other_share_percent"]);
    assert!((shares - 100.0).abs() <= 2.0, "shares add to {shares}");
    // tok/s is the measured steps' mean time, inverted
    let tps = f(&r["throughput"]["tokens_per_sec"]);
    assert!((tps - 1e6 / token_us).abs() / tps < 1e-9);
    assert!(r["throughput"]["overhead_percent"].is_number());
    assert!(f(&r["throughput"]["unprofiled_tokens_per_sec"]) > 0.0);
    assert!(r["bottleneck"]["top3"].as_array().unwrap().len() == 3);
}

#[test]
fn a_broken_report_fails_the_schema() {
    let o = headless(&["--json", "--tokens", "2"]);
    let mut r = json_report(&o);
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    assert!(validator.is_valid(&r));
    r["throughput"]["tokens_per_sec"] = Value::String("fast".into());
    assert!(!validator.is_valid(&r));
}

/// Each gate once passing and once failing on purpose.
#[test]
fn every_gate_passes_and_fails() {
    let dir = std::env::temp_dir().join(format!("cbtop-gates-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("baseline.json");
    let base_s = base.display().to_string();

    // all passing: generous thresholds; this report is also the baseline
    let o = headless(&[
        "--json",
        "--output",
        &base_s,
        "--min-tok-s",
        "0.001",
        "--min-score",
        "0",
        "--max-cv",
        "100000",
        "--max-brick-us",
        "qkv=1000000000",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "--output keeps stdout empty");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let gates = r["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 4);
    assert!(gates.iter().all(|g| g["pass"] == true), "{gates:?}");

    let failing: [&[&str]; 4] = [
        &["--min-tok-s", "1000000000"],
        &["--min-score", "100.5"],
        &["--max-cv", "0"],
        &["--max-brick-us", "qkv=0"],
    ];
    for flags in failing {
        let mut args = vec!["--json"];
        args.extend_from_slice(flags);
        let o = headless(&args);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {}", stderr(&o));
        let r = json_report(&o);
        assert_eq!(r["status"], "FAIL", "{flags:?}");
        assert_eq!(r["gates"][0]["pass"], false, "{flags:?}");
        assert_eq!(stderr(&o).lines().count(), 1, "{flags:?}: {}", stderr(&o));
    }

    // regression against the baseline: generous passes, an inflated baseline fails
    let o = headless(&["--json", "--baseline", &base_s, "--max-regression", "1000"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut fast = r.clone();
    fast["throughput"]["tokens_per_sec"] = Value::from(1e12);
    let fast_path = dir.join("fast.json");
    std::fs::write(&fast_path, fast.to_string()).unwrap();
    let fp = fast_path.display().to_string();
    let o = headless(&["--json", "--baseline", &fp, "--max-regression", "5"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(json_report(&o)["gates"][0]["name"], "max_regression");

    // `cbtop compare`: B faster than A passes the gate, slower fails it with exit 1
    let o = cbtop(&["compare", &base_s, &fp, "--max-regression", "5"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(table.contains("qkv") && table.contains("faster"), "{table}");
    let o = cbtop(&["compare", &fp, &base_s, "--max-regression", "5", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(f(&c["regression_percent"]) > 99.0);
    assert_eq!(c["bricks"].as_array().unwrap().len(), 15);
    let o = cbtop(&["compare", &base_s, "/nonexistent.json"]);
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = std::env::temp_dir().join(format!("cbtop-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.gguf");
    std::fs::write(&garbage, b"GGUF\x03\x00\x00\x00not really a model").unwrap();
    let g = garbage.display().to_string();
    let cases: [&[&str]; 5] = [
        &["--headless", "--model-path", "/nonexistent/model.gguf"],
        &["--headless", "--model-path", &g],
        &["--headless", "--max-brick-us", "qkv"],
        &[
            "--headless",
            "--max-brick-us",
            "nope=5",
            "--model-path",
            MODEL,
        ],
        &["--headless", "--profile", "no-such-profile"],
    ];
    let model = model();
    for args in cases {
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == MODEL { model.as_str() } else { a })
            .chain(["--ci", "--tokens", "2", "--warmup", "0"])
            .collect();
        let o = cbtop(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_has_one_event_per_span_and_formats_render() {
    let dir = std::env::temp_dir().join(format!("cbtop-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.json");
    let t = trace.display().to_string();
    let o = headless(&["--format", "csv", "--tokens", "5", "--trace", &t]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = String::from_utf8(o.stdout).unwrap();
    // header + 15 bricks + other
    assert_eq!(csv.lines().count(), 17, "{csv}");
    let tr: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = tr["traceEvents"].as_array().unwrap();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    // per token: 11 layer bricks x 2 layers + 4 others
    assert_eq!(count("X"), 5 * (11 * 2 + 4));
    assert_eq!(count("C"), 5 * 2);
    let o = headless(&["--format", "md", "--tokens", "3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.contains("qkv") && md.contains("other"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn timing_off_reports_throughput_without_bricks() {
    let o = headless(&["--json", "--timing", "off", "--tokens", "8"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json_report(&o);
    assert!(r["bricks"].as_array().unwrap().is_empty());
    assert!(f(&r["throughput"]["tokens_per_sec"]) > 0.0);
    assert!(r["throughput"]["overhead_percent"].is_null());
    assert_eq!(r["config"]["timing"], "off");
    assert!(r["prefill"].is_null(), "no prefill table with timing off");
}

/// The prompt gets its own brick table: every brick of the forward pass, layer bricks with a
/// time per layer, costs for the whole prompt, and bricks + gaps + other = its wall time.
#[test]
fn prefill_has_its_own_brick_table_that_adds_up() {
    let o = headless(&["--json", "--prefill", "12", "--tokens", "4"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json_report(&o);
    let p = &r["prefill"];
    assert_eq!(p["tokens"], 12);
    // On the CPU the prompt's compute roof is the decode bricks' FMA peak, except for the
    // products of the (quantized) embedded default, whose dots are integer multiply-adds:
    // theirs is the int8 dot peak where the CPU has one (AVX2 or AVX-512 VNNI).
    let peaks = &r["hardware"]["peaks"];
    assert_eq!(p["compute_source"], peaks["compute_source"]);
    assert_eq!(p["compute_gflops"], peaks["compute_gflops"]);
    let bricks = p["bricks"].as_array().unwrap();
    let int8 = p["int8_source"].as_str();
    if let Some(src) = int8 {
        assert!(
            src.starts_with("cpu_int8_probe_") && f(&p["int8_gops"]) > 0.0,
            "{p}"
        );
    } else {
        eprintln!("no int8 dot peak on this CPU: every brick takes the FMA peak");
    }
    for b in bricks {
        let product = ["qkv", "attn_out", "ffn_gate_up", "ffn_down", "lm_head"]
            .contains(&b["id"].as_str().unwrap());
        let want = match int8 {
            Some(src) if product => src,
            _ => p["compute_source"].as_str().unwrap(),
        };
        assert_eq!(b["compute_source"], want, "{b}");
    }
    let ids: Vec<&str> = bricks.iter().map(|b| b["id"].as_str().unwrap()).collect();
    for want in [
        "embed",
        "qkv",
        "attention",
        "ffn_gate_up",
        "ffn_down",
        "lm_head",
        "sample",
    ] {
        assert!(
            ids.contains(&want),
            "{want} missing from the prefill table {ids:?}"
        );
    }
    let layers = r["model"]["layers"].as_u64().unwrap() as usize;
    let mut sum = 0.0;
    for b in bricks {
        let total = f(&b["total_us"]);
        assert!(total > 0.0, "{b}");
        assert!((f(&b["per_token_us"]) * 12.0 - total).abs() < 1e-6 * total.max(1.0));
        assert!(
            b["bytes"].as_u64().unwrap() > 0 && f(&b["roofline_us"]) > 0.0,
            "{b}"
        );
        let per_layer = b["per_layer_us"].as_array().unwrap();
        if b["id"] == "qkv" {
            assert_eq!(per_layer.len(), layers);
            let layer_sum: f64 = per_layer.iter().map(f).sum();
            assert!(
                (layer_sum - total).abs() <= 0.01 * total,
                "{layer_sum} vs {total}"
            );
        }
        sum += total;
    }
    sum += f(&p["other_us"]) + p["gaps_us"].as_f64().unwrap_or(0.0);
    let total = f(&p["total_us"]);
    assert!(
        (sum - total).abs() <= 0.02 * total,
        "bricks + gaps + other {sum} vs prefill {total}"
    );
    // The weights are read once for the whole prompt: a 12-token prompt's qkv moves fewer
    // than 12 decode tokens' bytes.
    let qkv = bricks.iter().find(|b| b["id"] == "qkv").unwrap();
    let decode_qkv = r["bricks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "qkv")
        .unwrap();
    assert!(qkv["bytes"].as_u64().unwrap() < 12 * decode_qkv["bytes"].as_u64().unwrap());
}

#[test]
fn cpu_reports_record_the_numerics_that_ran() {
    // The CPU engine is the reference: exact unless `--numerics fast` asks otherwise.
    for (asked, ran) in [
        (None, "exact"),
        (Some("fast"), "fast"),
        (Some("exact"), "exact"),
    ] {
        let mut extra = vec!["--json", "--tokens", "2"];
        extra.extend(asked.iter().flat_map(|n| ["--numerics", n]));
        let o = headless(&extra);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let r = json_report(&o);
        assert_eq!(r["config"]["numerics"], ran, "--numerics {asked:?}");
    }
    let o = headless(&["--format", "md", "--tokens", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.contains("numerics exact"), "{md}");
}

#[test]
fn embedded_default_is_labelled_synthetic() {
    let o = cbtop(&[
        "--headless",
        "--ci",
        "--json",
        "--tokens",
        "2",
        "--warmup",
        "0",
        "--threads",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["model"]["synthetic"], true);
    assert!(r["model"]["path"].is_null());
    assert_eq!(r["model"]["layers"], 30);
    let o = cbtop(&["--headless", "--ci", "--tokens", "1", "--warmup", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("synthetic weights"));
}

/// `--batch 1,3`: one `batch` entry per size, each with its sequences' prompts and TTFTs, a
/// throughput, the profiler's overhead and a brick table whose bricks cover most of the
/// profiled step; `--prompt-file` lines are taken in turn; a size of 0 or past the largest,
/// or an unreadable prompt file, is refused by flag (exit 2).
#[test]
fn batch_sweep_adds_one_entry_per_size() {
    let o = headless(&["--json", "--tokens", "6", "--batch", "1,3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json_report(&o);
    let batch = r["batch"].as_array().expect("a batch section");
    assert_eq!(batch.len(), 2);
    for (p, n) in batch.iter().zip([1usize, 3]) {
        assert_eq!(p["n"].as_u64(), Some(n as u64));
        assert_eq!(p["ttft_ms"].as_array().unwrap().len(), n);
        assert_eq!(p["prompt_tokens"].as_array().unwrap().len(), n);
        assert_eq!(p["steps"].as_u64(), Some(6));
        let (tps, per) = (
            f(&p["tokens_per_sec"]),
            f(&p["per_sequence_tokens_per_sec"]),
        );
        assert!(
            tps > 0.0 && (tps - n as f64 * per).abs() < 1e-6 * tps,
            "{p}"
        );
        let bricks = p["bricks"].as_array().unwrap();
        assert!(bricks.iter().any(|b| b["id"] == "ffn_gate_up"), "{p}");
        let covered: f64 = bricks.iter().map(|b| f(&b["share_percent"])).sum();
        assert!(
            (50.0..=100.5).contains(&covered),
            "bricks cover {covered}% of a step"
        );
        assert!(p["overhead_percent"].is_number());
    }
    let dir = std::env::temp_dir().join(format!("cbtop-prompts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("prompts.txt");
    std::fs::write(&file, "one two three four five six\n\nseven\n").unwrap();
    let f = file.display().to_string();
    let o = headless(&[
        "--json",
        "--tokens",
        "2",
        "--batch",
        "3",
        "--prompt-file",
        &f,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lens = json_report(&o)["batch"][0]["prompt_tokens"].clone();
    let lens: Vec<u64> = lens
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(lens.len(), 3);
    assert!(
        lens[0] == lens[2] && lens[0] > lens[1],
        "lines taken in turn: {lens:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    for bad in [
        &["--batch", "0"][..],
        &["--batch", "1,2000"],
        &["--batch", "2", "--prompt-file", "/nonexistent/prompts.txt"],
    ] {
        let o = headless(bad);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {err}");
        assert!(
            err.contains("--batch") || err.contains("--prompt-file"),
            "{bad:?}: {err}"
        );
    }
}

/// On the CPU every brick names the kernels chosen at run time (with their instruction set)
/// and the tensors they read, with the file's types; nothing is timed per kernel there.
#[test]
fn the_cpu_report_names_each_bricks_kernels() {
    let o = headless(&["--json", "--tokens", "4"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json_report(&o);
    let model = cbtop::model::Model::load(std::path::Path::new(&model())).unwrap();
    let l0 = &model.weights.layers[0];
    let label = |m: &cbtop::model::weights::Mat| cbtop::model::weights::tensor_label(&m.name, m.ty);
    let want: Vec<(&str, Vec<String>)> = vec![
        ("qkv", vec![label(&l0.wq), label(&l0.wk), label(&l0.wv)]),
        ("attn_out", vec![label(&l0.wo)]),
        ("ffn_gate_up", vec![label(&l0.w_gate), label(&l0.w_up)]),
        ("ffn_down", vec![label(&l0.w_down)]),
        ("lm_head", vec![label(&model.weights.output)]),
    ];
    let bricks = r["bricks"].as_array().unwrap();
    let avx2 = cfg!(target_arch = "x86_64") && std::is_x86_feature_detected!("avx2");
    for b in bricks {
        let id = b["id"].as_str().unwrap();
        let ks = b["kernels"].as_array().unwrap();
        assert!(!ks.is_empty(), "{id} names its kernels");
        for k in ks {
            assert!(k["mean_us"].is_null() && k["grid"].is_null(), "{id}: {k}");
            assert!(k["launches_per_token"].as_u64().unwrap() >= 1, "{k}");
            let name = k["name"].as_str().unwrap();
            assert!(name.ends_with(')'), "{id}: {name} says its ISA");
        }
        if let Some((_, tensors)) = want.iter().find(|(w, _)| *w == id) {
            let reads: Vec<&str> = ks.iter().filter_map(|k| k["reads"].as_str()).collect();
            for t in tensors {
                assert!(reads.contains(&t.as_str()), "{id} reads {t}: {reads:?}");
            }
            for k in ks {
                let name = k["name"].as_str().unwrap();
                // The conformance model's types all have AVX2 row kernels.
                assert_eq!(name.contains("(scalar)"), !avx2, "{id}: {name}");
            }
        }
    }
}

/// `--device all`'s report shape, rendered from two engines' reports (the GPU run itself is
/// `gpu_multi`'s): the combined report validates against the schema, Markdown has a section
/// per engine with its report's headings under it, and CSV puts a `device` column before each
/// engine's rows.
#[test]
fn a_report_with_a_section_per_device_validates_and_renders() {
    let r: cbtop::report::Report =
        serde_json::from_slice(&headless(&["--json", "--tokens", "4"]).stdout).unwrap();
    let gpu = |ordinal: usize| {
        let mut d = r.clone();
        d.hardware.backend = "cuda".into();
        d.hardware.gpu = Some(cbtop::engine::cuda::GpuInfo {
            ordinal,
            name: format!("GPU{ordinal}"),
            driver: "d".into(),
            cuda: "c".into(),
            memory_total_bytes: 1,
            compute_capability: "9.0".into(),
        });
        d
    };
    let (a, b) = (gpu(0), gpu(1));
    let mut all = a.clone();
    all.devices = Some(vec![a, b]);
    let v = serde_json::to_value(&all).unwrap();
    let schema = jsonschema::validator_for(&schema()).unwrap();
    assert!(schema.is_valid(&v), "{:?}", schema.iter_errors(&v).next());
    assert_eq!(v["devices"][1]["hardware"]["gpu"]["ordinal"], 1);

    let md = cbtop::report::format::to_markdown(&all);
    let sections: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(sections, ["## cuda:0 GPU0", "## cuda:1 GPU1"], "{md}");
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("### cbtop report"))
            .count(),
        2
    );
    assert_eq!(
        md.lines().filter(|l| l.starts_with("# ")).count(),
        1,
        "{md}"
    );

    let csv = cbtop::report::format::to_csv(&all);
    let one = cbtop::report::format::to_csv(&r);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        format!("device,{}", one.lines().next().unwrap())
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2 * (one.lines().count() - 1));
    assert!(
        rows[0].starts_with("cuda:0 GPU0,") && rows.last().unwrap().starts_with("cuda:1 GPU1,")
    );
}

/// `--ctx` past the model's trained context (tiny-gemma3's 128) runs with one warning, as
/// llama.cpp's `-c` does; the same run without it is refused naming the model's context.
#[test]
fn ctx_past_the_trained_context_runs_with_a_warning() {
    let path = std::env::temp_dir().join(format!("cbtop-ctx-{}.gguf", std::process::id()));
    let shape = common::fixture("conformance/shapes/tiny-gemma3.toml");
    let o = cbtop(&[
        "synth",
        "--shape",
        shape.to_str().unwrap(),
        "--quant",
        "q8_0",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = path.display().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--headless",
            "--json",
            "--model-path",
            &m,
            "--device",
            "cpu",
        ];
        args.extend_from_slice(&["--threads", "2", "--timing", "off", "--prefill", "150"]);
        args.extend_from_slice(&["--tokens", "8", "--warmup", "2"]);
        args.extend_from_slice(extra);
        cbtop(&args)
    };
    let refused = run(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("model context 128"),
        "{}",
        stderr(&refused)
    );
    let o = run(&["--ctx", "200"]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning: --ctx 200 is past the 128 positions"),
        "{err}"
    );
    let r = json_report(&o);
    assert!(f(&r["throughput"]["tokens_per_sec"]) > 0.0);
}
