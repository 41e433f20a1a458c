//! The CUDA engine: the same forward pass as the CPU engine, on an NVIDIA GPU through cudarc
//! (driver API + NVRTC, both loaded at run time, so a machine without CUDA still runs cbtop on
//! the CPU). Kernels are CUDA C in `kernels/`, compiled for the device's architecture.
//!
//! Read it as a plan, top down:
//! - `decode`: the engine (`CudaEngine`), its decode loop, graph capture and replay;
//!   `setup` puts a model on the device; `forward` is the per-layer launch plan.
//! - `attention`, `products`, `step_ops`: the launches the plan makes, and `arch_ops` those
//!   of the operations only some architectures have; `gemm` the prompt products on tensor
//!   cores.
//! - `batch`: several sequences decoded together (`CudaBatch`), a step of one token each in
//!   one pass of the same plan, replayed as one CUDA graph per batch size (`batch_graphs`).
//! - `kernel_table` (the compiled module's functions), `launch_params` (geometry and the
//!   kernels' parameter structs), `pdl_launch` (the launch builder), `weights`, `buffers`,
//!   `rope_tables`,
//!   `clock` (per-kernel stamps): what the launches are made with.
//! - `probe`, `module`, `hardware`, `error`: the device, its compiled kernels, its description
//!   and peaks, and its errors; `step_trace` and `env_counts` measuring aids.
//! - With the `test-support` feature, `check` (single kernels against the CPU reference) and
//!   `calibrate` (the kernel clock against work of known length) for the GPU tests.

mod arch_ops;
mod attention;
mod batch;
mod batch_graphs;
mod buffers;
#[cfg(feature = "test-support")]
pub mod calibrate;
#[cfg(feature = "test-support")]
mod check;
pub mod clock;
mod decode;
mod env_counts;
mod error;
mod forward;
mod gemm;
mod gemm_q;
mod hardware;
mod kernel_table;
mod launch_log;
mod launch_params;
pub mod module;
mod pdl_launch;
pub mod probe;
mod products;
mod qmma;
mod rope_tables;
mod setup;
mod split_reduce;
mod step_ops;
pub mod step_trace;
mod weights;

pub use crate::engine::options::Timing;
pub use batch::CudaBatch;
#[cfg(feature = "test-support")]
pub use check::{DecodeOut, DecodeStep, KernelCheck, PrefillStep, QuantizedOut};
pub use decode::{CudaEngine, Decoded};
pub use error::device_error;
pub use hardware::GpuInfo;
pub use probe::{probe, GpuDesc, Probe};
