//! The forward pass of a llama/qwen2 decoder on the CPU, top to bottom: embed, then per layer
//! attention and feed-forward blocks with residuals, then the final norm and the output head.
//! A batch of consecutive tokens runs together (prompt evaluation); decode is a batch of one.
//!
//! Each brick (DESIGN.md "Bricks") runs inside `rec.time(brick, layer, ..)`, which records a
//! `cpu_timer` span when profiling is on and is a plain call when it is off.

use super::cpu::attention::{attention, AttnShape};
use super::cpu::matmul::{matmul, matmuls};
use super::cpu::ops::{add_in_place, rms_norm, rope, rope_table, silu_mul};
use super::kv_cache::KvCache;
use crate::brick::{BrickId as B, Recorder};
use crate::model::{Config, Weights};
use crate::quant;

/// Which rows of the batch need logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsFor {
    Last,
    All,
}

/// The forward pass's activation buffers, kept by the engine between calls, so a decode step
/// allocates nothing but the logits it returns: fresh buffers every token cost page faults
/// (glibc handed the freed memory back to the kernel and the next token faulted it in again,
/// ~2% of a 0.5B decode step on 2 threads). Every buffer is written before it is read.
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    o: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    normed: Vec<f32>,
}

/// `buf` holding exactly `len` values (its old contents, or zeros where it grew).
fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.resize(len, 0.0);
    buf
}

/// Run `tokens` (already range-checked) at positions `kv.len()..`; returns logits rows
/// (`vocab_size` each) for the requested positions, and advances the cache.
pub fn forward(
    cfg: &Config,
    w: &Weights,
    kv: &mut KvCache,
    tokens: &[u32],
    want: LogitsFor,
    rec: &mut Recorder,
    scratch: &mut Scratch,
) -> Vec<Vec<f32>> {
    let n = tokens.len();
    let pos0 = kv.len();
    let (e, qd, kvd, ff) = (cfg.n_embd, cfg.q_dim(), cfg.kv_dim(), cfg.n_ff);
    let style = cfg.arch.rope_style();
    let shape = AttnShape {
        n_heads: cfg.n_heads,
        n_kv_heads: cfg.n_kv_heads,
        head_dim: cfg.head_dim,
    };

    let Scratch {
        x,
        h,
        q,
        k,
        v,
        att,
        o,
        gate,
        up,
        normed,
    } = scratch;
    let x = sized(x, n * e);
    rec.time(B::Embed, None, || {
        for (row, &tok) in x.chunks_exact_mut(e).zip(tokens) {
            quant::dequantize_row(w.token_embd.ty, w.row(&w.token_embd, tok as usize), row);
        }
    });

    let h = sized(h, n * e);
    let (q, k, v) = (sized(q, n * qd), sized(k, n * kvd), sized(v, n * kvd));
    let att = sized(att, n * qd);
    let o = sized(o, n * e);
    let (gate, up) = (sized(gate, n * ff), sized(up, n * ff));
    let mut tables = Vec::new();
    for (l, lw) in w.layers.iter().enumerate() {
        let layer = Some(l);
        rec.time(B::AttnNorm, layer, || {
            for (hr, xr) in h.chunks_exact_mut(e).zip(x.chunks_exact(e)) {
                rms_norm(xr, &lw.attn_norm, cfg.norm_eps, hr);
            }
        });
        rec.time(B::Qkv, layer, || {
            matmuls(
                w,
                h,
                &mut [(&lw.wq, &mut *q), (&lw.wk, &mut *k), (&lw.wv, &mut *v)],
            );
            for (out, bias) in [(&mut *q, &lw.bq), (&mut *k, &lw.bk), (&mut *v, &lw.bv)] {
                if let Some(b) = bias {
                    out.chunks_exact_mut(b.len())
                        .for_each(|r| add_in_place(r, b));
                }
            }
        });
        rec.time(B::Rope, layer, || {
            if tables.is_empty() {
                tables = (0..n)
                    .map(|t| rope_table(pos0 + t, cfg.rope_dims, cfg.rope_base))
                    .collect();
            }
            for (t, table) in tables.iter().enumerate() {
                rope(&mut q[t * qd..(t + 1) * qd], cfg.head_dim, table, style);
                rope(&mut k[t * kvd..(t + 1) * kvd], cfg.head_dim, table, style);
            }
        });
        // attention stores this batch's K and V first
        rec.time(B::Attention, layer, || {
            for t in 0..n {
                let (kt, vt) = (&k[t * kvd..(t + 1) * kvd], &v[t * kvd..(t + 1) * kvd]);
                kv.store(l, pos0 + t, kt, vt);
            }
            let (keys, values) = (kv.keys(l, pos0 + n), kv.values(l, pos0 + n));
            attention(shape, q, keys, values, pos0, &mut *att);
        });
        rec.time(B::AttnOut, layer, || matmul(w, &lw.wo, att, &mut *o));
        rec.time(B::AttnResidual, layer, || add_in_place(&mut *x, o));
        rec.time(B::FfnNorm, layer, || {
            for (hr, xr) in h.chunks_exact_mut(e).zip(x.chunks_exact(e)) {
                rms_norm(xr, &lw.ffn_norm, cfg.norm_eps, hr);
            }
        });
        rec.time(B::FfnGateUp, layer, || {
            matmuls(w, h, &mut [(&lw.w_gate, &mut *gate), (&lw.w_up, &mut *up)]);
        });
        rec.time(B::FfnAct, layer, || silu_mul(&mut *gate, up));
        rec.time(B::FfnDown, layer, || matmul(w, &lw.w_down, gate, &mut *o));
        rec.time(B::FfnResidual, layer, || add_in_place(&mut *x, o));
    }
    kv.advance(n);

    let rows: Vec<usize> = match want {
        LogitsFor::Last => vec![n - 1],
        LogitsFor::All => (0..n).collect(),
    };
    let normed = sized(normed, rows.len() * e);
    rec.time(B::FinalNorm, None, || {
        for (hr, &t) in normed.chunks_exact_mut(e).zip(&rows) {
            rms_norm(&x[t * e..(t + 1) * e], &w.output_norm, cfg.norm_eps, hr);
        }
    });
    let vocab = w.output.rows;
    let mut logits = vec![0f32; rows.len() * vocab];
    rec.time(B::LmHead, None, || {
        matmul(w, &w.output, normed, &mut logits)
    });
    if rows.len() == 1 {
        return vec![logits];
    }
    logits.chunks_exact(vocab).map(|r| r.to_vec()).collect()
}
