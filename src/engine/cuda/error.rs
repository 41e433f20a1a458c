//! Driver errors as engine errors: every CUDA call's failure becomes one sentence naming what
//! was being done, with out-of-memory and kernel faults said plainly.

use cudarc::driver::{sys, DriverError};

use crate::engine::error::EngineError;

/// A device error as an engine error, out-of-memory and kernel faults named plainly.
pub fn device_error(what: &str, e: DriverError) -> EngineError {
    use sys::cudaError_enum as E;
    let why = match e.0 {
        E::CUDA_ERROR_OUT_OF_MEMORY => "out of GPU memory".to_string(),
        E::CUDA_ERROR_ILLEGAL_ADDRESS
        | E::CUDA_ERROR_MISALIGNED_ADDRESS
        | E::CUDA_ERROR_LAUNCH_FAILED
        | E::CUDA_ERROR_ILLEGAL_INSTRUCTION => format!("a GPU kernel failed ({:?})", e.0),
        other => format!("{other:?}"),
    };
    EngineError::Device(format!("{what}: {why}"))
}

/// `device_error` for `map_err`, naming what was being done.
pub(super) fn wrap(what: &'static str) -> impl FnOnce(DriverError) -> EngineError {
    move |e| device_error(what, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_errors_name_out_of_memory_and_kernel_faults() {
        use sys::cudaError_enum as E;
        let msg = |code| match device_error("uploading blk.0.ffn_up.weight", DriverError(code)) {
            EngineError::Device(m) => m,
            other => panic!("not a device error: {other:?}"),
        };
        assert_eq!(
            msg(E::CUDA_ERROR_OUT_OF_MEMORY),
            "uploading blk.0.ffn_up.weight: out of GPU memory"
        );
        let fault = msg(E::CUDA_ERROR_ILLEGAL_ADDRESS);
        assert!(fault.contains("a GPU kernel failed"), "{fault}");
        assert!(msg(E::CUDA_ERROR_INVALID_VALUE).contains("CUDA_ERROR_INVALID_VALUE"));
    }
}
