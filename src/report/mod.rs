//! The headless report: its versioned layout, JSON Schema, formats, gates, comparison and
//! trace export. Reads plain data only; knows nothing about engines or timers.

pub mod build;
pub mod compare;
pub mod format;
pub mod gates;
pub mod telemetry;
pub mod trace;
pub mod types;

pub use types::*;
