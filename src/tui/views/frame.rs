//! One frame: the view the app is on, drawn over the whole terminal; with several engines
//! (`--device all`) the main view shows each in a column of its own and the other views show
//! the engine `Tab` chose.

use ratatui::layout::{Constraint, Layout};
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

/// Draw several engines' frames (one `Ui` each, in pane order, sharing the app state).
pub fn draw_panes(f: &mut Frame, uis: &[Ui]) {
    let Some(focused) = uis.get(uis[0].app.pane.min(uis.len().saturating_sub(1))) else {
        return;
    };
    if uis.len() == 1 || focused.app.view != View::Main {
        return draw(f, focused);
    }
    let area = f.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let columns = Layout::horizontal(vec![Constraint::Fill(1); uis.len()]).split(area);
    let buf = f.buffer_mut();
    for (ui, col) in uis.iter().zip(columns.iter()) {
        main_view::render(*col, buf, ui);
    }
}
