//! The kernel table (every function of the compiled module the engine launches, looked up
//! once) and the matrix-product launch every projection goes through: activation
//! quantization, then the weight type's product kernel with its epilogue.

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, DriverError, LaunchConfig,
};

use super::buffers::ActBufs;
use super::clock::KernelClock;
use super::gemm::{self, GemmKernels};
use super::launcher::{Launch, PushArg};
use super::module;
use super::weights::GMat;
use crate::engine::Numerics;
use crate::quant::{ActType, GgmlType};

/// A weight type's product kernels: one for float weights, or one for a single token and
/// one for batches of up to 8 for quantized weights (kernels/common.cuh). The single-token
/// kernel takes `one_rows` weight rows per block: 1 per 128 threads for the exact kernels,
/// `FAST_ROWS` for the fast ones (a warp per row, kernels/matvec_fast.cu; more for very tall
/// matrices, `fast_rows_for`), with `one_shared` bytes of dynamic shared memory per
/// `FAST_ROWS` rows (the fast legacy kernels' CPU-order fold).
pub(super) enum Product {
    Float(CudaFunction),
    Quant {
        one: CudaFunction,
        one_rows: usize,
        one_shared: u32,
        batch: CudaFunction,
    },
}

/// Every kernel the engine launches, looked up once in the compiled module.
pub(super) struct Kernels {
    /// (product, embed) per weight type.
    pub(super) typed: Vec<(GgmlType, Product, CudaFunction)>,
    pub(super) attention: CudaFunction,
    /// RoPE and the KV-cache store in one launch (kernels/rope.cu).
    pub(super) rope_store: CudaFunction,
    /// Fast numerics: split-KV decode attention (kernels/attention_fast.cu).
    pub(super) attention_split: CudaFunction,
    /// Fast numerics: up to three products of one input in one launch.
    pub(super) mvf_multi: CudaFunction,
    /// Fast numerics keeping the CPU's order in a decode step (`cpu_order_fast`): the legacy
    /// products' `mvo` kernels, and CPU-order decode attention at short contexts.
    pub(super) ordered: bool,
    pub(super) silu_mul_quant: CudaFunction,
    pub(super) rms_norm_quant: CudaFunction,
    pub(super) argmax_blocks: CudaFunction,
    pub(super) argmax_final: CudaFunction,
    pub(super) act_quant: CudaFunction,
    pub(super) advance: CudaFunction,
    /// Launches carry programmatic dependent launch (launcher.rs).
    pub(super) pdl: bool,
    /// Fast numerics: prompt products on tensor cores (gemm.rs).
    pub(super) gemm: Option<GemmKernels>,
    /// Fast numerics: prompt attention on tensor cores for head sizes 64 and 128
    /// (kernels/attention_prefill.cu).
    attention_prefill: Option<[CudaFunction; 2]>,
}

impl Kernels {
    /// Every kernel of module `m`, the products chosen for `numerics` and `ordered`
    /// (`product_kernels`).
    pub(super) fn load(
        m: &Arc<CudaModule>,
        numerics: Numerics,
        ordered: bool,
        pdl: bool,
        sms: usize,
    ) -> Result<Kernels, String> {
        let f = |n: &str| module::function(m, n);
        let mut typed = Vec::new();
        for ty in GgmlType::ALL {
            let name = ty.name().to_lowercase();
            let product = product_kernels(&f, ty, numerics, ordered)?;
            typed.push((ty, product, f(&format!("embed_{name}"))?));
        }
        Ok(Kernels {
            typed,
            attention: f("attention")?,
            rope_store: f("rope_store")?,
            attention_split: f("attention_split")?,
            mvf_multi: f("mvf_multi")?,
            ordered: ordered && numerics == Numerics::Fast,
            silu_mul_quant: f("silu_mul_quant")?,
            rms_norm_quant: f("rms_norm_quant")?,
            argmax_blocks: f("argmax_blocks")?,
            argmax_final: f("argmax_final")?,
            act_quant: f("act_quant")?,
            advance: f("advance")?,
            pdl,
            gemm: match numerics {
                Numerics::Fast => Some(GemmKernels::load(&f, sms)?),
                Numerics::Exact => None,
            },
            attention_prefill: match numerics {
                Numerics::Fast => Some([f("attention_prefill_64")?, f("attention_prefill_128")?]),
                Numerics::Exact => None,
            },
        })
    }

    /// The tensor-core prompt attention for a batch of `n` queries over `c`'s heads, when
    /// it takes them (`flash_prompt_from`).
    pub(super) fn attention_prefill(
        &self,
        c: &crate::model::Config,
        n: usize,
    ) -> Option<&CudaFunction> {
        let [f64_, f128] = self.attention_prefill.as_ref()?;
        let from = flash_prompt_from(c, self.gemm.as_ref().map(|g| g.from))?;
        (n >= from).then_some(if c.head_dim == 64 { f64_ } else { f128 })
    }

    /// A launch of `f` (one of this table's kernels) on `s`.
    pub(super) fn launch<'a>(&'a self, s: &'a CudaStream, f: &'a CudaFunction) -> Launch<'a> {
        Launch::new(s, f, self.pdl)
    }

    pub(super) fn product(&self, ty: GgmlType) -> &Product {
        &self
            .typed
            .iter()
            .find(|t| t.0 == ty)
            .expect("every type has kernels")
            .1
    }

    pub(super) fn embed(&self, ty: GgmlType) -> &CudaFunction {
        &self
            .typed
            .iter()
            .find(|t| t.0 == ty)
            .expect("every type has kernels")
            .2
    }
}

/// The product kernels for weight type `ty` under `numerics`: the one place where the matrix
/// product's kernel set is chosen. Exact: kernels that reproduce the CPU's float order
/// (kernels/common.cuh). Fast: a token's product on quantized weights takes the bandwidth-
/// shaped kernels of kernels/matvec_fast.cu (`ordered`: the legacy types' in the CPU's
/// order); prompt batches and float weights keep the exact kernels.
fn product_kernels(
    f: &impl Fn(&str) -> Result<CudaFunction, String>,
    ty: GgmlType,
    numerics: Numerics,
    ordered: bool,
) -> Result<Product, String> {
    let name = ty.name().to_lowercase();
    if !ty.is_quantized() {
        return Ok(Product::Float(f(&format!("matvec_{name}"))?));
    }
    let (one, one_rows, one_shared) = match numerics {
        Numerics::Exact => (f(&format!("qmv1_{name}"))?, 1, 0),
        Numerics::Fast if ordered && is_legacy(ty) => {
            (f(&format!("mvo_{name}"))?, FAST_ROWS, MVO_BYTES)
        }
        Numerics::Fast => (f(&format!("mvf_{name}"))?, FAST_ROWS, 0),
    };
    Ok(Product::Quant {
        one,
        one_rows,
        one_shared,
        batch: f(&format!("qmv8_{name}"))?,
    })
}

/// The smallest batch the tensor-core prompt attention takes for `c`'s heads under fast
/// numerics, whose tensor-core products start at `gemm_from` tokens (None: exact numerics),
/// or None where it takes none: head size 64 or 128, whole query groups per KV head, and
/// batches as large as the tensor-core products'. Smaller batches, and exact numerics, run
/// the CPU-order kernel (attention.cu), whose score rows the batch buffers size from this.
pub(super) fn flash_prompt_from(
    c: &crate::model::Config,
    gemm_from: Option<usize>,
) -> Option<usize> {
    let fits = matches!(c.head_dim, 64 | 128)
        && c.n_kv_heads > 0
        && c.n_heads.is_multiple_of(c.n_kv_heads);
    gemm_from.filter(|_| fits)
}

/// Weight rows per block of the fast products (kernels/matvec_fast.cu: four warps, a row each).
pub(super) const FAST_ROWS: usize = 4;

/// The most blocks a fast one-token product launches at `FAST_ROWS` rows per block; a taller
/// matrix (a 151936-word vocabulary's output projection) takes twice the rows per block.
/// Under `--timing events` every block's thread 0 stamps its exit, and the cost of those
/// stamps grows faster than the block count (bench/cuda/stamp_cost.cu: 29 us per step with
/// 117k blocks of 128 threads, 6.5 us with 60k of 256). Measured on the H100 (synthetic
/// qwen2.5-0.5b, `--prefill 1 --warmup 8`, events 256 tokens / off 512): eight rows per
/// block took the output projection's stamped time from 58.7 to 47.2 us and the stamped
/// step from 1293-1295 to 1313-1315 tok/s, unstamped unchanged (1370-1372). Eight rows for
/// the two- and three-matrix launches too slowed the unstamped step to 1348-1355 tok/s (the
/// 2432-block gate/up launch timed 113 -> 133 us); for SmolLM2's 49152-row output, 8, 16 or
/// 32 rows bought nothing or lost.
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

/// The legacy 32-weight quantized types, whose fast products have a CPU-order kernel.
fn is_legacy(ty: GgmlType) -> bool {
    ty.is_quantized() && ty.block_size() == 32
}

/// Whether fast numerics keep the CPU's float order for `model`'s decode steps: where every
/// decode product can (legacy and float weights; the k-quants' fast kernels sum freely), the
/// legacy products take their CPU-order kernels and decode attention its CPU-order path up to
/// 128 positions, so a short decode gives the CPU engine's bits, as `--numerics exact` does
/// (SmolLM2 Q4_1's greedy tokens are then llama.cpp's CPU's). Where some product reorders
/// anyway, order buys nothing and the free kernels are faster. `CBTOP_FAST_CPU_ORDER=0` turns
/// it off (for measuring what it costs).
pub fn cpu_order_fast(model: &crate::model::Model) -> bool {
    if std::env::var("CBTOP_FAST_CPU_ORDER").is_ok_and(|v| v == "0") {
        return false;
    }
    let w = &model.weights;
    let products = w
        .layers
        .iter()
        .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]);
    std::iter::once(&w.output)
        .chain(products)
        .all(|m| !m.ty.is_quantized() || is_legacy(m.ty))
}

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

/// `n` rows of `cols` values of `x` into the activation buffers in format `kind`
/// (kernels/act_quant.cu).
#[allow(clippy::too_many_arguments)]
pub(super) fn quantize(
    s: &Arc<CudaStream>,
    k: &Kernels,
    x: &CudaSlice<f32>,
    n: usize,
    cols: usize,
    kind: ActType,
    act: &mut ActBufs,
    clock: &mut KernelClock,
) -> Result<(), DriverError> {
    let (total, kind) = ((n * cols) as i32, kind_code(kind));
    let st = clock.stamp();
    // SAFETY: n × cols values from x into the activation buffers (sized for the widest row).
    unsafe {
        k.launch(s, &k.act_quant)
            .arg(x)
            .arg(&total)
            .arg(&kind)
            .arg(&mut act.xf)
            .arg(&mut act.q)
            .arg(&mut act.d)
            .arg(&mut act.x)
            .arg(&st.ptr)
            .launch(LaunchConfig {
                grid_dim: (ceil_div(n * cols, 256), 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
    }
    .map(|_| ())
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

/// `out[t] = W · x[t]` for `n` rows of `x`: the activations first rounded or quantized as
/// llama.cpp's CPU does for W's type (kernels/act_quant.cu), then the type's product kernel
/// from the table (`product_kernels` picks it for the engine's numerics; the exact kernels
/// reproduce the CPU's float order, kernels/common.cuh). Under fast numerics a large batch
/// goes to the tensor cores instead (gemm.rs). `x` and `act` hold at least `n × cols` values,
/// `out` `n × rows`. Returns what `act` now holds of `x` (for the next product of the same
/// input).
// The operands are distinct borrows of the engine's fields; bundling them would only move
// the list into a struct literal at each call.
#[allow(clippy::too_many_arguments)]
pub(super) fn product(
    s: &Arc<CudaStream>,
    k: &Kernels,
    m: &GMat,
    n: usize,
    x: &CudaSlice<f32>,
    act: &mut ActBufs,
    out: &mut CudaSlice<f32>,
    ep: Epilogue,
    clock: &mut KernelClock,
) -> Result<Held, DriverError> {
    if gemm::applies(k, act.f16.as_ref(), m, n) {
        let b = act.f16.as_mut().expect("applies() checked");
        gemm::gemm_product(s, k, m, n, x, b, out, ep, clock)?;
        return Ok(Held {
            quantized: false,
            f16: true,
        });
    }
    if !ep.quantized {
        quantize(s, k, x, n, m.cols, ActType::for_weights(m.ty), act, clock)?;
    }
    let (rb, rows, cols, nn) = (m.row_bytes as u64, m.rows as i32, m.cols as i32, n as i32);
    let accumulate = i32::from(ep.accumulate);
    let null = 0u64;
    // Float weights: 16 rows per block of 128 threads (8 per row), up to 8 tokens; quantized
    // weights: `one_rows` rows per block for one token, or a row and up to 8 tokens.
    let (f, grid, threads, shared, quantized) = match k.product(m.ty) {
        Product::Float(f) => (f, (ceil_div(m.rows, 16), ceil_div(n, 8), 1), 128, 0, false),
        Product::Quant {
            one,
            one_rows,
            one_shared,
            ..
        } if n == 1 => {
            // The fast kernels: a warp per row.
            let (rows, threads) = match *one_rows {
                1 => (1, 128),
                _ => {
                    let r = fast_rows_for(m.rows);
                    (r, 32 * r as u32)
                }
            };
            let shared = *one_shared / FAST_ROWS as u32 * rows as u32;
            (one, (ceil_div(m.rows, rows), 1, 1), threads, shared, true)
        }
        Product::Quant { batch, .. } => (batch, (m.rows as u32, ceil_div(n, 8), 1), 128, 0, true),
    };
    let cfg = LaunchConfig {
        grid_dim: grid,
        block_dim: (threads, 1, 1),
        shared_mem_bytes: shared,
    };
    let st = clock.stamp();
    // SAFETY: reads rows × row_bytes of weights and n × cols activations (rounded floats, or
    // int8 values with their scales and sums), writes n × rows.
    unsafe {
        let mut l = k.launch(s, f);
        l.arg(&m.data).arg(&rb).arg(&rows).arg(&cols);
        if quantized {
            l.arg(&act.q).arg(&act.d).arg(&act.x);
        } else {
            l.arg(&act.xf);
        }
        l.arg(&nn);
        match ep.bias {
            Some(b) => l.arg(b),
            None => l.arg(&null),
        };
        l.arg(&accumulate).arg(out).arg(&st.ptr).launch(cfg)
    }?;
    Ok(Held {
        quantized: true,
        f16: false,
    })
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
