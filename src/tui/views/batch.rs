//! The `--batch` sweep (`n`): aggregate tok/s against the batch size with the knee marked (the
//! size past which doubling the sequences adds little throughput), and each brick's share of a
//! step against the batch size, so the user sees which brick takes over as the batch grows.

use cbtop_widgets::hbar;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::common::{self, lines, panel};
use super::ui::Ui;
use crate::tui::snapshot::BatchRow;

/// Throughput gained by doubling the batch below which the knee is called (per doubling).
pub const KNEE_GAIN: f64 = 1.25;

/// The knee: the first size whose next one gains less than `KNEE_GAIN` per doubling of the
/// batch (None: every measured step up still pays).
pub fn knee(rows: &[BatchRow]) -> Option<usize> {
    rows.windows(2).find_map(|w| {
        let (a, b) = (&w[0], &w[1]);
        let doublings = (b.n as f64 / a.n as f64).log2();
        if doublings <= 0.0 || a.tok_s <= 0.0 {
            return None;
        }
        let per_doubling = (b.tok_s / a.tok_s).powf(1.0 / doublings);
        (per_doubling < KNEE_GAIN).then_some(a.n)
    })
}

/// Bricks in the order the rows first name them (pipeline order).
fn brick_ids(rows: &[BatchRow]) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::new();
    for (id, _) in rows.iter().flat_map(|r| &r.shares) {
        if !ids.contains(&id.as_str()) {
            ids.push(id);
        }
    }
    ids
}

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let t = ui.theme;
    let inner = panel(body, buf, "batch sweep", t);
    let sweep = &ui.snap.batch;
    if sweep.sizes.is_empty() {
        return lines(
            inner,
            buf,
            vec![Line::from(
                "no batch sweep: start cbtop with --batch 1,2,4,8 (each size decodes that many \
                 sequences together before the single stream runs)",
            )],
        );
    }
    let best = sweep.rows.iter().map(|r| r.tok_s).fold(0.0, f64::max);
    let knee = knee(&sweep.rows);
    let mut out = vec![Line::styled(
        format!(
            "  {:>5}  {:>11}  {:>12}  {:>9}  aggregate tok/s",
            "batch", "tok/s (all)", "tok/s (each)", "step µs"
        ),
        t.bold(),
    )];
    for &n in &sweep.sizes {
        let Some(r) = sweep.rows.iter().find(|r| r.n == n) else {
            let what = if sweep.error.is_some() {
                "not run"
            } else {
                "waiting"
            };
            out.push(Line::from(format!("  {n:>5}  {what}")));
            continue;
        };
        let mark = if knee == Some(n) { " ◀ knee" } else { "" };
        out.push(Line::from(vec![
            Span::raw(format!(
                "  {:>5}  {:>11.1}  {:>12.1}  {:>9.0}  ",
                r.n, r.tok_s, r.tok_s_each, r.step_us
            )),
            Span::styled(hbar(r.tok_s, best, 30), t.good()),
            Span::styled(mark, t.warn()),
        ]));
    }
    out.push(Line::from(""));
    out.push(Line::from(match (knee, sweep.rows.len()) {
        (_, 0 | 1) => "knee: needs two sizes measured".to_string(),
        (Some(n), _) => format!(
            "knee at {n} sequences: the next size adds less than {:.0}% a doubling",
            (KNEE_GAIN - 1.0) * 100.0
        ),
        (None, _) => format!(
            "no knee up to {} sequences: every step up adds {:.0}% or more a doubling",
            sweep.rows.last().map_or(0, |r| r.n),
            (KNEE_GAIN - 1.0) * 100.0
        ),
    }));
    if let Some(e) = &sweep.error {
        out.push(Line::styled(format!("sweep stopped: {e}"), t.bad()));
    }
    let ids = brick_ids(&sweep.rows);
    if !ids.is_empty() {
        out.push(Line::from(""));
        let mut head = format!("  {:<24}", "share of a step, %");
        for r in &sweep.rows {
            head.push_str(&format!(" {:>6}", r.n));
        }
        out.push(Line::styled(head, t.bold()));
        for id in ids {
            let mut line = format!("  {id:<24}");
            for r in &sweep.rows {
                match r.shares.iter().find(|(b, _)| b == id) {
                    Some((_, pct)) => line.push_str(&format!(" {pct:>6.1}")),
                    None => line.push_str(&format!(" {:>6}", "-")),
                }
            }
            out.push(Line::from(line));
        }
    }
    lines(inner, buf, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: usize, tok_s: f64) -> BatchRow {
        BatchRow {
            n,
            tok_s,
            tok_s_each: tok_s / n as f64,
            step_us: 1e6 * n as f64 / tok_s,
            shares: Vec::new(),
        }
    }

    #[test]
    fn the_knee_is_the_size_whose_next_step_up_stops_paying() {
        let rows = [row(1, 100.0), row(2, 190.0), row(4, 360.0), row(8, 400.0)];
        assert_eq!(knee(&rows), Some(4));
        // Sizes two doublings apart: 1.5x over two doublings is 1.22x a doubling.
        assert_eq!(knee(&[row(2, 100.0), row(8, 150.0)]), Some(2));
        assert_eq!(knee(&[row(1, 100.0), row(2, 200.0)]), None);
        assert_eq!(knee(&[row(1, 100.0)]), None);
    }
}
