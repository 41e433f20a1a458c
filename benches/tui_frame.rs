//! Frame time of the live view: the full main view and the drill-down at 160x48, rendered from
//! fixed data with ratatui's TestBackend (layout, widgets and buffer diff; no terminal I/O).
//! `cargo bench --bench tui_frame` runs 2000 frames of each; under `cargo test` a few, as a
//! smoke test. The budget is 16 ms a frame.

#[path = "../tests/tui_fixture/mod.rs"]
mod tui_fixture;

use std::time::{Duration, Instant};

use cbtop::tui::app::View;
use cbtop::tui::views::{self, Ui};
use cbtop_widgets::Theme;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn bench(view: View, frames: usize) -> (Duration, Duration, Duration) {
    let snap = tui_fixture::snapshot();
    let tele = tui_fixture::with_gpu();
    let app = tui_fixture::app(view);
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    let mut times = Vec::with_capacity(frames);
    for _ in 0..frames {
        let t0 = Instant::now();
        term.draw(|f| {
            views::draw(
                f,
                &Ui {
                    snap: &snap,
                    tele: &tele,
                    app: &app,
                    theme: Theme::COLOR,
                },
            )
        })
        .unwrap();
        times.push(t0.elapsed());
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / frames as u32;
    (
        mean,
        times[frames / 2],
        times[(frames * 99 / 100).min(frames - 1)],
    )
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let frames = if full { 2000 } else { 20 };
    for v in [View::Main, View::Drill] {
        let (mean, p50, p99) = bench(v, frames);
        println!(
            "frame {:<10} 160x48: mean {:>7.1} µs  p50 {:>7.1} µs  p99 {:>7.1} µs  ({frames} frames)",
            v.name(),
            mean.as_secs_f64() * 1e6,
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
        assert!(
            p99 < Duration::from_millis(16),
            "{} frame over 16 ms",
            v.name()
        );
    }
}
