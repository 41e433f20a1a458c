//! GPU detail: every NVML reading with its recent history, or, without GPU telemetry, the
//! one-line reason and the host process's own telemetry.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::common::{self, brick_times_note, bytes, gpu_peaks_line, lines, panel};
use super::ui::Ui;
use crate::telemetry::TelemetrySample;
use cbtop_widgets::SparklinePanel;

type Pick = fn(&TelemetrySample) -> Option<f64>;
/// A chart: summary line, the value it plots, and its scale (None: the window's own).
type Chart = (String, Pick, Option<(f64, f64)>);

fn series(ui: &Ui, pick: Pick) -> Vec<f64> {
    ui.tele.history.iter().filter_map(pick).collect()
}

fn fmt(v: Option<f64>, unit: &str, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}{unit}"))
}

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let t = ui.theme;
    let latest = ui.tele.latest();
    let gpu = latest.and_then(|s| s.gpu.as_ref());
    let title = match &ui.tele.gpu {
        Some(Ok(name)) => format!("gpu detail: {name} (NVML, ~10 Hz)"),
        _ => "gpu detail".to_string(),
    };
    let inner = panel(body, buf, &title, t);
    let mut charts: Vec<Chart> = Vec::new();
    match (&ui.tele.gpu, gpu) {
        (Some(Ok(_)), Some(g)) => {
            let g2 = |v: Option<u32>| v.map(|x| x as f64);
            charts.push((
                format!(
                    "utilization {} (share of time a kernel was running, not SM occupancy)",
                    fmt(g2(g.util_pct), "%", 0)
                ),
                |s| s.gpu.as_ref()?.util_pct.map(f64::from),
                Some((0.0, 100.0)),
            ));
            charts.push((
                format!(
                    "memory used {} of {}  (memory busy {})",
                    g.mem_used_bytes.map_or("-".into(), |v| bytes(v as f64)),
                    g.mem_total_bytes.map_or("-".into(), |v| bytes(v as f64)),
                    fmt(g2(g.mem_util_pct), "%", 0)
                ),
                |s| s.gpu.as_ref()?.mem_used_bytes.map(|v| v as f64),
                None,
            ));
            charts.push((
                format!(
                    "power {} of {} limit",
                    fmt(g.power_w, " W", 0),
                    fmt(g.power_limit_w, " W", 0)
                ),
                |s| s.gpu.as_ref()?.power_w,
                None,
            ));
            charts.push((
                format!(
                    "clocks SM {} MHz  memory {} MHz",
                    fmt(g2(g.sm_clock_mhz), "", 0),
                    fmt(g2(g.mem_clock_mhz), "", 0)
                ),
                |s| s.gpu.as_ref()?.sm_clock_mhz.map(f64::from),
                None,
            ));
            charts.push((
                format!("temperature {}", fmt(g2(g.temperature_c), "°C", 0)),
                |s| s.gpu.as_ref()?.temperature_c.map(f64::from),
                None,
            ));
            charts.push((
                format!(
                    "PCIe tx {} rx {} KB/s",
                    fmt(g2(g.pcie_tx_kbps), "", 0),
                    fmt(g2(g.pcie_rx_kbps), "", 0)
                ),
                |s| {
                    let g = s.gpu.as_ref()?;
                    Some(g.pcie_tx_kbps? as f64 + g.pcie_rx_kbps? as f64)
                },
                None,
            ));
        }
        (status, _) => {
            let reason = match status {
                Some(Err(r)) => r.clone(),
                _ => "starting GPU telemetry...".into(),
            };
            let [msg, rest] =
                Layout::vertical([Constraint::Length(3), Constraint::Min(0)]).areas(inner);
            lines(
                msg,
                buf,
                vec![
                    Line::from(Span::styled(reason, t.warn())),
                    Line::from(if ui.snap.header.device.starts_with("cuda") {
                        brick_times_note(ui.snap)
                    } else {
                        "the engine runs on the CPU; brick times are cpu_timer readings".into()
                    }),
                    Line::from(gpu_peaks_line(ui.snap).unwrap_or_default()),
                ],
            );
            return host_charts(rest, buf, ui);
        }
    }
    let mut inner = inner;
    if let Some(p) = gpu_peaks_line(ui.snap).filter(|_| inner.height > 8) {
        lines(Rect { height: 1, ..inner }, buf, vec![Line::from(p)]);
        inner.y += 1;
        inner.height -= 1;
    }
    let h = (inner.height / (charts.len() as u16 + 2)).clamp(2, 4);
    let mut y = inner.y;
    for (summary, pick, range) in charts {
        if y + h > inner.y + inner.height {
            break;
        }
        let vals = series(ui, pick);
        SparklinePanel {
            summary: &summary,
            values: &vals,
            range,
            style: t.good(),
        }
        .render(
            Rect {
                y,
                height: h,
                ..inner
            },
            buf,
        );
        y += h;
    }
    host_charts(
        Rect {
            y,
            height: (inner.y + inner.height).saturating_sub(y),
            ..inner
        },
        buf,
        ui,
    );
}

fn host_charts(area: Rect, buf: &mut Buffer, ui: &Ui) {
    if area.height == 0 {
        return;
    }
    let latest = ui.tele.latest();
    let cpu = latest.and_then(|s| s.host.cpu_pct);
    let rss = latest.and_then(|s| s.host.rss_bytes);
    let h = (area.height / 2).clamp(1, 4);
    let summary = format!(
        "host: cbtop process cpu {} (100% per busy core)",
        fmt(cpu, "%", 0)
    );
    let vals = series(ui, |s| s.host.cpu_pct);
    SparklinePanel {
        summary: &summary,
        values: &vals,
        range: None,
        style: ui.theme.warn(),
    }
    .render(Rect { height: h, ..area }, buf);
    if area.height > h {
        let summary = format!(
            "host: cbtop resident memory {}",
            rss.map_or("-".into(), |v| bytes(v as f64))
        );
        let vals = series(ui, |s| s.host.rss_bytes.map(|v| v as f64));
        SparklinePanel {
            summary: &summary,
            values: &vals,
            range: None,
            style: ui.theme.warn(),
        }
        .render(
            Rect {
                y: area.y + h,
                height: area.height - h,
                ..area
            },
            buf,
        );
    }
}
