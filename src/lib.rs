//! cbtop: `top` for LLM inference. The library holds the engine and everything that measures
//! it; `main.rs` is only the command line. Data flows one way:
//! gguf → model → engine → (report | tui).

pub mod brick;
pub mod cli;
pub mod engine;
pub mod gguf;
pub mod history;
pub mod metrics;
pub mod model;
pub mod profile;
pub mod profiler;
pub mod quant;
pub mod report;
pub mod rng;
#[cfg(test)]
mod scratch;
pub mod synth;
pub mod telemetry;
pub mod tui;
