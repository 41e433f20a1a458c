//! Bandwidth and roofline: the measured peaks, and per brick its arithmetic intensity, which
//! roof bounds it, achieved GB/s and GFLOP/s (derived from the cost model and measured time),
//! share of peak bandwidth, roofline time and efficiency.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::common::{self, lines, order, panel, us};
use super::ui::Ui;
use cbtop_widgets::hbar;

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let s = ui.snap;
    let t = ui.theme;
    let inner = panel(body, buf, "bandwidth and roofline", t);
    let Some(p) = &s.peaks else {
        lines(inner, buf, vec![Line::from(common::waiting(s))]);
        return;
    };
    let ridge = if p.bandwidth_gbps > 0.0 {
        p.compute_gflops / p.bandwidth_gbps
    } else {
        0.0
    };
    let cache = p
        .cache_gbps
        .map_or_else(String::new, |c| format!("  caches {c:.1} GB/s"));
    let mut out = vec![
        Line::from(format!(
            "peak bandwidth {:.1} GB/s ({}){cache}  peak compute {:.1} GFLOP/s ({})  ridge {:.1} FLOP/B",
            p.bandwidth_gbps, p.bandwidth_source, p.compute_gflops, p.compute_source, ridge
        )),
        Line::from(""),
    ];
    if s.bricks.is_empty() {
        out.push(Line::from(common::waiting(s)));
        return lines(inner, buf, out);
    }
    let bar_w = (inner.width as usize)
        .saturating_sub(14 + 9 + 9 + 9 + 10 + 10 + 10 + 8 + 6)
        .min(40);
    out.push(Line::from(Span::styled(
        format!(
            "  {:<12} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}  {}",
            "brick",
            "FLOP/B",
            "bound",
            "GB/s",
            "GFLOP/s",
            "roof µs",
            "actual µs",
            "eff",
            "% of peak GB/s"
        ),
        t.title(),
    )));
    let sel = common::selected(ui);
    for &i in &order(s, ui.app.sort) {
        let b = &s.bricks[i];
        let bound = if b.intensity >= ridge {
            "compute"
        } else {
            "memory"
        };
        let pct = common::peak_pct(s, b).unwrap_or(0.0);
        let style = if Some(i) == sel {
            t.selected()
        } else {
            t.bold()
        };
        out.push(Line::from(Span::styled(
            format!(
                "  {:<12} {:>8.2} {:>8} {:>8.2} {:>9.2} {:>9} {:>9} {:>6.1}%  {} {pct:.0}%",
                b.id,
                b.intensity,
                bound,
                b.gbps,
                b.gflops,
                us(b.roofline_us),
                us(b.mean_us),
                100.0 * b.efficiency,
                hbar(pct, 100.0, bar_w)
            ),
            style,
        )));
    }
    out.push(Line::from(""));
    out.push(Line::from(Span::styled(
        "GB/s and GFLOP/s are derived: cost-model bytes and FLOPs over the measured time",
        t.dim(),
    )));
    lines(inner, buf, out);
}
