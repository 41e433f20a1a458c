//! The last launch of a product whose K was split into pieces (the f16 tiles of gemm.rs and
//! the quantized-weight kernels of gemm_q.rs): `gemm_reduce` (kernels/gemm_f16.cu) adds the
//! pieces' partial sums in a fixed order, so a split product gives the same logits every run.

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DriverError};

use super::clock::KernelClock;
use super::launch_params::lin;
use super::pdl_launch::{Launcher, PushArg};

/// Where a split product's sums go: C's n rows of `rows` values (stride `ldc`) at device
/// address `c`, with the product's epilogue (the bias at address `bias`, 0 for none; added to
/// C where `acc` is 1).
pub(super) struct ReduceOut {
    pub(super) n: usize,
    pub(super) rows: usize,
    pub(super) bias: u64,
    pub(super) acc: i32,
    pub(super) c: u64,
    pub(super) ldc: i32,
}

impl ReduceOut {
    /// C as n rows of `rows` values (the product's whole output), at device address `c`.
    pub(super) fn whole(n: usize, rows: usize, bias: u64, acc: bool, c: u64) -> ReduceOut {
        ReduceOut {
            n,
            rows,
            bias,
            acc: i32::from(acc),
            c,
            ldc: rows as i32,
        }
    }
}

/// `gemm_reduce` (kernels/gemm_f16.cu): the `splits` pieces of n x rows partial sums in `part`
/// added in a fixed order into `out`, as the product's own epilogue would write them.
pub(super) fn reduce_splits(
    launcher: Launcher<'_>,
    s: &CudaStream,
    reduce: &CudaFunction,
    part: &CudaSlice<f32>,
    splits: usize,
    out: ReduceOut,
    clock: &mut KernelClock,
) -> Result<(), DriverError> {
    let (sp, n, rows, st) = (splits as i32, out.n as i32, out.rows as i32, clock.stamp());
    // SAFETY: the product launched before left splits x n x rows partial sums in `part`
    // (its plan checked the room); C holds n rows of stride ldc from `out.c`, the bias (when
    // there is one) `rows` values.
    unsafe {
        launcher
            .launch(s, reduce)
            .arg(part)
            .arg(&sp)
            .arg(&n)
            .arg(&rows)
            .arg(&out.bias)
            .arg(&out.acc)
            .arg(&out.c)
            .arg(&out.ldc)
            .stamp(&st)
            .launch(lin(out.n * out.rows))
    }
    .map(|_| ())
}
