//! The kernels below a brick, as the backend ran them: what each one is (name, the tensor it
//! read, its launch shape and the compiled function's resources) and, where the backend
//! times kernels, when each launch ran. A backend interns each distinct kernel in a
//! `Catalogue` as it runs it and hands `KernelSpan`s to the `Recorder` beside the brick spans,
//! so the drill-down lists what ran rather than what a table says should.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::id::Brick;

/// A GPU launch's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct LaunchShape {
    pub grid: [u32; 3],
    /// Threads per block (blocks are one-dimensional).
    pub block: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared_bytes: u32,
}

/// The compiled function's resources, from the module's function attributes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Resources {
    pub registers_per_thread: u32,
    pub static_shared_bytes: u32,
    /// Resident threads per SM the launch's block and shared memory allow, over the SM's
    /// thread limit (the driver's occupancy calculator), percent.
    pub occupancy_percent: f64,
}

/// One distinct kernel a backend ran: the same function at the same launch shape on the same
/// tensor (a tensor's name without its layer, so each layer's launch is the same entry).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelInfo {
    /// The function's name (as in kernels/*.cu on the GPU; the CPU kernel and its ISA path on
    /// the CPU).
    pub name: String,
    /// The tensor it read and its GGML type, where it reads one.
    pub reads: Option<String>,
    /// GPU launches only.
    pub launch: Option<LaunchShape>,
    pub resources: Option<Resources>,
}

/// A key for a catalogue entry (the resources follow from the function and shape).
type Key = (String, Option<String>, Option<LaunchShape>);

/// The distinct kernels a backend has run, each with a stable index.
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    entries: Vec<KernelInfo>,
    index: HashMap<Key, u32>,
}

impl Catalogue {
    /// The index of `info` (added if new).
    pub fn intern(&mut self, info: KernelInfo) -> u32 {
        let key = (info.name.clone(), info.reads.clone(), info.launch);
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.entries.len() as u32;
        self.entries.push(info);
        self.index.insert(key, i);
        i
    }

    pub fn get(&self, i: u32) -> Option<&KernelInfo> {
        self.entries.get(i as usize)
    }

    pub fn entries(&self) -> &[KernelInfo] {
        &self.entries
    }
}

/// One execution of a catalogue kernel inside a brick of one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelSpan {
    pub brick: Brick,
    pub layer: Option<u32>,
    /// Index in the backend's catalogue.
    pub kernel: u32,
    /// Start, nanoseconds since the recorder's origin, and run time; None where the backend
    /// names its kernels without timing them one by one (the CPU).
    pub timed: Option<KernelTime>,
}

/// When a kernel ran, on the clock its backend stamps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelTime {
    pub start_ns: u64,
    pub dur_ns: u64,
    /// The device's idle time between the end of the kernels before it and its start.
    pub gap_before_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, reads: Option<&str>, grid: u32) -> KernelInfo {
        KernelInfo {
            name: name.into(),
            reads: reads.map(Into::into),
            launch: Some(LaunchShape {
                grid: [grid, 1, 1],
                block: 128,
                dynamic_shared_bytes: 0,
            }),
            resources: None,
        }
    }

    #[test]
    fn the_same_kernel_shape_and_tensor_is_one_entry() {
        let mut c = Catalogue::default();
        let a = c.intern(info("mvf_q4_k", Some("attn_q.weight Q4_K"), 8));
        let b = c.intern(info("mvf_q4_k", Some("attn_q.weight Q4_K"), 8));
        let other_tensor = c.intern(info("mvf_q4_k", Some("attn_k.weight Q4_K"), 8));
        let other_grid = c.intern(info("mvf_q4_k", Some("attn_q.weight Q4_K"), 16));
        assert_eq!(a, b);
        assert_eq!([a, other_tensor, other_grid], [0, 1, 2]);
        assert_eq!(c.entries().len(), 3);
        assert_eq!(
            c.get(1).unwrap().reads.as_deref(),
            Some("attn_k.weight Q4_K")
        );
        assert_eq!(c.get(2).unwrap().launch.unwrap().grid, [16, 1, 1]);
    }
}
