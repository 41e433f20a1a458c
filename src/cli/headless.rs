//! `cbtop --headless`: profile a model without the TUI and write the report (JSON, Markdown or
//! CSV), evaluate CI gates, optionally export a Chrome/Perfetto trace. stdout carries only the
//! report; progress (for runs over a second) and errors go to stderr.
//!
//! Checks come in DESIGN.md's order: arguments, then the model, then the device. SIGINT and
//! SIGTERM stop the run at the next step boundary and write what was measured (`interrupt`).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::args::{FormatArg, ProfileArgs, TimingArg};
use super::interrupt::{self, Interrupt, SIGINT, SIGTERM};
use super::output::write_file;
use super::{exit, nvml_index, resolve_device, setup_threads, CliError};
use crate::brick::id::is_valid_id;
use crate::brick::BrickId;
use crate::engine::backend::{timing_label, Backend};
use crate::engine::Timing;
use crate::profiler::analysis::{analyze, analyze_prefill, Budgets};
use crate::profiler::hardware::{Host, MeasuredPeaks};
use crate::profiler::model_source::ModelSource;
use crate::profiler::run::{run_until, Plan, RunResult};
use crate::profiler::session::Session;
use crate::report::build::{build, RunInfo};
use crate::report::gates::{apply_gates, evaluate, failure_summary, GateFlags, GateSpec};
use crate::report::telemetry::{summarize, trace_counters as telemetry_counters, Window};
use crate::report::trace::{write_trace, TraceCounter, TraceSpan};
use crate::report::{format, Assertion, RunConfig, Status};
use crate::telemetry::{GpuProbe, Sampler, TelemetrySample};

/// Evaluated when no `--prompt` is given.
pub const DEFAULT_PROMPT: &str = "The history of computing is a story of machines that got \
    faster every year, and of the people who measured exactly where the time went.";

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
            "--json and --format md/csv ask for different formats; give one",
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

fn trace_data(run: &RunResult) -> (Vec<TraceSpan>, Vec<TraceCounter>) {
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

pub fn run_headless(a: ProfileArgs) -> Result<(), CliError> {
    // Caught from the start, so a signal at any point ends in a report or an exit code that
    // says so; the run itself stops at the next step boundary.
    let signals = Interrupt::install(&[SIGINT, SIGTERM])
        .map_err(|e| CliError::runtime(format!("installing signal handlers: {e}")))?;
    let fmt = output_format(&a)?;
    if a.tokens == 0 {
        return Err(CliError::usage("--tokens must be at least 1"));
    }
    // Gates are validated (and the baseline loaded) before the run, so a typo fails fast.
    let spec = GateSpec::from_flags(GateFlags {
        min_tok_s: a.min_tok_s,
        min_score: a.min_score,
        max_cv: a.max_cv,
        max_brick_us: &a.max_brick_us,
        baseline: a.baseline.as_deref(),
        max_regression: a.max_regression,
    })
    .map_err(CliError::usage)?;
    if let Some((id, _)) = spec.max_brick_us.iter().find(|(id, _)| !is_valid_id(id)) {
        return Err(CliError::usage(format!(
            "--max-brick-us {id}: not a brick id (ids: {}; fused ids join them with +)",
            BrickId::ALL.map(|b| b.name()).join(", ")
        )));
    }
    let budgets = Budgets::from_profile(a.profile.as_deref()).map_err(CliError::usage)?;
    setup_threads(&a.engine)?;
    let src = load_model(a.model_path.as_deref())?;
    let prompt = prompt_tokens(&src, &a)?;
    let profiled = a.timing != TimingArg::Off;
    let plan = Plan {
        warmup: a.warmup,
        tokens: a.tokens,
        profiled,
        measure_overhead: profiled,
    };
    let need = prompt.len() + plan.steps() + 1;
    let model_ctx = src.model.config.context_length;
    let ctx = a.engine.ctx.unwrap_or(need);
    if need > ctx.min(model_ctx) {
        return Err(CliError::usage(format!(
            "--ctx {}: the prompt ({}) and {} decode steps (--warmup {}, --tokens {}{}) need {need} \
             positions (model context {model_ctx})",
            ctx,
            prompt.len(),
            plan.steps(),
            a.warmup,
            a.tokens,
            if plan.measure_overhead { ", twice for the overhead" } else { "" },
        )));
    }
    // Arguments and model are good: only now the device.
    let (device, note) = resolve_device(&a.engine, true)?;
    if let (Some(n), false) = (&note, a.ci) {
        eprintln!("cbtop: note: {n}");
    }
    let mut progress = Progress::new(a.ci);
    progress.update(0, plan.steps(), "measuring peaks");
    let host = Host::detect();
    let timing = Timing::from(a.timing);
    let engine = Backend::open(&src.model, ctx, &device, timing, a.engine.numerics.into())
        .map_err(|e| CliError::runtime(format!("--device {e}")))?;
    let peaks = match &engine {
        Backend::Cuda(e) => e.measure_peaks().map_err(CliError::runtime)?,
        Backend::Cpu(_) => MeasuredPeaks::probe_cpu(),
    };
    let timing_label = timing_label(&device, timing);
    let gpu_info = match &engine {
        Backend::Cuda(e) => Some(e.gpu_info()),
        Backend::Cpu(_) => None,
    };
    let backend_name = engine.name();
    let prompt_tensor = engine.prompt_on_tensor_cores(prompt.len());
    let numerics = engine.numerics();
    let n_layers = src.model.config.n_layers;
    // GPU telemetry for the run: NVML on the GPU the engine uses, sampled on its own thread.
    let nvml = nvml_index(&device);
    let nvml_peak = nvml.map(|i| GpuProbe::open(i).and_then(|p| p.peak_bandwidth_gbps()));
    let sampler = nvml.map(|i| Sampler::spawn(i, TELEMETRY_PERIOD, TELEMETRY_KEEP));
    let mut session = Session::new(engine, prompt.clone());
    let result = run_until(
        &mut session,
        n_layers,
        plan,
        |d, t| progress.update(d, t, "decoding"),
        || signals.caught(),
    )
    .map_err(CliError::runtime)?;
    progress.finish();
    let tele = sampler.map(|s| RunTelemetry::collect(&s, session.origin(), &result));

    let shapes = crate::brick::cost::Shapes::new(&src.model.config, &src.model.weights);
    // Judged by the int8 dot peak where one was measured (the CPU).
    let int8 = crate::brick::cost::quantized_products(&src.model.weights);
    let mut analysis = analyze(&result.stats, &shapes, &peaks.roof(), &budgets);
    analysis.prefill = result.prefill_profile.as_ref().map(|s| {
        let tokens = result.prefill.tokens;
        analyze_prefill(s, tokens, n_layers, &shapes, &peaks, prompt_tensor, &int8)
    });
    let info = RunInfo {
        model: &src.model,
        model_path: src.path.clone(),
        synthetic: src.synthetic,
        file_size: src.file_size,
        host: &host,
        peaks: &peaks,
        config: RunConfig {
            timing: timing_label.to_string(),
            numerics,
            warmup: a.warmup as u64,
            tokens: a.tokens as u64,
            measured_tokens: result.samples.len() as u64,
            prefill: prompt.len() as u64,
            ctx: ctx as u64,
            profile: a.profile.clone(),
            target_efficiency: budgets.target_efficiency,
        },
    };
    let mut report = build(&info, &result, &analysis);
    report.hardware.backend = backend_name.to_string();
    report.hardware.note = note;
    report.assertions = assertions(&result);
    if gpu_info.is_some() {
        report.hardware.gpu = gpu_info;
    }
    if let Some(Ok(gbps)) = nvml_peak {
        // Beside the measured copy; the roofline keeps the measured peak (`bandwidth_source`).
        report
            .hardware
            .peaks
            .bandwidth_candidates
            .insert("nvml_bus".to_string(), gbps);
    }
    if let Some(t) = &tele {
        report.telemetry = t.summary.clone();
    }
    let interrupted = result
        .interrupted
        .then(|| signals.signal().unwrap_or(SIGINT));
    let status = if interrupted.is_some() {
        // Gates judge a complete run; these numbers are not one.
        report.status = Status::Interrupted;
        Status::Interrupted
    } else {
        let gates = evaluate(&spec, &report).map_err(CliError::usage)?;
        apply_gates(&mut report, gates);
        if report.assertions.iter().any(|x| !x.pass) {
            report.status = Status::Fail;
        }
        report.status
    };

    if let Some(path) = &a.trace {
        let (spans, mut counters) = trace_data(&result);
        if let Some(t) = &tele {
            counters.extend(t.counters());
        }
        let title = format!("cbtop: {}", src.label());
        write_file("--trace", path, |w| {
            write_trace(w, &title, &spans, &counters)
        })?;
    }
    let text = match fmt {
        FormatArg::Json => format::to_json(&report),
        FormatArg::Md => format::to_markdown(&report),
        FormatArg::Csv => format::to_csv(&report),
    };
    write_out(a.output.as_deref(), &text)?;
    if let Some(sig) = interrupted {
        return Err(CliError {
            code: interrupt::exit_code(sig),
            message: format!(
                "interrupted by {}: the report holds {} of {} measured steps, status INTERRUPTED",
                interrupt::name(sig),
                result.samples.len(),
                a.tokens
            ),
        });
    }
    if status == Status::Fail {
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
