//! A titled sparkline: a summary line (`tok/s now 40.1 avg 39.8`) over a sparkline of the most
//! recent values that fit the width (newest on the right), on a fixed or the window's own scale.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Sparkline, Widget};

pub struct SparklinePanel<'a> {
    pub summary: &'a str,
    /// Oldest first.
    pub values: &'a [f64],
    /// The values at the bottom and top of the chart; None scales to the window's own
    /// minimum and maximum (to show variation, e.g. of a clock that never goes near zero).
    pub range: Option<(f64, f64)>,
    pub style: Style,
}

impl Widget for SparklinePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        buf.set_stringn(
            area.x,
            area.y,
            self.summary,
            area.width as usize,
            Style::new(),
        );
        if area.height < 2 {
            return;
        }
        let w = area.width as usize;
        let tail = &self.values[self.values.len().saturating_sub(w)..];
        let finite = tail.iter().copied().filter(|v| v.is_finite());
        let (lo, hi) = self.range.unwrap_or_else(|| {
            let lo = finite.clone().fold(f64::INFINITY, f64::min);
            let hi = finite.fold(f64::NEG_INFINITY, f64::max);
            // A flat window: draw it at half height.
            if hi > lo {
                (lo, hi)
            } else {
                (lo - 1.0, lo + 1.0)
            }
        });
        // Sparkline wants integers: 125 (the bottom, still a visible step) ..= 1000 (the top).
        let data: Vec<u64> = tail
            .iter()
            .map(|&v| {
                if hi > lo && v.is_finite() {
                    (125.0 + 875.0 * ((v - lo) / (hi - lo)).clamp(0.0, 1.0)).round() as u64
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

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(values: &[f64], range: Option<(f64, f64)>) -> String {
        let area = Rect::new(0, 0, 4, 2);
        let mut buf = Buffer::empty(area);
        SparklinePanel {
            summary: "s",
            values,
            range,
            style: Style::new(),
        }
        .render(area, &mut buf);
        (0..4).map(|x| buf[(x, 1)].symbol().to_string()).collect()
    }

    #[test]
    fn scales_to_range_or_window() {
        // newest four of five, on 0..100
        assert_eq!(
            draw(&[9.0, 0.0, 50.0, 100.0, 100.0], Some((0.0, 100.0))),
            "▁▄██"
        );
        // own window: the minimum is the lowest visible step
        assert_eq!(draw(&[1990.0, 1995.0, 2000.0], None), "▁▄█ ");
    }
}
