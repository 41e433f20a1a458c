//! The forward pass of a llama/qwen2/qwen3/gemma3/phi3 decoder on the CPU, top to bottom:
//! embed, then per layer attention and feed-forward blocks with residuals, then the final norm
//! and the output head. The architectures' differences come from the configuration (per-head
//! Q/K norms, per-layer RoPE, where the attention scale goes, sliding-window layers, norms of
//! the attention and FFN outputs, GeGLU, embedding scale, logit cap).
//! A batch of consecutive tokens runs together (prompt evaluation); decode is a batch of one.
//! Several sequences, each with its own KV cache, run as one batch (`forward_batch`): their
//! rows share every product, and each sequence's rows attend to its own cache.
//!
//! Each brick (docs/DESIGN.md "Bricks") runs inside `rec.time(brick, layer, ..)`, which records a
//! `cpu_timer` span when profiling is on and is a plain call when it is off.

use super::attention::{
    attention_rows, attention_with, rows_together, AttnLayer, AttnShape, SeqRows,
};
use super::geglu::{geglu, geglu_kernel};
use super::kernel_names::KernelNames;
use super::kv_cache::KvCache;
use super::matmul::{matmul, matmuls};
use super::ops::{
    add_in_place, rms_norm, rms_norm_heads, rope, rope_table_scaled, scale_in_place, silu_mul,
    softcap_in_place,
};
use super::pool;
use super::repack::Repacked;
use crate::brick::{BrickId as B, Recorder};
use crate::engine::options::LogitsFor;
use crate::model::config::{FfnAct, RopeParams};
use crate::model::Model;
use crate::quant;

/// The forward pass's activation buffers, kept by the engine between calls, so a decode step
/// allocates nothing but the logits it returns: fresh buffers every token cost page faults
/// (glibc handed the freed memory back to the kernel and the next token faulted it in again).
/// Every buffer is written before it is read.
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
    /// A batch pass's logits rows (`forward_batch_rows`), kept so a step reuses its pages.
    logits: Vec<f32>,
    /// The kernels the bricks ran, named as they were chosen (the drill-down's list).
    pub kernels: KernelNames,
}

/// `f(t, row)` for every `len`-value row `t` of `rows`. A prompt's rows go over the engine's
/// pool, a few rows per task; one row runs on the calling thread. Each row is computed alone
/// with the same operations whichever thread takes it, so the bits do not depend on the split.
/// On the calling thread alone, these per-token steps (norms, RoPE, residual adds) were a
/// visible share of a prompt at many threads (docs/measurements/cpu-engine.md).
fn per_row(rows: &mut [f32], len: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let n = rows.len() / len;
    // About two tasks per thread, so a late thread's share can be taken over.
    let per = n.div_ceil(2 * pool::global().threads()).max(1);
    pool::par_chunks_mut(rows, per * len, |task, piece| {
        for (i, row) in piece.chunks_exact_mut(len).enumerate() {
            f(task * per + i, row);
        }
    });
}

/// One position's RoPE (cos, sin) pairs (`ops::rope_table_scaled`).
type RopeTable = Vec<(f32, f32)>;

/// `buf` holding exactly `len` values (its old contents, or zeros where it grew).
impl Scratch {
    /// The logits rows the last `forward_batch_rows` left.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.resize(len, 0.0);
    buf
}

/// Run `tokens` (already range-checked) at positions `kv.len()..`; returns logits rows
/// (`vocab_size` each) for the requested positions, and advances the cache.
pub fn forward(
    model: &Model,
    kv: &mut KvCache,
    tokens: &[u32],
    want: LogitsFor,
    rec: &mut Recorder,
    scratch: &mut Scratch,
    fast: Option<&Repacked>,
) -> Vec<Vec<f32>> {
    let mut seqs = [(kv, tokens)];
    forward_batch(model, &mut seqs, want, rec, scratch, fast)
        .pop()
        .unwrap_or_default()
}

/// `forward` for several sequences in one pass: each `(cache, tokens)` runs its tokens at
/// positions `cache.len()..`, their rows side by side in every product, each sequence's rows
/// attending to its own cache. Returns each sequence's logits rows, as `forward` would, and
/// advances each cache. Every row's arithmetic is that of the row alone in a batch of the
/// same products, so under `exact` a sequence's logits are its logits run by itself.
pub fn forward_batch(
    model: &Model,
    seqs: &mut [(&mut KvCache, &[u32])],
    want: LogitsFor,
    rec: &mut Recorder,
    scratch: &mut Scratch,
    fast: Option<&Repacked>,
) -> Vec<Vec<Vec<f32>>> {
    let rows = forward_batch_rows(model, seqs, want, rec, scratch, fast);
    let logits = std::mem::take(&mut scratch.logits);
    if rows == 1 {
        return vec![vec![logits]];
    }
    let mut rows = logits
        .chunks_exact(model.weights.output.rows)
        .map(|r| r.to_vec());
    seqs.iter()
        .map(|(_, tokens)| {
            let m = match want {
                LogitsFor::Last => 1,
                LogitsFor::All => tokens.len(),
            };
            rows.by_ref().take(m).collect()
        })
        .collect()
}

/// `forward_batch` with the logits left in `scratch` (`Scratch::logits`: the wanted rows in
/// order, sequence by sequence), their count returned: a batch step's greedy picks read them
/// there, where copying each row out and a fresh buffer a step cost a step of 8 sequences
/// about a millisecond on one thread.
pub fn forward_batch_rows(
    model: &Model,
    seqs: &mut [(&mut KvCache, &[u32])],
    want: LogitsFor,
    rec: &mut Recorder,
    scratch: &mut Scratch,
    fast: Option<&Repacked>,
) -> usize {
    let (cfg, w) = (&model.config, &model.weights);
    // Each sequence's first row and its first position.
    let mut starts = Vec::with_capacity(seqs.len());
    let mut n = 0;
    for (kv, tokens) in seqs.iter() {
        starts.push((n, kv.len()));
        n += tokens.len();
    }
    let (e, qd, kvd, ff) = (cfg.n_embd, cfg.q_dim(), cfg.kv_dim(), cfg.n_ff);
    let style = cfg.arch.rope_style();
    let shape = AttnShape::of(cfg);

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
        logits,
        kernels,
    } = scratch;
    // Names of the element-wise steps without an ISA dispatch (the compiler's vectorisation).
    const RMS_NORM: &str = "ops::rms_norm (portable)";
    const ADD: &str = "ops::add_in_place (portable)";
    const SCALE: &str = "ops::scale_in_place (portable)";
    // gemma3's post-norms: rms_norm_heads with the whole row as its one piece, in place.
    const RMS_NORM_ROWS: &str = "ops::rms_norm_heads (portable)";
    let x = sized(x, n * e);
    rec.time(B::Embed, None, || {
        let tokens = seqs.iter().flat_map(|(_, t)| t.iter());
        for (row, &tok) in x.chunks_exact_mut(e).zip(tokens) {
            quant::dequantize_row(w.token_embd.ty, w.row(&w.token_embd, tok as usize), row);
            if let Some(s) = cfg.embed_scale {
                scale_in_place(row, s);
            }
        }
    });
    let embed = "quant::dequantize_row (portable)";
    kernels.op(rec, B::Embed, None, embed, Some(&w.token_embd));
    if cfg.embed_scale.is_some() {
        kernels.op(rec, B::Embed, None, SCALE, None);
    }

    let h = sized(h, n * e);
    let (q, k, v) = (sized(q, n * qd), sized(k, n * kvd), sized(v, n * kvd));
    let att = sized(att, n * qd);
    let o = sized(o, n * e);
    let (gate, up) = (sized(gate, n * ff), sized(up, n * ff));
    // The layers' RoPE tables, made by the first layer using each (base, scale): at most two,
    // the global layers' and the sliding layers' (`Config::layer_rope`). On the stack, so a
    // decode step allocates no more than one table's.
    let mut tables: [Option<(RopeParams, Vec<RopeTable>)>; 2] = [None, None];
    // Rows that ran the last layer to its end (`keep_last_rows`).
    let mut kept = n;
    for (l, lw) in w.layers.iter().enumerate() {
        let layer = Some(l);
        rec.time(B::AttnNorm, layer, || {
            let x = &*x;
            per_row(h, e, |t, hr| {
                rms_norm(&x[t * e..][..e], &lw.attn_norm, cfg.norm_eps, hr)
            });
        });
        kernels.op(rec, B::AttnNorm, layer, RMS_NORM, None);
        rec.time(B::Qkv, layer, || {
            matmuls(
                w,
                h,
                &mut [(&lw.wq, &mut *q), (&lw.wk, &mut *k), (&lw.wv, &mut *v)],
                fast,
            );
            for (out, bias) in [(&mut *q, &lw.bq), (&mut *k, &lw.bk), (&mut *v, &lw.bv)] {
                if let Some(b) = bias {
                    out.chunks_exact_mut(b.len())
                        .for_each(|r| add_in_place(r, b));
                }
            }
        });
        kernels.products(rec, B::Qkv, layer, &[&lw.wq, &lw.wk, &lw.wv]);
        if let (Some(qn), Some(kn)) = (&lw.q_norm, &lw.k_norm) {
            rec.time(B::QkNorm, layer, || {
                per_row(q, qd, |_, qr| rms_norm_heads(qr, qn, cfg.norm_eps));
                per_row(k, kvd, |_, kr| rms_norm_heads(kr, kn, cfg.norm_eps));
            });
            kernels.op(
                rec,
                B::QkNorm,
                layer,
                "ops::rms_norm_heads (portable)",
                None,
            );
        }
        rec.time(B::Rope, layer, || {
            let p = cfg.layer_rope(l);
            let has = |slot: &Option<(RopeParams, Vec<RopeTable>)>| {
                matches!(slot, Some((q, _)) if *q == p)
            };
            let at = (tables.iter().position(has))
                .or_else(|| tables.iter().position(Option::is_none))
                .unwrap_or(1);
            if !has(&tables[at]) {
                let t = seqs
                    .iter()
                    .zip(&starts)
                    .flat_map(|((_, tokens), &(_, pos0))| pos0..pos0 + tokens.len())
                    .map(|pos| rope_table_scaled(pos, cfg.rope_dims, p.base, p.freq_scale))
                    .collect();
                tables[at] = Some((p, t));
            }
            if let Some((_, table)) = &tables[at] {
                per_row(q, qd, |t, qr| rope(qr, cfg.head_dim, &table[t], style));
                per_row(k, kvd, |t, kr| rope(kr, cfg.head_dim, &table[t], style));
            }
        });
        kernels.op(rec, B::Rope, layer, "ops::rope (portable)", None);
        // Fast numerics' attention kernels where the fast products' kernels are on.
        let fast_attention = fast.is_some_and(|r| r.kernels);
        // The layer's score scale and sliding window (gemma3's sliding layers read only it).
        let layer_attn = AttnLayer {
            scale: cfg.kq_scale(),
            window: cfg.layer_window(l),
        };
        // attention stores this batch's K and V first (and scales Q where the model does so
        // before attention, ggml_scale after RoPE)
        rec.time(B::Attention, layer, || {
            if cfg.attn_scale_on_q {
                per_row(q, qd, |_, qr| scale_in_place(qr, cfg.attn_scale));
            }
            for ((kv, tokens), &(r0, pos0)) in seqs.iter_mut().zip(&starts) {
                for t in 0..tokens.len() {
                    let r = r0 + t;
                    let (kt, vt) = (&k[r * kvd..(r + 1) * kvd], &v[r * kvd..(r + 1) * kvd]);
                    kv.store(l, pos0 + t, kt, vt);
                }
            }
            // A decode step's sequences in one parallel region; prompts one by one.
            if seqs.len() > 1 && seqs.iter().all(|(_, t)| rows_together(t.len())) {
                let rows: Vec<SeqRows> = seqs
                    .iter()
                    .zip(&starts)
                    .map(|((kv, tokens), &(r0, pos0))| {
                        let m = tokens.len();
                        SeqRows {
                            q: &q[r0 * qd..(r0 + m) * qd],
                            keys: kv.keys(l, pos0 + m),
                            values: kv.values(l, pos0 + m),
                            pos0,
                        }
                    })
                    .collect();
                attention_rows(shape, layer_attn, &rows, att, fast_attention);
                return;
            }
            for ((kv, tokens), &(r0, pos0)) in seqs.iter().zip(&starts) {
                let m = tokens.len();
                let (keys, values) = (kv.keys(l, pos0 + m), kv.values(l, pos0 + m));
                let (q, att) = (&q[r0 * qd..(r0 + m) * qd], &mut att[r0 * qd..(r0 + m) * qd]);
                attention_with(
                    shape,
                    layer_attn,
                    q,
                    keys,
                    values,
                    pos0,
                    att,
                    fast_attention,
                );
            }
        });
        if rec.enabled() {
            let most = seqs.iter().map(|(_, t)| t.len()).max().unwrap_or(1);
            let name = super::attention::kernel_name(most, cfg.head_dim, fast_attention);
            if cfg.attn_scale_on_q {
                kernels.op(rec, B::Attention, layer, SCALE, None);
            }
            kernels.op(rec, B::Attention, layer, name, None);
        }
        // The last layer's rows past its attention feed only the logits (their K and V are
        // cached above): where only each sequence's last row is wanted, the rest stop here.
        let m = match want {
            LogitsFor::Last if l + 1 == w.layers.len() => {
                keep_last_rows(&starts, seqs, n, (x, e), (att, qd))
            }
            _ => n,
        };
        kept = m;
        let (x, h, att) = (&mut x[..m * e], &mut h[..m * e], &mut att[..m * qd]);
        let (o, gate, up) = (&mut o[..m * e], &mut gate[..m * ff], &mut up[..m * ff]);
        rec.time(B::AttnOut, layer, || matmul(w, &lw.wo, att, &mut *o, fast));
        kernels.products(rec, B::AttnOut, layer, &[&lw.wo]);
        if let Some(pn) = &lw.post_attn_norm {
            rec.time(B::PostAttnNorm, layer, || {
                per_row(o, e, |_, or| rms_norm_heads(or, pn, cfg.norm_eps));
            });
            kernels.op(rec, B::PostAttnNorm, layer, RMS_NORM_ROWS, None);
        }
        rec.time(B::AttnResidual, layer, || {
            let o = &*o;
            per_row(x, e, |t, xr| add_in_place(xr, &o[t * e..][..e]));
        });
        kernels.op(rec, B::AttnResidual, layer, ADD, None);
        rec.time(B::FfnNorm, layer, || {
            let x = &*x;
            per_row(h, e, |t, hr| {
                rms_norm(&x[t * e..][..e], &lw.ffn_norm, cfg.norm_eps, hr)
            });
        });
        kernels.op(rec, B::FfnNorm, layer, RMS_NORM, None);
        rec.time(B::FfnGateUp, layer, || {
            matmuls(
                w,
                h,
                &mut [(&lw.w_gate, &mut *gate), (&lw.w_up, &mut *up)],
                fast,
            );
        });
        kernels.products(rec, B::FfnGateUp, layer, &[&lw.w_gate, &lw.w_up]);
        match cfg.ffn_act {
            FfnAct::SiluGlu => {
                rec.time(B::FfnAct, layer, || silu_mul(&mut *gate, up));
                let act = super::ops::silu_mul_kernel();
                kernels.op(rec, B::FfnAct, layer, act, None);
            }
            FfnAct::GeluGlu => {
                rec.time(B::FfnGeglu, layer, || geglu(&mut *gate, up));
                kernels.op(rec, B::FfnGeglu, layer, geglu_kernel(), None);
            }
        }
        rec.time(B::FfnDown, layer, || {
            matmul(w, &lw.w_down, gate, &mut *o, fast)
        });
        kernels.products(rec, B::FfnDown, layer, &[&lw.w_down]);
        if let Some(pn) = &lw.post_ffn_norm {
            rec.time(B::PostFfnNorm, layer, || {
                per_row(o, e, |_, or| rms_norm_heads(or, pn, cfg.norm_eps));
            });
            kernels.op(rec, B::PostFfnNorm, layer, RMS_NORM_ROWS, None);
        }
        rec.time(B::FfnResidual, layer, || {
            let o = &*o;
            per_row(x, e, |t, xr| add_in_place(xr, &o[t * e..][..e]));
        });
        kernels.op(rec, B::FfnResidual, layer, ADD, None);
    }
    for (kv, tokens) in seqs.iter_mut() {
        kv.advance(tokens.len());
    }

    // The rows whose logits are wanted, sequence by sequence (the first `kept` where the last
    // layer kept only those).
    let rows: Vec<usize> = if kept < n {
        (0..kept).collect()
    } else {
        seqs.iter()
            .zip(&starts)
            .flat_map(|((_, tokens), &(r0, _))| match want {
                LogitsFor::Last => r0 + tokens.len() - 1..r0 + tokens.len(),
                LogitsFor::All => r0..r0 + tokens.len(),
            })
            .collect()
    };
    let normed = sized(normed, rows.len() * e);
    rec.time(B::FinalNorm, None, || {
        for (hr, &t) in normed.chunks_exact_mut(e).zip(&rows) {
            rms_norm(&x[t * e..(t + 1) * e], &w.output_norm, cfg.norm_eps, hr);
        }
    });
    kernels.op(rec, B::FinalNorm, None, RMS_NORM, None);
    let vocab = w.output.rows;
    let logits = sized(logits, rows.len() * vocab);
    rec.time(B::LmHead, None, || {
        matmul(w, &w.output, normed, logits, fast);
        if let Some(cap) = cfg.final_logit_softcap {
            per_row(logits, vocab, |_, r| softcap_in_place(r, cap));
        }
    });
    kernels.products(rec, B::LmHead, None, &[&w.output]);
    if cfg.final_logit_softcap.is_some() {
        let cap = "ops::softcap_in_place (portable)";
        kernels.op(rec, B::LmHead, None, cap, None);
    }
    rows.len()
}

/// Moves each sequence's last row of the residual stream `x` and of the attention output `att`
/// (rows of `e` and `qd` values) to the front, in sequence order, and returns how many there
/// are: the rows the last layer then runs to its end. `starts` holds each sequence's first
/// row among the `n`.
fn keep_last_rows(
    starts: &[(usize, usize)],
    seqs: &[(&mut KvCache, &[u32])],
    n: usize,
    (x, e): (&mut [f32], usize),
    (att, qd): (&mut [f32], usize),
) -> usize {
    if seqs.len() == n {
        return n;
    }
    for (i, ((_, tokens), &(r0, _))) in seqs.iter().zip(starts).enumerate() {
        // Rows only move forward (`i <= r`), so no row is overwritten before it moves.
        let r = r0 + tokens.len() - 1;
        x.copy_within(r * e..(r + 1) * e, i * e);
        att.copy_within(r * qd..(r + 1) * qd, i * qd);
    }
    seqs.len()
}

#[cfg(test)]
mod tests {
    use super::per_row;

    /// Every row is handed to `f` once, with its own index, for batch sizes around the
    /// split's boundaries (one row, fewer rows than tasks, several rows per task).
    #[test]
    fn per_row_gives_every_row_its_own_index_once() {
        let len = 3;
        for n in [1usize, 2, 3, 7, 16, 37, 64, 129] {
            let mut rows = vec![-1f32; n * len];
            let calls = std::sync::atomic::AtomicUsize::new(0);
            per_row(&mut rows, len, |t, row| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                row.iter_mut().for_each(|v| *v += t as f32 + 1.0);
            });
            assert_eq!(calls.into_inner(), n, "{n} rows");
            for (t, row) in rows.chunks_exact(len).enumerate() {
                assert!(
                    row.iter().all(|&v| v == t as f32),
                    "row {t} of {n}: {row:?}"
                );
            }
        }
    }
}
