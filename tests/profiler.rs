//! The profiler through its library API: per-brick series are measured independently (a
//! brick's time is its own timer reading, not a share of the token), and the statistics add up.

mod common;

use std::sync::Arc;

use cbtop::brick::stats::correlation;
use cbtop::brick::BrickId;
use cbtop::engine::CpuEngine;
use cbtop::model::Model;
use cbtop::profiler::run::{run, Plan};
use cbtop::profiler::session::Session;

#[test]
fn qkv_and_attention_series_are_independent() {
    let path = common::fixture("conformance/models/conf-qwen2-Q4_K_M.gguf");
    let model = Arc::new(Model::load(&path).unwrap());
    let prompt = model.tokenizer.encode("The quick brown fox", true);
    let plan = Plan {
        warmup: 4,
        tokens: 100,
        profiled: true,
        measure_overhead: false,
    };
    let ctx = prompt.len() + plan.steps() + 1;
    let mut session = Session::new(CpuEngine::new(model.clone(), ctx), prompt);
    let r = run(&mut session, model.config.n_layers, plan, |_, _| {}).unwrap();
    let series = |b: BrickId| -> Vec<f64> {
        r.stats
            .brick(b.into())
            .unwrap()
            .recent_us
            .iter()
            .copied()
            .collect()
    };
    let (qkv, att) = (series(BrickId::Qkv), series(BrickId::Attention));
    assert_eq!(qkv.len(), 100);
    assert_eq!(att.len(), 100);
    let c = correlation(&qkv, &att);
    eprintln!("correlation(qkv, attention) over 100 tokens = {c:.3}");
    assert!(c < 0.99, "qkv and attention move together: r = {c}");
    // and each step's spans never exceed the step
    for s in &r.samples {
        let covered: u64 = s.spans.iter().map(|x| x.dur_ns).sum();
        assert!(covered <= s.total_ns);
        assert_eq!(s.spans.len(), 11 * 2 + 4);
    }
}
