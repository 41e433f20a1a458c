//! Why a vocabulary could not be turned into a tokenizer. Every variant names the metadata key or
//! the token id at fault, so a broken model file can be diagnosed from the message alone; building
//! a tokenizer never panics on bad input.

/// Errors building a [`super::Tokenizer`] from GGUF metadata or from [`super::TokenizerData`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenizerError {
    #[error("metadata key {0} is missing")]
    MissingKey(String),
    #[error("metadata key {key} has the wrong type: expected {expected}")]
    WrongType { key: String, expected: &'static str },
    #[error("metadata key {key}: element {index} is not {expected}")]
    WrongElement {
        key: String,
        index: usize,
        expected: &'static str,
    },
    #[error("tokenizer model {0:?} is not supported (cbtop implements gpt2 byte-level BPE and llama SentencePiece)")]
    UnsupportedModel(String),
    #[error("pre-tokenizer type {0:?} (tokenizer.ggml.pre) is not supported")]
    UnsupportedPre(String),
    #[error("the vocabulary (tokenizer.ggml.tokens) is empty")]
    EmptyVocab,
    #[error("{key} has {got} entries but the vocabulary has {want} tokens")]
    LengthMismatch {
        key: &'static str,
        got: usize,
        want: usize,
    },
    #[error("token {id} ({text:?}) appears more than once in tokenizer.ggml.tokens (first at id {first})")]
    DuplicateToken { id: u32, first: u32, text: String },
    #[error("{key} = {id} is out of range (vocabulary has {n_vocab} tokens)")]
    IdOutOfRange {
        key: &'static str,
        id: u64,
        n_vocab: usize,
    },
    #[error("tokenizer.ggml.merges[{index}] = {text:?} is not of the form \"left right\"")]
    BadMerge { index: usize, text: String },
    #[error("token {id} ({text:?}) has type BYTE but is not of the form <0xNN>")]
    BadByteToken { id: u32, text: String },
    #[error("{key} is true but the vocabulary has no {what} token")]
    MissingSpecial {
        key: &'static str,
        what: &'static str,
    },
    #[error("tokenizer model gpt2 needs tokenizer.ggml.merges")]
    MissingMerges,
    #[error("pre-tokenizer {pre:?}: regex {regex:?} does not compile: {why}")]
    BadRegex {
        pre: String,
        regex: String,
        why: String,
    },
}
