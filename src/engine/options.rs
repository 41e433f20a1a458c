//! How an engine is asked to run, in the engine's own terms: the per-brick timing method and
//! the numerics. The command line turns its flags into these; nothing here knows about clap.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::brick::Source;

/// Per-brick timing method (docs/DESIGN.md "Measurement rules"). On the CPU only `Off` differs:
/// the other two both time bricks with the host clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// Every kernel stamps its start and end on the GPU's clock while the step replays as
    /// one CUDA graph.
    Events,
    /// The stream is synchronised around each brick, timed with the host clock.
    Sync,
    /// No per-brick timing.
    Off,
}

impl Timing {
    /// The span source this mode produces on the GPU (`None`: no spans).
    pub fn source(self) -> Option<Source> {
        match self {
            Timing::Events => Some(Source::GpuGlobaltimer),
            Timing::Sync => Some(Source::HostSync),
            Timing::Off => None,
        }
    }
}

/// How closely the GPU reproduces the CPU reference's floating-point results (docs/DESIGN.md
/// "Numerics"). The CPU engine is the reference and always `Exact`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Numerics {
    /// Kernels may reorder floating-point sums; held to llama.cpp's own CUDA-vs-CPU spread.
    #[default]
    Fast,
    /// Kernels reproduce the CPU engine's bits.
    Exact,
}

impl Numerics {
    /// `fast` or `exact`, as the flag, the report and the header spell it.
    pub fn name(self) -> &'static str {
        match self {
            Numerics::Fast => "fast",
            Numerics::Exact => "exact",
        }
    }
}

/// Which rows of an evaluated batch need logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsFor {
    Last,
    All,
}
