//! The attention launches of a layer: RoPE with the KV-cache store, then decode attention
//! (the CPU-order kernel, or under fast numerics the split-KV kernel) or prompt attention (on
//! tensor cores where it takes the batch).

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DriverError,
    LaunchConfig,
};

use super::buffers::{ActBufs, Bufs};
use super::clock::Stamp;
use super::decode::CudaEngine;
use super::kernel_table::Kernels;
use super::launch_params::{
    ceil_div, group_mma_shared_bytes, kind_code, prefill_columns, prefill_shared_bytes, GROUP_MAX,
    WIDE_HEAD,
};
use super::pdl_launch::PushArg;
use super::weights::{mat, Mat};
use crate::engine::cpu::attention::AttnShape;
use crate::engine::options::Numerics;
use crate::model::{Config, RopeStyle};
use crate::quant::ActType;

/// What the attention kernels read, for the launch log.
pub(super) const KV_CACHE: &str = "KV cache F16";

impl CudaEngine {
    /// RoPE on Q and K, and K and V of `n` tokens into layer `l`'s cache rows at the device's
    /// position: one launch (kernels/rope.cu `rope_store`), the attention brick's KV write with
    /// the rotation.
    fn rope_store(&mut self, n: usize, l: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let (span, seq_stride) = self.cache_span(l);
        let threads = c.head_dim.max(c.rope_dims / 2).div_ceil(32) * 32;
        // A prompt's tokens share blocks of up to 512 threads (one row of a head each).
        let per_block = (512 / threads).clamp(1, 8).min(n);
        let cfg = LaunchConfig {
            grid_dim: (
                (c.n_heads + 2 * c.n_kv_heads) as u32,
                n.div_ceil(per_block) as u32,
                1,
            ),
            block_dim: ((threads * per_block) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let tokens = n as i32;
        let h = HeadArgs::layer(c, l);
        let st = self.clock.stamp();
        let rope = self.rope.layer(l);
        let mut kc = self.kc.slice_mut(span.clone());
        let mut vc = self.vc.slice_mut(span);
        let rows = match &self.rows {
            Some(r) => &r.ids,
            None => &self.pos,
        };
        let b = &mut self.bufs;
        // SAFETY: n × heads × head_dim values of Q and of K rotated in place, K and V's n ×
        // kv_dim values into cache rows pos..pos+n (< capacity, checked; the table holds
        // every position below it); a batch step's tokens into their sequences' rows at
        // their positions (each below the capacity, checked), the span holding every
        // sequence's caches from this layer on.
        unsafe {
            self.k
                .launch(&self.stream, &self.k.rope_store)
                .arg(&mut b.q)
                .arg(&mut b.k)
                .arg(&b.v)
                .arg(&mut kc)
                .arg(&mut vc)
                .arg(&h.heads)
                .arg(&h.kv_heads)
                .arg(&h.head_dim)
                .arg(&h.rope_dims)
                .arg(rows)
                .arg(&seq_stride)
                .arg(rope)
                .arg(&h.neox)
                .arg(&h.q_scale)
                .arg(&tokens)
                .stamp(&st)
                .launch(cfg)
        }
        .map(|_| ())
    }

    /// The cache values layer `l`'s launches address, and the distance between sequences'
    /// caches the kernels take: one sequence's (`seq`) layer rows, stride 0; in a batch step,
    /// from sequence 0's layer `l` to the end, a sequence's whole cache apart. The cache is
    /// [sequence][layer][position][kv_dim].
    pub(super) fn cache_span(&self, l: usize) -> (std::ops::Range<usize>, i64) {
        let c = &self.model.config;
        let per_layer = self.cap * c.kv_dim();
        let per_seq = c.n_layers * per_layer;
        match self.rows {
            Some(_) => (l * per_layer..self.kc.len(), per_seq as i64),
            None => {
                let at = self.seq * per_seq + l * per_layer;
                (at..at + per_layer, 0)
            }
        }
    }

    /// RoPE, the KV write and attention of `n` queries over layer `l`'s cache: one token
    /// under fast numerics is one launch of the split-KV kernel (RoPE inside); a batch that
    /// `kernel_table::flash_prompt_from` admits (fast numerics, 64 tokens or more, a head size
    /// with a kernel) is `rope_store`, then flash attention on tensor cores; otherwise
    /// `rope_store`, then the kernel in the CPU's order. Below that size the CPU-order kernel
    /// takes microseconds, and keeps short prompts free of the flash kernel's f16 rounding of Q
    /// and of the softmax weights, which cost greedy tokens that match llama.cpp's CPU on
    /// SmolLM2's short fixture prompts (docs/measurements/gpu-engine.md).
    ///
    /// `out_kind`: the split kernel also quantizes its output as this for the output
    /// projection (`split_quantizes`); the other paths take none.
    pub(super) fn rope_attention(
        &mut self,
        n: usize,
        l: usize,
        out_kind: Option<ActType>,
    ) -> Result<(), DriverError> {
        if self.split_attention(n) {
            return self.attention_split(l, out_kind);
        }
        // A batch step's tokens: the grouped kernel where the step takes it, the split-KV
        // kernel for the head sizes it serves; otherwise the CPU-order kernel below.
        let rows_split = self.grouped_now || self.model.config.head_dim <= 128;
        if self.rows.as_ref().is_some_and(|r| r.split.is_some()) && rows_split {
            return self.attention_split_rows(n, l);
        }
        self.rope_store(n, l)?;
        if self.rows.is_none() && self.k.attention_prefill(&self.model.config, n).is_some() {
            return self.attention_prefill(n, l);
        }
        self.attention(n, l)
    }

    /// Whether `n` queries take the split-KV kernel: one token of one sequence under fast
    /// numerics (the kernel reads K and V rows in 16-byte pieces, so head_dim a multiple of 8,
    /// and holds a head in 128 values of shared memory, or 256 in `attention_split_wide`:
    /// other widths take the CPU-order kernel, which takes any).
    fn split_attention(&self, n: usize) -> bool {
        let hd = self.model.config.head_dim;
        self.numerics == Numerics::Fast
            && n == 1
            && self.rows.is_none()
            && hd.is_multiple_of(8)
            && (hd <= 128 || hd == WIDE_HEAD)
    }

    /// Whether this step's per-head Q/K norms (qwen3, gemma3) run inside its attention
    /// kernel rather than a launch of their own: one token of one sequence on the grouped
    /// tensor-core kernels (heads of 64, 128 or 256, 2 to GROUP_MAX query heads a KV head), which
    /// norms them as kernels/qk_norm.cu does (its sum of squares in f32) before its RoPE.
    pub(super) fn qk_norm_in_attention(&self, n: usize) -> bool {
        let c = &self.model.config;
        let group = c.n_heads / c.n_kv_heads.max(1);
        self.split_attention(n)
            && self.grouped_now
            && self.split.group_splits > 0
            && matches!(c.head_dim, 64 | 128 | WIDE_HEAD)
            && c.n_heads.is_multiple_of(c.n_kv_heads.max(1))
            && (2..=GROUP_MAX).contains(&group)
    }

    /// The activation format the split kernel writes its output in for the output projection
    /// of layer `l`, when it can (`attf_quant_head` in kernels/attention_fast.cu: the float
    /// formats, and Q8_0/Q8_1 when their 32-value groups lie within a head), so decode needs
    /// no act_quant launch before attn_out. None: the product quantizes its input itself.
    pub(super) fn split_quantizes(&self, n: usize, l: usize) -> Option<ActType> {
        let kind = ActType::for_weights(mat(&self.w, Mat::O(l)).ty);
        let fits = match kind {
            ActType::F32 | ActType::F16 | ActType::BF16 => true,
            ActType::Q8_0 | ActType::Q8_1 => self.model.config.head_dim.is_multiple_of(32),
            ActType::Q8_K => false,
        };
        (self.split_attention(n) && fits).then_some(kind)
    }

    /// Attention of `n` queries over layer `l`'s cache (rows written by `rope_store`) on
    /// tensor cores (kernels/attention_prefill.cu).
    fn attention_prefill(&mut self, n: usize, l: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let f = self
            .k
            .attention_prefill(c, n)
            .expect("rope_attention checked");
        let (layer, _) = self.cache_span(l);
        let kc = self.kc.slice(layer.clone());
        let vc = self.vc.slice(layer);
        let st = self.clock.stamp();
        let b = &mut self.bufs;
        attention_prefill(
            &self.stream,
            &self.k,
            f,
            PrefillArgs {
                head: HeadArgs::layer(c, l),
                n,
                q: &b.q,
                kc: &kc,
                vc: &vc,
                pos: &self.pos,
                out: &mut b.att,
            },
            st,
        )
    }

    /// Attention of `n` queries over layer `l`'s cache (its rows already written by
    /// `rope_store`), in the CPU's order; in a batch step each query over its own sequence's.
    fn attention(&mut self, n: usize, l: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let (span, seq_stride) = self.cache_span(l);
        let mut kc = self.kc.slice_mut(span.clone());
        let mut vc = self.vc.slice_mut(span);
        let s2 = self.clock.stamp();
        let cfg = LaunchConfig {
            grid_dim: (c.n_heads as u32, n as u32, 1),
            block_dim: (attention_threads(c.head_dim), 1, 1),
            shared_mem_bytes: (c.head_dim * 4) as u32,
        };
        let h = HeadArgs::layer(c, l);
        let cap = self.cap as i32;
        // A batch step has one query a sequence: never the tiled path.
        let tiled = i32::from(takes_tiled(n) && self.rows.is_none());
        let Bufs { q, att, scores, .. } = &mut self.bufs;
        let (rows, scores) = match &mut self.rows {
            Some(r) => (&r.ids, &mut r.scores),
            None => (&self.pos, scores),
        };
        // SAFETY: queries n × q_dim, cache rows 0..pos+n (a batch step: each query's
        // sequence's rows 0..=its position), scores n × heads × 2 capacity.
        unsafe {
            self.k
                .launch(&self.stream, &self.k.attention)
                .arg(&*q)
                .arg(&mut kc)
                .arg(&mut vc)
                .arg(&h.heads)
                .arg(&h.kv_heads)
                .arg(&h.head_dim)
                .arg(rows)
                .arg(&seq_stride)
                .arg(&cap)
                .arg(&h.scale)
                .arg(&h.window)
                .arg(&tiled)
                .arg(scores)
                .arg(att)
                .reads(KV_CACHE)
                .stamp(&s2)
                .launch(cfg)
        }
        .map(|_| ())
    }

    /// One token's RoPE and attention over layer `l`'s cache, split over positions
    /// (kernels/attention_fast.cu), this step's K and V rows written to the cache.
    fn attention_split(&mut self, l: usize, out_kind: Option<ActType>) -> Result<(), DriverError> {
        let (layer, _) = self.cache_span(l);
        let gl = &self.w.layers[l];
        let qk_norm = match (&gl.q_norm, &gl.k_norm) {
            (Some(qn), Some(kn)) if self.qk_norm_in_attention(1) => {
                Some((qn, kn, self.model.config.norm_eps))
            }
            _ => None,
        };
        let st = self.clock.stamp();
        let (b, sp) = (&mut self.bufs, &mut self.split);
        let quant = out_kind.map(|k| (k, &mut b.act));
        // The cache rows 0..=pos (row pos written here; pos < capacity, checked); the RoPE
        // table holds every position below the capacity.
        attention_split(
            &self.stream,
            &self.k,
            SplitArgs {
                head: HeadArgs::layer(&self.model.config, l),
                q: &b.q,
                k: &b.k,
                v: &b.v,
                kc: &mut self.kc.slice_mut(layer.clone()),
                vc: &mut self.vc.slice_mut(layer),
                pos: &self.pos,
                rope: self.rope.layer(l),
                splits: sp.splits,
                group_splits: if self.grouped_now { sp.group_splits } else { 0 },
                shared_bytes: sp.shared_bytes,
                ordered_upto: sp.ordered_upto,
                part: &mut sp.part,
                tickets: &mut sp.tickets,
                out: &mut b.att,
                quant,
                qk_norm,
            },
            st,
        )
    }
}

/// One decode token's operands of the split attention (kernels/attention_fast.cu
/// `attention_split`): the engine's buffers, or `KernelCheck::decode_attention`'s.
pub(super) struct SplitArgs<'a, 'c> {
    pub(super) head: HeadArgs,
    /// The token's projections before RoPE: q_dim query values, kv_dim K and V values.
    pub(super) q: &'a CudaSlice<f32>,
    pub(super) k: &'a CudaSlice<f32>,
    pub(super) v: &'a CudaSlice<f32>,
    /// One layer's cache rows, at least positions 0..=pos.
    pub(super) kc: &'a mut CudaViewMut<'c, u16>,
    pub(super) vc: &'a mut CudaViewMut<'c, u16>,
    /// The token's position (one i32) and the RoPE table's rows 0..=pos.
    pub(super) pos: &'a CudaSlice<i32>,
    pub(super) rope: &'a CudaSlice<f32>,
    pub(super) splits: usize,
    /// Launch the grouped kernel with this many chunks (`buffers::group_splits`; 0, or a
    /// model it does not serve: the kernel with a block per query head).
    pub(super) group_splits: usize,
    /// Dynamic shared memory for the split's chunk (`engine::split_shared_bytes`).
    pub(super) shared_bytes: usize,
    /// Contexts of this many positions or fewer take the CPU-order arithmetic (at most the
    /// kernel's ATTF_ORDERED_MAX; 0: never), as `SplitScratch::ordered_upto`.
    pub(super) ordered_upto: i32,
    /// n_heads × max(splits, 2 group_splits) × (head_dim + 4) partial sums; n_heads zeroed
    /// counters (left zeroed).
    pub(super) part: &'a mut CudaSlice<f32>,
    pub(super) tickets: &'a mut CudaSlice<i32>,
    /// q_dim output values.
    pub(super) out: &'a mut CudaSlice<f32>,
    /// The output also quantized as this format into these buffers (`split_quantizes`).
    pub(super) quant: Option<(ActType, &'a mut ActBufs)>,
    /// Per-head Q and K norm weights and epsilon, applied before RoPE: only where the
    /// grouped tensor-core kernel runs (`CudaEngine::qk_norm_in_attention`).
    pub(super) qk_norm: Option<(&'a CudaSlice<f32>, &'a CudaSlice<f32>, f32)>,
}

/// The split-KV decode attention of one token, launched as the engine runs it.
pub(super) fn attention_split(
    stream: &Arc<CudaStream>,
    k: &Kernels,
    a: SplitArgs,
    st: Stamp,
) -> Result<(), DriverError> {
    let h = &a.head;
    let splits = a.splits as i32;
    let group_splits = a.group_splits as i32;
    // The activation buffers as raw device pointers (none: a kind of -1 and null pointers,
    // which the kernel then never touches).
    let (akind, [axf, aq, ad, ax]) = match &a.quant {
        Some((kind, b)) => (
            kind_code(*kind),
            [
                b.xf.device_ptr(stream).0,
                b.q.device_ptr(stream).0,
                b.d.device_ptr(stream).0,
                b.x.device_ptr(stream).0,
            ],
        ),
        None => (-1, [0; 4]),
    };
    let shared_mem_bytes = a.shared_bytes as u32;
    let group = (h.heads / h.kv_heads.max(1)) as usize;
    let wide = h.head_dim as usize == WIDE_HEAD;
    let grouped =
        a.group_splits > 0 && h.heads % h.kv_heads.max(1) == 0 && (2..=GROUP_MAX).contains(&group);
    // The wide kernel has no CPU-order path.
    let ordered_upto = if wide { 0 } else { a.ordered_upto };
    // The grouped kernels: chunks of whole passes, up to twice group_splits of them
    // (`attf_chunk`); head sizes 64, 128 and 256 take the tensor-core kernels, with their own
    // blocks and shared memory.
    let mma = grouped && matches!(h.head_dim, 64 | 128 | 256);
    assert!(
        a.qk_norm.is_none() || mma,
        "per-head norms go only into the grouped tensor-core attention"
    );
    let (qn, kn, qk_eps) = match &a.qk_norm {
        Some((qn, kn, eps)) => (qn.device_ptr(stream).0, kn.device_ptr(stream).0, *eps),
        None => (0, 0, 0.0f32),
    };
    let (f, cfg) = if grouped {
        let (f, threads) = match (mma, wide) {
            (true, true) => (&k.attention_group_mma_wide, k.group_mma_wide_threads),
            (true, false) => (&k.attention_group_mma, k.group_mma_threads),
            (false, _) => (&k.attention_group, 256),
        };
        let cfg = LaunchConfig {
            grid_dim: (h.kv_heads as u32, 2 * a.group_splits as u32, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: if mma {
                group_mma_shared_bytes(h.head_dim as usize, group, threads)
            } else {
                shared_mem_bytes
            },
        };
        (f, cfg)
    } else {
        let cfg = LaunchConfig {
            grid_dim: (h.heads as u32, a.splits as u32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes,
        };
        // A sliding-window layer takes the kernel that shifts to its window (the other one,
        // without that shift, keeps its registers); heads of 256 their own, windowed or not.
        let f = if wide {
            &k.attention_split_wide
        } else if h.window > 0 {
            &k.attention_split_window
        } else {
            &k.attention_split
        };
        (f, cfg)
    };
    // The kernels share their parameters but for the chunk count (and the one-head kernel's
    // CPU-order limit after the scale).
    let mut l = k.launch(stream, f);
    l.arg(a.q)
        .arg(a.k)
        .arg(a.v)
        .arg(a.kc)
        .arg(a.vc)
        .arg(&h.heads)
        .arg(&h.kv_heads)
        .arg(&h.head_dim)
        .arg(a.pos)
        .arg(a.rope)
        .arg(&h.rope_dims)
        .arg(&h.neox)
        .arg(&h.window);
    let scale = h.folded_scale();
    if grouped {
        l.arg(&group_splits)
            .arg(&scale)
            .arg(&qn)
            .arg(&kn)
            .arg(&qk_eps);
    } else {
        l.arg(&splits).arg(&scale).arg(&ordered_upto);
    }
    l.arg(a.part)
        .arg(a.tickets)
        .arg(a.out)
        .arg(&akind)
        .arg(&axf)
        .arg(&aq)
        .arg(&ad)
        .arg(&ax)
        .reads(KV_CACHE)
        .stamp(&st);
    // SAFETY: the sizes `SplitArgs` documents (the caller's); head_dim a multiple of 8 up
    // to 128, or 256 (the wide kernel, whose shared memory holds such a head); the activation
    // buffers hold q_dim values (the engine's, sized for every
    // product's input). The grouped kernels: the part buffer holds n_heads × 2 group_splits
    // × (head_dim + 4) values, and 2 to GROUP_MAX query heads share a KV head (checked above).
    unsafe { l.launch(cfg) }.map(|_| ())
}

/// What the tensor-core prompt attention reads and writes.
pub(super) struct PrefillArgs<'a, 'c> {
    pub(super) head: HeadArgs,
    /// Queries, at positions `pos[0]..pos[0] + n`.
    pub(super) n: usize,
    /// n × q_dim rotated (and, where the model does, scaled) query values.
    pub(super) q: &'a CudaSlice<f32>,
    /// One layer's cache rows, at least positions 0..pos[0] + n, the queries' own written.
    pub(super) kc: &'a CudaView<'c, u16>,
    pub(super) vc: &'a CudaView<'c, u16>,
    /// The first query's position (one i32).
    pub(super) pos: &'a CudaSlice<i32>,
    /// n × q_dim output values.
    pub(super) out: &'a mut CudaSlice<f32>,
}

/// Causal attention of `a.n` queries on tensor cores with `f`, the kernel table's
/// `attention_prefill` for the heads' size (kernels/attention_prefill.cu): a block of 64
/// queries of one head, and of `prefill_columns` of its output columns.
pub(super) fn attention_prefill(
    stream: &Arc<CudaStream>,
    k: &Kernels,
    f: &CudaFunction,
    a: PrefillArgs,
    st: Stamp,
) -> Result<(), DriverError> {
    let h = &a.head;
    let hd = h.head_dim as usize;
    let cfg = LaunchConfig {
        grid_dim: (
            ceil_div(a.n, 64),
            h.heads as u32,
            (hd / prefill_columns(hd)) as u32,
        ),
        block_dim: (128, 1, 1),
        shared_mem_bytes: prefill_shared_bytes(hd),
    };
    let nn = a.n as i32;
    // SAFETY: the sizes `PrefillArgs` documents (the caller's); `f` is the kernel for heads
    // of head_dim (the table's), whose shared memory size the table allowed.
    unsafe {
        k.launch(stream, f)
            .arg(a.q)
            .arg(a.kc)
            .arg(a.vc)
            .arg(&nn)
            .arg(&h.heads)
            .arg(&h.kv_heads)
            .arg(a.pos)
            .arg(&h.scale)
            .arg(&h.window)
            .arg(a.out)
            .reads(KV_CACHE)
            .stamp(&st)
            .launch(cfg)
    }
    .map(|_| ())
}

/// The head-shape arguments the RoPE and attention kernels take, from the model's
/// configuration (named, so each launch lists them in its kernel's parameter order).
pub(super) struct HeadArgs {
    pub(super) heads: i32,
    pub(super) kv_heads: i32,
    pub(super) head_dim: i32,
    pub(super) rope_dims: i32,
    /// NEOX-style RoPE (qwen2) rather than NORM (llama).
    pub(super) neox: i32,
    /// The attention scores' scale (`Config::kq_scale`: 1 / sqrt(head_dim), or 1 where the
    /// query is scaled instead).
    pub(super) scale: f32,
    /// What RoPE's launch multiplies the rotated query by (gemma3's and phi3's attention
    /// scale, applied to Q as llama.cpp does; 1 elsewhere, which changes nothing).
    pub(super) q_scale: f32,
    /// A sliding-window layer's window in positions (0: the layer sees every position).
    pub(super) window: i32,
}

impl HeadArgs {
    /// The heads of layer `l` of a model of configuration `c`: its window where it slides.
    pub(super) fn layer(c: &Config, l: usize) -> HeadArgs {
        let mut h = HeadArgs::new(
            AttnShape::of(c),
            c.rope_dims,
            c.arch.rope_style() == RopeStyle::Neox,
        );
        h.window = c
            .layer_window(l)
            .map_or(0, |w| w.min(i32::MAX as usize) as i32);
        h.scale = c.kq_scale();
        if c.attn_scale_on_q {
            h.q_scale = c.attn_scale;
        }
        h
    }

    /// The score scale of a kernel that rotates the query itself (the split decode
    /// kernels, fast numerics): the query's scale folded into the scores'.
    pub(super) fn folded_scale(&self) -> f32 {
        self.scale * self.q_scale
    }

    /// Heads of `shape`, `rope_dims` of each rotated in NEOX pairs or NORM pairs.
    pub(super) fn new(shape: AttnShape, rope_dims: usize, neox: bool) -> HeadArgs {
        HeadArgs {
            heads: shape.n_heads as i32,
            kv_heads: shape.n_kv_heads as i32,
            head_dim: shape.head_dim as i32,
            rope_dims: rope_dims as i32,
            neox: i32::from(neox),
            scale: 1.0 / (shape.head_dim as f32).sqrt(),
            q_scale: 1.0,
            window: 0,
        }
    }
}

/// Whether `n` queries of one sequence take the CPU-order kernel's tiled f32 order: llama.cpp's
/// CPU kernel switches to its tiled path from 64 queries, as the CPU engine does.
pub(super) fn takes_tiled(n: usize) -> bool {
    n >= 64
}

/// Threads of the CPU-order attention kernel (kernels/attention.cu) for heads of `head_dim`:
/// a thread per output dimension, and at least the 128 its score pass was checked with.
pub(super) fn attention_threads(head_dim: usize) -> u32 {
    head_dim.next_multiple_of(32).max(128) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::profile::Profile;
    use crate::synth::{self, QuantMix};

    fn shape_config(file: &str) -> Config {
        let path = format!(
            "{}/tests/fixtures/conformance/shapes/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let shape = Profile::shape(&path).unwrap();
        let bytes = synth::build(&shape, QuantMix::from_name("q8_0").unwrap(), 0);
        Model::from_bytes(file, bytes).unwrap().config
    }

    /// gemma3: the sliding layers' window, none on the global layer; scores scaled by 1 and
    /// the query by the attention scale (which the split kernels fold back into the scores').
    #[test]
    fn gemma3_layers_carry_their_window_and_the_query_scale() {
        let c = shape_config("tiny-gemma3.toml");
        for l in 0..c.n_layers {
            let h = HeadArgs::layer(&c, l);
            assert_eq!(h.window, if l == 5 { 0 } else { 4 }, "layer {l}");
            assert_eq!(h.scale, 1.0);
            assert_eq!(h.q_scale, c.attn_scale);
            assert_eq!(h.folded_scale(), c.attn_scale);
            assert_eq!(h.head_dim, 128);
        }
    }

    /// Without a window or a query scale (the llama and qwen models): the query as it is,
    /// scores scaled by the attention scale.
    #[test]
    fn plain_layers_scale_the_scores() {
        let mut c = shape_config("tiny-gemma3.toml");
        c.attn_scale_on_q = false;
        c.sliding_window = None;
        let h = HeadArgs::layer(&c, 0);
        assert_eq!((h.window, h.q_scale), (0, 1.0));
        assert_eq!(h.scale, c.attn_scale);
        assert_eq!(h.folded_scale(), c.attn_scale);
    }

    #[test]
    fn the_cpu_order_kernel_has_a_thread_per_dimension() {
        assert_eq!(attention_threads(64), 128);
        assert_eq!(attention_threads(80), 128);
        assert_eq!(attention_threads(256), 256);
        assert_eq!(attention_threads(200), 224);
    }
}
