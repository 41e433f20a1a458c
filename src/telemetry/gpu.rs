//! GPU telemetry through NVML (`nvml-wrapper`, loading `libnvidia-ml.so.1` at run time, so the
//! binary runs on machines without a driver). Every reading is optional: a query a device does
//! not support leaves its field empty rather than failing the sample.

use std::ffi::OsStr;

use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::Serialize;

/// The NVML library the driver installs.
pub const NVML_LIB: &str = "libnvidia-ml.so.1";

/// One reading of one GPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GpuSample {
    pub name: String,
    /// Share of the last period with at least one kernel running (NVML), percent.
    pub util_pct: Option<u32>,
    /// Share of the last period with device memory being read or written (NVML), percent.
    pub mem_util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    /// PCIe throughput over NVML's last 20 ms window, KB/s.
    pub pcie_tx_kbps: Option<u32>,
    pub pcie_rx_kbps: Option<u32>,
}

/// An open NVML handle on one device index.
pub struct GpuProbe {
    nvml: Nvml,
    index: u32,
    name: String,
}

/// The one-line reason NVML could not be used.
pub fn explain(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => {
            format!("no GPU telemetry: NVML library {NVML_LIB} not found (no NVIDIA driver)")
        }
        NvmlError::DriverNotLoaded => {
            "no GPU telemetry: the NVIDIA driver is not loaded".to_string()
        }
        NvmlError::NoPermission => {
            "no GPU telemetry: no permission to talk to the NVIDIA driver".to_string()
        }
        other => format!("no GPU telemetry: NVML failed: {other}"),
    }
}

impl GpuProbe {
    /// Open GPU `index`, or say in one line why there is no GPU telemetry.
    pub fn open(index: u32) -> Result<GpuProbe, String> {
        let nvml = Nvml::builder()
            .lib_path(OsStr::new(NVML_LIB))
            .init()
            .map_err(|e| explain(&e))?;
        let count = nvml.device_count().map_err(|e| explain(&e))?;
        if count == 0 {
            return Err("no GPU telemetry: NVML sees no NVIDIA GPU".to_string());
        }
        if index >= count {
            return Err(format!(
                "no GPU telemetry: GPU {index} asked for, NVML sees {count}"
            ));
        }
        let name = nvml
            .device_by_index(index)
            .and_then(|d| d.name())
            .map_err(|e| explain(&e))?;
        Ok(GpuProbe { nvml, index, name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read everything the device answers; a failed query leaves its field empty.
    pub fn sample(&self) -> GpuSample {
        let Ok(d) = self.nvml.device_by_index(self.index) else {
            return GpuSample {
                name: self.name.clone(),
                ..GpuSample::default()
            };
        };
        let util = d.utilization_rates().ok();
        let mem = d.memory_info().ok();
        GpuSample {
            name: self.name.clone(),
            util_pct: util.as_ref().map(|u| u.gpu),
            mem_util_pct: util.as_ref().map(|u| u.memory),
            mem_used_bytes: mem.as_ref().map(|m| m.used),
            mem_total_bytes: mem.as_ref().map(|m| m.total),
            power_w: d.power_usage().ok().map(|mw| mw as f64 / 1e3),
            power_limit_w: d.enforced_power_limit().ok().map(|mw| mw as f64 / 1e3),
            sm_clock_mhz: d.clock_info(Clock::SM).ok(),
            mem_clock_mhz: d.clock_info(Clock::Memory).ok(),
            temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
            pcie_tx_kbps: d.pcie_throughput(PcieUtilCounter::Send).ok(),
            pcie_rx_kbps: d.pcie_throughput(PcieUtilCounter::Receive).ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_one_line() {
        for e in [
            NvmlError::LibraryNotFound,
            NvmlError::DriverNotLoaded,
            NvmlError::NoPermission,
            NvmlError::Unknown,
        ] {
            let r = explain(&e);
            assert!(
                r.starts_with("no GPU telemetry: ") && !r.contains('\n'),
                "{r}"
            );
        }
        assert!(explain(&NvmlError::LibraryNotFound).contains(NVML_LIB));
    }

    #[test]
    fn open_never_panics() {
        // On a machine without a driver this is the reason; with one, a name.
        match GpuProbe::open(0) {
            Ok(p) => assert!(!p.name().is_empty()),
            Err(r) => assert!(r.starts_with("no GPU telemetry: ")),
        }
    }
}
