//! Horizontal bars as text: a value bar with eighth-cell precision, and the budget bar that
//! shows a measured time against its budget (the budget is the `│` mark, time over it is `▓`).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];

/// `value / max` of `width` cells, in full and eighth blocks, padded with spaces.
pub fn hbar(value: f64, max: f64, width: usize) -> String {
    let frac = if max > 0.0 && value.is_finite() {
        (value / max).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let eighths = (frac * width as f64 * 8.0).round() as usize;
    let mut s: String = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        s.push(EIGHTHS[eighths % 8]);
    }
    let used = s.chars().count();
    s.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
    s
}

/// Actual against budget in `width` cells, scaled to the larger of the two: `█` is time within
/// budget, `▓` time over it, `·` unused budget, `│` the budget itself. Empty when there is no
/// budget to compare against.
pub fn budget_bar(actual: f64, budget: f64, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    if !(budget > 0.0 && budget.is_finite() && actual.is_finite() && actual >= 0.0) {
        return " ".repeat(width);
    }
    let scale = actual.max(budget);
    let cells = width.saturating_sub(1).max(1) as f64;
    let b = ((budget / scale) * cells).round() as usize;
    let a = ((actual / scale) * cells).round() as usize;
    let mut s = String::with_capacity(width * 3);
    for i in 0..width {
        let c = if i == b {
            '│'
        } else if i < b {
            if i < a {
                '█'
            } else {
                '·'
            }
        } else if i <= a {
            '▓'
        } else {
            ' '
        };
        s.push(c);
    }
    s
}

/// [`budget_bar`] as a one-line widget; the part over budget takes `over` style.
pub struct BudgetBar {
    pub actual: f64,
    pub budget: f64,
    pub within: Style,
    pub over: Style,
}

impl Widget for BudgetBar {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        let text = budget_bar(self.actual, self.budget, area.width as usize);
        for (i, ch) in text.chars().enumerate() {
            let style = if ch == '▓' { self.over } else { self.within };
            if let Some(cell) = buf.cell_mut((area.x + i as u16, area.y)) {
                cell.set_char(ch).set_style(style);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hbar_fills_by_fraction() {
        assert_eq!(hbar(1.0, 1.0, 4), "████");
        assert_eq!(hbar(0.5, 1.0, 4), "██  ");
        assert_eq!(hbar(1.0 / 16.0, 1.0, 4), "▎   ");
        assert_eq!(hbar(f64::NAN, 1.0, 3), "   ");
        assert_eq!(hbar(2.0, 0.0, 2), "  ");
    }

    #[test]
    fn budget_bar_marks_budget_and_overrun() {
        // within budget: half used
        assert_eq!(budget_bar(5.0, 10.0, 11), "█████·····│");
        // twice the budget: budget mark in the middle, the rest over
        assert_eq!(budget_bar(20.0, 10.0, 11), "█████│▓▓▓▓▓");
        assert_eq!(budget_bar(1.0, 0.0, 3), "   ");
        assert_eq!(budget_bar(1.0, 1.0, 0), "");
        assert_eq!(budget_bar(5.0, 10.0, 11).chars().count(), 11);
    }
}
