//! The kernel table (every function of the compiled module the engine launches, looked up
//! once) and the matrix-product launch every projection goes through: activation
//! quantization, then the weight type's product kernel with its epilogue.

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};

use super::buffers::ActBufs;
use super::clock::KernelClock;
use super::module;
use super::weights::GMat;
use crate::engine::Numerics;
use crate::quant::{ActType, GgmlType};

/// A weight type's product kernels: one for float weights, or one for a single token and
/// one for batches of up to 8 for quantized weights (kernels/common.cuh).
pub(super) enum Product {
    Float(CudaFunction),
    Quant {
        one: CudaFunction,
        batch: CudaFunction,
    },
}

/// Every kernel the engine launches, looked up once in the compiled module.
pub(super) struct Kernels {
    /// (product, embed) per weight type.
    pub(super) typed: Vec<(GgmlType, Product, CudaFunction)>,
    pub(super) rope: CudaFunction,
    pub(super) kv_store: CudaFunction,
    pub(super) attention: CudaFunction,
    pub(super) silu_mul_quant: CudaFunction,
    pub(super) rms_norm_quant: CudaFunction,
    pub(super) argmax_blocks: CudaFunction,
    pub(super) argmax_final: CudaFunction,
    pub(super) act_quant: CudaFunction,
    pub(super) advance: CudaFunction,
}

impl Kernels {
    /// Every kernel of module `m`, the products chosen for `numerics` (`product_kernels`).
    pub(super) fn load(m: &Arc<CudaModule>, numerics: Numerics) -> Result<Kernels, String> {
        let f = |n: &str| module::function(m, n);
        let mut typed = Vec::new();
        for ty in GgmlType::ALL {
            let name = ty.name().to_lowercase();
            let product = product_kernels(&f, ty, numerics)?;
            typed.push((ty, product, f(&format!("embed_{name}"))?));
        }
        Ok(Kernels {
            typed,
            rope: f("rope")?,
            kv_store: f("kv_store")?,
            attention: f("attention")?,
            silu_mul_quant: f("silu_mul_quant")?,
            rms_norm_quant: f("rms_norm_quant")?,
            argmax_blocks: f("argmax_blocks")?,
            argmax_final: f("argmax_final")?,
            act_quant: f("act_quant")?,
            advance: f("advance")?,
        })
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
/// product's kernel set is chosen. Both settings take the exact kernels for now (they reproduce
/// the CPU's float order, kernels/common.cuh); a fast set plugs in under `Numerics::Fast`.
fn product_kernels(
    f: &impl Fn(&str) -> Result<CudaFunction, String>,
    ty: GgmlType,
    numerics: Numerics,
) -> Result<Product, String> {
    let name = ty.name().to_lowercase();
    match numerics {
        Numerics::Fast | Numerics::Exact => Ok(if !ty.is_quantized() {
            Product::Float(f(&format!("matvec_{name}"))?)
        } else {
            Product::Quant {
                one: f(&format!("qmv1_{name}"))?,
                batch: f(&format!("qmv8_{name}"))?,
            }
        }),
    }
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
}

/// `out[t] = W · x[t]` for `n` rows of `x`: the activations first rounded or quantized as
/// llama.cpp's CPU does for W's type (kernels/act_quant.cu), then the type's product kernel
/// from the table (`product_kernels` picks it for the engine's numerics; the exact kernels
/// reproduce the CPU's float order, kernels/common.cuh). `x` and `act` hold at least
/// `n × cols` values, `out` `n × rows`.
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
) -> Result<(), DriverError> {
    let kind = kind_code(ActType::for_weights(m.ty));
    let total = (n * m.cols) as i32;
    // SAFETY: n × cols values from x into the activation buffers (sized for the widest row).
    if !ep.quantized {
        let st = clock.stamp();
        unsafe {
            s.launch_builder(&k.act_quant)
                .arg(x)
                .arg(&total)
                .arg(&kind)
                .arg(&mut act.xf)
                .arg(&mut act.q)
                .arg(&mut act.d)
                .arg(&mut act.x)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(LaunchConfig {
                    grid_dim: (ceil_div(n * m.cols, 256), 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                })
        }?;
    }
    let (rb, rows, cols, nn) = (m.row_bytes as u64, m.rows as i32, m.cols as i32, n as i32);
    let accumulate = i32::from(ep.accumulate);
    let null = 0u64;
    // Float weights: 16 rows per block of 128 threads (8 per row), up to 8 tokens; quantized
    // weights: one thread block per row and one token, or up to 8 (kernels/common.cuh).
    let (f, grid, quantized) = match k.product(m.ty) {
        Product::Float(f) => (f, (ceil_div(m.rows, 16), ceil_div(n, 8), 1), false),
        Product::Quant { one, .. } if n == 1 => (one, (m.rows as u32, 1, 1), true),
        Product::Quant { batch, .. } => (batch, (m.rows as u32, ceil_div(n, 8), 1), true),
    };
    let cfg = LaunchConfig {
        grid_dim: grid,
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let st = clock.stamp();
    // SAFETY: reads rows × row_bytes of weights and n × cols activations (rounded floats, or
    // int8 values with their scales and sums), writes n × rows.
    unsafe {
        let mut l = s.launch_builder(f);
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
        l.arg(&accumulate)
            .arg(out)
            .arg(&st.ptr)
            .arg(&st.slot)
            .launch(cfg)
    }?;
    Ok(())
}
