//! x86-64 kernels: AVX2 (and AVX-512 where the CPU has it), each bit for bit what its scalar
//! reference computes, used only after run-time feature detection (`available`).
//!
//! Files: `features` (the detection), `row_loops` and `prefetch` (shared by the row kernels),
//! `loads` (block field loads and lane arithmetic), `kquant_core` (the k-quant decoders), `legacy`
//! and `q5_0` (the legacy-quant dots), `prompt_rows` (a prompt's Q4_0/Q5_0/Q8_0 rows unpacked once
//! per task), `kquants` and `kquants512` (the k-quant dots), `vnni` (those prompt products on
//! AVX-512 VNNI), `few_vnni` (one to eight tokens against them on AVX-512 VNNI), `few_kquants_exact` (two to eight tokens against the k-quants on AVX-512, the reference's bits), `few_bench` (a measurement of the few-token kernels), `act` (the activation quantizers), `float` (the F32/F16/BF16 dots). `fast_rows`
//! (with `fast_rows_vnni`), `fast_kquants` (with `kquants_vnni`) and `float_tiles` are the
//! exceptions: the Q4_0/Q4_1/Q5_0/Q8_0, k-quant and float-weight products of the `fast` numerics, which
//! reorder float sums.

#[macro_use]
mod row_loops;

pub(super) mod act;
pub mod fast_kquants;
pub mod fast_rows;
pub mod fast_rows_vnni;
mod features;
#[cfg(test)]
mod few_bench;
pub mod few_kquants;
pub mod few_kquants_exact;
pub mod few_vnni;
pub mod float;
pub mod float_tiles;
mod kquant_core;
pub mod kquants;
pub mod kquants512;
pub mod kquants_one;
pub mod kquants_vnni;
mod legacy;
mod loads;
pub(crate) mod prefetch;
pub mod prompt_rows;
pub mod q2k;
mod q5_0;
#[cfg(test)]
mod tests;
pub mod vnni;

pub use features::available;
pub use kquant_core::{kquant_lane_sums, q3_levels, q45_levels, q6_levels};
pub use legacy::{
    rows_q4_0_q8_0, rows_q4_1_q8_1, rows_q4_1_q8_1_x4, rows_q5_0_q8_0, rows_q5_0_q8_0_x4,
    rows_q5_1_q8_1, rows_q8_0_q8_0, rows_q8_0_q8_0_x4, vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1,
    vec_dot_q4_1_q8_1_x4, vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4, vec_dot_q5_1_q8_1,
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4,
};
