//! The level below a brick on the GPU (`--timing events`): each brick's kernels come from the
//! launches the engine made (the launch log), not from a table. On a conformance model (Q4_1,
//! every layer alike) under both numerics: in every stamped step a brick's kernels add up to the brick to the nanosecond;
//! every kernel is named as the kernel table looked it up, with its launch shape and the
//! compiled function's resources; the product bricks read the model's own tensors with the
//! file's types, one launch per layer; and the headless report and trace carry the same. Skips
//! without a GPU.

mod common;
mod gpu;

use std::collections::BTreeMap;
use std::sync::Arc;

use cbtop::brick::stats::{Stats, TokenSample};
use cbtop::brick::{Brick, BrickId};
use cbtop::engine::cuda::{CudaEngine, Timing};
use cbtop::engine::Numerics;
use cbtop::model::weights::tensor_label;
use cbtop::model::Model;
use cbtop::profiler::kernels::rows;
use cbtop::profiler::session::Session;
use serde_json::Value;

/// Every (brick, layer)'s kernels sum to its span, to the nanosecond (both come from the
/// same stamps).
fn kernels_add_up(step: &TokenSample, label: &str) {
    let mut spans: BTreeMap<String, u64> = BTreeMap::new();
    for s in &step.spans {
        *spans
            .entry(format!("{}@{:?}", s.brick, s.layer))
            .or_default() += s.dur_ns;
    }
    let mut kernels: BTreeMap<String, u64> = BTreeMap::new();
    for k in &step.kernels {
        let t = k.timed.expect("GPU kernels are timed");
        *kernels
            .entry(format!("{}@{:?}", k.brick, k.layer))
            .or_default() += t.dur_ns;
    }
    assert_eq!(spans, kernels, "{label}: kernels per brick and layer");
}

/// Q4_1 in every layer, so each product kernel runs once per layer.
fn model_path() -> std::path::PathBuf {
    common::fixture("conformance/models/conf-qwen2-Q4_1.gguf")
}

#[test]
fn each_bricks_kernels_are_its_launches_and_add_up_to_it() {
    let Some(g) = gpu::gpu("gpu_kernel_drill") else {
        return;
    };
    let model = Arc::new(Model::load(&model_path()).unwrap());
    let (w, layers) = (&model.weights, model.config.n_layers);
    let prompt = model.tokenizer.encode("The kernels below a brick", true);
    for numerics in [Numerics::Exact, Numerics::Fast] {
        let label = format!("{numerics:?}");
        let engine = CudaEngine::new(model.clone(), &g, 256, Timing::Events, numerics).unwrap();
        let mut session = Session::new(engine, prompt.clone());
        session.prefill().unwrap();
        let mut stats = Stats::new(layers);
        for i in 0..8 {
            // Stamped steps replayed from the graph and the first one captured, unstamped
            // steps between.
            let profiled = i % 4 != 3;
            let s = session.step_then(profiled, Some(i % 4 != 2)).unwrap();
            if !profiled {
                assert!(
                    s.kernels.is_empty(),
                    "{label}: an unstamped step names none"
                );
                continue;
            }
            assert!(!s.kernels.is_empty(), "{label}: step {i} has kernels");
            kernels_add_up(&s, &format!("{label} step {i}"));
            stats.add(&s);
        }
        let cat = session.engine().kernels();
        for k in cat.entries() {
            assert!(!k.name.starts_with('('), "{label}: unnamed kernel {k:?}");
            let launch = k.launch.expect("a GPU launch shape");
            assert!(
                launch.block > 0 && launch.grid.iter().all(|&d| d > 0),
                "{k:?}"
            );
            let r = k.resources.expect("the function's attributes");
            assert!(r.registers_per_thread > 0, "{k:?}");
            assert!(
                r.occupancy_percent > 0.0 && r.occupancy_percent <= 100.0,
                "{k:?}"
            );
        }
        // Each product brick reads the model's tensors with the file's types, each kernel
        // launched once per layer (the model's layers are alike).
        let l0 = &w.layers[0];
        let fused = |a: BrickId, b: BrickId| Brick::Fused(Box::leak(Box::new([a, b])));
        let products: [(Brick, Vec<&cbtop::model::weights::Mat>); 4] = [
            (BrickId::Qkv.into(), vec![&l0.wq, &l0.wk, &l0.wv]),
            (fused(BrickId::AttnOut, BrickId::AttnResidual), vec![&l0.wo]),
            (BrickId::FfnGateUp.into(), vec![&l0.w_gate, &l0.w_up]),
            (
                fused(BrickId::FfnDown, BrickId::FfnResidual),
                vec![&l0.w_down],
            ),
        ];
        for (brick, mats) in products {
            let rows = rows(&stats, &cat, brick);
            assert!(!rows.is_empty(), "{label}: {brick} has kernels");
            let reads: String = rows
                .iter()
                .filter_map(|r| r.info.reads.clone())
                .collect::<Vec<_>>()
                .join(" | ");
            for m in mats {
                let want = tensor_label(&m.name, m.ty);
                assert!(
                    reads.contains(&want),
                    "{label}: {brick} reads {reads:?}, not {want}"
                );
            }
            for r in &rows {
                assert_eq!(r.launches as usize, layers, "{label}: {brick} {r:?}");
            }
            let share: f64 = rows.iter().map(|r| r.share_percent.unwrap()).sum();
            assert!(
                (share - 100.0).abs() < 1e-6,
                "{label}: {brick} shares {share}"
            );
        }
        let head = rows(&stats, &cat, BrickId::LmHead.into());
        let want = tensor_label(&w.output.name, w.output.ty);
        assert!(
            head.iter()
                .any(|r| r.info.reads.as_deref() == Some(want.as_str())),
            "{label}: lm_head reads {want}: {head:?}"
        );
        for r in &head {
            assert_eq!(r.launches, 1, "{label}: {r:?}");
        }
        eprintln!(
            "{label}: {} kernels in the catalogue; qkv: {:?}",
            cat.entries().len(),
            rows(&stats, &cat, BrickId::Qkv.into())
                .iter()
                .map(|r| (r.info.name.as_str(), r.mean_us))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn the_gpu_report_and_trace_carry_each_bricks_kernels() {
    let Some(g) = gpu::gpu("gpu_kernel_drill::report") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("cbtop-kernel-drill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, trace) = (dir.join("r.json"), dir.join("t.json"));
    let m = model_path().display().to_string();
    let device = format!("cuda:{}", g.ordinal);
    let o = common::cbtop(&[
        "--headless",
        "--ci",
        "--model-path",
        &m,
        "--device",
        &device,
        "--timing",
        "events",
        "--tokens",
        "8",
        "--warmup",
        "2",
        "--format",
        "json",
        "--output",
        json.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for b in r["bricks"].as_array().unwrap() {
        let ks = b["kernels"].as_array().unwrap();
        assert!(!ks.is_empty(), "{} lists its kernels", b["id"]);
        let sum: f64 = ks.iter().map(|k| k["mean_us"].as_f64().unwrap()).sum();
        let mean = b["mean_us"].as_f64().unwrap();
        assert!(
            (sum - mean).abs() <= 1e-6 * mean.max(1.0),
            "{}: {sum} vs {mean}",
            b["id"]
        );
        for k in ks {
            assert!(k["registers_per_thread"].as_u64().unwrap() > 0, "{k}");
            assert_eq!(k["grid"].as_array().unwrap().len(), 3, "{k}");
        }
    }
    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let kernels = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .count();
    assert!(kernels > 0, "the trace has kernel slices");
    std::fs::remove_dir_all(&dir).unwrap();
}
