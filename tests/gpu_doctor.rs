//! `cbtop doctor` and `--device` on any machine: doctor always exits 0 and, without a usable
//! GPU, says why in one line; `--device cuda` without one exits 3 with one line; `--device
//! auto` falls back to the CPU with one line on stderr (none with `--ci`).

mod common;

use std::process::{Command, Output};

use cbtop::engine::cuda::probe;

fn cbtop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cbtop"))
        .args(args)
        .output()
        .expect("run cbtop")
}

fn model() -> String {
    common::fixture("conformance/models/conf-qwen2-Q8_0.gguf")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn doctor_exits_0_and_explains_a_missing_gpu() {
    let o = cbtop(&["doctor"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("cuda driver:") && out.contains("nvrtc:") && out.contains("gpus:"));
    match probe().unusable {
        Some(reason) => {
            assert!(out.contains(&format!("no usable GPU: {reason}")), "{out}");
            eprintln!("doctor on this machine: {reason}");
        }
        None => assert!(out.contains("backend:      cuda"), "{out}"),
    }
}

#[test]
fn device_flags_without_a_gpu() {
    let Some(reason) = probe().unusable else {
        eprintln!("device_flags_without_a_gpu: skipped: this machine has a usable GPU");
        return;
    };
    let m = model();
    let base = [
        "--headless",
        "--model-path",
        &m,
        "--tokens",
        "2",
        "--warmup",
        "0",
    ];
    let cuda = cbtop(&[&base[..], &["--device", "cuda"]].concat());
    assert_eq!(cuda.status.code(), Some(3));
    let err = String::from_utf8_lossy(&cuda.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&reason), "{err}");
    assert!(cuda.stdout.is_empty());

    let auto = cbtop(&[&base[..], &["--device", "auto", "--json"]].concat());
    assert_eq!(auto.status.code(), Some(0));
    let err = String::from_utf8_lossy(&auto.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("running on the CPU") && err.contains(&reason),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&auto.stdout).unwrap();
    assert_eq!(report["hardware"]["backend"], "cpu");

    let quiet = cbtop(&[&base[..], &["--device", "auto", "--json", "--ci"]].concat());
    assert_eq!(quiet.status.code(), Some(0));
    assert!(quiet.stderr.is_empty());
}
