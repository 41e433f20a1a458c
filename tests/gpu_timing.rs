//! Calibration of the GPU's per-brick timing (kernel timestamps, `--timing events`): a CUDA
//! graph of spin kernels of known length (SM clock cycles over the rate CUDA events measure on
//! one long spin), 2 µs to 500 µs, timed exactly as a decode step is. Each brick must come out
//! within ±2% + 0.5 µs of its known length; bricks + gaps must equal the stamped window, and
//! the host's step time may exceed it by at most 2% (the median replay: the host's own
//! scheduling hiccups are not the timing method's; the mean is printed too); the `sync` method
//! (stream sync + host clock around each brick) must agree within 10% on the long bricks.
//! Skips without a GPU.

mod gpu;

use cbtop::brick::{Brick, BrickId};
use cbtop::engine::cuda::calibrate::{SpinBrick, TimingCheck};

#[test]
fn spin_kernels_of_known_length_are_timed_to_their_length() {
    let Some(g) = gpu::gpu("gpu_timing") else {
        return;
    };
    let mut t = TimingCheck::new(&g).unwrap();
    // The SM clock's rate from CUDA events on a ~20 ms spin (warmed up first).
    t.cycles_per_us(2_000_000).unwrap();
    let rate = t.cycles_per_us(40_000_000).unwrap();
    let us = |x: f64| (x * rate) as i64;
    // Distinct brick ids so each row is one brick; one brick of two kernels.
    let plan: Vec<(BrickId, Vec<f64>)> = vec![
        (BrickId::Embed, vec![2.0]),
        (BrickId::AttnNorm, vec![5.0]),
        (BrickId::Qkv, vec![10.0, 10.0]),
        (BrickId::Rope, vec![20.0]),
        (BrickId::Attention, vec![50.0]),
        (BrickId::AttnOut, vec![100.0]),
        (BrickId::FfnNorm, vec![200.0]),
        (BrickId::FfnGateUp, vec![500.0]),
        (BrickId::FfnDown, vec![500.0]),
        (BrickId::LmHead, vec![500.0]),
    ];
    let bricks: Vec<SpinBrick> = plan
        .iter()
        .map(|(b, d)| SpinBrick {
            brick: Brick::from(*b),
            cycles: d.iter().map(|&x| us(x)).collect(),
        })
        .collect();
    let step = t.capture(&bricks).unwrap();
    let reps = 40;
    let mut sums = vec![0f64; bricks.len()];
    let (mut host, mut window, mut covered) = (0f64, 0f64, 0f64);
    let mut other_frac = Vec::with_capacity(reps);
    t.replay(&step).unwrap(); // warm-up
    for _ in 0..reps {
        let r = t.replay(&step).unwrap();
        assert_eq!(r.stamps.bricks.len(), bricks.len());
        let busy: u64 = r.stamps.bricks.iter().map(|b| b.busy_ns).sum();
        assert_eq!(
            busy + r.stamps.gaps_ns,
            r.stamps.window_ns,
            "bricks + gaps = window"
        );
        assert!(
            r.host_ns >= r.stamps.window_ns,
            "the host saw less than the GPU worked"
        );
        for (s, b) in sums.iter_mut().zip(&r.stamps.bricks) {
            *s += b.busy_ns as f64 / 1e3;
        }
        other_frac.push((r.host_ns - r.stamps.window_ns) as f64 / r.host_ns as f64);
        host += r.host_ns as f64 / 1e3;
        window += r.stamps.window_ns as f64 / 1e3;
        covered += busy as f64 / 1e3;
    }
    let n = reps as f64;
    let synced: Vec<f64> = {
        let mut acc = vec![0f64; bricks.len()];
        for _ in 0..10 {
            for (a, ns) in acc.iter_mut().zip(t.synced(&bricks).unwrap()) {
                *a += ns as f64 / 1e3 / 10.0;
            }
        }
        acc
    };
    eprintln!("SM clock {rate:.1} cycles/us (CUDA events on one 40M-cycle spin)");
    eprintln!(
        "{:<12}{:>10}{:>12}{:>9}{:>12}{:>9}",
        "brick", "known us", "stamped us", "err %", "sync us", "diff %"
    );
    let mut failures = Vec::new();
    for (i, (b, d)) in plan.iter().enumerate() {
        let known: f64 = d.iter().sum();
        let got = sums[i] / n;
        let err = 100.0 * (got - known) / known;
        let diff = 100.0 * (synced[i] - got) / got;
        eprintln!(
            "{:<12}{:>10.1}{:>12.2}{:>9.2}{:>12.2}{:>9.2}",
            b.name(),
            known,
            got,
            err,
            synced[i],
            diff
        );
        if (got - known).abs() > 0.02 * known + 0.5 * d.len() as f64 {
            failures.push(format!("{}: {got:.2} us, known {known:.1} us", b.name()));
        }
        if known > 100.0 && diff.abs() > 10.0 {
            failures.push(format!(
                "{}: sync {:.2} us vs stamped {got:.2} us",
                b.name(),
                synced[i]
            ));
        }
    }
    let (host, window, covered) = (host / n, window / n, covered / n);
    eprintln!(
        "per replay: host {host:.1} us, stamped window {window:.1} us (bricks {covered:.1} + gaps {:.1}), other {:.1} us ({:.2}%)",
        window - covered,
        host - window,
        100.0 * (host - window) / host
    );
    other_frac.sort_by(f64::total_cmp);
    let median = other_frac[reps / 2];
    eprintln!(
        "other in the median replay: {:.2}% of its step",
        100.0 * median
    );
    if median > 0.02 {
        failures.push(format!(
            "other is {:.2}% of the median replay's step, over 2%",
            100.0 * median
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
