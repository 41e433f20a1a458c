//! The cost model: for each brick of one decode step, the bytes it must read and write and the
//! floating-point operations it must do, from the model's shapes and tensor types. With a
//! measured time this gives achieved GB/s and GFLOP/s, and with the peaks the roofline time.
//!
//! Conventions (documented so numbers can be checked by hand):
//! - Weights count at their stored size (`rows × row_bytes` of their GGUF type); activations
//!   as f32; the KV cache as f16 (2 bytes per value), as the engine stores it.
//! - A matrix-vector product is `2 × rows × cols` FLOPs (one multiply and one add per weight);
//!   bias adds one per output.
//! - RMSNorm: read x and the weight, write the output; 4 FLOPs per element (square, sum,
//!   scale, weight). Residual add: read two vectors, write one; 1 FLOP per element.
//! - RoPE: read and write Q and K; 6 FLOPs per rotated pair (4 multiplies, 2 adds).
//! - Attention over `kv_len` cached positions: write this token's K and V, read every cached K
//!   and V; 2 FLOPs per multiply-add of Q·K and of P·V, 5 per score for the softmax. A
//!   sliding-window layer (gemma3) reads only the last `window` positions.
//! - SiLU(gate)·up: read gate and up, write one vector; 6 FLOPs per element.
//! - GELU(gate)·up (`ffn_geglu`): the same bytes; 10 FLOPs per element (GELU's tanh form
//!   `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))` is 9 counting tanh as one, and the
//!   product).
//! - Per-head Q/K RMSNorm (`qk_norm`): read Q, K and the two `head_dim` weights, write Q and
//!   K; 4 FLOPs per element. Post-norms (`post_attn_norm`, `post_ffn_norm`): as RMSNorm.
//! - Scalings that ride along inside a brick add one FLOP per value and no bytes: the
//!   embedding scale (`embed`), Q scaled before attention (`attention`), and the final
//!   logit soft cap (`lm_head`, 3 per logit: scale, tanh, scale).
//! - Sampling: read the logits once, one comparison per logit.

use std::ops::{Add, Mul};

use super::id::{Brick, BrickId};
use crate::model::weights::{Mat, Weights};
use crate::model::Config;

/// Bytes and FLOPs of one brick for one token (all layers summed for per-layer bricks).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    pub bytes_read: f64,
    pub bytes_written: f64,
    pub flops: f64,
    /// The part of the bytes that stays in the caches between its write and its read (a
    /// decode step's activations), judged against the cache's bandwidth where one was
    /// measured (`Roof::cache_gbps`); the rest (weights, KV cache rows) comes from memory.
    pub resident: f64,
}

impl Cost {
    pub fn bytes(&self) -> f64 {
        self.bytes_read + self.bytes_written
    }

    /// FLOPs per byte moved.
    pub fn intensity(&self) -> f64 {
        if self.bytes() > 0.0 {
            self.flops / self.bytes()
        } else {
            0.0
        }
    }
}

impl Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            bytes_read: self.bytes_read + o.bytes_read,
            bytes_written: self.bytes_written + o.bytes_written,
            flops: self.flops + o.flops,
            resident: self.resident + o.resident,
        }
    }
}

impl Mul<f64> for Cost {
    type Output = Cost;
    fn mul(self, k: f64) -> Cost {
        Cost {
            bytes_read: self.bytes_read * k,
            bytes_written: self.bytes_written * k,
            flops: self.flops * k,
            resident: self.resident * k,
        }
    }
}

const F32: f64 = 4.0;
const F16: f64 = 2.0;

/// Shapes and per-layer weight sizes: everything the model needs, without the weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Shapes {
    pub n_layers: usize,
    pub n_embd: usize,
    pub q_dim: usize,
    pub kv_dim: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    pub rope_dims: usize,
    pub n_ff: usize,
    pub vocab: usize,
    /// Stored bytes of one embedding row.
    pub embd_row_bytes: usize,
    /// Per layer: (qkv weight bytes, qkv bias values, attn_out bytes, gate+up bytes, down bytes).
    pub layers: Vec<LayerBytes>,
    pub lm_head_bytes: usize,
    /// Whether each embedding row is scaled (gemma3).
    pub embed_scale: bool,
    /// Whether Q is scaled before attention (phi3, gemma3).
    pub q_scale: bool,
    /// Whether the output logits are soft-capped.
    pub final_softcap: bool,
    /// Per layer, its sliding window (gemma3's sliding layers); empty: no layer slides.
    pub windows: Vec<Option<usize>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerBytes {
    pub qkv: usize,
    pub qkv_bias: usize,
    pub attn_out: usize,
    pub gate_up: usize,
    pub down: usize,
}

fn mat_bytes(m: &Mat) -> usize {
    m.rows * m.row_bytes()
}

impl Shapes {
    pub fn new(cfg: &Config, w: &Weights) -> Shapes {
        let bias = |b: &Option<Vec<f32>>| b.as_ref().map_or(0, |v| v.len());
        Shapes {
            n_layers: cfg.n_layers,
            n_embd: cfg.n_embd,
            q_dim: cfg.q_dim(),
            kv_dim: cfg.kv_dim(),
            n_heads: cfg.n_heads,
            head_dim: cfg.head_dim,
            rope_dims: cfg.rope_dims,
            n_ff: cfg.n_ff,
            vocab: w.output.rows,
            embd_row_bytes: w.token_embd.row_bytes(),
            layers: w
                .layers
                .iter()
                .map(|l| LayerBytes {
                    qkv: mat_bytes(&l.wq) + mat_bytes(&l.wk) + mat_bytes(&l.wv),
                    qkv_bias: bias(&l.bq) + bias(&l.bk) + bias(&l.bv),
                    attn_out: mat_bytes(&l.wo),
                    gate_up: mat_bytes(&l.w_gate) + mat_bytes(&l.w_up),
                    down: mat_bytes(&l.w_down),
                })
                .collect(),
            lm_head_bytes: mat_bytes(&w.output),
            embed_scale: cfg.embed_scale.is_some(),
            q_scale: cfg.attn_scale_on_q,
            final_softcap: cfg.final_logit_softcap.is_some(),
            windows: (0..cfg.n_layers).map(|l| cfg.layer_window(l)).collect(),
        }
    }

    /// Cached positions attention reads over all layers for a token attending over
    /// `kv_len`: `kv_len` per layer, at most its window on a sliding layer.
    fn kv_seen(&self, kv_len: f64) -> f64 {
        (0..self.n_layers)
            .map(|l| match self.windows.get(l) {
                Some(Some(n)) => kv_len.min(*n as f64),
                _ => kv_len,
            })
            .sum()
    }

    /// The weight bytes one decode token reads: every layer's matrices and the output head.
    pub fn weight_bytes_per_token(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| l.qkv + l.attn_out + l.gate_up + l.down)
            .sum();
        layers + self.lm_head_bytes
    }

    /// The most weight bytes one brick reads in one layer (or the output head): the longest
    /// stream of weights a decode step reads in one piece.
    pub fn largest_weight_bytes(&self) -> usize {
        self.layers
            .iter()
            .flat_map(|l| [l.qkv, l.attn_out, l.gate_up, l.down])
            .chain([self.lm_head_bytes])
            .max()
            .unwrap_or(0)
    }

    /// Cost of `brick` for one decode token attending over `kv_len` positions.
    pub fn cost(&self, brick: Brick, kv_len: f64) -> Cost {
        brick
            .covers()
            .into_iter()
            .map(|b| self.cost_one(b, kv_len))
            .fold(Cost::default(), |a, c| a + c)
    }

    /// Cost of `brick` for a prompt of `n` tokens evaluated at once from an empty cache:
    /// weights read once, activations and FLOPs `n` times (attention's at the prompt's mean
    /// context length), except that the last layer runs its bricks past the attention for
    /// `tail` rows (the CPU engine's for the last token only, `n` where every row runs); the
    /// output norm, head and pick run for the last token only. The
    /// bytes are what the work must move at least: the attention reads the prompt's cached K
    /// and V rows once (a tiled kernel keeps them on chip across queries), not once per query
    /// as a decode step does, which had put a 512-token prompt's attention at 4.6 TB/s.
    pub fn prefill_cost(&self, brick: Brick, n: usize, tail: usize) -> Cost {
        let (n, tail) = (n.max(1) as f64, tail.clamp(1, n.max(1)) as f64);
        let layers = self.n_layers.max(1) as f64;
        brick
            .covers()
            .into_iter()
            .map(|b| {
                let one = self.cost_one(b, (n + 1.0) / 2.0);
                if matches!(b, BrickId::FinalNorm | BrickId::LmHead | BrickId::Sample) {
                    return one;
                }
                // Rows per layer, the last layer's past its attention `tail` (every layer's
                // shapes are the same, so the rows' mean over the layers scales the cost).
                let n = match b.past_attention() {
                    true => (n * (layers - 1.0) + tail) / layers,
                    false => n,
                };
                let w = self.weight_bytes(b);
                let cache = if b == BrickId::Attention {
                    // Per query the mean context's rows; the prompt's rows once in all.
                    let no_cache = self.cost_one(b, 0.0).bytes_read;
                    n * (one.bytes_read - no_cache) - (self.cost_one(b, n).bytes_read - no_cache)
                } else {
                    0.0
                };
                // Everything but the weights passes from brick to brick through the caches
                // (activations, the prompt's own K and V rows): judged against the caches'
                // bandwidth where one was measured, so a brick never reads faster than its
                // roof (a long prompt's activations spill to memory: its roof is then above
                // what the brick can reach, never below).
                let bytes_read = w + n * (one.bytes_read - w) - cache;
                let bytes_written = n * one.bytes_written;
                Cost {
                    bytes_read,
                    bytes_written,
                    flops: n * one.flops,
                    resident: bytes_read + bytes_written - w,
                }
            })
            .fold(Cost::default(), |a, c| a + c)
    }

    /// Cost of `brick` for one step of `n` sequences decoded together, each attending over
    /// `kv_len` positions of its own cache: the weights read once, everything else (and the
    /// FLOPs) once per sequence.
    pub fn batch_cost(&self, brick: Brick, n: usize, kv_len: f64) -> Cost {
        let n = n.max(1) as f64;
        brick
            .covers()
            .into_iter()
            .map(|b| {
                let one = self.cost_one(b, kv_len);
                let w = self.weight_bytes(b);
                Cost {
                    bytes_read: w + n * (one.bytes_read - w),
                    bytes_written: n * one.bytes_written,
                    flops: n * one.flops,
                    resident: n * one.resident,
                }
            })
            .fold(Cost::default(), |a, c| a + c)
    }

    /// The weight-matrix bytes `b` reads (once per step, whatever the batch).
    fn weight_bytes(&self, b: BrickId) -> f64 {
        let sum = |f: &dyn Fn(&LayerBytes) -> usize| -> f64 {
            self.layers.iter().map(|l| f(l) as f64).sum()
        };
        match b {
            BrickId::Qkv => sum(&|l| l.qkv),
            BrickId::AttnOut => sum(&|l| l.attn_out),
            BrickId::FfnGateUp => sum(&|l| l.gate_up),
            BrickId::FfnDown => sum(&|l| l.down),
            BrickId::LmHead => self.lm_head_bytes as f64,
            _ => 0.0,
        }
    }

    /// `b`'s cost for one decode token: its activations stay in the caches, its weights,
    /// embedding row and KV cache rows come from memory.
    fn cost_one(&self, b: BrickId, kv_len: f64) -> Cost {
        let c = self.bytes_and_flops(b, kv_len);
        let memory = match b {
            BrickId::Embed => self.embd_row_bytes as f64,
            BrickId::Attention => 2.0 * self.kv_seen(kv_len) * self.kv_dim as f64 * F16,
            _ => self.weight_bytes(b),
        };
        Cost {
            resident: (c.bytes() - memory).max(0.0),
            ..c
        }
    }

    fn bytes_and_flops(&self, b: BrickId, kv_len: f64) -> Cost {
        let (e, qd, kvd, ff) = (
            self.n_embd as f64,
            self.q_dim as f64,
            self.kv_dim as f64,
            self.n_ff as f64,
        );
        let layers = self.n_layers as f64;
        let sum = |f: &dyn Fn(&LayerBytes) -> usize| -> f64 {
            self.layers.iter().map(|l| f(l) as f64).sum()
        };
        let c = |r: f64, w: f64, f: f64| Cost {
            bytes_read: r,
            bytes_written: w,
            flops: f,
            resident: 0.0,
        };
        let norm = c(2.0 * e * F32, e * F32, 4.0 * e);
        let residual = c(2.0 * e * F32, e * F32, e);
        let on = |flag: bool| if flag { 1.0 } else { 0.0 };
        match b {
            BrickId::Embed => c(
                self.embd_row_bytes as f64,
                e * F32,
                on(self.embed_scale) * e,
            ),
            BrickId::AttnNorm | BrickId::FfnNorm | BrickId::PostAttnNorm | BrickId::PostFfnNorm => {
                norm * layers
            }
            BrickId::QkNorm => {
                let (vals, hd) = (qd + kvd, self.head_dim as f64);
                c(
                    layers * (vals + 2.0 * hd) * F32,
                    layers * vals * F32,
                    layers * 4.0 * vals,
                )
            }
            BrickId::AttnResidual | BrickId::FfnResidual => residual * layers,
            BrickId::Qkv => {
                let bias = sum(&|l| l.qkv_bias);
                c(
                    sum(&|l| l.qkv) + bias * F32 + layers * e * F32,
                    layers * (qd + 2.0 * kvd) * F32,
                    layers * 2.0 * e * (qd + 2.0 * kvd) + bias,
                )
            }
            BrickId::Rope => {
                let rotated = (qd + kvd) * self.rope_dims as f64 / self.head_dim as f64;
                c(
                    layers * (qd + kvd) * F32,
                    layers * (qd + kvd) * F32,
                    layers * 3.0 * rotated,
                )
            }
            BrickId::Attention => {
                let (heads, seen) = (self.n_heads as f64, self.kv_seen(kv_len));
                c(
                    layers * (qd * F32 + 2.0 * kvd * F32) + 2.0 * seen * kvd * F16,
                    layers * (2.0 * kvd * F16 + qd * F32),
                    4.0 * seen * qd + 5.0 * seen * heads + layers * on(self.q_scale) * qd,
                )
            }
            BrickId::AttnOut => c(
                sum(&|l| l.attn_out) + layers * qd * F32,
                layers * e * F32,
                layers * 2.0 * qd * e,
            ),
            BrickId::FfnGateUp => c(
                sum(&|l| l.gate_up) + layers * e * F32,
                layers * 2.0 * ff * F32,
                layers * 4.0 * e * ff,
            ),
            BrickId::FfnAct => c(
                layers * 2.0 * ff * F32,
                layers * ff * F32,
                layers * 6.0 * ff,
            ),
            BrickId::FfnGeglu => c(
                layers * 2.0 * ff * F32,
                layers * ff * F32,
                layers * 10.0 * ff,
            ),
            BrickId::FfnDown => c(
                sum(&|l| l.down) + layers * ff * F32,
                layers * e * F32,
                layers * 2.0 * ff * e,
            ),
            BrickId::FinalNorm => norm,
            BrickId::LmHead => c(
                self.lm_head_bytes as f64 + e * F32,
                self.vocab as f64 * F32,
                (2.0 * e + on(self.final_softcap) * 3.0) * self.vocab as f64,
            ),
            BrickId::Sample => c(self.vocab as f64 * F32, 0.0, self.vocab as f64),
        }
    }
}

/// The product bricks whose weights are quantized (the first layer's matrices, and the output
/// head): the CPU engine quantizes their inputs and takes integer dot products, so their
/// compute roof is the int8 dot peak, not the FMA peak (`analysis::analyze_prefill`).
pub fn quantized_products(w: &Weights) -> Vec<BrickId> {
    let quantized = |ty| {
        matches!(
            crate::quant::ActType::for_weights(ty),
            crate::quant::ActType::Q8_0 | crate::quant::ActType::Q8_1 | crate::quant::ActType::Q8_K
        )
    };
    let mut out: Vec<BrickId> = w
        .layers
        .first()
        .map(|l| {
            [
                (BrickId::Qkv, l.wq.ty),
                (BrickId::AttnOut, l.wo.ty),
                (BrickId::FfnGateUp, l.w_gate.ty),
                (BrickId::FfnDown, l.w_down.ty),
            ]
            .into_iter()
            .filter(|&(_, ty)| quantized(ty))
            .map(|(b, _)| b)
            .collect()
        })
        .unwrap_or_default();
    if quantized(w.output.ty) {
        out.push(BrickId::LmHead);
    }
    out
}

/// Peak bandwidth and compute the roofline is drawn against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roof {
    pub bandwidth_gbps: f64,
    pub compute_gflops: f64,
    /// The caches' read bandwidth, for a cost's `resident` bytes (the CPU's; None on a GPU,
    /// where every byte is judged against memory).
    pub cache_gbps: Option<f64>,
}

impl Roof {
    /// The least time the hardware needs for `cost`, microseconds: the longer of moving its
    /// bytes (`memory_us`) and doing its FLOPs at the compute peak.
    pub fn time_us(&self, cost: &Cost) -> f64 {
        let compute = cost.flops / (self.compute_gflops * 1e3);
        self.memory_us(cost).max(compute)
    }

    /// The least time to move `cost`'s bytes, microseconds: its resident bytes at the cache's
    /// bandwidth where one was measured, the rest at memory's.
    pub fn memory_us(&self, cost: &Cost) -> f64 {
        let (cached, cache_gbps) = match self.cache_gbps {
            Some(g) if g > 0.0 => (cost.resident.min(cost.bytes()), g),
            _ => (0.0, self.bandwidth_gbps),
        };
        (cost.bytes() - cached) / (self.bandwidth_gbps * 1e3) + cached / (cache_gbps * 1e3)
    }

    /// The bandwidth `cost`'s bytes are judged against, GB/s: memory's, or between memory's
    /// and the cache's as its bytes split between them.
    pub fn bandwidth_for(&self, cost: &Cost) -> f64 {
        let us = self.memory_us(cost);
        if us > 0.0 {
            cost.bytes() / (us * 1e3)
        } else {
            self.bandwidth_gbps
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes() -> Shapes {
        Shapes {
            n_layers: 2,
            n_embd: 64,
            q_dim: 64,
            kv_dim: 32,
            n_heads: 4,
            head_dim: 16,
            rope_dims: 16,
            n_ff: 128,
            vocab: 1000,
            embd_row_bytes: 36,
            layers: vec![
                LayerBytes {
                    qkv: 1000,
                    qkv_bias: 0,
                    attn_out: 500,
                    gate_up: 2000,
                    down: 1000,
                };
                2
            ],
            lm_head_bytes: 36_000,
            embed_scale: false,
            q_scale: false,
            final_softcap: false,
            windows: Vec::new(),
        }
    }

    /// A sliding layer reads at most its window of the cache: with one of the two layers
    /// sliding over 8 positions, a token at 100 reads 100 + 8 positions' K and V, and at 5
    /// (inside the window) the same as without one.
    #[test]
    fn sliding_layers_read_only_their_window() {
        let plain = shapes();
        let swa = Shapes {
            windows: vec![Some(8), None],
            ..shapes()
        };
        let (a, p) = (
            swa.cost(BrickId::Attention.into(), 100.0),
            plain.cost(BrickId::Attention.into(), 100.0),
        );
        let per_pos = 2.0 * 32.0 * 2.0;
        assert_eq!(p.bytes_read - a.bytes_read, 92.0 * per_pos);
        assert_eq!(p.flops - a.flops, 92.0 * (4.0 * 64.0 + 5.0 * 4.0));
        assert_eq!(
            swa.cost(BrickId::Attention.into(), 5.0),
            plain.cost(BrickId::Attention.into(), 5.0)
        );
    }

    #[test]
    fn architecture_bricks_by_hand() {
        let s = shapes();
        // q 64 + k 32 values per layer, two 16-value weights: read (96 + 32) x 4, write
        // 96 x 4, 4 FLOPs per value, 2 layers.
        let qk = s.cost(BrickId::QkNorm.into(), 0.0);
        assert_eq!(qk.bytes_read, 2.0 * 128.0 * 4.0);
        assert_eq!(qk.bytes_written, 2.0 * 96.0 * 4.0);
        assert_eq!(qk.flops, 2.0 * 4.0 * 96.0);
        assert_eq!(
            s.cost(BrickId::PostFfnNorm.into(), 0.0),
            s.cost(BrickId::FfnNorm.into(), 0.0)
        );
        let geglu = s.cost(BrickId::FfnGeglu.into(), 0.0);
        let silu = s.cost(BrickId::FfnAct.into(), 0.0);
        assert_eq!(geglu.bytes(), silu.bytes());
        assert_eq!(geglu.flops, 2.0 * 10.0 * 128.0);
        // The scalings add FLOPs only.
        let scaled = Shapes {
            embed_scale: true,
            q_scale: true,
            final_softcap: true,
            ..shapes()
        };
        for (b, extra) in [
            (BrickId::Embed, 64.0),
            (BrickId::Attention, 2.0 * 64.0),
            (BrickId::LmHead, 3.0 * 1000.0),
        ] {
            let (a, z) = (scaled.cost(b.into(), 5.0), s.cost(b.into(), 5.0));
            assert_eq!(a.flops - z.flops, extra, "{}", b.name());
            assert_eq!(a.bytes(), z.bytes(), "{}", b.name());
        }
    }

    #[test]
    fn matvec_cost_by_hand() {
        let s = shapes();
        let c = s.cost(BrickId::Qkv.into(), 0.0);
        // weights 2 x 1000 + x read 2 x 64 x 4; writes 2 x (64 + 64) x 4
        assert_eq!(c.bytes_read, 2000.0 + 512.0);
        assert_eq!(c.bytes_written, 1024.0);
        assert_eq!(c.flops, 2.0 * 2.0 * 64.0 * 128.0);
        let lm = s.cost(BrickId::LmHead.into(), 0.0);
        assert_eq!(lm.flops, 2.0 * 64.0 * 1000.0);
        assert_eq!(lm.bytes_read, 36_000.0 + 256.0);
    }

    #[test]
    fn attention_grows_with_context_and_fused_costs_add() {
        let s = shapes();
        let a10 = s.cost(BrickId::Attention.into(), 10.0);
        let a20 = s.cost(BrickId::Attention.into(), 20.0);
        // ten more positions: 2 layers x 10 x 32 x 2 (K and V) x 2 bytes
        assert_eq!(
            a20.bytes_read - a10.bytes_read,
            2.0 * 10.0 * 32.0 * 2.0 * 2.0
        );
        const F: &[BrickId] = &[BrickId::FfnNorm, BrickId::FfnGateUp];
        let fused = s.cost(Brick::Fused(F), 0.0);
        let sep = s.cost(BrickId::FfnNorm.into(), 0.0) + s.cost(BrickId::FfnGateUp.into(), 0.0);
        assert_eq!(fused, sep);
    }

    #[test]
    fn a_prompt_reads_its_cached_rows_once() {
        let s = shapes();
        let n = 100usize;
        let p = s.prefill_cost(BrickId::Attention.into(), n, 1);
        let none = s.cost(BrickId::Attention.into(), 0.0);
        // 100 tokens' own q, k, v reads plus the 100 cache rows once: 2 layers x 100 x 32
        // x 2 (K and V) x 2 bytes.
        let rows = 2.0 * 100.0 * 32.0 * 2.0 * 2.0;
        assert!((p.bytes_read - (100.0 * none.bytes_read + rows)).abs() < 1e-6);
        // FLOPs still grow with every query's context (mean (n + 1) / 2).
        let mean = s.cost(BrickId::Attention.into(), 50.5);
        assert!((p.flops - 100.0 * mean.flops).abs() < 1e-3 * p.flops);
    }

    #[test]
    fn roofline_takes_the_slower_roof() {
        let roof = Roof {
            bandwidth_gbps: 100.0,
            compute_gflops: 1000.0,
            cache_gbps: None,
        };
        // 1 MB at 100 GB/s = 10 us; 1 MFLOP at 1000 GFLOP/s = 1 us
        let c = Cost {
            bytes_read: 1e6,
            flops: 1e6,
            ..Cost::default()
        };
        assert!((roof.time_us(&c) - 10.0).abs() < 1e-9);
        let c = Cost {
            bytes_read: 1e3,
            flops: 1e8,
            ..Cost::default()
        };
        assert!((roof.time_us(&c) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn resident_bytes_take_the_cache_bandwidth_where_one_was_measured() {
        // 1 MB from memory at 100 GB/s (10 us) and 1 MB in cache at 1000 GB/s (1 us).
        let c = Cost {
            bytes_read: 1.5e6,
            bytes_written: 0.5e6,
            resident: 1e6,
            ..Cost::default()
        };
        let cached = Roof {
            bandwidth_gbps: 100.0,
            compute_gflops: 1000.0,
            cache_gbps: Some(1000.0),
        };
        assert!((cached.time_us(&c) - 11.0).abs() < 1e-9);
        assert!((cached.bandwidth_for(&c) - 2e6 / 11e3).abs() < 1e-9);
        let plain = Roof {
            cache_gbps: None,
            ..cached
        };
        assert!((plain.time_us(&c) - 20.0).abs() < 1e-9);
        assert!((plain.bandwidth_for(&c) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_decode_step_keeps_activations_resident_and_reads_weights_and_cache_from_memory() {
        let s = shapes();
        let qkv = s.cost(BrickId::Qkv.into(), 0.0);
        // Everything but the 2 x 1000 weight bytes.
        assert_eq!(qkv.resident, qkv.bytes() - 2000.0);
        let norm = s.cost(BrickId::AttnResidual.into(), 0.0);
        assert_eq!(norm.resident, norm.bytes());
        let a = s.cost(BrickId::Attention.into(), 10.0);
        assert_eq!(a.resident, a.bytes() - 2.0 * 2.0 * 10.0 * 32.0 * 2.0);
        // A prompt's bricks: all but the weights.
        let p = s.prefill_cost(BrickId::Qkv.into(), 64, 1);
        assert_eq!(p.resident, p.bytes() - 2000.0);
    }

    #[test]
    fn a_prompts_last_layer_past_its_attention_costs_its_tail_rows() {
        let s = shapes();
        let (n, layers) = (64usize, 2.0);
        for brick in [BrickId::AttnOut, BrickId::FfnGateUp, BrickId::FfnResidual] {
            let one = s.cost(brick.into(), 0.0);
            let all = s.prefill_cost(brick.into(), n, n);
            let tail = s.prefill_cost(brick.into(), n, 1);
            assert!((all.flops - n as f64 * one.flops).abs() < 1e-6 * all.flops);
            // One layer of two for 64 rows, the last for one: 32.5 rows' worth.
            let rows = (n as f64 * (layers - 1.0) + 1.0) / layers;
            assert!(
                (tail.flops - rows * one.flops).abs() < 1e-6 * all.flops,
                "{brick:?}"
            );
            assert!(tail.bytes_written < all.bytes_written, "{brick:?}");
        }
        // The attention and the products before it run every row of every layer.
        let qkv = |tail| s.prefill_cost(BrickId::Qkv.into(), n, tail);
        assert_eq!(qkv(1), qkv(n));
    }
}
