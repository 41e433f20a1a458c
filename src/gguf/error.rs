//! Typed errors of the GGUF reader. Each names the file and the field or tensor at fault, so
//! that the command line can print one sentence and exit 2.

use std::path::PathBuf;

use crate::quant::GgmlType;

/// What went wrong, without the file name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GgufErrorKind {
    #[error("cannot read: {0}")]
    Io(String),
    #[error("not a GGUF file (magic {0:02x?}, expected \"GGUF\")")]
    BadMagic([u8; 4]),
    #[error("unsupported GGUF version {0} (cbtop reads versions 2 and 3)")]
    UnsupportedVersion(u32),
    #[error("file ends inside {0}")]
    Truncated(String),
    #[error("{what} count {count} cannot fit in the file")]
    CountTooLarge { what: String, count: u64 },
    #[error("{what} has length {len}, more than the {left} bytes left in the file")]
    StringTooLong { what: String, len: u64, left: u64 },
    #[error("{0} is not valid UTF-8")]
    InvalidUtf8(String),
    #[error("metadata key {key:?} has unknown value type {ty}")]
    UnknownValueType { key: String, ty: u32 },
    #[error(
        "metadata key {0:?}: the metadata arrays hold more than {max} values in all",
        max = super::format::MAX_META_VALUES
    )]
    TooManyValues(String),
    #[error("metadata key {0:?} nests arrays too deeply")]
    NestingTooDeep(String),
    #[error("metadata key {0:?} appears twice")]
    DuplicateKey(String),
    #[error("metadata key {key:?} has type {found}, expected {expected}")]
    WrongValueType {
        key: String,
        found: &'static str,
        expected: &'static str,
    },
    #[error("general.alignment {0} is not a power of two between 1 and 65536")]
    BadAlignment(u64),
    #[error("tensor {0:?} appears twice")]
    DuplicateTensor(String),
    #[error("tensor {tensor:?} has {n_dims} dimensions (1 to 4 supported)")]
    BadDimCount { tensor: String, n_dims: u32 },
    #[error("tensor {tensor:?} has invalid shape {dims:?}")]
    BadShape { tensor: String, dims: Vec<u64> },
    #[error("tensor {tensor:?} has unknown or unsupported type id {id}")]
    UnknownTensorType { tensor: String, id: u32 },
    #[error(
        "tensor {tensor:?}: row length {ne0} is not a multiple of the {ty} block size {block}"
    )]
    NotBlockMultiple {
        tensor: String,
        ty: GgmlType,
        ne0: u64,
        block: usize,
    },
    #[error(
        "tensor {tensor:?} data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    Misaligned {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    #[error(
        "tensor {tensor:?} (bytes {start}..{end}) extends past the end of the file ({len} bytes)"
    )]
    OutOfFile {
        tensor: String,
        start: u64,
        end: u64,
        len: u64,
    },
    #[error(
        "tensor {tensor:?} (from byte {start}) overlaps tensor {other:?} (up to byte {other_end})"
    )]
    Overlap {
        tensor: String,
        other: String,
        start: u64,
        other_end: u64,
    },
}

/// A reader error: the file and what went wrong in it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}: {kind}", file.display())]
pub struct GgufError {
    pub file: PathBuf,
    pub kind: GgufErrorKind,
}
