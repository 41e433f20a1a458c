//! What can go wrong while an engine runs, on either device, in one type callers match on.

/// Errors while running the model.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    #[error("token id {id} is outside the vocabulary of {vocab}")]
    BadToken { id: u32, vocab: usize },
    #[error("the context of {ctx} positions is full ({used} used, {asked} more asked)")]
    ContextFull {
        ctx: usize,
        used: usize,
        asked: usize,
    },
    #[error("nothing to evaluate: the token list is empty")]
    Empty,
    #[error(
        "--batch {n}: the KV caches of {n} sequences of {ctx} positions need {} MiB, and {} MiB are free",
        need >> 20,
        free >> 20
    )]
    BatchTooLarge {
        n: usize,
        ctx: usize,
        need: usize,
        free: usize,
    },
    /// A GPU failure (out of memory, a kernel fault, NVRTC): the message names it.
    #[error("{0}")]
    Device(String),
}
