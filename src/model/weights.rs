//! The weights table: every tensor a forward pass needs, looked up by llama.cpp's names,
//! checked against the configuration's shapes, and kept in its GGUF type (quantized weights are
//! never expanded; small vectors such as norms and biases are read into f32).

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
}

/// A 2-D weight matrix `[rows = out, cols = in]` stored in the file: `out[o] = row_o · x`.
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
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |s: &str, len| match f.tensor(&n(s)) {
                Some(_) => vector(f, &n(s), len).map(Some),
                None if cfg.arch == Arch::Qwen2 => Err(WeightsError::Missing(n(s))),
                None => Ok(None),
            };
            layers.push(LayerWeights {
                attn_norm: vector(f, &n("attn_norm.weight"), e)?,
                wq: mat(f, &n("attn_q.weight"), [e, q])?,
                wk: mat(f, &n("attn_k.weight"), [e, kv])?,
                wv: mat(f, &n("attn_v.weight"), [e, kv])?,
                bq: bias("attn_q.bias", q)?,
                bk: bias("attn_k.bias", kv)?,
                bv: bias("attn_v.bias", kv)?,
                wo: mat(f, &n("attn_output.weight"), [q, e])?,
                ffn_norm: vector(f, &n("ffn_norm.weight"), e)?,
                w_gate: mat(f, &n("ffn_gate.weight"), [e, ff])?,
                w_up: mat(f, &n("ffn_up.weight"), [e, ff])?,
                w_down: mat(f, &n("ffn_down.weight"), [ff, e])?,
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
