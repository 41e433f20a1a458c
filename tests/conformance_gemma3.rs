//! gemma3's sliding window on the conformance model (tests/fixtures/conformance/shapes/
//! tiny-gemma3.toml; its logits against llama.cpp are checked in conformance.rs): the prompt
//! and its greedy steps cross the 4-token window, so the window must matter.

mod common;

use std::sync::Arc;

use cbtop::engine::{CpuEngine, LogitsFor};
use common::max_abs_diff;

/// The same model with its window widened past the context (plain causal attention on every
/// layer) moves the last prompt position's logits by more than the quantized bound, and a
/// window exactly as wide as the prompt changes no bit.
#[test]
fn the_sliding_window_changes_the_logits() {
    let (model, reference, _) = common::conformance_case("synth-gemma3-Q8_0");
    let prompt = common::ids(&reference["prompt_ids"]);
    let last = |m: Arc<cbtop::model::Model>| {
        CpuEngine::new(m, 64)
            .eval(&prompt, LogitsFor::All)
            .unwrap()
            .pop()
            .unwrap()
    };
    let windowed = last(model.clone());
    let with_window = |n: usize| {
        let case = common::synth_cases()
            .into_iter()
            .find(|c| c.name == "synth-gemma3-Q8_0")
            .unwrap();
        let mut m = common::synth_model(&case);
        assert_eq!(m.config.sliding_window, Some(4));
        m.config.sliding_window = Some(n);
        last(Arc::new(m))
    };
    let d = max_abs_diff(&windowed, &with_window(1 << 20));
    assert!(d > 0.05, "the window changed the last logits by only {d}");
    assert_eq!(
        common::bits(&with_window(prompt.len())),
        common::bits(&with_window(1 << 20)),
        "a window as wide as the prompt is no window"
    );
}
