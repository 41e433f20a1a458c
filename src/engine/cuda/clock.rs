//! Per-brick timing on the GPU that does not change what it times (docs/DESIGN.md "Measurement
//! rules"). Host-issued events between launches kept the step out of a CUDA graph and slowed
//! every token (docs/measurements/gpu-engine.md); here every kernel stamps itself instead.
//! Each launch gets a slot; the kernel writes its first block's start and its last block's end
//! on the GPU's `%globaltimer` into that slot (`STAMP_GUARD` in kernels/common.cuh), so a
//! decode step replayed as one graph is timed kernel by kernel with nothing added between the
//! launches. The slots come back to pinned host memory in the same copy as the step's token id
//! (the buffer's first value holds it, so a stamped greedy step adds no copy to the unstamped
//! one's), and `resolve` folds them into one span per brick (the busy time of its kernels) and
//! the GPU's idle time between kernels (`gaps`). Each step stamps one of `AREAS` buffers,
//! alternately, so a step can run while the host still reads the one before it (decode.rs's
//! pipelined decode).

use std::sync::Arc;

use cudarc::driver::{result, CudaContext, CudaSlice, CudaStream, DevicePtr, DriverError};

use crate::brick::Brick;

/// Values per slot (kernels/common.cuh `STAMP_GUARD`): the kernel's start and its end.
pub const STRIDE: usize = 2;

/// Values in front of the slots: the step's sampled token (kernels/argmax.cu writes the id and
/// the non-finite count there as two u32).
const HEADER: usize = 1;

/// The trailing argument of every kernel: the address of its launch's slot in the stamp
/// buffer (0: timing off). The host forms the address, so a kernel stamps without computing
/// one and each start is stamped sooner after the kernel's release
/// (docs/measurements/gpu-engine.md).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stamp {
    pub ptr: u64,
}

/// The brick (and layer) a launch belongs to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Owner {
    pub brick: Brick,
    pub layer: Option<u32>,
}

/// A stamped launch: its owner, and its kernel's entry in the launch log's catalogue
/// (launch_log.rs; None where the launch was not noted there).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slot {
    pub owner: Option<Owner>,
    pub kernel: Option<u32>,
}

/// Page-locked host memory that a copy inside a CUDA graph can land in. cudarc's pinned slice
/// synchronises through events on every access, which cannot be captured into a graph, so
/// this one is a bare allocation read after the stream has been synchronised.
pub struct PinnedBuf<T: Copy + Default> {
    ptr: *mut T,
    len: usize,
    ctx: Arc<CudaContext>,
}

impl<T: Copy + Default> PinnedBuf<T> {
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<PinnedBuf<T>, DriverError> {
        ctx.bind_to_thread()?;
        let bytes = len.max(1) * std::mem::size_of::<T>();
        // SAFETY: a fresh allocation of `bytes`, zeroed below before anything reads it.
        let ptr = unsafe { result::malloc_host(bytes, 0) }? as *mut T;
        // SAFETY: `ptr` holds `len` values of a plain-data type.
        unsafe { std::slice::from_raw_parts_mut(ptr, len).fill(T::default()) };
        Ok(PinnedBuf {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }

    /// Queue a copy of the first `n` values of `src` (at most `len`) into this buffer on
    /// `stream`.
    pub fn copy_from(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &CudaSlice<T>,
        n: usize,
    ) -> Result<(), DriverError>
    where
        T: cudarc::driver::DeviceRepr,
    {
        let n = n.min(src.len()).min(self.len);
        let (p, _sync) = src.device_ptr(stream);
        // SAFETY: `n` values from device memory into this page-locked buffer; the host reads
        // them only after synchronising the stream (`read`'s contract).
        unsafe {
            result::memcpy_dtoh_async(
                std::slice::from_raw_parts_mut(self.ptr, n),
                p,
                stream.cu_stream(),
            )
        }
    }

    /// The buffer's contents. The caller has synchronised the stream the copies went to.
    pub fn read(&self) -> &[T] {
        // SAFETY: `len` initialised values; no copy into them is in flight (caller's contract).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Copy + Default> Drop for PinnedBuf<T> {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by malloc_host in `new` and freed once.
        let _ = unsafe { result::free_host(self.ptr as *mut std::ffi::c_void) };
    }
}

// SAFETY: the buffer is plain host memory owned by this value; CUDA copies into it only while
// the owning engine is being driven by one thread.
unsafe impl<T: Copy + Default + Send> Send for PinnedBuf<T> {}

/// One stamp area: the device buffer (sampled token, then the slots) and its host copy.
struct Area {
    dev: CudaSlice<u64>,
    /// Device address of the header (the sampled token).
    base: u64,
    host: PinnedBuf<u64>,
}

/// Stamp areas a clock holds: a step may be launched while the one before it still runs
/// (the decode loop's pipelining, decode.rs), so consecutive steps stamp alternate areas.
pub const AREAS: usize = 2;

/// The stamp buffers of a step and who owns each slot, behind the step's sampled token.
pub struct KernelClock {
    areas: [Area; AREAS],
    /// The area launches stamp now.
    area: usize,
    /// Slots an area holds.
    cap: usize,
    /// Whether launches get slots now (else they get a null buffer and stamp nothing).
    armed: bool,
    cur: Option<Owner>,
    owners: Vec<Option<Owner>>,
}

impl KernelClock {
    /// Room for `cap` launches per step in each area.
    pub fn new(stream: &Arc<CudaStream>, cap: usize) -> Result<KernelClock, DriverError> {
        let len = HEADER + STRIDE * cap.max(1);
        let area = || -> Result<Area, DriverError> {
            let dev = stream.alloc_zeros::<u64>(len)?;
            let base = {
                let (p, _sync) = dev.device_ptr(stream);
                p
            };
            Ok(Area {
                host: PinnedBuf::new(stream.context(), len)?,
                dev,
                base,
            })
        };
        Ok(KernelClock {
            areas: [area()?, area()?],
            area: 0,
            cap,
            armed: false,
            cur: None,
            owners: Vec::new(),
        })
    }

    /// Device address where the greedy pick leaves the token id and the non-finite count
    /// (two u32) in the current area; `finish(.., true)` brings them back.
    pub fn sampled_ptr(&self) -> u64 {
        self.areas[self.area].base
    }

    /// Start a step in area `area` (below `AREAS`): launches from now on are stamped when
    /// `on`. Nothing clears the buffer: the kernels' clock only grows, so a slot's end from an
    /// earlier step stays below this step's (see kernels/common.cuh).
    pub fn arm(&mut self, on: bool, area: usize) {
        self.armed = on;
        self.area = area % AREAS;
        self.owners.clear();
        self.cur = None;
    }

    /// Launches from now on belong to `owner` (None: to no brick).
    pub fn enter(&mut self, owner: Option<Owner>) {
        self.cur = owner;
    }

    /// The stamp arguments of the next launch.
    pub fn stamp(&mut self) -> Stamp {
        if !self.armed || self.owners.len() >= self.cap {
            // Past the capacity a launch is not stamped; `finish` reports the overflow.
            if self.armed {
                self.owners.push(None);
            }
            return Stamp::default();
        }
        self.owners.push(self.cur);
        let word = HEADER + STRIDE * (self.owners.len() - 1);
        Stamp {
            ptr: self.areas[self.area].base + (word * std::mem::size_of::<u64>()) as u64,
        }
    }

    /// End a step's launches: queue one copy to the host of the sampled token (with
    /// `token`) and of the stamps (when armed), and hand back the slots (kept with a captured
    /// graph, whose replays fill the same slots), each with its kernel from `launched` (the
    /// launch log's stamp addresses and catalogue entries).
    pub fn finish(
        &mut self,
        stream: &Arc<CudaStream>,
        token: bool,
        launched: &[(u64, u32)],
    ) -> Result<Vec<Slot>, String> {
        let owners = std::mem::take(&mut self.owners);
        let armed = std::mem::replace(&mut self.armed, false);
        if armed && owners.len() > self.cap {
            return Err(format!(
                "the step launched {} kernels, over the {} timing slots",
                owners.len(),
                self.cap
            ));
        }
        let mut slots: Vec<Slot> = owners
            .iter()
            .map(|&owner| Slot {
                owner,
                kernel: None,
            })
            .collect();
        attach(&mut slots, self.areas[self.area].base, launched);
        let n = match (armed, token) {
            (true, _) => HEADER + STRIDE * slots.len(),
            (false, true) => HEADER,
            (false, false) => return Ok(slots),
        };
        let a = &mut self.areas[self.area];
        a.host
            .copy_from(stream, &a.dev, n)
            .map_err(|e| format!("copying the step's token and timestamps back: {e:?}"))?;
        Ok(slots)
    }

    /// The stamps a step left in `area` (`STRIDE` values per slot), once its stream is
    /// synchronised.
    pub fn stamps(&self, area: usize) -> &[u64] {
        &self.areas[area % AREAS].host.read()[HEADER..]
    }

    /// The token id and the non-finite logit count a greedy step left in `area`, once its
    /// stream is synchronised.
    pub fn sampled(&self, area: usize) -> (u32, u32) {
        let v = self.areas[area % AREAS].host.read()[0];
        (v as u32, (v >> 32) as u32)
    }
}

/// Give each slot its kernel from `launched` (stamp address, catalogue entry), the slots'
/// area starting at device address `base`; an address outside the slots is ignored.
fn attach(slots: &mut [Slot], base: u64, launched: &[(u64, u32)]) {
    let word_bytes = std::mem::size_of::<u64>() as u64;
    for &(ptr, kernel) in launched {
        let Some(word) = ptr.checked_sub(base).map(|b| (b / word_bytes) as usize) else {
            continue;
        };
        let Some(i) = word.checked_sub(HEADER).map(|w| w / STRIDE) else {
            continue;
        };
        if let Some(slot) = slots.get_mut(i) {
            slot.kernel = Some(kernel);
        }
    }
}

/// One brick's share of a step, from its kernels' stamps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BrickTime {
    pub owner: Owner,
    /// First kernel's start, nanoseconds after the step's first kernel started.
    pub offset_ns: u64,
    /// Sum of its kernels' run times (start of the first block to end of the last).
    pub busy_ns: u64,
}

/// One kernel's share of a step, from its stamps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelRun {
    pub owner: Owner,
    /// The launch log's catalogue entry.
    pub kernel: Option<u32>,
    /// Its start, nanoseconds after the step's first kernel started.
    pub offset_ns: u64,
    pub busy_ns: u64,
    /// Idle time between the end of the kernels before it and its start.
    pub gap_before_ns: u64,
}

/// A step's stamps, folded.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub bricks: Vec<BrickTime>,
    /// Every owned launch, in launch order; a brick's busy time is the sum of its kernels'.
    pub kernels: Vec<KernelRun>,
    /// GPU idle time between consecutive kernels of the step.
    pub gaps_ns: u64,
    /// First kernel's start to last kernel's end.
    pub window_ns: u64,
    /// First kernel's start on the GPU's clock (0: no kernel).
    pub first_ns: u64,
}

/// Fold the stamps (start and end per slot, in launch order) of `slots`. Consecutive
/// launches of one owner make one brick; a launch of no owner counts in the window but in no
/// brick. A slot its kernel did not stamp is an error (a kernel without the guard).
pub fn resolve(slots: &[Slot], stamps: &[u64]) -> Result<Resolved, String> {
    let mut bricks: Vec<BrickTime> = Vec::new();
    let mut kernels: Vec<KernelRun> = Vec::new();
    let mut gaps = 0u64;
    let mut first: Option<u64> = None;
    let mut prev_end: Option<u64> = None;
    for (i, slot) in slots.iter().enumerate() {
        let owner = &slot.owner;
        let (start, end) = match stamps.get(STRIDE * i..STRIDE * (i + 1)) {
            Some(&[s, e]) => (s, e),
            _ => return Err(format!("kernel slot {i} is outside the stamp buffer")),
        };
        if start == 0 || end < start {
            return Err(format!(
                "kernel slot {i} ({}) was not stamped (start {start}, end {end})",
                owner.map_or("no brick".to_string(), |o| o.brick.to_string())
            ));
        }
        let t0 = *first.get_or_insert(start);
        let gap = prev_end.map_or(0, |pe| start.saturating_sub(pe));
        gaps += gap;
        prev_end = Some(prev_end.map_or(end, |pe| pe.max(end)));
        let Some(o) = owner else { continue };
        let busy = end - start;
        kernels.push(KernelRun {
            owner: *o,
            kernel: slot.kernel,
            offset_ns: start.saturating_sub(t0),
            busy_ns: busy,
            gap_before_ns: gap,
        });
        match bricks.last_mut() {
            Some(b) if b.owner == *o && i > 0 && slots[i - 1].owner == Some(*o) => {
                b.busy_ns += busy
            }
            _ => bricks.push(BrickTime {
                owner: *o,
                offset_ns: start.saturating_sub(t0),
                busy_ns: busy,
            }),
        }
    }
    let window_ns = match (first, prev_end) {
        (Some(f), Some(e)) => e.saturating_sub(f),
        _ => 0,
    };
    Ok(Resolved {
        bricks,
        kernels,
        gaps_ns: gaps,
        window_ns,
        first_ns: first.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brick::BrickId;

    fn own(b: BrickId, l: Option<u32>) -> Slot {
        Slot {
            owner: Some(Owner {
                brick: b.into(),
                layer: l,
            }),
            kernel: None,
        }
    }

    /// Stamps in the kernels' layout from (start, end) pairs.
    fn lay(pairs: &[(u64, u64)]) -> Vec<u64> {
        pairs.iter().flat_map(|&(s, e)| [s, e]).collect()
    }

    #[test]
    fn bricks_sum_their_kernels_and_gaps_are_the_idle_between() {
        // qkv: two kernels 100..150, 160..200; rope 230..240; a kernel of no brick 250..260.
        let owners = [
            own(BrickId::Qkv, Some(0)),
            own(BrickId::Qkv, Some(0)),
            own(BrickId::Rope, Some(0)),
            Slot::default(),
        ];
        let stamps = lay(&[(100, 150), (160, 200), (230, 240), (250, 260)]);
        let r = resolve(&owners, &stamps).unwrap();
        assert_eq!(r.bricks.len(), 2);
        assert_eq!(r.bricks[0].busy_ns, 90);
        assert_eq!(r.bricks[0].offset_ns, 0);
        assert_eq!(r.bricks[1].busy_ns, 10);
        assert_eq!(r.bricks[1].offset_ns, 130);
        assert_eq!(r.gaps_ns, 10 + 30 + 10);
        assert_eq!(r.window_ns, 160);
        // bricks + gaps + the unowned kernel = the window
        let busy: u64 = r.bricks.iter().map(|b| b.busy_ns).sum();
        assert_eq!(busy + r.gaps_ns + 10, r.window_ns);
        // Each brick's kernels add up to it; the unowned kernel is in none.
        assert_eq!(r.kernels.len(), 3);
        for b in &r.bricks {
            let of: u64 = r
                .kernels
                .iter()
                .filter(|k| k.owner == b.owner)
                .map(|k| k.busy_ns)
                .sum();
            assert_eq!(of, b.busy_ns);
        }
        let gaps: Vec<u64> = r.kernels.iter().map(|k| k.gap_before_ns).collect();
        assert_eq!(gaps, [0, 10, 30]);
        assert_eq!(r.kernels[2].offset_ns, 130);
    }

    #[test]
    fn each_stamp_address_names_its_own_slot() {
        let mut slots = vec![own(BrickId::Qkv, Some(0)); 3];
        let base = 0x1000u64;
        let addr = |i: usize| base + 8 * (HEADER + STRIDE * i) as u64;
        // Out of order, one outside the slots, one below the base, one at the header.
        let launched = [
            (addr(2), 7),
            (addr(0), 5),
            (addr(3), 9),
            (base - 8, 1),
            (base, 2),
        ];
        attach(&mut slots, base, &launched);
        let kernels: Vec<Option<u32>> = slots.iter().map(|s| s.kernel).collect();
        assert_eq!(kernels, [Some(5), None, Some(7)]);
    }

    #[test]
    fn the_same_brick_in_two_layers_stays_two_spans() {
        let owners = [own(BrickId::Qkv, Some(0)), own(BrickId::Qkv, Some(1))];
        let r = resolve(&owners, &lay(&[(10, 20), (20, 35)])).unwrap();
        assert_eq!(r.bricks.len(), 2);
        assert_eq!(r.bricks[1].owner.layer, Some(1));
        assert_eq!(r.gaps_ns, 0);
    }

    #[test]
    fn an_unstamped_slot_is_an_error() {
        let owners = [own(BrickId::Qkv, Some(0)), own(BrickId::Rope, Some(0))];
        let e = resolve(&owners, &lay(&[(10, 20), (0, 0)])).unwrap_err();
        assert!(e.contains("slot 1") && e.contains("rope"), "{e}");
        assert!(resolve(&owners, &lay(&[(10, 20)])).is_err());
    }
}
