//! The data model the views render: a plain, self-contained picture of the profiler at one
//! moment, published by the engine thread and read by the UI thread. No engine types, so views
//! and snapshot tests work from hand-made data, and export is one `serde_json` call.

use serde::Serialize;

/// What the engine thread is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Measuring the device's peak bandwidth and FMA rate for the roofline.
    #[default]
    Probing,
    /// Decoding batches of sequences (`--batch`), before the single stream runs.
    Batch,
    /// Evaluating the prompt.
    Prefill,
    Running,
    Paused,
    /// The engine stopped on an error (see `Snapshot::error`).
    Stopped,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Probing => "PROBING PEAKS",
            Phase::Batch => "BATCH SWEEP",
            Phase::Prefill => "PREFILL",
            Phase::Running => "RUNNING",
            Phase::Paused => "PAUSED",
            Phase::Stopped => "STOPPED",
        }
    }
}

/// Static facts shown in the header.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Header {
    /// Model name and where it came from (file path or "embedded default").
    pub model: String,
    /// e.g. "llama · 30 layers · Q4_1".
    pub model_detail: String,
    /// e.g. "cpu · 2 threads" or "cuda:0 NVIDIA H100 80GB HBM3 · sm_90 · 79.1 GiB".
    pub device: String,
    /// How brick times are measured: "cpu_timer", "gpu_globaltimer" or "host_sync".
    pub timing: String,
    /// The engine's numerics: "fast" or "exact" (the CPU's default).
    pub numerics: String,
    pub synthetic: bool,
}

/// Throughput and latency, all from measured step times.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Throughput {
    /// Over the last few profiled steps.
    pub tok_s_now: f64,
    /// Over all profiled steps since the last reset.
    pub tok_s_avg: f64,
    /// Recent per-step tok/s, oldest first.
    pub recent_tok_s: Vec<f64>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Prompt evaluation plus the first token, of the latest prefill.
    pub ttft_ms: Option<f64>,
    pub prefill_tok_s: Option<f64>,
    /// Profiled step time over unprofiled step time, minus one, percent.
    pub overhead_pct: Option<f64>,
    /// Measured (profiled) steps since the last reset.
    pub tokens: u64,
    /// Distribution of the profiled step time: (upper bound µs, count).
    pub hist: Vec<(f64, u64)>,
}

/// One brick, measured and judged: what the pipeline row, the drill-down and the roofline and
/// budget views show.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BrickView {
    pub id: String,
    /// How the time was measured (`cpu_timer`, `cuda_event`, ...).
    pub source: String,
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub cv_pct: f64,
    pub share_pct: f64,
    pub budget_us: f64,
    /// `profile` or `roofline`.
    pub budget_source: String,
    pub gap_factor: f64,
    pub bytes_read: f64,
    pub bytes_written: f64,
    pub flops: f64,
    pub intensity: f64,
    pub gbps: f64,
    pub gflops: f64,
    /// The bandwidth the brick's bytes are judged against, GB/s (`Roof::bandwidth_for`).
    pub roof_gbps: f64,
    pub roofline_us: f64,
    pub efficiency: f64,
    pub score: f64,
    pub grade: String,
    pub per_layer_us: Vec<f64>,
    /// (upper bound µs, count) of the per-token time.
    pub hist: Vec<(f64, u64)>,
    /// The kernels that ran for the brick, in the order they first ran.
    pub kernels: Vec<KernelLine>,
}

/// One kernel of a brick, as the drill-down lists it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelLine {
    pub name: String,
    /// The tensor it read and its type.
    pub reads: Option<String>,
    /// `grid x,y,z block b` and dynamic shared memory (GPU).
    pub launch: Option<String>,
    pub registers: Option<u32>,
    /// Static + dynamic shared memory per block, bytes.
    pub shared_bytes: Option<u32>,
    pub occupancy_pct: Option<f64>,
    pub launches: u32,
    /// Per token (None: the backend names kernels without timing them).
    pub mean_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub share_pct: Option<f64>,
    pub gap_before_us: Option<f64>,
}

/// One kernel of the last measured step, for the `w` timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimelineLine {
    /// `qkv` or `qkv[3]`.
    pub brick: String,
    pub name: String,
    pub start_us: f64,
    pub dur_us: f64,
    pub gap_before_us: f64,
}

/// The peaks the roofline is drawn against, with how they were measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Peaks {
    pub bandwidth_gbps: f64,
    pub bandwidth_source: String,
    pub compute_gflops: f64,
    pub compute_source: String,
    /// Measured device-to-device copy bandwidth (read + written), GB/s, on a GPU.
    pub d2d_copy_gbps: Option<f64>,
    /// NVML's theoretical peak memory bandwidth (max memory clock x bus width x 2), GB/s.
    pub nvml_bus_gbps: Option<f64>,
    /// The caches' measured read bandwidth (CPU), GB/s: the roof of a decode step's
    /// activations.
    pub cache_gbps: Option<f64>,
}

/// Everything on screen except telemetry (which has its own thread).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Snapshot {
    pub header: Header,
    pub phase: Phase,
    pub throughput: Throughput,
    /// In pipeline order.
    pub bricks: Vec<BrickView>,
    /// GPU idle time between kernels per token, where measured (kernel timestamps).
    pub gaps_us: Option<f64>,
    pub gaps_share_pct: Option<f64>,
    /// Step time no brick covers.
    pub other_us: f64,
    pub other_share_pct: f64,
    pub token_us: f64,
    pub score: f64,
    pub grade: String,
    /// Indices into `bricks`, most time over budget first; the first is the bottleneck.
    pub worst: Vec<usize>,
    pub peaks: Option<Peaks>,
    /// Generated text since the last prefill (its tail).
    pub text: String,
    /// Times the context filled and decoding started over from the prompt.
    pub restarts: u64,
    pub ctx_used: usize,
    pub ctx_size: usize,
    /// Logits that were NaN or infinite, over all steps since the last reset.
    pub nonfinite_logits: u64,
    pub error: Option<String>,
    /// The `--batch` sweep: the sizes asked for, each one measured so far, and why the sweep
    /// stopped early (a batch that does not fit).
    pub batch: BatchSweep,
    /// The last measured step's kernels in launch order (empty where kernels are not timed).
    pub timeline: Vec<TimelineLine>,
    /// Why kernels are not listed or not timed, where they are not.
    pub kernels_note: Option<String>,
}

/// The live view's `--batch` sweep.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BatchSweep {
    pub sizes: Vec<usize>,
    pub rows: Vec<BatchRow>,
    pub error: Option<String>,
}

/// One batch size: `n` sequences decoded together, one pass per step.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BatchRow {
    pub n: usize,
    /// Tokens per second over all sequences, and of each.
    pub tok_s: f64,
    pub tok_s_each: f64,
    pub step_us: f64,
    /// Each brick's share of a profiled step, percent, in pipeline order (empty without
    /// per-brick timing).
    pub shares: Vec<(String, f64)>,
}

impl Snapshot {
    pub fn bottleneck(&self) -> Option<usize> {
        self.worst.first().copied()
    }
}

/// Telemetry as the views need it: whether there is a GPU (or why not) and recent samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TelemetryView {
    /// Ok(GPU name), Err(one-line reason there is no GPU telemetry), None while starting.
    pub gpu: Option<Result<String, String>>,
    /// Oldest first.
    pub history: Vec<crate::telemetry::TelemetrySample>,
}

impl TelemetryView {
    pub fn latest(&self) -> Option<&crate::telemetry::TelemetrySample> {
        self.history.last()
    }
}
