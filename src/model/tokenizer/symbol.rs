//! The linked-list symbol both merge loops (BPE by rank, SentencePiece by score) work on: a
//! byte span of the text with its live neighbours.

#[derive(Clone, Copy, Debug)]
pub(super) struct Symbol {
    pub start: usize,
    pub len: usize,
    pub prev: Option<usize>,
    pub next: Option<usize>,
}
