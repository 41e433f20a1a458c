//! The screens, one module each, plus the panels of the main view. Every view renders from a
//! `Ui` (snapshot, telemetry, app state, theme) and nothing else, so they are pure functions
//! of plain data: snapshot tests and the frame-time benchmark call `draw` directly.

mod assertions;
mod batch;
mod budget;
pub mod common;
mod drill;
mod frame;
mod gpu;
mod help;
mod histogram;
mod main_view;
mod panels;
mod roofline;
mod timeline;
mod ui;

pub use frame::{draw, draw_panes};
pub use ui::Ui;
