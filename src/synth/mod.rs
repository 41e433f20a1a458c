//! Synthetic models: real shapes, random weights from a seed, written as GGUF.
