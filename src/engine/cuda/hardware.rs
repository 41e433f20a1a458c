//! What the report says about the GPU the engine runs on: its description (name, driver,
//! NVRTC, memory, compute capability) and the roofline's peaks measured on it.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, DriverError, LaunchConfig, PushKernelArg};

use super::engine::CudaEngine;
use super::error::device_error;
use super::module;

impl CudaEngine {
    /// The report's GPU description.
    pub fn gpu_info(&self) -> crate::report::types::GpuInfo {
        let p = super::probe::probe();
        crate::report::types::GpuInfo {
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
    pub fn measure_peaks(&self) -> Result<crate::profiler::hardware::MeasuredPeaks, String> {
        use crate::brick::peaks::Peak;
        let err = |e: DriverError| device_error("measuring the GPU's peaks", e).to_string();
        let s = &self.stream;
        let n = 64usize << 20; // f32s: 256 MiB
        let src = s.alloc_zeros::<f32>(n).map_err(err)?;
        let mut dst = s.alloc_zeros::<f32>(n).map_err(err)?;
        let ev = |c: &Arc<CudaContext>| c.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        let (a, b) = (ev(&self.ctx).map_err(err)?, ev(&self.ctx).map_err(err)?);
        let mut best_ms = f32::MAX;
        for _ in 0..5 {
            a.record(s).map_err(err)?;
            s.memcpy_dtod(&src, &mut dst).map_err(err)?;
            b.record(s).map_err(err)?;
            best_ms = best_ms.min(a.elapsed_ms(&b).map_err(err)?);
        }
        let bandwidth_gbps = 2.0 * (n * 4) as f64 / (best_ms as f64 * 1e-3) / 1e9;
        drop((src, dst));

        let sms = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(err)? as usize;
        let (blocks, threads, iters) = (sms * 8, 256usize, 4096i32);
        let f = module::function(&self.module, "fma_probe")?;
        let mut out = s.alloc_zeros::<f32>(blocks * threads).map_err(err)?;
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut best_fma = f32::MAX;
        for _ in 0..3 {
            a.record(s).map_err(err)?;
            // SAFETY: writes blocks × threads floats into `out`.
            unsafe { s.launch_builder(&f).arg(&mut out).arg(&iters).launch(cfg) }.map_err(err)?;
            b.record(s).map_err(err)?;
            best_fma = best_fma.min(a.elapsed_ms(&b).map_err(err)?);
        }
        let flops = 2.0 * 8.0 * iters as f64 * (blocks * threads) as f64;

        // The tensor cores (mma.sync f16 -> f32, 8 chains per warp, 4096 flops per mma).
        let (blocks, mma_iters) = (sms * 4, 4096i32);
        let f = module::function(&self.module, "mma_probe")?;
        let mut out = s.alloc_zeros::<f32>(blocks * threads).map_err(err)?;
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            ..cfg
        };
        let warm = 16i32;
        // SAFETY: writes blocks × threads floats into `out`.
        unsafe { s.launch_builder(&f).arg(&mut out).arg(&warm).launch(cfg) }.map_err(err)?;
        let mut best_mma = f32::MAX;
        for _ in 0..5 {
            a.record(s).map_err(err)?;
            // SAFETY: as above.
            unsafe {
                s.launch_builder(&f)
                    .arg(&mut out)
                    .arg(&mma_iters)
                    .launch(cfg)
            }
            .map_err(err)?;
            b.record(s).map_err(err)?;
            best_mma = best_mma.min(a.elapsed_ms(&b).map_err(err)?);
        }
        let mmas = (blocks * threads / 32) as f64 * mma_iters as f64 * 8.0;
        let tensor = (self.gpu.compute_capability.0 >= 8).then(|| Peak {
            value: mmas * 4096.0 / (best_mma as f64 * 1e-3) / 1e9,
            source: "gpu_mma_f16_probe",
        });
        Ok(crate::profiler::hardware::MeasuredPeaks {
            bandwidth: Peak {
                value: bandwidth_gbps,
                source: "d2d_copy",
            },
            compute: Peak {
                value: flops / (best_fma as f64 * 1e-3) / 1e9,
                source: "gpu_fma_probe",
            },
            tensor,
        })
    }
}
