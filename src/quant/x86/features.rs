//! Run-time detection of the CPU features the AVX2 kernels need; every caller of an x86 kernel
//! asks this (or a wider kernel's own `available`) first.

/// Whether the CPU runs these kernels (cached by std after the first call).
#[inline(always)]
pub fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Whether the one-token F16 rows (`float::rows_fast`) ask for their weights ahead in
/// software (`prefetch_ahead`): not on AMD cores without AVX-512 (Zen 3 and earlier), whose
/// hardware prefetchers alone streamed a decode step's F16 rows faster than with the software
/// requests on top, where an AVX-512 Xeon's rows streamed slower without them and the same
/// Zen 3's BF16 rows no faster (docs/measurements/cpu-engine.md). Read once.
pub fn f16_rows_prefetch() -> bool {
    static ASK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASK.get_or_init(|| {
        // CPUID leaf 0 names the vendor in EBX, EDX, ECX; every x86-64 CPU has the instruction.
        let v = std::arch::x86_64::__cpuid(0);
        let amd = [v.ebx, v.edx, v.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163];
        !amd || is_x86_feature_detected!("avx512f")
    })
}
