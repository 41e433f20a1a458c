//! The engine's single-kernel launches beyond the embedding: the products of a brick (through
//! `kernels::product`), RoPE, RMSNorm, the KV write and attention, the greedy pick and the
//! position's advance. Each stamps itself on the kernel clock; `engine.rs`'s launch plan
//! decides which brick they belong to.

use cudarc::driver::{CudaSlice, DriverError, LaunchConfig, PushKernelArg};

use super::buffers::{ActBufs, Which};
use super::engine::CudaEngine;
use super::error::wrap;
use super::kernels::{kind_code, lin, product, Epilogue, ARGMAX_BLOCKS};
use super::weights::{mat, Mat, Norm};
use crate::brick::{BrickId as B, Recorder};
use crate::engine::EngineError;
use crate::model::RopeStyle;
use crate::quant::ActType;

impl CudaEngine {
    /// The greedy pick on the GPU: the last logits row's argmax into `tok[0]`; the device's
    /// position moves on by the step's `n` tokens in the same launch.
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
            let b = &mut e.bufs;
            // SAFETY: argmax_blocks reads `vocab` logits and writes ARGMAX_BLOCKS (128) pairs
            // into `part`; argmax_final reads them, writes tok[0] and adds n to pos[0].
            unsafe {
                e.stream
                    .launch_builder(&e.k.argmax_blocks)
                    .arg(&b.logits)
                    .arg(&vocab)
                    .arg(&mut b.part)
                    .arg(&s1.ptr)
                    .arg(&s1.slot)
                    .launch(cfg(ARGMAX_BLOCKS))?;
                e.stream
                    .launch_builder(&e.k.argmax_final)
                    .arg(&b.part)
                    .arg(&mut b.tok)
                    .arg(&mut e.pos)
                    .arg(&nn)
                    .arg(&s2.ptr)
                    .arg(&s2.slot)
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
            self.stream
                .launch_builder(&self.k.advance)
                .arg(&mut self.pos)
                .arg(&nn)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (1, 1, 1),
                    shared_mem_bytes: 0,
                })
        }
        .map(|_| ())
        .map_err(wrap("advancing the position"))
    }

    /// `out = M · input` for each (M, out) of `outs`, quantizing `input` once per run of
    /// matrices sharing an activation format; `accumulate` adds into `out` (a fused residual).
    /// Q/K/V biases are added in the products' epilogue.
    pub(super) fn products(
        &mut self,
        n: usize,
        input: Which,
        outs: &[(Mat, Which)],
        accumulate: bool,
        pre: Option<ActType>,
    ) -> Result<(), DriverError> {
        let mut last = pre;
        for &(which, output) in outs {
            let m = mat(&self.w, which);
            let kind = ActType::for_weights(m.ty);
            let bias = match which {
                Mat::Q(l) => self.w.layers[l].bq.as_ref(),
                Mat::K(l) => self.w.layers[l].bk.as_ref(),
                Mat::V(l) => self.w.layers[l].bv.as_ref(),
                _ => None,
            };
            let ep = Epilogue {
                quantized: last == Some(kind),
                bias,
                accumulate,
            };
            let act: *mut ActBufs = &mut self.bufs.act;
            let (x, out) = self.bufs.pair(input, output);
            // SAFETY: `act` is a field distinct from both buffers `pair` returned.
            let act = unsafe { &mut *act };
            product(
                &self.stream,
                &self.k,
                m,
                n,
                x,
                act,
                out,
                ep,
                &mut self.clock,
            )?;
            last = Some(kind);
        }
        Ok(())
    }

    pub(super) fn rope(&mut self, n: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let half = c.rope_dims / 2;
        let cfg = LaunchConfig {
            grid_dim: ((c.n_heads + c.n_kv_heads) as u32, n as u32, 1),
            block_dim: ((half.div_ceil(32) * 32).max(32) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let args = (
            c.n_heads as i32,
            c.n_kv_heads as i32,
            c.head_dim as i32,
            c.rope_dims as i32,
            i32::from(c.arch.rope_style() == RopeStyle::Neox),
        );
        let st = self.clock.stamp();
        let q: *mut CudaSlice<f32> = &mut self.bufs.q;
        // SAFETY: q and k are distinct fields.
        let q = unsafe { &mut *q };
        // SAFETY: n × heads × head_dim values of Q and of K, rotated in place; the table
        // holds every position below the capacity (pos + n is checked against it).
        unsafe {
            self.stream
                .launch_builder(&self.k.rope)
                .arg(q)
                .arg(&mut self.bufs.k)
                .arg(&args.0)
                .arg(&args.1)
                .arg(&args.2)
                .arg(&args.3)
                .arg(&self.pos)
                .arg(&self.rope)
                .arg(&args.4)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(cfg)
        }
        .map(|_| ())
    }

    /// Rows `first..first + n` of X normed into H (the final norm: into Normed), and quantized
    /// as `kind` into the activation buffers for the product that follows.
    pub(super) fn rms_norm(
        &mut self,
        first: usize,
        n: usize,
        norm: Norm,
        kind: ActType,
    ) -> Result<(), DriverError> {
        let c = &self.model.config;
        let (cols, eps) = (c.n_embd, c.norm_eps);
        let w = match norm {
            Norm::Attn(l) => &self.w.layers[l].attn_norm,
            Norm::Ffn(l) => &self.w.layers[l].ffn_norm,
            Norm::Output => &self.w.output_norm,
        };
        let cfg = LaunchConfig {
            grid_dim: (n as u32, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        let (c, kind) = (cols as i32, kind_code(kind));
        let st = self.clock.stamp();
        let b = &mut self.bufs;
        let x = b.x.slice(first * cols..);
        let out = if norm == Norm::Output {
            &mut b.normed
        } else {
            &mut b.h
        };
        // SAFETY: n rows of `cols` values in and out; the activation buffers hold as many.
        unsafe {
            self.stream
                .launch_builder(&self.k.rms_norm_quant)
                .arg(&x)
                .arg(w)
                .arg(&c)
                .arg(&eps)
                .arg(out)
                .arg(&kind)
                .arg(&mut b.act.xf)
                .arg(&mut b.act.q)
                .arg(&mut b.act.d)
                .arg(&mut b.act.x)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(cfg)
        }
        .map(|_| ())
    }

    pub(super) fn attention(&mut self, n: usize, l: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let kvd = c.kv_dim();
        let layer = l * self.cap * kvd..(l + 1) * self.cap * kvd;
        let (kvd_i, n_i) = (kvd as i32, n as i32);
        let mut kc = self.kc.slice_mut(layer.clone());
        let mut vc = self.vc.slice_mut(layer);
        let (s1, s2) = (self.clock.stamp(), self.clock.stamp());
        let b = &mut self.bufs;
        // SAFETY: n × kv_dim values into cache rows pos..pos+n (< capacity, checked).
        unsafe {
            self.stream
                .launch_builder(&self.k.kv_store)
                .arg(&b.k)
                .arg(&b.v)
                .arg(&mut kc)
                .arg(&mut vc)
                .arg(&kvd_i)
                .arg(&self.pos)
                .arg(&n_i)
                .arg(&s1.ptr)
                .arg(&s1.slot)
                .launch(lin(n * kvd))
        }?;
        let cfg = LaunchConfig {
            grid_dim: (c.n_heads as u32, n as u32, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: (c.head_dim * 4) as u32,
        };
        let args = (
            c.n_heads as i32,
            c.n_kv_heads as i32,
            c.head_dim as i32,
            self.cap as i32,
            1.0 / (c.head_dim as f32).sqrt(),
            // llama.cpp's CPU kernel switches to its tiled f32 path from 64 queries.
            i32::from(n >= 64),
        );
        // SAFETY: queries n × q_dim, cache rows 0..pos+n, scores n × heads × capacity.
        unsafe {
            self.stream
                .launch_builder(&self.k.attention)
                .arg(&b.q)
                .arg(&mut kc)
                .arg(&mut vc)
                .arg(&args.0)
                .arg(&args.1)
                .arg(&args.2)
                .arg(&self.pos)
                .arg(&args.3)
                .arg(&args.4)
                .arg(&args.5)
                .arg(&mut b.scores)
                .arg(&mut b.att)
                .arg(&s2.ptr)
                .arg(&s2.slot)
                .launch(cfg)
        }
        .map(|_| ())
    }
}
