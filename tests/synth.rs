//! `cbtop synth`: same seed, same bytes; a different seed, different weights; every mix and
//! both architectures write files that pass `inspect` and run in the engine with finite
//! logits. A tiny shape (a TOML file, as `--shape` accepts) keeps each file small. Every mix
//! places the tensor types llama-quantize gives the same shape (tests/fixtures/quant-mixes/).

mod common;

use std::path::{Path, PathBuf};

use common::{cbtop, stderr};

use cbtop::profile::Profile;
use cbtop::synth::{self as synthesis, QuantMix};
use serde_json::Value;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-synth-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A small shape whose rows are multiples of 256, so every K-quant placement is exercised.
fn shape_file(arch: &str) -> PathBuf {
    let p = tmp(&format!("tiny-{arch}.toml"));
    std::fs::write(
        &p,
        format!(
            "[shape]\nname = \"tiny-{arch}\"\narch = \"{arch}\"\nn_layers = 3\nn_embd = 256\n\
             n_ff = 512\nn_heads = 4\nn_kv_heads = 2\nvocab = 2048\ncontext_length = 256\n\
             rope_base = 10000.0\nnorm_eps = 1e-5\ntied_embeddings = {}\n",
            arch == "qwen2"
        ),
    )
    .unwrap();
    p
}

fn synth(shape: &Path, quant: &str, seed: &str, out: &Path) {
    let o = cbtop(&[
        "synth",
        "--shape",
        shape.to_str().unwrap(),
        "--quant",
        quant,
        "--seed",
        seed,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn same_seed_same_bytes_and_files_load_and_run() {
    for arch in ["qwen2", "llama"] {
        let shape = shape_file(arch);
        for quant in QuantMix::ALL.map(|m| m.name()) {
            let (a, b, c) = (
                tmp(&format!("{arch}-{quant}-a.gguf")),
                tmp(&format!("{arch}-{quant}-b.gguf")),
                tmp(&format!("{arch}-{quant}-c.gguf")),
            );
            synth(&shape, quant, "7", &a);
            synth(&shape, quant, "7", &b);
            synth(&shape, quant, "8", &c);
            let (ba, bb, bc) = (
                std::fs::read(&a).unwrap(),
                std::fs::read(&b).unwrap(),
                std::fs::read(&c).unwrap(),
            );
            assert!(ba == bb, "{arch} {quant}: same seed, different bytes");
            assert_eq!(ba.len(), bc.len());
            assert!(ba != bc, "{arch} {quant}: the seed changes nothing");

            let o = cbtop(&["inspect", a.to_str().unwrap(), "--json"]);
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
            let info: Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(info["metadata"]["cbtop.synthetic"], true, "{arch} {quant}");

            let o = cbtop(&[
                "generate",
                "--model-path",
                a.to_str().unwrap(),
                "--prompt",
                "Hello world",
                "--max-tokens",
                "3",
                "--greedy",
                "--full-logits",
                "--json",
                "--threads",
                "2",
            ]);
            assert_eq!(o.status.code(), Some(0), "{arch} {quant}: {}", stderr(&o));
            let g: Value = serde_json::from_slice(&o.stdout).unwrap();
            let steps = g["steps"].as_array().unwrap();
            assert_eq!(steps.len(), 3);
            for s in steps {
                let logits = s["logits"].as_array().unwrap();
                assert_eq!(logits.len(), 2048);
                assert!(
                    logits
                        .iter()
                        .all(|x| x.as_f64().is_some_and(f64::is_finite)),
                    "{arch} {quant}: non-finite logits"
                );
            }
            for p in [a, b, c] {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

#[test]
fn real_shapes_have_their_published_sizes() {
    let o = cbtop(&[
        "synth",
        "--shape",
        "nope",
        "--quant",
        "q4_k_m",
        "-o",
        "/dev/null",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    let o = cbtop(&[
        "synth",
        "--shape",
        "qwen2.5-0.5b",
        "--quant",
        "q5_9",
        "-o",
        "/dev/null",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--quant"), "{}", stderr(&o));

    // the embedded default's shape: 30 layers of SmolLM2-135M, ~135M parameters
    let out = tmp("smollm2.gguf");
    synth(Path::new("smollm2-135m"), "q8_0", "0", &out);
    let o = cbtop(&["inspect", out.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let info: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(info["metadata"]["llama.block_count"], 30);
    assert_eq!(info["metadata"]["cbtop.synthetic"], true);
    let p = info["parameters"].as_u64().unwrap();
    assert!((130_000_000..140_000_000).contains(&p), "{p}");
    let _ = std::fs::remove_file(out);
}

/// llama-quantize's per-tensor types (tests/fixtures/quant-mixes/SHAPE.tsv: mix, tensor, type
/// per line, from an f16 synth file of the shape quantized to each mix) against the types
/// `synth` places for the same shape and mix: the same tensors, the same type each.
#[test]
fn every_mix_places_the_types_llama_quantize_chooses() {
    let dir = common::fixture("quant-mixes");
    for (shape_name, file) in [
        ("smollm2-135m", "smollm2-135m"),
        ("qwen2.5-0.5b", "qwen2.5-0.5b"),
        ("llama-3.2-1b", "llama-3.2-1b"),
        (
            dir.join("tiny-untied.toml").to_str().unwrap(),
            "tiny-untied",
        ),
    ] {
        let shape = Profile::shape(shape_name).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(dir.join(format!("{file}.tsv"))).unwrap();
        let mut seen = 0;
        // F32 is no llama-quantize mix of the tables: every weight stays F32.
        let f32s = synthesis::tensors(&shape, QuantMix::F32);
        assert!(f32s.iter().all(|t| t.ty == cbtop::quant::GgmlType::F32));
        for mix in QuantMix::ALL.into_iter().filter(|&m| m != QuantMix::F32) {
            let want: Vec<(&str, &str)> = text
                .lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split('\t').collect();
                    (f[0].eq_ignore_ascii_case(mix.name())).then_some((f[1], f[2]))
                })
                .collect();
            assert!(!want.is_empty(), "{file}: no rows for {}", mix.name());
            let mut got: Vec<(String, String)> = synthesis::tensors(&shape, mix)
                .into_iter()
                .map(|t| (t.name, t.ty.name().to_string()))
                .collect();
            let mut want: Vec<(String, String)> = want
                .into_iter()
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect();
            got.sort();
            want.sort();
            let diff: Vec<_> = want
                .iter()
                .zip(&got)
                .filter(|(w, g)| w != g)
                .take(5)
                .collect();
            assert_eq!(got.len(), want.len(), "{file} {}: tensor count", mix.name());
            assert!(
                diff.is_empty(),
                "{file} {}: (llama-quantize, synth) {diff:?}",
                mix.name()
            );
            seen += 1;
        }
        assert_eq!(seen, QuantMix::ALL.len() - 1);
    }
}
