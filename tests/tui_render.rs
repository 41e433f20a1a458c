//! Rendering never panics, at any size from 20x8 to 250x80, in every view, with full data, with
//! an empty snapshot (start-up) and with an engine error; and the frame shows what it should.

mod tui_fixture;

use cbtop::tui::app::{App, View};
use cbtop::tui::snapshot::{Phase, Snapshot};

fn sizes() -> Vec<(u16, u16)> {
    let mut v = Vec::new();
    for w in (20..=250).step_by(23) {
        for h in (8..=80).step_by(9) {
            v.push((w, h));
        }
    }
    v.extend([(20, 8), (250, 80), (80, 24), (160, 48), (21, 9), (79, 23)]);
    v
}

#[test]
fn every_view_at_every_size_renders() {
    let full = tui_fixture::snapshot();
    let empty = Snapshot::default();
    let failed = Snapshot {
        phase: Phase::Stopped,
        error: Some("the context of 4 positions is full".into()),
        ..Snapshot::default()
    };
    let teles = [
        tui_fixture::no_gpu(),
        tui_fixture::with_gpu(),
        Default::default(),
    ];
    for (w, h) in sizes() {
        for v in View::ALL {
            for (snap, tele) in [
                (&full, &teles[0]),
                (&empty, &teles[2]),
                (&failed, &teles[1]),
            ] {
                let app = App {
                    view: v,
                    selected: 99,
                    ..App::default()
                };
                let frame = tui_fixture::render_with(snap, &app, tele, w, h);
                assert_eq!(frame.lines().count(), h as usize);
            }
        }
    }
}

#[test]
fn main_view_marks_bottleneck_and_shows_other() {
    let frame = tui_fixture::render(View::Main, &tui_fixture::no_gpu(), 160, 48);
    let snap = tui_fixture::snapshot();
    let b = &snap.bricks[snap.worst[0]].id;
    assert!(
        frame.lines().any(|l| l.contains(&format!("! {b}"))),
        "bottleneck {b} marked:\n{frame}"
    );
    assert!(frame.contains("other"));
    assert!(frame.contains("cpu_timer"));
    assert!(frame.contains("restarts 2"));
}

#[test]
fn drill_down_follows_the_selection() {
    let snap = tui_fixture::snapshot();
    let tele = tui_fixture::no_gpu();
    for sel in [0usize, 8, 14] {
        let app = App {
            view: View::Drill,
            selected: sel,
            ..App::default()
        };
        let frame = tui_fixture::render_with(&snap, &app, &tele, 160, 48);
        assert!(
            frame.contains(&format!("drill-down: {} (", snap.bricks[sel].id)),
            "{frame}"
        );
    }
}

/// A snapshot of a run on the GPU: header names the device and the CUDA timing source, and the
/// GPU panel and GPU detail show NVML's theoretical bandwidth beside the measured copy.
fn cuda_snapshot() -> Snapshot {
    let mut s = tui_fixture::snapshot();
    tui_fixture::gpu_kernels(&mut s);
    s.header.device = "cuda:0 NVIDIA H100 80GB HBM3 · sm_90 · 79 GiB".into();
    s.header.timing = "gpu_globaltimer".into();
    // Kernel timestamps measure the GPU's idle time between kernels: its own row.
    s.gaps_us = Some(123.4);
    s.gaps_share_pct = Some(6.5);
    let p = s.peaks.as_mut().unwrap();
    p.bandwidth_gbps = 2900.0;
    p.bandwidth_source = "d2d_copy".into();
    p.d2d_copy_gbps = Some(2900.0);
    p.nvml_bus_gbps = Some(3352.3);
    s
}

#[test]
fn gpu_run_shows_device_timing_and_both_bandwidth_peaks() {
    let snap = cuda_snapshot();
    let peaks = "peak bw: d2d copy 2900 GB/s (roofline) · NVML max 3352 GB/s";
    for view in [View::Main, View::Gpu] {
        let frame = tui_fixture::render_with(
            &snap,
            &tui_fixture::app(view),
            &tui_fixture::with_gpu(),
            200,
            60,
        );
        let head = frame.lines().next().unwrap();
        assert!(
            head.contains("cuda:0 NVIDIA H100") && head.contains("timing gpu_globaltimer"),
            "{head}"
        );
        assert!(frame.contains(peaks), "{view:?}:\n{frame}");
        if view == View::Main {
            let gaps = frame
                .lines()
                .find(|l| l.contains("gaps"))
                .unwrap_or_default();
            assert!(gaps.contains("123.4"), "no gaps row:\n{frame}");
        }
    }
    // Without NVML the detail view still says where brick times come from, and the copy peak.
    let frame = tui_fixture::render_with(
        &snap,
        &tui_fixture::app(View::Gpu),
        &tui_fixture::no_gpu(),
        200,
        60,
    );
    assert!(frame.contains("GPU engine (gpu_globaltimer)"), "{frame}");
    assert!(frame.contains(peaks), "{frame}");
}

#[test]
fn the_gpu_drill_down_lists_each_kernel_with_its_launch_and_time() {
    let snap = cuda_snapshot();
    let app = App {
        view: View::Drill,
        selected: 2,
        ..App::default()
    };
    let frame = tui_fixture::render_with(&snap, &app, &tui_fixture::with_gpu(), 160, 48);
    let b = &snap.bricks[2];
    for want in [
        "kernels (per token)",
        "act_quant",
        "mvf_q4_k",
        &format!("{}.weight Q4_K", b.id),
        "grid 132,1,1 block 128",
        "80.0%",
        "75%",
        "4K",
    ] {
        assert!(frame.contains(want), "{want:?} missing:\n{frame}");
    }
}

#[test]
fn the_timeline_shows_the_last_steps_kernels_and_the_idle_between() {
    let snap = cuda_snapshot();
    let app = App {
        view: View::Timeline,
        ..App::default()
    };
    let frame = tui_fixture::render_with(&snap, &app, &tui_fixture::with_gpu(), 160, 48);
    assert!(frame.contains("8 kernels"), "{frame}");
    assert!(
        frame.contains("qkv[3]") && frame.contains("mvf_q4_k"),
        "{frame}"
    );
    assert!(frame.contains('░') && frame.contains('█'), "{frame}");
    // Scrolled past the end it shows the last page, not nothing.
    let app = App {
        timeline_top: 1000,
        ..app
    };
    let frame = tui_fixture::render_with(&snap, &app, &tui_fixture::with_gpu(), 160, 48);
    assert!(frame.contains("qkv[3]"), "{frame}");
    // On the CPU it says why there is no timeline.
    let cpu = tui_fixture::render(View::Timeline, &tui_fixture::no_gpu(), 160, 48);
    assert!(cpu.contains("kernels are not"), "{cpu}");
}

/// `--device all` on two GPUs: the main view shows each GPU's engine in a column of its own;
/// other views show the GPU `Tab` chose, and every size renders.
#[test]
fn two_gpus_side_by_side_and_tab_picks_the_detail() {
    let mut a = cuda_snapshot();
    let mut b = cuda_snapshot();
    a.header.device = "cuda:0 H100-A".into();
    b.header.device = "cuda:1 H100-B".into();
    b.bricks[0].id = "embed_b".into();
    let tele = tui_fixture::with_gpu();
    let mut app = App {
        panes: 2,
        ..tui_fixture::app(View::Main)
    };
    let frame = tui_fixture::render_panes(&[&a, &b], &app, &tele, 200, 50);
    let head = frame.lines().next().unwrap();
    let (l, r) = (head.find("cuda:0 H100-A"), head.find("cuda:1 H100-B"));
    assert!(
        matches!((l, r), (Some(l), Some(r)) if l < r),
        "side by side:\n{frame}"
    );
    assert!(frame.contains("Tab next GPU"), "{frame}");
    app.view = View::Drill;
    app.selected = 0;
    for (pane, id) in [(0, "embed"), (1, "embed_b")] {
        app.pane = pane;
        let frame = tui_fixture::render_panes(&[&a, &b], &app, &tele, 200, 50);
        assert!(
            frame.contains(&format!("drill-down: {id} (")),
            "pane {pane}:\n{frame}"
        );
    }
    for (w, h) in sizes() {
        for v in View::ALL {
            app.view = v;
            let frame = tui_fixture::render_panes(&[&a, &b], &app, &tele, w, h);
            assert_eq!(frame.lines().count(), h as usize);
        }
    }
}
