//! The fork-join pool of the CPU engine's hot loops (matrix products, attention heads).
//!
//! A decode step opens ~200 parallel regions of a few tens of microseconds each. rayon's
//! workers go to sleep between them and a wake-up costs about as much as the region, so
//! workers here spin on the next job for a while (`SPIN`) and only then park. Written here
//! rather than taken from a crate because rayon and crossbeam's scoped threads both park
//! between jobs, the cost being removed.
//!
//! One job at a time: the caller publishes `n` chunk indices and the threads (the caller is
//! thread 0) run them. At 16 threads a decode region is a few microseconds of work, and what
//! the threads share costs as much when they all touch it at once (one cache line passed
//! between 16 cores a claim at a time; `tests::region_cost` measures a region's cost,
//! docs/measurements/cpu-engine.md has its figures). So:
//! - Chunk `t` is first thread `t`'s: it claims it on a line of its own. A late thread's first
//!   chunk (still unclaimed a moment after the caller has run out of work) is taken over by
//!   the caller, so no thread's lateness stalls a job.
//! - The chunks from `threads` on go to whoever asks first, for balance, from one counter that
//!   holds the job's generation, its chunk count and the next index together: one `fetch_add`
//!   (no compare-and-swap retries) returns one job's state whole, so a claim never pairs an
//!   index with another job's count. (With the count in an atomic of its own, a worker could
//!   read the finished job's last index with the next job's larger count and run a chunk past
//!   the end.)
//! - A thread reports the chunks it ran on its own line (once per job, but for a late worker's
//!   second look, whose report adds to its first), and the caller adds the reports up;
//!   nothing counts up one shared word chunk by chunk.
//! - The job's word, its description and each thread's lines are cache lines apart.
//!
//! A successful claim, either way, is of a job still running (its chunk is not reported yet),
//! so the closure the caller lent outlives every use.

use crossbeam_utils::CachePadded;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle worker spins before it parks.
const SPIN: Duration = Duration::from_millis(2);

/// Spins between two looks at the clock in an idle worker (a few microseconds of spinning).
const CLOCK_EVERY: u32 = 32;

/// Spins of the caller, waiting for a job's reports, between two passes taking over the
/// chunks of threads that are late (about a microsecond).
const STEAL_EVERY: u32 = 16;

type Task<'a> = &'a (dyn Fn(usize) + Sync);

/// `Shared::next`'s fields: generation (16 bits), chunks in the job (24), next chunk for the
/// counter to hand out (24; the threads' own first chunks are below it).
const GEN_SHIFT: u32 = 48;
const N_SHIFT: u32 = 24;
const FIELD: u64 = (1 << N_SHIFT) - 1;
/// Most chunks one published job holds; `run` splits larger ones. Half the field: every
/// thread's claim past the end still adds one to the counter, which must not carry into the
/// count (at most one such claim per thread and call of `work`, far fewer than 2^23).
const MAX_CHUNKS: usize = (FIELD >> 1) as usize;

fn pack(gen: u64, n: usize, i: usize) -> u64 {
    (gen << GEN_SHIFT) | ((n as u64) << N_SHIFT) | i as u64
}

fn generation(v: u64) -> u64 {
    v >> GEN_SHIFT
}

struct Shared {
    /// The current job's generation, chunk count and counter (`pack`): workers spin on it.
    next: CachePadded<AtomicU64>,
    /// Written by the caller once per job (`stop` once per pool; `panicked` also by a thread
    /// whose chunk panicked), read by every thread.
    flags: CachePadded<Flags>,
    /// One per thread, index 0 the caller's.
    slots: Box<[CachePadded<Slot>]>,
    sleepers: Mutex<usize>,
    wake: Condvar,
}

struct Flags {
    /// The current job's closure: a pointer to the caller's `Task` reference.
    job: AtomicPtr<()>,
    /// The current job's sequence number and chunk count, `seq << N_SHIFT | n`. Sequence
    /// numbers only grow (they do not wrap as the 16-bit generation does).
    info: AtomicU64,
    panicked: AtomicBool,
    stop: AtomicBool,
}

#[derive(Default)]
struct Slot {
    /// The last job whose chunk `t` (this slot's thread) was claimed, by thread `t` or by the
    /// caller in its place.
    claimed: AtomicU64,
    /// `seq << N_SHIFT | k`: thread `t` ran `k` chunks of job `seq` so far (written by thread
    /// `t` after each of its `work` calls, adding up within a job).
    ran: AtomicU64,
}

impl Slot {
    /// The chunks this slot's thread has reported for job `seq` (none if its report is of
    /// another job).
    fn ran_in(&self, seq: u64) -> usize {
        let v = self.ran.load(Ordering::Acquire);
        if v >> N_SHIFT == seq {
            (v & FIELD) as usize
        } else {
            0
        }
    }
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
            next: CachePadded::new(AtomicU64::new(0)),
            flags: CachePadded::new(Flags {
                job: AtomicPtr::new(std::ptr::null_mut()),
                info: AtomicU64::new(0),
                panicked: AtomicBool::new(false),
                stop: AtomicBool::new(false),
            }),
            slots: (0..threads)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
        });
        for w in 1..threads {
            let s = shared.clone();
            // A worker that cannot start only means fewer helpers: `run` needs none (the
            // caller takes over the chunks a thread does not claim).
            let _ = std::thread::Builder::new()
                .name(format!("cbtop-cpu-{w}"))
                .spawn(move || worker(&s, w));
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
        let seq = (s.flags.info.load(Ordering::Relaxed) >> N_SHIFT) + 1;
        s.flags.job.store(job as *mut (), Ordering::Relaxed);
        s.flags.panicked.store(false, Ordering::Relaxed);
        // Release: a worker that reads this job's description (`work`, Acquire) without having
        // seen its generation (one that woke for the job before) sees the closure and the
        // cleared flag too.
        s.flags
            .info
            .store(seq << N_SHIFT | n as u64, Ordering::Release);
        let gen = (generation(s.next.load(Ordering::Relaxed)) + 1) & 0xffff;
        // Publishes the job to the workers spinning on the generation (and to counter claims).
        let owned = self.threads.min(n);
        s.next.store(pack(gen, n, owned), Ordering::Release);
        if *s.sleepers.lock().unwrap_or_else(|e| e.into_inner()) > 0 {
            s.wake.notify_all();
        }
        let mut ran = work(s, 0).map_or(0, |(_, k)| k);
        // Then the reports, and every `STEAL_EVERY` spins the chunks other threads have not
        // claimed yet (not at once: reading their lines while they claim costs them a miss
        // each, in the common case where nobody is late).
        let mut spins = 0u32;
        while ran + s.slots[1..].iter().map(|t| t.ran_in(seq)).sum::<usize>() < n {
            pause(&mut spins);
            if spins.is_multiple_of(STEAL_EVERY) {
                for t in 1..owned {
                    if claim_own(s, t, seq) {
                        run_chunk(s, t);
                        ran += 1;
                    }
                }
            }
        }
        if s.flags.panicked.load(Ordering::Relaxed) {
            panic!("a CPU engine task panicked");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.flags.stop.store(true, Ordering::Release);
        let _g = self.shared.sleepers.lock();
        self.shared.wake.notify_all();
    }
}

/// Claim chunk `t` of job `seq` for thread `t` (by that thread, or by the caller in its
/// place): false when it is already claimed or the job is no longer `seq`. A finished job's
/// chunks were all claimed, so a claim that succeeds is of a running job, which cannot end
/// before the chunk is reported.
fn claim_own(s: &Shared, t: usize, seq: u64) -> bool {
    let slot = &s.slots[t].claimed;
    let c = slot.load(Ordering::Relaxed);
    c < seq
        && slot
            .compare_exchange(c, seq, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
}

/// Run chunk `i` of the current job, which the caller of this has claimed (so the job is
/// still running and its closure alive).
fn run_chunk(s: &Shared, i: usize) {
    // SAFETY: `job` points at the caller's `Task`, valid until every chunk is done, and this
    // chunk is not.
    let f = unsafe { *(s.flags.job.load(Ordering::Acquire) as *const Task) };
    IN_TASK.with(|t| t.set(true));
    if catch_unwind(AssertUnwindSafe(|| f(i))).is_err() {
        s.flags.panicked.store(true, Ordering::Relaxed);
    }
    IN_TASK.with(|t| t.set(false));
}

/// Thread `me`'s part of the published job: its own chunk, then chunks from the counter until
/// none is left. Returns the job's sequence number and how many chunks it ran, if any; a
/// worker reports them on its slot (the caller counts its own). The job description read here
/// may already be a later job's than the generation the worker woke for, or that job may have
/// ended: `claim_own` refuses what is not the running job's.
///
/// A counter claim is one `fetch_add`: the value it returns names the job whole (generation,
/// count, index), so an index below the count is a chunk of a job still running, and one at
/// or past the count ends the thread's part (the add still happened, harmlessly:
/// `MAX_CHUNKS`). Every chunk a call runs is of one job: a job cannot end while a thread holds
/// chunks of it that it has not reported.
fn work(s: &Shared, me: usize) -> Option<(u64, usize)> {
    let info = s.flags.info.load(Ordering::Acquire);
    let (mut seq, n) = (info >> N_SHIFT, (info & FIELD) as usize);
    let mut ran = 0usize;
    if me < n && claim_own(s, me, seq) {
        run_chunk(s, me);
        ran = 1;
    }
    loop {
        // A look first: once the counter is spent, every thread would otherwise take its turn
        // on the line just to learn that.
        let v = s.next.load(Ordering::Acquire);
        if v & FIELD >= (v >> N_SHIFT) & FIELD {
            break;
        }
        let v = s.next.fetch_add(1, Ordering::AcqRel);
        let (n, i) = (((v >> N_SHIFT) & FIELD) as usize, (v & FIELD) as usize);
        if i >= n {
            break;
        }
        if ran == 0 {
            // The claim holds the job, so its description is this job's.
            seq = s.flags.info.load(Ordering::Acquire) >> N_SHIFT;
        }
        run_chunk(s, i);
        ran += 1;
    }
    (ran > 0).then_some((seq, ran))
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

fn worker(s: &Shared, me: usize) {
    let mut seen = generation(s.next.load(Ordering::Acquire));
    loop {
        let t0 = Instant::now();
        let mut spins = 0u32;
        let gen = loop {
            if s.flags.stop.load(Ordering::Acquire) {
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
                && !s.flags.stop.load(Ordering::Acquire)
            {
                sleepers = s.wake.wait(sleepers).unwrap_or_else(|e| e.into_inner());
            }
            *sleepers -= 1;
        };
        seen = gen;
        if let Some((seq, ran)) = work(s, me) {
            // A call that found a later job than `gen` is followed by another for that job
            // (the generation moved): the report adds up over calls for one job.
            let slot = &s.slots[me];
            let total = slot.ran_in(seq) + ran;
            slot.ran
                .store(seq << N_SHIFT | total as u64, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_index_runs_once_across_many_jobs() {
        let pool = Pool::new(3);
        for n in [1usize, 2, 3, 7, 64, 1000] {
            for _ in 0..50 {
                assert!(each_index_runs_once(&pool, n), "n={n}");
            }
        }
    }

    /// One job of `n` chunks on `pool`: whether every index ran exactly once.
    fn each_index_runs_once(pool: &Pool, n: usize) -> bool {
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        pool.run(n, &|i| {
            hits[i].fetch_add(1, Ordering::Relaxed);
        });
        hits.iter().all(|h| h.load(Ordering::Relaxed) == 1)
    }

    /// Short jobs after long ones and back: a worker still finishing its look at a job must
    /// never run an index of it against the next job's count (the bug the packed counter
    /// fixes; it needs the right interleaving, so many small jobs on more threads than cores).
    #[test]
    fn alternating_jobs_never_run_a_stale_index() {
        let pool = Pool::new(6);
        for round in 0..20_000usize {
            let n = if round % 2 == 0 { 2 + round % 5 } else { 40 };
            assert!(each_index_runs_once(&pool, n), "round {round}");
        }
    }

    /// Many more threads than cores: most threads are late for most jobs, so the caller takes
    /// their own chunks over, and a late thread finds a later job than the one it woke for.
    /// Every chunk must still run once, and every job end (a lost report would hang here).
    #[test]
    fn late_threads_chunks_are_taken_over_and_run_once() {
        let pool = Pool::new(16);
        for round in 0..5_000usize {
            let n = [3usize, 16, 17, 40][round % 4];
            assert!(each_index_runs_once(&pool, n), "round {round}");
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

    /// What one parallel region costs: `CBTOP_TEST_THREADS` (default: every core) threads,
    /// regions of two or eight chunks per thread that each spin for a given time, timed over
    /// many regions.
    /// A measuring aid for the pool, not a check: `cargo test --release --lib
    /// region_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "measurement, prints the cost of a parallel region"]
    fn region_cost() {
        let threads = std::env::var("CBTOP_TEST_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let pool = Pool::new(threads);
        for (per_thread, work_ns) in [(2, 0u64), (2, 1000), (2, 4000), (8, 0), (8, 1000)] {
            let spin = |ns: u64| {
                let t = Instant::now();
                while (t.elapsed().as_nanos() as u64) < ns {
                    std::hint::spin_loop();
                }
            };
            let n = per_thread * threads;
            let mut best = f64::MAX;
            for _ in 0..5 {
                let regions = 2000;
                let t = Instant::now();
                for _ in 0..regions {
                    pool.run(n, &|_| spin(work_ns));
                }
                let per = t.elapsed().as_secs_f64() * 1e6 / regions as f64;
                best = best.min(per);
            }
            let ideal = (per_thread as u64 * work_ns) as f64 / 1000.0;
            println!(
                "{threads} threads, {n} chunks of {work_ns} ns: {best:.2} us per region \
                 ({:.2} us over the {ideal:.2} us of work per thread)",
                best - ideal
            );
        }
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
