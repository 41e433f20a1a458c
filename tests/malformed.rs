//! A corpus of hostile model files, generated here from one tiny valid model (F32, two
//! layers): truncation at every section boundary, huge counts and string lengths, overlapping
//! and out-of-file tensors, wrong and unknown tensor types, misaligned offsets, zero and huge
//! dimensions, inconsistent metadata, and NaN/Inf-filled weights.
//!
//! Each file goes through the real binary twice, `cbtop inspect FILE` and
//! `cbtop --headless --device cpu --model-path FILE`, under a time limit and an address-space
//! limit (RLIMIT_AS) far below what a count or length read from the file could ask for. A bad
//! file must give exit 2 and exactly one line naming the file and the field; never a panic, a
//! hang or a huge allocation. Files whose GGUF is well-formed but whose model is not pass
//! `inspect` (it only reads the format) and fail the run. NaN/Inf weights run, and the report
//! fails its `finite_logits` assertion (exit 1).

mod common;
mod gpu;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cbtop::gguf::{value_type as vt, GgufWriter, MetaValue};
use cbtop::quant::GgmlType;

const EMBD: u64 = 32;
const FF: u64 = 64;
const KV: u64 = 16;
const VOCAB: u64 = 320;
const LAYERS: usize = 2;
/// The children's address-space limit: the binary and its threads fit comfortably; any
/// allocation sized from a hostile count (terabytes) does not.
const ADDRESS_SPACE: u64 = 3 << 30;
const TIME_LIMIT: Duration = Duration::from_secs(30);

/// A model as data: metadata and F32 tensors, serialised with cbtop's own writer.
#[derive(Clone)]
struct Model {
    meta: Vec<(String, MetaValue)>,
    tensors: Vec<(String, Vec<u64>, Vec<f32>)>,
}

impl Model {
    fn tiny() -> Model {
        let v = cbtop::synth::vocab::build("llama", "tiny", VOCAB as usize);
        let strings = |items: Vec<String>| {
            MetaValue::Array(
                vt::STRING,
                items.into_iter().map(MetaValue::String).collect(),
            )
        };
        let u = |x: u64| MetaValue::U32(x as u32);
        let meta: Vec<(String, MetaValue)> = vec![
            (
                "general.architecture".into(),
                MetaValue::String("llama".into()),
            ),
            ("general.name".into(), MetaValue::String("hostile".into())),
            ("llama.context_length".into(), u(256)),
            ("llama.embedding_length".into(), u(EMBD)),
            ("llama.block_count".into(), u(LAYERS as u64)),
            ("llama.feed_forward_length".into(), u(FF)),
            ("llama.attention.head_count".into(), u(4)),
            ("llama.attention.head_count_kv".into(), u(2)),
            (
                "llama.attention.layer_norm_rms_epsilon".into(),
                MetaValue::F32(1e-5),
            ),
            ("llama.vocab_size".into(), u(VOCAB)),
            (
                "tokenizer.ggml.model".into(),
                MetaValue::String("gpt2".into()),
            ),
            (
                "tokenizer.ggml.pre".into(),
                MetaValue::String(v.pre.unwrap_or_default().into()),
            ),
            ("tokenizer.ggml.tokens".into(), strings(v.tokens)),
            (
                "tokenizer.ggml.token_type".into(),
                MetaValue::Array(vt::I32, v.types.into_iter().map(MetaValue::I32).collect()),
            ),
            ("tokenizer.ggml.merges".into(), strings(v.merges)),
            ("tokenizer.ggml.bos_token_id".into(), MetaValue::U32(v.bos)),
            ("tokenizer.ggml.eos_token_id".into(), MetaValue::U32(v.eos)),
            ("tokenizer.ggml.add_bos_token".into(), MetaValue::Bool(true)),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = |n: u64| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
                })
                .collect()
        };
        let ones = |n: u64| vec![1.0f32; n as usize];
        let mut tensors = vec![
            (
                "token_embd.weight".to_string(),
                vec![EMBD, VOCAB],
                random(EMBD * VOCAB),
            ),
            ("output_norm.weight".to_string(), vec![EMBD], ones(EMBD)),
            (
                "output.weight".to_string(),
                vec![EMBD, VOCAB],
                random(EMBD * VOCAB),
            ),
        ];
        for i in 0..LAYERS {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            tensors.push((n("attn_norm"), vec![EMBD], ones(EMBD)));
            tensors.push((n("attn_q"), vec![EMBD, EMBD], random(EMBD * EMBD)));
            tensors.push((n("attn_k"), vec![EMBD, KV], random(EMBD * KV)));
            tensors.push((n("attn_v"), vec![EMBD, KV], random(EMBD * KV)));
            tensors.push((n("attn_output"), vec![EMBD, EMBD], random(EMBD * EMBD)));
            tensors.push((n("ffn_norm"), vec![EMBD], ones(EMBD)));
            tensors.push((n("ffn_gate"), vec![EMBD, FF], random(EMBD * FF)));
            tensors.push((n("ffn_up"), vec![EMBD, FF], random(EMBD * FF)));
            tensors.push((n("ffn_down"), vec![FF, EMBD], random(EMBD * FF)));
        }
        Model { meta, tensors }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut w = GgufWriter::new();
        for (k, v) in &self.meta {
            w.meta(k, v.clone());
        }
        for (name, dims, data) in &self.tensors {
            let raw = data.iter().flat_map(|x| x.to_le_bytes()).collect();
            w.tensor(name, dims, GgmlType::F32, raw);
        }
        w.to_bytes()
    }

    fn set(mut self, key: &str, v: MetaValue) -> Model {
        match self.meta.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = v,
            None => self.meta.push((key.to_string(), v)),
        }
        self
    }

    fn without_meta(mut self, key: &str) -> Model {
        self.meta.retain(|(k, _)| k != key);
        self
    }

    fn without_tensor(mut self, name: &str) -> Model {
        self.tensors.retain(|(n, _, _)| n != name);
        self
    }

    fn fill(mut self, name: &str, x: f32) -> Model {
        let t = self.tensors.iter_mut().find(|(n, _, _)| n == name).unwrap();
        t.2.iter_mut().for_each(|v| *v = x);
        self
    }

    fn reshape(mut self, name: &str, dims: &[u64]) -> Model {
        let t = self.tensors.iter_mut().find(|(n, _, _)| n == name).unwrap();
        t.1 = dims.to_vec();
        t.2 = vec![0.0; dims.iter().product::<u64>() as usize];
        self
    }
}

/// Where things are in a serialised file (byte offsets), read back by a minimal walker.
struct Layout {
    /// End of magic, version, tensor count, metadata count.
    header: [usize; 4],
    /// Per metadata entry: key, start of the key, start of the value's type, end.
    kv: Vec<(String, usize, usize, usize)>,
    /// Per tensor entry: name, start, position of its type id, position of its offset, end.
    tensors: Vec<(String, usize, usize, usize, usize)>,
    data_offset: usize,
}

fn u32_at(b: &[u8], p: usize) -> u32 {
    u32::from_le_bytes(b[p..p + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], p: usize) -> u64 {
    u64::from_le_bytes(b[p..p + 8].try_into().unwrap())
}

fn put_u32(b: &mut [u8], p: usize, v: u32) {
    b[p..p + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], p: usize, v: u64) {
    b[p..p + 8].copy_from_slice(&v.to_le_bytes());
}

/// End of a value of type `ty` starting at `p`.
fn skip_value(b: &[u8], ty: u32, p: usize) -> usize {
    match ty {
        vt::U8 | vt::I8 | vt::BOOL => p + 1,
        vt::U16 | vt::I16 => p + 2,
        vt::U32 | vt::I32 | vt::F32 => p + 4,
        vt::U64 | vt::I64 | vt::F64 => p + 8,
        vt::STRING => p + 8 + u64_at(b, p) as usize,
        vt::ARRAY => {
            let ety = u32_at(b, p);
            let n = u64_at(b, p + 4);
            (0..n).fold(p + 12, |q, _| skip_value(b, ety, q))
        }
        t => panic!("unknown type {t}"),
    }
}

fn layout(b: &[u8]) -> Layout {
    let n_tensors = u64_at(b, 8) as usize;
    let n_kv = u64_at(b, 16) as usize;
    let mut p = 24;
    let mut kv = Vec::new();
    for _ in 0..n_kv {
        let start = p;
        let len = u64_at(b, p) as usize;
        let key = String::from_utf8(b[p + 8..p + 8 + len].to_vec()).unwrap();
        p += 8 + len;
        let ty_pos = p;
        p = skip_value(b, u32_at(b, p), p + 4);
        kv.push((key, start, ty_pos, p));
    }
    let mut tensors = Vec::new();
    for _ in 0..n_tensors {
        let start = p;
        let len = u64_at(b, p) as usize;
        let name = String::from_utf8(b[p + 8..p + 8 + len].to_vec()).unwrap();
        p += 8 + len;
        let n_dims = u32_at(b, p) as usize;
        p += 4 + 8 * n_dims;
        let ty_pos = p;
        let off_pos = p + 4;
        p += 12;
        tensors.push((name, start, ty_pos, off_pos, p));
    }
    Layout {
        header: [4, 8, 16, 24],
        kv,
        tensors,
        data_offset: p.div_ceil(32) * 32,
    }
}

/// What a case must produce.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// Not a valid GGUF: both commands exit 2 with one line containing one of the words.
    Bad(&'static [&'static str]),
    /// Valid GGUF, invalid model: `inspect` succeeds, the run exits 2 with such a line.
    BadModel(&'static [&'static str]),
    /// Runs; the report's `finite_logits` assertion fails (exit 1).
    NonFinite,
}

struct Outcome {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    took: Duration,
}

fn run_limited(args: &[&str]) -> Outcome {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cbtop"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().expect("spawn cbtop");
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            panic!("cbtop {args:?} hung (no exit within {TIME_LIMIT:?})");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code: status.code(),
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
        took: t0.elapsed(),
    }
}

fn one_line(case: &str, what: &str, o: &Outcome, file: &str, words: &[&str]) {
    let e = &o.stderr;
    assert_eq!(o.code, Some(2), "{case}: {what}: exit code; stderr: {e}");
    assert_eq!(e.lines().count(), 1, "{case}: {what}: one line: {e}");
    assert!(e.starts_with("cbtop: error: "), "{case}: {what}: {e}");
    assert!(e.contains(file), "{case}: {what}: names the file: {e}");
    assert!(
        words.iter().any(|w| e.contains(w)),
        "{case}: {what}: names the field ({words:?}): {e}"
    );
    assert!(!e.contains("internal error"), "{case}: {what}: {e}");
}

fn check(dir: &Path, case: &str, bytes: &[u8], expect: Expect) {
    let path = dir.join(format!("{case}.gguf"));
    std::fs::write(&path, bytes).unwrap();
    let p = path.to_str().unwrap();
    let inspect = run_limited(&["inspect", p]);
    let run = run_limited(
        &[
            common::HEADLESS_CPU,
            &["--tokens", "3", "--warmup", "1", "--model-path", p],
        ]
        .concat(),
    );
    for (what, o) in [("inspect", &inspect), ("headless", &run)] {
        assert!(
            !o.stderr.contains("internal error") && o.code.is_some(),
            "{case}: {what} crashed ({:?}): {}",
            o.code,
            o.stderr
        );
    }
    match expect {
        Expect::Bad(words) => {
            one_line(case, "inspect", &inspect, p, words);
            one_line(case, "headless", &run, p, words);
        }
        Expect::BadModel(words) => {
            assert_eq!(inspect.code, Some(0), "{case}: inspect: {}", inspect.stderr);
            one_line(case, "headless", &run, p, words);
        }
        Expect::NonFinite => {
            assert_eq!(inspect.code, Some(0), "{case}: inspect: {}", inspect.stderr);
            non_finite_failed(case, &run);
        }
    }
    println!(
        "{case}: inspect {:?} in {} ms, headless {:?} in {} ms",
        inspect.code,
        inspect.took.as_millis(),
        run.code,
        run.took.as_millis()
    );
}

/// The run failed its finite-logits assertion: exit 1, one line naming it, a FAIL report.
fn non_finite_failed(case: &str, run: &Outcome) {
    assert_eq!(run.code, Some(1), "{case}: run: {}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{case}: {}", run.stderr);
    assert!(
        run.stderr.contains("finite_logits"),
        "{case}: {}",
        run.stderr
    );
    let r: serde_json::Value = serde_json::from_slice(&run.stdout).expect("a report");
    assert_eq!(r["status"], "FAIL", "{case}");
    let a = r["assertions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "finite_logits")
        .expect("the finite_logits assertion");
    assert_eq!(a["pass"], false, "{case}: {a}");
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbtop-malformed-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_tiny_model_itself_runs() {
    let dir = scratch("valid");
    let bytes = Model::tiny().bytes();
    let p = dir.join("valid.gguf");
    std::fs::write(&p, &bytes).unwrap();
    let o = run_limited(
        &[
            common::HEADLESS_CPU,
            &[
                "--tokens",
                "3",
                "--warmup",
                "1",
                "--model-path",
                p.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["assertions"][0]["pass"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_at_every_section_boundary() {
    let dir = scratch("trunc");
    let full = Model::tiny().bytes();
    let l = layout(&full);
    let mut cuts: Vec<usize> = vec![0, 2];
    cuts.extend(l.header);
    for (_, start, ty_pos, end) in &l.kv {
        cuts.extend([start + 4, start + 8, *ty_pos, ty_pos + 4, ty_pos + 9, *end]);
    }
    for (_, start, ty_pos, off_pos, end) in &l.tensors {
        cuts.extend([start + 8, start + 12, *ty_pos, *off_pos, *end]);
    }
    cuts.extend([
        l.data_offset,
        l.data_offset + 1,
        full.len() - 4,
        full.len() - 1,
    ]);
    cuts.sort_unstable();
    cuts.dedup();
    cuts.retain(|&c| c < full.len());
    for c in &cuts {
        check(
            &dir,
            &format!("truncated-at-{c}"),
            &full[..*c],
            Expect::Bad(&["ends inside", "cannot fit", "length", "extends past"]),
        );
    }
    println!("{} truncations of a {} byte file", cuts.len(), full.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn huge_counts_and_lengths() {
    let dir = scratch("huge");
    let full = Model::tiny().bytes();
    let l = layout(&full);
    let kv = |k: &str| l.kv.iter().find(|e| e.0 == k).unwrap().clone();
    let tokens = kv("tokenizer.ggml.tokens");
    let mut cases: Vec<(&str, Vec<u8>, &[&str])> = Vec::new();
    let patch = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = full.clone();
        f(&mut b);
        b
    };
    cases.push((
        "tensor-count-max",
        patch(&|b| put_u64(b, 8, u64::MAX)),
        &["tensor count"],
    ));
    cases.push((
        "kv-count-2^40",
        patch(&|b| put_u64(b, 16, 1 << 40)),
        &["metadata key count"],
    ));
    cases.push((
        "key-length-max",
        patch(&|b| put_u64(b, 24, u64::MAX)),
        &["metadata key #0"],
    ));
    cases.push((
        "array-count-2^50",
        patch(&|b| put_u64(b, tokens.2 + 8, 1 << 50)),
        &["tokenizer.ggml.tokens"],
    ));
    cases.push((
        "array-count-plus-one",
        patch(&|b| put_u64(b, tokens.2 + 8, VOCAB + 1)),
        &["tokenizer.ggml.token_type", "metadata key"],
    ));
    cases.push((
        "string-length-huge",
        patch(&|b| put_u64(b, tokens.2 + 16, u64::MAX / 2)),
        &["tokenizer.ggml.tokens"],
    ));
    cases.push((
        "nested-array-type",
        patch(&|b| put_u32(b, tokens.2 + 4, vt::ARRAY)),
        &["tokenizer.ggml.tokens"],
    ));
    cases.push((
        "unknown-value-type",
        patch(&|b| put_u32(b, tokens.2, 99)),
        &["tokenizer.ggml.tokens"],
    ));
    let t0 = &l.tensors[0];
    cases.push((
        "tensor-name-length-huge",
        patch(&|b| put_u64(b, t0.1, 1 << 62)),
        &["tensor #0"],
    ));
    cases.push((
        "tensor-dims-count-1000",
        patch(&|b| {
            let p = t0.1 + 8 + t0.0.len();
            put_u32(b, p, 1000)
        }),
        &["token_embd.weight"],
    ));
    cases.push((
        "tensor-dims-count-0",
        patch(&|b| {
            let p = t0.1 + 8 + t0.0.len();
            put_u32(b, p, 0)
        }),
        &["token_embd.weight"],
    ));
    // Within the file's size, but 32 bytes of memory per byte of file once parsed: capped.
    let n = cbtop::gguf::MAX_META_VALUES + 1;
    let mut big = b"GGUF".to_vec();
    big.extend(3u32.to_le_bytes());
    big.extend(0u64.to_le_bytes());
    big.extend(1u64.to_le_bytes());
    big.extend(3u64.to_le_bytes());
    big.extend(b"big");
    big.extend(vt::ARRAY.to_le_bytes());
    big.extend(vt::U8.to_le_bytes());
    big.extend(n.to_le_bytes());
    big.resize(big.len() + n as usize, 7);
    cases.push(("u8-array-past-the-value-cap", big, &["\"big\""]));
    for (name, bytes, words) in cases {
        check(&dir, name, &bytes, Expect::Bad(words));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hostile_tensor_entries() {
    let dir = scratch("tensors");
    let full = Model::tiny().bytes();
    let l = layout(&full);
    let t = |name: &str| l.tensors.iter().find(|e| e.0 == name).unwrap().clone();
    let q = t("blk.0.attn_q.weight");
    let k = t("blk.0.attn_k.weight");
    let last = l.tensors.last().unwrap().clone();
    assert_eq!(last.0, "blk.1.ffn_down.weight");
    let dims_pos = |e: &(String, usize, usize, usize, usize)| e.1 + 8 + e.0.len() + 4;
    let patch = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = full.clone();
        f(&mut b);
        b
    };
    let q_off = u64_at(&full, q.3);
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "overlapping",
            patch(&|b| put_u64(b, k.3, q_off)),
            &["blk.0.attn_k.weight", "blk.0.attn_q.weight"],
        ),
        (
            "out-of-file",
            patch(&|b| put_u64(b, last.3, (full.len() as u64).div_ceil(32) * 32)),
            &["blk.1.ffn_down.weight"],
        ),
        (
            "offset-wraps",
            patch(&|b| put_u64(b, last.3, u64::MAX - 31)),
            &["blk.1.ffn_down.weight"],
        ),
        (
            "misaligned",
            patch(&|b| put_u64(b, q.3, q_off + 4)),
            &["blk.0.attn_q.weight"],
        ),
        (
            "unknown-type",
            patch(&|b| put_u32(b, q.2, 9999)),
            &["blk.0.attn_q.weight"],
        ),
        (
            "unsupported-type-iq2",
            patch(&|b| put_u32(b, q.2, 16)),
            &["blk.0.attn_q.weight"],
        ),
        (
            "type-block-mismatch",
            patch(&|b| put_u32(b, q.2, GgmlType::Q4_K.id())),
            &["blk.0.attn_q.weight"],
        ),
        (
            "zero-dimension",
            patch(&|b| put_u64(b, dims_pos(&q) + 8, 0)),
            &["blk.0.attn_q.weight"],
        ),
        (
            "huge-dimensions",
            patch(&|b| {
                put_u64(b, dims_pos(&q), 1 << 62);
                put_u64(b, dims_pos(&q) + 8, 1 << 62);
            }),
            &["blk.0.attn_q.weight"],
        ),
        (
            "huge-but-representable",
            patch(&|b| put_u64(b, dims_pos(&q) + 8, 1 << 32)),
            &["blk.0.attn_q.weight"],
        ),
        (
            "duplicate-name",
            patch(&|b| {
                let src = b[q.1 + 8..q.1 + 8 + q.0.len()].to_vec();
                // blk.0.attn_k.weight has a name of the same length: rename it to attn_q.
                b[k.1 + 8..k.1 + 8 + k.0.len()].copy_from_slice(&src);
            }),
            &["blk.0.attn_q.weight"],
        ),
    ];
    for (name, bytes, words) in cases {
        check(&dir, name, &bytes, Expect::Bad(words));
    }
    // Alignment in the metadata.
    let aligned = |v: MetaValue| Model::tiny().set("general.alignment", v).bytes();
    check(
        &dir,
        "alignment-3",
        &aligned(MetaValue::U32(3)),
        Expect::Bad(&["general.alignment"]),
    );
    check(
        &dir,
        "alignment-string",
        &aligned(MetaValue::String("32".into())),
        Expect::Bad(&["general.alignment"]),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn well_formed_files_of_impossible_models() {
    let dir = scratch("model");
    let m = Model::tiny;
    let cases: Vec<(&str, Model, &[&str])> = vec![
        (
            "no-architecture",
            m().without_meta("general.architecture"),
            &["general.architecture"],
        ),
        (
            "unsupported-architecture",
            m().set("general.architecture", MetaValue::String("gpt2".into())),
            &["gpt2", "cbtop runs llama, qwen2, qwen3, gemma3, phi3"],
        ),
        (
            "zero-heads",
            m().set("llama.attention.head_count", MetaValue::U32(0)),
            &["llama.attention.head_count"],
        ),
        (
            "zero-context",
            m().set("llama.context_length", MetaValue::U32(0)),
            &["llama.context_length"],
        ),
        (
            "huge-layer-count",
            m().set("llama.block_count", MetaValue::U32(1000)),
            &["blk.2"],
        ),
        (
            "layer-count-u64-max",
            m().set("llama.block_count", MetaValue::U64(u64::MAX)),
            &["llama.block_count"],
        ),
        (
            "huge-context",
            m().set("llama.context_length", MetaValue::U64(1 << 60)),
            &["llama.context_length"],
        ),
        (
            "heads-as-string",
            m().set("llama.attention.head_count", MetaValue::String("4".into())),
            &["llama.attention.head_count"],
        ),
        (
            "eps-nan",
            m().set(
                "llama.attention.layer_norm_rms_epsilon",
                MetaValue::F32(f32::NAN),
            ),
            &["layer_norm_rms_epsilon"],
        ),
        (
            "rope-base-inf",
            m().set("llama.rope.freq_base", MetaValue::F32(f32::INFINITY)),
            &["llama.rope.freq_base"],
        ),
        (
            "missing-tensor",
            m().without_tensor("blk.1.ffn_down.weight"),
            &["blk.1.ffn_down.weight"],
        ),
        (
            "wrong-shape",
            m().reshape("blk.0.attn_q.weight", &[EMBD, 2 * EMBD]),
            &["blk.0.attn_q.weight"],
        ),
        (
            "vocab-larger-than-embeddings",
            m().set("llama.vocab_size", MetaValue::U32(VOCAB as u32 + 64)),
            &["token_embd.weight"],
        ),
        (
            "tokenizer-larger-than-embeddings",
            m().set("llama.vocab_size", MetaValue::U32(256))
                .reshape("token_embd.weight", &[EMBD, 256])
                .reshape("output.weight", &[EMBD, 256]),
            &["tokenizer.ggml.tokens"],
        ),
        (
            "bos-out-of-range",
            m().set("tokenizer.ggml.bos_token_id", MetaValue::U32(1_000_000)),
            &["tokenizer.ggml.bos_token_id"],
        ),
        (
            "token-types-short",
            m().set(
                "tokenizer.ggml.token_type",
                MetaValue::Array(vt::I32, vec![MetaValue::I32(1); 3]),
            ),
            &["tokenizer.ggml.token_type"],
        ),
        (
            "tokens-not-strings",
            m().set(
                "tokenizer.ggml.tokens",
                MetaValue::Array(vt::U32, vec![MetaValue::U32(1); VOCAB as usize]),
            ),
            &["tokenizer.ggml.tokens"],
        ),
        (
            "no-tokens",
            m().without_meta("tokenizer.ggml.tokens"),
            &["tokenizer.ggml.tokens"],
        ),
        (
            "unknown-tokenizer",
            m().set(
                "tokenizer.ggml.model",
                MetaValue::String("wordpiece".into()),
            ),
            &["wordpiece"],
        ),
    ];
    for (name, model, words) in cases {
        check(&dir, name, &model.bytes(), Expect::BadModel(words));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Models whose weights hold NaN or infinities: their logits cannot all be finite.
fn non_finite_models() -> Vec<(&'static str, Model)> {
    let m = Model::tiny;
    vec![
        ("nan-output", m().fill("output.weight", f32::NAN)),
        (
            "inf-embeddings",
            m().fill("token_embd.weight", f32::INFINITY),
        ),
        ("nan-norm", m().fill("blk.1.ffn_norm.weight", f32::NAN)),
        (
            "neg-inf-ffn",
            m().fill("blk.0.ffn_down.weight", f32::NEG_INFINITY),
        ),
    ]
}

#[test]
fn nan_and_inf_weights_fail_the_finite_logits_assertion() {
    let dir = scratch("nan");
    for (name, model) in non_finite_models() {
        check(&dir, name, &model.bytes(), Expect::NonFinite);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same on the GPU, where the logits stay on the device and the argmax kernels count the
/// non-finite ones (no address-space limit here: a CUDA context reserves far more).
#[test]
fn nan_and_inf_weights_fail_the_finite_logits_assertion_on_the_gpu() {
    if gpu::gpu("nan_and_inf_weights_on_the_gpu").is_none() {
        return;
    }
    let dir = scratch("nan-gpu");
    for (name, model) in non_finite_models() {
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, model.bytes()).unwrap();
        let t0 = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_cbtop"))
            .args(["--headless", "--ci", "--json", "--device", "cuda"])
            .args(["--tokens", "3", "--warmup", "1", "--model-path"])
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .expect("spawn cbtop");
        let run = Outcome {
            code: o.status.code(),
            stdout: o.stdout,
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            took: t0.elapsed(),
        };
        non_finite_failed(name, &run);
        println!(
            "{name} on the GPU: exit {:?} in {} ms",
            run.code,
            run.took.as_millis()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
