//! Assembling a report from a finished run: the profiler's analysis and measurements become
//! the plain `Report` layout. Gates are evaluated afterwards (`gates`).

use std::collections::BTreeMap;

use super::types::*;
use crate::brick::cost::{quantized_products, Shapes};
use crate::brick::peaks::MeasuredPeaks;
use crate::brick::stats::Series;
use crate::brick::Catalogue;
use crate::model::Model;
use crate::profiler::analysis::{analyze, analyze_prefill, Analysis, Budgets, PrefillAnalysis};
use crate::profiler::hardware::Host;
use crate::profiler::kernels::{self, KernelRow};
use crate::profiler::run::RunResult;

/// Everything about the run that is not a measurement: the model, the machine, the engine's
/// description of itself and the run's configuration.
pub struct RunInfo<'a> {
    pub model: &'a Model,
    /// `None` for the embedded default.
    pub model_path: Option<String>,
    pub synthetic: bool,
    pub file_size: u64,
    pub host: &'a Host,
    pub peaks: &'a MeasuredPeaks,
    pub config: RunConfig,
    /// `cpu` or `cuda`.
    pub backend: &'static str,
    pub gpu: Option<GpuInfo>,
    /// Why the run is not on the device asked for.
    pub note: Option<String>,
    /// NVML's theoretical memory bandwidth, shown beside the measured peak (the roofline keeps
    /// the measured one).
    pub nvml_bus_gbps: Option<f64>,
    /// The GPU telemetry summary of the measured steps (None: no NVML sampler ran).
    pub telemetry: Option<Telemetry>,
    /// The prompt's products ran on tensor cores, whose peak then bounds its bricks.
    pub prompt_on_tensor_cores: bool,
    /// Rows the prompt's last layer ran past its attention (`Backend::prompt_tail_rows`).
    pub prompt_tail_rows: usize,
    /// The kernels the engine named for its bricks.
    pub kernels: &'a Catalogue,
}

fn kernel_report(r: KernelRow) -> KernelReport {
    let (launch, res) = (r.info.launch, r.info.resources);
    KernelReport {
        name: r.info.name,
        reads: r.info.reads,
        grid: launch.map(|l| l.grid),
        block: launch.map(|l| l.block),
        dynamic_shared_bytes: launch.map(|l| l.dynamic_shared_bytes),
        registers_per_thread: res.map(|r| r.registers_per_thread),
        static_shared_bytes: res.map(|r| r.static_shared_bytes),
        occupancy_percent: res.map(|r| r.occupancy_percent),
        launches_per_token: r.launches,
        steps: r.steps,
        mean_us: r.mean_us,
        p99_us: r.p99_us,
        share_percent: r.share_percent,
        gap_before_us: r.gap_before_us,
    }
}

fn model_info(info: &RunInfo) -> ModelInfo {
    let m = info.model;
    let mut tensor_types = BTreeMap::new();
    let mut params = 0u64;
    for t in &m.file.tensors {
        *tensor_types.entry(t.ty.name().to_string()).or_insert(0) += 1;
        params += t.dims.iter().product::<u64>();
    }
    ModelInfo {
        path: info.model_path.clone(),
        name: m.name(),
        arch: m.config.arch.name().to_string(),
        params,
        file_size: info.file_size,
        tensor_types,
        synthetic: info.synthetic,
        layers: m.config.n_layers as u64,
        n_embd: m.config.n_embd as u64,
        vocab: m.config.vocab_size as u64,
    }
}

fn throughput(run: &RunResult) -> Throughput {
    let tok = &run.stats.token;
    let tps = |s: &Series| {
        if s.mean_us() > 0.0 {
            1e6 / s.mean_us()
        } else {
            0.0
        }
    };
    let profiled = tps(tok);
    let unprofiled = run.unprofiled.as_ref().map(tps);
    let p = &run.prefill;
    Throughput {
        tokens_per_sec: profiled,
        cv_percent: tok.cv_percent(),
        p50_us: tok.quantile_us(0.5),
        p99_us: tok.quantile_us(0.99),
        ttft_ms: p.ttft_ns as f64 / 1e6,
        prefill_tokens_per_sec: if p.eval_ns > 0 {
            p.tokens as f64 / (p.eval_ns as f64 / 1e9)
        } else {
            0.0
        },
        unprofiled_tokens_per_sec: unprofiled,
        overhead_percent: unprofiled
            .filter(|&u| u > 0.0)
            .map(|u| 100.0 * (u - profiled) / u),
        source: crate::brick::Source::CpuTimer,
    }
}

/// The profiler's analysis of a run against the machine's peaks and the budgets: the decode
/// steps, and the prompt's bricks where it was profiled.
fn analysis(info: &RunInfo, run: &RunResult, budgets: &Budgets) -> Analysis {
    let (model, peaks) = (info.model, info.peaks);
    let shapes = Shapes::new(&model.config, &model.weights);
    let mut a = analyze(&run.stats, &shapes, &peaks.roof(), budgets);
    a.prefill = run.prefill_profile.as_ref().map(|s| {
        // Judged by the int8 dot peak where one was measured (the CPU).
        let int8 = quantized_products(&model.weights);
        let layers = model.config.n_layers;
        let tensor = info.prompt_on_tensor_cores;
        let rows = (run.prefill.tokens, info.prompt_tail_rows);
        analyze_prefill(s, rows, layers, &shapes, peaks, tensor, &int8)
    });
    a
}

/// The checks every run makes whatever the gates: every decode step's logits must be finite
/// (the CPU counts the returned row; CUDA's argmax kernels count them on the device).
fn assertions(run: &RunResult) -> Vec<Assertion> {
    let steps = run.nonfinite_steps;
    vec![Assertion {
        name: "finite_logits".into(),
        pass: steps == 0,
        detail: if steps == 0 {
            "every decode step's logits were finite".into()
        } else {
            format!("{steps} decode steps produced NaN or infinite logits")
        },
    }]
}

/// The report of a run, whole: gates empty and status PASS until gates are evaluated
/// (`gates`).
pub fn build(info: &RunInfo, run: &RunResult, budgets: &Budgets) -> Report {
    let a = &analysis(info, run, budgets);
    let bricks = a
        .rows
        .iter()
        .map(|r| BrickReport {
            id: r.id.clone(),
            covers: cover_names(r.brick),
            source: r.source,
            count: r.count,
            mean_us: r.mean_us,
            p50_us: r.p50_us,
            p90_us: r.p90_us,
            p99_us: r.p99_us,
            p999_us: r.p999_us,
            max_us: r.max_us,
            cv_percent: r.cv_percent,
            share_percent: r.share_percent,
            budget_us: r.budget_us,
            budget_source: r.budget_source.name().to_string(),
            gap_factor: r.gap_factor,
            bytes: r.cost.bytes().round() as u64,
            bytes_read: r.cost.bytes_read.round() as u64,
            bytes_written: r.cost.bytes_written.round() as u64,
            flops: r.cost.flops.round() as u64,
            gbps: r.gbps,
            gflops: r.gflops,
            roof_gbps: Some(r.roof_gbps),
            intensity: r.cost.intensity(),
            roofline_us: r.roofline_us,
            efficiency: r.efficiency,
            score: r.score,
            grade: r.grade.to_string(),
            per_layer_us: r.per_layer_us.clone(),
            kernels: kernels::rows(&run.stats, info.kernels, r.brick)
                .into_iter()
                .map(kernel_report)
                .collect(),
        })
        .collect();
    let entry = |i: usize| {
        let r = &a.rows[i];
        BottleneckEntry {
            id: r.id.clone(),
            actual_us: r.mean_us,
            budget_us: r.budget_us,
            gap_factor: r.gap_factor,
            over_us: r.mean_us - r.budget_us,
        }
    };
    let bottleneck = a.worst.first().map(|&i| {
        let e = entry(i);
        Bottleneck {
            id: e.id,
            actual_us: e.actual_us,
            budget_us: e.budget_us,
            gap_factor: e.gap_factor,
            top3: a.worst.iter().map(|&i| entry(i)).collect(),
        }
    });
    let p = info.peaks;
    let mut bandwidth_candidates =
        BTreeMap::from([(p.bandwidth.source.to_string(), p.bandwidth.value)]);
    if let Some(gbps) = info.nvml_bus_gbps {
        bandwidth_candidates.insert("nvml_bus".to_string(), gbps);
    }
    Report {
        schema_version: SCHEMA_VERSION,
        cbtop_version: env!("CARGO_PKG_VERSION").to_string(),
        timestamp: now_rfc3339(),
        model: model_info(info),
        hardware: Hardware {
            backend: info.backend.to_string(),
            gpu: info.gpu.clone(),
            cpu_model: info.host.cpu_model.clone(),
            threads: info.host.threads as u64,
            memory_bytes: info.host.memory_bytes,
            peaks: Peaks {
                bandwidth_gbps: p.bandwidth.value,
                bandwidth_source: p.bandwidth.source.to_string(),
                compute_gflops: p.compute.value,
                compute_source: p.compute.source.to_string(),
                bandwidth_candidates,
                cache_bandwidth_gbps: p.cache_bandwidth.as_ref().map(|c| c.value),
            },
            note: info.note.clone(),
        },
        config: info.config.clone(),
        throughput: throughput(run),
        bricks,
        gaps_us: a.gaps_us,
        gaps_share_percent: a.gaps_share_percent,
        other_us: a.other_us,
        other_share_percent: a.other_share_percent,
        token_us: a.token_us,
        prefill: a.prefill.as_ref().map(prefill_report),
        bottleneck,
        score: a.score,
        grade: a.grade.to_string(),
        telemetry: info.telemetry.clone().unwrap_or_else(|| {
            super::telemetry::unavailable("CPU backend: no GPU telemetry (NVML) for this run")
        }),
        gates: Vec::new(),
        assertions: assertions(run),
        batch: None,
        devices: None,
        status: Status::Pass,
    }
}

/// The logical brick ids a (possibly fused) brick covers.
fn cover_names(b: crate::brick::Brick) -> Vec<String> {
    b.covers().iter().map(|c| c.name().to_string()).collect()
}

fn prefill_report(p: &PrefillAnalysis) -> PrefillReport {
    PrefillReport {
        tokens: p.tokens as u64,
        total_us: p.total_us,
        gaps_us: p.gaps_us,
        other_us: p.other_us,
        compute_gflops: p.compute.value,
        compute_source: p.compute.source.to_string(),
        int8_gops: p.int8.as_ref().map(|i| i.value),
        int8_source: p.int8.as_ref().map(|i| i.source.to_string()),
        bricks: p
            .rows
            .iter()
            .map(|r| PrefillBrick {
                id: r.id.clone(),
                covers: cover_names(r.brick),
                source: r.source,
                total_us: r.us,
                per_token_us: r.us / p.tokens.max(1) as f64,
                share_percent: r.share_percent,
                bytes: r.cost.bytes().round() as u64,
                flops: r.cost.flops.round() as u64,
                gbps: r.gbps,
                tflops: r.gflops / 1e3,
                roofline_us: r.roofline_us,
                efficiency: r.efficiency,
                per_layer_us: r.per_layer_us.clone(),
                compute_source: r.compute_source.to_string(),
            })
            .collect(),
    }
}

/// The current UTC time as RFC 3339, to the second.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
