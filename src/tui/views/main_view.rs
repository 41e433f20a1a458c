//! The main view: header, throughput and GPU side by side, the brick pipeline, the generated
//! text and the footer. Panels shrink or drop out on small terminals (down to 20x8).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};

use super::common::{footer, header};
use super::panels;
use super::ui::Ui;

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    // One more row for the GPU's bandwidth peaks when they are known and the screen is tall.
    let peaks_row =
        u16::from(area.height >= 30 && super::common::gpu_peaks_line(ui.snap).is_some());
    let top_h = if area.height >= 16 { 6 + peaks_row } else { 0 };
    let text_h = if area.height >= 20 { 4 } else { 0 };
    let [head, top, mid, text, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(top_h),
        Constraint::Min(3),
        Constraint::Length(text_h),
        Constraint::Length(1),
    ])
    .areas(area);
    header(head, buf, ui);
    if top.height > 0 {
        if top.width >= 60 {
            let [l, r] =
                Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(top);
            panels::throughput(l, buf, ui);
            panels::gpu(r, buf, ui);
        } else {
            panels::throughput(top, buf, ui);
        }
    }
    panels::bricks(mid, buf, ui);
    if text.height > 0 {
        panels::text(text, buf, ui);
    }
    footer(foot, buf, ui);
}
