//! What `--metrics-listen` serves while the live view runs: the engine thread's statistics
//! as histograms, with the judged figures of the snapshot it has just built (tok/s, TTFT,
//! overhead, budgets, roofline, scores, the `--batch` sweep), so a scrape and the screen agree.

use super::snapshot::Snapshot;
use crate::brick::stats::Stats;
use crate::metrics::frame::BatchFrame;
use crate::metrics::{Frame, Labels};

pub fn frame(labels: &Labels, stats: &Stats, snap: &Snapshot) -> Frame {
    let mut f = Frame::from_stats(labels.clone(), stats);
    let t = &snap.throughput;
    f.tokens_per_second = (t.tokens > 0).then_some(t.tok_s_avg);
    f.ttft_seconds = t.ttft_ms.map(|ms| ms / 1e3);
    f.prefill_tokens_per_second = t.prefill_tok_s;
    f.overhead_ratio = t.overhead_pct.map(|p| p / 100.0);
    f.score = (t.tokens > 0).then_some(snap.score);
    for b in &mut f.bricks {
        if let Some(v) = snap.bricks.iter().find(|v| v.id == b.id) {
            b.judged(v.budget_us, v.roofline_us, v.gbps, v.score);
        }
    }
    f.batch = snap
        .batch
        .rows
        .iter()
        .map(|r| BatchFrame {
            n: r.n,
            tokens_per_second: r.tok_s,
            per_sequence_tokens_per_second: r.tok_s_each,
        })
        .collect();
    f
}
