//! `cbtop doctor`: what this machine offers cbtop. The CUDA driver, its CUDA version, NVRTC,
//! each GPU with its memory and compute capability, and when no GPU is usable, the one-line
//! reason (the same one `--device auto` prints when it falls back to the CPU). Always exits 0:
//! a machine without a GPU is a finding, not an error.

use super::error::CliError;
use crate::engine::cuda::probe::{probe, Probe};

/// The report as lines of text.
pub fn render(p: &Probe) -> String {
    let mut out = String::new();
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    out.push_str(&format!(
        "cuda driver:  {}{}\n",
        yes_no(p.driver_present),
        p.driver_cuda_version
            .as_ref()
            .map(|v| format!(" (CUDA {v})"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "nvrtc:        {}\n",
        p.nvrtc_version
            .as_ref()
            .map(|v| format!("yes ({v})"))
            .unwrap_or_else(|| "no".into())
    ));
    out.push_str(&format!("gpus:         {}\n", p.gpus.len()));
    for g in &p.gpus {
        out.push_str(&format!(
            "  cuda:{}  {}  {:.1} GiB  compute capability {}.{} ({})\n",
            g.ordinal,
            g.name,
            g.memory_total_bytes as f64 / (1u64 << 30) as f64,
            g.compute_capability.0,
            g.compute_capability.1,
            g.arch()
        ));
    }
    match &p.unusable {
        None => out.push_str("backend:      cuda (the default with --device auto)\n"),
        Some(r) => out.push_str(&format!("backend:      cpu (no usable GPU: {r})\n")),
    }
    out
}

pub fn run() -> Result<(), CliError> {
    print!("{}", render(&probe()));
    Ok(())
}
