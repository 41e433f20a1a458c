//! The drill-down into the selected brick: its distribution in numbers, per-layer bars, the
//! latency histogram, the cost model against the roofline, and the kernels that ran it (each
//! with what it read, its launch, resources and its own time).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::common::{self, bytes, lines, panel, us};
use super::ui::Ui;
use crate::tui::snapshot::KernelLine;
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
    let kernel_h = match b.kernels.len() {
        0 => 3,
        n => (n as u16 + 3).min(14),
    };
    let [stats, rest, kern] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(0),
        Constraint::Length(kernel_h),
    ])
    .areas(inner);
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
    let [hist, cost] = Layout::vertical([Constraint::Min(3), Constraint::Length(7)]).areas(right);
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
    let k = panel(kern, buf, "kernels (per token)", ui.theme);
    lines(
        k,
        buf,
        kernel_lines(&b.kernels, ui.snap.kernels_note.as_deref(), k.width),
    );
}

/// Optional number, or `-`.
fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// The kernels table: one line a kernel, name and what it read first, then its launch and
/// resources and its measured time, as far as `width` allows.
fn kernel_lines(ks: &[KernelLine], note: Option<&str>, width: u16) -> Vec<Line<'static>> {
    if ks.is_empty() {
        return vec![Line::from(
            note.unwrap_or("no kernels recorded for this brick yet")
                .to_string(),
        )];
    }
    let timed = ks.iter().any(|k| k.mean_us.is_some());
    let launched = ks.iter().any(|k| k.launch.is_some());
    let w = width as usize;
    let name_w = ks
        .iter()
        .map(|k| k.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 34);
    // The columns after `reads`: time (37), resources and launch (~45).
    let rest = if timed { 37 } else { 0 } + if launched { 45 } else { 0 };
    let room = w.saturating_sub(name_w + 6 + rest).max(5);
    let reads_w = ks
        .iter()
        .map(|k| k.reads.as_deref().map_or(1, |r| r.chars().count()))
        .max()
        .unwrap_or(1)
        .clamp(5, room.max(5));
    let mut head = format!("{:<name_w$} {:<reads_w$} {:>4}", "kernel", "reads", "x/tk");
    if timed {
        head += &format!(
            " {:>8} {:>8} {:>6} {:>7}",
            "µs", "p99 µs", "share", "gap µs"
        );
    }
    if launched {
        head += "  regs  smem  occ  launch";
    }
    let mut out = vec![Line::from(clip(&head, w))];
    for k in ks {
        let reads = k.reads.as_deref().unwrap_or("-");
        let mut line = format!(
            "{:<name_w$} {:<reads_w$} {:>4}",
            clip(&k.name, name_w),
            clip(reads, reads_w),
            k.launches
        );
        if timed {
            line += &format!(
                " {:>8} {:>8} {:>6} {:>7}",
                opt(k.mean_us, us),
                opt(k.p99_us, us),
                opt(k.share_pct, |p| format!("{p:.1}%")),
                opt(k.gap_before_us, us),
            );
        }
        if launched {
            line += &format!(
                "  {:>4} {:>5} {:>4} {}",
                k.registers.map_or("-".into(), |r| r.to_string()),
                k.shared_bytes.map_or("-".into(), bytes_short),
                opt(k.occupancy_pct, |o| format!("{o:.0}%")),
                k.launch.as_deref().unwrap_or("-"),
            );
        }
        out.push(Line::from(clip(&line, w)));
    }
    if let Some(n) = note {
        out.push(Line::from(clip(n, w)));
    }
    out
}

/// Shared memory in bytes as `48K` or `512`.
fn bytes_short(b: u32) -> String {
    if b >= 1024 {
        format!("{}K", b / 1024)
    } else {
        b.to_string()
    }
}

/// `s` cut to `w` characters (the last one `…` when cut).
fn clip(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}
