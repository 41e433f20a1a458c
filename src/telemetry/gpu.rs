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

/// The NVML index of the GPU at PCI address `pci_bus_id` (`domain:bus:device.function`, as
/// CUDA reports it), when NVML knows it. CUDA ordinals and NVML indices differ under
/// `CUDA_VISIBLE_DEVICES` or when CUDA orders GPUs fastest first, so telemetry follows the
/// PCI address of the GPU the engine runs on, not its ordinal.
pub fn nvml_index_of(pci_bus_id: &str) -> Result<u32, String> {
    let nvml = Nvml::builder()
        .lib_path(OsStr::new(NVML_LIB))
        .init()
        .map_err(|e| explain(&e))?;
    nvml.device_by_pci_bus_id(pci_bus_id)
        .and_then(|d| d.index())
        .map_err(|e| explain(&e))
}

/// Theoretical peak memory bandwidth from NVML's maximum memory clock (MHz) and bus width
/// (bits), GB/s: clock x width / 8 x 2 (two transfers per clock). NVML's memory clock for HBM
/// and GDDR is the one this product gives the datasheet figure with (H100 SXM: 2619 MHz x
/// 5120 bits -> 3352 GB/s). None when either reading is zero.
pub fn theoretical_bandwidth_gbps(mem_clock_mhz: u32, bus_width_bits: u32) -> Option<f64> {
    (mem_clock_mhz > 0 && bus_width_bits > 0)
        .then(|| mem_clock_mhz as f64 * 1e6 * (bus_width_bits as f64 / 8.0) * 2.0 / 1e9)
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

    /// The NVML index of this device.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// NVML's theoretical peak memory bandwidth of this device, GB/s (see
    /// [`theoretical_bandwidth_gbps`]), or why NVML could not say.
    pub fn peak_bandwidth_gbps(&self) -> Result<f64, String> {
        let d = self
            .nvml
            .device_by_index(self.index)
            .map_err(|e| explain(&e))?;
        let clock = d.max_clock_info(Clock::Memory).map_err(|e| explain(&e))?;
        let width = d.memory_bus_width().map_err(|e| explain(&e))?;
        theoretical_bandwidth_gbps(clock, width)
            .ok_or_else(|| format!("NVML reports memory clock {clock} MHz and bus {width} bits"))
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
    fn theoretical_bandwidth() {
        let h100 = theoretical_bandwidth_gbps(2619, 5120).unwrap();
        assert!((h100 - 3352.32).abs() < 1e-6, "{h100}");
        let rtx4090 = theoretical_bandwidth_gbps(10501, 384).unwrap();
        assert!((rtx4090 - 1008.096).abs() < 1e-6, "{rtx4090}");
        assert_eq!(theoretical_bandwidth_gbps(0, 5120), None);
        assert_eq!(theoretical_bandwidth_gbps(2619, 0), None);
    }

    #[test]
    fn nvml_index_never_panics() {
        match nvml_index_of("00000000:00:00.0") {
            Ok(_) => {}
            Err(r) => assert!(r.starts_with("no GPU telemetry: "), "{r}"),
        }
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
