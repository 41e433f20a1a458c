//! Shared by the GPU tests: which GPU to test on, or why they skip. CI has no GPU, so without
//! one every GPU test prints its reason and passes; with `CBTOP_TEST_DEVICE=cuda` a missing GPU
//! is a failure instead (so a device run cannot skip silently). `CBTOP_TEST_DEVICE=cpu` skips.
#![allow(dead_code)]

use cbtop::engine::cuda::{probe, GpuDesc};

/// The GPU to test on, or `None` (reason printed) when the GPU tests skip.
pub fn gpu(test: &str) -> Option<GpuDesc> {
    let want = std::env::var("CBTOP_TEST_DEVICE").unwrap_or_default();
    if want == "cpu" {
        eprintln!("{test}: skipped: CBTOP_TEST_DEVICE=cpu");
        return None;
    }
    match probe().gpu(0) {
        Ok(g) => Some(g.clone()),
        Err(reason) if want == "cuda" => panic!("{test}: CBTOP_TEST_DEVICE=cuda but {reason}"),
        Err(reason) => {
            eprintln!("{test}: skipped: no usable GPU ({reason})");
            None
        }
    }
}
