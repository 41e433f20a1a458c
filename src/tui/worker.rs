//! The engine thread: builds the engine `--device` chose (CPU, or CUDA with `--timing`) and owns
//! it, measures the device's peaks, evaluates the prompt, then decodes token after token through
//! a profiled `Session`, publishing a fresh `Snapshot` about ten times a second. The UI thread
//! never touches the backend (and so never calls CUDA): it only reads snapshots.
//! The shared slot is locked only to swap an `Arc`, never while a token is being decoded, so
//! the UI thread never waits on the engine. Without a user prompt, decoding goes on forever:
//! when the context fills, the prompt is evaluated again and a restart counter goes up.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::collect;
use super::live_metrics;
use super::snapshot::{BatchSweep, Header, Phase, Snapshot};
use crate::brick::cost::Shapes;
use crate::brick::peaks::MeasuredPeaks;
use crate::brick::stats::{Series, Stats};
use crate::engine::backend::{Backend, Device};
use crate::engine::cpu::CpuBatch;
use crate::engine::cuda::CudaBatch;
use crate::engine::{Numerics, Timing};
use crate::model::Model;
use crate::profiler::analysis::{analyze, Budgets};
use crate::profiler::batch::{run_point, Sweep};
use crate::profiler::session::Session;

/// How often a snapshot is published while decoding.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// One step in this many is decoded without per-brick timing, for the overhead figure.
const UNPROFILED_EVERY: u64 = 4;
/// Characters of generated text kept in a snapshot.
const TEXT_TAIL: usize = 4000;

/// What to run.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub prompt: Vec<u32>,
    pub ctx: usize,
    /// Steps discarded after start and after a reset.
    pub warmup: usize,
    /// Per-brick timing (false for `--timing off`).
    pub profiled: bool,
    pub budgets: Budgets,
    pub header: Header,
    /// Where the engine runs, as `--device` resolved, and how bricks are timed there.
    pub device: Device,
    pub timing: Timing,
    /// The numerics the engine runs with (`EngineArgs::numerics_on`).
    pub numerics: Numerics,
    /// NVML's theoretical peak memory bandwidth of the GPU in use, GB/s, when known.
    pub nvml_peak_gbps: Option<f64>,
    /// `--batch`: batch sizes decoded before the single stream, and the sequences' prompts
    /// (taken in turn; one prompt is varied per sequence).
    pub batch: Vec<usize>,
    pub batch_prompts: Vec<Vec<u32>>,
    /// `--metrics-listen`: where each published snapshot's metrics go, and their labels.
    pub metrics: Option<(crate::metrics::Shared, crate::metrics::Labels)>,
}

/// Why the drill-down's kernels or the `w` timeline are empty or untimed, where they are.
fn kernels_note(c: &EngineConfig) -> Option<String> {
    match (&c.device, c.timing) {
        (_, _) if !c.profiled => Some("no per-brick timing (--timing off): no kernels".into()),
        (Device::Cpu, _) => Some(
            "CPU: kernels named as chosen at run time; bricks are timed, kernels are not".into(),
        ),
        (Device::Cuda(_), Timing::Events) => None,
        (Device::Cuda(_), _) => Some(
            "GPU kernels are listed and timed from their own stamps: run with --timing events"
                .into(),
        ),
    }
}

/// Measured steps of each batch size of the live view's sweep (after two warm-up steps).
pub const BATCH_STEPS: usize = 32;

/// Requests from the UI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Pause(bool),
    Reset,
    Quit,
}

/// The running engine thread and its latest snapshot.
pub struct EngineHandle {
    latest: Arc<Mutex<Arc<Snapshot>>>,
    tx: Sender<Command>,
    thread: Option<JoinHandle<()>>,
}

/// Why the engine thread did not start.
#[derive(Debug)]
pub enum SpawnError {
    /// The OS would not start the thread.
    Thread(std::io::Error),
    /// The engine could not be built on the device (one sentence).
    Engine(String),
}

impl EngineHandle {
    /// Start the engine thread and wait until it has built its engine (on a GPU: context,
    /// weights uploaded, kernels compiled), so a device error is reported before the terminal
    /// is taken over.
    pub fn spawn(model: Arc<Model>, cfg: EngineConfig) -> Result<EngineHandle, SpawnError> {
        let first = Snapshot {
            header: cfg.header.clone(),
            ctx_size: cfg.ctx,
            ..Snapshot::default()
        };
        let latest = Arc::new(Mutex::new(Arc::new(first)));
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let slot = latest.clone();
        let thread = std::thread::Builder::new()
            .name("cbtop-engine".into())
            .spawn(move || Worker::new(model, cfg, slot, rx).run(ready_tx))
            .map_err(SpawnError::Thread)?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(SpawnError::Engine(e));
            }
            Err(_) => {
                let _ = thread.join();
                return Err(SpawnError::Engine(
                    "the engine thread ended before the engine was built".into(),
                ));
            }
        }
        Ok(EngineHandle {
            latest,
            tx,
            thread: Some(thread),
        })
    }

    /// The latest published snapshot (a pointer copy).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn send(&self, c: Command) {
        let _ = self.tx.send(c);
    }

    /// Ask the thread to stop and wait for it: at most one decode step, but not for the whole
    /// peak probe (after two seconds the thread is left to end with the process).
    pub fn stop(&mut self) {
        self.send(Command::Quit);
        if let Some(t) = self.thread.take() {
            let t0 = Instant::now();
            while !t.is_finished() && t0.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Everything the engine thread owns.
struct Worker {
    model: Arc<Model>,
    cfg: EngineConfig,
    slot: Arc<Mutex<Arc<Snapshot>>>,
    rx: Receiver<Command>,
    stats: Stats,
    unprofiled: Series,
    warm_left: usize,
    steps: u64,
    restarts: u64,
    nonfinite: u64,
    paused: bool,
    ttft_ms: Option<f64>,
    prefill_tok_s: Option<f64>,
    batch: BatchSweep,
}

enum Flow {
    Go,
    Quit,
}

impl Worker {
    fn new(
        model: Arc<Model>,
        cfg: EngineConfig,
        slot: Arc<Mutex<Arc<Snapshot>>>,
        rx: Receiver<Command>,
    ) -> Worker {
        let n_layers = model.config.n_layers;
        Worker {
            warm_left: cfg.warmup,
            model,
            cfg,
            slot,
            rx,
            stats: Stats::new(n_layers),
            unprofiled: Series::new(3),
            steps: 0,
            restarts: 0,
            nonfinite: 0,
            paused: false,
            ttft_ms: None,
            prefill_tok_s: None,
            batch: BatchSweep::default(),
        }
    }

    fn publish(&self, s: Snapshot) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(s);
    }

    fn publish_phase(&self, phase: Phase, error: Option<String>) {
        let mut s = (**self.slot.lock().unwrap_or_else(|p| p.into_inner())).clone();
        s.phase = phase;
        s.error = error;
        s.batch = self.batch.clone();
        self.publish(s);
    }

    /// `--batch`: each size decoded on `engine` in turn (`profiler::batch::run_point`), its
    /// row published as it ends; a size that fails ends the sweep with its reason shown.
    /// Returns false when the user quit.
    fn sweep(&mut self, engine: &mut Backend) -> bool {
        self.batch.sizes = self.cfg.batch.clone();
        let sweep = Sweep {
            warmup: 2,
            tokens: BATCH_STEPS,
            profiled: self.cfg.profiled,
        };
        let ctx = self.cfg.ctx;
        for n in self.cfg.batch.clone() {
            self.publish_phase(Phase::Batch, None);
            if let Flow::Quit = self.poll() {
                return false;
            }
            let prompts = &self.cfg.batch_prompts;
            let point = match engine {
                Backend::Cpu(e) => {
                    CpuBatch::new(e, ctx, n).and_then(|mut b| run_point(&mut b, prompts, sweep))
                }
                Backend::Cuda(e) => {
                    CudaBatch::new(e, ctx, n).and_then(|mut b| run_point(&mut b, prompts, sweep))
                }
            };
            match point {
                Ok(p) => self.batch.rows.push(collect::batch_row(&p)),
                Err(e) => {
                    self.batch.error = Some(format!("batch {n}: {e}"));
                    break;
                }
            }
        }
        true
    }

    fn handle(&mut self, c: Command) -> Flow {
        match c {
            Command::Quit => return Flow::Quit,
            Command::Pause(p) => self.paused = p,
            Command::Reset => {
                self.stats = Stats::new(self.model.config.n_layers);
                self.unprofiled = Series::new(3);
                self.nonfinite = 0;
                self.warm_left = self.cfg.warmup;
            }
        }
        Flow::Go
    }

    /// Apply every pending command; while paused, wait for one.
    fn poll(&mut self) -> Flow {
        loop {
            let c = if self.paused {
                match self.rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(c) => c,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return Flow::Quit,
                }
            } else {
                match self.rx.try_recv() {
                    Ok(c) => c,
                    Err(mpsc::TryRecvError::Empty) => return Flow::Go,
                    Err(mpsc::TryRecvError::Disconnected) => return Flow::Quit,
                }
            };
            if let Flow::Quit = self.handle(c) {
                return Flow::Quit;
            }
            // Show the user's key at once: a resumed engine may spend its next
            // step on a prefill before the periodic snapshot would say so.
            let phase = if self.paused {
                Phase::Paused
            } else {
                Phase::Running
            };
            self.publish_phase(phase, None);
        }
    }

    fn run(mut self, ready: SyncSender<Result<(), String>>) {
        let c = &self.cfg;
        let engine = match Backend::open(&self.model, c.ctx, &c.device, c.timing, c.numerics) {
            Ok(e) => e,
            Err(e) => {
                let _ = ready.send(Err(format!("--device {e}")));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        self.publish_phase(Phase::Probing, None);
        let peaks = match engine.measure_peaks() {
            Ok(p) => p,
            Err(e) => return self.publish_phase(Phase::Stopped, Some(e)),
        };
        let roof = peaks.roof();
        let shapes = Shapes::new(&self.model.config, &self.model.weights);
        let mut engine = engine;
        if !self.cfg.batch.is_empty() && !self.sweep(&mut engine) {
            return;
        }
        let mut session = Session::new(engine, self.cfg.prompt.clone());
        let mut last = Instant::now() - PUBLISH_EVERY;
        let mut first = true;
        loop {
            if let Flow::Quit = self.poll() {
                return;
            }
            if first || session.room() == 0 {
                if !first {
                    self.restarts += 1;
                }
                // Only the first prompt shows as PREFILL: a restart when the context is full
                // is part of running (the view counts restarts), and on a small model it
                // comes every few milliseconds, which would leave the header flickering.
                if first {
                    self.publish_phase(Phase::Prefill, None);
                }
                match session.prefill() {
                    Ok(p) => {
                        self.ttft_ms = Some(p.ttft_ns as f64 / 1e6);
                        self.prefill_tok_s =
                            (p.eval_ns > 0).then(|| p.tokens as f64 / (p.eval_ns as f64 / 1e9));
                    }
                    Err(e) => return self.publish_phase(Phase::Stopped, Some(e.to_string())),
                }
                if first {
                    self.publish_phase(Phase::Running, None);
                }
                first = false;
                continue;
            }
            let profiled_at =
                |step: u64| self.cfg.profiled && step % UNPROFILED_EVERY != UNPROFILED_EVERY - 1;
            let profiled = profiled_at(self.steps);
            // Telling the engine the next step lets the GPU run it while this one is read.
            let next = Some(profiled_at(self.steps + 1));
            let sample = match session.step_then(profiled, next) {
                Ok(s) => s,
                Err(e) => return self.publish_phase(Phase::Stopped, Some(e.to_string())),
            };
            self.steps += 1;
            self.nonfinite += session.nonfinite_logits() as u64;
            if self.warm_left > 0 {
                self.warm_left -= 1;
                // The bricks' histograms are made now, not inside the first measured step.
                self.stats.prepare(&sample);
            } else if profiled || !self.cfg.profiled {
                self.stats.add(&sample);
            } else {
                self.unprofiled.record(sample.total_ns);
            }
            if last.elapsed() >= PUBLISH_EVERY {
                last = Instant::now();
                let snap = self.build(&session, &shapes, &roof, &peaks);
                if let Some((shared, labels)) = &self.cfg.metrics {
                    shared.set_frame(live_metrics::frame(labels, &self.stats, &snap));
                }
                self.publish(snap);
            }
        }
    }

    fn build(
        &self,
        session: &Session,
        shapes: &Shapes,
        roof: &crate::brick::cost::Roof,
        peaks: &MeasuredPeaks,
    ) -> Snapshot {
        let a = analyze(&self.stats, shapes, roof, &self.cfg.budgets);
        let kernels = session.engine().kernels();
        let model = &self.model;
        let text = model.tokenizer.decode(session.generated());
        Snapshot {
            header: self.cfg.header.clone(),
            phase: if self.paused {
                Phase::Paused
            } else {
                Phase::Running
            },
            throughput: collect::throughput(
                &self.stats.token,
                &self.stats.recent_token_us,
                &self.unprofiled,
                self.ttft_ms,
                self.prefill_tok_s,
            ),
            bricks: collect::bricks(&self.stats, &a, &kernels),
            gaps_us: a.gaps_us,
            gaps_share_pct: a.gaps_share_percent,
            other_us: a.other_us,
            other_share_pct: a.other_share_percent,
            token_us: a.token_us,
            score: a.score,
            grade: a.grade.to_string(),
            worst: a.worst.clone(),
            peaks: Some(collect::peaks(peaks, self.cfg.nvml_peak_gbps)),
            text: collect::tail(&text, TEXT_TAIL),
            restarts: self.restarts,
            ctx_used: session.engine().position(),
            ctx_size: session.engine().context(),
            nonfinite_logits: self.nonfinite,
            error: None,
            batch: self.batch.clone(),
            timeline: collect::timeline(&self.stats, &kernels),
            kernels_note: kernels_note(&self.cfg),
        }
    }
}
