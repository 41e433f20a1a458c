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

/// FMA throughput of the rayon pool, GFLOP/s (2 FLOPs per lane per FMA).
pub fn cpu_fma_throughput() -> Peak {
    const ITERS: usize = 4_000_000;
    let threads = rayon::current_num_threads();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t0 = Instant::now();
        let s: f32 = (0..threads)
            .into_par_iter()
            .map(|t| with_fma(|| fma_chains(ITERS, t as f32)))
            .sum();
        best = best.min(t0.elapsed().as_secs_f64());
        std::hint::black_box(s);
    }
    // CHAINS accumulators x 8 lanes x 2 FLOPs per iteration, per thread.
    let flops = (threads * ITERS * CHAINS * 8 * 2) as f64;
    Peak {
        value: flops / best / 1e9,
        source: "cpu_fma_probe",
    }
}

const CHAINS: usize = 12;

/// `CHAINS` independent 8-lane multiply-add chains: enough in flight to hide FMA latency.
#[inline(always)]
fn fma_chains(iters: usize, seed: f32) -> f32 {
    let mut acc = [[seed * 1e-3; 8]; CHAINS];
    let m = [0.999_999f32; 8];
    let a = [1e-7f32; 8];
    for _ in 0..iters {
        for chain in acc.iter_mut() {
            for ((x, &mm), &aa) in chain.iter_mut().zip(&m).zip(&a) {
                *x = x.mul_add(mm, aa);
            }
        }
        std::hint::black_box(&mut acc);
    }
    acc.iter().flatten().sum()
}
