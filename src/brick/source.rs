//! Where a number came from (docs/DESIGN.md "Measurement rules"): every time shown is labelled by
//! its source, so a reader knows what was measured and what was computed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// CUDA event pairs around the brick, resolved once per token (no backend records it
    /// now; kept so reports written with it still read back for `compare`).
    CudaEvent,
    /// Each kernel's first-block start and last-block end on the GPU's `%globaltimer`,
    /// written by the kernel itself while the step replays as one CUDA graph; a brick is the
    /// sum of its kernels' run times.
    GpuGlobaltimer,
    /// Stream synchronise + host clock around the brick.
    HostSync,
    /// Host monotonic clock around CPU work.
    CpuTimer,
    /// Computed from measured values (e.g. GB/s from bytes and a measured time).
    Derived,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::CudaEvent => "cuda_event",
            Source::GpuGlobaltimer => "gpu_globaltimer",
            Source::HostSync => "host_sync",
            Source::CpuTimer => "cpu_timer",
            Source::Derived => "derived",
        }
    }
}
