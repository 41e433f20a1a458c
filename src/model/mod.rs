//! Interpreting a GGUF file as a model: hyper-parameters from metadata, the weights table, the
//! tokenizer and the chat template.

pub mod chat;
pub mod config;
mod load;
pub mod tokenizer;
pub mod weights;

pub use config::{Arch, Config, ConfigError, RopeStyle};
pub use load::{LoadError, Model};
pub use weights::{Weights, WeightsError};
