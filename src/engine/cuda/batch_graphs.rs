//! The batch step's CUDA graphs (`CudaBatch`): one captured step per batch size (and per
//! greedy picks or logits, stamped or not), replayed on later steps of that size. A graph
//! bakes in the device addresses and sizes it was captured with, so each holds a record of
//! them (`Named`) and is replayed only while the engine's buffers are still those: a batch
//! step's lookup drops every graph when one has been reallocated, so a replay on freed memory
//! cannot happen whatever the caller forgot to clear.

use std::collections::HashMap;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::env_counts::env_count;

/// What a captured batch step is, beyond the device data it reads on each replay (tokens, and
/// each row's sequence and position): its launches are fixed by these alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct BatchKey {
    /// Rows (sequences) of the step: every launch's grid and every product's kernel follow it.
    pub(super) rows: usize,
    /// Greedy picks on the device (else the logits are copied back).
    pub(super) pick: bool,
    /// The kernels stamp themselves (`Timing::Events` while recording).
    pub(super) stamped: bool,
    /// Attention takes the grouped tensor-core kernel (every row's context long enough).
    pub(super) grouped: bool,
}

/// The device buffers (address and length) and the host values baked into a captured step's
/// launches, in a fixed order; two are equal when a graph captured on one may replay on the
/// other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Named(Vec<u64>);

impl Named {
    /// A device buffer the launches name.
    pub(super) fn slice<T>(&mut self, s: &CudaStream, b: &CudaSlice<T>) -> &mut Self {
        let (p, _sync) = b.device_ptr(s);
        self.buffer(p, b.len())
    }

    /// A buffer by its address and length.
    pub(super) fn buffer(&mut self, ptr: u64, len: usize) -> &mut Self {
        self.0.extend([ptr, len as u64]);
        self
    }

    /// A host value the launches take as an argument (a capacity, a stride).
    pub(super) fn value(&mut self, v: u64) -> &mut Self {
        self.0.push(v);
        self
    }
}

/// Captured batch steps by key, all captured on the same buffers (`named`).
pub(super) struct BatchGraphs<G> {
    named: Named,
    steps: HashMap<BatchKey, G>,
}

impl<G> Default for BatchGraphs<G> {
    fn default() -> Self {
        BatchGraphs {
            named: Named::default(),
            steps: HashMap::new(),
        }
    }
}

impl<G> BatchGraphs<G> {
    /// Drop every captured step (the buffers they name are about to go or be replaced).
    pub(super) fn clear(&mut self) {
        self.steps.clear();
        self.named = Named::default();
    }

    /// Captured steps held.
    pub(super) fn len(&self) -> usize {
        self.steps.len()
    }

    /// The step captured for `key` on the buffers `now` names. When those are not the
    /// buffers the held steps were captured on, every held step is dropped first.
    pub(super) fn get(&mut self, key: BatchKey, now: &Named) -> Option<&G> {
        self.forget_unless(now);
        self.steps.get(&key)
    }

    /// The step held for `key`, without checking the buffers: for what the host kept of it
    /// (its stamps' owners) after `get` found it for a replay.
    pub(super) fn peek(&self, key: BatchKey) -> Option<&G> {
        self.steps.get(&key)
    }

    /// Hold `step`, captured for `key` on the buffers `on` names (the others dropped when
    /// captured on other buffers).
    pub(super) fn insert(&mut self, key: BatchKey, on: Named, step: G) {
        self.forget_unless(&on);
        self.named = on;
        self.steps.insert(key, step);
    }

    fn forget_unless(&mut self, now: &Named) {
        if self.named != *now {
            self.clear();
        }
    }
}

/// Whether batch steps replay captured graphs: `CBTOP_BATCH_GRAPH` unset or 1; 0 launches
/// every kernel from the host each step (the A/B switch). Another value is refused by name.
pub(super) fn batch_graph_on() -> Result<bool, String> {
    let what = "0 (host-launched batch steps) or 1 (one CUDA graph per batch size)";
    match env_count("CBTOP_BATCH_GRAPH", 0, what)? {
        None | Some(1) => Ok(true),
        Some(0) => Ok(false),
        Some(_) => Err(format!(
            "CBTOP_BATCH_GRAPH={:?}: expected {what}",
            std::env::var("CBTOP_BATCH_GRAPH").unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rows: usize) -> BatchKey {
        BatchKey {
            rows,
            pick: true,
            stamped: false,
            grouped: false,
        }
    }

    fn named(ptr: u64, len: usize, cap: u64) -> Named {
        let mut n = Named::default();
        n.buffer(ptr, len).value(cap);
        n
    }

    #[test]
    fn a_step_is_found_by_its_size_picks_and_stamps() {
        let on = named(0x1000, 64, 64);
        let mut g = BatchGraphs::default();
        g.insert(key(3), on.clone(), "three");
        g.insert(key(2), on.clone(), "two");
        g.insert(
            BatchKey {
                stamped: true,
                ..key(3)
            },
            on.clone(),
            "three stamped",
        );
        assert_eq!(g.get(key(3), &on), Some(&"three"));
        assert_eq!(g.get(key(2), &on), Some(&"two"));
        assert_eq!(g.get(key(1), &on), None);
        let logits = BatchKey {
            pick: false,
            ..key(3)
        };
        assert_eq!(g.get(logits, &on), None);
        let stamped = BatchKey {
            stamped: true,
            ..key(3)
        };
        assert_eq!(g.get(stamped, &on), Some(&"three stamped"));
        assert_eq!(g.peek(stamped), Some(&"three stamped"));
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn other_buffers_drop_every_step() {
        let on = named(0x1000, 64, 64);
        let mut g = BatchGraphs::default();
        g.insert(key(3), on.clone(), 3);
        g.insert(key(2), on.clone(), 2);
        // A buffer moved, grew, or a baked value changed: nothing replays, nothing is kept.
        for other in [
            named(0x2000, 64, 64),
            named(0x1000, 128, 64),
            named(0x1000, 64, 128),
        ] {
            let mut h = BatchGraphs::default();
            h.insert(key(3), on.clone(), 3);
            assert_eq!(h.get(key(3), &other), None);
            assert_eq!(h.len(), 0);
            assert_eq!(h.get(key(3), &on), None, "dropped, not set aside");
        }
        // A capture on new buffers drops the steps captured on the old ones.
        let moved = named(0x2000, 64, 64);
        g.insert(key(1), moved.clone(), 1);
        assert_eq!(g.len(), 1);
        assert_eq!(g.get(key(1), &moved), Some(&1));
        assert_eq!(g.get(key(3), &moved), None);
        g.clear();
        assert_eq!(g.len(), 0);
        assert_eq!(g.get(key(1), &moved), None);
    }

    #[test]
    fn nothing_captured_replays_on_an_empty_record() {
        // A fresh holder has captured nothing, whatever the buffers.
        let mut g: BatchGraphs<u8> = BatchGraphs::default();
        assert_eq!(g.get(key(1), &Named::default()), None);
        assert_eq!(g.get(key(1), &named(1, 1, 1)), None);
    }

    #[test]
    fn the_switch_is_on_unless_zero_and_refuses_other_values() {
        // The only test that sets CBTOP_BATCH_GRAPH in this binary, all cases in one test so
        // no other thread reads it meanwhile.
        std::env::remove_var("CBTOP_BATCH_GRAPH");
        assert_eq!(batch_graph_on(), Ok(true));
        std::env::set_var("CBTOP_BATCH_GRAPH", "1");
        assert_eq!(batch_graph_on(), Ok(true));
        std::env::set_var("CBTOP_BATCH_GRAPH", "0");
        assert_eq!(batch_graph_on(), Ok(false));
        for bad in ["2", "off", ""] {
            std::env::set_var("CBTOP_BATCH_GRAPH", bad);
            let err = batch_graph_on().unwrap_err();
            assert!(
                err.starts_with(&format!("CBTOP_BATCH_GRAPH={bad:?}")),
                "{err}"
            );
        }
        std::env::remove_var("CBTOP_BATCH_GRAPH");
    }
}
