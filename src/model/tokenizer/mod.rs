//! Text ↔ token ids, compatible with llama.cpp's tokenizers for the two vocabulary types cbtop's
//! models use: byte-level BPE (`tokenizer.ggml.model` = gpt2, with the pre-tokenizer named by
//! `tokenizer.ggml.pre`) and SentencePiece (`llama`). Prompts must tokenize to exactly the ids
//! llama.cpp produces, or logits cannot be compared with it; every rule here follows
//! `src/llama-vocab.cpp` and `src/unicode.cpp` of llama.cpp.
//!
//! - [`TokenizerData`]: the vocabulary as plain data (what GGUF metadata holds).
//! - [`Tokenizer`]: built from it (or straight from a GGUF file); encodes, decodes, and knows the
//!   special tokens.

mod bpe;
mod bytes;
pub(crate) use bytes::byte_to_char;
mod decode;
mod error;
mod gguf;
mod kind;
mod pretokenize;
mod special;
mod spm;
mod symbol;
mod tokenize;
mod unicode;
mod unicode_data;
mod vocab;

pub use error::TokenizerError;
pub use kind::TokenizerKind;
pub use tokenize::{Tokenizer, TokenizerData};
pub use vocab::token_type;

#[cfg(test)]
mod tests;
