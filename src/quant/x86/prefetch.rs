//! Software prefetch of the weights a one-token product streams, a fixed distance ahead of
//! the block being dotted.

/// How far ahead of the weight block being dotted a one-token product asks for its weights
/// (`prefetch_ahead`). A token's products are a few hundred kilobytes to a few megabytes per
/// thread, short streams that the hardware prefetchers ramp up on slowly, and a kernel that
/// unpacks its blocks keeps the core busy between loads, so its own demand misses leave the
/// memory bus idle. Each single-row kernel asks for the line this far past every block it
/// dots, so the requests are spread over the work (one burst per row instead fills the core's
/// miss buffers and stalls its own loads). The one-token F16 rows ask only where that is
/// faster (`features::f16_rows_prefetch`).
#[cfg(target_arch = "x86_64")]
pub(crate) const PREFETCH_AHEAD: usize = 16 << 10;

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
