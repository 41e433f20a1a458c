//! The step's small launches: RMSNorm (with the next product's quantization fused), the
//! greedy pick on the device, and the position's advance.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DriverError, LaunchConfig};

use super::buffers::ActBufs;
use super::decode::CudaEngine;
use super::error::wrap;
use super::launch_params::{ceil_div, Feed, ARGMAX_BLOCKS};
use super::pdl_launch::PushArg;
use super::weights::Norm;
use crate::brick::{BrickId as B, Recorder};
use crate::engine::error::EngineError;

impl CudaEngine {
    /// The greedy pick on the GPU: the last logits row's argmax into `tok[0]` and, with the
    /// row's count of non-finite logits, into `sampled`; the device's position moves on by the
    /// step's `n` tokens in the same launch.
    pub(super) fn sample(&mut self, rec: &mut Recorder, n: usize) -> Result<(), EngineError> {
        let vocab = self.model.weights.output.rows as i32;
        let nn = n as i32;
        self.brick(rec, B::Sample, None, |e| {
            let cfg = |blocks| LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (1024, 1, 1),
                shared_mem_bytes: 0,
            };
            let (s1, s2) = (e.clock.stamp(), e.clock.stamp());
            let sampled = e.clock.sampled_ptr();
            let b = &mut e.bufs;
            // SAFETY: argmax_blocks reads `vocab` logits and writes ARGMAX_BLOCKS (128) triples
            // into `part`; argmax_final reads them, writes tok[0], the clock's two sampled u32 and adds n to
            // pos[0].
            unsafe {
                e.k.launch(&e.stream, &e.k.argmax_blocks)
                    .arg(&b.logits)
                    .arg(&vocab)
                    .arg(&mut b.part)
                    .stamp(&s1)
                    .launch(cfg(ARGMAX_BLOCKS))?;
                e.k.launch(&e.stream, &e.k.argmax_final)
                    .arg(&b.part)
                    .arg(&mut b.tok)
                    .arg(&sampled)
                    .arg(&mut e.pos)
                    .arg(&nn)
                    .stamp(&s2)
                    .launch(cfg(1))
            }
            .map(|_| ())
        })
    }

    /// The position moves on by `n` tokens on the device (a kernel, so a graph can hold it).
    pub(super) fn advance_device(&mut self, n: usize) -> Result<(), EngineError> {
        let nn = n as i32;
        let st = self.clock.stamp();
        // SAFETY: pos holds one i32.
        unsafe {
            self.k
                .launch(&self.stream, &self.k.advance)
                .arg(&mut self.pos)
                .arg(&nn)
                .stamp(&st)
                .launch(LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (1, 1, 1),
                    shared_mem_bytes: 0,
                })
        }
        .map(|_| ())
        .map_err(wrap("advancing the position"))
    }

    /// Rows `first..first + n` of X normed into H (the final norm: into Normed), and written
    /// as `feed` asks for the product that follows (quantized into the activation buffers, or
    /// the tensor-core product's f16 operand).
    pub(super) fn rms_norm(
        &mut self,
        first: usize,
        n: usize,
        norm: Norm,
        feed: Feed,
    ) -> Result<(), DriverError> {
        let c = &self.model.config;
        let (cols, eps) = (c.n_embd, c.norm_eps);
        let w = match norm {
            Norm::Attn(l) => &self.w.layers[l].attn_norm,
            Norm::Ffn(l) => &self.w.layers[l].ffn_norm,
            Norm::Output => &self.w.output_norm,
        };
        // A block per 1024 values of each row (kernels/rmsnorm.cu); 1024 threads, so the sum
        // of squares adds in the order the exact numerics were checked with. (256-thread
        // blocks under fast numerics were slower; docs/measurements/gpu-engine.md.)
        let cfg = LaunchConfig {
            grid_dim: (ceil_div(cols, 1024), n as u32, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        let (c, kind) = (cols as i32, feed.code());
        let st = self.clock.stamp();
        let b = &mut self.bufs;
        let xf = feed_target(&self.stream, &mut b.act, feed);
        let x = b.x.slice(first * cols..);
        let out = if norm == Norm::Output {
            &mut b.normed
        } else {
            &mut b.h
        };
        // SAFETY: n rows of `cols` values in and out; the activation buffers hold as many.
        unsafe {
            self.k
                .launch(&self.stream, &self.k.rms_norm_quant)
                .arg(&x)
                .arg(w)
                .arg(&c)
                .arg(&eps)
                .arg(out)
                .arg(&kind)
                .arg(&xf)
                .arg(&mut b.act.q)
                .arg(&mut b.act.d)
                .arg(&mut b.act.x)
                .stamp(&st)
                .launch(cfg)
        }
        .map(|_| ())
    }
}

/// Where a producer writing `feed` puts its float or f16 values: the activation buffers' `xf`,
/// or the tensor-core product's f16 operand.
pub(super) fn feed_target(s: &Arc<CudaStream>, act: &mut ActBufs, feed: Feed) -> u64 {
    match feed {
        Feed::F16 => {
            act.f16
                .as_mut()
                .expect("Feed::F16 only where gemm::applies found the f16 buffers")
                .a_mut()
                .device_ptr(s)
                .0
        }
        Feed::Act(_) => act.xf.device_ptr(s).0,
    }
}
