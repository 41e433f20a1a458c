//! The histogram view: the whole decode step's latency distribution next to the selected
//! brick's, both from hdrhistogram, with p50 and p99 marked.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::common::{self, lines, panel};
use super::ui::Ui;
use cbtop_widgets::{regroup, LatencyHistogram};

fn one(
    area: Rect,
    buf: &mut Buffer,
    ui: &Ui,
    title: &str,
    bins: &[(f64, u64)],
    p50: f64,
    p99: f64,
) {
    let inner = panel(area, buf, title, ui.theme);
    if inner.height < 2 {
        return;
    }
    let [info, hist] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    lines(
        info,
        buf,
        vec![Line::from(format!(
            "p50 {} µs  p99 {} µs  ({} samples)",
            common::us(p50),
            common::us(p99),
            bins.iter().map(|b| b.1).sum::<u64>()
        ))],
    );
    let bins = regroup(bins, hist.height as usize);
    LatencyHistogram {
        bins: &bins,
        p50_us: p50,
        p99_us: p99,
        bar_style: ui.theme.warn(),
    }
    .render(hist, buf);
}

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let [l, r] = if body.width >= 100 {
        Layout::horizontal([Constraint::Percentage(50); 2]).areas(body)
    } else {
        Layout::vertical([Constraint::Percentage(50); 2]).areas(body)
    };
    let t = &ui.snap.throughput;
    one(
        l,
        buf,
        ui,
        "latency histogram: decode step (cpu_timer)",
        &t.hist,
        t.p50_ms * 1e3,
        t.p99_ms * 1e3,
    );
    match common::selected_brick(ui) {
        Some(b) => one(
            r,
            buf,
            ui,
            &format!("latency histogram: {} ({})", b.id, b.source),
            &b.hist,
            b.p50_us,
            b.p99_us,
        ),
        None => {
            let inner = panel(r, buf, "latency histogram: brick", ui.theme);
            lines(inner, buf, vec![Line::from(common::waiting(ui.snap))]);
        }
    }
}
