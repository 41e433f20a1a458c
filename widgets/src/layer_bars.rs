//! Per-layer bars: `L07 ██████▌ 12.3`, one per layer, laid out in as many columns as needed to
//! fit the rows available (a 30-layer model fits a 24-row terminal in two columns).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use crate::bars::hbar;

pub struct LayerBars<'a> {
    pub values: &'a [f64],
    pub bar_style: Style,
    /// Index of a value to mark (e.g. the slowest layer).
    pub marked: Option<usize>,
}

impl Widget for LayerBars<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 || self.values.is_empty() {
            return;
        }
        let n = self.values.len();
        let rows = area.height as usize;
        let cols = n.div_ceil(rows).max(1);
        let col_w = (area.width as usize / cols).max(1);
        let max = self.values.iter().cloned().fold(0.0, f64::max);
        let label_w = format!("L{}", n - 1).len().max(3);
        for (i, &v) in self.values.iter().enumerate() {
            let (c, r) = (i / rows, i % rows);
            if c >= cols || (c + 1) * col_w > area.width as usize {
                break;
            }
            let x = area.x + (c * col_w) as u16;
            let y = area.y + r as u16;
            let mark = if Some(i) == self.marked { '!' } else { ' ' };
            let label = format!("{:<label_w$}{mark}", format!("L{i}"));
            let value = format!(" {v:>7.1}");
            let bar_w = col_w.saturating_sub(label.chars().count() + value.len() + 1);
            buf.set_stringn(x, y, &label, col_w, Style::new());
            let bx = x + label.chars().count().min(col_w) as u16;
            if bar_w > 0 {
                buf.set_stringn(bx, y, hbar(v, max, bar_w), bar_w, self.bar_style);
            }
            let vx = bx + bar_w as u16;
            let room = (x as usize + col_w).saturating_sub(vx as usize);
            buf.set_stringn(vx, y, &value, room, Style::new());
        }
    }
}
