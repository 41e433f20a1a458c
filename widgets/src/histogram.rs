//! A latency histogram drawn sideways: one row per bin, `≤ upper µs  bar  count`, with the
//! bins holding the p50 and p99 marked. The caller supplies bins (upper bound µs, count), e.g.
//! from hdrhistogram, sized to the rows it has.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use crate::bars::hbar;

pub struct LatencyHistogram<'a> {
    /// (upper bound µs, count), ascending.
    pub bins: &'a [(f64, u64)],
    pub p50_us: f64,
    pub p99_us: f64,
    pub bar_style: Style,
}

impl Widget for LatencyHistogram<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        if self.bins.is_empty() {
            buf.set_stringn(
                area.x,
                area.y,
                "no samples yet",
                area.width as usize,
                Style::new(),
            );
            return;
        }
        let max = self.bins.iter().map(|b| b.1).max().unwrap_or(1).max(1) as f64;
        let marker = |i: usize| {
            let lo = if i == 0 { f64::MIN } else { self.bins[i - 1].0 };
            let hi = self.bins[i].0;
            let last = i + 1 == self.bins.len();
            let has = |v: f64| v > lo && (v <= hi || last);
            match (has(self.p50_us), has(self.p99_us)) {
                (true, true) => " p50 p99",
                (true, false) => " p50",
                (false, true) => " p99",
                _ => "",
            }
        };
        let w = area.width as usize;
        let count_w = self
            .bins
            .iter()
            .map(|b| b.1.to_string().len())
            .max()
            .unwrap_or(1);
        for (i, &(upper, count)) in self.bins.iter().take(area.height as usize).enumerate() {
            let y = area.y + i as u16;
            let label = format!("≤{upper:>9.1} µs ");
            let tail = format!(" {count:>count_w$}{}", marker(i));
            let bar_w = w.saturating_sub(label.chars().count() + tail.chars().count() + 1);
            buf.set_stringn(area.x, y, &label, w, Style::new());
            let x = area.x + label.chars().count().min(w) as u16;
            if bar_w > 0 {
                buf.set_stringn(x, y, hbar(count as f64, max, bar_w), bar_w, self.bar_style);
            }
            let x = x + bar_w as u16;
            let room = (area.x + area.width).saturating_sub(x) as usize;
            buf.set_stringn(x, y, &tail, room, Style::new());
        }
    }
}

/// Merge adjacent bins so at most `n` remain (each keeps the upper bound of its last bin).
pub fn regroup(bins: &[(f64, u64)], n: usize) -> Vec<(f64, u64)> {
    if n == 0 || bins.is_empty() {
        return Vec::new();
    }
    let per = bins.len().div_ceil(n);
    bins.chunks(per)
        .map(|c| (c[c.len() - 1].0, c.iter().map(|b| b.1).sum()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regroup_keeps_counts_and_bounds() {
        let bins: Vec<(f64, u64)> = (1..=5).map(|i| (i as f64, i as u64)).collect();
        assert_eq!(regroup(&bins, 2), vec![(3.0, 6), (5.0, 9)]);
        assert_eq!(regroup(&bins, 10), bins);
        assert!(regroup(&bins, 0).is_empty());
    }

    #[test]
    fn marks_percentile_bins() {
        let bins = [(10.0, 5), (20.0, 1), (30.0, 1)];
        let area = Rect::new(0, 0, 50, 3);
        let mut buf = Buffer::empty(area);
        LatencyHistogram {
            bins: &bins,
            p50_us: 8.0,
            p99_us: 29.0,
            bar_style: Style::new(),
        }
        .render(area, &mut buf);
        let row =
            |y: u16| -> String { (0..50).map(|x| buf[(x, y)].symbol().to_string()).collect() };
        assert!(row(0).trim_end().ends_with("5 p50"), "{}", row(0));
        assert!(row(2).trim_end().ends_with("1 p99"), "{}", row(2));
    }
}
