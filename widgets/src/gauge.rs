//! A one-line labelled gauge: `label ████····  text`. Used for GPU utilisation, memory and
//! power, where the ratio may be unknown (then only the text is shown).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use crate::bars::hbar;

pub struct LabeledGauge<'a> {
    pub label: &'a str,
    /// 0..=1, or None when unknown.
    pub ratio: Option<f64>,
    pub text: &'a str,
    pub label_width: u16,
    pub style: Style,
}

impl Widget for LabeledGauge<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        let w = area.width as usize;
        let lw = (self.label_width as usize).min(w);
        buf.set_stringn(area.x, area.y, self.label, lw, Style::new());
        let text_w = self.text.chars().count() + 1;
        let bar_w = w.saturating_sub(lw + text_w).min(30);
        let mut x = area.x + lw as u16;
        if let (Some(r), true) = (self.ratio, bar_w >= 4) {
            let bar: String = hbar(r, 1.0, bar_w)
                .chars()
                .map(|c| if c == ' ' { '·' } else { c })
                .collect();
            buf.set_stringn(x, area.y, &bar, bar_w, self.style);
            x += bar_w as u16 + 1;
        }
        let room = (area.x + area.width).saturating_sub(x) as usize;
        buf.set_stringn(x, area.y, self.text, room, Style::new());
    }
}
