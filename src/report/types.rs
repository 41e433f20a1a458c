//! The headless report, `schema_version` 1 (docs/DESIGN.md "Headless report"). Plain serde data:
//! the profiler fills it, `cbtop schema` derives its JSON Schema from these types, and the
//! formats, gates and `compare` read it back. Field names are the public contract: renaming
//! one is a schema version bump.

use std::collections::BTreeMap;

use schemars::JsonSchema;

pub use crate::profiler::batch::{BatchBrick, BatchPoint};
use serde::{Deserialize, Serialize};

pub use crate::engine::cuda::GpuInfo;
use crate::engine::Numerics;

/// The version of this layout; bump on any breaking change.
pub const SCHEMA_VERSION: u32 = 1;

pub use crate::brick::Source;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Status {
    #[serde(rename = "PASS")]
    Pass,
    #[serde(rename = "FAIL")]
    Fail,
    /// Stopped by SIGINT/SIGTERM: the report holds the steps measured so far
    /// (`config.measured_tokens`) and no gate was evaluated.
    #[serde(rename = "INTERRUPTED")]
    Interrupted,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    pub schema_version: u32,
    pub cbtop_version: String,
    /// UTC, RFC 3339.
    pub timestamp: String,
    pub model: ModelInfo,
    pub hardware: Hardware,
    pub config: RunConfig,
    pub throughput: Throughput,
    /// One row per brick (fused bricks once, under their fused id), in pipeline order.
    pub bricks: Vec<BrickReport>,
    /// Mean GPU idle time per token between kernels (launch gaps), outside every brick,
    /// microseconds; null where it is not measured (CPU, `sync` timing).
    #[serde(default)]
    pub gaps_us: Option<f64>,
    /// `gaps_us` as a share of the mean token time.
    #[serde(default)]
    pub gaps_share_percent: Option<f64>,
    /// Mean time per token covered by no brick and no gap (host work, copies), microseconds.
    pub other_us: f64,
    /// `other_us` as a share of the mean token time.
    pub other_share_percent: f64,
    /// Mean decode-step time (bricks + gaps + other), microseconds.
    pub token_us: f64,
    /// The prompt evaluated brick by brick (absent when per-brick timing is off).
    #[serde(default)]
    pub prefill: Option<PrefillReport>,
    pub bottleneck: Option<Bottleneck>,
    /// Time-weighted mean of the brick scores, 0..100.
    pub score: f64,
    pub grade: String,
    pub telemetry: Telemetry,
    pub gates: Vec<Gate>,
    /// Checks every run makes whatever the gates (e.g. `finite_logits`); a failed one makes the
    /// status FAIL.
    #[serde(default)]
    pub assertions: Vec<Assertion>,
    /// Batched decode (`--batch`): one entry per batch size, on the CPU engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Vec<BatchPoint>>,
    /// `--device all`: every GPU's own report, in ordinal order (each judged by the gates on
    /// its own). The top level repeats the first GPU's figures and carries the worst status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<Report>>,
    pub status: Status,
}

/// A check on the run itself rather than on a threshold the user gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Assertion {
    /// e.g. `finite_logits`.
    pub name: String,
    pub pass: bool,
    /// What was seen, in words.
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelInfo {
    /// The file profiled; `None` for the embedded default.
    pub path: Option<String>,
    pub name: String,
    pub arch: String,
    pub params: u64,
    pub file_size: u64,
    /// Tensor type name → number of tensors of that type.
    pub tensor_types: BTreeMap<String, u64>,
    /// Random weights from `cbtop synth` or the embedded default: timings are real, text is not.
    pub synthetic: bool,
    pub layers: u64,
    pub n_embd: u64,
    pub vocab: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hardware {
    /// `cpu` or `cuda`.
    pub backend: String,
    pub gpu: Option<GpuInfo>,
    pub cpu_model: String,
    pub threads: u64,
    pub memory_bytes: u64,
    pub peaks: Peaks,
    /// Why the run is not on the device asked for, e.g. `--device auto` falling back to the
    /// CPU (the same line the command printed as `note:`).
    #[serde(default)]
    pub note: Option<String>,
}

/// The peaks the roofline used, and where each came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Peaks {
    pub bandwidth_gbps: f64,
    /// e.g. `cpu_read_probe`, `nvml_bus`, `d2d_copy`.
    pub bandwidth_source: String,
    pub compute_gflops: f64,
    /// e.g. `cpu_fma_probe`.
    pub compute_source: String,
    /// Every bandwidth figure that was available, by source, GB/s: `d2d_copy` (measured device
    /// to device copy) and `nvml_bus` (NVML max memory clock x bus width x 2, theoretical) on a
    /// GPU, `cpu_read_probe` on the CPU. `bandwidth_source` names the one the roofline used.
    pub bandwidth_candidates: BTreeMap<String, f64>,
    /// The caches' bandwidth (`cpu_cache_read_probe` or `cpu_cache_add_probe`, whichever moved
    /// more bytes), GB/s: the roof of the bytes a CPU
    /// decode step keeps in the caches (its activations). None on a GPU.
    #[serde(default)]
    pub cache_bandwidth_gbps: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunConfig {
    /// How brick times were measured: `gpu_globaltimer`, `host_sync`, `cpu_timer` or `off`.
    pub timing: String,
    /// The engine's numerics: `fast` or `exact` (the CPU's default, the reference). Reports
    /// written before the field existed ran exact kernels everywhere.
    #[serde(default = "exact")]
    pub numerics: Numerics,
    pub warmup: u64,
    /// Decode steps asked for (`--tokens`).
    pub tokens: u64,
    /// Decode steps measured: `tokens`, or fewer when the run was interrupted.
    #[serde(default)]
    pub measured_tokens: u64,
    pub prefill: u64,
    pub ctx: u64,
    pub profile: Option<String>,
    pub target_efficiency: f64,
    /// Weights the engine repacked at load for its numerics (the CPU's `fast`: Q4_0 rows in
    /// groups of eight): the copy's bytes and the time it took. None where nothing was.
    #[serde(default)]
    pub repacked: Option<Repacked>,
}

/// What repacking weights at load cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Repacked {
    pub bytes: u64,
    pub seconds: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Throughput {
    /// Decode tokens per second with per-brick timing on (measured tokens / their wall time).
    pub tokens_per_sec: f64,
    /// Coefficient of variation of the per-token step time, percent.
    pub cv_percent: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Prompt evaluation + first sample, milliseconds.
    pub ttft_ms: f64,
    pub prefill_tokens_per_sec: f64,
    /// Decode tokens per second over the same tokens with per-brick timing off.
    pub unprofiled_tokens_per_sec: Option<f64>,
    /// `(unprofiled - profiled) / unprofiled`, percent.
    pub overhead_percent: Option<f64>,
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrickReport {
    /// Canonical id, or `a+b` for a fused brick.
    pub id: String,
    /// The logical bricks this row covers (just `[id]` when not fused).
    pub covers: Vec<String>,
    pub source: Source,
    /// Samples: measured tokens.
    pub count: u64,
    /// Per-token time (summed over layers), microseconds.
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub cv_percent: f64,
    /// Share of the mean token time.
    pub share_percent: f64,
    pub budget_us: f64,
    /// `profile` or `roofline`.
    pub budget_source: String,
    pub gap_factor: f64,
    /// Bytes moved per token (read + written).
    pub bytes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub flops: u64,
    pub gbps: f64,
    pub gflops: f64,
    /// The bandwidth the brick's bytes are judged against, GB/s: the memory peak, or (a CPU
    /// decode step, whose activations stay in the caches) between it and the caches' peak as
    /// its bytes split. Reports written before the field existed judged every byte against
    /// the memory peak.
    #[serde(default)]
    pub roof_gbps: Option<f64>,
    /// FLOPs per byte.
    pub intensity: f64,
    pub roofline_us: f64,
    /// `roofline_us / mean_us`, capped at 1.
    pub efficiency: f64,
    pub score: f64,
    pub grade: String,
    /// Mean time per layer (empty for bricks outside the layers), microseconds.
    pub per_layer_us: Vec<f64>,
    /// The kernels that ran for the brick, in the order they first ran (GPU: each stamped
    /// launch, timed; CPU: the kernels chosen at run time, named). Empty in reports written
    /// before the field existed, and under timing other than `events` on the GPU.
    #[serde(default)]
    pub kernels: Vec<KernelReport>,
}

/// One kernel of a brick: what it is, how it was launched, and its time per token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelReport {
    /// The function's name (kernels/*.cu on the GPU; the CPU kernel and its ISA on the CPU).
    pub name: String,
    /// The tensor it read and its GGML type, where it reads one.
    pub reads: Option<String>,
    /// Grid, block and dynamic shared memory of its launches (GPU).
    pub grid: Option<[u32; 3]>,
    pub block: Option<u32>,
    pub dynamic_shared_bytes: Option<u32>,
    /// From the compiled function's attributes (GPU).
    pub registers_per_thread: Option<u32>,
    pub static_shared_bytes: Option<u32>,
    /// Theoretical occupancy of its launches, percent (GPU).
    pub occupancy_percent: Option<f64>,
    /// Launches per token (all layers).
    pub launches_per_token: u32,
    /// Measured steps that ran it (a brick's kernel can change with the context).
    pub steps: u64,
    /// Run time per token summed over its launches, over all the brick's measured steps (a
    /// step that ran another kernel counts zero), microseconds (None: not timed).
    pub mean_us: Option<f64>,
    /// Over the steps that ran it.
    pub p99_us: Option<f64>,
    /// Share of the brick's mean time.
    pub share_percent: Option<f64>,
    /// Device idle time before its launches, per token, microseconds.
    pub gap_before_us: Option<f64>,
}

/// The prompt's evaluation brick by brick, measured once before the timed prefill (so the
/// time to first token is never profiled): bricks + gaps + other = `total_us`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PrefillReport {
    pub tokens: u64,
    /// Wall time of the profiled prompt evaluation, microseconds.
    pub total_us: f64,
    /// GPU idle time between its kernels (null where not measured).
    pub gaps_us: Option<f64>,
    /// Time covered by no brick and no gap.
    pub other_us: f64,
    /// The compute peak the bricks' roofline used, GFLOP/s, and how it was measured: the
    /// tensor cores' (`gpu_mma_f16_probe`) when the prompt's products ran on them, else the
    /// same FMA peak as the decode bricks'; on the CPU, products whose weights are quantized
    /// use `int8_gops` instead (each brick's `compute_source` says which).
    pub compute_gflops: f64,
    pub compute_source: String,
    /// The int8 dot peak, GOP/s, and its probe (`cpu_int8_probe_vnni512` or
    /// `cpu_int8_probe_avx2`), where the roofline of the products whose weights are quantized
    /// used it instead (the CPU); null elsewhere. Each brick's `compute_source` says which.
    #[serde(default)]
    pub int8_gops: Option<f64>,
    #[serde(default)]
    pub int8_source: Option<String>,
    pub bricks: Vec<PrefillBrick>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PrefillBrick {
    /// Canonical id, or `a+b` for a fused brick.
    pub id: String,
    pub covers: Vec<String>,
    pub source: Source,
    /// Time over the whole prompt (summed over layers), microseconds.
    pub total_us: f64,
    /// `total_us` per prompt token.
    pub per_token_us: f64,
    /// Share of the prompt's wall time.
    pub share_percent: f64,
    /// Bytes moved for the whole prompt (weights once, activations per token).
    pub bytes: u64,
    pub flops: u64,
    pub gbps: f64,
    /// Achieved TFLOP/s.
    pub tflops: f64,
    pub roofline_us: f64,
    /// `roofline_us / total_us`, capped at 1.
    pub efficiency: f64,
    /// Time per layer (empty for bricks outside the layers), microseconds.
    pub per_layer_us: Vec<f64>,
    /// The compute peak `roofline_us` used: the prefill's `compute_source`, or its
    /// `int8_source` for a product whose weights are quantized.
    #[serde(default)]
    pub compute_source: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bottleneck {
    pub id: String,
    pub actual_us: f64,
    pub budget_us: f64,
    pub gap_factor: f64,
    /// The three bricks furthest over budget in total time, worst first.
    pub top3: Vec<BottleneckEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BottleneckEntry {
    pub id: String,
    pub actual_us: f64,
    pub budget_us: f64,
    pub gap_factor: f64,
    /// `actual_us - budget_us`.
    pub over_us: f64,
}

/// Summary of the telemetry samples taken during the measured decode steps (NVML, about 10 Hz).
/// Only samples taken inside that window count; none is invented or interpolated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Telemetry {
    /// NVML answered for the GPU the run used.
    pub available: bool,
    /// `nvml` or `none`.
    pub source: String,
    /// Why telemetry is missing, when it is.
    pub reason: Option<String>,
    /// Samples taken during the measured decode steps.
    pub samples: u64,
    /// The GPU NVML sampled.
    #[serde(default)]
    pub gpu_name: Option<String>,
    /// The sampling period asked for, milliseconds.
    #[serde(default)]
    pub period_ms: Option<f64>,
    /// How long the measured decode steps took (first start to last end), milliseconds.
    #[serde(default)]
    pub window_ms: Option<f64>,
    /// Caveats about the samples, e.g. a window shorter than one sampling period.
    #[serde(default)]
    pub note: Option<String>,
    /// Share of each sample period with at least one kernel running (not SM occupancy).
    pub gpu_util_percent: Option<StatSummary>,
    /// Share of each sample period with device memory being read or written.
    #[serde(default)]
    pub mem_util_percent: Option<StatSummary>,
    pub memory_used_bytes: Option<StatSummary>,
    pub memory_total_bytes: Option<u64>,
    pub power_w: Option<StatSummary>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<StatSummary>,
    pub mem_clock_mhz: Option<StatSummary>,
    pub temperature_c: Option<StatSummary>,
    /// PCIe throughput over NVML's 20 ms window at each sample, KB/s.
    pub pcie_tx_kbps: Option<StatSummary>,
    pub pcie_rx_kbps: Option<StatSummary>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatSummary {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gate {
    /// e.g. `min_tok_s`, `max_brick_us:qkv`, `max_regression`.
    pub name: String,
    pub threshold: f64,
    pub actual: f64,
    pub pass: bool,
}

/// `RunConfig::numerics` of a report that predates it.
fn exact() -> Numerics {
    Numerics::Exact
}
