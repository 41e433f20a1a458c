//! Fixed, hand-made data for the TUI's snapshot tests, render sweep and frame-time benchmark:
//! deterministic numbers (no timing), so every rendered frame is the same on every machine.
//! Test data only: the binary never shows it.
#![allow(dead_code)]

use cbtop::brick::BrickId;
use cbtop::telemetry::{GpuSample, HostSample, TelemetrySample};
use cbtop::tui::app::{App, View};
use cbtop::tui::snapshot::{
    BatchRow, BatchSweep, BrickView, Header, KernelLine, Peaks, Phase, Snapshot, TelemetryView,
    Throughput, TimelineLine,
};
use cbtop::tui::views::{self, Ui};
use cbtop_widgets::Theme;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn bins(center: f64, n: usize) -> Vec<(f64, u64)> {
    (0..n)
        .map(|i| {
            let d = i as f64 - n as f64 / 4.0;
            (
                center * (0.8 + 0.05 * i as f64),
                (200.0 * (-d * d / 8.0).exp()).round() as u64 + (i % 3) as u64,
            )
        })
        .collect()
}

/// A 4-layer llama model's snapshot with every brick it runs measured.
pub fn snapshot() -> Snapshot {
    let layers = 4;
    let bricks: Vec<BrickView> = BrickId::ALL
        .iter()
        .filter(|b| !b.arch_specific())
        .enumerate()
        .map(|(i, b)| {
            let k = (i as f64 * 7.0) % 11.0 + 1.0;
            let mean = if b.name().contains("ffn") || b.name() == "qkv" || b.name() == "lm_head" {
                100.0 * k
            } else {
                3.0 * k
            };
            let budget = mean * (0.6 + 0.1 * (i % 6) as f64);
            let bytes = mean * 8_000.0;
            BrickView {
                id: b.name().to_string(),
                source: "cpu_timer".into(),
                count: 1000,
                mean_us: mean,
                p50_us: mean * 0.97,
                p90_us: mean * 1.05,
                p99_us: mean * 1.2,
                p999_us: mean * 1.4,
                max_us: mean * 1.9,
                cv_pct: 2.0 + (i % 5) as f64 * 3.5,
                share_pct: 0.0,
                budget_us: budget,
                budget_source: "roofline".into(),
                gap_factor: mean / budget,
                bytes_read: bytes * 0.9,
                bytes_written: bytes * 0.1,
                flops: bytes * 0.5,
                intensity: 0.5,
                gbps: bytes / (mean * 1e3),
                gflops: bytes * 0.5 / (mean * 1e3),
                roof_gbps: 20.0,
                roofline_us: budget * 0.7,
                efficiency: (budget * 0.7 / mean).min(1.0),
                score: 40.0 + (i * 13 % 60) as f64,
                grade: ["A", "B", "C", "D", "F"][i % 5].into(),
                per_layer_us: if b.per_layer() {
                    (0..layers)
                        .map(|l| mean / layers as f64 * (0.8 + 0.15 * l as f64))
                        .collect()
                } else {
                    Vec::new()
                },
                hist: bins(mean, 32),
                kernels: vec![KernelLine {
                    name: "vec_dot_rows q4_k·q8_k (avx2)".into(),
                    reads: Some(format!("{}.weight Q4_K", b.name())),
                    launches: if b.per_layer() { layers as u32 } else { 1 },
                    ..KernelLine::default()
                }],
            }
        })
        .collect();
    let other = 42.0;
    let token: f64 = bricks.iter().map(|b| b.mean_us).sum::<f64>() + other;
    let bricks: Vec<BrickView> = bricks
        .into_iter()
        .map(|mut b| {
            b.share_pct = 100.0 * b.mean_us / token;
            b
        })
        .collect();
    let mut worst: Vec<usize> = (0..bricks.len()).collect();
    worst.sort_by(|&a, &b| {
        let o = |i: usize| bricks[i].mean_us - bricks[i].budget_us;
        o(b).total_cmp(&o(a))
    });
    worst.truncate(3);
    Snapshot {
        header: Header {
            model: "fixture-model (tests/fixture.gguf)".into(),
            model_detail: "llama · 4 layers · d256 · Q4_K".into(),
            device: "cpu · 2 threads".into(),
            timing: "cpu_timer".into(),
            numerics: "exact".into(),
            synthetic: true,
        },
        phase: Phase::Running,
        throughput: Throughput {
            tok_s_now: 1e6 / token * 1.02,
            tok_s_avg: 1e6 / token,
            recent_tok_s: (0..200).map(|i| 100.0 + 10.0 * ((i as f64) / 7.0).sin()).collect(),
            p50_ms: token / 1e3 * 0.98,
            p99_ms: token / 1e3 * 1.3,
            ttft_ms: Some(85.5),
            prefill_tok_s: Some(412.0),
            overhead_pct: Some(3.2),
            tokens: 1000,
            hist: bins(token, 32),
        },
        bricks,
        gaps_us: None,
        gaps_share_pct: None,
        other_us: other,
        other_share_pct: 100.0 * other / token,
        token_us: token,
        score: 71.4,
        grade: "C".into(),
        worst,
        peaks: Some(Peaks {
            bandwidth_gbps: 20.0,
            bandwidth_source: "cpu_read_probe".into(),
            compute_gflops: 150.0,
            compute_source: "cpu_fma_probe".into(),
            ..Peaks::default()
        }),
        text: "Once upon a time, in a land of tensors and caches, a small model decoded one token after another.\nIt measured every brick.".into(),
        restarts: 2,
        ctx_used: 187,
        ctx_size: 512,
        nonfinite_logits: 0,
        error: None,
        batch: batch_sweep(),
        timeline: Vec::new(),
        kernels_note: Some(
            "CPU: kernels named as chosen at run time; bricks are timed, kernels are not".into(),
        ),
    }
}

/// The kernels of a GPU step: each brick's kernels timed, with their launches, and the last
/// step's timeline (two layers of act_quant + product, with an idle gap before each product).
pub fn gpu_kernels(s: &mut Snapshot) {
    for b in &mut s.bricks {
        let mean = b.mean_us;
        b.kernels = vec![
            KernelLine {
                name: "act_quant".into(),
                reads: None,
                launch: Some("grid 4,1,1 block 256".into()),
                registers: Some(16),
                shared_bytes: Some(0),
                occupancy_pct: Some(100.0),
                launches: 4,
                mean_us: Some(0.2 * mean),
                p99_us: Some(0.3 * mean),
                share_pct: Some(20.0),
                gap_before_us: Some(0.9),
            },
            KernelLine {
                name: "mvf_q4_k".into(),
                reads: Some(format!("{}.weight Q4_K", b.id)),
                launch: Some("grid 132,1,1 block 128".into()),
                registers: Some(40),
                shared_bytes: Some(4096),
                occupancy_pct: Some(75.0),
                launches: 4,
                mean_us: Some(0.8 * mean),
                p99_us: Some(0.9 * mean),
                share_pct: Some(80.0),
                gap_before_us: Some(0.4),
            },
        ];
    }
    let mut t = 0.0;
    s.timeline = (0..8)
        .map(|i| {
            let (name, dur, gap) = if i % 2 == 0 {
                ("act_quant", 1.5, 0.8)
            } else {
                ("mvf_q4_k", 6.0, 2.5)
            };
            t += gap;
            let line = TimelineLine {
                brick: format!("qkv[{}]", i / 2),
                name: name.into(),
                start_us: t,
                dur_us: dur,
                gap_before_us: gap,
            };
            t += dur;
            line
        })
        .collect();
    s.kernels_note = None;
}

/// A `--batch 1,2,4,8,16` sweep with its last size not measured yet.
fn batch_sweep() -> BatchSweep {
    let row = |n: usize, tok_s: f64, shares: [f64; 4]| BatchRow {
        n,
        tok_s,
        tok_s_each: tok_s / n as f64,
        step_us: 1e6 * n as f64 / tok_s,
        shares: ["qkv", "rope+attention", "ffn_gate_up", "lm_head"]
            .into_iter()
            .zip(shares)
            .map(|(b, p)| (b.to_string(), p))
            .collect(),
    };
    BatchSweep {
        sizes: vec![1, 2, 4, 8, 16],
        rows: vec![
            row(1, 118.0, [14.0, 6.0, 41.0, 22.0]),
            row(2, 221.0, [13.5, 9.0, 39.0, 21.0]),
            row(4, 386.0, [12.8, 15.0, 36.0, 19.5]),
            row(8, 431.0, [10.2, 31.0, 29.0, 15.0]),
        ],
        error: None,
    }
}

fn host(i: u64) -> HostSample {
    HostSample {
        cpu_pct: Some(150.0 + (i % 7) as f64 * 5.0),
        rss_bytes: Some(300_000_000 + i * 1_000),
    }
}

/// Telemetry of a machine without a GPU driver.
pub fn no_gpu() -> TelemetryView {
    TelemetryView {
        gpu: Some(Err(
            "no GPU telemetry: NVML library libnvidia-ml.so.1 not found (no NVIDIA driver)".into(),
        )),
        history: (0..60)
            .map(|i| TelemetrySample {
                at_ms: i * 100,
                gpu: None,
                host: host(i),
            })
            .collect(),
    }
}

/// Telemetry of a machine with one GPU.
pub fn with_gpu() -> TelemetryView {
    TelemetryView {
        gpu: Some(Ok("NVIDIA H100 80GB HBM3".into())),
        history: (0..60)
            .map(|i| TelemetrySample {
                at_ms: i * 100,
                gpu: Some(GpuSample {
                    name: "NVIDIA H100 80GB HBM3".into(),
                    util_pct: Some(80 + (i % 5) as u32 * 4),
                    mem_util_pct: Some(55),
                    mem_used_bytes: Some(2_000_000_000 + i * 1_000_000),
                    mem_total_bytes: Some(85_000_000_000),
                    power_w: Some(310.0 + (i % 9) as f64 * 3.0),
                    power_limit_w: Some(700.0),
                    sm_clock_mhz: Some(1980),
                    mem_clock_mhz: Some(2619),
                    temperature_c: Some(48 + (i % 3) as u32),
                    pcie_tx_kbps: Some(1200),
                    pcie_rx_kbps: Some(300),
                }),
                host: host(i),
            })
            .collect(),
    }
}

pub fn app(view: View) -> App {
    App {
        view,
        selected: 8,
        ..App::default()
    }
}

/// Render one frame of `view` at `w`x`h` and return it as text (one line per row).
pub fn render(view: View, tele: &TelemetryView, w: u16, h: u16) -> String {
    let snap = snapshot();
    render_with(&snap, &app(view), tele, w, h)
}

pub fn render_with(snap: &Snapshot, app: &App, tele: &TelemetryView, w: u16, h: u16) -> String {
    render_panes(&[snap], app, tele, w, h)
}

/// Render one frame of several engines (`--device all`), one snapshot each, sharing `tele`.
pub fn render_panes(
    snaps: &[&Snapshot],
    app: &App,
    tele: &TelemetryView,
    w: u16,
    h: u16,
) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    let uis: Vec<Ui> = snaps
        .iter()
        .map(|snap| Ui {
            snap,
            tele,
            app,
            theme: Theme::PLAIN,
        })
        .collect();
    term.draw(|f| views::draw_panes(f, &uis)).expect("draw");
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
