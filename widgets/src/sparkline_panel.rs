//! A titled sparkline: a summary line (`tok/s now 40.1 avg 39.8`) over a sparkline of the most
//! recent values that fit the width (newest on the right).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Sparkline, Widget};

pub struct SparklinePanel<'a> {
    pub summary: &'a str,
    /// Oldest first.
    pub values: &'a [f64],
    pub style: Style,
}

impl Widget for SparklinePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        buf.set_stringn(area.x, area.y, self.summary, area.width as usize, Style::new());
        if area.height < 2 {
            return;
        }
        let w = area.width as usize;
        let tail = &self.values[self.values.len().saturating_sub(w)..];
        let max = tail.iter().cloned().fold(0.0, f64::max);
        // Sparkline wants integers: scale so the largest value is 1000.
        let data: Vec<u64> = tail
            .iter()
            .map(|&v| {
                if max > 0.0 && v.is_finite() {
                    (v / max * 1000.0).round() as u64
                } else {
                    0
                }
            })
            .collect();
        let spark_area = Rect {
            y: area.y + 1,
            height: area.height - 1,
            ..area
        };
        Sparkline::default()
            .data(&data)
            .max(1000)
            .style(self.style)
            .render(spark_area, buf);
    }
}
