//! Is a CUDA GPU usable here, and what is it? cudarc loads libcuda and libnvrtc dynamically and
//! panics on first use when a library is missing, so this probe checks that both libraries load
//! before making any other cudarc call. Every failure becomes a one-line reason.

use cudarc::driver::{sys, CudaContext};

/// One GPU as the driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuDesc {
    pub ordinal: usize,
    pub name: String,
    pub memory_total_bytes: u64,
    /// `(major, minor)`, e.g. `(9, 0)` for an H100.
    pub compute_capability: (i32, i32),
}

impl GpuDesc {
    /// NVRTC's architecture name for this GPU, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// What the probe found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// libcuda loaded.
    pub driver_present: bool,
    /// The CUDA version the driver supports, e.g. `13.0`.
    pub driver_cuda_version: Option<String>,
    /// libnvrtc loaded, and its version.
    pub nvrtc_version: Option<String>,
    pub gpus: Vec<GpuDesc>,
    /// Why no GPU can be used; `None` when one can.
    pub unusable: Option<String>,
}

impl Probe {
    /// The GPU `ordinal`, or the reason it cannot be used.
    pub fn gpu(&self, ordinal: usize) -> Result<&GpuDesc, String> {
        if let Some(r) = &self.unusable {
            return Err(r.clone());
        }
        self.gpus.get(ordinal).ok_or_else(|| {
            format!(
                "GPU {ordinal} does not exist ({} CUDA device(s) found)",
                self.gpus.len()
            )
        })
    }
}

fn version_string(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Probe the driver, NVRTC and the GPUs. Never panics on a machine without CUDA.
pub fn probe() -> Probe {
    let mut p = Probe {
        // SAFETY: only tries to open the library; no symbol is called.
        driver_present: unsafe { sys::is_culib_present() },
        ..Probe::default()
    };
    if !p.driver_present {
        p.unusable = Some(
            "no CUDA driver: libcuda could not be loaded (no NVIDIA GPU or driver here)".into(),
        );
        return p;
    }
    // SAFETY: libcuda is present, so the dynamically loaded symbols resolve.
    let init = unsafe { sys::cuInit(0) };
    if init != sys::cudaError_enum::CUDA_SUCCESS {
        p.unusable = Some(format!("the CUDA driver failed to initialise: {init:?}"));
        return p;
    }
    let mut v = 0;
    // SAFETY: plain out-parameter call into a present library.
    if unsafe { sys::cuDriverGetVersion(&mut v) } == sys::cudaError_enum::CUDA_SUCCESS {
        p.driver_cuda_version = Some(version_string(v));
    }
    // SAFETY: only tries to open the library.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: libnvrtc is present; out-parameters only.
        let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        p.nvrtc_version = Some(if r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
            format!("{major}.{minor}")
        } else {
            "unknown".into()
        });
    }
    let count = match CudaContext::device_count() {
        Ok(n) => n.max(0) as usize,
        Err(e) => {
            p.unusable = Some(format!("listing CUDA devices failed: {:?}", e.0));
            return p;
        }
    };
    for ordinal in 0..count {
        match describe(ordinal) {
            Ok(d) => p.gpus.push(d),
            Err(e) => {
                p.unusable = Some(format!("GPU {ordinal}: {:?}", e.0));
                return p;
            }
        }
    }
    if p.gpus.is_empty() {
        p.unusable = Some("the CUDA driver is present but reports no GPU".into());
    } else if p.nvrtc_version.is_none() {
        p.unusable = Some(
            "NVRTC (libnvrtc) could not be loaded: cbtop compiles its kernels at run time with it"
                .into(),
        );
    }
    p
}

fn describe(ordinal: usize) -> Result<GpuDesc, cudarc::driver::DriverError> {
    let mut dev = 0;
    // SAFETY: driver initialised; out-parameters only.
    unsafe {
        sys::cuDeviceGet(&mut dev, ordinal as i32).result()?;
    }
    let mut name = [0 as std::ffi::c_char; 256];
    let mut mem = 0usize;
    let (mut major, mut minor) = (0, 0);
    use sys::CUdevice_attribute as A;
    // SAFETY: as above; the name buffer is 256 bytes and its length is passed.
    unsafe {
        sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev).result()?;
        sys::cuDeviceTotalMem_v2(&mut mem, dev).result()?;
        sys::cuDeviceGetAttribute(
            &mut major,
            A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            dev,
        )
        .result()?;
        sys::cuDeviceGetAttribute(
            &mut minor,
            A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            dev,
        )
        .result()?;
    }
    // SAFETY: the driver writes a NUL-terminated string into the buffer.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Ok(GpuDesc {
        ordinal,
        name,
        memory_total_bytes: mem as u64,
        compute_capability: (major, minor),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics_and_explains_itself() {
        let p = probe();
        assert_eq!(
            p.unusable.is_none(),
            !p.gpus.is_empty() && p.nvrtc_version.is_some()
        );
        if let Some(r) = &p.unusable {
            assert!(!r.is_empty());
            assert!(p.gpu(0).is_err());
        }
    }

    #[test]
    fn arch_names() {
        let g = GpuDesc {
            ordinal: 0,
            name: "x".into(),
            memory_total_bytes: 1,
            compute_capability: (9, 0),
        };
        assert_eq!(g.arch(), "sm_90");
        assert_eq!(version_string(13000), "13.0");
        assert_eq!(version_string(12080), "12.8");
    }
}
