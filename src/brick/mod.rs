//! Bricks: the logical steps of a decode, their ids, the recorder the engine hands timed spans
//! to, statistics, the cost model, peaks, budgets and scores. Knows nothing about engines or
//! how spans were timed beyond their `Source`.

pub mod cost;
pub mod id;
pub mod kernel;
pub mod peaks;
pub mod recorder;
pub mod score;
pub mod source;
pub mod stats;
pub mod test_delay;

pub use id::{Brick, BrickId};
pub use kernel::{Catalogue, KernelInfo, KernelSpan, KernelTime};
pub use recorder::{Recorder, Span};
pub use source::Source;
