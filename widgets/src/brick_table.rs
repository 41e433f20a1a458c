//! The brick pipeline table: one row per brick with its mean and p99 time, share of the token,
//! a budget bar, achieved GB/s, share of peak bandwidth and grade. The bottleneck is marked
//! `!`; columns drop out from the right-hand side of the importance order when the area is
//! narrow, so the table stays readable from 20 columns up.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, HighlightSpacing, Row, StatefulWidget, Table, TableState, Widget};

use crate::bars::budget_bar;
use crate::theme::Theme;

/// One row, as plain numbers. `budget_us`, `gbps`, `peak_pct` and `grade` are absent for rows
/// that have none (e.g. `other`, the time no brick covers).
#[derive(Clone, Debug, PartialEq)]
pub struct BrickLine {
    pub name: String,
    pub mean_us: f64,
    pub p99_us: f64,
    pub share_pct: f64,
    pub budget_us: Option<f64>,
    pub gbps: Option<f64>,
    pub peak_pct: Option<f64>,
    pub grade: Option<String>,
}

/// The table over `rows`, `selected` highlighted, `bottleneck` marked.
pub struct BrickTable<'a> {
    pub rows: &'a [BrickLine],
    pub selected: Option<usize>,
    pub bottleneck: Option<usize>,
    pub theme: Theme,
}

fn num(v: f64, prec: usize) -> String {
    if v.is_finite() {
        format!("{v:.prec$}")
    } else {
        "-".to_string()
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| num(v, prec))
}

/// Which optional columns fit in `width`.
struct Columns {
    p99: bool,
    share: bool,
    bar: u16,
    gbps: bool,
    peak: bool,
    grade: bool,
}

impl Columns {
    fn for_width(width: u16) -> Columns {
        // selection mark 1, name 16 + us 9 always; then, in order of importance: share 6,
        // grade 5, p99 9, GB/s 8, %peak 6, and the bar takes what is left (at least 8).
        let mut left = width.saturating_sub(1 + 16 + 9 + 2) as i32;
        let mut take = |w: i32| {
            if left >= w {
                left -= w;
                true
            } else {
                false
            }
        };
        let share = take(7);
        let grade = take(6);
        let p99 = take(10);
        let gbps = take(9);
        let peak = take(7);
        let bar = if left >= 9 {
            (left - 1).min(64) as u16
        } else {
            0
        };
        Columns {
            p99,
            share,
            bar,
            gbps,
            peak,
            grade,
        }
    }
}

impl Widget for BrickTable<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        let cols = Columns::for_width(area.width);
        let t = self.theme;
        let mut header = vec![
            Cell::from("  brick"),
            Cell::from(Line::from("µs").right_aligned()),
        ];
        let mut widths = vec![Constraint::Length(16), Constraint::Length(9)];
        if cols.p99 {
            header.push(Cell::from(Line::from("p99 µs").right_aligned()));
            widths.push(Constraint::Length(9));
        }
        if cols.share {
            header.push(Cell::from(Line::from("share").right_aligned()));
            widths.push(Constraint::Length(6));
        }
        if cols.bar > 0 {
            header.push(Cell::from("budget (│) vs actual"));
            widths.push(Constraint::Length(cols.bar));
        }
        if cols.gbps {
            header.push(Cell::from(Line::from("GB/s").right_aligned()));
            widths.push(Constraint::Length(8));
        }
        if cols.peak {
            header.push(Cell::from(Line::from("%peak").right_aligned()));
            widths.push(Constraint::Length(6));
        }
        if cols.grade {
            header.push(Cell::from("grade"));
            widths.push(Constraint::Length(5));
        }
        let rows: Vec<Row> = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mark = if Some(i) == self.bottleneck {
                    "! "
                } else {
                    "  "
                };
                let over = r.budget_us.is_some_and(|b| r.mean_us > b);
                let name_style = if Some(i) == self.bottleneck {
                    t.bad()
                } else {
                    t.bold()
                };
                let mut cells = vec![
                    Cell::from(Span::styled(format!("{mark}{}", r.name), name_style)),
                    Cell::from(Line::from(num(r.mean_us, 1)).right_aligned()),
                ];
                if cols.p99 {
                    cells.push(Cell::from(Line::from(num(r.p99_us, 1)).right_aligned()));
                }
                if cols.share {
                    cells.push(Cell::from(
                        Line::from(format!("{}%", num(r.share_pct, 1))).right_aligned(),
                    ));
                }
                if cols.bar > 0 {
                    let bar = r
                        .budget_us
                        .map(|b| budget_bar(r.mean_us, b, cols.bar as usize))
                        .unwrap_or_default();
                    let style = if over { t.warn() } else { t.good() };
                    cells.push(Cell::from(Span::styled(bar, style)));
                }
                if cols.gbps {
                    cells.push(Cell::from(Line::from(opt(r.gbps, 1)).right_aligned()));
                }
                if cols.peak {
                    cells.push(Cell::from(Line::from(opt(r.peak_pct, 0)).right_aligned()));
                }
                if cols.grade {
                    let g = r.grade.clone().unwrap_or_else(|| "-".into());
                    let style = t.grade(&g);
                    cells.push(Cell::from(Span::styled(format!("  {g}"), style)));
                }
                Row::new(cells)
            })
            .collect();
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(t.title()))
            .column_spacing(1)
            .row_highlight_style(t.selected())
            .highlight_symbol(">")
            .highlight_spacing(HighlightSpacing::Always);
        let mut state = TableState::default().with_selected(self.selected);
        StatefulWidget::render(table, area, buf, &mut state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_tables_drop_columns_in_order() {
        let c = Columns::for_width(30);
        assert!(!c.p99 && !c.gbps && c.bar == 0);
        let c = Columns::for_width(160);
        assert!(c.p99 && c.share && c.gbps && c.peak && c.grade && c.bar >= 8);
    }

    #[test]
    fn marks_bottleneck_and_renders_numbers() {
        let rows = vec![BrickLine {
            name: "ffn_down".into(),
            mean_us: 123.45,
            p99_us: 150.0,
            share_pct: 42.0,
            budget_us: Some(100.0),
            gbps: Some(9.5),
            peak_pct: Some(50.0),
            grade: Some("C".into()),
        }];
        let area = Rect::new(0, 0, 100, 3);
        let mut buf = Buffer::empty(area);
        BrickTable {
            rows: &rows,
            selected: Some(0),
            bottleneck: Some(0),
            theme: Theme::PLAIN,
        }
        .render(area, &mut buf);
        let line: String = (0..100).map(|x| buf[(x, 1)].symbol().to_string()).collect();
        assert!(line.starts_with(">! ffn_down"), "{line}");
        assert!(line.contains("123.5") && line.contains("42.0%") && line.contains('▓'));
    }
}
