//! The CUDA backend: the same forward pass as the CPU engine, on an NVIDIA GPU through cudarc
//! (driver API + NVRTC, both loaded at run time, so a machine without CUDA still runs cbtop on
//! the CPU). Kernels are CUDA C in `kernels/`, compiled for the device's architecture.

pub mod calibrate;
pub mod clock;
pub mod engine;
pub mod module;
pub mod probe;

pub use engine::{CudaEngine, KernelCheck, Timing};
pub use probe::{probe, GpuDesc, Probe};
