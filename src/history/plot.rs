//! `cbtop history FILE` as text: tok/s over the runs as a line chart (ratatui's `Chart`,
//! drawn in braille into a buffer and printed), each brick's time over the runs as a
//! sparkline with its range (the widget crate's `SparklinePanel`), then a table of the runs.
//! Rendering into a `Buffer` rather than a terminal makes the plot plain text: it works in a
//! pipe, a CI log and a test.

use std::fmt::Write;

use cbtop_widgets::SparklinePanel;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Widget};

use super::db::RunRow;

/// A buffer's text, a line per row, trailing blanks trimmed.
fn text_of(buf: &Buffer) -> String {
    let a = buf.area;
    let mut s = String::new();
    for y in a.y..a.y + a.height {
        let mut line = String::new();
        for x in a.x..a.x + a.width {
            line.push_str(buf[(x, y)].symbol());
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    s
}

fn render(w: impl Widget, width: u16, height: u16) -> String {
    let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
    w.render(buf.area, &mut buf);
    text_of(&buf)
}

/// The line chart of `values` (one per run, oldest first) against run ids.
fn chart(ids: &[i64], values: &[f64], width: u16, height: u16) -> String {
    let points: Vec<(f64, f64)> = ids
        .iter()
        .zip(values)
        .map(|(&i, &v)| (i as f64, v))
        .collect();
    let (x0, x1) = (
        *ids.first().unwrap_or(&0) as f64,
        *ids.last().unwrap_or(&1) as f64,
    );
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // Some room above and below, and a flat series drawn in the middle.
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.01).max(1e-9);
    let (y0, y1) = ((lo - pad).max(0.0), hi + pad);
    let dataset = Dataset::default()
        .marker(Marker::Braille)
        .graph_type(GraphType::Line)
        .data(&points);
    let c = Chart::new(vec![dataset])
        .x_axis(
            Axis::default()
                .bounds([x0, x1.max(x0 + 1.0)])
                .labels([format!("run {x0}"), format!("run {x1}")].map(Span::raw)),
        )
        .y_axis(
            Axis::default()
                .bounds([y0, y1])
                .labels([format!("{y0:.1}"), format!("{y1:.1}")].map(Span::raw)),
        );
    render(c, width, height)
}

/// The whole page for `runs` (oldest first, one model, device and numerics), `width` wide.
pub fn page(title: &str, runs: &[RunRow], width: u16) -> String {
    let mut s = String::new();
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    let _ = writeln!(s, "{title}");
    let tps: Vec<f64> = runs.iter().map(|r| r.tokens_per_sec).collect();
    let _ = writeln!(s, "\ntok/s over runs");
    s.push_str(&chart(&ids, &tps, width, 12));
    let _ = writeln!(
        s,
        "\nbrick time per token over runs (mean us; sparkline oldest to newest, scaled to its range)"
    );
    let mut bricks: Vec<&str> = Vec::new();
    for r in runs {
        for b in &r.bricks {
            if !bricks.contains(&b.id.as_str()) {
                bricks.push(&b.id);
            }
        }
    }
    for id in bricks {
        let v: Vec<f64> = runs
            .iter()
            .map(|r| {
                r.bricks
                    .iter()
                    .find(|b| b.id == id)
                    .map_or(f64::NAN, |b| b.mean_us)
            })
            .collect();
        let finite = v.iter().copied().filter(|x| x.is_finite());
        let lo = finite.clone().fold(f64::INFINITY, f64::min);
        let hi = finite.fold(f64::NEG_INFINITY, f64::max);
        let last = v.last().copied().unwrap_or(f64::NAN);
        let summary = format!("{id:<22} last {last:>10.1}  min {lo:>10.1}  max {hi:>10.1}");
        let panel = SparklinePanel {
            summary: &summary,
            values: &v,
            range: None,
            style: Style::new(),
        };
        s.push_str(&render(panel, width, 2));
    }
    let _ = writeln!(
        s,
        "\n{:>6}  {:<25} {:<12} {:>10} {:<11} {:>10}",
        "run", "time", "commit", "tok/s", "status", "token us"
    );
    for r in runs {
        let token_us: f64 = r.bricks.iter().map(|b| b.mean_us).sum();
        let commit = r.commit.as_deref().unwrap_or("-");
        let _ = writeln!(
            s,
            "{:>6}  {:<25} {:<12} {:>10.2} {:<11} {:>10.1}",
            r.id,
            r.timestamp,
            &commit[..commit.len().min(12)],
            r.tokens_per_sec,
            r.status,
            token_us
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::db::BrickRow;
    use super::*;

    #[test]
    fn a_page_has_a_chart_a_sparkline_per_brick_and_a_row_per_run() {
        let runs: Vec<RunRow> = (1..=20)
            .map(|i| RunRow {
                id: i,
                timestamp: format!("2026-01-01T00:00:{i:02}Z"),
                commit: Some(format!("abc{i}")),
                model: "m".into(),
                device: "cpu".into(),
                numerics: "exact".into(),
                status: "PASS".into(),
                tokens_per_sec: 40.0 + i as f64,
                bricks: vec![BrickRow {
                    id: "qkv".into(),
                    mean_us: 100.0 * i as f64,
                    samples_us: vec![],
                }],
            })
            .collect();
        let p = page("title", &runs, 60);
        assert!(p.starts_with("title\n"));
        // Braille dots of the line, and the axes' labels.
        assert!(
            p.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
            "{p}"
        );
        assert!(p.contains("run 1") && p.contains("run 20"));
        assert!(p.contains("qkv") && p.contains("last     2000.0"));
        assert!(p.contains('█') && p.contains('▁'), "{p}");
        assert_eq!(p.lines().filter(|l| l.contains("abc")).count(), 20);
    }
}
