//! The engine's surroundings chosen from the command line: which device `--device` resolves
//! to, the NVML index of that GPU for telemetry, and the thread pool of `--threads`.

use super::args::{self, DeviceArg};
use super::error::CliError;
use crate::engine::cuda::probe::probe;
use crate::engine::Device;

/// The NVML index of the GPU `device` is, found by its PCI address (else its CUDA ordinal), for
/// the telemetry thread; None on the CPU.
pub fn nvml_index(device: &Device) -> Option<u32> {
    let Device::Cuda(g) = device else { return None };
    Some(
        crate::engine::gpu_pci::pci_bus_id(g.ordinal)
            .and_then(|id| crate::telemetry::gpu::nvml_index_of(&id).ok())
            .unwrap_or(g.ordinal as u32),
    )
}

/// Resolve `--device`: auto is the GPU when `gpu_capable` and one is usable, else the CPU, with
/// the reason returned as a note (`running on the CPU: ...`) for the caller to print and
/// record; cuda when unusable is exit 3 with the reason. Called once the arguments and the
/// model have been checked, so a bad input is never preceded by device messages.
pub fn resolve_device(
    e: &args::EngineArgs,
    gpu_capable: bool,
) -> Result<(Device, Option<String>), CliError> {
    Ok(match e.device {
        DeviceArg::Cpu => (Device::Cpu, None),
        DeviceArg::Auto if !gpu_capable => (Device::Cpu, None),
        DeviceArg::Auto => match probe().gpu(0) {
            Ok(g) => (Device::Cuda(g.clone()), None),
            Err(reason) => (Device::Cpu, Some(format!("running on the CPU: {reason}"))),
        },
        DeviceArg::All => {
            return Err(CliError::usage(
                "--device all profiles every GPU (cbtop or cbtop --headless); this command runs \
                 on one device: give cuda:N",
            ))
        }
        DeviceArg::Cuda(n) => match probe().gpu(n) {
            Ok(g) => (Device::Cuda(g.clone()), None),
            Err(reason) => {
                return Err(CliError::runtime(format!(
                    "--device cuda:{n}: no usable CUDA GPU: {reason}"
                )))
            }
        },
    })
}

/// Resolve `--device` for the profile, where `all` is every usable GPU in ordinal order (exit 3
/// with the reason when there is none); any other value is `resolve_device`'s one device.
pub fn resolve_devices(e: &args::EngineArgs) -> Result<(Vec<Device>, Option<String>), CliError> {
    if e.device != DeviceArg::All {
        let (d, note) = resolve_device(e, true)?;
        return Ok((vec![d], note));
    }
    let p = probe();
    match &p.unusable {
        Some(reason) => Err(CliError::runtime(format!(
            "--device all: no usable CUDA GPU: {reason}"
        ))),
        None if p.gpus.is_empty() => Err(CliError::runtime(
            "--device all: no usable CUDA GPU: the driver lists no CUDA device",
        )),
        None => Ok((p.gpus.iter().cloned().map(Device::Cuda).collect(), None)),
    }
}

/// Apply `--threads` (an argument check, before the model is read: loading may already use
/// the thread pool).
pub fn setup_threads(e: &args::EngineArgs) -> Result<(), CliError> {
    if let Some(n) = e.threads {
        if n == 0 {
            return Err(CliError::usage("--threads must be at least 1"));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|err| CliError::runtime(format!("--threads {n}: {err}")))?;
        crate::engine::cpu::pool::init(n);
    }
    Ok(())
}
