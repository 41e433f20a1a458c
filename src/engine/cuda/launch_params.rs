//! Launch geometry and the parameter structs the kernels take: grid helpers, rows per block of
//! the fast products (one token and a few), the grouped decode attention's limits and shared memory, the activation
//! format codes, a product's epilogue, and `mvf_multi`'s matrix set laid out as
//! kernels/matvec_fast.cu reads it.

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig};

use super::pdl_launch::{Launch, PushArg};
use crate::quant::ActType;

/// Weight rows per block of the fast products (kernels/matvec_fast.cu: four warps, a row each).
pub(super) const FAST_ROWS: usize = 4;

/// Weight rows per warp of the fast products of a few tokens (kernels/matvec_few.cu's
/// MVQ_ROWS), four warps a block.
pub(super) const FEW_ROWS: usize = 2;

/// Most tokens a fast few-token kernel takes at once (`mvf2_*` .. `mvf8_*`); more go in chunks.
pub(super) const FEW_TOKENS: usize = 8;

/// The fast few-token products' launch for `n` tokens (2 or more) of a `rows`-row matrix with
/// `split` warps a row pair (`few_split`): the tokens per chunk (the kernel's NT: chunks as even
/// as `FEW_TOKENS` allows, so 11 tokens go as 6 and 5, not 8 and 3) and the grid's blocks (each
/// row block's chunks side by side).
pub(super) fn few_launch(n: usize, rows: usize, split: usize) -> (usize, u32) {
    let chunks = n.div_ceil(FEW_TOKENS);
    let nt = n.div_ceil(chunks);
    let blocks = rows.div_ceil(FAST_ROWS * FEW_ROWS / split) * n.div_ceil(nt);
    (nt, blocks as u32)
}

/// Blocks of the few-token kernels a multiprocessor holds at once, about (64 to 84 registers
/// a thread, 128 threads a block).
const FEW_BLOCKS_PER_SM: usize = 8;

/// Warps of a fast few-token product that share a row pair's units (kernels/matvec_few.cu
/// `split`): 4 or 2 where the launch's row blocks stay within what `sms` multiprocessors hold
/// at once and each warp keeps at least 1.5 units a lane of a row of `units`; else 1. A 7B
/// model's Q, K, V, attention output and FFN down (4096 rows or fewer) otherwise leave the
/// GPU short of warps.
pub(super) fn few_split(rows: usize, units: usize, sms: usize) -> usize {
    [4, 2]
        .into_iter()
        .find(|&s| {
            let blocks = rows.div_ceil(FAST_ROWS * FEW_ROWS / s);
            blocks <= FEW_BLOCKS_PER_SM * sms && 2 * units >= 3 * 32 * s
        })
        .unwrap_or(1)
}

/// MvfMat's shape of a few-token product with `split` warps a row pair.
pub(super) fn few_shape(split: usize) -> i32 {
    (16 * split + FEW_ROWS) as i32
}

/// The most blocks a fast one-token product launches at `FAST_ROWS` rows per block; a taller
/// matrix (a 151936-word vocabulary's output projection) takes twice the rows per block.
/// Under `--timing events` every block's thread 0 stamps its exit, and the cost of those
/// stamps grows faster than the block count (bench/cuda/stamp_cost.cu), so only the tallest
/// launches halve their blocks: shorter matrices run their unstamped steps faster at
/// `FAST_ROWS` (docs/measurements/gpu-engine.md).
const FAST_BLOCKS_MAX: usize = 16384;

/// Weight rows per block of a fast one-token product of `rows` rows.
pub(super) fn fast_rows_for(rows: usize) -> usize {
    if rows.div_ceil(FAST_ROWS) > FAST_BLOCKS_MAX {
        2 * FAST_ROWS
    } else {
        FAST_ROWS
    }
}

/// The fast one-token float product's launch shape for a matrix of `rows` rows of `row_bytes`
/// bytes (kernels/matvec_fast_float.cu): rows per warp and warps per row. A warp's share should
/// keep several 16-byte loads per lane in flight and the launch should have warps enough to
/// fill the GPU: a short matrix of long rows (a down projection) cuts each row among two or
/// four warps; a tall matrix of short rows gives each warp two rows.
pub(super) fn float_shape(rows: usize, row_bytes: usize) -> FloatShape {
    let per_lane = row_bytes / 16 / 32;
    let (per_warp, split) = match (rows, per_lane) {
        (..=4096, 16..) => (1, 4),
        (..=4096, 8..) => (1, 2),
        (4097.., ..=8) => (2, 1),
        _ => (1, 1),
    };
    FloatShape { per_warp, split }
}

/// Rows per warp and warps per row of a fast float product (`float_shape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FloatShape {
    pub(super) per_warp: usize,
    pub(super) split: usize,
}

impl FloatShape {
    /// A warp per row: the quantized kernels' shape.
    pub(super) const ONE: FloatShape = FloatShape {
        per_warp: 1,
        split: 1,
    };

    /// Rows one block of `FAST_ROWS` warps takes.
    pub(super) fn block_rows(self) -> usize {
        FAST_ROWS * self.per_warp / self.split
    }

    /// `MvfMat::shape`'s encoding: rows per warp + 16 × warps per row.
    pub(super) fn code(self) -> i32 {
        (self.per_warp + 16 * self.split) as i32
    }
}

/// Dynamic shared memory of the CPU-order legacy products (kernels/matvec_fast.cu
/// `mvo_one`) at `rows` rows per block: a `MvoWarp` (8 x 36 + 32 + 32 floats) per warp.
pub(super) const fn mvo_bytes(rows: usize) -> u32 {
    (rows * (8 * 36 + 32 + 32) * 4) as u32
}

/// `mvo_bytes` at `FAST_ROWS`.
pub(super) const MVO_BYTES: u32 = mvo_bytes(FAST_ROWS);

/// Most query heads per KV head the grouped decode attention takes (ATTF_GROUP_MAX in
/// kernels/attention_fast.cu), and most chunks a wave of its blocks is asked for (its chunks
/// come to at most ATTF_GROUP_SPLITS, this many or, where that allows, twice as many).
pub(super) const GROUP_MAX: usize = 8;
pub(super) const GROUP_SPLITS: usize = 128;

/// The head width the decode attention takes beside those up to 128 (gemma3's):
/// `attention_split_wide`, and `attention_group_mma_wide` where query heads share a KV head.
pub(super) const WIDE_HEAD: usize = 256;

/// Tiles of K and V the tensor-core grouped kernel keeps in flight (its `AGM_BUFS`).
pub(super) const GROUP_MMA_BUFS: usize = 3;

/// The tensor-core grouped kernel's dynamic shared memory (kernels/attention_group_mma.cu) for
/// blocks of `threads` threads (tiles of 16 positions a warp): `GROUP_MMA_BUFS` buffers of K
/// and V tiles of head_dim + 8 halves a row, then the `group` queries' floats. Past the 48 KB
/// a launch gets without opting in: the kernel table raises the kernel's limit to the largest
/// case (head_dim 128, `GROUP_MAX` heads a group).
pub(super) fn group_mma_shared_bytes(head_dim: usize, group: usize, threads: u32) -> u32 {
    let tile = 16 * threads as usize / 32;
    (2 * GROUP_MMA_BUFS * tile * (head_dim + 8) * 2 + group * head_dim * 4) as u32
}

/// The head sizes the tensor-core prompt attention has a kernel for
/// (`attention_prefill_<hd>` in kernels/attention_prefill.cu).
pub(super) const PREFILL_HEADS: [usize; 4] = [64, 96, 128, 256];

/// Output columns a block of the tensor-core prompt attention accumulates for heads of
/// `head_dim` (the kernel's `DV`): the whole head up to 128, half a head of 256 (whose whole
/// accumulators would spill), the halves on grid z.
pub(super) const fn prefill_columns(head_dim: usize) -> usize {
    if head_dim > 128 {
        128
    } else {
        head_dim
    }
}

/// The dynamic shared memory of the tensor-core prompt attention for heads of `head_dim`: a
/// 64-position K tile of whole heads and a V tile of the block's columns, in f16 rows padded
/// by 8.
pub(super) const fn prefill_shared_bytes(head_dim: usize) -> u32 {
    (64 * (head_dim + 8 + prefill_columns(head_dim) + 8) * 2) as u32
}

/// Blocks of the argmax's first pass (ARGMAX_BLOCKS in kernels/argmax.cu).
pub(super) const ARGMAX_BLOCKS: u32 = 128;

/// Blocks a row of a batch step's pick takes (ARGMAX_ROW_BLOCKS in kernels/argmax.cu).
pub(super) const ARGMAX_ROW_BLOCKS: u32 = 32;

pub(super) fn ceil_div(a: usize, b: usize) -> u32 {
    a.div_ceil(b) as u32
}

/// One thread per value of `n`, in blocks of 256.
pub(super) fn lin(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (ceil_div(n.max(1), 256), 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// kernels/act_quant.cu's code for an activation format.
pub(super) fn kind_code(kind: ActType) -> i32 {
    match kind {
        ActType::F32 => 0,
        ActType::F16 => 1,
        ActType::BF16 => 2,
        ActType::Q8_0 => 3,
        ActType::Q8_1 => 4,
        ActType::Q8_K => 5,
    }
}

/// What a kernel producing a product's input (RMSNorm, SwiGLU) writes beside its f32 output:
/// the input in the weights' activation format, or as the f16 operand of a tensor-core product
/// (into the product's own buffer, `gemm::GemmBufs`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Feed {
    Act(ActType),
    F16,
}

impl Feed {
    /// kernels/act_quant.cu's code (ACT_F16_BITS for `F16`).
    pub(super) fn code(self) -> i32 {
        match self {
            Feed::Act(k) => kind_code(k),
            Feed::F16 => 6,
        }
    }

    /// The activation format it leaves in the activation buffers, if any.
    pub(super) fn act(self) -> Option<ActType> {
        match self {
            Feed::Act(k) => Some(k),
            Feed::F16 => None,
        }
    }
}

/// How a product treats its input and output beyond `out = W · x`.
#[derive(Clone, Copy, Default)]
pub(super) struct Epilogue<'a> {
    /// `act` already holds `x` in this weight type's activation format (a previous product
    /// of the same input quantized it).
    pub(super) quantized: bool,
    /// A bias row added to every output row.
    pub(super) bias: Option<&'a CudaSlice<f32>>,
    /// Add into `out` instead of overwriting it (a residual add fused into the product).
    pub(super) accumulate: bool,
    /// The tensor-core product's f16 activations already hold `x` (gemm.rs).
    pub(super) f16: bool,
}

/// What a product left in the activation buffers, for the next product of the same input.
#[derive(Clone, Copy)]
pub(super) struct Held {
    /// `x` in the weight type's vec-dot format.
    pub(super) quantized: bool,
    /// `x` as the tensor-core product's f16 operand.
    pub(super) f16: bool,
}

/// One matrix of `mvf_multi`'s set (kernels/common.cuh `MvfMat`, field for field): device
/// addresses, its rows, its GGML type id, its first block in the launch and its shape
/// (`FloatShape::code`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct MvfMat {
    pub(super) w: u64,
    pub(super) row_bytes: u64,
    pub(super) bias: u64,
    pub(super) out: u64,
    pub(super) rows: i32,
    pub(super) ty: i32,
    pub(super) first_block: i32,
    pub(super) shape: i32,
}

/// Up to three matrices of one input for `mvf_multi`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct MvfSet {
    pub(super) m: [MvfMat; 3],
    pub(super) count: i32,
    /// Legacy matrices in the CPU's order (`Kernels::ordered`).
    pub(super) ordered: i32,
}

// SAFETY: plain `repr(C)` data with the layout of the kernel's parameter struct.
unsafe impl DeviceRepr for MvfSet {}

impl<'a, 'b: 'a> PushArg<&'b MvfSet> for Launch<'a> {
    fn arg(&mut self, arg: &'b MvfSet) -> &mut Self {
        self.host_value(arg)
    }
}

#[cfg(test)]
mod tests {
    use super::{fast_rows_for, few_launch, float_shape, FloatShape, FAST_ROWS, FEW_TOKENS};

    #[test]
    fn float_products_cut_long_rows_of_short_matrices_and_pair_short_rows_of_tall_ones() {
        let shape = |rows: usize, cols: usize| {
            let s = float_shape(rows, 2 * cols);
            (s.per_warp, s.split)
        };
        // qwen2.5-1.5b F16: down (1536 x 8960), attn_out, gate/up, the output projection.
        assert_eq!(shape(1536, 8960), (1, 4));
        assert_eq!(shape(1536, 1536), (1, 1));
        assert_eq!(shape(8960, 1536), (2, 1));
        assert_eq!(shape(151936, 1536), (2, 1));
        // qwen2.5-7b F16: Q and attn_out (3584 x 3584), gate (18944 x 3584).
        assert_eq!(shape(3584, 3584), (1, 2));
        assert_eq!(shape(18944, 3584), (1, 1));
        for (rows, cols) in [(1536, 8960), (3584, 3584), (8960, 1536), (7, 64)] {
            let s = float_shape(rows, 2 * cols);
            assert_eq!(s.block_rows() * s.split, FAST_ROWS * s.per_warp);
            assert_eq!(s.code() & 15, s.per_warp as i32);
            assert_eq!(s.code() >> 4, s.split as i32);
        }
        assert_eq!(FloatShape::ONE.code(), 0x11);
    }

    #[test]
    fn prompt_attention_splits_only_heads_of_256_and_fits_its_shared_memory() {
        use super::{prefill_columns, prefill_shared_bytes, PREFILL_HEADS};
        for hd in PREFILL_HEADS {
            let dv = prefill_columns(hd);
            assert!(hd.is_multiple_of(dv) && dv.is_multiple_of(16), "{hd}");
            assert_eq!(hd / dv, if hd == 256 { 2 } else { 1 });
            // The H100's 227 KiB a block, two blocks an SM.
            assert!(prefill_shared_bytes(hd) <= 113 << 10, "{hd}");
        }
        // The kernel's original size for whole heads: two tiles of HD + 8.
        assert_eq!(prefill_shared_bytes(128), 2 * 64 * 136 * 2);
        assert_eq!(prefill_shared_bytes(256), 64 * (264 + 136) * 2);
    }

    #[test]
    fn only_very_tall_fast_products_take_more_rows_per_block() {
        assert_eq!(fast_rows_for(1), FAST_ROWS);
        assert_eq!(fast_rows_for(49152), FAST_ROWS);
        assert_eq!(fast_rows_for(4 * 16384), FAST_ROWS);
        assert_eq!(fast_rows_for(4 * 16384 + 1), 2 * FAST_ROWS);
        assert_eq!(fast_rows_for(151936), 2 * FAST_ROWS);
    }

    #[test]
    fn few_token_products_cut_tokens_into_even_chunks_of_at_most_eight() {
        // (tokens, rows) -> (tokens a chunk, blocks): eight rows a block.
        assert_eq!(few_launch(2, 896, 1), (2, 112));
        assert_eq!(few_launch(8, 896, 1), (8, 112));
        assert_eq!(few_launch(9, 896, 1), (5, 224));
        assert_eq!(few_launch(11, 17, 1), (6, 6));
        assert_eq!(few_launch(16, 8, 1), (8, 2));
        assert_eq!(few_launch(37, 8, 1), (8, 5));
        assert_eq!(few_launch(4, 3584, 2), (4, 896));
        assert_eq!(few_launch(3, 17, 4), (3, 9));
        assert_eq!(few_launch(63, 8, 1), (8, 8));
        for n in 2..200 {
            let (nt, blocks) = few_launch(n, 8, 1);
            let chunks = blocks as usize;
            assert!((2..=FEW_TOKENS).contains(&nt), "{n}");
            // The chunks cover the tokens, the last one not empty.
            assert!(chunks * nt >= n && (chunks - 1) * nt < n, "{n}");
            assert_eq!(chunks, n.div_ceil(FEW_TOKENS), "{n}");
        }
    }

    #[test]
    fn few_token_products_split_short_matrices_over_more_warps() {
        use super::{few_shape, few_split};
        // qwen2.5-7b Q8_0 on 132 multiprocessors (units of 32 values): FFN down, attention
        // output and K/V two warps a row pair; gate/up (18944 rows) and the 152k vocabulary one.
        assert_eq!(few_split(3584, 592, 132), 2);
        assert_eq!(few_split(3584, 112, 132), 2);
        assert_eq!(few_split(512, 112, 132), 2);
        assert_eq!(few_split(18944, 112, 132), 1);
        assert_eq!(few_split(152064, 112, 132), 1);
        // qwen2.5-1.5b Q4_K (units of 64): FFN down (140 units) in two; Q (24 units) whole.
        assert_eq!(few_split(1536, 140, 132), 2);
        assert_eq!(few_split(1536, 24, 132), 1);
        // Four warps where the blocks still fit and the rows are long.
        assert_eq!(few_split(896, 592, 132), 4);
        assert_eq!(few_shape(1), 0x12);
        assert_eq!(few_shape(4), 0x42);
    }
}
