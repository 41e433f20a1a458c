//! The `w` view: the last measured step's kernels in launch order on the GPU's clock, a text
//! Gantt of where the GPU worked and where it sat idle. The bars span the rows on screen (so a
//! page of kernels fills the width and short gaps show); `p` freezes the step in view.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::common::{self, lines, panel, us};
use super::ui::Ui;
use crate::tui::snapshot::TimelineLine;

/// Columns before the bars: start, end, run time, gap, brick, kernel.
const BRICK_W: usize = 18;
const NAME_W: usize = 26;

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let t = &ui.snap.timeline;
    if t.is_empty() {
        let inner = panel(body, buf, "kernel timeline", ui.theme);
        let why = ui
            .snap
            .kernels_note
            .clone()
            .unwrap_or_else(|| common::waiting(ui.snap).to_string());
        lines(inner, buf, vec![Line::from(why)]);
        return;
    }
    let end = t.iter().map(|k| k.start_us + k.dur_us).fold(0.0, f64::max);
    let busy: f64 = t.iter().map(|k| k.dur_us).sum();
    let idle: f64 = t.iter().map(|k| k.gap_before_us).sum();
    let title = format!(
        "kernel timeline: last measured step · {} kernels · {} µs first start to last end · \
         busy {} µs · idle {} µs ({:.1}%) · ↑↓ PgUp PgDn scroll, p pause",
        t.len(),
        us(end),
        us(busy),
        us(idle),
        if end > 0.0 { 100.0 * idle / end } else { 0.0 },
    );
    let inner = panel(body, buf, &title, ui.theme);
    let rows = (inner.height as usize).saturating_sub(1);
    let top = ui.app.timeline_top.min(t.len().saturating_sub(rows.max(1)));
    let shown = &t[top..(top + rows).min(t.len())];
    let bar_w = (inner.width as usize).saturating_sub(4 * 8 + BRICK_W + NAME_W + 6);
    let mut out = vec![Line::from(format!(
        "{:>8}{:>8}{:>8}{:>8}  {:<BRICK_W$} {:<NAME_W$} bars: rows {}-{} of {} (░ idle before)",
        "start µs",
        "end µs",
        "µs",
        "gap µs",
        "brick",
        "kernel",
        top + 1,
        top + shown.len(),
        t.len()
    ))];
    let (lo, hi) = span_of(shown);
    for k in shown {
        let text = format!(
            "{:>8}{:>8}{:>8}{:>8}  {:<BRICK_W$} {:<NAME_W$} ",
            us(k.start_us),
            us(k.start_us + k.dur_us),
            us(k.dur_us),
            us(k.gap_before_us),
            cut(&k.brick, BRICK_W),
            cut(&k.name, NAME_W),
        );
        let (gap, bar, pad) = bar_cells(k, (lo, hi), bar_w);
        let gap_style = if k.gap_before_us >= 1.0 {
            ui.theme.warn()
        } else {
            Style::default()
        };
        out.push(Line::from(vec![
            Span::raw(text),
            Span::raw(" ".repeat(pad)),
            Span::styled("░".repeat(gap), gap_style),
            Span::styled("█".repeat(bar), ui.theme.good()),
        ]));
    }
    lines(inner, buf, out);
}

/// The time the rows span: from the first one's idle gap to the last end.
fn span_of(rows: &[TimelineLine]) -> (f64, f64) {
    let lo = rows
        .iter()
        .map(|k| k.start_us - k.gap_before_us)
        .fold(f64::INFINITY, f64::min);
    let hi = rows
        .iter()
        .map(|k| k.start_us + k.dur_us)
        .fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// Cells of a row's bar over `width` cells spanning `(lo, hi)`: the idle gap before it, the
/// kernel (at least one cell), and the blank cells before the gap.
fn bar_cells(k: &TimelineLine, (lo, hi): (f64, f64), width: usize) -> (usize, usize, usize) {
    if width == 0 || hi <= lo {
        return (0, 0, 0);
    }
    let cell = |t: f64| (((t - lo) / (hi - lo)) * width as f64).round() as usize;
    let start = cell(k.start_us).min(width - 1);
    let gap_from = cell(k.start_us - k.gap_before_us).min(start);
    let end = cell(k.start_us + k.dur_us).clamp(start + 1, width);
    (start - gap_from, end - start, gap_from)
}

/// `s` cut to `w` characters.
fn cut(s: &str, w: usize) -> String {
    s.chars().take(w).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(start_us: f64, dur_us: f64, gap_before_us: f64) -> TimelineLine {
        TimelineLine {
            brick: "qkv[0]".into(),
            name: "mvf_q4_k".into(),
            start_us,
            dur_us,
            gap_before_us,
        }
    }

    #[test]
    fn bars_place_each_kernel_and_its_idle_gap_on_the_rows_span() {
        let rows = [k(0.0, 10.0, 0.0), k(20.0, 10.0, 10.0), k(30.0, 0.01, 0.0)];
        let span = span_of(&rows);
        assert_eq!(span, (0.0, 30.01));
        // 30 cells for ~30 µs: the second kernel has 10 cells of gap before its 10 cells.
        assert_eq!(bar_cells(&rows[0], span, 30), (0, 10, 0));
        assert_eq!(bar_cells(&rows[1], span, 30), (10, 10, 10));
        // A kernel too short for a cell still gets one, inside the width.
        let (gap, bar, pad) = bar_cells(&rows[2], span, 30);
        assert_eq!((gap, bar), (0, 1));
        assert!(pad + gap + bar <= 30);
        assert_eq!(bar_cells(&rows[0], span, 0), (0, 0, 0));
    }
}
