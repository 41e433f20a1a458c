//! Shared helpers for the integration tests: fixture paths and the real test model.
#![allow(dead_code)]

pub mod batch;
pub mod http;

use std::path::PathBuf;
use std::process::{Command, Output};

/// Run the `cbtop` binary built for these tests.
/// A quiet headless JSON run on one CPU thread: the flags the CLI tests share.
pub const HEADLESS_CPU: &[&str] = &[
    "--headless",
    "--ci",
    "--json",
    "--device",
    "cpu",
    "--threads",
    "1",
];

pub fn cbtop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cbtop"))
        .args(args)
        .output()
        .expect("run cbtop")
}

/// A run's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `tests/fixtures/...`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// The SmolLM2-135M-Instruct Q4_1 file fetched by `scripts/fetch-test-model.sh`: `$CBTOP_SMOLLM2`,
/// else `$HOME/.cache/cbtop/SmolLM2-135M-Instruct.Q4_1.gguf`. Panics with instructions if absent.
pub fn smollm2() -> PathBuf {
    let p = std::env::var_os("CBTOP_SMOLLM2")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/cbtop/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    assert!(
        p.is_file(),
        "the test model {} is missing: run the README's test command (scripts/test.sh), which fetches it",
        p.display()
    );
    p
}

/// Parse a JSON-lines file.
pub fn jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("fixture line is JSON"))
        .collect()
}

/// A JSON array of numbers as Vec<f32>.
pub fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

/// A JSON array of integers as Vec<u32>.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

/// The bit patterns of `v`, to compare two vectors of floats bit for bit (NaNs included).
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The largest |a[i] - b[i]| (the vectors must be as long).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "logit vector lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The conformance models' names, sorted: the committed models
/// (`tests/fixtures/conformance/models`, without `.gguf`) and the synthesized ones
/// (`synth.tsv`).
pub fn conformance_names() -> Vec<String> {
    let mut names = committed_conformance_names();
    names.extend(synth_cases().into_iter().map(|c| c.name));
    names.sort();
    names
}

/// One synthesized conformance model (`tests/fixtures/conformance/synth.tsv`, written by
/// scripts/arch-fixtures.sh): `cbtop synth` of a tiny shape in a mix with a seed, and the
/// sha256 of the file llama.cpp's reference was made from.
pub struct SynthCase {
    pub name: String,
    pub shape: String,
    pub mix: String,
    pub seed: u64,
    pub sha256: String,
}

pub fn synth_cases() -> Vec<SynthCase> {
    let path = fixture("conformance/synth.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "{}: {l:?}", path.display());
            SynthCase {
                name: f[0].to_string(),
                shape: f[1].to_string(),
                mix: f[2].to_string(),
                seed: f[3].parse().expect("a seed"),
                sha256: f[4].to_string(),
            }
        })
        .collect()
}

/// The synthesized model `case`, made in memory; panics unless its bytes have the sha256
/// the reference was made from.
pub fn synth_model(case: &SynthCase) -> cbtop::model::Model {
    use sha2::{Digest, Sha256};
    let shape_file = fixture(&format!("conformance/shapes/{}.toml", case.shape));
    let shape = cbtop::profile::Profile::shape(shape_file.to_str().unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    let mix = cbtop::synth::QuantMix::from_name(&case.mix).expect("a known mix");
    let bytes = cbtop::synth::build(&shape, mix, case.seed);
    let sum: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        sum, case.sha256,
        "{}: synth made other bytes than the reference's model (scripts/arch-fixtures.sh \
         regenerates both)",
        case.name
    );
    cbtop::model::Model::from_bytes(&format!("{}.gguf", case.name), bytes)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The committed conformance models (`tests/fixtures/conformance/models`), sorted.
pub fn committed_conformance_names() -> Vec<String> {
    let dir = fixture("conformance/models");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let n = e
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            n.trim_end_matches(".gguf").to_string()
        })
        .collect();
    names.sort();
    names
}

/// llama.cpp's own CUDA-vs-CPU spread on a case the GPU tests compare under fast numerics
/// (`tests/fixtures/conformance/llama-cuda-spread.tsv`, measured by bench/cuda-spread.py):
/// max |logit difference| or its share of the CPU row's range, as the case's test measures;
/// None for a case not measured.
pub fn llama_cuda_spread(case: &str) -> Option<f32> {
    let path = fixture("conformance/llama-cuda-spread.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut f = l.split('\t');
        (f.next() == Some(case)).then(|| f.nth(1).and_then(|v| v.parse().ok()))?
    })
}

/// The bound fast numerics are held to on `case`: the test's own `bound`, or llama.cpp's own
/// CUDA-vs-CPU spread on the same case where that is wider (`fast` may reorder sums as much
/// as llama.cpp's CUDA build does).
pub fn fast_bound(case: &str, bound: f32) -> f32 {
    llama_cuda_spread(case).map_or(bound, |s| bound.max(s))
}

/// One conformance model (`tests/fixtures/conformance`): the model, llama.cpp's reference
/// record, and the max |logit difference| allowed (0.005 for float types, 0.05 for quantized).
pub fn conformance_case(
    name: &str,
) -> (std::sync::Arc<cbtop::model::Model>, serde_json::Value, f32) {
    let model = match synth_cases().into_iter().find(|c| c.name == name) {
        Some(case) => synth_model(&case),
        None => {
            cbtop::model::Model::load(&fixture(&format!("conformance/models/{name}.gguf"))).unwrap()
        }
    };
    let reference = jsonl(&fixture(&format!("conformance/ref/{name}.jsonl")))
        .into_iter()
        .next()
        .expect("a reference record");
    let bound = if ["F32", "F16", "BF16"].iter().any(|t| name.ends_with(t)) {
        0.005
    } else {
        0.05
    };
    (std::sync::Arc::new(model), reference, bound)
}
