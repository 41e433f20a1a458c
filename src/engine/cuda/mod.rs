//! The CUDA backend: the same forward pass as the CPU engine, on an NVIDIA GPU through cudarc
//! (driver API + NVRTC, both loaded at run time, so a machine without CUDA still runs cbtop on
//! the CPU). Kernels are CUDA C in `kernels/`, compiled for the device's architecture.
//!
//! `engine` is the decode step (launch plan, graphs, timing); `weights`, `buffers` and
//! `kernels` are what it launches with (`gemm` the prompt products on tensor cores); `launch` holds the single-kernel launches, `hardware`
//! the report's GPU description and peaks, `check` the test-only single-kernel runner,
//! `step_trace` a measuring aid (per-step host and GPU times).

mod buffers;
pub mod calibrate;
mod check;
pub mod clock;
pub mod engine;
mod error;
mod gemm;
mod hardware;
mod kernels;
mod launch;
mod launcher;
pub mod module;
pub mod probe;
pub mod step_trace;
mod weights;

pub use crate::engine::options::Timing;
pub use check::{DecodeOut, DecodeStep, KernelCheck, QuantizedOut};
pub use engine::CudaEngine;
pub use error::device_error;
pub use probe::{probe, GpuDesc, Probe};
