//! Kernel launches through `cuLaunchKernelEx`, so a launch can carry programmatic dependent
//! launch (PDL, Hopper and later). cudarc's launch builder calls `cuLaunchKernel`, which takes
//! no launch attributes, hence this small builder with the same `.arg(..).launch(cfg)` shape.
//!
//! Why PDL: a decode step is ~10 kernels per layer, each a few microseconds, and between two
//! dependent kernels of a CUDA graph the GPU idles about a microsecond while the next one is
//! launched and its blocks are scheduled (the report's `gaps`). With PDL the next kernel's
//! blocks are launched while the current one still runs and wait on the GPU (`pdl_wait` in
//! kernels/common.cuh, inside every kernel's `STAMP_GUARD`) until it has finished and its
//! writes are visible; the products prefetch their weights before that wait. The arithmetic
//! and its order are unchanged, so both numerics may use it.
//!
//! `CBTOP_PDL=0` turns it off (for measuring what it is worth).

use std::ffi::c_void;
use std::marker::PhantomData;

use super::clock::Stamp;
use super::launch_log::LaunchLog;
use cudarc::driver::{
    sys, CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut,
    DriverError, LaunchConfig,
};

/// Whether launches on a GPU of compute capability `cc` use programmatic dependent launch:
/// from sm_90 on, unless `CBTOP_PDL=0`.
pub fn pdl_for(cc: (i32, i32)) -> bool {
    cc.0 >= 9 && std::env::var("CBTOP_PDL").map_or(true, |v| v != "0")
}

/// One kernel argument: a device pointer's value (kept here, so the argument array can point
/// at it) or the address of a host value that outlives the launch.
enum Arg {
    Dev(sys::CUdeviceptr),
    Host(*const c_void),
}

/// How the engine's launches are made: with PDL or not, and the log their kernels are noted
/// in (launch_log.rs).
#[derive(Clone, Copy)]
pub struct Launcher<'a> {
    pub pdl: bool,
    pub log: Option<&'a LaunchLog>,
}

impl<'a> Launcher<'a> {
    /// A launch of `f` on `s`.
    pub fn launch(self, s: &'a CudaStream, f: &'a CudaFunction) -> Launch<'a> {
        let mut l = Launch::new(s, f, self.pdl);
        l.log = self.log;
        l
    }
}

/// A kernel launch being built: `Launch::new(stream, func, pdl).arg(..)...stamp(&st)
/// .launch(cfg)`.
pub struct Launch<'a> {
    stream: &'a CudaStream,
    func: &'a CudaFunction,
    pdl: bool,
    args: Vec<Arg>,
    log: Option<&'a LaunchLog>,
    /// The stamp slot's address (0: not stamped).
    stamp: u64,
    /// The tensor the kernel reads, for the log.
    reads: Option<&'a str>,
    _host: PhantomData<&'a ()>,
}

impl<'a> Launch<'a> {
    /// Push a plain value passed by address (the driver copies it at launch).
    pub fn host_value<T>(&mut self, arg: &'a T) -> &mut Self {
        self.args.push(Arg::Host(arg as *const T as *const c_void));
        self
    }

    pub fn new(stream: &'a CudaStream, func: &'a CudaFunction, pdl: bool) -> Launch<'a> {
        Launch {
            stream,
            func,
            pdl,
            args: Vec::with_capacity(20),
            log: None,
            stamp: 0,
            reads: None,
            _host: PhantomData,
        }
    }

    /// Push the trailing argument every kernel takes, its stamp slot (clock.rs).
    pub fn stamp(&mut self, st: &'a Stamp) -> &mut Self {
        self.stamp = st.ptr;
        self.host_value(&st.ptr)
    }

    /// Name the tensor the kernel reads (name and GGML type), for the launch log.
    pub fn reads(&mut self, what: &'a str) -> &mut Self {
        self.reads = Some(what);
        self
    }

    /// Queue the kernel on the stream (or into the graph being captured from it).
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in number, order and type, and the
    /// kernel must stay inside the buffers it is given (as with cudarc's `launch`).
    pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), DriverError> {
        // kernels/common.cuh finds a block's stamping thread by threadIdx.x alone.
        debug_assert_eq!(
            (cfg.block_dim.1, cfg.block_dim.2),
            (1, 1),
            "kernel blocks are one-dimensional"
        );
        let mut params: Vec<*mut c_void> = self
            .args
            .iter_mut()
            .map(|a| match a {
                Arg::Dev(p) => p as *mut sys::CUdeviceptr as *mut c_void,
                Arg::Host(p) => *p as *mut c_void,
            })
            .collect();
        // SAFETY: a plain C union; every field of the zeroed value is valid.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: if self.pdl {
                &mut attr
            } else {
                std::ptr::null_mut()
            },
            numAttrs: u32::from(self.pdl),
        };
        self.stream.context().bind_to_thread()?;
        // SAFETY: `params` points at one value per kernel parameter (the caller's contract),
        // alive until the call returns; the driver copies them at launch.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.func.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        if let (Some(log), true) = (self.log, self.stamp != 0) {
            log.note(self.stream, self.func, &cfg, self.stamp, self.reads);
        }
        Ok(())
    }
}

/// `.arg(x)` for the argument types the engine passes.
pub trait PushArg<T> {
    fn arg(&mut self, arg: T) -> &mut Self;
}

impl<'a, 'b: 'a, T> PushArg<&'b CudaSlice<T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b CudaSlice<T>) -> &mut Self {
        let (p, _sync) = arg.device_ptr(self.stream);
        self.args.push(Arg::Dev(p));
        self
    }
}

impl<'a, 'b: 'a, T> PushArg<&'b mut CudaSlice<T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b mut CudaSlice<T>) -> &mut Self {
        let (p, _sync) = arg.device_ptr_mut(self.stream);
        self.args.push(Arg::Dev(p));
        self
    }
}

impl<'a, 'b: 'a, 'c: 'b, T> PushArg<&'b CudaView<'c, T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b CudaView<'c, T>) -> &mut Self {
        let (p, _sync) = arg.device_ptr(self.stream);
        self.args.push(Arg::Dev(p));
        self
    }
}

impl<'a, 'b: 'a, 'c: 'b, T> PushArg<&'b mut CudaViewMut<'c, T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b mut CudaViewMut<'c, T>) -> &mut Self {
        let (p, _sync) = arg.device_ptr_mut(self.stream);
        self.args.push(Arg::Dev(p));
        self
    }
}

/// Plain values passed by address (the driver copies them at launch).
macro_rules! host_args {
    ($($t:ty),*) => {$(
        impl<'a, 'b: 'a> PushArg<&'b $t> for Launch<'a> {
            fn arg(&mut self, arg: &'b $t) -> &mut Self {
                self.host_value(arg)
            }
        }
    )*};
}

host_args!(i32, u32, i64, u64, f32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdl_needs_hopper() {
        assert!(!pdl_for((8, 9)));
        if std::env::var("CBTOP_PDL").is_err() {
            assert!(pdl_for((9, 0)));
        }
    }
}
