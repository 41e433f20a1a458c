//! Budget vs actual: every brick's measured time against its budget (from the profile, else
//! roofline / target efficiency), the gap factor and the time over budget, worst marked.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::common::{self, lines, order, panel, us};
use super::ui::Ui;
use cbtop_widgets::budget_bar;

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let s = ui.snap;
    let t = ui.theme;
    let budget_total: f64 = s.bricks.iter().map(|b| b.budget_us).sum();
    let inner = panel(
        body,
        buf,
        &format!(
            "budget vs actual: token {} µs measured, bricks budgeted {} µs",
            us(s.token_us),
            us(budget_total)
        ),
        t,
    );
    if s.bricks.is_empty() {
        lines(inner, buf, vec![Line::from(common::waiting(s))]);
        return;
    }
    let w = inner.width as usize;
    let bar_w = w.saturating_sub(14 + 10 + 10 + 9 + 9 + 10 + 6).clamp(0, 60);
    let mut out = vec![Line::from(Span::styled(
        format!(
            "  {:<12} {:>9} {:>9} {:>8} {:>8} {:>9}  {}",
            "brick", "actual µs", "budget µs", "source", "gap", "over µs", "bar (│ budget, ▓ over)"
        ),
        t.title(),
    ))];
    let ord = order(s, ui.app.sort);
    let sel = common::selected(ui);
    for &i in &ord {
        let b = &s.bricks[i];
        let over = b.mean_us - b.budget_us;
        let mark = if s.bottleneck() == Some(i) { "!" } else { " " };
        let style = if Some(i) == sel {
            t.selected()
        } else if over > 0.0 {
            t.warn()
        } else {
            t.good()
        };
        out.push(Line::from(Span::styled(
            format!(
                "{mark} {:<12} {:>9} {:>9} {:>8} {:>7.2}x {:>9}  {}",
                b.id,
                us(b.mean_us),
                us(b.budget_us),
                b.budget_source,
                b.gap_factor,
                us(over.max(0.0)),
                budget_bar(b.mean_us, b.budget_us, bar_w)
            ),
            style,
        )));
    }
    out.push(Line::from(format!(
        "  {:<12} {:>9} {:>9}   (time no brick covers, no budget)",
        "other",
        us(s.other_us),
        "-"
    )));
    if let Some(b) = s.bottleneck().map(|i| &s.bricks[i]) {
        out.push(Line::from(""));
        out.push(Line::from(Span::styled(
            format!(
                "bottleneck: {} is {} µs over its {} µs budget (x{:.2})",
                b.id,
                us((b.mean_us - b.budget_us).max(0.0)),
                us(b.budget_us),
                b.gap_factor
            ),
            t.bad(),
        )));
    }
    lines(inner, buf, out);
}
