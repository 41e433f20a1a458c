//! `cbtop --headless`: profile a model without the TUI and write the report (JSON, Markdown or
//! CSV), evaluate CI gates, optionally export a Chrome/Perfetto trace. stdout carries only the
//! report; progress (for runs over a second) and errors go to stderr.
//!
//! Checks come in docs/DESIGN.md's order: arguments, then the model, then the device. SIGINT and
//! SIGTERM stop the run at the next step boundary and write what was measured (`interrupt`).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::args::{DeviceArg, FormatArg, ProfileArgs, TimingArg};
use super::device::{nvml_index, resolve_devices, setup_threads};
use super::error::{exit, CliError};
use super::history::db_error;
use super::interrupt::{self, Interrupt, SIGINT, SIGTERM};
use super::output::write_file;
use super::sinks::{append_history, device_metric_label, hold, metric_labels, start_metrics};
use crate::brick::id::is_valid_id;
use crate::brick::peaks::MeasuredPeaks;
use crate::brick::{BrickId, Catalogue, Source};
use crate::engine::backend::{timing_label, Backend, Device};
use crate::engine::cpu::CpuBatch;
use crate::engine::cuda::CudaBatch;
use crate::engine::cuda::GpuInfo;
use crate::engine::{EngineError, Numerics, Timing};
use crate::history::Db;
use crate::metrics::{openmetrics, Frame, Labels, Shared};
use crate::profiler::analysis::Budgets;
use crate::profiler::batch::{context_needed, prompt_lines, run_point, Sweep, MAX_BATCH};
use crate::profiler::hardware::Host;
use crate::profiler::model_source::{ModelSource, DEFAULT_PROMPT};
use crate::profiler::run::{run_until, Plan, RunResult};
use crate::profiler::session::Session;
use crate::report::build::{build, RunInfo};
use crate::report::gates::{apply_gates, evaluate, failure_summary, GateFlags, GateSpec};
use crate::report::telemetry::{summarize, trace_counters as telemetry_counters, Window};
use crate::report::trace::{write_processes, TraceCounter, TraceProcess, TraceSpan};
use crate::report::types::BatchPoint;
use crate::report::{format, Report, RunConfig, Status};
use crate::telemetry::{GpuProbe, Sampler, TelemetrySample};

/// Load the model named on the command line, or build the embedded default.
pub fn load_model(path: Option<&Path>) -> Result<ModelSource, CliError> {
    match path {
        Some(p) => ModelSource::file(p).map_err(CliError::usage),
        None => ModelSource::embedded_default()
            .map_err(|e| CliError::runtime(format!("building the embedded default model: {e}"))),
    }
}

/// The prompt's tokens, cut or repeated to `--prefill` when given.
pub fn prompt_tokens(src: &ModelSource, a: &ProfileArgs) -> Result<Vec<u32>, CliError> {
    let text = a.prompt.as_deref().unwrap_or(DEFAULT_PROMPT);
    let ids = src.model.tokenizer.encode(text, true);
    if ids.is_empty() {
        return Err(CliError::usage("--prompt: the prompt encodes to no tokens"));
    }
    Ok(match a.prefill {
        None => ids,
        Some(0) => return Err(CliError::usage("--prefill must be at least 1")),
        Some(n) => ids.iter().copied().cycle().take(n).collect(),
    })
}

fn output_format(a: &ProfileArgs) -> Result<FormatArg, CliError> {
    match (a.json, a.format) {
        (true, Some(f)) if f != FormatArg::Json => Err(CliError::usage(
            "--json and --format md/csv/openmetrics ask for different formats; give one",
        )),
        (true, _) => Ok(FormatArg::Json),
        (false, Some(f)) => Ok(f),
        (false, None) => Ok(FormatArg::Md),
    }
}

/// A progress bar on stderr that appears only once a run has taken more than a second.
struct Progress {
    hidden: bool,
    start: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(hidden: bool) -> Progress {
        Progress {
            hidden,
            start: Instant::now(),
            bar: None,
        }
    }

    fn update(&mut self, done: usize, total: usize, what: &str) {
        if self.hidden || self.start.elapsed() < Duration::from_secs(1) {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} steps ({eta} left)")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b
        });
        bar.set_message(what.to_string());
        bar.set_position(done as u64);
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

fn trace_data(run: &RunResult, kernels: &Catalogue) -> (Vec<TraceSpan>, Vec<TraceCounter>) {
    let mut spans = Vec::new();
    let mut counters = Vec::new();
    for (i, t) in run.samples.iter().enumerate() {
        for s in &t.spans {
            spans.push(TraceSpan {
                name: s.brick.to_string(),
                layer: s.layer,
                token: i as u64,
                start_us: s.start_ns as f64 / 1e3,
                dur_us: s.dur_ns as f64 / 1e3,
                source: s.source,
                kernel_of: None,
            });
        }
        for k in &t.kernels {
            let (Some(time), Some(info)) = (k.timed, kernels.get(k.kernel)) else {
                continue;
            };
            spans.push(TraceSpan {
                name: info.name.clone(),
                layer: k.layer,
                token: i as u64,
                start_us: time.start_ns as f64 / 1e3,
                dur_us: time.dur_ns as f64 / 1e3,
                source: Source::GpuGlobaltimer,
                kernel_of: Some(k.brick.to_string()),
            });
        }
        let end_us = (t.start_ns + t.total_ns) as f64 / 1e3;
        counters.push(TraceCounter {
            name: "tok/s".to_string(),
            ts_us: end_us,
            value: 1e9 / t.total_ns.max(1) as f64,
        });
        counters.push(TraceCounter {
            name: "step_us".to_string(),
            ts_us: end_us,
            value: t.total_ns as f64 / 1e3,
        });
    }
    (spans, counters)
}

/// How often a run in progress refreshes what `--metrics-listen` serves.
const METRICS_EVERY: Duration = Duration::from_millis(250);

/// Telemetry samples were kept this long at most (an hour at 10 Hz).
const TELEMETRY_KEEP: usize = 36_000;
/// NVML is sampled this often (about 10 Hz, as in the live view).
const TELEMETRY_PERIOD: Duration = crate::tui::TELEMETRY_PERIOD;

/// The telemetry of a finished run: the samples inside its measured decode steps, where they
/// sit on the trace's clock, and the report's summary of them.
struct RunTelemetry {
    samples: Vec<TelemetrySample>,
    /// Sampler start minus trace origin, milliseconds.
    offset_ms: f64,
    summary: crate::report::Telemetry,
}

impl RunTelemetry {
    fn collect(s: &Sampler, origin: Instant, run: &RunResult) -> RunTelemetry {
        // Sampler clock = trace clock + (origin - sampler start).
        let shift_ms = match origin.checked_duration_since(s.started()) {
            Some(d) => d.as_secs_f64() * 1e3,
            None => -(s.started().duration_since(origin).as_secs_f64() * 1e3),
        };
        let (first, last) = (run.samples.first(), run.samples.last());
        let start_ms = first.map_or(0.0, |t| t.start_ns as f64 / 1e6);
        let end_ms = last.map_or(0.0, |t| (t.start_ns + t.total_ns) as f64 / 1e6);
        let window = Window {
            start_ms: start_ms + shift_ms,
            end_ms: end_ms + shift_ms,
            period_ms: s.period().as_secs_f64() * 1e3,
        };
        let all = s.history();
        let summary = summarize(s.gpu_status(), &all, &window);
        let samples = window.select(&all).into_iter().cloned().collect();
        RunTelemetry {
            samples,
            offset_ms: -shift_ms,
            summary,
        }
    }

    fn counters(&self) -> Vec<TraceCounter> {
        let refs: Vec<&TelemetrySample> = self.samples.iter().collect();
        telemetry_counters(&refs, self.offset_ms)
    }
}

fn write_out(path: Option<&Path>, text: &str) -> Result<(), CliError> {
    match path {
        Some(p) => write_file("--output", p, |w| w.write_all(text.as_bytes())),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| CliError::runtime(format!("writing the report: {e}")))
        }
    }
}

/// What is checked before anything runs: the output format, the CI gates (with their baseline)
/// and the brick budgets, so a typo fails before the model is read.
struct Checks {
    fmt: FormatArg,
    gates: GateSpec,
    budgets: Budgets,
}

impl Checks {
    fn validate(a: &ProfileArgs) -> Result<Checks, CliError> {
        let fmt = output_format(a)?;
        if a.tokens == 0 {
            return Err(CliError::usage("--tokens must be at least 1"));
        }
        if let Some(h) = a.metrics_hold.filter(|h| !(h.is_finite() && *h >= 0.0)) {
            return Err(CliError::usage(format!(
                "--metrics-hold {h}: must be a non-negative number of seconds"
            )));
        }
        let gates = GateSpec::from_flags(GateFlags {
            min_tok_s: a.min_tok_s,
            min_score: a.min_score,
            max_cv: a.max_cv,
            max_brick_us: &a.max_brick_us,
            baseline: a.baseline.as_deref(),
            max_regression: a.max_regression,
        })
        .map_err(CliError::usage)?;
        if let Some((id, _)) = gates.max_brick_us.iter().find(|(id, _)| !is_valid_id(id)) {
            return Err(CliError::usage(format!(
                "--max-brick-us {id}: not a brick id (ids: {}; fused ids join them with +)",
                BrickId::ALL.map(|b| b.name()).join(", ")
            )));
        }
        let budgets = Budgets::from_profile(a.profile.as_deref()).map_err(CliError::usage)?;
        Ok(Checks {
            fmt,
            gates,
            budgets,
        })
    }
}

/// The measured steps and the context they need, checked against `--ctx` and the model's.
fn plan(a: &ProfileArgs, src: &ModelSource, prompt: usize) -> Result<(Plan, usize), CliError> {
    let profiled = a.timing != TimingArg::Off;
    let plan = Plan {
        warmup: a.warmup,
        tokens: a.tokens,
        profiled,
        measure_overhead: profiled,
    };
    let need = prompt + plan.steps() + 1;
    let model_ctx = src.model.config.context_length;
    let ctx = a.engine.ctx.unwrap_or(need);
    if need > ctx.min(model_ctx) {
        return Err(CliError::usage(format!(
            "--ctx {}: the prompt ({}) and {} decode steps (--warmup {}, --tokens {}{}) need {need} \
             positions (model context {model_ctx})",
            ctx,
            prompt,
            plan.steps(),
            a.warmup,
            a.tokens,
            if plan.measure_overhead { ", twice for the overhead" } else { "" },
        )));
    }
    Ok((plan, ctx))
}

/// A finished run with what the engine and the machine said about themselves.
struct Measured {
    host: Host,
    peaks: MeasuredPeaks,
    backend: &'static str,
    gpu: Option<GpuInfo>,
    timing: &'static str,
    numerics: Numerics,
    repacked: Option<(usize, f64)>,
    prompt_on_tensor_cores: bool,
    prompt_tail_rows: usize,
    nvml_bus_gbps: Option<f64>,
    telemetry: Option<RunTelemetry>,
    run: RunResult,
    kernels: Catalogue,
}

/// Open the engine on `device`, measure its peaks, and run `plan` with GPU telemetry sampled
/// beside it (NVML on the GPU the engine uses, on its own thread).
fn measure(
    a: &ProfileArgs,
    src: &ModelSource,
    prompt: &[u32],
    (plan, ctx): (Plan, usize),
    device: &Device,
    signals: &Interrupt,
    metrics: Option<(&Shared, &Labels)>,
) -> Result<Measured, CliError> {
    // One bar per engine would garble stderr: several engines run without one.
    let mut progress = Progress::new(a.ci || a.engine.device == DeviceArg::All);
    let mut published = Instant::now();
    progress.update(0, plan.steps(), "measuring peaks");
    let host = Host::detect();
    let timing = Timing::from(a.timing);
    let engine = Backend::open(
        &src.model,
        ctx,
        device,
        timing,
        a.engine.numerics_on(device),
    )
    .map_err(|e| CliError::runtime(format!("--device {e}")))?;
    let peaks = engine.measure_peaks().map_err(CliError::runtime)?;
    let (backend, gpu, numerics) = (engine.name(), engine.gpu_info(), engine.numerics());
    let repacked = engine.repacked();
    let prompt_on_tensor_cores = engine.prompt_on_tensor_cores(prompt.len());
    let prompt_tail_rows = engine.prompt_tail_rows(prompt.len());
    let nvml = nvml_index(device);
    let nvml_bus_gbps =
        nvml.and_then(|i| GpuProbe::open(i).and_then(|p| p.peak_bandwidth_gbps()).ok());
    let sampler = nvml.map(|i| Sampler::spawn(i, TELEMETRY_PERIOD, TELEMETRY_KEEP));
    let mut session = Session::new(engine, prompt.to_vec());
    let run = run_until(
        &mut session,
        src.model.config.n_layers,
        plan,
        |d, t, stats| {
            progress.update(d, t, "decoding");
            // A scrape during the run sees the steps measured so far.
            if let Some((shared, labels)) = metrics {
                if published.elapsed() >= METRICS_EVERY && stats.tokens() > 0 {
                    published = Instant::now();
                    shared.set_frame(Frame::from_stats(labels.clone(), stats));
                    let gpu = sampler.as_ref().and_then(|s| s.latest()?.gpu);
                    shared.set_gpu(gpu);
                }
            }
        },
        || signals.caught(),
    )
    .map_err(CliError::runtime)?;
    progress.finish();
    let telemetry = sampler.map(|s| RunTelemetry::collect(&s, session.origin(), &run));
    let kernels = session.engine().kernels();
    Ok(Measured {
        host,
        peaks,
        backend,
        gpu,
        timing: timing_label(device, timing),
        numerics,
        repacked,
        prompt_on_tensor_cores,
        prompt_tail_rows,
        nvml_bus_gbps,
        telemetry,
        run,
        kernels,
    })
}

/// Everything the report is built from besides the measurements.
fn run_info<'a>(
    a: &ProfileArgs,
    src: &'a ModelSource,
    m: &'a Measured,
    checks: &Checks,
    (prompt, ctx): (usize, usize),
    note: Option<String>,
) -> RunInfo<'a> {
    RunInfo {
        model: &src.model,
        model_path: src.path.clone(),
        synthetic: src.synthetic,
        file_size: src.file_size,
        host: &m.host,
        peaks: &m.peaks,
        config: RunConfig {
            timing: m.timing.to_string(),
            numerics: m.numerics,
            warmup: a.warmup as u64,
            tokens: a.tokens as u64,
            measured_tokens: m.run.samples.len() as u64,
            prefill: prompt as u64,
            ctx: ctx as u64,
            profile: a.profile.clone(),
            target_efficiency: checks.budgets.target_efficiency,
            repacked: m.repacked.map(|(bytes, seconds)| crate::report::Repacked {
                bytes: bytes as u64,
                seconds,
            }),
        },
        backend: m.backend,
        gpu: m.gpu.clone(),
        note,
        nvml_bus_gbps: m.nvml_bus_gbps,
        telemetry: m.telemetry.as_ref().map(|t| t.summary.clone()),
        prompt_on_tensor_cores: m.prompt_on_tensor_cores,
        prompt_tail_rows: m.prompt_tail_rows,
        kernels: &m.kernels,
    }
}

/// The report's status: interrupted runs are not judged (their numbers are not a complete
/// run); otherwise the gates, then the run's own assertions.
fn judge(report: &mut Report, gates: &GateSpec, interrupted: bool) -> Result<(), CliError> {
    if interrupted {
        report.status = Status::Interrupted;
        return Ok(());
    }
    let results = evaluate(gates, report).map_err(CliError::usage)?;
    apply_gates(report, results);
    if report.assertions.iter().any(|x| !x.pass) {
        report.status = Status::Fail;
    }
    Ok(())
}

/// Write the trace (with `--trace`: one process per engine) and the report (to `--output`,
/// else stdout).
fn emit(
    a: &ProfileArgs,
    fmt: FormatArg,
    src: &ModelSource,
    runs: &[DeviceRun],
    report: &Report,
    frames: &[Frame],
) -> Result<(), CliError> {
    if let Some(path) = &a.trace {
        let marker = if src.synthetic {
            " [synthetic weights]"
        } else {
            ""
        };
        let data: Vec<_> = runs
            .iter()
            .map(|r| {
                let (spans, mut counters) = trace_data(&r.m.run, &r.m.kernels);
                if let Some(t) = &r.m.telemetry {
                    counters.extend(t.counters());
                }
                (spans, counters)
            })
            .collect();
        let processes: Vec<TraceProcess> = runs
            .iter()
            .zip(&data)
            .map(|(r, (spans, counters))| TraceProcess {
                title: match a.engine.device {
                    DeviceArg::All => format!(
                        "cbtop: {}{marker} on {}",
                        src.label(),
                        r.frame.labels.device
                    ),
                    _ => format!("cbtop: {}{marker}", src.label()),
                },
                spans,
                counters,
            })
            .collect();
        write_file("--trace", path, |w| write_processes(w, &processes))?;
    }
    let text = match fmt {
        FormatArg::Json => format::to_json(report),
        FormatArg::Md => format::to_markdown(report),
        FormatArg::Csv => format::to_csv(report),
        FormatArg::Openmetrics => openmetrics::render_all(frames),
    };
    write_out(a.output.as_deref(), &text)
}

/// The exit: a signal's code when one stopped the run, exit 1 when a gate or an assertion
/// failed (naming it), else success.
fn outcome(report: &Report, interrupted: Option<i32>, tokens: usize) -> Result<(), CliError> {
    if let Some(sig) = interrupted {
        return Err(CliError {
            code: interrupt::exit_code(sig),
            message: format!(
                "interrupted by {}: the report holds {} of {} measured steps, status INTERRUPTED",
                interrupt::name(sig),
                report.config.measured_tokens,
                tokens
            ),
        });
    }
    if report.status == Status::Fail {
        let failed = report.assertions.iter().filter(|x| !x.pass);
        let assertion = failed
            .map(|x| format!("assertion {}: {}", x.name, x.detail))
            .next();
        return Err(CliError {
            code: exit::GATE_FAILED,
            message: failure_summary(&report.gates)
                .or(assertion)
                .unwrap_or_else(|| "a CI gate failed".to_string()),
        });
    }
    Ok(())
}

/// `--batch`: the sweep's plan and the context each sequence needs, checked before anything
/// runs (sizes from 1 to `MAX_BATCH`; the context within the model's).
fn batch_sweep(
    a: &ProfileArgs,
    src: &ModelSource,
    prompt: &[u32],
) -> Result<Option<BatchPlan>, CliError> {
    if a.batch.is_empty() {
        return Ok(None);
    }
    if let Some(&bad) = a.batch.iter().find(|&&n| n == 0 || n > MAX_BATCH) {
        return Err(CliError::usage(format!(
            "--batch {bad}: a batch size is 1 to {MAX_BATCH}"
        )));
    }
    let prompts = match &a.prompt_file {
        None => vec![prompt.to_vec()],
        Some(path) => prompt_lines(&src.model, path).map_err(CliError::usage)?,
    };
    let sweep = Sweep {
        warmup: a.warmup.min(4),
        tokens: a.tokens,
        profiled: a.timing != TimingArg::Off,
    };
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let ctx = context_needed(longest, sweep);
    let trained = src.model.config.context_length;
    if ctx > trained {
        return Err(CliError::usage(format!(
            "--batch: a prompt of {longest} and {} steps need {ctx} positions a sequence, over \
             the model's context of {trained}",
            sweep.warmup + 2 * sweep.tokens
        )));
    }
    Ok(Some(BatchPlan {
        sweep,
        ctx,
        prompts,
    }))
}

/// What `--batch` runs: the sweep, each sequence's context, and the prompts it takes in turn.
struct BatchPlan {
    sweep: Sweep,
    ctx: usize,
    prompts: Vec<Vec<u32>>,
}

/// Each batch size of the sweep, on an engine of the run's device and numerics (on the GPU
/// one engine for the whole sweep, each size's batch on it); an interrupt ends the sweep at a
/// batch size's end.
fn run_batches(
    a: &ProfileArgs,
    src: &ModelSource,
    plan: &BatchPlan,
    device: &Device,
    signals: &Interrupt,
) -> Result<Vec<BatchPoint>, CliError> {
    let numerics = a.engine.numerics_on(device);
    let mut engine = Backend::open(&src.model, plan.ctx, device, a.timing.into(), numerics)
        .map_err(CliError::runtime)?;
    let mut points = Vec::new();
    for &n in &a.batch {
        if signals.caught() {
            break;
        }
        if !a.ci {
            eprintln!("cbtop: batch {n}: {} steps", plan.sweep.tokens);
        }
        let point = match &mut engine {
            Backend::Cpu(e) => CpuBatch::new(e, plan.ctx, n)
                .and_then(|mut b| run_point(&mut b, &plan.prompts, plan.sweep)),
            Backend::Cuda(e) => CudaBatch::new(e, plan.ctx, n)
                .and_then(|mut b| run_point(&mut b, &plan.prompts, plan.sweep)),
        };
        points.push(point.map_err(|e| match e {
            EngineError::BatchTooLarge { .. } => CliError::usage(e.to_string()),
            e => CliError::runtime(e),
        })?);
    }
    Ok(points)
}

/// What one engine's run gives: its measurements, its judged report and its metrics.
struct DeviceRun {
    m: Measured,
    report: Report,
    frame: Frame,
}

/// Everything fixed before any engine opens, the same for every device of `--device all`.
struct Prepared<'a> {
    a: &'a ProfileArgs,
    checks: &'a Checks,
    src: &'a ModelSource,
    prompt: &'a [u32],
    plan: (Plan, usize),
    sweep: Option<&'a BatchPlan>,
    signals: &'a Interrupt,
}

/// Measure on `device`, build and judge its report (and run the `--batch` sweep on it).
fn run_device(
    p: &Prepared,
    device: &Device,
    note: Option<String>,
    metrics: Option<&Shared>,
) -> Result<DeviceRun, CliError> {
    let (a, src) = (p.a, p.src);
    let labels = metric_labels(src, device, a.engine.numerics_on(device));
    let shared = metrics.map(|s| (s, &labels));
    let m = measure(a, src, p.prompt, p.plan, device, p.signals, shared)?;
    let info = run_info(a, src, &m, p.checks, (p.prompt.len(), p.plan.1), note);
    let mut report = build(&info, &m.run, &p.checks.budgets);
    if let Some(plan) = p.sweep {
        report.batch = Some(run_batches(a, src, plan, device, p.signals)?);
    }
    judge(&mut report, &p.checks.gates, m.run.interrupted)?;
    let mut frame = Frame::from_report(labels, &m.run.stats, &report);
    frame.gpu = m
        .telemetry
        .as_ref()
        .and_then(|t| t.samples.last())
        .and_then(|s| s.gpu.clone());
    if let Some(shared) = metrics {
        shared.set_frame(frame.clone());
    }
    Ok(DeviceRun { m, report, frame })
}

/// `--device all`: one engine per GPU, each on its own thread with its own model copy, NVML
/// device and metrics slot; the first error (naming its GPU) ends the run.
fn run_devices(
    p: &Prepared,
    devices: &[Device],
    metrics: Option<&Shared>,
) -> Result<Vec<DeviceRun>, CliError> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let slot = metrics.map(|s| s.slot(i));
                scope.spawn(move || run_device(p, d, None, slot.as_ref()))
            })
            .collect();
        handles
            .into_iter()
            .zip(devices)
            .map(|(h, d)| {
                let name = device_metric_label(d);
                match h.join() {
                    Ok(r) => r.map_err(|mut e| {
                        e.message = format!("{name}: {}", e.message);
                        e
                    }),
                    Err(_) => Err(CliError::runtime(format!(
                        "{name}: the engine thread panicked"
                    ))),
                }
            })
            .collect()
    })
}

/// The report of several engines: the first's figures at the top level, every engine's own
/// report under `devices`, and the worst status (a failure anywhere fails the run).
fn combined(runs: &[DeviceRun]) -> Report {
    let mut top = runs[0].report.clone();
    top.devices = Some(runs.iter().map(|r| r.report.clone()).collect());
    let worst = |s: Status| runs.iter().any(|r| r.report.status == s);
    if worst(Status::Interrupted) {
        top.status = Status::Interrupted;
    } else if worst(Status::Fail) {
        top.status = Status::Fail;
    }
    top
}

/// `cbtop --headless`: validate, open, run, assemble, emit.
pub fn run_headless(a: ProfileArgs) -> Result<(), CliError> {
    // Caught from the start, so a signal at any point ends in a report or an exit code that
    // says so; the run itself stops at the next step boundary.
    let signals = Interrupt::install(&[SIGINT, SIGTERM])
        .map_err(|e| CliError::runtime(format!("installing signal handlers: {e}")))?;
    let checks = Checks::validate(&a)?;
    // The history and the listening address are arguments too: refused before the model.
    let mut db = match &a.db {
        Some(p) => Some(Db::open(p, true).map_err(db_error)?),
        None => None,
    };
    let metrics = start_metrics(&a)?;
    setup_threads(&a.engine)?;
    let mut src = load_model(a.model_path.as_deref())?;
    if let Some(warning) = a.engine.ctx.and_then(|c| src.extend_context(c)) {
        eprintln!("cbtop: warning: {warning}");
    }
    let prompt = prompt_tokens(&src, &a)?;
    let plan = plan(&a, &src, prompt.len())?;
    // Arguments and model are good: only now the device.
    let (devices, note) = resolve_devices(&a.engine)?;
    if let (Some(n), false) = (&note, a.ci) {
        eprintln!("cbtop: note: {n}");
    }
    let sweep = batch_sweep(&a, &src, &prompt)?;
    let prepared = Prepared {
        a: &a,
        checks: &checks,
        src: &src,
        prompt: &prompt,
        plan,
        sweep: sweep.as_ref(),
        signals: &signals,
    };
    let shared = metrics.as_ref().map(|(_, s)| s);
    let all = a.engine.device == DeviceArg::All;
    let runs = if all {
        if !a.ci {
            eprintln!("cbtop: profiling {} GPUs, one engine each", devices.len());
        }
        run_devices(&prepared, &devices, shared)?
    } else {
        vec![run_device(&prepared, &devices[0], note, shared)?]
    };
    let report = if all {
        combined(&runs)
    } else {
        runs[0].report.clone()
    };
    let frames: Vec<Frame> = runs.iter().map(|r| r.frame.clone()).collect();
    emit(&a, checks.fmt, &src, &runs, &report, &frames)?;
    if let Some(db) = &mut db {
        for r in &runs {
            append_history(db, &r.report, &r.m.run.samples, a.output.as_deref())?;
        }
    }
    if let (Some(secs), Some(_)) = (a.metrics_hold, &metrics) {
        hold(secs, &signals);
    }
    let interrupted = runs
        .iter()
        .any(|r| r.m.run.interrupted)
        .then(|| signals.signal().unwrap_or(SIGINT));
    if !all {
        return outcome(&report, interrupted, a.tokens);
    }
    runs.iter().try_for_each(|r| {
        let label = r.frame.labels.device.clone();
        outcome(&r.report, interrupted, a.tokens).map_err(|mut e| {
            e.message = format!("{label}: {}", e.message);
            e
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brick::stats::{Stats, TokenSample};
    use crate::profiler::session::Prefill;

    fn run_of(steps: &[(u64, u64)]) -> RunResult {
        RunResult {
            prefill: Prefill {
                tokens: 1,
                eval_ns: 1,
                ttft_ns: 1,
            },
            prefill_profile: None,
            stats: Stats::new(1),
            samples: steps
                .iter()
                .map(|&(start_ns, total_ns)| TokenSample {
                    start_ns,
                    total_ns,
                    position: 0,
                    spans: Vec::new(),
                    gaps_ns: None,
                    kernels: Vec::new(),
                })
                .collect(),
            unprofiled: None,
            interrupted: false,
            nonfinite_steps: 0,
        }
    }

    #[test]
    fn run_telemetry_keeps_the_samplers_verdict() {
        // Whatever this machine has (no NVML here: a reason; a GPU: samples), collecting never
        // panics, and every counter lies inside the measured window on the trace's clock.
        let s = Sampler::spawn(0, Duration::from_millis(5), 1000);
        let origin = Instant::now();
        std::thread::sleep(Duration::from_millis(60));
        let run = run_of(&[(10_000_000, 20_000_000), (30_000_000, 20_000_000)]);
        let t = RunTelemetry::collect(&s, origin, &run);
        match s.gpu_status() {
            Some(Ok(_)) => assert_eq!(t.summary.source, "nvml"),
            _ => {
                assert!(!t.summary.available && t.summary.reason.is_some());
                assert!(t.counters().is_empty());
            }
        }
        for c in t.counters() {
            assert!(
                (9_000.0..=51_000.0).contains(&c.ts_us),
                "{} at {} us",
                c.name,
                c.ts_us
            );
        }
    }
}
