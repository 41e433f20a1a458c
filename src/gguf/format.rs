//! The format's constants and the reader's limits, shared by the reader, the writer and the
//! errors that name them.

/// The magic at the start of every GGUF file.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// Default data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most array elements in the whole metadata (a 256k-token vocabulary with scores, types and
/// merges has about 1.3 million).
pub const MAX_META_VALUES: u64 = 1 << 23;
