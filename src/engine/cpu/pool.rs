//! The fork-join pool of the CPU engine's hot loops (matrix products, attention heads).
//!
//! A decode step opens ~200 parallel regions of a few tens of microseconds each. rayon's
//! workers go to sleep between them and a wake-up costs about as much as the region, so
//! workers here spin on the next job for a while (`SPIN`) and only then park. One job at a
//! time: the caller publishes `n` chunk indices, workers and caller claim them from one
//! counter that holds the job's generation, its chunk count and the next index together, so
//! a claim sees one job's state whole: a late worker can never claim a chunk for a job other
//! than the one it read, and a successful claim means that job is still running (its chunk
//! is not done), so the closure it lent outlives every use. (The count once lived in its own
//! atomic: a worker could read the finished job's last index with the next job's larger count
//! and run a chunk past the end; seen on the 16-core GPU machine as an attention index out of
//! bounds.) Written here rather than taken from a crate because
//! rayon and crossbeam's scoped threads both park between jobs, the cost being removed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle worker spins before it parks.
const SPIN: Duration = Duration::from_millis(2);

/// Spins between two looks at the clock in an idle worker (a few microseconds of spinning).
const CLOCK_EVERY: u32 = 32;

type Task<'a> = &'a (dyn Fn(usize) + Sync);

/// `Shared::next`'s fields: generation (16 bits), chunks in the job (24), next unclaimed
/// chunk (24).
const GEN_SHIFT: u32 = 48;
const N_SHIFT: u32 = 24;
const FIELD: u64 = (1 << N_SHIFT) - 1;
/// Most chunks one published job holds; `run` splits larger ones.
const MAX_CHUNKS: usize = FIELD as usize;

fn pack(gen: u64, n: usize, i: usize) -> u64 {
    (gen << GEN_SHIFT) | ((n as u64) << N_SHIFT) | i as u64
}

fn generation(v: u64) -> u64 {
    v >> GEN_SHIFT
}

struct Shared {
    /// The current job's generation, chunk count and next unclaimed chunk (`pack`).
    next: AtomicU64,
    /// Chunks finished in the current job.
    done: AtomicUsize,
    /// The current job's closure: a pointer to the caller's `Task` reference.
    job: AtomicPtr<()>,
    panicked: AtomicBool,
    stop: AtomicBool,
    sleepers: Mutex<usize>,
    wake: Condvar,
}

/// A pool of `threads - 1` workers; the thread that calls `run` is the last.
pub struct Pool {
    shared: Arc<Shared>,
    threads: usize,
    /// One job at a time.
    busy: Mutex<()>,
}

static GLOBAL: OnceLock<Pool> = OnceLock::new();

thread_local! {
    /// This thread is running a pool task (a nested `run` then runs inline: the pool takes
    /// one job at a time).
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Size the engine's pool (`--threads`); the first call wins. Without it the pool takes
/// every available core.
pub fn init(threads: usize) {
    let _ = GLOBAL.set(Pool::new(threads));
}

/// The engine's pool.
pub fn global() -> &'static Pool {
    GLOBAL.get_or_init(|| Pool::new(std::thread::available_parallelism().map_or(1, |n| n.get())))
}

/// `f(i, chunk)` for the `chunk_len`-sized pieces of `data` (the last may be shorter), on the
/// engine's pool.
pub fn par_chunks_mut<T: Send>(
    data: &mut [T],
    chunk_len: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let chunk_len = chunk_len.max(1);
    let len = data.len();
    let base = SendPtr(data.as_mut_ptr());
    global().run(len.div_ceil(chunk_len), &|i| {
        let start = i * chunk_len;
        let end = (start + chunk_len).min(len);
        // SAFETY: every index runs once, so the pieces handed out are disjoint parts of
        // `data`, which the caller borrows mutably until `run` returns.
        let piece = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), end - start) };
        f(i, piece)
    });
}

struct SendPtr<T>(*mut T);
// SAFETY: used only to hand out disjoint pieces of one slice (`par_chunks_mut`).
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

impl Pool {
    pub fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            next: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
        });
        for w in 1..threads {
            let s = shared.clone();
            // A worker that cannot start only means fewer helpers: `run` needs none.
            let _ = std::thread::Builder::new()
                .name(format!("cbtop-cpu-{w}"))
                .spawn(move || worker(&s));
        }
        Pool {
            shared,
            threads,
            busy: Mutex::new(()),
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// `f(i)` for every `i < n`, spread over the pool; returns when all are done. A panic in
    /// `f` is raised here once every chunk has finished.
    pub fn run(&self, n: usize, f: Task) {
        if n == 0 {
            return;
        }
        if self.threads == 1 || n == 1 || IN_TASK.with(|t| t.get()) {
            (0..n).for_each(f);
            return;
        }
        if n > MAX_CHUNKS {
            for base in (0..n).step_by(MAX_CHUNKS) {
                self.run(MAX_CHUNKS.min(n - base), &|i| f(base + i));
            }
            return;
        }
        let _one = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        let job: *const Task = &f;
        s.job.store(job as *mut (), Ordering::Relaxed);
        s.done.store(0, Ordering::Relaxed);
        s.panicked.store(false, Ordering::Relaxed);
        let gen = (generation(s.next.load(Ordering::Relaxed)) + 1) & 0xffff;
        // Publishes the job: workers read its fields after seeing this generation.
        s.next.store(pack(gen, n, 0), Ordering::Release);
        if *s.sleepers.lock().unwrap_or_else(|e| e.into_inner()) > 0 {
            s.wake.notify_all();
        }
        work(s, gen);
        let mut spins = 0u32;
        while s.done.load(Ordering::Acquire) < n {
            pause(&mut spins);
        }
        if s.panicked.load(Ordering::Relaxed) {
            panic!("a CPU engine task panicked");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _g = self.shared.sleepers.lock();
        self.shared.wake.notify_all();
    }
}

/// Claim and run chunks of generation `gen` until none is left.
fn work(s: &Shared, gen: u64) {
    loop {
        let v = s.next.load(Ordering::Acquire);
        if generation(v) != gen {
            return;
        }
        let (n, i) = (((v >> N_SHIFT) & FIELD) as usize, (v & FIELD) as usize);
        if i >= n {
            return;
        }
        if s.next
            .compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // The claim succeeded on this job's whole state, so the job is still running (its
        // caller waits for this chunk) and its closure is alive.
        // SAFETY: `job` points at the caller's `Task`, valid until every chunk is done.
        let f = unsafe { *(s.job.load(Ordering::Acquire) as *const Task) };
        IN_TASK.with(|t| t.set(true));
        if catch_unwind(AssertUnwindSafe(|| f(i))).is_err() {
            s.panicked.store(true, Ordering::Relaxed);
        }
        IN_TASK.with(|t| t.set(false));
        s.done.fetch_add(1, Ordering::Release);
    }
}

/// One step of a spin wait: a CPU pause, and every 64th a yield, so a spinning thread gives
/// its core away when the machine has more runnable threads than cores.
#[inline(always)]
fn pause(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    if spins.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn worker(s: &Shared) {
    let mut seen = generation(s.next.load(Ordering::Acquire));
    loop {
        let t0 = Instant::now();
        let mut spins = 0u32;
        let gen = loop {
            if s.stop.load(Ordering::Acquire) {
                return;
            }
            let g = generation(s.next.load(Ordering::Acquire));
            if g != seen {
                break g;
            }
            // The clock (a `clock_gettime` call) is read once every `CLOCK_EVERY` spins.
            if !spins.is_multiple_of(CLOCK_EVERY) || t0.elapsed() < SPIN {
                pause(&mut spins);
                continue;
            }
            let mut sleepers = s.sleepers.lock().unwrap_or_else(|e| e.into_inner());
            *sleepers += 1;
            while generation(s.next.load(Ordering::Acquire)) == seen
                && !s.stop.load(Ordering::Acquire)
            {
                sleepers = s.wake.wait(sleepers).unwrap_or_else(|e| e.into_inner());
            }
            *sleepers -= 1;
        };
        seen = gen;
        work(s, gen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_runs_once_across_many_jobs() {
        let pool = Pool::new(3);
        for n in [1usize, 2, 3, 7, 64, 1000] {
            for _ in 0..50 {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                pool.run(n, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "n={n}");
            }
        }
    }

    /// Short jobs after long ones and back: a worker still finishing its look at a job must
    /// never run an index of it against the next job's count (the bug the packed counter
    /// fixes; it needs the right interleaving, so many small jobs on more threads than cores).
    #[test]
    fn alternating_jobs_never_run_a_stale_index() {
        let pool = Pool::new(6);
        for round in 0..20_000usize {
            let n = if round % 2 == 0 { 2 + round % 5 } else { 40 };
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            pool.run(n, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "round {round}"
            );
        }
    }

    #[test]
    fn a_job_larger_than_one_publication_runs_every_index_once() {
        let pool = Pool::new(2);
        let n = MAX_CHUNKS + 5;
        let count = AtomicUsize::new(0);
        let last = AtomicUsize::new(0);
        pool.run(n, &|i| {
            count.fetch_add(1, Ordering::Relaxed);
            last.fetch_max(i, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), n);
        assert_eq!(last.load(Ordering::Relaxed), n - 1);
    }

    #[test]
    fn chunks_cover_the_slice_once() {
        let mut v = vec![0u32; 1003];
        par_chunks_mut(&mut v, 16, |i, piece| {
            for (k, x) in piece.iter_mut().enumerate() {
                *x += (i * 16 + k) as u32;
            }
        });
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    }

    #[test]
    fn a_nested_run_runs_inline() {
        let pool = Pool::new(2);
        let sum = AtomicUsize::new(0);
        pool.run(4, &|_| {
            global().run(3, &|j| {
                sum.fetch_add(j, Ordering::Relaxed);
            });
        });
        assert_eq!(sum.load(Ordering::Relaxed), 12);
    }

    #[test]
    fn workers_wake_after_parking() {
        let pool = Pool::new(2);
        std::thread::sleep(SPIN * 3);
        let sum = AtomicUsize::new(0);
        pool.run(100, &|i| {
            sum.fetch_add(i, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 4950);
    }

    #[test]
    fn a_panicking_task_panics_the_caller_after_the_job() {
        let pool = Pool::new(2);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(10, &|i| {
                if i == 3 {
                    panic!("boom");
                }
            })
        }));
        assert!(r.is_err());
        // The pool still works afterwards.
        let sum = AtomicUsize::new(0);
        pool.run(10, &|i| {
            sum.fetch_add(i, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 45);
    }
}
