//! The headless report: its versioned layout, JSON Schema, formats, gates, comparison and
//! trace export. Reads plain data only; knows nothing about engines or timers.

pub mod build;
pub mod types;

pub use types::*;
