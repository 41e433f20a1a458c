//! What the run happened on: CPU model, cores used, memory, and the measured peaks the
//! roofline is drawn against.

use crate::brick::cost::Roof;
use crate::brick::peaks::{self, Peak};

/// The host, as far as the report needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub cpu_model: String,
    pub threads: usize,
    pub memory_bytes: u64,
}

impl Host {
    pub fn detect() -> Host {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        Host {
            cpu_model,
            threads: rayon::current_num_threads(),
            memory_bytes,
        }
    }
}

/// Peaks measured on this machine, with their sources.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPeaks {
    pub bandwidth: Peak,
    pub compute: Peak,
    /// The tensor cores' f16 peak (GPU only), the compute roof of prompt products that run
    /// on them.
    pub tensor: Option<Peak>,
    /// The CPU's int8 dot peak (`peaks::cpu_int8_dot_throughput`), the compute roof of a
    /// prompt's products whose weights are quantized (their dots are integer multiply-adds).
    pub int8: Option<Peak>,
}

impl MeasuredPeaks {
    /// Run the CPU probes (about half a second).
    pub fn probe_cpu() -> MeasuredPeaks {
        MeasuredPeaks {
            bandwidth: peaks::cpu_read_bandwidth(),
            compute: peaks::cpu_fma_throughput(),
            tensor: None,
            int8: peaks::cpu_int8_dot_throughput(),
        }
    }

    /// The compute peak a prompt's bricks are judged against (its quantized products on the CPU
    /// take `int8` instead, `analysis::analyze_prefill`): the tensor cores' when its
    /// products ran on them (and that peak was measured), else the FMA peak.
    pub fn prefill_compute(&self, tensor_cores: bool) -> &Peak {
        match (&self.tensor, tensor_cores) {
            (Some(t), true) => t,
            _ => &self.compute,
        }
    }

    /// The roof for a prompt's bricks (`prefill_compute`).
    pub fn prefill_roof(&self, tensor_cores: bool) -> Roof {
        self.roof_with(self.prefill_compute(tensor_cores))
    }

    pub fn roof(&self) -> Roof {
        self.roof_with(&self.compute)
    }

    /// The measured bandwidth under `compute`.
    pub fn roof_with(&self, compute: &Peak) -> Roof {
        Roof {
            bandwidth_gbps: self.bandwidth.value,
            compute_gflops: compute.value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peak(value: f64, source: &'static str) -> Peak {
        Peak { value, source }
    }

    #[test]
    fn a_prompt_on_tensor_cores_is_judged_by_their_peak() {
        let mut p = MeasuredPeaks {
            bandwidth: peak(3000.0, "d2d_copy"),
            compute: peak(60_000.0, "gpu_fma_probe"),
            tensor: Some(peak(600_000.0, "gpu_mma_f16_probe")),
            int8: None,
        };
        assert_eq!(p.prefill_compute(true).source, "gpu_mma_f16_probe");
        assert_eq!(p.prefill_roof(true).compute_gflops, 600_000.0);
        assert_eq!(p.prefill_compute(false).source, "gpu_fma_probe");
        assert_eq!(p.prefill_roof(false).compute_gflops, 60_000.0);
        assert_eq!(p.prefill_roof(true).bandwidth_gbps, 3000.0);
        p.tensor = None;
        assert_eq!(p.prefill_compute(true).source, "gpu_fma_probe");
    }
}
