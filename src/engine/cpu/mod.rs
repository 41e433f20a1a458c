//! The CPU backend's building blocks: matrix products over GGUF-typed weights, attention over
//! the KV cache, and the per-row operations of a layer.

pub mod attention;
pub mod fma;
pub mod matmul;
pub mod ops;
