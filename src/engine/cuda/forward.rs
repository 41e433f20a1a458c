//! The per-layer launch plan of a step: which kernels run for each brick, in order, from the
//! embedding to the sampled token, and the brick bookkeeping around them (kernel stamps, or
//! host syncs under `Sync` timing).

use std::time::Instant;

use cudarc::driver::{DriverError, LaunchConfig};

use super::arch_ops::PostNorm;
use super::buffers::{Bufs, Which};
use super::clock::Owner;
use super::decode::CudaEngine;
use super::error::{device_error, wrap};
use super::launch_params::{ceil_div, lin, Feed};
use super::pdl_launch::PushArg;
use super::step_ops::feed_target;
use super::weights::{Mat, Norm};
use crate::brick::{Brick, BrickId as B, Recorder, Source, Span};
use crate::engine::error::EngineError;
use crate::engine::options::{LogitsFor, Timing};
use crate::model::config::FfnAct;

/// The factor the embedding gather multiplies each value by (1: none).
fn embed_scale(c: &crate::model::Config) -> f32 {
    c.embed_scale.unwrap_or(1.0)
}

impl CudaEngine {
    /// Run one brick's launches: their stamps belong to it, or, with `Sync` timing while
    /// recording, the stream is synchronised around it and the host clock times it.
    pub(super) fn brick(
        &mut self,
        rec: &mut Recorder,
        brick: impl Into<Brick>,
        layer: Option<usize>,
        work: impl FnOnce(&mut Self) -> Result<(), DriverError>,
    ) -> Result<(), EngineError> {
        let brick = brick.into();
        let layer = layer.map(|l| l as u32);
        let what = |e| device_error(&format!("brick {brick}"), e);
        if !(rec.enabled() && self.timing == Timing::Sync) {
            self.clock.enter(Some(Owner { brick, layer }));
            let r = work(self);
            self.clock.enter(None);
            return r.map_err(what);
        }
        self.stream.synchronize().map_err(what)?;
        let t0 = Instant::now();
        work(self).map_err(what)?;
        self.stream.synchronize().map_err(what)?;
        let t1 = Instant::now();
        rec.push(Span {
            brick,
            layer,
            start_ns: rec.since_origin(t0),
            dur_ns: t1.saturating_duration_since(t0).as_nanos() as u64,
            source: Source::HostSync,
        });
        Ok(())
    }

    /// Put `tokens` and the current position on the device (where they are not already), and
    /// make the batch buffers big enough.
    pub(super) fn prepare(&mut self, tokens: &[u32]) -> Result<(), EngineError> {
        let n = tokens.len();
        if n > self.bufs.n {
            self.bufs = Bufs::alloc(
                &self.stream,
                &self.model,
                self.cap,
                n,
                self.k
                    .gemm
                    .as_ref()
                    .map(|g| (self.w.largest, g.from, g.f16_from())),
            )?;
            // The graphs name the old buffers.
            self.graphs = Default::default();
            self.batch_graphs.clear();
            self.on_device = None;
        }
        if !(n == 1 && self.on_device == Some(tokens[0])) {
            self.stream
                .memcpy_htod(tokens, &mut self.bufs.tok.slice_mut(0..n))
                .map_err(wrap("uploading token ids"))?;
        }
        self.on_device = None;
        if self.dev_pos != Some(self.len) {
            let pos = [self.len as i32];
            self.stream
                .memcpy_htod(&pos, &mut self.pos)
                .map_err(wrap("uploading the position"))?;
            self.dev_pos = Some(self.len);
        }
        Ok(())
    }

    /// The host's record of the position after a step of `n` tokens ran on the device.
    pub(super) fn advance_host(&mut self, n: usize) {
        self.len += n;
        self.dev_pos = Some(self.len);
    }

    /// Every launch of a step of `n` tokens (ids in `bufs.tok`, first position in `pos`).
    pub(super) fn launch_layers(
        &mut self,
        n: usize,
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<usize, EngineError> {
        let model = self.model.clone();
        let c = &model.config;
        let ff = c.n_ff;

        self.brick(rec, B::Embed, None, |s| {
            let m = &s.w.token_embd;
            let (rb, cols) = (m.row_bytes as u64, m.cols as i32);
            let scale = embed_scale(c);
            let cfg = LaunchConfig {
                grid_dim: (ceil_div(m.cols, 256), n as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let st = s.clock.stamp();
            // SAFETY: rows of token_embd for ids checked < vocab; x holds n × n_embd.
            unsafe {
                s.k.launch(&s.stream, s.k.embed(m.ty))
                    .arg(&m.data)
                    .arg(&rb)
                    .arg(&cols)
                    .arg(&s.bufs.tok)
                    .arg(&scale)
                    .arg(&mut s.bufs.x)
                    .reads(&m.label)
                    .stamp(&st)
                    .launch(cfg)
            }
            .map(|_| ())
        })?;

        const ATTN_OUT: &[B] = &[B::AttnOut, B::AttnResidual];
        const ROPE_ATTENTION: &[B] = &[B::Rope, B::Attention];
        // qwen3's per-head norms inside one token's grouped attention kernel.
        const QK_ROPE_ATTENTION: &[B] = &[B::QkNorm, B::Rope, B::Attention];
        const FFN_DOWN: &[B] = &[B::FfnDown, B::FfnResidual];
        // Gemma3's post norms take the residual add from the products' epilogue.
        const POST_ATTN: &[B] = &[B::PostAttnNorm, B::AttnResidual];
        const POST_FFN: &[B] = &[B::PostFfnNorm, B::FfnResidual];
        for l in 0..c.n_layers {
            let layer = Some(l);
            // Each norm also quantizes its output for the first product it feeds.
            let qfeed = self.feed_for(n, Mat::Q(l));
            self.brick(rec, B::AttnNorm, layer, |s| {
                s.rms_norm(0, n, Norm::Attn(l), qfeed)
            })?;
            self.brick(rec, B::Qkv, layer, |s| {
                let outs = [
                    (Mat::Q(l), Which::Q),
                    (Mat::K(l), Which::K),
                    (Mat::V(l), Which::V),
                ];
                s.products(n, Which::H, &outs, false, Some(qfeed))
            })?;
            // The extra norms run where the layer has their weights, as on the CPU.
            let gl = &self.w.layers[l];
            let (qk_norm, post_attn, post_ffn) = (
                gl.q_norm.is_some() && gl.k_norm.is_some(),
                gl.post_attn_norm.is_some(),
                gl.post_ffn_norm.is_some(),
            );
            let fused_norms = qk_norm && self.qk_norm_in_attention(n);
            if qk_norm && !fused_norms {
                self.brick(rec, B::QkNorm, layer, |s| s.qk_norm(n, l))?;
            }
            // RoPE runs in the launch that writes K and V to the cache (the attention brick's
            // KV write), or inside the attention kernel itself: the two bricks are one (three
            // with the per-head norms the grouped kernel applies). One token's attention also
            // quantizes its output for the output projection.
            let akind = self.split_quantizes(n, l);
            let attention = if fused_norms {
                QK_ROPE_ATTENTION
            } else {
                ROPE_ATTENTION
            };
            self.brick(rec, Brick::Fused(attention), layer, |s| {
                s.rope_attention(n, l, akind)
            })?;
            if post_attn {
                // The output projection into H, normed and added to X.
                self.brick(rec, B::AttnOut, layer, |s| {
                    s.products(
                        n,
                        Which::Att,
                        &[(Mat::O(l), Which::H)],
                        false,
                        akind.map(Feed::Act),
                    )
                })?;
                self.brick(rec, Brick::Fused(POST_ATTN), layer, |s| {
                    s.post_norm(n, PostNorm::Attn(l))
                })?;
            } else {
                // The residual add happens in the output projection's epilogue.
                self.brick(rec, Brick::Fused(ATTN_OUT), layer, |s| {
                    s.products(
                        n,
                        Which::Att,
                        &[(Mat::O(l), Which::X)],
                        true,
                        akind.map(Feed::Act),
                    )
                })?;
            }
            let gfeed = self.feed_for(n, Mat::Gate(l));
            self.brick(rec, B::FfnNorm, layer, |s| {
                s.rms_norm(0, n, Norm::Ffn(l), gfeed)
            })?;
            self.brick(rec, B::FfnGateUp, layer, |s| {
                let outs = [(Mat::Gate(l), Which::Gate), (Mat::Up(l), Which::Up)];
                s.products(n, Which::H, &outs, false, Some(gfeed))
            })?;
            // The activation quantizes its output for the down projection (or rounds it to
            // its f16 operand).
            let dfeed = self.feed_for(n, Mat::Down(l));
            if c.ffn_act == FfnAct::GeluGlu {
                self.brick(rec, B::FfnGeglu, layer, |s| s.geglu(n, dfeed))?;
            } else {
                self.brick(rec, B::FfnAct, layer, |s| {
                    let (len, kind) = ((n * ff) as i32, dfeed.code());
                    let st = s.clock.stamp();
                    let b = &mut s.bufs;
                    let xf = feed_target(&s.stream, &mut b.act, dfeed);
                    // SAFETY: n × n_ff values each; the activation buffers hold as many.
                    unsafe {
                        s.k.launch(&s.stream, &s.k.silu_mul_quant)
                            .arg(&mut b.gate)
                            .arg(&b.up)
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
                })?;
            }
            if post_ffn {
                self.brick(rec, B::FfnDown, layer, |s| {
                    s.products(
                        n,
                        Which::Gate,
                        &[(Mat::Down(l), Which::H)],
                        false,
                        Some(dfeed),
                    )
                })?;
                self.brick(rec, Brick::Fused(POST_FFN), layer, |s| {
                    s.post_norm(n, PostNorm::Ffn(l))
                })?;
            } else {
                self.brick(rec, Brick::Fused(FFN_DOWN), layer, |s| {
                    s.products(
                        n,
                        Which::Gate,
                        &[(Mat::Down(l), Which::X)],
                        true,
                        Some(dfeed),
                    )
                })?;
            }
        }

        let (first, rows) = match want {
            LogitsFor::Last => (n - 1, 1),
            LogitsFor::All => (0, n),
        };
        let ofeed = self.feed_for(rows, Mat::Output);
        self.brick(rec, B::FinalNorm, None, |s| {
            s.rms_norm(first, rows, Norm::Output, ofeed)
        })?;
        self.brick(rec, B::LmHead, None, |s| {
            s.products(
                rows,
                Which::Normed,
                &[(Mat::Output, Which::Logits)],
                false,
                Some(ofeed),
            )?;
            // Soft-capping, where the model sets it, belongs to the head's logits.
            match s.model.config.final_logit_softcap {
                Some(cap) => s.softcap(rows, cap),
                None => Ok(()),
            }
        })?;
        Ok(rows)
    }
}
