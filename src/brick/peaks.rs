//! Measured CPU peaks for the roofline: memory read bandwidth (all threads summing a buffer
//! much larger than the caches) and FMA throughput (all threads running independent 8-wide FMA
//! chains). Both are probes run at start-up, labelled as such in the report; nothing is taken
//! from a spec sheet.

use std::time::Instant;

use rayon::prelude::*;

use crate::engine::cpu::fma::with_fma;

/// Probe buffer: far beyond any last-level cache.
const PROBE_BYTES: usize = 256 << 20;

/// A measured peak and how it was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Peak {
    pub value: f64,
    pub source: &'static str,
}

/// Best-of-three read bandwidth of the rayon pool over a 256 MiB buffer, GB/s.
pub fn cpu_read_bandwidth() -> Peak {
    let n = PROBE_BYTES / 4;
    let buf: Vec<f32> = (0..n).into_par_iter().map(|i| (i % 7) as f32).collect();
    let chunk = (n / (4 * rayon::current_num_threads())).max(1 << 16);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t0 = Instant::now();
        let s: f32 = buf
            .par_chunks(chunk)
            .map(|c| with_fma(|| sum_lanes(c)))
            .sum();
        let dt = t0.elapsed().as_secs_f64();
        std::hint::black_box(s);
        best = best.min(dt);
    }
    Peak {
        value: PROBE_BYTES as f64 / best / 1e9,
        source: "cpu_read_probe",
    }
}

/// Eight independent partial sums so the loop vectorises and is limited by memory.
#[inline(always)]
fn sum_lanes(c: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let mut it = c.chunks_exact(16);
    for b in &mut it {
        for (a, &x) in acc.iter_mut().zip(b) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + it.remainder().iter().sum::<f32>()
}

/// FMA throughput of the rayon pool, GFLOP/s (2 FLOPs per lane per FMA), with the widest
/// vectors the engine's kernels use (8-lane AVX2 FMA where the CPU has it).
pub fn cpu_fma_throughput() -> Peak {
    const ITERS: usize = 2_000_000;
    let threads = rayon::current_num_threads();
    let (lanes, source) = fma_kind();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t0 = Instant::now();
        let s: f32 = (0..threads)
            .into_par_iter()
            .map(|t| fma_chains(ITERS, t as f32))
            .sum();
        best = best.min(t0.elapsed().as_secs_f64());
        std::hint::black_box(s);
    }
    // CHAINS accumulators x lanes x 2 FLOPs per iteration, per thread.
    let flops = (threads * ITERS * CHAINS * lanes * 2) as f64;
    Peak {
        value: flops / best / 1e9,
        source,
    }
}

/// Independent accumulator chains: enough in flight to hide the FMA latency (4 cycles at two
/// per cycle needs 8).
const CHAINS: usize = 12;

fn fma_kind() -> (usize, &'static str) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        return (8, "cpu_fma_probe_avx2");
    }
    (1, "cpu_fma_probe_scalar")
}

fn fma_chains(iters: usize, seed: f32) -> f32 {
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
