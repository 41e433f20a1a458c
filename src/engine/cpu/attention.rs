//! Causal scaled dot-product attention over the f16 KV cache, with grouped-query heads.
//!
//! The arithmetic follows llama.cpp's CPU flash-attention kernel, which its default
//! (`flash_attn = auto`) selects on the CPU and which the reference fixtures were made with
//! (it matched the F32 conformance model to 1.3e-4 where a plain softmax gave 6.8e-4):
//! - fewer than 64 queries (decode, short prompts): the query is rounded to f16 for the K·q
//!   products, the softmax is online, and the weighted sum of V accumulates in f16;
//! - 64 or more queries (llama.cpp's tiled path): f32 query and f32 accumulation.

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::attention_tiled::{tiled_head_scalar, TiledRows};
use crate::model::Config;
use crate::quant::fma::with_fma;
use crate::quant::simd_order::dot_f16_f32;

/// Head widths whose decode buffers live on the stack.
const STACK_HEAD: usize = 256;

/// Query rows from which llama.cpp switches to its tiled f32 kernel.
const TILED_FROM: usize = 64;

/// Shape of the attention problem.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

impl AttnShape {
    /// The attention shape of a model.
    pub fn of(c: &Config) -> AttnShape {
        AttnShape {
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
        }
    }
}

/// The score scale of plain attention, `1/sqrt(head_dim)` (llama.cpp's `kq_scale`).
pub fn default_scale(head_dim: usize) -> f32 {
    1.0 / (head_dim as f32).sqrt()
}

/// Which keys a layer's queries see besides the causal rule, and how scores are scaled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnLayer {
    /// Multiplies every K·q score (`default_scale`, or 1 where the query was scaled before).
    pub scale: f32,
    /// Sliding window: the query at position `p` sees the keys at `p - n + 1 ..= p` only
    /// (llama.cpp's `is_masked_swa`, standard type: masked where `p - p_key >= n`).
    pub window: Option<usize>,
}

impl AttnLayer {
    /// Plain causal attention with `default_scale`.
    pub fn causal(head_dim: usize) -> AttnLayer {
        AttnLayer {
            scale: default_scale(head_dim),
            window: None,
        }
    }

    /// The first key position the query at `pos` sees.
    pub fn first_key(self, pos: usize) -> usize {
        self.window.map_or(0, |n| (pos + 1).saturating_sub(n))
    }
}

/// Plain causal attention for `n` query rows `q` (`n × n_heads·head_dim`) at positions
/// `pos0..pos0+n`, against cached `keys`/`values` (`[pos][n_kv_heads·head_dim]`, positions
/// `0..pos0+n`), scores scaled by 1/sqrt(head_dim). Writes `out` (`n × n_heads·head_dim`).
pub fn attention(
    shape: AttnShape,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    pos0: usize,
    out: &mut [f32],
) {
    attention_layer(
        shape,
        AttnLayer::causal(shape.head_dim),
        q,
        keys,
        values,
        pos0,
        out,
    )
}

/// `attention` with the scores scaled by `scale` (`Config::kq_scale`: 1 where the model
/// scaled Q before).
pub fn attention_scaled(
    shape: AttnShape,
    scale: f32,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    pos0: usize,
    out: &mut [f32],
) {
    let layer = AttnLayer {
        scale,
        window: None,
    };
    attention_layer(shape, layer, q, keys, values, pos0, out)
}

/// `attention` with a layer's score scale and sliding window (`AttnLayer`). Keys outside the
/// window are not read at all: llama.cpp's kernels skip masked keys (`-inf` in the mask)
/// without touching the running softmax, so starting at the window's first key gives its
/// bits, and a long context costs a sliding layer only its window.
pub fn attention_layer(
    shape: AttnShape,
    layer: AttnLayer,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    pos0: usize,
    out: &mut [f32],
) {
    attention_with(shape, layer, q, keys, values, pos0, out, false)
}

/// Whether `fast` numerics' attention kernels (`attention_fast`) take heads of `hd` here.
fn fast_kernels(hd: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::attention_fast::takes(hd) && crate::quant::x86::available();
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = hd;
        false
    }
}

/// `attention_layer`, under `fast` numerics (`fast`) for heads of 64, 128 and 256 on a CPU
/// with AVX2, FMA and F16C: `attention_fast` (keys a block at a time, f32 weights; within the
/// `fast` bounds, not llama.cpp's bits); other heads and CPUs take the exact kernels either way.
#[allow(clippy::too_many_arguments)]
pub fn attention_with(
    shape: AttnShape,
    layer: AttnLayer,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    pos0: usize,
    out: &mut [f32],
    fast: bool,
) {
    let AttnShape {
        n_heads,
        n_kv_heads,
        head_dim: hd,
    } = shape;
    let q_dim = n_heads * hd;
    let kv_dim = n_kv_heads * hd;
    let group = n_heads / n_kv_heads;
    let scale = layer.scale;
    if rows_together(q.len() / q_dim) {
        let one = SeqRows {
            q,
            keys,
            values,
            pos0,
        };
        return attention_rows(shape, layer, &[one], out, fast);
    }
    // The tiled path reads K and V as f32: converted once here for every head and query
    // (exact, every f16 being an f32) instead of row by row inside each (query, head) task;
    // rows from the first query's first key on (`kf` row `i` is position `first0 + i`).
    let n_all = pos0 + q.len() / q_dim;
    let first0 = layer.first_key(pos0);
    let len = (n_all - first0) * kv_dim;
    let (mut kf, mut vf) = (vec![0f32; len], vec![0f32; len]);
    keys[first0 * kv_dim..n_all * kv_dim].convert_to_f32_slice(&mut kf);
    values[first0 * kv_dim..n_all * kv_dim].convert_to_f32_slice(&mut vf);
    let simd = F16Ops::detect().simd;
    let fast = fast && fast_kernels(hd);
    let pairs = q.len() / hd;
    let per = pairs_per_task(pairs, super::pool::global().threads());
    super::pool::par_chunks_mut(out, per * hd, |task, os| {
        with_fma(
            #[inline(always)]
            || {
                for (i, o) in os.chunks_exact_mut(hd).enumerate() {
                    let idx = task * per + i;
                    let (t, h) = (idx / n_heads, idx % n_heads);
                    let g = h / group;
                    let n_ctx = pos0 + t + 1;
                    let first = layer.first_key(pos0 + t);
                    let qrow = &q[t * q_dim + h * hd..t * q_dim + (h + 1) * hd];
                    let skip = (first - first0) * kv_dim;
                    let rows = TiledRows {
                        k: &kf[skip..],
                        v: &vf[skip..],
                        stride: kv_dim,
                        at: g * hd,
                        n: n_ctx - first,
                    };
                    let sum = tiled_head(simd, fast, qrow, rows, scale, o);
                    normalize(o, sum);
                }
            },
        )
    });
}

/// Whether a sequence's `queries` rows take `attention_rows` beside other sequences' (the
/// cached-row kernels; more take the tiled ones, sequence by sequence).
pub fn rows_together(queries: usize) -> bool {
    queries < TILED_FROM
}

/// One sequence's part of a batch step's attention (`attention_rows`).
pub struct SeqRows<'a> {
    /// The sequence's query rows (q_dim values each), at positions pos0, pos0 + 1, ...
    pub q: &'a [f32],
    /// Its cache's K and V rows, through its last query's position.
    pub keys: &'a [f16],
    pub values: &'a [f16],
    pub pos0: usize,
}

/// The cached-row attention of one or more sequences of a few query rows each
/// (`rows_together`: a decode step, a batch step), in one parallel region over every
/// sequence's (query, head) pairs, where a region a sequence left most threads idle at 16
/// threads; `out` holds the sequences' rows in order. `attention_with` takes it for one
/// sequence's short run of queries, so a sequence gives the same bits alone and in a batch.
pub fn attention_rows(
    shape: AttnShape,
    layer: AttnLayer,
    seqs: &[SeqRows],
    out: &mut [f32],
    fast: bool,
) {
    let AttnShape {
        n_heads,
        n_kv_heads,
        head_dim: hd,
    } = shape;
    let q_dim = n_heads * hd;
    let group = n_heads / n_kv_heads;
    let kit = PairKit {
        f16_ops: F16Ops::detect(),
        fast: fast && fast_kernels(hd),
        hd,
        kv_dim: n_kv_heads * hd,
        scale: layer.scale,
    };
    let rows: usize = seqs.iter().map(|sq| sq.q.len() / q_dim).sum();
    assert_eq!(rows * q_dim, out.len(), "a row of `out` for each query row");
    let per = pairs_per_task(rows * n_heads, super::pool::global().threads());
    super::pool::par_chunks_mut(out, per * hd, |task, os| {
        with_fma(
            #[inline(always)]
            || {
                for (i, o) in os.chunks_exact_mut(hd).enumerate() {
                    let idx = task * per + i;
                    let (row, h) = (idx / n_heads, idx % n_heads);
                    // The row's sequence: a step's few, walked (nothing allocated, as the
                    // decode step's one sequence takes this path too).
                    let (mut sq, mut t) = (&seqs[0], row);
                    for next in &seqs[1..] {
                        let m = sq.q.len() / q_dim;
                        if t < m {
                            break;
                        }
                        (sq, t) = (next, t - m);
                    }
                    let n_ctx = sq.pos0 + t + 1;
                    let first = layer.first_key(sq.pos0 + t);
                    let qrow = &sq.q[t * q_dim + h * hd..t * q_dim + (h + 1) * hd];
                    let kv = (sq.keys, sq.values);
                    let sum = kit.cached_pair(qrow, kv, h / group, (first, n_ctx), o);
                    normalize(o, sum);
                }
            },
        )
    });
}

/// What every (query, head) pair over cached f16 rows shares (`PairKit::cached_pair`).
struct PairKit {
    f16_ops: F16Ops,
    fast: bool,
    hd: usize,
    kv_dim: usize,
    scale: f32,
}

impl PairKit {
    /// One query row's head over its group `g`'s cached K and V rows `first..n_ctx`: the
    /// softmax-weighted V rows into `o`, not yet divided by the weights' sum, which it
    /// returns. `fast`: `attention_fast`'s blocks; otherwise llama.cpp's key-by-key order.
    #[inline(always)]
    fn cached_pair(
        &self,
        qrow: &[f32],
        (keys, values): (&[f16], &[f16]),
        g: usize,
        (first, n_ctx): (usize, usize),
        o: &mut [f32],
    ) -> f32 {
        let PairKit {
            f16_ops,
            fast,
            hd,
            kv_dim,
            scale,
        } = *self;
        if fast {
            let (k, v) = (&keys[first * kv_dim..], &values[first * kv_dim..]);
            let rows = (kv_dim, g * hd, n_ctx - first);
            return cached_head_fast(qrow, k, v, rows, scale, o);
        }
        // Position `j`'s K and V rows of this head's group.
        let key = |j: usize| &keys[j * kv_dim + g * hd..j * kv_dim + (g + 1) * hd];
        let value = |j: usize| &values[j * kv_dim + g * hd..j * kv_dim + (g + 1) * hd];
        let mut max = f32::NEG_INFINITY;
        let mut sum = 0f32;
        // The query rounded to f16 once, kept widened to f32 (exact) so the dot
        // does not convert it at every position; the accumulator on the stack
        // (a heap buffer only for heads wider than `STACK_HEAD`).
        let (mut q_buf, mut acc_buf) = ([0f32; STACK_HEAD], [f16::ZERO; STACK_HEAD]);
        let (mut q_heap, mut acc_heap) = (Vec::new(), Vec::new());
        let (q16, acc) = if hd <= STACK_HEAD {
            (&mut q_buf[..hd], &mut acc_buf[..hd])
        } else {
            q_heap.resize(hd, 0f32);
            acc_heap.resize(hd, f16::ZERO);
            (&mut q_heap[..], &mut acc_heap[..])
        };
        for (d, &v) in q16.iter_mut().zip(qrow) {
            *d = f16::from_f32(v).to_f32();
        }
        let q16 = &*q16;
        if let Some(fused) = f16_ops.decode_head(hd) {
            let (k, v) = (&keys[first * kv_dim..], &values[first * kv_dim..]);
            sum = fused(q16, k, v, (kv_dim, g * hd, n_ctx - first), scale, o);
        } else {
            for j in first..n_ctx {
                let s = f16_ops.dot(key(j), q16) * scale;
                let (mut ms, mut vs) = (1.0f32, 1.0f32);
                if s > max {
                    ms = (max - s).exp();
                    max = s;
                    f16_ops.scale(acc, ms);
                } else {
                    vs = (s - max).exp();
                }
                f16_ops.mad(acc, value(j), vs);
                sum = sum.mul_add(ms, vs);
            }
            o.iter_mut().zip(&*acc).for_each(|(d, a)| *d = a.to_f32());
        }
        sum
    }
}

/// `o` divided by its weights' sum (zero where every weight was).
#[inline(always)]
fn normalize(o: &mut [f32], sum: f32) {
    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    o.iter_mut().for_each(|d| *d *= inv);
}

/// (Query, head) pairs per pool task: about `TASKS_PER_THREAD` tasks per thread. A pair is a
/// microsecond or two of work, so one pair per task left a prompt's attention waiting mostly
/// on the pool's shared task counter at many threads (docs/measurements/cpu-engine.md).
fn pairs_per_task(pairs: usize, threads: usize) -> usize {
    const TASKS_PER_THREAD: usize = 8;
    pairs.div_ceil(TASKS_PER_THREAD * threads.max(1)).max(1)
}

/// The kernel `attention` takes for `queries` query rows of one sequence at head width `hd`,
/// named with its instruction set (for the drill-down).
pub fn kernel_name(queries: usize, hd: usize, fast: bool) -> &'static str {
    let ops = F16Ops::detect();
    if fast && fast_kernels(hd) {
        return if queries >= TILED_FROM {
            "attention_fast tiled f32 blocks (avx2)"
        } else {
            "attention_fast f16 rows blocks (avx2)"
        };
    }
    match (
        queries >= TILED_FROM,
        ops.simd,
        ops.decode_head(hd).map(|_| hd),
    ) {
        (true, true, _) => "attention tiled_head f32 (avx2)",
        (true, false, _) => "attention tiled_head f32 (scalar)",
        (false, _, Some(64)) => "attention decode_head<64> f16 (avx2)",
        (false, _, Some(128)) => "attention decode_head<128> f16 (avx2)",
        (false, _, Some(_)) => "attention decode_head<256> f16 (avx2)",
        (false, true, None) => "attention f16 dots (avx2)",
        (false, false, None) => "attention f16 dots (scalar)",
    }
}

/// The tiled path for one (query, head): llama.cpp's f32 online softmax over the rows,
/// writing the unnormalised weighted sum of V into `o`; returns the softmax denominator.
/// AVX2 where the CPU has it (`attention_x86::tiled_head`), else `tiled_head_scalar`; the
/// same bits either way.
#[inline(always)]
fn tiled_head(
    simd: bool,
    fast: bool,
    q: &[f32],
    rows: TiledRows,
    scale: f32,
    o: &mut [f32],
) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if fast {
        // SAFETY: `fast` is set only where `fast_kernels` found the features and a kernel for
        // this head width.
        return unsafe { super::attention_fast::tiled_head(q, rows, scale, o) };
    }
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is set only when AVX2, FMA and F16C were detected.
        return unsafe { super::attention_x86::tiled_head(q, rows, scale, o) };
    }
    let _ = (simd, fast);
    tiled_head_scalar(q, rows, scale, o)
}

/// `attention_fast::cached_head` (only called where `fast_kernels` holds).
#[inline(always)]
fn cached_head_fast(
    q: &[f32],
    k: &[f16],
    v: &[f16],
    rows: (usize, usize, usize),
    scale: f32,
    o: &mut [f32],
) -> f32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller checked `fast_kernels` (features and head width); the cache's rows
    // are whole heads, so strides and offsets are multiples of the head width.
    return unsafe { super::attention_fast::cached_head(q, k, v, rows, scale, o) };
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("no fast attention kernels here: {q:?} {k:?} {v:?} {rows:?} {scale} {o:?}")
}

/// The decode path's f16 steps: AVX2/F16C (`attention_x86`) when the CPU has them, else the
/// scalar reference; the same bits either way.
#[derive(Clone, Copy)]
struct F16Ops {
    simd: bool,
}

impl F16Ops {
    fn detect() -> F16Ops {
        #[cfg(target_arch = "x86_64")]
        return F16Ops {
            simd: crate::quant::x86::available(),
        };
        #[cfg(not(target_arch = "x86_64"))]
        F16Ops { simd: false }
    }

    /// `attention_x86::decode_head` for this head width, where there is one (AVX2, and a
    /// width of 64, 128 or 256): the whole decode loop of a head in one call, same bits.
    #[allow(clippy::type_complexity)]
    fn decode_head(
        self,
        hd: usize,
    ) -> Option<fn(&[f32], &[f16], &[f16], (usize, usize, usize), f32, &mut [f32]) -> f32> {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY (of the calls): `simd` is set only when the features were detected,
            // and `decode_head` checks the slices' lengths.
            return match hd {
                64 => Some(|q, k, v, rows, s, o| unsafe {
                    super::attention_x86::decode_head::<8>(q, k, v, rows, s, o)
                }),
                128 => Some(|q, k, v, rows, s, o| unsafe {
                    super::attention_x86::decode_head::<16>(q, k, v, rows, s, o)
                }),
                256 => Some(|q, k, v, rows, s, o| unsafe {
                    super::attention_x86::decode_head::<32>(q, k, v, rows, s, o)
                }),
                _ => None,
            };
        }
        let _ = hd;
        None
    }

    /// `dot_f16` with `y` given widened to f32.
    #[inline(always)]
    fn dot(self, x: &[f16], y: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is set only when the features were detected.
            return unsafe { super::attention_x86::dot_f16_f32(x, y) };
        }
        dot_f16_f32(x, y)
    }

    #[inline(always)]
    fn scale(self, acc: &mut [f16], ms: f32) {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `dot`.
            return unsafe { super::attention_x86::scale_f16(acc, ms) };
        }
        acc.iter_mut()
            .for_each(|a| *a = f16::from_f32(a.to_f32() * ms));
    }

    #[inline(always)]
    fn mad(self, acc: &mut [f16], v: &[f16], vs: f32) {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `dot`.
            return unsafe { super::attention_x86::mad_f16(acc, v, vs) };
        }
        for (a, v) in acc.iter_mut().zip(v) {
            *a = f16::from_f32(v.to_f32().mul_add(vs, a.to_f32()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain f64 attention for comparison.
    fn reference(shape: AttnShape, q: &[f32], k: &[f32], v: &[f32], pos0: usize) -> Vec<f32> {
        let scale = 1.0 / (shape.head_dim as f64).sqrt();
        reference_with(shape, (scale, None), q, k, v, pos0)
    }

    /// `reference` with a score scale and a sliding window: key `j` is seen by the query at
    /// `p` when `j <= p` and `p - j < window`.
    fn reference_with(
        shape: AttnShape,
        (scale, window): (f64, Option<usize>),
        q: &[f32],
        k: &[f32],
        v: &[f32],
        pos0: usize,
    ) -> Vec<f32> {
        let AttnShape {
            n_heads,
            n_kv_heads,
            head_dim: hd,
        } = shape;
        let n = q.len() / (n_heads * hd);
        let mut out = vec![0f32; q.len()];
        for t in 0..n {
            for h in 0..n_heads {
                let g = h / (n_heads / n_kv_heads);
                let qh = &q[(t * n_heads + h) * hd..][..hd];
                let p = pos0 + t;
                let first = window.map_or(0, |w| (p + 1).saturating_sub(w));
                let s: Vec<f64> = (first..=p)
                    .map(|j| {
                        let kj = &k[(j * n_kv_heads + g) * hd..][..hd];
                        qh.iter()
                            .zip(kj)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for d in 0..hd {
                    out[(t * n_heads + h) * hd + d] = e
                        .iter()
                        .enumerate()
                        .map(|(i, w)| w / z * v[((first + i) * n_kv_heads + g) * hd + d] as f64)
                        .sum::<f64>() as f32;
                }
            }
        }
        out
    }

    #[test]
    fn matches_f64_reference_with_gqa_and_causal_mask() {
        let shape = AttnShape {
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: 8,
        };
        let (pos0, n) = (3, 2);
        let mut seed = 12345u32;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed as f32 / u32::MAX as f32) * 2.0 - 1.0
        };
        let kv: usize = (pos0 + n) * 2 * 8;
        let k: Vec<f32> = (0..kv).map(|_| f16::from_f32(rnd()).to_f32()).collect();
        let v: Vec<f32> = (0..kv).map(|_| f16::from_f32(rnd()).to_f32()).collect();
        let q: Vec<f32> = (0..n * 4 * 8).map(|_| rnd() * 3.0).collect();
        let k16: Vec<f16> = k.iter().map(|&x| f16::from_f32(x)).collect();
        let v16: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
        let mut out = vec![0f32; q.len()];
        attention(shape, &q, &k16, &v16, pos0, &mut out);
        let want = reference(shape, &q, &k, &v, pos0);
        for (a, b) in out.iter().zip(&want) {
            assert!((a - b).abs() < 5e-3, "{a} vs {b}");
        }
        // The first query of the batch must not see the second's key: changing the last
        // position's key leaves row 0 unchanged.
        let mut k2 = k16.clone();
        for x in &mut k2[(pos0 + 1) * 16..] {
            *x = f16::from_f32(5.0);
        }
        let mut out2 = vec![0f32; q.len()];
        attention(shape, &q, &k2, &v16, pos0, &mut out2);
        assert_eq!(out[..32], out2[..32]);
        assert_ne!(out[32..], out2[32..]);
    }

    #[test]
    fn tiled_batches_match_the_reference_too() {
        let shape = AttnShape {
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 4,
        };
        let n = TILED_FROM + 3;
        let k: Vec<f32> = (0..n * 4)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
            .collect();
        let v: Vec<f32> = (0..n * 4)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 4.0)
            .collect();
        let q: Vec<f32> = (0..n * 8)
            .map(|i| ((i * 3 % 17) as f32 - 8.0) / 3.0)
            .collect();
        let k16: Vec<f16> = k.iter().map(|&x| f16::from_f32(x)).collect();
        let v16: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
        let mut out = vec![0f32; q.len()];
        attention(shape, &q, &k16, &v16, 0, &mut out);
        let want = reference(shape, &q, &k, &v, 0);
        for (a, b) in out.iter().zip(&want) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }

    /// A sliding window and a score scale other than 1/sqrt(head_dim), on the decode path
    /// (few queries; head widths with and without the fused kernel, 256 as gemma3's) and the
    /// tiled one: the f64 reference within rounding, and keys before the window are never
    /// read (they hold NaN, which would reach the output if they were).
    #[test]
    fn sliding_window_skips_the_keys_before_it() {
        let mut rng = crate::rng::SplitMix64::new(7);
        for (hd, n, pos0, window) in [
            (8usize, 2usize, 9usize, 4usize),
            (64, 3, 20, 5),
            (256, 1, 30, 7),
            (256, 2, 3, 16),
            (16, TILED_FROM + 5, 6, 9),
        ] {
            let shape = AttnShape {
                n_heads: 4,
                n_kv_heads: 2,
                head_dim: hd,
            };
            let kv_dim = 2 * hd;
            let total = pos0 + n;
            let mut k: Vec<f32> = (0..total * kv_dim)
                .map(|_| f16::from_f32(rng.next_signed()).to_f32())
                .collect();
            let mut v: Vec<f32> = (0..total * kv_dim)
                .map(|_| f16::from_f32(rng.next_signed()).to_f32())
                .collect();
            let q: Vec<f32> = (0..n * 4 * hd).map(|_| rng.next_signed() * 2.0).collect();
            let scale = 0.0625f32;
            let layer = AttnLayer {
                scale,
                window: Some(window),
            };
            let want = reference_with(shape, (scale as f64, Some(window)), &q, &k, &v, pos0);
            // Keys the first query cannot see, poisoned.
            for j in 0..layer.first_key(pos0) {
                k[j * kv_dim..(j + 1) * kv_dim].fill(f32::NAN);
                v[j * kv_dim..(j + 1) * kv_dim].fill(f32::NAN);
            }
            let k16: Vec<f16> = k.iter().map(|&x| f16::from_f32(x)).collect();
            let v16: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            let mut out = vec![0f32; q.len()];
            attention_layer(shape, layer, &q, &k16, &v16, pos0, &mut out);
            let bound = if n >= TILED_FROM { 1e-4 } else { 5e-3 };
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < bound,
                    "hd {hd} n {n} pos0 {pos0} window {window} [{i}]: {a} vs {b}"
                );
            }
        }
    }

    /// Without a window, `AttnLayer::causal` is the attention it always was, and a window
    /// wider than the context changes nothing, bit for bit.
    #[test]
    fn a_window_wider_than_the_context_is_plain_causal_attention() {
        let mut rng = crate::rng::SplitMix64::new(8);
        let shape = AttnShape {
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 64,
        };
        for (n, pos0) in [(1usize, 12usize), (4, 0), (TILED_FROM, 2)] {
            let total = (pos0 + n) * 64;
            let k: Vec<f16> = (0..total)
                .map(|_| f16::from_f32(rng.next_signed()))
                .collect();
            let v: Vec<f16> = (0..total)
                .map(|_| f16::from_f32(rng.next_signed()))
                .collect();
            let q: Vec<f32> = (0..n * 128).map(|_| rng.next_signed()).collect();
            let mut plain = vec![0f32; q.len()];
            attention(shape, &q, &k, &v, pos0, &mut plain);
            let wide = AttnLayer {
                window: Some(pos0 + n),
                ..AttnLayer::causal(64)
            };
            let mut windowed = vec![1f32; q.len()];
            attention_layer(shape, wide, &q, &k, &v, pos0, &mut windowed);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&plain), bits(&windowed), "n {n} pos0 {pos0}");
        }
    }

    #[test]
    fn a_batch_steps_sequences_together_give_each_sequence_alone_bits() {
        // Three sequences of 1, 2 and 3 query rows at their own positions, heads of 64 (the
        // fast kernels) and 48 (the exact ones either way), windowed and not, both numerics.
        let mut rng = crate::rng::SplitMix64::new(9);
        for (hd, window) in [(64, None), (48, None), (64, Some(5))] {
            let shape = AttnShape {
                n_heads: 4,
                n_kv_heads: 2,
                head_dim: hd,
            };
            let layer = AttnLayer {
                scale: 1.0 / (hd as f32).sqrt(),
                window,
            };
            let (q_dim, kv_dim) = (4 * hd, 2 * hd);
            let seqs: Vec<(usize, usize)> = vec![(1, 0), (2, 9), (3, 20)];
            let data: Vec<(Vec<f32>, Vec<f16>, Vec<f16>)> = seqs
                .iter()
                .map(|&(m, pos0)| {
                    let n_all = (pos0 + m) * kv_dim;
                    let mut half = |n: usize| -> Vec<f16> {
                        (0..n).map(|_| f16::from_f32(rng.next_signed())).collect()
                    };
                    let (k, v) = (half(n_all), half(n_all));
                    let q = (0..m * q_dim).map(|_| rng.next_signed() * 2.0).collect();
                    (q, k, v)
                })
                .collect();
            for fast in [false, true] {
                let rows: Vec<SeqRows> = data
                    .iter()
                    .zip(&seqs)
                    .map(|((q, k, v), &(_, pos0))| SeqRows {
                        q,
                        keys: k,
                        values: v,
                        pos0,
                    })
                    .collect();
                let mut together = vec![0f32; 6 * q_dim];
                attention_rows(shape, layer, &rows, &mut together, fast);
                let mut alone = Vec::new();
                for ((q, k, v), &(m, pos0)) in data.iter().zip(&seqs) {
                    let mut out = vec![0f32; m * q_dim];
                    attention_with(shape, layer, q, k, v, pos0, &mut out, fast);
                    alone.extend(out);
                }
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&together),
                    bits(&alone),
                    "hd {hd} {window:?} fast {fast}"
                );
            }
        }
    }
}
