//! The checked-in fuzz corpus (`fuzz/corpus/<target>`, seeds plus the minimised corpus of the
//! fuzzing runs, see fuzz/README.md) replayed through the same entry points as the fuzz targets,
//! so every input that once found new code stays a regression test in CI without libFuzzer.
//! Inputs that crashed a target are added here as named cases once fixed.

mod common;

use std::path::{Path, PathBuf};

use cbtop::gguf::GgufFile;
use cbtop::model::Model;
use cbtop::profile::Profile;
use cbtop::report::compare::{compare, parse_report, to_text};
use cbtop::report::format;
use cbtop::report::gates::parse_baseline;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: empty corpus", dir.display());
    files
}

#[test]
fn gguf_reader_corpus() {
    let files = corpus("gguf_reader");
    let mut models = 0;
    for (p, bytes) in &files {
        let label = Path::new("fuzz.gguf");
        match GgufFile::from_bytes(label, bytes.clone()) {
            Ok(f) => {
                for t in &f.tensors {
                    assert_eq!(f.tensor_data(t).len() as u64, t.size, "{}", p.display());
                }
            }
            Err(e) => assert!(e.to_string().starts_with("fuzz.gguf: "), "{e}"),
        }
        match Model::from_bytes("fuzz.gguf", bytes.clone()) {
            Ok(_) => models += 1,
            Err(e) => assert!(e.to_string().starts_with("fuzz.gguf: "), "{e}"),
        }
    }
    println!("{} files, {models} load as models", files.len());
    assert!(models >= 2, "the seed models load");
}

#[test]
fn tokenizer_corpus() {
    // The fuzz target's first two tokenizers (the conformance fixtures); the input's text part
    // encoded with special tokens parsed, and its bytes decoded as ids.
    let toks: Vec<_> = ["conf-llama-Q4_K_S", "conf-qwen2-Q2_K"]
        .iter()
        .map(|n| {
            let p = common::fixture(&format!("conformance/models/{n}.gguf"));
            Model::load(&p).unwrap().tokenizer
        })
        .collect();
    let files = corpus("tokenizer");
    for (_, bytes) in &files {
        let Some((&head, rest)) = bytes.split_first() else {
            continue;
        };
        let tok = &toks[(head & 1) as usize];
        let text = String::from_utf8_lossy(rest);
        let ids = tok.encode_with(&text, head & 0x10 != 0, true);
        let n = tok.vocab_size() as u32;
        assert!(ids.iter().all(|&i| i < n));
        let raw: Vec<u32> = rest.iter().map(|&b| b as u32 * 613).collect();
        let _ = tok.decode(&raw);
    }
    println!("{} inputs", files.len());
}

#[test]
fn profile_toml_corpus() {
    for (_, bytes) in corpus("profile_toml") {
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        if let Err(e) = Profile::parse("fuzz.toml", text) {
            assert!(e.to_string().contains("fuzz.toml"), "{e}");
        }
    }
}

#[test]
fn report_reader_corpus() {
    let mut reports = 0;
    for (_, bytes) in corpus("report_reader") {
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        let path = Path::new("fuzz.json");
        match parse_report(path, text) {
            Ok(r) => {
                reports += 1;
                let _ = to_text(&compare(&r, &r));
                let _ = format::to_markdown(&r);
                let _ = format::to_csv(&r);
            }
            Err(e) => assert!(e.contains("fuzz.json"), "{e}"),
        }
        if let Err(e) = parse_baseline(path, text) {
            assert!(e.contains("fuzz.json"), "{e}");
        }
    }
    assert!(reports >= 1, "the seed report parses");
}
