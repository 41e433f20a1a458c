//! The live view (docs/DESIGN.md "TUI"): three threads. The engine thread decodes through a
//! profiled `Session` and publishes plain `Snapshot`s; the telemetry thread samples NVML and the
//! host at about 10 Hz; this (UI) thread reads the latest of both, renders at most 30 frames a
//! second and polls keys every 33 ms or less, so it never waits on a token being decoded.
//!
//! Modules: `app` (keys → state), `snapshot` (the data views draw), `collect` (profiler →
//! snapshot), `worker` (the engine thread), `views` (one module per screen), `terminal` (raw
//! mode, restore on drop, on panic and on SIGINT/SIGTERM/SIGHUP), `export` (the `e` key).
//! The command-line glue (flags → `EngineConfig`,
//! `LiveError` → exit code) is `cli::live`; nothing here knows about the command line.

pub mod app;
mod collect;
pub mod export;
mod live_metrics;
pub mod snapshot;
mod terminal;
pub mod views;
pub mod worker;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossterm::event::{self, Event};

use crate::model::Model;
use crate::telemetry::Sampler;
use app::{Action, App};
use cbtop_widgets::Theme;
use snapshot::TelemetryView;
use views::Ui;
use worker::{Command, EngineConfig, EngineHandle, SpawnError};

/// Frames are drawn at most this often (30 fps).
pub const FRAME_INTERVAL: Duration = Duration::from_millis(33);
/// Longest wait for a key before looking at the snapshots again.
pub const KEY_POLL: Duration = Duration::from_millis(33);
/// Telemetry period (about 10 Hz) and samples kept (30 s).
pub const TELEMETRY_PERIOD: Duration = Duration::from_millis(100);
pub const TELEMETRY_KEEP: usize = 300;

/// The model to profile and how to label it.
pub struct Source {
    pub model: Arc<Model>,
    /// What the header calls it: name and path, or "embedded default".
    pub label: String,
    /// Random weights of a real shape: labelled "synthetic weights" everywhere.
    pub synthetic: bool,
}

/// Why the live view ended other than by a quit key.
#[derive(Debug)]
pub enum LiveError {
    /// The engine thread did not start or could not build its engine (one sentence).
    Engine(String),
    /// The terminal or the signal handlers failed (one sentence).
    Terminal(String),
    /// Ended by this signal (SIGINT, SIGTERM or SIGHUP), the terminal restored.
    Interrupted(i32),
}

/// One engine on screen: its configuration and the NVML index of the GPU its telemetry
/// thread samples (the one the engine runs on, else the first).
pub struct Pane {
    pub cfg: EngineConfig,
    pub nvml_index: u32,
}

/// An engine running with its telemetry beside it.
struct Running {
    engine: EngineHandle,
    sampler: Sampler,
    metrics: Option<crate::metrics::Shared>,
}

/// Run the live view until the user quits: one engine per pane (`--device all`: one per GPU,
/// each on its own thread with its own model copy). Every engine is built (and a device error
/// reported, exit 3) before the terminal is taken over.
pub fn run_live(source: Source, panes: Vec<Pane>, status: String) -> Result<(), LiveError> {
    let many = panes.len() > 1;
    let mut running = Vec::with_capacity(panes.len());
    for p in panes {
        let sampler = Sampler::spawn(p.nvml_index, TELEMETRY_PERIOD, TELEMETRY_KEEP);
        let metrics = p.cfg.metrics.as_ref().map(|(shared, _)| shared.clone());
        let device = p.cfg.header.device.clone();
        let engine = EngineHandle::spawn(Arc::clone(&source.model), p.cfg).map_err(|e| {
            let m = match e {
                SpawnError::Thread(e) => format!("starting the engine thread: {e}"),
                SpawnError::Engine(m) => m,
            };
            LiveError::Engine(if many { format!("{device}: {m}") } else { m })
        })?;
        running.push(Running {
            engine,
            sampler,
            metrics,
        });
    }
    // SIGINT/SIGTERM end the loop within a frame, so the terminal is restored before the
    // exit; SIGHUP (and a loop that does not end) is the watcher's (`terminal`).
    let signals = terminal::SignalWatch::start()
        .map_err(|e| LiveError::Terminal(format!("installing signal handlers: {e}")))?;
    match ui_loop(running, status, &signals) {
        Ok(None) => Ok(()),
        Ok(Some(sig)) => Err(LiveError::Interrupted(sig)),
        // A closed terminal fails the next draw (EIO) about when the kernel's SIGHUP lands;
        // give the watcher a moment so a hangup reports as one (129), not as an I/O error.
        Err(e) => match signals.wait_caught(HANGUP_GRACE) {
            Some(sig) => Err(LiveError::Interrupted(sig)),
            None => Err(LiveError::Terminal(format!("terminal: {e}"))),
        },
    }
}

/// How long a terminal error waits for the signal that may explain it (see `run_live`).
const HANGUP_GRACE: Duration = Duration::from_millis(500);

/// Runs until a quit key (`None`) or a caught signal (`Some(signal)`).
fn ui_loop(
    mut running: Vec<Running>,
    status: String,
    signals: &terminal::SignalWatch,
) -> std::io::Result<Option<i32>> {
    let theme = Theme::from_env();
    let mut app = App {
        status,
        panes: running.len(),
        ..App::default()
    };
    let mut guard = terminal::TerminalGuard::enter()?;
    let mut last_draw: Option<Instant> = None;
    let mut caught = None;
    let mut failed = None;
    // `?` that leaves the loop, so the terminal is handed back the same way on every exit.
    macro_rules! io {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        };
    }
    loop {
        if let Some(sig) = signals.caught() {
            caught = Some(sig);
            break;
        }
        if last_draw.is_none_or(|t| t.elapsed() >= FRAME_INTERVAL) {
            let seen: Vec<_> = running
                .iter()
                .map(|r| {
                    let tele = TelemetryView {
                        gpu: r.sampler.gpu_status(),
                        history: r.sampler.history(),
                    };
                    if let Some(m) = &r.metrics {
                        m.set_gpu(tele.latest().and_then(|s| s.gpu.clone()));
                    }
                    (r.engine.snapshot(), tele)
                })
                .collect();
            let uis: Vec<Ui> = seen
                .iter()
                .map(|(snap, tele)| Ui {
                    snap,
                    tele,
                    app: &app,
                    theme,
                })
                .collect();
            io!(guard.terminal.draw(|f| views::draw_panes(f, &uis)));
            last_draw = Some(Instant::now());
        }
        let wait = last_draw
            .map_or(Duration::ZERO, |t| {
                FRAME_INTERVAL.saturating_sub(t.elapsed())
            })
            .min(KEY_POLL);
        if !io!(event::poll(wait)) {
            continue;
        }
        match io!(event::read()) {
            Event::Key(k) => {
                let focused = &running[app.pane.min(running.len() - 1)].engine;
                let rows = focused.snapshot().bricks.len();
                match app.on_key(k, rows) {
                    Action::Quit => break,
                    Action::Pause(p) => running
                        .iter()
                        .for_each(|r| r.engine.send(Command::Pause(p))),
                    Action::Reset => running.iter().for_each(|r| r.engine.send(Command::Reset)),
                    Action::Export => app.status = export_now(focused),
                    Action::None => {}
                }
                last_draw = None;
            }
            Event::Resize(..) => {
                io!(guard.terminal.autoresize());
                last_draw = None;
            }
            _ => {}
        }
    }
    // A draw that failed because of the signal: the signal is the cause.
    let caught = caught.or_else(|| signals.caught());
    drop(guard);
    running.iter_mut().for_each(|r| r.engine.stop());
    match (failed, caught) {
        (Some(e), None) => Err(e),
        _ => Ok(caught),
    }
}

fn export_now(engine: &EngineHandle) -> String {
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    match export::write(&engine.snapshot(), &dir, unix) {
        Ok(p) => format!("exported {}", p.display()),
        Err(e) => format!("export failed: {e}"),
    }
}
