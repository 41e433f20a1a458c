//! Snapshot tests of every view at 80x24 and 160x48 from fixed data (tests/tui_fixture), kept
//! in the top-level `snapshots/` folder. A changed frame fails the test (CI=true never writes).

mod tui_fixture;

use cbtop::tui::app::View;

fn check(name: &str, frame: String) {
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false, omit_expression => true}, {
        insta::assert_snapshot!(name, frame);
    });
}

#[test]
fn every_view_at_80x24_and_160x48() {
    let tele = tui_fixture::no_gpu();
    for v in View::ALL {
        for (w, h) in [(80, 24), (160, 48)] {
            check(
                &format!("{}_{w}x{h}", v.name()),
                tui_fixture::render(v, &tele, w, h),
            );
        }
    }
}

#[test]
fn gpu_kernel_drill_down_and_timeline() {
    let tele = tui_fixture::with_gpu();
    let mut snap = tui_fixture::snapshot();
    tui_fixture::gpu_kernels(&mut snap);
    for v in [View::Drill, View::Timeline] {
        for (w, h) in [(80, 24), (160, 48)] {
            let frame = tui_fixture::render_with(&snap, &tui_fixture::app(v), &tele, w, h);
            check(&format!("{}_gpu_kernels_{w}x{h}", v.name()), frame);
        }
    }
}

#[test]
fn gpu_panels_with_a_gpu() {
    let tele = tui_fixture::with_gpu();
    for v in [View::Main, View::Gpu] {
        for (w, h) in [(80, 24), (160, 48)] {
            check(
                &format!("{}_with_gpu_{w}x{h}", v.name()),
                tui_fixture::render(v, &tele, w, h),
            );
        }
    }
}

#[test]
fn without_a_gpu_the_panel_says_why_in_one_line() {
    let frame = tui_fixture::render(View::Main, &tui_fixture::no_gpu(), 160, 48);
    assert!(frame.contains("no GPU telemetry: NVML library libnvidia-ml.so.1 not found"));
    assert!(frame.contains("[synthetic weights]"));
}
