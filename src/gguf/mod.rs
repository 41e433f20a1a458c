//! The GGUF file format: a validating reader over a memory map, metadata values, the tensor
//! index, and a writer. Nothing here knows about models; `model` interprets what this reads.

mod error;
mod format;
mod reader;
mod value;
mod writer;

pub use error::{GgufError, GgufErrorKind};
pub use format::{DEFAULT_ALIGNMENT, MAGIC, MAX_META_VALUES};
pub use reader::{GgufFile, TensorInfo};
pub use value::{ty as value_type, MetaValue, Metadata};
pub use writer::GgufWriter;
