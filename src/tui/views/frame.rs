//! One frame: the view the app is on, drawn over the whole terminal.

use ratatui::Frame;

use super::ui::Ui;
use super::{
    assertions, batch, budget, drill, gpu, help, histogram, main_view, roofline, timeline,
};
use crate::tui::app::View;

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
        View::Batch => batch::render(area, buf, ui),
        View::Timeline => timeline::render(area, buf, ui),
        View::Help => help::render(area, buf, ui),
    }
}
