//! The order of checks (docs/DESIGN.md): arguments, then the model file, then the device. A bad
//! model is exactly one `cbtop: error:` line naming the file, exit 2, with no device probing
//! or fallback notice before it; the `--device auto` fallback is one `note:` line only when
//! the run goes ahead, and the report records it.

mod common;

use common::{cbtop, stderr};

/// One `cbtop: error:` line naming `file`, exit 2, nothing on stdout.
fn one_error_line(args: &[&str], names: &str) {
    let o = cbtop(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: exactly one line: {err}");
    assert!(err.starts_with("cbtop: error: "), "{err}");
    assert!(err.contains(names), "{args:?}: names {names}: {err}");
    assert!(
        !err.contains("note:") && !err.contains("running on"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "{args:?}: nothing on stdout");
}

#[test]
fn a_missing_model_is_one_line_before_any_device_work() {
    let missing = std::env::temp_dir().join("cbtop-no-such-model.gguf");
    let m = missing.to_str().unwrap();
    for device in ["auto", "cpu", "cuda", "cuda:7"] {
        one_error_line(&["--headless", "--model-path", m, "--device", device], m);
        // The live view checks in the same order (and never takes the terminal over).
        one_error_line(&["--model-path", m, "--device", device], m);
    }
}

#[test]
fn a_malformed_model_is_one_line_before_any_device_work() {
    let p = std::env::temp_dir().join(format!("cbtop-garbage-{}.gguf", std::process::id()));
    std::fs::write(&p, b"GGUF\x03\x00\x00\x00garbage").unwrap();
    let m = p.to_str().unwrap();
    for device in ["auto", "cuda"] {
        one_error_line(&["--headless", "--model-path", m, "--device", device], m);
    }
    let _ = std::fs::remove_file(&p);
}

#[test]
fn arguments_are_checked_before_the_model() {
    let o = cbtop(&[
        "--headless",
        "--model-path",
        "/no/such/model.gguf",
        "--tokens",
        "0",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--tokens"), "{err}");
}

#[test]
fn the_auto_fallback_is_one_note_and_in_the_report() {
    let m = common::fixture("conformance/models/conf-qwen2-Q4_K_M.gguf");
    let m = m.to_str().unwrap();
    let o = cbtop(&[
        "--headless",
        "--json",
        "--model-path",
        m,
        "--device",
        "auto",
        "--tokens",
        "2",
        "--warmup",
        "0",
        "--threads",
        "1",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON report");
    if r["hardware"]["backend"] == "cuda" {
        println!("a GPU is usable here: no fallback to check");
        assert!(r["hardware"]["note"].is_null());
        return;
    }
    assert_eq!(err.lines().count(), 1, "one note line: {err}");
    let line = err.lines().next().unwrap();
    assert!(
        line.starts_with("cbtop: note: running on the CPU: "),
        "{line}"
    );
    let note = r["hardware"]["note"].as_str().expect("hardware.note");
    assert_eq!(line.trim_start_matches("cbtop: note: "), note);
}
