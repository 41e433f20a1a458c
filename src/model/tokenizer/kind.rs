//! Which algorithm a vocabulary tokenizes with; decoding depends on it as much as encoding.

/// The two tokenizer algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// Byte-level BPE (`gpt2`).
    Bpe,
    /// SentencePiece (`llama`).
    Spm,
}
