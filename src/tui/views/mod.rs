//! The screens, one module each, plus the panels of the main view. Every view renders from a
//! `Ui` (snapshot, telemetry, app state, theme) and nothing else, so they are pure functions
//! of plain data: snapshot tests and the frame-time benchmark call `draw` directly.

mod assertions;
mod budget;
pub mod common;
mod drill;
mod gpu;
mod help;
mod histogram;
mod main_view;
mod panels;
mod roofline;

use ratatui::Frame;

use super::app::{App, View};
use super::snapshot::{Snapshot, TelemetryView};
use cbtop_widgets::Theme;

/// Everything a frame is drawn from.
pub struct Ui<'a> {
    pub snap: &'a Snapshot,
    pub tele: &'a TelemetryView,
    pub app: &'a App,
    pub theme: Theme,
}

/// Draw the current view over the whole frame.
pub fn draw(f: &mut Frame, ui: &Ui) {
    let area = f.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let buf = f.buffer_mut();
    match ui.app.view {
        View::Main => main_view::render(area, buf, ui),
        View::Drill => drill::render(area, buf, ui),
        View::Histogram => histogram::render(area, buf, ui),
        View::Budget => budget::render(area, buf, ui),
        View::Roofline => roofline::render(area, buf, ui),
        View::Gpu => gpu::render(area, buf, ui),
        View::Assertions => assertions::render(area, buf, ui),
        View::Help => help::render(area, buf, ui),
    }
}
