//! Helpers shared by the views: the sorted brick order, the selected brick, panel blocks,
//! the one-line header and footer, and number formatting.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Widget};

use super::ui::Ui;
use crate::tui::app::{Sort, View};
use crate::tui::snapshot::{BrickView, Phase, Snapshot};
use cbtop_widgets::{BrickLine, Theme};

/// Indices of `snap.bricks` in display order.
pub fn order(snap: &Snapshot, sort: Sort) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..snap.bricks.len()).collect();
    let b = &snap.bricks;
    match sort {
        Sort::Pipeline => {}
        Sort::Time => idx.sort_by(|&x, &y| b[y].mean_us.total_cmp(&b[x].mean_us)),
        Sort::Gap => idx.sort_by(|&x, &y| b[y].gap_factor.total_cmp(&b[x].gap_factor)),
        Sort::Score => idx.sort_by(|&x, &y| b[x].score.total_cmp(&b[y].score)),
    }
    idx
}

/// The selected brick (index into `snap.bricks`), if any.
pub fn selected(ui: &Ui) -> Option<usize> {
    let o = order(ui.snap, ui.app.sort);
    o.get(ui.app.selected.min(o.len().saturating_sub(1)))
        .copied()
}

pub fn selected_brick<'a>(ui: &Ui<'a>) -> Option<&'a BrickView> {
    selected(ui).map(|i| &ui.snap.bricks[i])
}

/// `b`'s GB/s as a share of the bandwidth its bytes are judged against (`roof_gbps`: the
/// memory peak, or between it and the caches' peak on a CPU decode step), percent.
pub fn peak_pct(snap: &Snapshot, b: &BrickView) -> Option<f64> {
    let p = snap.peaks.as_ref()?;
    let roof = if b.roof_gbps > 0.0 {
        b.roof_gbps
    } else {
        p.bandwidth_gbps
    };
    (roof > 0.0).then(|| 100.0 * b.gbps / roof)
}

/// Table lines in display order, then `other`.
pub fn brick_lines(snap: &Snapshot, order: &[usize]) -> Vec<BrickLine> {
    let mut v: Vec<BrickLine> = order
        .iter()
        .map(|&i| {
            let b = &snap.bricks[i];
            BrickLine {
                name: b.id.clone(),
                mean_us: b.mean_us,
                p99_us: b.p99_us,
                share_pct: b.share_pct,
                budget_us: Some(b.budget_us),
                gbps: Some(b.gbps),
                peak_pct: peak_pct(snap, b),
                grade: Some(b.grade.clone()),
            }
        })
        .collect();
    if let (false, Some(gaps), Some(share)) =
        (snap.bricks.is_empty(), snap.gaps_us, snap.gaps_share_pct)
    {
        v.push(BrickLine {
            name: "gaps".into(),
            mean_us: gaps,
            p99_us: f64::NAN,
            share_pct: share,
            budget_us: None,
            gbps: None,
            peak_pct: None,
            grade: None,
        });
    }
    if !snap.bricks.is_empty() {
        v.push(BrickLine {
            name: "other".into(),
            mean_us: snap.other_us,
            p99_us: f64::NAN,
            share_pct: snap.other_share_pct,
            budget_us: None,
            gbps: None,
            peak_pct: None,
            grade: None,
        });
    }
    v
}

/// A bordered panel titled `title`; returns the inner area.
pub fn panel(area: Rect, buf: &mut Buffer, title: &str, theme: Theme) -> Rect {
    let block = Block::bordered().title(Span::styled(format!(" {title} "), theme.title()));
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

/// Plain lines into `area`, cut at its edges.
pub fn lines(area: Rect, buf: &mut Buffer, lines: Vec<Line>) {
    Paragraph::new(lines).render(area, buf);
}

/// Microseconds with a sensible precision.
pub fn us(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Bytes as B / KB / MB / GB (decimal).
pub fn bytes(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2} GB", v / 1e9),
        v if v >= 1e6 => format!("{:.2} MB", v / 1e6),
        v if v >= 1e3 => format!("{:.1} KB", v / 1e3),
        v => format!("{v:.0} B"),
    }
}

/// The layout every full-screen view but the main one shares: the header line, the footer line,
/// and the body between them, which it returns.
pub fn frame(area: Rect, buf: &mut Buffer, ui: &Ui) -> Rect {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    header(head, buf, ui);
    footer(foot, buf, ui);
    body
}

/// The top line: model, device, timing and numerics, synthetic flag, state.
pub fn header(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let s = ui.snap;
    let t = ui.theme;
    let h = &s.header;
    let sep = || Span::styled(" │ ", t.dim());
    let mut spans = vec![
        Span::styled(" cbtop ", t.title()),
        // The pause shows at once; the engine stops after the step it is in.
        if ui.app.paused && s.phase == Phase::Running {
            Span::styled(Phase::Paused.name(), t.warn())
        } else {
            Span::styled(
                s.phase.name(),
                if s.phase == Phase::Running {
                    t.good()
                } else {
                    t.warn()
                },
            )
        },
        sep(),
    ];
    // Side by side (`--device all`) a column is narrow: which GPU it is comes first.
    let many = ui.app.panes > 1;
    if many {
        spans.push(Span::styled(h.device.clone(), t.bold()));
        spans.push(sep());
    }
    spans.push(Span::styled(h.model.clone(), t.bold()));
    if h.synthetic {
        spans.push(Span::raw(" "));
        spans.push(Span::styled("[synthetic weights]", t.bad()));
    }
    for part in [
        h.model_detail.clone(),
        if many {
            String::new()
        } else {
            h.device.clone()
        },
        if h.numerics.is_empty() {
            format!("timing {}", h.timing)
        } else {
            format!("timing {} · numerics {}", h.timing, h.numerics)
        },
    ] {
        if !part.is_empty() {
            spans.push(sep());
            spans.push(Span::raw(part));
        }
    }
    spans.push(sep());
    spans.push(Span::raw(format!("view {}", ui.app.view.name())));
    lines(area, buf, vec![Line::from(spans)]);
}

/// The bottom line: status message (or key hints).
pub fn footer(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let t = ui.theme;
    let keys = match ui.app.view {
        View::Main => "q quit  ↑↓/jk select  ⏎ drill-down  h hist  b budget  m roofline  g gpu  a assert  n batch  w kernels  s sort  p pause  r reset  e export  ? help",
        View::Timeline => "Esc back  q quit  ↑↓ PgUp PgDn scroll  p pause (freeze the step)  h b m g a n ? views  ⏎ drill",
        _ => "Esc back  q quit  ↑↓ select brick  ⏎ drill  h b m g a n w ? views  s sort  p pause  r reset  e export",
    };
    let mut spans = Vec::new();
    if let Some(e) = &ui.snap.error {
        spans.push(Span::styled(format!("engine stopped: {e}  "), t.bad()));
    }
    if !ui.app.status.is_empty() {
        spans.push(Span::styled(format!("{}  ", ui.app.status), t.warn()));
    }
    if ui.app.panes > 1 {
        spans.push(Span::styled("Tab next GPU  ", t.dim()));
    }
    spans.push(Span::styled(keys, t.dim()));
    lines(area, buf, vec![Line::from(spans)]);
}

/// Message shown where brick rows will be once measured.
pub fn waiting(snap: &Snapshot) -> String {
    match (&snap.error, snap.phase) {
        (Some(e), _) => format!("engine stopped: {e}"),
        (None, Phase::Probing) => {
            "measuring CPU peak bandwidth and FMA rate for the roofline...".into()
        }
        (None, Phase::Prefill) => "evaluating the prompt...".into(),
        (None, Phase::Batch) => {
            "decoding the --batch sweep (n shows it); the single stream starts after it".into()
        }
        _ => "warming up: brick rows appear after the first measured steps".into(),
    }
}

/// The GPU's memory bandwidth figures, when known: the measured device-to-device copy and
/// NVML's theoretical peak, the roofline's one marked.
pub fn gpu_peaks_line(snap: &Snapshot) -> Option<String> {
    let p = snap.peaks.as_ref()?;
    let mut parts = Vec::new();
    for (name, source, v) in [
        ("d2d copy", "d2d_copy", p.d2d_copy_gbps),
        ("NVML max", "nvml_bus", p.nvml_bus_gbps),
    ] {
        if let Some(v) = v {
            let roof = if p.bandwidth_source == source {
                " (roofline)"
            } else {
                ""
            };
            parts.push(format!("{name} {v:.0} GB/s{roof}"));
        }
    }
    (!parts.is_empty()).then(|| format!("peak bw: {}", parts.join(" · ")))
}

/// Where the brick times come from, for panels explaining a missing GPU telemetry.
pub fn brick_times_note(snap: &Snapshot) -> String {
    if snap.header.device.starts_with("cuda") {
        format!(
            "brick times come from the GPU engine ({})",
            snap.header.timing
        )
    } else {
        "brick times come from the CPU engine (cpu_timer)".to_string()
    }
}
