//! AVX2/FMA versions of element-wise steps of a layer (`ops.rs`), with the scalar reference's
//! bits: the same f32 operations lane for lane. Used only after run-time detection
//! (`quant::x86::available`).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use crate::quant::simd_order::silu;

/// `simd_order::expf` on eight lanes: the same fused multiply-adds, and the final `j * 2^n`
/// as its f64 product of `j` and `2^n` built from exponent bits, rounded once to f32 (or,
/// where every lane's n keeps it normal, the exact f32 product, the same value); lanes
/// with `|n| > 192` give 0 (n <= 0) or infinity, as the scalar's early return.
#[inline(always)]
pub(super) unsafe fn expf8(x: __m256) -> __m256 {
    let c = |bits: u32| _mm256_set1_ps(f32::from_bits(bits));
    let r = c(0x4b40_0000);
    let z = _mm256_fmadd_ps(x, c(0x3fb8_aa3b), r);
    let n = _mm256_sub_ps(z, r);
    let neg_n = _mm256_xor_ps(n, _mm256_set1_ps(-0.0));
    let b = _mm256_fmadd_ps(
        neg_n,
        c(0x35bf_be8e),
        _mm256_fmadd_ps(neg_n, c(0x3f31_7200), x),
    );
    let u = _mm256_mul_ps(b, b);
    let j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(c(0x3c07_2010), b, c(0x3d2b_9f17)),
            u,
            _mm256_fmadd_ps(c(0x3e2a_af33), b, c(0x3eff_fedb)),
        ),
        u,
        _mm256_fmadd_ps(c(0x3f7f_fff6), b, _mm256_set1_ps(1.0)),
    );
    let ni = _mm256_cvtps_epi32(n);
    // With -125 <= n <= 126 in every lane (almost every call), 2^n is a normal f32 and so is
    // j * 2^n (j is within [0.70, 1.42]): the f32 product is exact, the f64 path's bits.
    let in_range = _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(n, _mm256_set1_ps(-125.0)),
        _mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_set1_ps(126.0)),
    );
    if _mm256_movemask_ps(in_range) == 0xff {
        let pow2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(ni, _mm256_set1_epi32(127)));
        return _mm256_mul_ps(j, _mm256_castsi256_ps(pow2));
    }
    // 2^n per lane as f64: (n + 1023) << 52, n a whole number (garbage where |n| > 192,
    // replaced below).
    let bias = _mm256_set1_epi64x(1023);
    let p_lo = _mm256_slli_epi64::<52>(_mm256_add_epi64(
        _mm256_cvtepi32_epi64(_mm256_castsi256_si128(ni)),
        bias,
    ));
    let p_hi = _mm256_slli_epi64::<52>(_mm256_add_epi64(
        _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(ni)),
        bias,
    ));
    let lo = _mm256_cvtpd_ps(_mm256_mul_pd(
        _mm256_cvtps_pd(_mm256_castps256_ps128(j)),
        _mm256_castsi256_pd(p_lo),
    ));
    let hi = _mm256_cvtpd_ps(_mm256_mul_pd(
        _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(j)),
        _mm256_castsi256_pd(p_hi),
    ));
    let scaled = _mm256_set_m128(hi, lo);
    let abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0), n);
    let big = _mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(192.0));
    let non_pos = _mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps());
    let edge = _mm256_blendv_ps(_mm256_set1_ps(f32::INFINITY), _mm256_setzero_ps(), non_pos);
    _mm256_blendv_ps(scaled, edge, big)
}

/// `gate[i] = silu(gate[i]) * up[i]` (`ops::silu_mul`'s loop), eight at a time.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn silu_mul(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    let n8 = n & !7;
    let (pg, pu) = (gate.as_mut_ptr(), up.as_ptr());
    let one = _mm256_set1_ps(1.0);
    for i in (0..n8).step_by(8) {
        let x = _mm256_loadu_ps(pg.add(i));
        let e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        let s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(pg.add(i), _mm256_mul_ps(s, _mm256_loadu_ps(pu.add(i))));
    }
    for i in n8..n {
        gate[i] = silu(gate[i]) * up[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// `expf8` lane for lane against `simd_order::expf`: a sample of every stretch of floats
    /// from 0 to ±110 (past both cut-offs) and every float near the ends of its f32 scaling
    /// (n = -125 and 126, where it hands over to the f64 one).
    #[test]
    fn expf8_equals_the_scalar_expf_bit_for_bit() {
        use crate::quant::simd_order::expf;
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut xs: Vec<f32> = Vec::new();
        for sign in [0u32, 0x8000_0000] {
            xs.extend(
                (0..110f32.to_bits())
                    .step_by(997)
                    .map(|b| f32::from_bits(b | sign)),
            );
        }
        for edge in [-125.5f32, -124.5, 125.5, 126.5] {
            let mid = edge * std::f32::consts::LN_2;
            let lo = (mid - 0.01).to_bits().min((mid + 0.01).to_bits());
            let hi = (mid - 0.01).to_bits().max((mid + 0.01).to_bits());
            xs.extend((lo..=hi).map(f32::from_bits));
        }
        xs.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            1e-40,
            -1e-40,
        ]);
        // Each x beside its neighbours (one lane out of range sends the vector to the f64
        // path) and alone in a vector of zeros (the f32 path where x allows it).
        for chunk in xs.chunks(8) {
            let mut lanes = [0f32; 8];
            lanes[..chunk.len()].copy_from_slice(chunk);
            let mut alone = vec![[0f32; 8]; chunk.len()];
            for (k, a) in alone.iter_mut().enumerate() {
                a[k] = chunk[k];
            }
            for v in std::iter::once(lanes).chain(alone) {
                let mut got = [0f32; 8];
                // SAFETY: the features were just detected; both arrays hold eight f32.
                unsafe { _mm256_storeu_ps(got.as_mut_ptr(), expf8(_mm256_loadu_ps(v.as_ptr()))) };
                for (x, g) in v.iter().zip(got) {
                    assert_eq!(g.to_bits(), expf(*x).to_bits(), "expf({x})");
                }
            }
        }
    }

    /// Random values over the whole range that matters (and past expf's cut-offs, and
    /// special values): each lane gives the scalar loop's bits.
    #[test]
    fn silu_mul_equals_the_scalar_reference_bit_for_bit() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = SplitMix64::new(17);
        let special = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            87.0,
            -87.0,
            88.8,
            -104.0,
            150.0,
            -150.0,
            1e-30,
            f32::MIN_POSITIVE,
        ];
        for scale in [0.01f32, 1.0, 8.0, 40.0, 200.0, 1e6] {
            for n in [1usize, 7, 8, 9, 64, 1000] {
                let mut g: Vec<f32> = (0..n).map(|_| rng.next_signed() * scale).collect();
                if scale == 200.0 {
                    for (k, v) in g.iter_mut().enumerate() {
                        if k % 3 == 0 {
                            *v = special[k % special.len()];
                        }
                    }
                }
                let u: Vec<f32> = (0..n).map(|_| rng.next_signed() * 3.0).collect();
                let (mut fast, mut slow) = (g.clone(), g);
                // SAFETY: the features were just detected.
                unsafe { silu_mul(&mut fast, &u) };
                for (a, &b) in slow.iter_mut().zip(&u) {
                    *a = silu(*a) * b;
                }
                for (k, (a, b)) in fast.iter().zip(&slow).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "scale {scale} n {n} at {k}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
