//! Calibration of the per-launch GPU timestamps (`clock.rs`) against work of known length:
//! kernels that spin a given number of SM clock cycles (kernels/spin.cu), grouped into bricks,
//! captured into one CUDA graph and timed exactly as a decode step is. The spin rate comes
//! from CUDA events around one long spin, an independent clock. The same bricks launched one
//! by one with a stream sync and the host clock around each give the `sync` cross-check.
//! Used by tests/gpu_timing.rs on a GPU.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaGraph, CudaStream, DriverError, LaunchConfig,
};

use super::clock::{self, KernelClock, Owner, PinnedBuf, Resolved, Slot};
use super::error::device_error;
use super::module;
use super::pdl_launch::{pdl_for, Launch, PushArg};
use super::probe::GpuDesc;
use crate::brick::Brick;
use crate::engine::error::EngineError;

/// One brick of spin kernels, each of the given number of cycles.
#[derive(Clone, Debug)]
pub struct SpinBrick {
    pub brick: Brick,
    pub cycles: Vec<i64>,
}

/// A captured graph of spin bricks and the owners of its stamped launches.
pub struct SpinStep {
    graph: CudaGraph,
    owners: Vec<Slot>,
}

/// What one replay measured.
#[derive(Clone, Debug)]
pub struct SpinRun {
    pub stamps: Resolved,
    /// Host wall time from before the launch to after the synchronisation.
    pub host_ns: u64,
}

pub struct TimingCheck {
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    spin: CudaFunction,
    /// Launched as the engine launches (pdl_launch.rs).
    pdl: bool,
    clock: KernelClock,
    tok: PinnedBuf<u32>,
    dummy: cudarc::driver::CudaSlice<u32>,
}

fn err(what: &'static str) -> impl Fn(DriverError) -> EngineError {
    move |e| device_error(what, e)
}

impl TimingCheck {
    pub fn new(gpu: &GpuDesc) -> Result<TimingCheck, EngineError> {
        let ctx = CudaContext::new(gpu.ordinal).map_err(err("creating a CUDA context"))?;
        // cudarc's per-slice event tracking records events a graph capture cannot hold.
        // SAFETY: one stream does all of this check's work.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(err("creating a CUDA stream"))?;
        let (m, _) = module::load(&ctx, &gpu.arch()).map_err(EngineError::Device)?;
        let spin = module::function(&m, "spin").map_err(EngineError::Device)?;
        Ok(TimingCheck {
            clock: KernelClock::new(&stream, 256).map_err(err("allocating the kernel clock"))?,
            tok: PinnedBuf::new(&ctx, 1).map_err(err("allocating pinned memory"))?,
            dummy: stream.alloc_zeros(1).map_err(err("allocating"))?,
            stream,
            ctx,
            spin,
            pdl: pdl_for(gpu.compute_capability),
        })
    }

    fn launch_spin(&mut self, cycles: i64) -> Result<(), DriverError> {
        let st = self.clock.stamp();
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: spin reads nothing and writes only its stamp slot.
        unsafe {
            Launch::new(&self.stream, &self.spin, self.pdl)
                .arg(&cycles)
                .stamp(&st)
                .launch(cfg)
        }
        .map(|_| ())
    }

    /// SM clock cycles per microsecond: one spin of `cycles` timed with CUDA events (best of 3).
    pub fn cycles_per_us(&mut self, cycles: i64) -> Result<f64, EngineError> {
        let ev = |c: &Arc<CudaContext>| c.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        let e = err("timing a spin with events");
        let (a, b) = (ev(&self.ctx).map_err(&e)?, ev(&self.ctx).map_err(&e)?);
        let mut best = f32::MAX;
        self.clock.arm(false, 0);
        for _ in 0..3 {
            a.record(&self.stream).map_err(&e)?;
            self.launch_spin(cycles).map_err(&e)?;
            b.record(&self.stream).map_err(&e)?;
            best = best.min(a.elapsed_ms(&b).map_err(&e)?);
        }
        Ok(cycles as f64 / (best as f64 * 1e3))
    }

    /// Capture `bricks` into one graph with stamped kernels, as the engine captures a step
    /// (the stamps and a 4-byte result copied back at the end).
    pub fn capture(&mut self, bricks: &[SpinBrick]) -> Result<SpinStep, EngineError> {
        let e = err("capturing the spin graph");
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        self.stream.begin_capture(mode).map_err(&e)?;
        self.clock.arm(true, 0);
        let mut launched = Ok(());
        for b in bricks {
            self.clock.enter(Some(Owner {
                brick: b.brick,
                layer: None,
            }));
            for &c in &b.cycles {
                launched = launched.and_then(|_| self.launch_spin(c));
            }
            self.clock.enter(None);
        }
        let copied = self.tok.copy_from(&self.stream, &self.dummy, 1);
        let owners = self.clock.finish(&self.stream, false, &[]);
        let graph = self
            .stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(&e)?;
        launched.and(copied).map_err(&e)?;
        let owners = owners.map_err(EngineError::Device)?;
        let graph =
            graph.ok_or_else(|| EngineError::Device("the capture came back empty".into()))?;
        Ok(SpinStep { graph, owners })
    }

    /// Replay a captured step once and fold its stamps.
    pub fn replay(&mut self, step: &SpinStep) -> Result<SpinRun, EngineError> {
        let e = err("replaying the spin graph");
        let t0 = Instant::now();
        step.graph.launch().map_err(&e)?;
        self.stream.synchronize().map_err(&e)?;
        let host_ns = t0.elapsed().as_nanos() as u64;
        let stamps = clock::resolve(&step.owners, self.clock.stamps(0))
            .map_err(|m| EngineError::Device(format!("reading the spin stamps: {m}")))?;
        Ok(SpinRun { stamps, host_ns })
    }

    /// Each brick launched on its own with a stream sync and the host clock around it (the
    /// engine's `sync` timing), nanoseconds per brick.
    pub fn synced(&mut self, bricks: &[SpinBrick]) -> Result<Vec<u64>, EngineError> {
        let e = err("timing spins with host syncs");
        self.clock.arm(false, 0);
        let mut out = Vec::with_capacity(bricks.len());
        for b in bricks {
            self.stream.synchronize().map_err(&e)?;
            let t0 = Instant::now();
            for &c in &b.cycles {
                self.launch_spin(c).map_err(&e)?;
            }
            self.stream.synchronize().map_err(&e)?;
            out.push(t0.elapsed().as_nanos() as u64);
        }
        Ok(out)
    }
}
