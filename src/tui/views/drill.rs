//! The drill-down into the selected brick: its distribution in numbers, per-layer bars, the
//! latency histogram, the cost model against the roofline, and the kernels that run it.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::common::{self, bytes, lines, panel, us};
use super::ui::Ui;
use cbtop_widgets::{regroup, LatencyHistogram, LayerBars};

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let Some(b) = common::selected_brick(ui) else {
        let inner = panel(body, buf, "drill-down", ui.theme);
        lines(inner, buf, vec![Line::from(common::waiting(ui.snap))]);
        return;
    };
    let inner = panel(
        body,
        buf,
        &format!("drill-down: {} ({}, {} steps)", b.id, b.source, b.count),
        ui.theme,
    );
    let [stats, rest] = Layout::vertical([Constraint::Length(3), Constraint::Min(0)]).areas(inner);
    lines(
        stats,
        buf,
        vec![
            Line::from(format!(
                "mean {} µs  p50 {}  p90 {}  p99 {}  p99.9 {}",
                us(b.mean_us),
                us(b.p50_us),
                us(b.p90_us),
                us(b.p99_us),
                us(b.p999_us),
            )),
            Line::from(format!(
                "max {} µs  CV {:.1}%  share {:.1}% of the token",
                us(b.max_us),
                b.cv_pct,
                b.share_pct
            )),
            Line::from(format!(
                "budget {} µs ({})  gap x{:.2}  score {:.0} ({})",
                us(b.budget_us),
                b.budget_source,
                b.gap_factor,
                b.score,
                b.grade
            )),
        ],
    );
    let [left, right] = if rest.width >= 100 {
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(rest)
    } else {
        Layout::horizontal([Constraint::Percentage(30), Constraint::Percentage(70)]).areas(rest)
    };
    let l = panel(left, buf, "per-layer mean µs", ui.theme);
    if b.per_layer_us.is_empty() {
        lines(
            l,
            buf,
            vec![Line::from("runs once per token (not per layer)")],
        );
    } else {
        let slowest = b
            .per_layer_us
            .iter()
            .enumerate()
            .max_by(|x, y| x.1.total_cmp(y.1))
            .map(|(i, _)| i);
        LayerBars {
            values: &b.per_layer_us,
            bar_style: ui.theme.good(),
            marked: slowest,
        }
        .render(l, buf);
    }
    let kernel_h = (b.kernels.len() as u16 + 2).min(6);
    let [hist, cost, kern] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(8),
        Constraint::Length(kernel_h),
    ])
    .areas(right);
    let h = panel(hist, buf, "latency histogram (per token)", ui.theme);
    let bins = regroup(&b.hist, h.height as usize);
    LatencyHistogram {
        bins: &bins,
        p50_us: b.p50_us,
        p99_us: b.p99_us,
        bar_style: ui.theme.warn(),
    }
    .render(h, buf);
    let c = panel(cost, buf, "cost model (per token) vs roofline", ui.theme);
    let peak =
        common::peak_pct(ui.snap, b).map_or_else(String::new, |p| format!(" ({p:.0}% of peak)"));
    lines(
        c,
        buf,
        vec![
            Line::from(format!(
                "read {}  written {}",
                bytes(b.bytes_read),
                bytes(b.bytes_written),
            )),
            Line::from(format!(
                "{:.3} MFLOP  {:.2} FLOP/B",
                b.flops / 1e6,
                b.intensity
            )),
            Line::from(format!(
                "{:.2} GB/s{peak}  {:.2} GFLOP/s (derived)",
                b.gbps, b.gflops
            )),
            Line::from(format!(
                "roofline {} µs  measured {} µs  eff {:.1}%",
                us(b.roofline_us),
                us(b.mean_us),
                100.0 * b.efficiency
            )),
            Line::from(format!(
                "budget {} µs = {}",
                us(b.budget_us),
                if b.budget_source == "roofline" {
                    "roofline / target"
                } else {
                    "from the profile"
                }
            )),
        ],
    );
    let k = panel(kern, buf, "kernels", ui.theme);
    lines(
        k,
        buf,
        b.kernels.iter().map(|s| Line::from(s.clone())).collect(),
    );
}
