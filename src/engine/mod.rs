//! The inference engine's face: the `Backend` callers hold (the CPU engine or the CUDA engine
//! behind one type), the options it runs with, its errors, and `generate`. The engines
//! themselves live in `cpu/` and `cuda/`, each with its decode loop, forward pass and KV cache.

pub mod backend;
pub mod batched;
pub mod cpu;
pub mod cuda;
pub mod error;
pub mod generate;
pub mod gpu_pci;
pub mod options;
pub mod sampler;

pub use backend::{Backend, Device};
pub use batched::Batched;
pub use cpu::CpuEngine;
pub use error::EngineError;
pub use generate::{generate, Step};
pub use options::{LogitsFor, Numerics, Timing};
