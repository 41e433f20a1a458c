//! Assertions on the live run: no NaN or Inf in the logits or in any measured number, every
//! brick within budget, steady timings (CV), and the bricks plus `other` adding up to the token.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::common::{self, lines, panel, us};
use super::ui::Ui;
use crate::tui::snapshot::Snapshot;

/// The CV above which a brick's timing is called unsteady, percent.
pub const MAX_CV_PCT: f64 = 10.0;

/// One check: name, pass, detail.
pub struct Check {
    pub name: String,
    pub pass: bool,
    pub detail: String,
}

/// Every assertion over `s`.
pub fn checks(s: &Snapshot) -> Vec<Check> {
    let mut out = vec![Check {
        name: "no NaN/Inf in the logits".into(),
        pass: s.nonfinite_logits == 0,
        detail: format!(
            "{} non-finite logits over the steps since the last reset",
            s.nonfinite_logits
        ),
    }];
    let bad: Vec<&str> = s
        .bricks
        .iter()
        .filter(|b| {
            ![
                b.mean_us,
                b.p99_us,
                b.gbps,
                b.gflops,
                b.roofline_us,
                b.score,
            ]
            .iter()
            .all(|v| v.is_finite())
        })
        .map(|b| b.id.as_str())
        .collect();
    out.push(Check {
        name: "no NaN/Inf in the measured numbers".into(),
        pass: bad.is_empty() && s.token_us.is_finite(),
        detail: if bad.is_empty() {
            "every time and rate is finite".into()
        } else {
            format!("not finite: {}", bad.join(", "))
        },
    });
    let over: Vec<String> = s
        .bricks
        .iter()
        .filter(|b| b.mean_us > b.budget_us)
        .map(|b| format!("{} x{:.2}", b.id, b.gap_factor))
        .collect();
    out.push(Check {
        name: "every brick within budget".into(),
        pass: over.is_empty(),
        detail: if over.is_empty() {
            "all within budget".into()
        } else {
            format!("over: {}", over.join(", "))
        },
    });
    let noisy: Vec<String> = s
        .bricks
        .iter()
        .filter(|b| b.cv_pct > MAX_CV_PCT)
        .map(|b| format!("{} {:.0}%", b.id, b.cv_pct))
        .collect();
    out.push(Check {
        name: format!("CV at most {MAX_CV_PCT:.0}% per brick"),
        pass: noisy.is_empty(),
        detail: if noisy.is_empty() {
            "all steady".into()
        } else {
            format!("unsteady: {}", noisy.join(", "))
        },
    });
    let sum: f64 = s.bricks.iter().map(|b| b.mean_us).sum::<f64>() + s.other_us;
    let off = if s.token_us > 0.0 {
        100.0 * (sum - s.token_us).abs() / s.token_us
    } else {
        0.0
    };
    out.push(Check {
        name: "bricks + other = token time".into(),
        pass: off < 1.0,
        detail: format!(
            "{} µs + other {} µs vs token {} µs ({off:.2}% apart)",
            us(sum - s.other_us),
            us(s.other_us),
            us(s.token_us)
        ),
    });
    out
}

pub fn render(area: Rect, buf: &mut Buffer, ui: &Ui) {
    let body = common::frame(area, buf, ui);
    let t = ui.theme;
    let inner = panel(body, buf, "assertions", t);
    if ui.snap.bricks.is_empty() {
        return lines(inner, buf, vec![Line::from(common::waiting(ui.snap))]);
    }
    let mut out = Vec::new();
    for c in checks(ui.snap) {
        let (word, style) = if c.pass {
            ("PASS", t.good())
        } else {
            ("FAIL", t.bad())
        };
        out.push(Line::from(vec![
            Span::styled(format!("{word} "), style),
            Span::styled(c.name, t.bold()),
        ]));
        out.push(Line::from(format!("     {}", c.detail)));
    }
    lines(inner, buf, out);
}
