//! Launch geometry and the parameter structs the kernels take: grid helpers, rows per block of
//! the fast products, the activation format codes, a product's epilogue, and `mvf_multi`'s
//! matrix set laid out as kernels/matvec_fast.cu reads it.

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig};

use super::pdl_launch::{Launch, PushArg};
use crate::quant::ActType;

/// Weight rows per block of the fast products (kernels/matvec_fast.cu: four warps, a row each).
pub(super) const FAST_ROWS: usize = 4;

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

/// Dynamic shared memory of the CPU-order legacy products (kernels/matvec_fast.cu
/// `mvo_one`) at `rows` rows per block: a `MvoWarp` (8 x 36 + 32 + 32 floats) per warp.
pub(super) const fn mvo_bytes(rows: usize) -> u32 {
    (rows * (8 * 36 + 32 + 32) * 4) as u32
}

/// `mvo_bytes` at `FAST_ROWS`.
pub(super) const MVO_BYTES: u32 = mvo_bytes(FAST_ROWS);

/// Blocks of the argmax's first pass (ARGMAX_BLOCKS in kernels/argmax.cu).
pub(super) const ARGMAX_BLOCKS: u32 = 128;

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

/// One matrix of `mvf_multi`'s set (kernels/matvec_fast.cu `MvfMat`, field for field):
/// device addresses, its rows, its GGML type id and its first block in the launch.
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
    pub(super) pad: i32,
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
    use super::{fast_rows_for, FAST_ROWS};

    #[test]
    fn only_very_tall_fast_products_take_more_rows_per_block() {
        assert_eq!(fast_rows_for(1), FAST_ROWS);
        assert_eq!(fast_rows_for(49152), FAST_ROWS);
        assert_eq!(fast_rows_for(4 * 16384), FAST_ROWS);
        assert_eq!(fast_rows_for(4 * 16384 + 1), 2 * FAST_ROWS);
        assert_eq!(fast_rows_for(151936), 2 * FAST_ROWS);
    }
}
