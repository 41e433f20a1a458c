//! The CPU engine (`CpuEngine`: decode loop, forward pass, KV cache) and its building blocks:
//! matrix products over GGUF-typed weights, attention over the KV cache, and the per-row
//! operations of a layer.

pub mod attention;
#[cfg(target_arch = "x86_64")]
pub mod attention_fast;
pub mod attention_tiled;
#[cfg(target_arch = "x86_64")]
pub mod attention_x86;
pub mod batch;
pub mod decode;
pub mod expf;
pub mod forward;
pub mod geglu;
pub mod huge;
pub mod kernel_names;
pub mod kv_cache;
pub mod matmul;
mod matmul_fast;
pub mod ops;
#[cfg(target_arch = "x86_64")]
pub mod ops_x86;
pub mod pool;
pub mod ranges;
pub mod repack;

pub use batch::CpuBatch;
pub use decode::CpuEngine;

use crate::model::Config;

/// What of `cfg` the CPU engine does not run, as a sentence (None: it runs all of it).
/// `Backend::open` refuses such a model before building the engine. Every architecture
/// `Config` reads (llama, qwen2, qwen3, gemma3, phi3) runs on the CPU today.
pub fn unsupported(cfg: &Config) -> Option<String> {
    let _ = cfg;
    None
}
