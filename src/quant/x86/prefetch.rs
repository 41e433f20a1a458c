//! Software prefetch of the weights a one-token product streams, a fixed distance ahead of
//! the block being dotted.

/// How far ahead of the weight block being dotted a one-token product asks for its weights
/// (`prefetch_ahead`). A token's products are a few hundred kilobytes to a few megabytes per
/// thread, short streams that the hardware prefetchers ramp up on slowly, and a kernel that
/// unpacks its blocks keeps the core busy between loads, so its own demand misses leave the
/// memory bus idle. Each single-row kernel asks for the line this far past every block it
/// dots, so the requests are spread over the work.
///
/// Measured on the 2-core EPYC dev machine, synthetic qwen2.5-0.5b q4_k_m, `--threads 2`,
/// brick GB/s, the schemes alternating within each of three rounds: the earlier one (each
/// row's lines asked for at once when the row began, 16 KiB ahead) gave `ffn_down` (Q6_K/Q4_K)
/// 7.8-9.6 GB/s, slower than no prefetch at all (8.9-11.9): a burst of ~60 requests per row
/// fills the core's miss buffers and stalls its own loads. Asking per block gave 13.3-16.9,
/// `lm_head` (Q8_0) 15.3-18.9 against 14.7-17.7, decode 33.5-40.0 tok/s against 28.2-33.9.
/// Old and new binaries alternating: `ffn_down` 12.0-12.5 -> 17.2-19.5 GB/s, decode
/// 38.3-39.5 -> 40.3-46.1 tok/s. 8 KiB ahead measured the same as 16; 32 and 64 KiB no better.
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 16 << 10;

/// Asks for the cache line `PREFETCH_AHEAD` bytes past `p` (see there). A prefetch never
/// faults, so running past the matrix's end is harmless (the next tensor is usually the next
/// product's).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn prefetch_ahead(p: *const u8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: a prefetch reads nothing architecturally and never faults, at any address.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_AHEAD) as *const i8) }
}
