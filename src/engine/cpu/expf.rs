//! `expf` without a call into the C library, for the attention's online softmax: one `expf`
//! per position and head, as in llama.cpp's CPU flash attention, whose logits cbtop reproduces
//! only while these are the C library's `expf` bits. This is glibc's single-precision `exp`
//! (glibc 2.27 and later; the design of Arm's optimized-routines) written out so that the hot
//! loop inlines it: x·32/ln 2 = k + r, a 32-entry table of 2^(i/32), a cubic in r, all in
//! double precision. The one product glibc's x86-64 build fuses into an FMA that changes a
//! result is r's (checked: with r rounded separately, one of the 1.12e9 values below differed).
//!
//! Where another C library gives other bits, `matches_libm` says so (checked once, on a sample)
//! and the callers keep calling the library. The test compares every float from -103.97 (below
//! which both give 0) to 0, the range attention takes, with the platform's `expf`.

use std::sync::OnceLock;

/// 2^(i/32) as f64 bits, less i << 47, so that adding k << 47 (k ≡ i mod 32) scales it by
/// 2^(k div 32) (the test recomputes them).
const TAB: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// 32 / ln 2.
const INV_LN2_N: f64 = f64::from_bits(0x3ff71547652b82fe) * 32.0;
/// 1.5 · 2^52: adding it rounds to an integer held in the low bits.
const SHIFT: f64 = f64::from_bits(0x4338000000000000);
/// The cubic's coefficients for r in units of 1/32 (glibc's `poly_scaled`).
const C0: f64 = f64::from_bits(0x3fac6af84b912394) / 32768.0;
const C1: f64 = f64::from_bits(0x3fcebfce50fac4f3) / 1024.0;
const C2: f64 = f64::from_bits(0x3fe62e42ff0c52d6) / 32.0;

/// e^x with glibc's `expf` bits (round to nearest); not `simd_order::expf`, ggml's vector
/// polynomial, which gives other bits. Use it where FMA is enabled: its `mul_add` are then
/// single instructions (elsewhere they are library calls, with the same bits).
#[inline(always)]
pub fn glibc_expf(x: f32) -> f32 {
    // The top 12 bits less the sign: |x| >= 88, or inf or NaN, take glibc's special cases.
    let top = (x.to_bits() >> 20) & 0x7ff;
    if top >= 0x42b {
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if top >= 0x7f8 {
            return x + x;
        }
        if x > f32::from_bits(0x42b17217) {
            return f32::INFINITY;
        }
        if x < f32::from_bits(0xc2cff1b4) {
            return 0.0;
        }
    }
    let xd = f64::from(x);
    let kd = INV_LN2_N * xd + SHIFT;
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = INV_LN2_N.mul_add(xd, -kd);
    let s = f64::from_bits(TAB[(ki % 32) as usize].wrapping_add(ki << 47));
    let y = C0.mul_add(r, C1).mul_add(r * r, C2.mul_add(r, 1.0));
    (y * s) as f32
}

/// Whether `glibc_expf` gives the platform C library's bits, on a sample of the range attention
/// takes (checked once per process).
pub fn matches_libm() -> bool {
    static SAME: OnceLock<bool> = OnceLock::new();
    *SAME.get_or_init(|| {
        let mut u = 0x8000_0000u32;
        let mut same = glibc_expf(f32::NEG_INFINITY) == 0.0;
        // 4099 values from -0 down to -104, spread over the bit patterns.
        while u <= 0xc2d0_0000 {
            let x = f32::from_bits(u);
            same &= glibc_expf(x).to_bits() == x.exp().to_bits();
            u += 0x0001_0000 + 0x3b;
        }
        same
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_two_to_the_i_over_32() {
        for (i, &t) in TAB.iter().enumerate() {
            let v = 2f64.powf(i as f64 / 32.0);
            assert_eq!(t, v.to_bits().wrapping_sub((i as u64) << 47), "entry {i}");
        }
    }

    #[test]
    fn special_values_are_the_library_s() {
        for x in [
            f32::NEG_INFINITY,
            f32::INFINITY,
            88.8,
            100.0,
            -104.0,
            -200.0,
            0.0,
            -0.0,
        ] {
            assert_eq!(glibc_expf(x).to_bits(), x.exp().to_bits(), "{x}");
        }
        assert!(glibc_expf(f32::NAN).is_nan());
    }

    /// glibc's expf is not exp computed in f64 and rounded once: at these inputs its result is
    /// the other neighbour of the correctly rounded one (about one value in 2,000 of the
    /// softmax's range), which is why kernels/attention.cu ports `glibc_expf` operation for
    /// operation instead of rounding the GPU's f64 `exp`.
    #[test]
    fn glibc_expf_is_not_the_correctly_rounded_exp() {
        for (x, glibc, rounded) in [
            (0xbf4adb02u32, 0x3ee7cf7fu32, 0x3ee7cf7eu32),
            (0xc0e4f05b, 0x3a4cdb3a, 0x3a4cdb39),
            (0xc12e27eb, 0x379d380e, 0x379d380f),
            (0xc089131b, 0x3c61fcb9, 0x3c61fcb8),
        ] {
            let x = f32::from_bits(x);
            assert_eq!(glibc_expf(x).to_bits(), glibc, "glibc_expf({x})");
            assert_eq!(((x as f64).exp() as f32).to_bits(), rounded, "exp({x})");
        }
    }

    /// Every float from -0 to -103.97 (1.12e9 values), against the platform's `expf`. Where the
    /// C library is not glibc's, the engine does not use `glibc_expf` (`matches_libm`), and neither
    /// does this test insist.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn every_value_attention_takes_is_the_library_s() {
        if !matches_libm() {
            eprintln!("skipped: this C library's expf differs from glibc's (the engine calls it)");
            return;
        }
        if !std::arch::is_x86_feature_detected!("fma") {
            eprintln!("skipped: no FMA on this CPU (the engine's AVX2 attention needs it)");
            return;
        }
        // SAFETY: FMA was just detected.
        let (differ, first) = unsafe { differences() };
        assert_eq!(differ, 0, "first at {first:?}");
    }

    /// Values in 0x80000000..=0xc2cff1b4 where `glibc_expf` and the library differ, and the
    /// first, with its products fused as in the engine's AVX2 attention.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "fma")]
    unsafe fn differences() -> (u64, Option<f32>) {
        let (mut differ, mut first) = (0u64, None);
        for u in 0x8000_0000u32..=0xc2cf_f1b4 {
            let x = f32::from_bits(u);
            if glibc_expf(x).to_bits() != x.exp().to_bits() {
                differ += 1;
                first.get_or_insert(x);
            }
        }
        (differ, first)
    }
}
