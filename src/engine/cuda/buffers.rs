//! The activations on the device: one buffer per intermediate of a step, sized for a batch of
//! up to `n` tokens, and the product input in its vec-dot format. `Which` names a buffer so the
//! launch plan can say "from H into Q" and get two distinct borrows. Also the split-KV decode
//! attention's scratch, and a batch step's own buffers (`RowsStep`).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::batch_graphs::Named;
use super::env_counts::env_count;
use super::error::wrap;
use super::gemm::GemmBufs;
use super::kernel_table::flash_prompt_from;
use super::launch_params::{ARGMAX_BLOCKS, GROUP_MAX, GROUP_SPLITS, WIDE_HEAD};
use crate::engine::cpu::attention::AttnShape;
use crate::engine::error::EngineError;
use crate::model::Model;

/// Activation buffers for a batch of up to `n` tokens.
pub(super) struct Bufs {
    pub(super) n: usize,
    pub(super) x: CudaSlice<f32>,
    pub(super) h: CudaSlice<f32>,
    pub(super) q: CudaSlice<f32>,
    pub(super) k: CudaSlice<f32>,
    pub(super) v: CudaSlice<f32>,
    pub(super) att: CudaSlice<f32>,
    pub(super) gate: CudaSlice<f32>,
    pub(super) up: CudaSlice<f32>,
    pub(super) normed: CudaSlice<f32>,
    pub(super) logits: CudaSlice<f32>,
    pub(super) scores: CudaSlice<f32>,
    pub(super) tok: CudaSlice<u32>,
    /// The argmax's per-block bests and non-finite counts (kernels/argmax.cu).
    pub(super) part: CudaSlice<f32>,
    /// The matrix products' input, rounded or quantized as the weight type's dot sees it.
    pub(super) act: ActBufs,
}

/// One activation batch in a weight type's vec-dot format (kernels/act_quant.cu): rounded
/// floats for float weights, or int8 values with their block scales and Q8_1 sums / Q8_K
/// bsums for quantized weights.
pub(super) struct ActBufs {
    pub(super) xf: CudaSlice<f32>,
    pub(super) q: CudaSlice<i8>,
    pub(super) d: CudaSlice<f32>,
    pub(super) x: CudaSlice<f32>,
    /// f16 operands of the tensor-core products (fast numerics, large batches only).
    pub(super) f16: Option<GemmBufs>,
}

impl ActBufs {
    /// Room for `len` activation values.
    pub(super) fn new(s: &Arc<CudaStream>, len: usize) -> Result<ActBufs, EngineError> {
        let f = |n: usize| {
            s.alloc_zeros::<f32>(n.max(1))
                .map_err(wrap("allocating activations"))
        };
        Ok(ActBufs {
            xf: f(len)?,
            q: s.alloc_zeros::<i8>(len.max(1))
                .map_err(wrap("allocating activations"))?,
            d: f(len / 32 + 1)?,
            x: f(len / 16 + 1)?,
            f16: None,
        })
    }
}

/// Which activation buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    X,
    H,
    Q,
    K,
    V,
    Att,
    Gate,
    Up,
    Normed,
    Logits,
}

impl Bufs {
    /// Buffers for a batch of up to `n` tokens of `model` with a KV cache of `cap` positions;
    /// with `gemm` (fast numerics: the values of the model's largest matrix, the batch size
    /// from which every product takes the tensor cores, `GemmKernels::from`, and the one from
    /// which some do, `GemmKernels::f16_from`), the tensor-core products' operands too when
    /// `n` is that large.
    pub(super) fn alloc(
        s: &Arc<CudaStream>,
        model: &Model,
        cap: usize,
        n: usize,
        gemm: Option<(usize, usize, usize)>,
    ) -> Result<Bufs, EngineError> {
        let c = &model.config;
        let a = |len: usize| {
            s.alloc_zeros::<f32>(len.max(1))
                .map_err(wrap("allocating activations"))
        };
        let score_rows = flash_prompt_from(c, gemm.map(|g| g.1)).map_or(n, |from| n.min(from - 1));
        Ok(Bufs {
            n,
            x: a(n * c.n_embd)?,
            h: a(n * c.n_embd)?,
            q: a(n * c.q_dim())?,
            k: a(n * c.kv_dim())?,
            v: a(n * c.kv_dim())?,
            att: a(n * c.q_dim())?,
            gate: a(n * c.n_ff)?,
            up: a(n * c.n_ff)?,
            normed: a(n * c.n_embd)?,
            logits: a(n * model.weights.output.rows)?,
            // The CPU-order attention's score rows; the batches the flash kernel takes need
            // none.
            scores: a(2 * score_rows * c.n_heads * cap)?,
            act: {
                let len = n * c.n_embd.max(c.q_dim()).max(c.n_ff);
                let mut act = ActBufs::new(s, len)?;
                if let Some((largest, from, _)) = gemm.filter(|g| n >= g.2) {
                    // The weight scratch only where the expansion takes some products.
                    let scratch = if n >= from { largest } else { 0 };
                    act.f16 = Some(GemmBufs::new(s, len, scratch)?);
                }
                act
            },
            part: a(3 * ARGMAX_BLOCKS as usize)?,
            tok: s
                .alloc_zeros::<u32>(n.max(1))
                .map_err(wrap("allocating activations"))?,
        })
    }

    fn get_mut(&mut self, w: Which) -> &mut CudaSlice<f32> {
        match w {
            Which::X => &mut self.x,
            Which::H => &mut self.h,
            Which::Q => &mut self.q,
            Which::K => &mut self.k,
            Which::V => &mut self.v,
            Which::Att => &mut self.att,
            Which::Gate => &mut self.gate,
            Which::Up => &mut self.up,
            Which::Normed => &mut self.normed,
            Which::Logits => &mut self.logits,
        }
    }

    pub(super) fn get(&self, w: Which) -> &CudaSlice<f32> {
        match w {
            Which::X => &self.x,
            Which::H => &self.h,
            Which::Q => &self.q,
            Which::K => &self.k,
            Which::V => &self.v,
            Which::Att => &self.att,
            Which::Gate => &self.gate,
            Which::Up => &self.up,
            Which::Normed => &self.normed,
            Which::Logits => &self.logits,
        }
    }

    /// Every buffer, for a captured step's record of what it names (batch_graphs.rs).
    pub(super) fn name_into(&self, s: &CudaStream, named: &mut Named) {
        for b in [
            &self.x,
            &self.h,
            &self.q,
            &self.k,
            &self.v,
            &self.att,
            &self.gate,
            &self.up,
            &self.normed,
            &self.logits,
            &self.scores,
            &self.part,
            &self.act.xf,
            &self.act.d,
            &self.act.x,
        ] {
            named.slice(s, b);
        }
        named.slice(s, &self.tok).slice(s, &self.act.q);
        // Whether the tensor-core operands exist decides which products take them.
        match &self.act.f16 {
            Some(g) => g.name_into(s, named),
            None => {
                named.value(0);
            }
        }
    }

    /// Two distinct buffers: one to read, one to write.
    pub(super) fn pair(&mut self, a: Which, b: Which) -> (&CudaSlice<f32>, &mut CudaSlice<f32>) {
        assert!(a != b, "a kernel's input and output must differ");
        let pa: *const CudaSlice<f32> = self.get_mut(a);
        let pb = self.get_mut(b);
        // SAFETY: a != b, so the two references point at different fields.
        (unsafe { &*pa }, pb)
    }
}

/// The split decode attention's dynamic shared memory for chunks of `chunk` positions: the
/// query and a chunk's scores (kernels/attention_fast.cu), or, with CPU-order short contexts
/// (`ordered`), the query and up to `ORDERED_ATTENTION_MAX` f16 V rows if that is more; and,
/// with grouped chunks of up to `group_chunk` positions (`group` query heads per KV head,
/// none: no grouped path), the group's queries and their scores if that is more.
pub(super) fn split_shared_bytes(
    head_dim: usize,
    chunk: usize,
    ordered: bool,
    group: Option<(usize, usize)>,
) -> usize {
    let mut bytes = (head_dim + chunk) * 4;
    if ordered {
        bytes = bytes.max(head_dim * 4 + ORDERED_ATTENTION_MAX as usize * head_dim * 2);
    }
    if let Some((g, group_chunk)) = group {
        bytes = bytes.max(g * (head_dim + group_chunk) * 4);
    }
    bytes
}

/// Positions a chunk of the split attention holds at least (ATTF_MIN_CHUNK).
pub(super) const MIN_CHUNK: usize = 128;
/// Dynamic shared memory a launch may ask for without opting in (48 KB), less the kernel's
/// static `AttfShared`.
const SHARED_BUDGET: usize = 36 * 1024;

/// The grouped path's count of chunks for contexts up to `cap` (0: the model takes one block
/// per query head): the chunks of one wave at a block per multiprocessor, chunks of at least `MIN_CHUNK`
/// positions, and few enough positions per chunk that the group's scores fit `SHARED_BUDGET`.
pub(super) fn group_splits(
    shape: AttnShape,
    cap: usize,
    sms: usize,
    wanted: Option<usize>,
) -> usize {
    let g = shape.n_heads / shape.n_kv_heads.max(1);
    if !(2..=GROUP_MAX).contains(&g) || !shape.n_heads.is_multiple_of(shape.n_kv_heads) {
        return 0;
    }
    // Chunks are whole passes of MIN_CHUNK positions, rounded up (`group_chunk`).
    let max_chunk = (SHARED_BUDGET / 4 / g).saturating_sub(shape.head_dim) / MIN_CHUNK * MIN_CHUNK;
    if max_chunk == 0 {
        return 0;
    }
    // Rounded down: n_kv_heads x splits blocks must not exceed one a multiprocessor; or the
    // count asked for (`CBTOP_ATTN_GROUP_SPLITS`), as long as the chunks' scores still fit.
    let splits = wanted
        .unwrap_or_else(|| {
            (sms / shape.n_kv_heads.max(1))
                .min(GROUP_SPLITS)
                .min(cap.div_ceil(MIN_CHUNK))
        })
        .max(cap.div_ceil(max_chunk))
        .max(1);
    if splits > GROUP_SPLITS {
        0
    } else {
        splits
    }
}

/// Most positions a grouped chunk holds for contexts up to `cap` split `group_splits` ways:
/// kernels/attention_fast.cu `attf_chunk` takes chunks of one wave (cap / group_splits rounded
/// up to a multiple of MIN_CHUNK) or of two (smaller).
pub(super) fn group_chunk(cap: usize, group_splits: usize) -> usize {
    cap.div_ceil(group_splits.max(1))
        .next_multiple_of(MIN_CHUNK)
        .max(MIN_CHUNK)
}

/// The split-KV decode attention's scratch (kernels/attention_fast.cu): per head and split the
/// partial sums, per head a ticket counter, and the launch's shape for this context.
pub(super) struct SplitScratch {
    pub(super) part: CudaSlice<f32>,
    pub(super) tickets: CudaSlice<i32>,
    pub(super) splits: usize,
    /// The grouped path's chunks (`group_splits`; 0: none).
    pub(super) group_splits: usize,
    pub(super) shared_bytes: usize,
    /// The GPU's multiprocessors, which a batch step's grouped attention sizes its chunks by.
    pub(super) sms: usize,
    /// Contexts this short take the CPU-order attention (`ORDERED_ATTENTION_MAX` when the
    /// kernels keep the CPU's order, else 0).
    pub(super) ordered_upto: i32,
}

/// Longest context the fast decode attention takes in the CPU's order when the kernels keep
/// it (`Kernels::ordered`; kernels/attention_fast.cu, ATTF_ORDERED_MAX).
const ORDERED_ATTENTION_MAX: i32 = 128;

impl SplitScratch {
    /// Splits for about four blocks per multiprocessor, at most one per 128 positions of the
    /// context (ATTF_MIN_CHUNK) and 256 (ATTF_MAX_SPLITS), and enough that a split's scores
    /// fit in 32 KB of shared memory; and the grouped path's (`group_splits`).
    pub(super) fn new(
        s: &Arc<CudaStream>,
        c: &crate::model::Config,
        cap: usize,
        sms: usize,
        ordered: bool,
    ) -> Result<SplitScratch, EngineError> {
        const MAX_SPLITS: usize = 256;
        const MAX_CHUNK: usize = 8192;
        let splits = (4 * sms)
            .div_ceil(c.n_heads)
            .max(8)
            .min(cap.div_ceil(MIN_CHUNK))
            .max(cap.div_ceil(MAX_CHUNK))
            .clamp(1, MAX_SPLITS);
        if cap.div_ceil(splits) > MAX_CHUNK {
            return Err(EngineError::Device(format!(
                "a context of {cap} positions is over the split attention's {}",
                MAX_SPLITS * MAX_CHUNK
            )));
        }
        let chunk = cap.div_ceil(splits).max(MIN_CHUNK);
        // Heads wider than 128 have no CPU-order path; heads of 256 take the tensor-core
        // grouped kernel (kernels/attention_group_mma.cu `attention_group_mma_wide`) where
        // query heads share a KV head, otherwise the one-head wide kernel
        // (kernels/attention_fast.cu `attention_split_wide`).
        let wide = c.head_dim > 128;
        let ordered = ordered && !wide;
        let group_splits = if wide && c.head_dim != WIDE_HEAD {
            0
        } else {
            // A measuring aid: the grouped kernels' count of chunks (twice as many launch).
            let wanted = env_count("CBTOP_ATTN_GROUP_SPLITS", 1, "a count of chunks, 1 or more")
                .map_err(EngineError::Device)?
                .map(|n| n.min(GROUP_SPLITS / 2));
            group_splits(AttnShape::of(c), cap, sms, wanted)
        };
        let group =
            (group_splits > 0).then(|| (c.n_heads / c.n_kv_heads, group_chunk(cap, group_splits)));
        let what = || wrap("allocating attention scratch");
        Ok(SplitScratch {
            part: s
                .alloc_zeros::<f32>(c.n_heads * splits.max(2 * group_splits) * (c.head_dim + 4))
                .map_err(what())?,
            tickets: s.alloc_zeros::<i32>(c.n_heads).map_err(what())?,
            splits,
            group_splits,
            shared_bytes: split_shared_bytes(c.head_dim, chunk, ordered, group),
            sms,
            ordered_upto: if ordered { ORDERED_ATTENTION_MAX } else { 0 },
        })
    }
}

/// The device buffers of a batch step beside the engine's activations.
pub(super) struct RowsStep {
    /// (sequence, position) of each token of the step.
    pub(super) ids: CudaSlice<i32>,
    /// The CPU-order attention's scratch: 2 × capacity values per token and head.
    pub(super) scores: CudaSlice<f32>,
    /// The greedy picks: each row's token id, then each row's count of non-finite logits.
    pub(super) picks: CudaSlice<u32>,
    /// The picks' first pass: 3 × ARGMAX_ROW_BLOCKS values a row (kernels/argmax.cu).
    pub(super) pick_part: CudaSlice<f32>,
    /// Under fast numerics, the split-KV attention's scratch for every token of a step
    /// (`part`, zeroed `tickets`); None: the step takes the CPU-order attention.
    pub(super) split: Option<(CudaSlice<f32>, CudaSlice<i32>)>,
}

impl RowsStep {
    /// Every buffer, for a captured step's record of what it names (batch_graphs.rs).
    pub(super) fn name_into(&self, s: &CudaStream, named: &mut Named) {
        named
            .slice(s, &self.ids)
            .slice(s, &self.scores)
            .slice(s, &self.picks)
            .slice(s, &self.pick_part);
        match &self.split {
            Some((part, tickets)) => {
                named.slice(s, part).slice(s, tickets);
            }
            None => {
                named.value(0);
            }
        }
    }
}

#[cfg(test)]
mod group_tests {
    use super::{group_chunk, group_splits, MIN_CHUNK};
    use crate::engine::cpu::attention::AttnShape;

    #[test]
    fn grouped_chunks_are_whole_passes_one_wave_deep() {
        // qwen2.5-7b: 28 query heads on 4 KV heads, head_dim 128, on 132 multiprocessors.
        let shape = AttnShape {
            n_heads: 28,
            n_kv_heads: 4,
            head_dim: 128,
        };
        let s = group_splits(shape, 32768, 132, None);
        assert_eq!(s, 33);
        assert_eq!(group_chunk(16385, s), 512);
        assert_eq!(group_chunk(4097, s), 128);
        assert!(group_chunk(32768, s).is_multiple_of(MIN_CHUNK));
        assert!(32768usize.div_ceil(group_chunk(32768, s)) <= s);
        // Eight query heads to a KV head of 128: the CUDA-core kernel's scores must fit, so
        // long contexts take more chunks than a wave.
        let wide = AttnShape {
            n_heads: 64,
            n_kv_heads: 8,
            head_dim: 80,
        };
        let s = group_splits(wide, 32768, 132, None);
        assert!(8 * (80 + group_chunk(32768, s)) * 4 <= 36 * 1024);
        // One query head a KV head: no grouped path.
        let one = AttnShape {
            n_heads: 8,
            n_kv_heads: 8,
            head_dim: 64,
        };
        assert_eq!(group_splits(one, 4096, 132, None), 0);
        // llama-3.1-8b: 8 KV heads' chunks stay within one block a multiprocessor.
        let l8 = AttnShape {
            n_heads: 32,
            n_kv_heads: 8,
            head_dim: 128,
        };
        assert_eq!(group_splits(l8, 32768, 132, None), 16);
    }
}
