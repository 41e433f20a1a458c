//! The panels of the main view: throughput, GPU (or why there is none), brick pipeline and the
//! generated text stream.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::common::{self, brick_lines, lines, order, panel};
use super::ui::Ui;
use crate::telemetry::TelemetrySample;
use cbtop_widgets::{BrickTable, LabeledGauge, SparklinePanel};

fn opt<T: std::fmt::Display>(v: Option<T>, unit: &str) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v}{unit}"))
}

pub fn throughput(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let inner = panel(area, buf, "throughput (measured steps)", ui.theme);
    if inner.height == 0 {
        return;
    }
    let t = &ui.snap.throughput;
    let summary = format!(
        "tok/s now {:.1} avg {:.1} ({} steps)",
        t.tok_s_now, t.tok_s_avg, t.tokens
    );
    let [spark, info] = Layout::vertical([Constraint::Min(1), Constraint::Length(2)]).areas(inner);
    SparklinePanel {
        summary: &summary,
        values: &t.recent_tok_s,
        range: Some((0.0, t.recent_tok_s.iter().cloned().fold(1e-9, f64::max))),
        style: ui.theme.good(),
    }
    .render(spark, buf);
    let ttft = t
        .ttft_ms
        .map_or_else(|| "-".into(), |v| format!("{v:.1} ms"));
    let over = t
        .overhead_pct
        .map_or_else(|| "measuring".into(), |v| format!("{v:+.1}%"));
    let prefill = t
        .prefill_tok_s
        .map_or_else(|| "-".into(), |v| format!("{v:.0} tok/s"));
    lines(
        info,
        buf,
        vec![
            Line::from(format!(
                "ms/tok p50 {:.2} p99 {:.2} TTFT {ttft}",
                t.p50_ms, t.p99_ms
            )),
            Line::from(format!("prefill {prefill} overhead {over}")),
        ],
    );
}

fn host_line(s: Option<&TelemetrySample>) -> String {
    let cpu = s
        .and_then(|s| s.host.cpu_pct)
        .map_or_else(|| "-".into(), |v| format!("{v:.0}%"));
    let rss = s
        .and_then(|s| s.host.rss_bytes)
        .map_or_else(|| "-".into(), |v| common::bytes(v as f64));
    format!("host: cbtop process cpu {cpu}  rss {rss}")
}

pub fn gpu(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let inner = panel(area, buf, "gpu", ui.theme);
    if inner.height == 0 {
        return;
    }
    let latest = ui.tele.latest();
    let host = host_line(latest);
    match (&ui.tele.gpu, latest.and_then(|s| s.gpu.as_ref())) {
        (Some(Ok(_)), Some(g)) => {
            // A fifth line for the GPU's bandwidth peaks where they are known and there is room.
            let peaks = common::gpu_peaks_line(ui.snap).filter(|_| inner.height >= 5);
            let n = if peaks.is_some() { 5 } else { 4 };
            let rows = Layout::vertical(vec![Constraint::Length(1); n]).split(inner);
            let util = g.util_pct.map(|u| u as f64 / 100.0);
            let util_text = format!("{} (kernel running)", opt(g.util_pct, "%"));
            LabeledGauge {
                label: "util ",
                ratio: util,
                text: &util_text,
                label_width: 5,
                style: ui.theme.good(),
            }
            .render(rows[0], buf);
            let mem_ratio = match (g.mem_used_bytes, g.mem_total_bytes) {
                (Some(u), Some(t)) if t > 0 => Some(u as f64 / t as f64),
                _ => None,
            };
            let mem_text = format!(
                "{} / {}",
                g.mem_used_bytes
                    .map_or("-".into(), |v| common::bytes(v as f64)),
                g.mem_total_bytes
                    .map_or("-".into(), |v| common::bytes(v as f64))
            );
            LabeledGauge {
                label: "mem  ",
                ratio: mem_ratio,
                text: &mem_text,
                label_width: 5,
                style: ui.theme.warn(),
            }
            .render(rows[1], buf);
            lines(
                rows[2],
                buf,
                vec![Line::from(format!(
                    "{} / {} W  SM {} MHz  mem {} MHz  {}°C  PCIe tx {} rx {} KB/s",
                    g.power_w.map_or("-".into(), |v| format!("{v:.0}")),
                    g.power_limit_w.map_or("-".into(), |v| format!("{v:.0}")),
                    opt(g.sm_clock_mhz, ""),
                    opt(g.mem_clock_mhz, ""),
                    opt(g.temperature_c, ""),
                    opt(g.pcie_tx_kbps, ""),
                    opt(g.pcie_rx_kbps, ""),
                ))],
            );
            lines(rows[3], buf, vec![Line::from(host)]);
            if let Some(p) = peaks {
                lines(rows[4], buf, vec![Line::from(p)]);
            }
        }
        (Some(Err(reason)), _) => {
            // One line where it fits; wrapped rather than cut where the panel is narrow.
            let [msg, rest] =
                Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(inner);
            Paragraph::new(vec![
                Line::from(Span::styled(reason.clone(), ui.theme.warn())),
                Line::from(common::brick_times_note(ui.snap)),
            ])
            .wrap(Wrap { trim: true })
            .render(msg, buf);
            lines(rest, buf, vec![Line::from(host)]);
        }
        _ => lines(
            inner,
            buf,
            vec![Line::from("starting GPU telemetry..."), Line::from(host)],
        ),
    }
}

pub fn bricks(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let s = ui.snap;
    let title = if s.bricks.is_empty() {
        "brick pipeline".to_string()
    } else {
        format!(
            "brick pipeline: {} · token {} µs · score {:.0} ({}) · sort: {}",
            s.bricks.first().map_or("cpu_timer", |b| b.source.as_str()),
            common::us(s.token_us),
            s.score,
            s.grade,
            ui.app.sort.name()
        )
    };
    let inner = panel(area, buf, &title, ui.theme);
    if inner.height == 0 {
        return;
    }
    if s.bricks.is_empty() {
        lines(inner, buf, vec![Line::from(common::waiting(s))]);
        return;
    }
    let ord = order(s, ui.app.sort);
    let rows = brick_lines(s, &ord);
    let bottleneck = s
        .bottleneck()
        .and_then(|b| ord.iter().position(|&i| i == b));
    BrickTable {
        rows: &rows,
        selected: Some(ui.app.selected.min(ord.len().saturating_sub(1))),
        bottleneck,
        theme: ui.theme,
    }
    .render(inner, buf);
}

/// The last `height` rows of `text` wrapped at `width` characters (newlines kept).
pub fn tail_rows(text: &str, width: usize, height: usize) -> Vec<String> {
    if width == 0 || height == 0 {
        return Vec::new();
    }
    let mut rows: Vec<String> = Vec::new();
    for para in text.split('\n') {
        let chars: Vec<char> = para.chars().filter(|c| !c.is_control()).collect();
        if chars.is_empty() {
            rows.push(String::new());
        }
        for chunk in chars.chunks(width) {
            rows.push(chunk.iter().collect());
        }
    }
    let skip = rows.len().saturating_sub(height);
    rows.split_off(skip)
}

pub fn text(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let s = ui.snap;
    let title = format!(
        "generated text · ctx {}/{} · restarts {}",
        s.ctx_used, s.ctx_size, s.restarts
    );
    let inner = panel(area, buf, &title, ui.theme);
    let rows = tail_rows(&s.text, inner.width as usize, inner.height as usize);
    lines(inner, buf, rows.into_iter().map(Line::from).collect());
}

#[cfg(test)]
mod tests {
    use super::tail_rows;

    #[test]
    fn text_tail_wraps_and_keeps_the_end() {
        assert_eq!(tail_rows("abcdefg", 3, 2), vec!["def", "g"]);
        assert_eq!(tail_rows("ab\ncd", 5, 5), vec!["ab", "cd"]);
        assert!(tail_rows("x", 0, 3).is_empty());
    }
}
