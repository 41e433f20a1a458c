//! The telemetry thread: samples the GPU (when there is one) and the host every period and keeps
//! the latest readings and a short history behind a mutex held only to copy. Dropping the
//! `Sampler` stops and joins the thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::gpu::{GpuProbe, GpuSample};
use super::host::{HostProbe, HostSample};

/// One reading of everything.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TelemetrySample {
    /// Milliseconds since the sampler started.
    pub at_ms: u64,
    /// None when there is no GPU telemetry (see [`Sampler::gpu_status`]).
    pub gpu: Option<GpuSample>,
    pub host: HostSample,
}

struct Shared {
    /// Ok(GPU name) or Err(one-line reason); None until the thread has tried NVML.
    gpu_status: Option<Result<String, String>>,
    history: VecDeque<TelemetrySample>,
}

/// A running telemetry thread.
pub struct Sampler {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    keep: usize,
    period: Duration,
    started: Instant,
}

impl Sampler {
    /// Start sampling GPU `gpu_index` and the host every `period`, keeping `keep` samples.
    pub fn spawn(gpu_index: u32, period: Duration, keep: usize) -> Sampler {
        let shared = Arc::new(Mutex::new(Shared {
            gpu_status: None,
            history: VecDeque::with_capacity(keep),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::Builder::new()
                .name("cbtop-telemetry".into())
                .spawn(move || sample_loop(gpu_index, period, keep.max(1), started, &shared, &stop))
                .ok()
        };
        Sampler {
            shared,
            stop,
            thread,
            keep,
            period,
            started,
        }
    }

    /// The instant `TelemetrySample::at_ms` counts from.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The sampling period asked for.
    pub fn period(&self) -> Duration {
        self.period
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ok(GPU name), Err(why there is no GPU telemetry), or None before the first attempt.
    pub fn gpu_status(&self) -> Option<Result<String, String>> {
        self.lock().gpu_status.clone()
    }

    pub fn latest(&self) -> Option<TelemetrySample> {
        self.lock().history.back().cloned()
    }

    /// Up to the last `keep` samples, oldest first.
    pub fn history(&self) -> Vec<TelemetrySample> {
        self.lock().history.iter().cloned().collect()
    }

    pub fn capacity(&self) -> usize {
        self.keep
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn sample_loop(
    gpu_index: u32,
    period: Duration,
    keep: usize,
    t0: Instant,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
) {
    let gpu = GpuProbe::open(gpu_index);
    let status = gpu
        .as_ref()
        .map(|g| g.name().to_string())
        .map_err(Clone::clone);
    shared.lock().unwrap_or_else(|p| p.into_inner()).gpu_status = Some(status);
    let gpu = gpu.ok();
    let mut host = HostProbe::new();
    while !stop.load(Ordering::Relaxed) {
        let next = Instant::now() + period;
        let sample = TelemetrySample {
            at_ms: t0.elapsed().as_millis() as u64,
            gpu: gpu.as_ref().map(GpuProbe::sample),
            host: host.sample(),
        };
        {
            let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
            if s.history.len() == keep {
                s.history.pop_front();
            }
            s.history.push_back(sample);
        }
        // Sleep in short slices so drop() does not wait a whole period.
        while !stop.load(Ordering::Relaxed) && Instant::now() < next {
            std::thread::sleep(Duration::from_millis(10).min(period));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_stops() {
        let s = Sampler::spawn(0, Duration::from_millis(5), 3);
        let t0 = Instant::now();
        while s.history().len() < 3 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(s.history().len(), 3, "history is capped at keep");
        assert!(s.gpu_status().is_some());
        let h = s.history();
        assert!(h.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        drop(s);
    }
}
