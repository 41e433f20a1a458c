//! The CPU backend's building blocks: matrix products over GGUF-typed weights, attention over
//! the KV cache, and the per-row operations of a layer.

pub mod attention;
#[cfg(target_arch = "x86_64")]
pub mod attention_x86;
pub mod expf;
pub mod matmul;
pub mod ops;
#[cfg(target_arch = "x86_64")]
pub mod ops_x86;
pub mod pool;
