//! Matrix times a batch of activation rows, with weights in their GGUF type.
//!
//! Each activation row is quantized once into the weight type's vec-dot format (as llama.cpp
//! does), then every weight row is dotted with every activation row. Rows are split across the
//! engine's pool (`pool.rs`); each weight row is read once per batch.

use super::fma::with_fma;
use super::pool;
use crate::model::weights::{Mat, Weights};
use crate::quant::{has_x4, quantize_act, vec_dot, vec_dot_x4, ActType};

/// Weight rows per parallel task for a batch: enough work to amortise scheduling.
const ROWS_PER_TASK: usize = 16;

/// Tasks per thread for one token. A token's product streams its weights from memory once, and
/// small interleaved tasks (the threads taking 16-row pieces in turn) broke each thread's
/// stream every few kilobytes, so the hardware prefetchers kept restarting. Measured on the
/// 2-core EPYC dev machine, SmolLM2 decode with 2 threads, tasks per thread 1/2/4/8/64:
/// 157/154/153/140/112 tok/s (the 16-row pieces were ~100). Two contiguous tasks per thread
/// keep the streams long and still let a thread that starts late hand over half its share.
const TASKS_PER_THREAD_ONE_TOKEN: usize = 2;

/// Rows per task: `ROWS_PER_TASK` for a batch, else the rows split into a few contiguous
/// tasks per thread (at least `ROWS_PER_TASK`).
fn rows_per_task(rows: usize, n: usize) -> usize {
    if n > 1 {
        return ROWS_PER_TASK;
    }
    let tasks = pool::global().threads() * TASKS_PER_THREAD_ONE_TOKEN;
    rows.div_ceil(tasks).max(ROWS_PER_TASK)
}

/// `out[t][r] = W[r] · x[t]` for the `n = x.len() / m.cols` rows of `x`; `out` is `n × m.rows`.
pub fn matmul(w: &Weights, m: &Mat, x: &[f32], out: &mut [f32]) {
    let n = x.len() / m.cols;
    debug_assert_eq!(x.len(), n * m.cols);
    debug_assert_eq!(out.len(), n * m.rows);
    let kind = ActType::for_weights(m.ty);
    let acts: Vec<_> = x
        .chunks_exact(m.cols)
        .map(|row| quantize_act(kind, row))
        .collect();
    let bytes = w.bytes(m);
    let rb = m.row_bytes();
    // `[row][token]` blocks, so each task writes one contiguous block (for one token this is
    // already `out`'s layout).
    let mut out_t = if n == 1 {
        Vec::new()
    } else {
        vec![0f32; n * m.rows]
    };
    let target = if n == 1 { &mut *out } else { &mut out_t[..] };
    let per_task = rows_per_task(m.rows, n);
    // Tokens taken four at a time (a kernel that unpacks each weight block once for four,
    // giving the same bits as one by one); the rest one by one.
    let fours = if has_x4(m.ty) { n / 4 * 4 } else { 0 };
    pool::par_chunks_mut(target, per_task * n, |ci, chunk| {
        let rows = &bytes[ci * per_task * rb..][..chunk.len() / n * rb];
        with_fma(
            #[inline(always)]
            || {
                for (row, per_tok) in rows.chunks_exact(rb).zip(chunk.chunks_exact_mut(n)) {
                    for t in (0..fours).step_by(4) {
                        let four = std::array::from_fn(|i| &acts[t + i]);
                        let r = vec_dot_x4(m.ty, row, four).expect("has_x4 said so");
                        per_tok[t..t + 4].copy_from_slice(&r);
                    }
                    for (o, a) in per_tok[fours..].iter_mut().zip(&acts[fours..]) {
                        *o = vec_dot(m.ty, row, a);
                    }
                }
            },
        )
    });
    if n == 1 {
        return;
    }
    for (r, per_tok) in out_t.chunks_exact(n).enumerate() {
        for (t, &v) in per_tok.iter().enumerate() {
            out[t * m.rows + r] = v;
        }
    }
}
