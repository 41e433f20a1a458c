//! What the run happened on: CPU model, cores used and memory (the peaks the roofline is drawn
//! against are `brick::peaks::MeasuredPeaks`).

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
