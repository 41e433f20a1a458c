//! Machine telemetry beside the brick timings: GPU state through NVML (utilisation, memory,
//! power, clocks, temperature, PCIe) and the host process (CPU %, resident memory) from /proc.
//! Plain `TelemetrySample`s come from a `Sampler` thread at about 10 Hz, so the live view and
//! the headless report read the same numbers without ever waiting on a driver call.
//!
//! Where there is no GPU telemetry (no NVIDIA driver, no NVML library, no device), the GPU part
//! is a one-line reason instead, never a panic.
//!
//! NVML's "utilization" is the share of the last sample period during which at least one
//! kernel was running on the GPU; it says nothing about how many SMs were busy, so 100% does not
//! mean the GPU is saturated.

pub mod gpu;
pub mod host;
pub mod sampler;

pub use gpu::{GpuProbe, GpuSample};
pub use host::{HostProbe, HostSample};
pub use sampler::{Sampler, TelemetrySample};
