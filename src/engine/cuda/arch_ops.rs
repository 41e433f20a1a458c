//! The launches of the operations only some architectures have: qwen3's and gemma3's per-head
//! RMSNorm of Q and K, gemma3's post norms (each added to the residual), GeGLU and the final
//! logit soft-capping. Each reproduces the CPU engine's bits under both numerics
//! (kernels/qk_norm.cu, post_norm.cu, geglu.cu, softcap.cu).

use cudarc::driver::{DriverError, LaunchConfig};

use super::decode::CudaEngine;
use super::launch_params::{ceil_div, lin, Feed};
use super::pdl_launch::PushArg;
use super::step_ops::feed_target;

/// Which post norm (gemma3): of the attention output or of the FFN output, of a layer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PostNorm {
    Attn(usize),
    Ffn(usize),
}

impl CudaEngine {
    /// Layer `l`'s per-head RMSNorm of the `n` tokens' Q and K rows, in place, before RoPE.
    pub(super) fn qk_norm(&mut self, n: usize, l: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let lw = &self.w.layers[l];
        let (Some(qw), Some(kw)) = (&lw.q_norm, &lw.k_norm) else {
            unreachable!("the launch plan norms Q and K only where the layer has their weights")
        };
        let (heads, kv_heads, hd) = (c.n_heads as i32, c.n_kv_heads as i32, c.head_dim as i32);
        let eps = c.norm_eps;
        let cfg = LaunchConfig {
            grid_dim: ((c.n_heads + c.n_kv_heads) as u32, n as u32, 1),
            block_dim: (c.head_dim.next_multiple_of(32) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let st = self.clock.stamp();
        let b = &mut self.bufs;
        // SAFETY: n tokens' q_dim Q and kv_dim K values normed in place, head_dim weights each
        // (head_dim <= 1024, checked at setup).
        unsafe {
            self.k
                .launch(&self.stream, &self.k.qk_norm)
                .arg(&mut b.q)
                .arg(&mut b.k)
                .arg(qw)
                .arg(kw)
                .arg(&heads)
                .arg(&kv_heads)
                .arg(&hd)
                .arg(&eps)
                .stamp(&st)
                .launch(cfg)
        }
        .map(|_| ())
    }

    /// X += RMSNorm(H) for `n` rows (the product before wrote its output into H): gemma3's
    /// post norm `which` with its residual add.
    pub(super) fn post_norm(&mut self, n: usize, which: PostNorm) -> Result<(), DriverError> {
        let c = &self.model.config;
        let (cols, eps) = (c.n_embd, c.norm_eps);
        let lw = match which {
            PostNorm::Attn(l) | PostNorm::Ffn(l) => &self.w.layers[l],
        };
        let w = match which {
            PostNorm::Attn(_) => &lw.post_attn_norm,
            PostNorm::Ffn(_) => &lw.post_ffn_norm,
        };
        let Some(w) = w else {
            unreachable!("the launch plan post-norms only where the layer has the weights")
        };
        // As rms_norm: a block per 1024 values of each row.
        let cfg = LaunchConfig {
            grid_dim: (ceil_div(cols, 1024), n as u32, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        let cc = cols as i32;
        let st = self.clock.stamp();
        let b = &mut self.bufs;
        // SAFETY: n rows of `cols` values read from H and added into X.
        unsafe {
            self.k
                .launch(&self.stream, &self.k.post_norm_residual)
                .arg(&b.h)
                .arg(w)
                .arg(&cc)
                .arg(&eps)
                .arg(&mut b.x)
                .stamp(&st)
                .launch(cfg)
        }
        .map(|_| ())
    }

    /// Gate = GeGLU(gate, up) for `n` tokens, written as `feed` asks for the down projection.
    pub(super) fn geglu(&mut self, n: usize, feed: Feed) -> Result<(), DriverError> {
        let ff = self.model.config.n_ff;
        let Some(table) = &self.w.gelu else {
            unreachable!("the GELU table is uploaded for every GeGLU model")
        };
        let (len, kind) = ((n * ff) as i32, feed.code());
        let st = self.clock.stamp();
        let b = &mut self.bufs;
        let xf = feed_target(&self.stream, &mut b.act, feed);
        // SAFETY: n × n_ff values each; the activation buffers hold as many; the table
        // 65536 entries, any f16's bits.
        unsafe {
            self.k
                .launch(&self.stream, &self.k.geglu_quant)
                .arg(&mut b.gate)
                .arg(&b.up)
                .arg(table)
                .arg(&len)
                .arg(&kind)
                .arg(&xf)
                .arg(&mut b.act.q)
                .arg(&mut b.act.d)
                .arg(&mut b.act.x)
                .stamp(&st)
                .launch(lin(n * ff))
        }
        .map(|_| ())
    }

    /// The `rows` logits rows soft-capped at `cap` in place.
    pub(super) fn softcap(&mut self, rows: usize, cap: f32) -> Result<(), DriverError> {
        let len = rows * self.model.weights.output.rows;
        let (nn, inv) = (len as i32, 1.0f32 / cap);
        let st = self.clock.stamp();
        // SAFETY: `len` logits in place (the buffer holds a step's rows).
        unsafe {
            self.k
                .launch(&self.stream, &self.k.softcap)
                .arg(&mut self.bufs.logits)
                .arg(&nn)
                .arg(&inv)
                .arg(&cap)
                .stamp(&st)
                .launch(lin(len))
        }
        .map(|_| ())
    }
}
