//! Measured CPU peaks for the roofline: memory read bandwidth (all threads summing a buffer
//! much larger than the caches, asking for lines ahead as the one-token products do, and
//! buffers the size of the model's weights and of its largest matrix, where the last-level
//! cache keeps part of what a decode step reads), the caches' bandwidth (all threads
//! re-reading a buffer of their own that fits L1, or adding one such buffer into another, as
//! the residual adds do), FMA
//! throughput (all threads running independent 8-wide FMA chains) and int8 dot throughput
//! (the same with the integer multiply-adds the quantized products run on). All are probes
//! run at start-up, labelled as such in the report; nothing is taken from a spec sheet.

use std::num::Wrapping;
use std::time::Instant;

use rayon::prelude::*;

use super::cost::Roof;

/// Probe buffer: far beyond any last-level cache.
const PROBE_BYTES: usize = 256 << 20;

/// Each thread's buffer in the cache probe: inside any x86 core's L1 data cache (32-48 KiB).
const CACHE_PROBE_BYTES: usize = 16 << 10;

/// A measured peak and how it was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Peak {
    pub value: f64,
    pub source: &'static str,
}

/// Peaks measured on this machine, with their sources.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPeaks {
    pub bandwidth: Peak,
    /// The caches' read bandwidth (CPU only), the roof of a decode step's activations
    /// (`Cost::resident`).
    pub cache_bandwidth: Option<Peak>,
    pub compute: Peak,
    /// The tensor cores' f16 peak (GPU only), the compute roof of prompt products that run
    /// on them.
    pub tensor: Option<Peak>,
    /// The CPU's int8 dot peak (`cpu_int8_dot_throughput`), the compute roof of a
    /// prompt's products whose weights are quantized (their dots are integer multiply-adds).
    pub int8: Option<Peak>,
}

impl MeasuredPeaks {
    /// Run the CPU probes (about half a second) for a model whose decode step reads
    /// `weight_bytes` of weights, `largest` of them in its largest matrix
    /// (`cpu_read_bandwidth`).
    pub fn probe_cpu(weight_bytes: usize, largest: usize) -> MeasuredPeaks {
        MeasuredPeaks {
            bandwidth: cpu_read_bandwidth(weight_bytes, largest),
            cache_bandwidth: Some(cpu_cache_read_bandwidth()),
            compute: cpu_fma_throughput(),
            tensor: None,
            int8: cpu_int8_dot_throughput(),
        }
    }

    /// The compute peak a prompt's bricks are judged against (its quantized products on the CPU
    /// take `int8` instead, `analysis::analyze_prefill`): the tensor cores' when its
    /// products ran on them (and that peak was measured), else the FMA peak.
    pub fn prefill_compute(&self, tensor_cores: bool) -> &Peak {
        match (&self.tensor, tensor_cores) {
            (Some(t), true) => t,
            _ => &self.compute,
        }
    }

    /// The roof for a prompt's bricks (`prefill_compute`).
    pub fn prefill_roof(&self, tensor_cores: bool) -> Roof {
        self.roof_with(self.prefill_compute(tensor_cores))
    }

    pub fn roof(&self) -> Roof {
        self.roof_with(&self.compute)
    }

    /// The measured bandwidth under `compute`.
    pub fn roof_with(&self, compute: &Peak) -> Roof {
        Roof {
            bandwidth_gbps: self.bandwidth.value,
            compute_gflops: compute.value,
            cache_gbps: self.cache_bandwidth.as_ref().map(|p| p.value),
        }
    }
}

/// Most bytes the model-sized read probe takes.
const MODEL_PROBE_MAX: usize = 1 << 30;

/// The memory's read bandwidth for a model whose decode step reads `weight_bytes` of weights,
/// `largest` of them in one matrix, GB/s: the best of reading a 256 MiB buffer (beyond any
/// last-level cache), one the size of those weights over and over (a decode step's reuse
/// distance: what of a model's weights the last-level cache keeps between steps, the probe's
/// buffer keeps too) and one the size of the largest matrix over and over (a brick that
/// streams one matrix, the output head, reads it at that rate where the last-level cache
/// holds a share of it, faster than the whole model's reuse allows).
pub fn cpu_read_bandwidth(weight_bytes: usize, largest: usize) -> Peak {
    let mut best = Peak {
        value: read_probe(PROBE_BYTES),
        source: "cpu_read_probe",
    };
    let sizes = [
        (weight_bytes, "cpu_read_probe_model_size"),
        (largest, "cpu_read_probe_matrix_size"),
    ];
    for (bytes, source) in sizes {
        let bytes = bytes.clamp(1 << 20, MODEL_PROBE_MAX);
        if bytes == PROBE_BYTES {
            continue;
        }
        let value = read_probe(bytes);
        if value > best.value {
            best = Peak { value, source };
        }
    }
    best
}

/// Read bandwidth of the rayon pool over a buffer of `bytes`, GB/s: the best of ten passes,
/// half of them reading as the one-token products read their weights (a stream with the
/// line `prefetch_ahead` asks for a fixed distance ahead; the hardware prefetchers alone ramp
/// up on such streams too slowly for a brick's roof to hold), half on the hardware
/// prefetchers alone.
fn read_probe(bytes: usize) -> f64 {
    let n = bytes / 4;
    let buf: Vec<u32> = (0..n).into_par_iter().map(|i| (i % 7) as u32).collect();
    let chunk = (n / (4 * rayon::current_num_threads())).max(1 << 14);
    let mut best = f64::INFINITY;
    for pass in 0..10 {
        let t0 = Instant::now();
        let s: u32 = buf
            .par_chunks(chunk)
            .map(|c| sum_words(c, pass % 2 == 0))
            .reduce(|| 0, u32::wrapping_add);
        let dt = t0.elapsed().as_secs_f64();
        std::hint::black_box(s);
        best = best.min(dt);
    }
    (n * 4) as f64 / best / 1e9
}

/// Best-of-three bandwidth of the caches, GB/s: every pool thread re-reads a
/// `CACHE_PROBE_BYTES` buffer of its own, so the reads hit L1 after the first pass; or adds
/// one half of it into the other (two reads and a write per word, all counted, as a residual
/// add's bytes are: a core's loads and stores go side by side); the better of the two.
pub fn cpu_cache_read_bandwidth() -> Peak {
    const PASSES: usize = 8192;
    let threads = rayon::current_num_threads();
    let bufs: Vec<Vec<u32>> = (0..threads)
        .map(|t| (0..CACHE_PROBE_BYTES / 4).map(|i| (i + t) as u32).collect())
        .collect();
    let read = best_of_three(threads, |t| {
        let mut s = 0u32;
        for _ in 0..PASSES {
            s = s.wrapping_add(sum_words(std::hint::black_box(&bufs[t]), false));
        }
        Wrapping(s)
    });
    let mut copies = bufs.clone();
    let cells: Vec<std::sync::Mutex<&mut Vec<u32>>> =
        copies.iter_mut().map(std::sync::Mutex::new).collect();
    let add = best_of_three(threads, |t| {
        let mut buf = cells[t].lock().expect("one task a buffer");
        let (y, x) = buf.split_at_mut(CACHE_PROBE_BYTES / 8);
        for _ in 0..PASSES {
            add_words(std::hint::black_box(&mut *y), x);
        }
        Wrapping(y[0])
    });
    // The add pass moves three half-buffers a pass: 1.5 times the read pass's bytes.
    let value = (threads * PASSES * CACHE_PROBE_BYTES) as f64 / read.min(add / 1.5) / 1e9;
    Peak {
        value,
        source: if add / 1.5 < read {
            "cpu_cache_add_probe"
        } else {
            "cpu_cache_read_probe"
        },
    }
}

/// `y[i] += x[i]` (wrapping) over the shorter of the two.
fn add_words(y: &mut [u32], x: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was just detected.
        return unsafe { add_words_avx2(y, x) };
    }
    for (a, &b) in y.iter_mut().zip(x) {
        *a = a.wrapping_add(b);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_words_avx2(y: &mut [u32], x: &[u32]) {
    use std::arch::x86_64::*;
    let n = y.len().min(x.len());
    let wide = n / 8 * 8;
    for i in (0..wide).step_by(8) {
        // SAFETY: i + 8 <= n, within both slices.
        let a = _mm256_loadu_si256(y.as_ptr().add(i) as *const __m256i);
        let b = _mm256_loadu_si256(x.as_ptr().add(i) as *const __m256i);
        _mm256_storeu_si256(
            y.as_mut_ptr().add(i) as *mut __m256i,
            _mm256_add_epi32(a, b),
        );
    }
    for i in wide..n {
        y[i] = y[i].wrapping_add(x[i]);
    }
}

/// The wrapping sum of `c`, read as fast as the core can: eight independent vector
/// accumulators (one-cycle integer adds, so the loads bound it), with the line
/// `prefetch_ahead` asks for when `ahead` (a stream from memory).
fn sum_words(c: &[u32], ahead: bool) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was just detected.
        return unsafe { sum_words_avx2(c, ahead) };
    }
    let _ = ahead;
    c.iter().fold(0u32, |a, &x| a.wrapping_add(x))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_words_avx2(c: &[u32], ahead: bool) -> u32 {
    use crate::quant::x86::prefetch::prefetch_ahead;
    use std::arch::x86_64::*;
    const LANES: usize = 8;
    const ACC: usize = 8;
    let mut acc = [_mm256_setzero_si256(); ACC];
    let mut blocks = c.chunks_exact(LANES * ACC);
    for b in &mut blocks {
        let p = b.as_ptr();
        if ahead {
            prefetch_ahead(p as *const u8);
            prefetch_ahead(p.add(16) as *const u8);
            prefetch_ahead(p.add(32) as *const u8);
            prefetch_ahead(p.add(48) as *const u8);
        }
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: `b` holds LANES x ACC words; this reads words i*8 .. i*8 + 8.
            let v = _mm256_loadu_si256(p.add(i * LANES) as *const __m256i);
            *a = _mm256_add_epi32(*a, v);
        }
    }
    let mut sum = _mm256_setzero_si256();
    for a in acc {
        sum = _mm256_add_epi32(sum, a);
    }
    let mut lanes = [0u32; LANES];
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sum);
    let tail = blocks
        .remainder()
        .iter()
        .fold(0u32, |a, &x| a.wrapping_add(x));
    lanes.iter().fold(tail, |a, &x| a.wrapping_add(x))
}

/// FMA throughput of the rayon pool, GFLOP/s (2 FLOPs per lane per FMA), with the widest
/// vectors the engine's kernels use (8-lane AVX2 FMA where the CPU has it).
pub fn cpu_fma_throughput() -> Peak {
    const ITERS: usize = 2_000_000;
    let threads = rayon::current_num_threads();
    let (lanes, source) = fma_kind();
    let best = best_of_three(threads, |t| fma_chains(ITERS, t as f32));
    // CHAINS accumulators x lanes x 2 FLOPs per iteration, per thread.
    let flops = (threads * ITERS * CHAINS * lanes * 2) as f64;
    Peak {
        value: flops / best / 1e9,
        source,
    }
}

/// The shortest of three runs of `chains(t)` on each of `threads` pool threads at once,
/// seconds (the results summed and kept, so the work cannot be left out).
fn best_of_three<T: Send + std::iter::Sum<T>>(
    threads: usize,
    chains: impl Fn(usize) -> T + Sync,
) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t0 = Instant::now();
        let s: T = (0..threads).into_par_iter().map(&chains).sum();
        best = best.min(t0.elapsed().as_secs_f64());
        std::hint::black_box(s);
    }
    best
}

/// Independent accumulator chains: enough in flight to hide the FMA latency (4 cycles at two
/// per cycle needs 8).
const CHAINS: usize = 12;

/// Lanes per FMA and the probe's label: 16-lane AVX-512F where the CPU has it (the fast float
/// tiles, `x86::float_tiles`, run on it there; an 8-lane probe read half of what they reach on
/// a CPU with full-width 512-bit units), else 8-lane AVX2.
fn fma_kind() -> (usize, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            return (16, "cpu_fma_probe_avx512");
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return (8, "cpu_fma_probe_avx2");
        }
    }
    (1, "cpu_fma_probe_scalar")
}

fn fma_chains(iters: usize, seed: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F was just detected.
        return unsafe { fma_chains_avx512(iters, seed) };
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: AVX2 and FMA were just detected.
        return unsafe { fma_chains_avx2(iters, seed) };
    }
    let mut acc = [seed * 1e-3; CHAINS];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = x.mul_add(0.999_999, 1e-7);
        }
    }
    acc.iter().sum()
}

/// Written with intrinsics: the accumulators must stay in registers, which a black-boxed
/// array in a plain loop does not guarantee.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_chains_avx2(iters: usize, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let m = _mm256_set1_ps(0.999_999);
    let a = _mm256_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm256_set1_ps(seed * 1e-3); CHAINS];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, m, a);
        }
    }
    let mut lanes = [0f32; 8];
    let mut sum = _mm256_setzero_ps();
    for x in acc {
        sum = _mm256_add_ps(sum, x);
    }
    _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
    lanes.iter().sum()
}

/// `fma_chains_avx2` with 16-lane vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_chains_avx512(iters: usize, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let m = _mm512_set1_ps(0.999_999);
    let a = _mm512_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm512_set1_ps(seed * 1e-3); CHAINS];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, m, a);
        }
    }
    let mut sum = _mm512_setzero_ps();
    for x in acc {
        sum = _mm512_add_ps(sum, x);
    }
    _mm512_reduce_add_ps(sum)
}

/// Int8 dot throughput of the rayon pool, GOP/s (a multiply and an add per byte pair), with
/// the integer multiply-add the engine's quantized prompt products use on this CPU: AVX-512
/// VNNI `vpdpbusd` (64 byte pairs into 16 i32 lanes) where the CPU has it, else AVX2
/// `vpmaddubsw` + `vpmaddwd` + `vpaddd` (32 byte pairs into 8 lanes). None without AVX2: the
/// products then run scalar code, for which the FMA peak stands. One peak stands for all
/// quantized types: where only Q5_0's prompt kernel uses `vpdpbusd` (the k-quants take
/// `vpmaddubsw`), the roof of the others is the CPU's int8 ceiling, not their instruction's.
/// The float FMA peak understates the integer units: against it a quantized product can sit at
/// its roof with the integer units far from busy (docs/measurements/cpu-engine.md).
pub fn cpu_int8_dot_throughput() -> Option<Peak> {
    const ITERS: usize = 1_000_000;
    let (pairs, source) = int8_kind()?;
    let threads = rayon::current_num_threads();
    let best = best_of_three(threads, |t| int8_chains(ITERS, t as i32));
    // CHAINS accumulators x byte pairs x 2 ops per iteration, per thread.
    let ops = (threads * ITERS * CHAINS * pairs * 2) as f64;
    Some(Peak {
        value: ops / best / 1e9,
        source,
    })
}

/// Byte pairs per instruction step and the probe's label, for this CPU.
fn int8_kind() -> Option<(usize, &'static str)> {
    #[cfg(target_arch = "x86_64")]
    {
        if vnni512() {
            return Some((64, "cpu_int8_probe_vnni512"));
        }
        if is_x86_feature_detected!("avx2") {
            return Some((32, "cpu_int8_probe_avx2"));
        }
    }
    None
}

#[cfg(target_arch = "x86_64")]
fn vnni512() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

fn int8_chains(iters: usize, seed: i32) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        if vnni512() {
            // SAFETY: AVX-512 F/BW/VNNI were just detected.
            return unsafe { int8_chains_vnni512(iters, seed) };
        }
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was just detected.
            return unsafe { int8_chains_avx2(iters, seed) };
        }
    }
    let _ = (iters, seed);
    0
}

/// `CHAINS` independent `vpdpbusd` accumulators (intrinsics, as `fma_chains_avx2`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn int8_chains_vnni512(iters: usize, seed: i32) -> i64 {
    use std::arch::x86_64::*;
    let a = _mm512_set1_epi8(std::hint::black_box(3));
    let b = _mm512_set1_epi8(std::hint::black_box(-2));
    let mut acc = [_mm512_set1_epi32(seed); CHAINS];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_dpbusd_epi32(*x, a, b);
        }
    }
    let mut sum = _mm512_setzero_si512();
    for x in acc {
        sum = _mm512_add_epi32(sum, x);
    }
    _mm512_reduce_add_epi32(sum) as i64
}

/// `CHAINS` independent chains of the AVX2 int8 dot step. Its multiplies do not take the
/// accumulator, so each reads its second operand from L1 (a volatile load, as the kernels load
/// their weights and activations): with both operands in registers the compiler computes the
/// product once, outside the loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn int8_chains_avx2(iters: usize, seed: i32) -> i64 {
    use std::arch::x86_64::*;
    let a = _mm256_set1_epi8(std::hint::black_box(3));
    let b = [_mm256_set1_epi8(-2); CHAINS];
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_set1_epi32(seed); CHAINS];
    for _ in 0..iters {
        for (x, b) in acc.iter_mut().zip(&b) {
            let b = std::ptr::read_volatile(b);
            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones);
            *x = _mm256_add_epi32(*x, p);
        }
    }
    let mut lanes = [0i32; 8];
    let mut sum = _mm256_setzero_si256();
    for x in acc {
        sum = _mm256_add_epi32(sum, x);
    }
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sum);
    lanes.iter().map(|&v| v as i64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe's chains compute what they claim: 3 x -2 summed over the byte pairs of every
    /// step (so the multiplies ran, not a constant), from the seeds.
    #[test]
    fn int8_chains_sum_their_products() {
        let Some((pairs, _)) = int8_kind() else {
            eprintln!("skipped: no AVX2 on this CPU");
            return;
        };
        let lanes = pairs / 4;
        let got = int8_chains(10, 1);
        let want = (CHAINS * lanes) as i64 * (1 + 10 * 4 * -6);
        assert_eq!(got, want);
        let p = cpu_int8_dot_throughput().unwrap();
        assert!(p.value > 0.0 && p.value.is_finite(), "{p:?}");
    }

    fn peak(value: f64, source: &'static str) -> Peak {
        Peak { value, source }
    }

    #[test]
    fn the_read_probes_sum_every_word() {
        // Lengths around the vector loop's 64-word step, with a tail, wrapping past u32::MAX.
        for n in [0usize, 1, 63, 64, 65, 1000, 4099] {
            let c: Vec<u32> = (0..n as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            let want = c.iter().fold(0u32, |a, &x| a.wrapping_add(x));
            assert_eq!(sum_words(&c, true), want, "{n} words, prefetching");
            assert_eq!(sum_words(&c, false), want, "{n} words");
        }
    }

    /// The FMA probe's chains compute what they claim (every lane of every chain stepped
    /// `iters` times), so the FLOPs it counts ran.
    #[test]
    fn fma_chains_step_every_lane() {
        let (lanes, _) = fma_kind();
        let mut x = 2.0f32 * 1e-3;
        for _ in 0..100 {
            x = x.mul_add(0.999_999, 1e-7);
        }
        let want = (CHAINS * lanes) as f32 * x;
        let got = fma_chains(100, 2.0);
        assert!(
            (got - want).abs() <= 1e-4 * want,
            "{got} vs {want} ({lanes} lanes)"
        );
    }

    #[test]
    fn the_cache_add_probe_adds_every_word() {
        for n in [0usize, 1, 7, 8, 9, 100] {
            let mut y: Vec<u32> = (0..n as u32).map(|i| u32::MAX - i).collect();
            let x: Vec<u32> = (0..n as u32).map(|i| 3 * i + 1).collect();
            let want: Vec<u32> = y.iter().zip(&x).map(|(a, b)| a.wrapping_add(*b)).collect();
            add_words(&mut y, &x);
            assert_eq!(y, want, "{n} words");
        }
    }

    #[test]
    fn a_cpu_roof_takes_the_cache_bandwidth_when_it_was_measured() {
        let p = MeasuredPeaks {
            bandwidth: peak(20.0, "cpu_read_probe"),
            cache_bandwidth: Some(peak(400.0, "cpu_cache_read_probe")),
            compute: peak(200.0, "cpu_fma_probe_avx2"),
            tensor: None,
            int8: None,
        };
        assert_eq!(p.roof().cache_gbps, Some(400.0));
        assert_eq!(p.prefill_roof(false).cache_gbps, Some(400.0));
    }

    #[test]
    fn a_prompt_on_tensor_cores_is_judged_by_their_peak() {
        let mut p = MeasuredPeaks {
            bandwidth: peak(3000.0, "d2d_copy"),
            compute: peak(60_000.0, "gpu_fma_probe"),
            tensor: Some(peak(600_000.0, "gpu_mma_f16_probe")),
            int8: None,
            cache_bandwidth: None,
        };
        assert_eq!(p.prefill_compute(true).source, "gpu_mma_f16_probe");
        assert_eq!(p.prefill_roof(true).compute_gflops, 600_000.0);
        assert_eq!(p.prefill_compute(false).source, "gpu_fma_probe");
        assert_eq!(p.prefill_roof(false).compute_gflops, 60_000.0);
        assert_eq!(p.prefill_roof(true).bandwidth_gbps, 3000.0);
        p.tensor = None;
        assert_eq!(p.prefill_compute(true).source, "gpu_fma_probe");
    }
}
