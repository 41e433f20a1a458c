//! Run-time detection of the CPU features the AVX2 kernels need; every caller of an x86 kernel
//! asks this (or a wider kernel's own `available`) first.

/// Whether the CPU runs these kernels (cached by std after the first call).
#[inline(always)]
pub fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}
