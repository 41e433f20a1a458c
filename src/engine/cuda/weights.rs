//! The model's weights on the device: every matrix uploaded once in its GGUF type (the
//! product kernels read the blocks as the file stores them), norms and biases as f32, and
//! the names the launch plan uses to pick a matrix or a norm.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DriverError};

use super::error::device_error;
use crate::engine::cpu::geglu::gelu_table;
use crate::engine::error::EngineError;
use crate::model::config::FfnAct;
use crate::model::Model;
use crate::quant::GgmlType;

/// Zero bytes after every matrix on the device: the fast products read weight fields as the
/// aligned 32-bit words around them (kernels/matvec_fast.cu `load_words`), up to 4 bytes past
/// a matrix's last block.
pub(super) const MAT_PADDING: usize = 16;

/// A weight matrix on the device, in its GGUF type (`data` holds `rows × row_bytes` bytes and
/// `MAT_PADDING` zeros).
pub(super) struct GMat {
    pub(super) ty: GgmlType,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) row_bytes: usize,
    pub(super) data: CudaSlice<u8>,
    /// The tensor's name without its layer, and its type (`attn_q.weight Q4_K`): what the
    /// launch log says a product kernel read.
    pub(super) label: String,
}

/// One transformer layer's weights on the device.
pub(super) struct GLayer {
    pub(super) attn_norm: CudaSlice<f32>,
    pub(super) wq: GMat,
    pub(super) wk: GMat,
    pub(super) wv: GMat,
    pub(super) bq: Option<CudaSlice<f32>>,
    pub(super) bk: Option<CudaSlice<f32>>,
    pub(super) bv: Option<CudaSlice<f32>>,
    pub(super) wo: GMat,
    pub(super) ffn_norm: CudaSlice<f32>,
    pub(super) w_gate: GMat,
    pub(super) w_up: GMat,
    pub(super) w_down: GMat,
    /// Per-head norms of Q and K (qwen3, gemma3), head_dim values each.
    pub(super) q_norm: Option<CudaSlice<f32>>,
    pub(super) k_norm: Option<CudaSlice<f32>>,
    /// Norms of the attention and FFN outputs before their residual adds (gemma3).
    pub(super) post_attn_norm: Option<CudaSlice<f32>>,
    pub(super) post_ffn_norm: Option<CudaSlice<f32>>,
}

/// Every weight of the model on the device.
pub(super) struct GWeights {
    pub(super) token_embd: GMat,
    /// `None` when the output head is tied to the embedding.
    pub(super) output: Option<GMat>,
    pub(super) output_norm: CudaSlice<f32>,
    pub(super) layers: Vec<GLayer>,
    pub(super) bytes: usize,
    /// Values (rows x cols) of the largest matrix: the tensor-core products' weight scratch
    /// is sized from it.
    pub(super) largest: usize,
    /// GeGLU models: the CPU's f16 GELU table, 65536 entries (kernels/geglu.cu).
    pub(super) gelu: Option<CudaSlice<u16>>,
}

impl GWeights {
    /// Upload every weight of `model` on stream `s`.
    pub(super) fn upload(s: &Arc<CudaStream>, model: &Model) -> Result<GWeights, EngineError> {
        let wt = &model.weights;
        let mut layers = Vec::with_capacity(wt.layers.len());
        let (mut bytes, mut largest) = (0usize, 0usize);
        // Optional vectors: biases and the norms only some architectures have.
        let bias = |b: &Option<Vec<f32>>| b.as_ref().map(|v| upload_vec(s, v)).transpose();
        for lw in &wt.layers {
            let l = GLayer {
                attn_norm: upload_vec(s, &lw.attn_norm)?,
                wq: upload_mat(s, wt, &lw.wq)?,
                wk: upload_mat(s, wt, &lw.wk)?,
                wv: upload_mat(s, wt, &lw.wv)?,
                bq: bias(&lw.bq)?,
                bk: bias(&lw.bk)?,
                bv: bias(&lw.bv)?,
                wo: upload_mat(s, wt, &lw.wo)?,
                ffn_norm: upload_vec(s, &lw.ffn_norm)?,
                w_gate: upload_mat(s, wt, &lw.w_gate)?,
                w_up: upload_mat(s, wt, &lw.w_up)?,
                w_down: upload_mat(s, wt, &lw.w_down)?,
                q_norm: bias(&lw.q_norm)?,
                k_norm: bias(&lw.k_norm)?,
                post_attn_norm: bias(&lw.post_attn_norm)?,
                post_ffn_norm: bias(&lw.post_ffn_norm)?,
            };
            for m in [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down] {
                bytes += m.bytes();
                largest = largest.max(m.rows * m.cols);
            }
            layers.push(l);
        }
        let token_embd = upload_mat(s, wt, &wt.token_embd)?;
        bytes += token_embd.bytes();
        let output = if wt.tied_output {
            // The embedding is the output head too.
            largest = largest.max(token_embd.rows * token_embd.cols);
            None
        } else {
            let o = upload_mat(s, wt, &wt.output)?;
            bytes += o.bytes();
            largest = largest.max(o.rows * o.cols);
            Some(o)
        };
        Ok(GWeights {
            token_embd,
            output,
            output_norm: upload_vec(s, &wt.output_norm)?,
            layers,
            bytes,
            largest,
            gelu: match model.config.ffn_act {
                FfnAct::GeluGlu => Some(
                    s.clone_htod(&gelu_table()[..])
                        .map_err(|e| device_error("uploading the GELU table", e))?,
                ),
                FfnAct::SiluGlu => None,
            },
        })
    }
}

impl GMat {
    /// The matrix's own bytes (without the padding).
    pub(super) fn bytes(&self) -> usize {
        self.rows * self.row_bytes
    }
}

/// Matrix `m` of `w`, its bytes as the file stores them, then `MAT_PADDING` zeros.
fn upload_mat(
    s: &Arc<CudaStream>,
    w: &crate::model::Weights,
    m: &crate::model::weights::Mat,
) -> Result<GMat, EngineError> {
    Ok(GMat {
        ty: m.ty,
        rows: m.rows,
        cols: m.cols,
        row_bytes: m.row_bytes(),
        data: upload_padded(s, w.bytes(m))
            .map_err(|e| device_error(&format!("uploading {}", m.name), e))?,
        label: crate::model::weights::tensor_label(&m.name, m.ty),
    })
}

/// `bytes` on the device followed by `MAT_PADDING` zeros (how every matrix is uploaded).
pub(super) fn upload_padded(
    s: &Arc<CudaStream>,
    bytes: &[u8],
) -> Result<CudaSlice<u8>, DriverError> {
    let mut data = s.alloc_zeros::<u8>(bytes.len() + MAT_PADDING)?;
    s.memcpy_htod(bytes, &mut data.slice_mut(0..bytes.len()))?;
    Ok(data)
}

/// A norm or bias vector.
pub(super) fn upload_vec(s: &Arc<CudaStream>, v: &[f32]) -> Result<CudaSlice<f32>, EngineError> {
    s.clone_htod(v)
        .map_err(|e| device_error("uploading a weight vector", e))
}

/// The device matrix `m` names (the output head falls back to the embedding when tied).
pub(super) fn mat(w: &GWeights, m: Mat) -> &GMat {
    match m {
        Mat::Q(l) => &w.layers[l].wq,
        Mat::K(l) => &w.layers[l].wk,
        Mat::V(l) => &w.layers[l].wv,
        Mat::O(l) => &w.layers[l].wo,
        Mat::Gate(l) => &w.layers[l].w_gate,
        Mat::Up(l) => &w.layers[l].w_up,
        Mat::Down(l) => &w.layers[l].w_down,
        Mat::Output => w.output.as_ref().unwrap_or(&w.token_embd),
    }
}

/// The bias row added to matrix `m`'s products (qwen2's Q, K and V), if it has one.
pub(super) fn bias(w: &GWeights, m: Mat) -> Option<&CudaSlice<f32>> {
    match m {
        Mat::Q(l) => w.layers[l].bq.as_ref(),
        Mat::K(l) => w.layers[l].bk.as_ref(),
        Mat::V(l) => w.layers[l].bv.as_ref(),
        _ => None,
    }
}

/// Which norm weights.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Norm {
    Attn(usize),
    Ffn(usize),
    Output,
}

/// Which weight matrix.
#[derive(Clone, Copy)]
pub(super) enum Mat {
    Q(usize),
    K(usize),
    V(usize),
    O(usize),
    Gate(usize),
    Up(usize),
    Down(usize),
    Output,
}
