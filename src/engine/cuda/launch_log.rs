//! Which kernel each stamped launch was, for the drill-down below a brick. A stamped launch
//! (timing `events`) notes its function, launch shape and the tensor it reads here, keyed by
//! its stamp slot's address; the clock pairs each slot with its entry when the step ends
//! (clock.rs), so a captured graph keeps its kernels as it keeps its owners. An unstamped
//! launch notes nothing, so a step without timing pays nothing. Names are the ones the kernel
//! table looked the functions up by (as in kernels/*.cu), resources come from the function's
//! attributes and the driver's occupancy calculator, each looked up once per function and
//! shape.

use std::cell::RefCell;
use std::collections::HashMap;

use cudarc::driver::{sys, CudaFunction, CudaStream, LaunchConfig};

use crate::brick::kernel::{LaunchShape, Resources};
use crate::brick::{Catalogue, KernelInfo};

/// A function's name and attributes.
#[derive(Clone)]
struct Function {
    name: String,
    registers: u32,
    static_shared: u32,
}

#[derive(Default)]
struct Inner {
    catalogue: Catalogue,
    /// Function handle → the name it was looked up by.
    names: HashMap<usize, String>,
    functions: HashMap<usize, Function>,
    /// Per (function, shape): its catalogue entries by the tensor read.
    entries: HashMap<(usize, LaunchShape, Option<String>), u32>,
    threads_per_sm: Option<u32>,
    /// This step's stamped launches: the stamp slot's address and the catalogue entry.
    step: Vec<(u64, u32)>,
}

/// The kernels stamped launches ran (see the module doc).
#[derive(Default)]
pub struct LaunchLog {
    inner: RefCell<Inner>,
}

impl LaunchLog {
    /// Remember `f`'s name (the kernel table's lookups call this for every function).
    pub fn name(&self, f: &CudaFunction, name: &str) {
        let key = f.cu_function() as usize;
        self.inner.borrow_mut().names.insert(key, name.to_string());
    }

    /// The name `f` was looked up by (None: a function the table did not name).
    #[cfg(feature = "test-support")]
    pub fn name_of(&self, f: &CudaFunction) -> Option<String> {
        let key = f.cu_function() as usize;
        self.inner.borrow().names.get(&key).cloned()
    }

    /// Note a launch of `f` at `cfg` stamped at `stamp` (nonzero), reading `reads`.
    pub fn note(
        &self,
        stream: &CudaStream,
        f: &CudaFunction,
        cfg: &LaunchConfig,
        stamp: u64,
        reads: Option<&str>,
    ) {
        let mut inner = self.inner.borrow_mut();
        let shape = LaunchShape {
            grid: [cfg.grid_dim.0, cfg.grid_dim.1, cfg.grid_dim.2],
            block: cfg.block_dim.0,
            dynamic_shared_bytes: cfg.shared_mem_bytes,
        };
        let key = f.cu_function() as usize;
        let lookup = (key, shape, reads.map(str::to_string));
        let id = match inner.entries.get(&lookup) {
            Some(&id) => id,
            None => {
                let id = Self::enter(&mut inner, stream, f, shape, reads);
                inner.entries.insert(lookup, id);
                id
            }
        };
        inner.step.push((stamp, id));
    }

    /// A new catalogue entry for `f` at `shape`.
    fn enter(
        inner: &mut Inner,
        stream: &CudaStream,
        f: &CudaFunction,
        shape: LaunchShape,
        reads: Option<&str>,
    ) -> u32 {
        let key = f.cu_function() as usize;
        let name = inner
            .names
            .get(&key)
            .cloned()
            .unwrap_or_else(|| "(unnamed)".to_string());
        let func = inner
            .functions
            .entry(key)
            .or_insert_with(|| Function {
                name,
                registers: f.num_regs().map_or(0, |r| r.max(0) as u32),
                static_shared: f.shared_size_bytes().map_or(0, |r| r.max(0) as u32),
            })
            .clone();
        let per_sm = *inner.threads_per_sm.get_or_insert_with(|| {
            let a = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR;
            stream.context().attribute(a).map_or(0, |v| v.max(0) as u32)
        });
        let occupancy = f
            .occupancy_max_active_blocks_per_multiprocessor(
                shape.block,
                shape.dynamic_shared_bytes as usize,
                None,
            )
            .ok()
            .filter(|_| per_sm > 0)
            .map(|blocks| (100.0 * (blocks * shape.block) as f64 / per_sm as f64).min(100.0));
        inner.catalogue.intern(KernelInfo {
            name: func.name,
            reads: reads.map(str::to_string),
            launch: Some(shape),
            resources: occupancy.map(|occupancy_percent| Resources {
                registers_per_thread: func.registers,
                static_shared_bytes: func.static_shared,
                occupancy_percent,
            }),
        })
    }

    /// Hand over the step's stamped launches (stamp address, catalogue entry) and start the
    /// next step empty.
    pub fn take_step(&self) -> Vec<(u64, u32)> {
        std::mem::take(&mut self.inner.borrow_mut().step)
    }

    /// Every kernel noted so far.
    pub fn catalogue(&self) -> Catalogue {
        self.inner.borrow().catalogue.clone()
    }
}
