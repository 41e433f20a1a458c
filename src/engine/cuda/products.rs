//! The matrix-product launches every projection goes through: activation quantization, then
//! the weight type's product kernel with its epilogue (under fast numerics: a few tokens'
//! kernel for a small batch, the tensor cores for a large one), and under fast numerics up to
//! three products of one input in one launch (one token on quantized or float weights, two to
//! four on quantized ones).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig};

use super::buffers::{ActBufs, Which};
use super::clock::KernelClock;
use super::decode::CudaEngine;
use super::gemm;
use super::kernel_table::{Kernels, Product};
use super::launch_params::{
    ceil_div, fast_rows_for, few_launch, few_shape, float_shape, kind_code, Epilogue, Feed,
    FloatShape, Held, MvfMat, MvfSet, FAST_ROWS, MVO_BYTES,
};
use super::pdl_launch::PushArg;
use super::qmma;
use super::weights::{bias, mat, GMat, Mat};
use crate::engine::options::Numerics;
use crate::quant::{ActType, GgmlType};

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
            .stamp(&st)
            .launch(LaunchConfig {
                grid_dim: (ceil_div(n * cols, 256), 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
    }
    .map(|_| ())
}

/// `out[t] = W · x[t]` for `n` rows of `x`: the activations first rounded or quantized as
/// llama.cpp's CPU does for W's type (kernels/act_quant.cu), then the type's product kernel
/// from the table (`product_kernels` picks it for the engine's numerics; the exact kernels
/// reproduce the CPU's float order, kernels/common.cuh). Under fast numerics a batch on
/// Q4_K/Q6_K/Q8_0 weights goes to the integer tensor cores (qmma.rs), a large batch on other
/// types to the f16 ones (gemm.rs), and a smaller one on quantized weights to the few-token
/// kernels (kernels/matvec_few.cu). `x` and `act` hold at least `n × cols` values,
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
    if let Some((g, q)) = k
        .gemm
        .as_ref()
        .and_then(|g| g.qmma_for(m.ty, m.cols, n).map(|q| (g, q)))
    {
        if !ep.quantized {
            quantize(s, k, x, n, m.cols, ActType::for_weights(m.ty), act, clock)?;
        }
        let part = act.f16.as_ref().map(|b| b.part());
        let acts = qmma::QuantActs {
            q: &act.q,
            d: &act.d,
            x: &act.x,
        };
        qmma::product(
            s,
            q,
            g.reduce(),
            k.launcher(),
            m,
            n,
            acts,
            part,
            out,
            ep,
            clock,
        )?;
        return Ok(Held {
            quantized: true,
            f16: false,
        });
    }
    if gemm::applies(k.gemm.as_ref(), act.f16.as_ref(), m, n) {
        let g = k.gemm.as_ref().expect("applies() checked");
        let b = act.f16.as_mut().expect("applies() checked");
        gemm::gemm_product(s, g, k.launcher(), m, n, x, b, out, ep, clock)?;
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
    let VecDotLaunch {
        f,
        cfg,
        quantized,
        free_shape,
    } = vec_dot_launch(k, m.ty, m.rows, m.row_bytes, n);
    let st = clock.stamp();
    // SAFETY: reads rows × row_bytes of weights (the fast kernels up to 4 bytes past a field,
    // within the upload's padding) and n × cols activations (rounded floats, or int8 values
    // with their scales and sums), writes n × rows; the few-token kernels' grid is
    // `few_launch`'s, which covers every row and every token once.
    unsafe {
        let mut l = k.launch(s, f);
        l.arg(&m.data).arg(&rb).arg(&rows);
        match &free_shape {
            Some(shape) => l.arg(shape),
            None => l.arg(&cols),
        };
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
            .reads(&m.label)
            .stamp(&st)
            .launch(cfg)
    }?;
    Ok(Held {
        quantized: true,
        f16: false,
    })
}

/// The vec-dot kernel a product takes (when the tensor cores do not) and its launch.
pub(super) struct VecDotLaunch<'a> {
    pub(super) f: &'a CudaFunction,
    pub(super) cfg: LaunchConfig,
    /// Quantized activations (else rounded floats in `xf`).
    pub(super) quantized: bool,
    /// The launch shape the fast float kernel and the few-token kernels take where the others
    /// take `cols` (MvfMat's shape code; they derive `cols` from the row's bytes).
    free_shape: Option<i32>,
}

/// The vec-dot kernel and launch for `n` tokens against a `ty` matrix of `rows` rows of
/// `row_bytes` bytes: the one place the product's kernel is chosen from the table.
pub(super) fn vec_dot_launch(
    k: &Kernels,
    ty: GgmlType,
    rows: usize,
    row_bytes: usize,
    n: usize,
) -> VecDotLaunch<'_> {
    let mut free_shape = None;
    // Float weights: four rows per one-warp block for one token, else 16 rows per block of 128
    // threads (8 per row) and up to 8 tokens; quantized weights: `one_rows` rows per block for
    // one token, eight rows and a chunk of up to 8 tokens (fast), or a row and up to 8 tokens.
    let (f, grid, threads, shared, quantized) = match k.product(ty) {
        // One token: warps over rows in any order at the matrix's `float_shape` (fast numerics),
        // else four rows per one-warp block in the CPU's order; 16-byte loads either way.
        Product::Float { free: Some(f), .. } if n == 1 && row_bytes.is_multiple_of(16) => {
            let shape = float_shape(rows, row_bytes);
            free_shape = Some(shape.code());
            (f, (ceil_div(rows, shape.block_rows()), 1, 1), 128, 0, false)
        }
        Product::Float { one, .. } if n == 1 && row_bytes.is_multiple_of(16) => {
            (one, (ceil_div(rows, 4), 1, 1), 32, 0, false)
        }
        Product::Float { batch, .. } => (
            batch,
            (ceil_div(rows, 16), ceil_div(n, 8), 1),
            128,
            0,
            false,
        ),
        Product::Quant {
            one,
            one_rows,
            one_shared,
            ..
        } if n == 1 => {
            // The fast kernels: a warp per row.
            let (per_block, threads) = match *one_rows {
                1 => (1, 128),
                _ => {
                    let r = fast_rows_for(rows);
                    (r, 32 * r as u32)
                }
            };
            let shared = *one_shared / FAST_ROWS as u32 * per_block as u32;
            (
                one,
                (ceil_div(rows, per_block), 1, 1),
                threads,
                shared,
                true,
            )
        }
        // Fast numerics, a few tokens: eight rows per block of four warps, for each chunk of
        // the tokens (`few_launch`), a row block's chunks side by side.
        // Shorter matrices give a row pair several warps (`few_split`), the kernel's `shape`.
        Product::Quant { few, .. } if n >= 2 && !few.is_empty() => {
            let split = k.few_split(ty, rows, row_bytes);
            let (nt, blocks) = few_launch(n, rows, split);
            free_shape = Some(few_shape(split));
            (&few[nt - 2], (blocks, 1, 1), 128, 0, true)
        }
        Product::Quant { batch, .. } => (batch, (rows as u32, ceil_div(n, 8), 1), 128, 0, true),
    };
    VecDotLaunch {
        f,
        cfg: LaunchConfig {
            grid_dim: grid,
            block_dim: (threads, 1, 1),
            shared_mem_bytes: shared,
        },
        quantized,
        free_shape,
    }
}

impl CudaEngine {
    /// What the kernel producing `m`'s input for `n` tokens writes beside its f32 output: the
    /// f16 operand where `m`'s product takes the tensor cores, else `m`'s activation format.
    pub(super) fn feed_for(&self, n: usize, m: Mat) -> Feed {
        let g = mat(&self.w, m);
        if gemm::applies(self.k.gemm.as_ref(), self.bufs.act.f16.as_ref(), g, n) {
            Feed::F16
        } else {
            Feed::Act(ActType::for_weights(g.ty))
        }
    }

    /// `out = M · input` for each (M, out) of `outs`, quantizing `input` once per run of
    /// matrices sharing an activation format; `accumulate` adds into `out` (a fused residual).
    /// Q/K/V biases are added in the products' epilogue.
    pub(super) fn products(
        &mut self,
        n: usize,
        input: Which,
        outs: &[(Mat, Which)],
        accumulate: bool,
        pre: Option<Feed>,
    ) -> Result<(), DriverError> {
        if let Some(kind) = self.one_launch_kind(n, outs) {
            return self.products_multi(
                n,
                input,
                outs,
                accumulate,
                pre == Some(Feed::Act(kind)),
                kind,
            );
        }
        let mut last = pre.and_then(Feed::act);
        let mut f16 = pre == Some(Feed::F16);
        for &(which, output) in outs {
            let m = mat(&self.w, which);
            let kind = ActType::for_weights(m.ty);
            let bias = bias(&self.w, which);
            let ep = Epilogue {
                quantized: last == Some(kind),
                bias,
                accumulate,
                f16,
            };
            let act: *mut ActBufs = &mut self.bufs.act;
            let (x, out) = self.bufs.pair(input, output);
            // SAFETY: `act` is a field distinct from both buffers `pair` returned.
            let act = unsafe { &mut *act };
            let held = product(
                &self.stream,
                &self.k,
                m,
                n,
                x,
                act,
                out,
                ep,
                &mut self.clock,
            )?;
            last = held.quantized.then_some(kind);
            f16 = held.f16;
        }
        Ok(())
    }

    /// The activation format shared by `outs` when the fast products can take them all in one
    /// launch: two or three matrices of one format, for one token quantized or float with
    /// whole 16-byte rows (not under the CPU's order, which the float kernels do not keep),
    /// for two to four tokens quantized matrices each of which would take the few-token
    /// kernels.
    fn one_launch_kind(&self, n: usize, outs: &[(Mat, Which)]) -> Option<ActType> {
        let few = n >= 2 && self.k.set_kernel(n).is_some();
        if self.numerics != Numerics::Fast || !(n == 1 || few) || !(2..=3).contains(&outs.len()) {
            return None;
        }
        let kind = ActType::for_weights(mat(&self.w, outs[0].0).ty);
        outs.iter()
            .all(|&(m, _)| {
                let m = mat(&self.w, m);
                let fits = if few {
                    self.takes_few(m, n)
                } else {
                    m.ty.is_quantized() || (!self.k.ordered && m.row_bytes.is_multiple_of(16))
                };
                fits && ActType::for_weights(m.ty) == kind
            })
            .then_some(kind)
    }

    /// Whether a product of `n` tokens against `m` alone takes the few-token kernels (neither
    /// the integer nor the f16 tensor cores, `product`'s order of choice).
    fn takes_few(&self, m: &GMat, n: usize) -> bool {
        let qmma = self
            .k
            .gemm
            .as_ref()
            .and_then(|g| g.qmma_for(m.ty, m.cols, n));
        let f16 = gemm::applies(self.k.gemm.as_ref(), self.bufs.act.f16.as_ref(), m, n);
        let few = matches!(self.k.product(m.ty), Product::Quant { few, .. } if !few.is_empty());
        qmma.is_none() && !f16 && few
    }

    /// `out = M · input` for two or three matrices of `n` tokens in one launch (one token:
    /// kernels/matvec_fast.cu `mvf_multi`; two to four: kernels/matvec_few.cu `mvfm<n>`), the
    /// input quantized (or rounded) first unless `quantized`.
    fn products_multi(
        &mut self,
        n: usize,
        input: Which,
        outs: &[(Mat, Which)],
        accumulate: bool,
        quantized: bool,
        kind: ActType,
    ) -> Result<(), DriverError> {
        let cols = mat(&self.w, outs[0].0).cols;
        if !quantized {
            let act: *mut ActBufs = &mut self.bufs.act;
            let x = self.bufs.get(input);
            // SAFETY: `act` is a field distinct from the input buffer.
            let act = unsafe { &mut *act };
            quantize(
                &self.stream,
                &self.k,
                x,
                n,
                cols,
                kind,
                act,
                &mut self.clock,
            )?;
        }
        let s = &self.stream;
        let mats: Vec<SetMat> = outs
            .iter()
            .map(|&(which, output)| SetMat {
                m: mat(&self.w, which),
                bias: bias(&self.w, which).map_or(0, |b| b.device_ptr(s).0),
                out: self.bufs.get(output).device_ptr(s).0,
            })
            .collect();
        launch_set(
            s,
            &self.k,
            n,
            &mats,
            &self.bufs.act,
            accumulate,
            &mut self.clock,
        )
    }
}

/// One matrix of a one-launch set (`launch_set`): its weights, and the device addresses of
/// its bias (0: none) and its output.
pub(super) struct SetMat<'a> {
    pub(super) m: &'a GMat,
    pub(super) bias: u64,
    pub(super) out: u64,
}

/// `out = M · x` for the two or three matrices of `mats` against the `n` tokens `act` holds
/// in their shared activation format, in one launch (one token: kernels/matvec_fast.cu
/// `mvf_multi`; two to four on quantized weights: kernels/matvec_few.cu `mvfm<n>`);
/// `accumulate` adds into the outputs.
pub(super) fn launch_set(
    s: &Arc<CudaStream>,
    k: &Kernels,
    n: usize,
    mats: &[SetMat],
    act: &ActBufs,
    accumulate: bool,
    clock: &mut KernelClock,
) -> Result<(), DriverError> {
    let mut set = MvfSet::default();
    let mut blocks = 0usize;
    for (i, sm) in mats.iter().enumerate() {
        let m = sm.m;
        // The matrix's blocks: the one-token kernels' (a float matrix's at its shape) or the
        // few-token kernels' at the matrix's split.
        let (shape, own_blocks) = if n > 1 {
            let split = k.few_split(m.ty, m.rows, m.row_bytes);
            (few_shape(split), few_launch(n, m.rows, split).1 as usize)
        } else {
            let f = if m.ty.is_quantized() {
                FloatShape::ONE
            } else {
                float_shape(m.rows, m.row_bytes)
            };
            (f.code(), m.rows.div_ceil(f.block_rows()))
        };
        set.m[i] = MvfMat {
            w: m.data.device_ptr(s).0,
            row_bytes: m.row_bytes as u64,
            bias: sm.bias,
            out: sm.out,
            rows: m.rows as i32,
            ty: m.ty.id() as i32,
            first_block: blocks as i32,
            shape,
        };
        blocks += own_blocks;
    }
    set.count = mats.len() as i32;
    set.ordered = i32::from(k.ordered);
    let shared = if k.ordered { MVO_BYTES } else { 0 };
    let cols = mats[0].m.cols as i32;
    let acc = i32::from(accumulate);
    let st = clock.stamp();
    let labels = (st.ptr != 0).then(|| {
        let names: Vec<&str> = mats.iter().map(|sm| sm.m.label.as_str()).collect();
        names.join(" + ")
    });
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: shared,
    };
    let reads = labels.as_deref().unwrap_or_default();
    let f = k
        .set_kernel(n)
        .expect("one_launch_kind and matvec_set take sets of n tokens with a set kernel");
    let nn = n as i32;
    // SAFETY: each matrix's rows × row_bytes of weights against n × `cols` activations
    // (quantized, or for one token rounded floats in `xf`); each output (a distinct buffer)
    // gets n × `rows` values; each matrix's blocks are its kernel's grid (`few_launch`'s for
    // several tokens), which covers every row and token once.
    unsafe {
        let mut l = k.launch(s, f);
        l.arg(&set).arg(&cols).arg(&act.q).arg(&act.d).arg(&act.x);
        // `mvfm<n>` takes the token count where `mvf_multi` takes the float activations.
        if n > 1 {
            l.arg(&nn);
        } else {
            l.arg(&act.xf);
        }
        l.arg(&acc).reads(reads).stamp(&st).launch(cfg)
    }
    .map(|_| ())
}
