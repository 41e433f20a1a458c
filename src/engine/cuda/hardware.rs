//! What the report says about the GPU the engine runs on: its description (name, driver,
//! NVRTC, memory, compute capability) and the roofline's peaks measured on it.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, DriverError, LaunchConfig, PushKernelArg};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::decode::CudaEngine;
use super::error::device_error;
use super::module;
use crate::brick::peaks::{MeasuredPeaks, Peak};

/// The GPU as the report describes it (`hardware.gpu`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuInfo {
    /// The CUDA ordinal (`--device cuda:N`).
    #[serde(default)]
    pub ordinal: usize,
    pub name: String,
    pub driver: String,
    pub cuda: String,
    pub memory_total_bytes: u64,
    pub compute_capability: String,
}

/// Threads per block of the compute peak probes.
const PROBE_THREADS: usize = 256;

impl CudaEngine {
    /// The report's GPU description.
    pub fn gpu_info(&self) -> GpuInfo {
        let p = super::probe::probe();
        GpuInfo {
            ordinal: self.gpu.ordinal,
            name: self.gpu.name.clone(),
            driver: p
                .driver_cuda_version
                .map(|v| format!("CUDA driver API {v}"))
                .unwrap_or_else(|| "unknown".into()),
            cuda: p
                .nvrtc_version
                .map(|v| format!("NVRTC {v}"))
                .unwrap_or_else(|| "unknown".into()),
            memory_total_bytes: self.gpu.memory_total_bytes,
            compute_capability: format!(
                "{}.{}",
                self.gpu.compute_capability.0, self.gpu.compute_capability.1
            ),
        }
    }

    /// The roofline's peaks measured on this GPU: device-to-device copy bandwidth (bytes read
    /// plus written, best of 5 copies of 256 MiB), f32 FMA throughput (best of 3) and the
    /// tensor cores' f16 mma throughput (best of 5; sm_80 and later), all timed with CUDA
    /// events.
    pub fn measure_peaks(&self) -> Result<MeasuredPeaks, String> {
        let err = |e: DriverError| device_error("measuring the GPU's peaks", e).to_string();
        let s = &self.stream;
        let n = 64usize << 20; // f32s: 256 MiB
        let src = s.alloc_zeros::<f32>(n).map_err(err)?;
        let mut dst = s.alloc_zeros::<f32>(n).map_err(err)?;
        let copy_ms = self
            .best_ms(5, || s.memcpy_dtod(&src, &mut dst))
            .map_err(err)?;
        let bandwidth_gbps = 2.0 * (n * 4) as f64 / (copy_ms as f64 * 1e-3) / 1e9;
        drop((src, dst));

        let sms = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(err)? as usize;
        let iters = 4096i32;
        // f32 FMA: 8 chains per thread, 2 flops each per iteration.
        let blocks = sms * 8;
        let fma_ms = self.probe_ms("fma_probe", blocks, iters, None, 3)?;
        let flops = 2.0 * 8.0 * iters as f64 * (blocks * PROBE_THREADS) as f64;
        // The tensor cores (mma.sync f16 -> f32, 8 chains per warp, 4096 flops per mma).
        let blocks = sms * 4;
        let mma_ms = self.probe_ms("mma_probe", blocks, iters, Some(16), 5)?;
        let mmas = (blocks * PROBE_THREADS / 32) as f64 * iters as f64 * 8.0;
        let tensor = (self.gpu.compute_capability.0 >= 8).then(|| Peak {
            value: mmas * 4096.0 / (mma_ms as f64 * 1e-3) / 1e9,
            source: "gpu_mma_f16_probe",
        });
        Ok(MeasuredPeaks {
            bandwidth: Peak {
                value: bandwidth_gbps,
                source: "d2d_copy",
            },
            compute: Peak {
                value: flops / (fma_ms as f64 * 1e-3) / 1e9,
                source: "gpu_fma_probe",
            },
            tensor,
            int8: None,
            cache_bandwidth: None,
        })
    }

    /// The shortest of `reps` runs of `op` on the engine's stream, timed with CUDA events, ms.
    fn best_ms(
        &self,
        reps: usize,
        mut op: impl FnMut() -> Result<(), DriverError>,
    ) -> Result<f32, DriverError> {
        let s = &self.stream;
        let ev = |c: &Arc<CudaContext>| c.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        let (a, b) = (ev(&self.ctx)?, ev(&self.ctx)?);
        let mut best = f32::MAX;
        for _ in 0..reps {
            a.record(s)?;
            op()?;
            b.record(s)?;
            best = best.min(a.elapsed_ms(&b)?);
        }
        Ok(best)
    }

    /// The best of `reps` launches of peak probe `name` (kernels/peaks.cu, `(out, iters)`) on
    /// `blocks` blocks of PROBE_THREADS, ms; after one launch of `warm` iterations, if given.
    fn probe_ms(
        &self,
        name: &str,
        blocks: usize,
        iters: i32,
        warm: Option<i32>,
        reps: usize,
    ) -> Result<f32, String> {
        let err = |e: DriverError| device_error("measuring the GPU's peaks", e).to_string();
        let s = &self.stream;
        let f = module::function(&self.module, name)?;
        let mut out = s.alloc_zeros::<f32>(blocks * PROBE_THREADS).map_err(err)?;
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (PROBE_THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = |n: i32| {
            // SAFETY: the probe writes one float per thread into `out` (blocks × threads).
            unsafe { s.launch_builder(&f).arg(&mut out).arg(&n).launch(cfg) }.map(|_| ())
        };
        if let Some(w) = warm {
            launch(w).map_err(err)?;
        }
        self.best_ms(reps, || launch(iters)).map_err(err)
    }
}
