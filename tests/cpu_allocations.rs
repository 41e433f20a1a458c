//! A CPU decode step allocates a fixed handful of buffers (the logits it hands back), not one
//! per layer or per product: the hot path allocates nothing per token (docs/engine.md). The
//! allocator of this test binary counts every allocation; this file holds one test, so no
//! other test allocates while it counts.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cbtop::engine::{CpuEngine, LogitsFor, Numerics};
use cbtop::model::Model;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; the counter is atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

#[test]
fn a_decode_step_allocates_only_the_logits_it_returns() {
    // Two threads, so the products run over the pool as they do in use.
    cbtop::engine::cpu::pool::init(2);
    for (name, numerics) in [
        ("conf-qwen2-Q4_K_M", Numerics::Exact),
        ("conf-qwen2-Q4_1", Numerics::Exact),
        ("conf-llama-Q8_0", Numerics::Exact),
        ("conf-qwen2-Q5_0", Numerics::Exact),
        // The repacked Q4_0 and Q4_1 rows of `fast` numerics.
        ("conf-qwen2-Q4_0", Numerics::Fast),
        ("conf-qwen2-Q4_1", Numerics::Fast),
    ] {
        let path = common::fixture(&format!("conformance/models/{name}.gguf"));
        let model = Arc::new(Model::load(&path).unwrap());
        let mut engine = CpuEngine::new(model.clone(), 64).with_numerics(numerics);
        engine.eval(&[1, 2, 3], LogitsFor::Last).unwrap();
        // Warm-up steps: buffers that grow to their size once.
        for _ in 0..3 {
            engine.eval(&[5], LogitsFor::Last).unwrap();
        }
        // The fewest over three rounds: a buffer a pool thread grows once, the first time the
        // work-stealing hands it a task it had not run yet, lands in one round only; an
        // allocation per token or per product lands in every round.
        let steps = 10;
        let per_step = (0..3)
            .map(|_| {
                let before = ALLOCATIONS.load(Ordering::Relaxed);
                for _ in 0..steps {
                    engine.eval(&[5], LogitsFor::Last).unwrap();
                }
                (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / steps as f64
            })
            .fold(f64::INFINITY, f64::min);
        let (layers, products) = (model.config.n_layers, 4 * model.config.n_layers);
        eprintln!("{name}: {per_step} allocations per decode step ({layers} layers)");
        // The logits row and the vectors around it; one allocation per product would add
        // `products` more.
        assert!(
            per_step <= 8.0,
            "{name}: {per_step} allocations per decode step ({layers} layers, {products} products)"
        );
    }
}
