//! The `cbtop` binary end to end: output layouts, exit codes and one-line errors.

mod common;

use std::process::Output;

use common::{cbtop, stderr as stderr_of};

fn conf(name: &str) -> String {
    common::fixture(&format!("conformance/models/{name}.gguf"))
        .to_string_lossy()
        .into_owned()
}

/// An error run: exit `code`, nothing on stdout, exactly one line on stderr containing `needle`.
fn assert_one_line_error(out: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{err:?} should mention {needle:?}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

#[test]
fn inspect_json_lists_metadata_and_tensors() {
    let out = cbtop(&["inspect", &conf("conf-qwen2-Q4_K_M"), "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], 3);
    assert_eq!(v["metadata"]["general.architecture"], "qwen2");
    assert_eq!(v["tensors"].as_array().unwrap().len(), 26);
    assert_eq!(v["tensor_types"]["Q6_K"], 3);
    assert_eq!(v["metadata"]["tokenizer.ggml.tokens"]["len"], 512);
}

#[test]
fn inspect_text_shows_the_tensor_table() {
    let out = cbtop(&["inspect", &conf("conf-llama-Q8_0")]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("blk.1.ffn_down.weight")
            && s.contains("Q8_0")
            && s.contains("llama.block_count")
    );
}

#[test]
fn malformed_and_missing_files_exit_2_with_one_line() {
    let dir = std::env::temp_dir().join(format!("cbtop-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.gguf");
    let mut bytes = std::fs::read(conf("conf-qwen2-Q4_0")).unwrap();
    bytes.truncate(5000);
    std::fs::write(&bad, &bytes).unwrap();
    let bad = bad.to_string_lossy().into_owned();
    assert_one_line_error(&cbtop(&["inspect", &bad]), 2, "bad.gguf");
    assert_one_line_error(
        &cbtop(&["generate", "--model-path", &bad, "--ids", "1"]),
        2,
        "bad.gguf",
    );
    assert_one_line_error(
        &cbtop(&["tokenize", "--model-path", &bad, "hi"]),
        2,
        "bad.gguf",
    );
    assert_one_line_error(
        &cbtop(&["inspect", "/no/such/model.gguf"]),
        2,
        "/no/such/model.gguf",
    );
    let text = dir.join("text.gguf");
    std::fs::write(&text, "hello").unwrap();
    assert_one_line_error(
        &cbtop(&["inspect", &text.to_string_lossy()]),
        2,
        "not a GGUF file",
    );
}

#[test]
fn bad_flags_exit_2() {
    let m = conf("conf-qwen2-Q8_0");
    assert_eq!(
        cbtop(&["generate", "--model-path", &m, "--bogus"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        cbtop(&["generate", "--model-path", &m]).status.code(),
        Some(2)
    );
    assert_one_line_error(
        &cbtop(&["generate", "--model-path", &m, "--ids", "1 x"]),
        2,
        "--ids",
    );
    assert_one_line_error(
        &cbtop(&["generate", "--model-path", &m, "--ids", "1 512"]),
        2,
        "512",
    );
    assert_one_line_error(
        &cbtop(&[
            "generate",
            "--model-path",
            &m,
            "--ids",
            "1",
            "--threads",
            "0",
        ]),
        2,
        "--threads",
    );
    assert_eq!(
        cbtop(&[
            "generate",
            "--model-path",
            &m,
            "--ids",
            "1",
            "--device",
            "tpu"
        ])
        .status
        .code(),
        Some(2)
    );
}

#[test]
fn bad_flag_values_are_one_line_naming_the_flag() {
    let m = conf("conf-qwen2-Q8_0");
    let runs: [&[&str]; 3] = [
        &[
            "generate",
            "--model-path",
            &m,
            "--ids",
            "1",
            "--numerics",
            "bogus",
        ],
        &["--headless", "--model-path", &m, "--numerics", "bogus"],
        // The live view: rejected before any terminal or device is touched.
        &["--model-path", &m, "--numerics", "bogus"],
    ];
    for args in runs {
        let o = cbtop(args);
        assert_one_line_error(&o, 2, "--numerics");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    assert_one_line_error(
        &cbtop(&[
            "generate",
            "--model-path",
            &m,
            "--ids",
            "1",
            "--device",
            "tpu",
        ]),
        2,
        "--device",
    );
    assert_one_line_error(
        &cbtop(&["generate", "--model-path", &m, "--bogus"]),
        2,
        "--bogus",
    );
    assert_one_line_error(&cbtop(&["generate", "--model-path", &m]), 2, "--prompt");
}

/// Why no GPU is usable here, or None when one is (then the GPU tests cover `--device cuda`).
fn no_gpu() -> Option<String> {
    cbtop::engine::cuda::probe().gpu(0).err()
}

#[test]
fn generate_on_cuda_without_a_gpu_is_a_runtime_error() {
    let Some(reason) = no_gpu() else {
        eprintln!("skipped: a GPU is usable here (tests/gpu_cli.rs runs generate on it)");
        return;
    };
    let m = conf("conf-qwen2-Q8_0");
    let o = cbtop(&[
        "generate",
        "--model-path",
        &m,
        "--ids",
        "1",
        "--device",
        "cuda",
        "--json",
    ]);
    assert_one_line_error(&o, 3, "--device cuda:0: no usable CUDA GPU");
    assert!(stderr_of(&o).contains(&reason), "{}", stderr_of(&o));
    assert!(o.stdout.is_empty());
}

#[test]
fn generate_on_auto_names_the_engine_it_ran_on() {
    let m = conf("conf-qwen2-Q8_0");
    let o = cbtop(&[
        "generate",
        "--model-path",
        &m,
        "--ids",
        "1 2 3",
        "--max-tokens",
        "2",
        "--greedy",
        "--json",
    ]);
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    match no_gpu() {
        // The fallback is said once on stderr; stdout stays the one JSON line.
        Some(reason) => {
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(
                err.starts_with("cbtop: note: running on the CPU: ") && err.contains(&reason),
                "{err}"
            );
            assert_eq!(v["engine"]["device"], "cpu");
            assert_eq!(v["engine"]["numerics"], "exact", "the CPU's default");
            assert_eq!(v["timing"]["source"], "cpu_timer");
        }
        None => {
            assert_eq!(v["engine"]["device"], "cuda:0");
            assert_eq!(v["engine"]["numerics"], "fast", "the default");
            assert_eq!(v["timing"]["source"], "host_sync");
        }
    }
    assert_eq!(v["generated_ids"].as_array().unwrap().len(), 2);
}

#[test]
fn generate_on_the_cpu_runs_the_numerics_asked() {
    let m = conf("conf-qwen2-Q8_0");
    let o = cbtop(&[
        "generate",
        "--model-path",
        &m,
        "--ids",
        "1 2 3",
        "--max-tokens",
        "1",
        "--json",
        "--device",
        "cpu",
        "--numerics",
        "fast",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert!(o.stderr.is_empty(), "no note on --device cpu");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["engine"]["device"], "cpu");
    assert_eq!(v["engine"]["numerics"], "fast");
}

#[test]
fn generate_json_has_the_fixture_layout_and_llama_cpp_tokens() {
    let name = "conf-llama-Q8_0";
    let reference = &common::jsonl(&common::fixture(&format!("conformance/ref/{name}.jsonl")))[0];
    let out = cbtop(&[
        "generate",
        "--model-path",
        &conf(name),
        "--ids",
        "1 5 9 200 300 17 42 499 3 256",
        "--max-tokens",
        "8",
        "--greedy",
        "--json",
        "--top-k-logits",
        "5",
        "--full-logits",
        "--ignore-eos",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.trim_end().lines().count(), 1, "one JSON line");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["prompt_ids"], reference["prompt_ids"]);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8);
    for (ours, theirs) in steps.iter().zip(reference["steps"].as_array().unwrap()) {
        assert_eq!(ours["top"].as_array().unwrap().len(), 5);
        assert_eq!(ours["logits"].as_array().unwrap().len(), 512);
        assert!(ours["piece_hex"].is_string() && ours["piece"].is_string());
        assert_eq!(ours["top"][0][0], theirs["top"][0][0]);
    }
    assert_eq!(v["generated_ids"], reference["generated_ids"]);
    assert!(v["generated_text"].is_string());
}

#[test]
fn tokenize_json_matches_llama_cpp_on_smollm2() {
    let model = common::smollm2();
    let case = &common::jsonl(&common::fixture("smollm2/tokenizer.jsonl"))[3];
    let out = cbtop(&[
        "tokenize",
        "--model-path",
        &model.to_string_lossy(),
        case["prompt"].as_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ids"], case["prompt_ids"]);
    assert_eq!(
        v["pieces"].as_array().unwrap().len(),
        v["ids"].as_array().unwrap().len()
    );
}

/// A reader that stops early (`cbtop tokenize ... | head -c 16`) ends cbtop quietly by SIGPIPE,
/// not with an internal error. The output (a long text's ids and pieces) is larger than a
/// pipe's buffer, so cbtop is still writing when the reader goes.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let text = "hello world, ".repeat(8000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cbtop"))
        .args([
            "tokenize",
            "--json",
            "--model-path",
            &conf("conf-qwen2-Q4_K_M"),
            &text,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's read end is closed here, long before cbtop has written everything.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("internal error"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {err}",
        out.status
    );
}

/// `generate --batch 3` with one prompt: three JSON lines, one per sequence, each with the
/// greedy tokens of the prompt run alone; several `--prompt` decode together; `--batch 0` is
/// refused by flag.
#[test]
fn generate_batch_prints_each_sequence_as_it_runs_alone() {
    let m = common::fixture("conformance/models/conf-qwen2-Q8_0.gguf")
        .display()
        .to_string();
    let base = [
        "generate",
        "--model-path",
        &m,
        "--device",
        "cpu",
        "--greedy",
        "--max-tokens",
        "5",
        "--json",
        "--ignore-eos",
    ];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let o = cbtop(&args);
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", stderr_of(&o));
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let alone = run(&["--ids", "1 7 9 30"]);
    let three = run(&["--ids", "1 7 9 30", "--batch", "3"]);
    assert_eq!(three.len(), 3);
    for (s, line) in three.iter().enumerate() {
        assert_eq!(line["sequence"].as_u64(), Some(s as u64));
        assert_eq!(
            line["generated_ids"], alone[0]["generated_ids"],
            "sequence {s}"
        );
    }
    let two = run(&["--prompt", "ab", "--prompt", "c d e"]);
    assert_eq!(two.len(), 2);
    assert_ne!(two[0]["prompt_ids"], two[1]["prompt_ids"]);
    // Every step's logits with --full-logits, as a single sequence prints them (the model's
    // vocabulary is 512).
    let full = run(&["--ids", "1 7 9 30", "--batch", "2", "--full-logits"]);
    for line in &full {
        let logits = line["steps"][0]["logits"].as_array().map(Vec::len);
        assert_eq!(logits, Some(512), "{}", line["sequence"]);
    }
    for (bad, flag) in [
        (&["--batch", "0"][..], "--batch"),
        (&["--batch", "2", "--prompt-logits"][..], "--prompt-logits"),
    ] {
        let mut args = vec![
            "generate",
            "--model-path",
            &m,
            "--device",
            "cpu",
            "--ids",
            "1",
        ];
        args.extend(bad);
        let o = cbtop(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(stderr_of(&o).contains(flag), "{}", stderr_of(&o));
    }
}
