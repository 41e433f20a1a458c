//! The weights table: every tensor a forward pass needs, looked up by llama.cpp's names,
//! checked against the configuration's shapes, and kept in its GGUF type (quantized weights are
//! never expanded; small vectors such as norms and biases are read into f32). Fused tensors
//! (phi3's `attn_qkv` and its gate-and-up `ffn_up`) are exposed as row-range views, so every
//! engine sees the same `wq`/`wk`/`wv`/`w_gate`/`w_up` whatever the file stores.

use std::sync::Arc;

use super::config::{Arch, Config};
use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::{self, GgmlType};

/// Errors building the weights table; each names the tensor.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WeightsError {
    #[error("tensor {0} is missing")]
    Missing(String),
    #[error("tensor {name} has shape {found:?}, expected {expected:?}")]
    WrongShape {
        name: String,
        found: Vec<u64>,
        expected: Vec<u64>,
    },
    #[error("tensor {name} is not supported ({why})")]
    Unsupported { name: String, why: &'static str },
}

/// A 2-D weight matrix `[rows = out, cols = in]` stored in the file: `out[o] = row_o · x`.
/// A view of some rows of a fused tensor has its own `start`/`len` and the fused tensor's
/// `name` (GGUF rows are contiguous, so a row range is a byte range).
#[derive(Clone, Debug)]
pub struct Mat {
    pub name: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    start: usize,
    len: usize,
}

impl Mat {
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.len / self.rows
    }

    /// Where the matrix's bytes start in the file's tensor data (one per stored tensor, so a
    /// key for anything kept per matrix).
    pub fn offset(&self) -> usize {
        self.start
    }

    /// Rows `r0..r0 + n` as a matrix of their own (same name and type).
    fn rows_view(&self, r0: usize, n: usize) -> Mat {
        let rb = self.row_bytes();
        Mat {
            rows: n,
            start: self.start + r0 * rb,
            len: n * rb,
            ..self.clone()
        }
    }
}

/// Weights of one transformer block.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: Mat,
    pub wk: Mat,
    pub wv: Mat,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub wo: Mat,
    pub ffn_norm: Vec<f32>,
    pub w_gate: Mat,
    pub w_up: Mat,
    pub w_down: Mat,
    /// Per-head RMSNorm weights of Q and K (`head_dim` each) where `Config::qk_norm`.
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// RMSNorm weights of the attention and FFN outputs (`n_embd`) where `Config::post_norms`.
    pub post_attn_norm: Option<Vec<f32>>,
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// All weights of a model, borrowing tensor data from the mapped file.
pub struct Weights {
    file: Arc<GgufFile>,
    pub token_embd: Mat,
    pub output_norm: Vec<f32>,
    /// The output projection; `token_embd` again when the model ties them.
    pub output: Mat,
    pub tied_output: bool,
    pub layers: Vec<LayerWeights>,
}

impl Weights {
    /// Look up and shape-check every tensor the configuration calls for.
    pub fn load(file: Arc<GgufFile>, cfg: &Config) -> Result<Weights, WeightsError> {
        let (e, v, q, kv, ff) = (
            cfg.n_embd as u64,
            cfg.vocab_size as u64,
            cfg.q_dim() as u64,
            cfg.kv_dim() as u64,
            cfg.n_ff as u64,
        );
        let f = &*file;
        let token_embd = mat(f, "token_embd.weight", [e, v])?;
        let (output, tied_output) = match f.tensor("output.weight") {
            Some(_) => (mat(f, "output.weight", [e, v])?, false),
            None => (token_embd.clone(), true),
        };
        let output_norm = vector(f, "output_norm.weight", e)?;
        // Phi-3's 128k files carry LongRoPE frequency factors (and an attention factor):
        // refused by name rather than run with the wrong rotation.
        for name in ["rope_factors_long.weight", "rope_factors_short.weight"] {
            if f.tensor(name).is_some() {
                return Err(WeightsError::Unsupported {
                    name: name.to_string(),
                    why: "cbtop does not run LongRoPE frequency factors",
                });
            }
        }
        let hd = cfg.head_dim as u64;
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |s: &str, len| match f.tensor(&n(s)) {
                Some(_) => vector(f, &n(s), len).map(Some),
                None if cfg.arch == Arch::Qwen2 => Err(WeightsError::Missing(n(s))),
                None => Ok(None),
            };
            let norm = |on: bool, s: &str, len| match on {
                true => vector(f, &n(s), len).map(Some),
                false => Ok(None),
            };
            // Q, K and V: three tensors, or llama.cpp's fused `attn_qkv` (Q, K, V rows in
            // that order, its bias split the same way).
            let (wq, wk, wv, bq, bk, bv) = if f.tensor(&n("attn_q.weight")).is_none()
                && f.tensor(&n("attn_qkv.weight")).is_some()
            {
                let (qr, kr) = (q as usize, kv as usize);
                let qkv = mat(f, &n("attn_qkv.weight"), [e, q + 2 * kv])?;
                let b = match f.tensor(&n("attn_qkv.bias")) {
                    Some(_) => Some(vector(f, &n("attn_qkv.bias"), q + 2 * kv)?),
                    None => None,
                };
                let part = |r0: usize, len: usize| b.as_ref().map(|b| b[r0..r0 + len].to_vec());
                (
                    qkv.rows_view(0, qr),
                    qkv.rows_view(qr, kr),
                    qkv.rows_view(qr + kr, kr),
                    part(0, qr),
                    part(qr, kr),
                    part(qr + kr, kr),
                )
            } else {
                (
                    mat(f, &n("attn_q.weight"), [e, q])?,
                    mat(f, &n("attn_k.weight"), [e, kv])?,
                    mat(f, &n("attn_v.weight"), [e, kv])?,
                    bias("attn_q.bias", q)?,
                    bias("attn_k.bias", kv)?,
                    bias("attn_v.bias", kv)?,
                )
            };
            // Gate and up: two tensors, or phi3's `ffn_up` of 2 n_ff rows whose first half is
            // the gate (ggml_swiglu activates the first half of each row).
            let (w_gate, w_up) = if cfg.arch == Arch::Phi3 {
                let up = mat(f, &n("ffn_up.weight"), [e, 2 * ff])?;
                (
                    up.rows_view(0, ff as usize),
                    up.rows_view(ff as usize, ff as usize),
                )
            } else {
                (
                    mat(f, &n("ffn_gate.weight"), [e, ff])?,
                    mat(f, &n("ffn_up.weight"), [e, ff])?,
                )
            };
            layers.push(LayerWeights {
                attn_norm: vector(f, &n("attn_norm.weight"), e)?,
                wq,
                wk,
                wv,
                bq,
                bk,
                bv,
                wo: mat(f, &n("attn_output.weight"), [q, e])?,
                ffn_norm: vector(f, &n("ffn_norm.weight"), e)?,
                w_gate,
                w_up,
                w_down: mat(f, &n("ffn_down.weight"), [ff, e])?,
                q_norm: norm(cfg.qk_norm, "attn_q_norm.weight", hd)?,
                k_norm: norm(cfg.qk_norm, "attn_k_norm.weight", hd)?,
                post_attn_norm: norm(cfg.post_norms, "post_attention_norm.weight", e)?,
                post_ffn_norm: norm(cfg.post_norms, "post_ffw_norm.weight", e)?,
            });
        }
        Ok(Weights {
            file,
            token_embd,
            output_norm,
            output,
            tied_output,
            layers,
        })
    }

    /// The stored bytes of `m`.
    pub fn bytes(&self, m: &Mat) -> &[u8] {
        &self.file.tensor_data_raw()[m.start..m.start + m.len]
    }

    /// Row `r` of `m` as stored.
    pub fn row(&self, m: &Mat, r: usize) -> &[u8] {
        let rb = m.row_bytes();
        &self.bytes(m)[r * rb..(r + 1) * rb]
    }

    /// The file these weights live in.
    pub fn file(&self) -> &GgufFile {
        &self.file
    }
}

fn find<'a>(f: &'a GgufFile, name: &str) -> Result<&'a TensorInfo, WeightsError> {
    f.tensor(name)
        .ok_or_else(|| WeightsError::Missing(name.to_string()))
}

fn mat(f: &GgufFile, name: &str, dims: [u64; 2]) -> Result<Mat, WeightsError> {
    let t = find(f, name)?;
    if t.dims != dims {
        return Err(WeightsError::WrongShape {
            name: name.to_string(),
            found: t.dims.clone(),
            expected: dims.to_vec(),
        });
    }
    Ok(Mat {
        name: name.to_string(),
        ty: t.ty,
        rows: dims[1] as usize,
        cols: dims[0] as usize,
        start: (f.data_offset + t.offset) as usize,
        len: t.size as usize,
    })
}

fn vector(f: &GgufFile, name: &str, len: u64) -> Result<Vec<f32>, WeightsError> {
    let t = find(f, name)?;
    if t.dims != [len] {
        return Err(WeightsError::WrongShape {
            name: name.to_string(),
            found: t.dims.clone(),
            expected: vec![len],
        });
    }
    let mut out = vec![0f32; len as usize];
    quant::dequantize_row(t.ty, f.tensor_data(t), &mut out);
    Ok(out)
}

/// `blk.3.attn_q.weight` of type Q4_K as `attn_q.weight Q4_K`: the tensor every layer has,
/// with its type (how the drill-down names what a kernel read).
pub fn tensor_label(name: &str, ty: GgmlType) -> String {
    let short = match name.strip_prefix("blk.").and_then(|r| r.split_once('.')) {
        Some((layer, rest)) if layer.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => name,
    };
    format!("{short} {}", ty.name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{GgufWriter, MetaValue};

    /// A one-layer phi3 file (n_embd 8, 2 heads of 4, 1 KV head, n_ff 4, vocab 4) in F32,
    /// each value its row's index, with `extra` tensors.
    fn phi3(extra: &[&str]) -> Result<Weights, WeightsError> {
        let mut w = GgufWriter::new();
        let k = |s: &str| format!("phi3.{s}");
        w.meta("general.architecture", MetaValue::String("phi3".into()))
            .meta(&k("block_count"), MetaValue::U32(1))
            .meta(&k("embedding_length"), MetaValue::U32(8))
            .meta(&k("feed_forward_length"), MetaValue::U32(4))
            .meta(&k("attention.head_count"), MetaValue::U32(2))
            .meta(&k("attention.head_count_kv"), MetaValue::U32(1))
            .meta(&k("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-5))
            .meta(&k("vocab_size"), MetaValue::U32(4));
        let mut t = |name: &str, dims: &[u64]| {
            let cols = dims[0] as usize;
            let rows = dims.get(1).copied().unwrap_or(1) as usize;
            let data: Vec<u8> = (0..rows * cols)
                .flat_map(|i| ((i / cols) as f32).to_le_bytes())
                .collect();
            w.tensor(name, dims, GgmlType::F32, data);
        };
        t("token_embd.weight", &[8, 4]);
        t("output_norm.weight", &[8]);
        t("blk.0.attn_norm.weight", &[8]);
        t("blk.0.attn_qkv.weight", &[8, 16]);
        t("blk.0.attn_output.weight", &[8, 8]);
        t("blk.0.ffn_norm.weight", &[8]);
        t("blk.0.ffn_up.weight", &[8, 8]);
        t("blk.0.ffn_down.weight", &[4, 8]);
        for name in extra {
            t(name, &[2]);
        }
        let file = GgufFile::from_bytes(std::path::Path::new("p.gguf"), w.to_bytes()).unwrap();
        let cfg = Config::from_gguf(&file).unwrap();
        Weights::load(Arc::new(file), &cfg)
    }

    #[test]
    fn phi3_fused_tensors_are_row_views() {
        let w = phi3(&[]).unwrap();
        let l = &w.layers[0];
        let first = |m: &Mat| f32::from_le_bytes(w.row(m, 0)[..4].try_into().unwrap());
        // Q rows 0..8, K 8..12, V 12..16 of attn_qkv; gate rows 0..4 and up 4..8 of ffn_up.
        for (m, rows, row0) in [
            (&l.wq, 8, 0.0),
            (&l.wk, 4, 8.0),
            (&l.wv, 4, 12.0),
            (&l.w_gate, 4, 0.0),
            (&l.w_up, 4, 4.0),
        ] {
            assert_eq!((m.rows, m.cols), (rows, 8), "{}", m.name);
            assert_eq!(w.bytes(m).len(), rows * 8 * 4, "{}", m.name);
            assert_eq!(first(m), row0, "{}", m.name);
        }
        assert_eq!(l.wk.name, "blk.0.attn_qkv.weight");
        assert_eq!(l.w_up.name, "blk.0.ffn_up.weight");
        assert!(l.bq.is_none() && l.q_norm.is_none() && l.post_ffn_norm.is_none());
    }

    #[test]
    fn longrope_factors_are_refused_by_name() {
        let e = phi3(&["rope_factors_long.weight"]).err().unwrap();
        assert_eq!(
            e.to_string(),
            "tensor rope_factors_long.weight is not supported (cbtop does not run LongRoPE \
             frequency factors)"
        );
    }

    #[test]
    fn a_layer_tensor_is_named_without_its_layer() {
        assert_eq!(
            tensor_label("blk.12.attn_q.weight", GgmlType::Q4_K),
            "attn_q.weight Q4_K"
        );
        assert_eq!(
            tensor_label("output.weight", GgmlType::Q6_K),
            "output.weight Q6_K"
        );
        assert_eq!(
            tensor_label("blk.x.weight", GgmlType::F16),
            "blk.x.weight F16"
        );
    }
}
