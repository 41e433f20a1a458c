//! Running a hot loop with the CPU's fused multiply-add instructions when it has them.
//!
//! The reference arithmetic (see `quant::simd_order`) uses `f32::mul_add` everywhere llama.cpp
//! uses an FMA. Without the `fma` target feature that compiles to a libm call per operation;
//! inside `with_fma` it becomes one instruction. The results are bit-identical either way (both
//! are correctly rounded fused operations); only the speed differs. The feature is detected at
//! run time, so the binary still runs on CPUs without FMA.

/// Run `f`, compiled with FMA enabled when the CPU supports it. Everything `f` calls that
/// should benefit must be `#[inline(always)]`.
#[inline(always)]
pub fn with_fma<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        #[target_feature(enable = "fma")]
        fn fused<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: the CPU was just checked to support FMA.
        return unsafe { fused(f) };
    }
    f()
}
