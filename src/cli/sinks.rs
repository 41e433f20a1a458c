//! Where a run goes besides its report: the `--metrics-listen` server (bound before anything
//! runs, the labels of its metrics) and the `--db` history (appended after the report is
//! written, so a failed append never loses it). Shared by the headless run and the live view.

use std::path::Path;
use std::time::{Duration, Instant};

use super::args::ProfileArgs;
use super::error::CliError;
use super::history::db_error;
use super::interrupt::Interrupt;
use crate::brick::stats::TokenSample;
use crate::engine::backend::Device;
use crate::engine::Numerics;
use crate::history::db::{current_commit, step_samples};
use crate::history::Db;
use crate::metrics::{Labels, MetricsServer, Shared};
use crate::profiler::model_source::ModelSource;
use crate::report::Report;

/// `--metrics-listen`: bind before anything runs (an address in use is exit 2, naming it).
pub fn start_metrics(a: &ProfileArgs) -> Result<Option<(MetricsServer, Shared)>, CliError> {
    let Some(addr) = &a.metrics_listen else {
        return Ok(None);
    };
    let shared = Shared::default();
    let server = MetricsServer::bind(addr, shared.clone()).map_err(CliError::usage)?;
    // Always said (also under --ci): with port 0 this is the only way to learn the port.
    eprintln!(
        "cbtop: serving /metrics on http://{}/metrics",
        server.local_addr()
    );
    Ok(Some((server, shared)))
}

/// The `device` label of the metrics: `cpu` or `cuda:N`.
pub fn device_metric_label(device: &Device) -> String {
    match device {
        Device::Cpu => "cpu".to_string(),
        Device::Cuda(g) => format!("cuda:{}", g.ordinal),
    }
}

/// The labels of every metric: the model, `cpu` or `cuda:N`, the numerics.
pub fn metric_labels(src: &ModelSource, device: &Device, numerics: Numerics) -> Labels {
    Labels {
        model: src.model.name(),
        device: device_metric_label(device),
        numerics: numerics.name().to_string(),
    }
}

/// `--db`: append the report. A failure is exit 3 naming the file, and says where the report
/// went (it is written before this).
pub fn append_history(
    db: &mut Db,
    report: &Report,
    steps: &[TokenSample],
    output: Option<&Path>,
) -> Result<(), CliError> {
    let samples = step_samples(steps);
    db.append(report, &samples, current_commit().as_deref())
        .map(|_| ())
        .map_err(|e| {
            let mut e = db_error(e);
            e.message = match output {
                Some(p) => format!("{}; the report was written to {}", e.message, p.display()),
                None => format!("{}; the report was written to stdout", e.message),
            };
            e
        })
}

/// `--metrics-hold`: keep serving for a while after the report, ended early by a signal.
pub fn hold(seconds: f64, signals: &Interrupt) {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < until && !signals.caught() {
        std::thread::sleep(Duration::from_millis(50));
    }
}
