//! The PCI address of a CUDA device, so GPU telemetry (NVML) follows the GPU the engine runs on:
//! CUDA ordinals and NVML indices differ under `CUDA_VISIBLE_DEVICES` and when CUDA orders GPUs
//! fastest first. Kept outside the CUDA backend: one driver query, no context.

use cudarc::driver::sys;

/// `domain:bus:device.function` of CUDA device `ordinal`, or None without a usable driver.
pub fn pci_bus_id(ordinal: usize) -> Option<String> {
    // SAFETY: only tries to open the library; no symbol is called.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    let mut dev = 0;
    let mut buf = [0 as std::ffi::c_char; 64];
    // SAFETY: libcuda is present; cuInit is idempotent; out-parameters only, and the buffer's
    // length is passed.
    unsafe {
        if sys::cuInit(0) != sys::cudaError_enum::CUDA_SUCCESS
            || sys::cuDeviceGet(&mut dev, ordinal as i32) != sys::cudaError_enum::CUDA_SUCCESS
            || sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, dev)
                != sys::cudaError_enum::CUDA_SUCCESS
        {
            return None;
        }
    }
    // SAFETY: the driver wrote a NUL-terminated string into the zeroed buffer.
    let id = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(id.to_string_lossy().into_owned()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn never_panics_without_a_gpu() {
        if let Some(id) = super::pci_bus_id(0) {
            assert!(id.contains(':'), "{id}");
        }
        assert_eq!(super::pci_bus_id(1 << 20), None);
    }
}
