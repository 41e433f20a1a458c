//! Help: the keys, the legend of the marks, and where the numbers come from.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::common::{self, lines, panel};
use super::ui::Ui;

const KEYS: &[(&str, &str)] = &[
    ("↑ ↓ / k j", "select a brick"),
    (
        "Enter",
        "drill-down: per-layer bars, histogram, cost model, kernels",
    ),
    ("h", "latency histograms (decode step and selected brick)"),
    ("b", "budget vs actual"),
    ("m", "bandwidth and roofline"),
    ("g", "GPU detail (or why there is no GPU telemetry)"),
    ("a", "assertions: NaN/Inf, budget, CV"),
    (
        "n",
        "batch sweep (--batch): tok/s and brick shares against N",
    ),
    (
        "w",
        "kernel timeline of the last step (GPU, --timing events): ↑↓ PgUp PgDn scroll",
    ),
    ("s", "sort: pipeline, time, gap, score"),
    ("p", "pause / resume decoding"),
    ("r", "reset statistics"),
    ("e", "export a JSON snapshot to the current directory"),
    (
        "Tab",
        "--device all: the next GPU's views (main: all side by side)",
    ),
    ("?", "this help (a view's key again, or Esc, goes back)"),
    ("q / Ctrl-C", "quit (Esc quits from the main view)"),
];

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let inner = panel(body, buf, "help", ui.theme);
    let mut out: Vec<Line> = KEYS
        .iter()
        .map(|(k, d)| Line::from(format!("  {k:<12} {d}")))
        .collect();
    out.push(Line::from(""));
    out.push(Line::from(
        "  marks: ! bottleneck (most time over budget)  │ budget  █ within  ▓ over budget",
    ));
    out.push(Line::from(
        "  times: measured per brick (source shown: cpu_timer, gpu_globaltimer, host_sync);",
    ));
    out.push(Line::from(
        "  GB/s, GFLOP/s, roofline: derived from the cost model and measured times",
    ));
    lines(inner, buf, out);
}
