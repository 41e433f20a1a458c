//! AVX2/F16C versions of the f16 steps of the CPU flash-attention kernel (`attention.rs`, the
//! decode path): the K·q dot in ggml's AVX-512 order, and the f16 accumulator's rescale and
//! multiply-add. They give exactly the scalar reference's bits (`simd_order::dot_f16` and the
//! `half` round trips): the same f32 operations lane for lane, and f16↔f32 conversions that
//! are exact one way and round-to-nearest-even the other, as `half`'s are. `half` converts one
//! value per call through a run-time dispatch, which made the scalar loop the CPU's slowest
//! brick. Used only after run-time detection of AVX2, FMA and F16C (`quant::x86::available`).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use half::f16;

use super::attention_tiled::TiledRows;
#[cfg(test)]
use crate::quant::simd_order;

/// The softmax's `expf`: inlined (`expf::glibc_expf`, glibc's bits) where the C library gives those
/// bits (`own`, from `expf::matches_libm`), else the library's.
#[inline(always)]
fn softmax_exp(own: bool, x: f32) -> f32 {
    if own {
        super::expf::glibc_expf(x)
    } else {
        x.exp()
    }
}

/// Eight f16 values at `p` as f32.
#[inline(always)]
unsafe fn load8(p: *const f16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

/// Eight f32 values rounded to f16 (nearest, ties to even) and stored at `p`.
#[inline(always)]
unsafe fn store8(p: *mut f16, v: __m256) {
    _mm_storeu_si128(
        p as *mut __m128i,
        _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v),
    );
}

/// `simd_order::dot_f16` (ggml_vec_dot_f16 as built for AVX-512), its 16-lane accumulators
/// held as pairs of 8-lane registers.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16(x: &[f16], y: &[f16]) -> f32 {
    dot_f16_by(x, y.len(), |p| load8(y.as_ptr().add(p)), |k| y[k].to_f32())
}

/// `simd_order::dot_f16_f32`: `dot_f16` with `y` already widened (exactly) to f32, so the
/// query of a decode step is converted once rather than at every position. Same bits.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16_f32(x: &[f16], y: &[f32]) -> f32 {
    dot_f16_by(x, y.len(), |p| _mm256_loadu_ps(y.as_ptr().add(p)), |k| y[k])
}

/// The body of `dot_f16`: `y8(p)` loads eight values of `y` from `p` as f32, `y1(k)` one.
#[inline(always)]
unsafe fn dot_f16_by(
    x: &[f16],
    y_len: usize,
    y8: impl Fn(usize) -> __m256,
    y1: impl Fn(usize) -> f32,
) -> f32 {
    let n = x.len().min(y_len);
    let np = n & !63;
    if np == 0 {
        let mut total = 0f64;
        for (k, xk) in x[..n].iter().enumerate() {
            total += (xk.to_f32() * y1(k)) as f64;
        }
        return total as f32;
    }
    let px = x.as_ptr();
    let mut sum = [[_mm256_setzero_ps(); 2]; 4];
    for i in (0..np).step_by(64) {
        for (j, acc) in sum.iter_mut().enumerate() {
            for (h, a) in acc.iter_mut().enumerate() {
                let k = i + 16 * j + 8 * h;
                *a = _mm256_fmadd_ps(load8(px.add(k)), y8(k), *a);
            }
        }
    }
    // Per lane (s0 + s2) + (s1 + s3), then GCC's 16-lane reduction: the high eight onto the
    // low eight, the high four onto the low four, then (0 + 2) + (1 + 3).
    let fold = |h: usize| {
        _mm256_add_ps(
            _mm256_add_ps(sum[0][h], sum[2][h]),
            _mm256_add_ps(sum[1][h], sum[3][h]),
        )
    };
    let t3 = _mm256_add_ps(fold(1), fold(0));
    let t6 = _mm_add_ps(_mm256_extractf128_ps::<1>(t3), _mm256_castps256_ps128(t3));
    let mut t = [0f32; 4];
    _mm_storeu_ps(t.as_mut_ptr(), t6);
    let mut total = ((t[0] + t[2]) + (t[1] + t[3])) as f64;
    for (k, xk) in (np..n).zip(&x[np..n]) {
        total += (xk.to_f32() * y1(k)) as f64;
    }
    total as f32
}

/// `acc[i] = f16(f32(acc[i]) * ms)`.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn scale_f16(acc: &mut [f16], ms: f32) {
    let n8 = acc.len() & !7;
    let m = _mm256_set1_ps(ms);
    let p = acc.as_mut_ptr();
    for i in (0..n8).step_by(8) {
        store8(p.add(i), _mm256_mul_ps(load8(p.add(i)), m));
    }
    for a in &mut acc[n8..] {
        *a = f16::from_f32(a.to_f32() * ms);
    }
}

/// `acc[i] = f16(fma(f32(v[i]), vs, f32(acc[i])))`.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn mad_f16(acc: &mut [f16], v: &[f16], vs: f32) {
    let n = acc.len().min(v.len());
    let n8 = n & !7;
    let s = _mm256_set1_ps(vs);
    let (pa, pv) = (acc.as_mut_ptr(), v.as_ptr());
    for i in (0..n8).step_by(8) {
        store8(
            pa.add(i),
            _mm256_fmadd_ps(load8(pv.add(i)), s, load8(pa.add(i))),
        );
    }
    for i in n8..n {
        acc[i] = f16::from_f32(v[i].to_f32().mul_add(vs, acc[i].to_f32()));
    }
}

/// f32 → f16 → f32 (nearest, ties to even), in registers: what a store to and a load from
/// the f16 accumulator give.
#[inline(always)]
unsafe fn round_f16(v: __m256) -> __m256 {
    _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v))
}

/// The decode path of one (query, head) in one pass, `R` eight-wide registers per row
/// (`head_dim = 8 * R`, a multiple of 64): the K·q dot of `dot_f16_f32`, the online softmax,
/// and the f16 accumulator of `scale_f16` and `mad_f16` held in registers as the f32 values of
/// its f16 contents (each update rounded to f16 and widened back, exactly what storing and
/// reloading it does). Same bits as the step-by-step loop in `attention.rs`; the accumulator's
/// loads, stores and conversions per position go, and so do three calls per position.
/// Writes the accumulator (unnormalised) to `o`; returns the softmax denominator.
///
/// # Safety
/// AVX2, FMA and F16C must be available; `q` and `o` hold `8 * R` values and every row
/// `j < n` of `keys`/`values` holds `8 * R` values from `j * stride + at`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn decode_head<const R: usize>(
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    (stride, at, n): (usize, usize, usize),
    scale: f32,
    o: &mut [f32],
) -> f32 {
    let hd = 8 * R;
    assert!(hd.is_multiple_of(64) && q.len() >= hd && o.len() >= hd);
    assert!(n == 0 || ((n - 1) * stride + at + hd <= keys.len().min(values.len())));
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    let own = super::expf::matches_libm();
    let mut acc = [_mm256_setzero_ps(); R];
    let (pk, pv) = (keys.as_ptr(), values.as_ptr());
    for j in 0..n {
        let row = j * stride + at;
        let s = dot_f16_by(
            std::slice::from_raw_parts(pk.add(row), hd),
            hd,
            |p| _mm256_loadu_ps(q.as_ptr().add(p)),
            |k| q[k],
        ) * scale;
        let (mut ms, mut vs) = (1.0f32, 1.0f32);
        if s > max {
            ms = softmax_exp(own, max - s);
            max = s;
            let m = _mm256_set1_ps(ms);
            for a in acc.iter_mut() {
                *a = round_f16(_mm256_mul_ps(*a, m));
            }
        } else {
            vs = softmax_exp(own, s - max);
        }
        let w = _mm256_set1_ps(vs);
        for (r, a) in acc.iter_mut().enumerate() {
            *a = round_f16(_mm256_fmadd_ps(load8(pv.add(row + 8 * r)), w, *a));
        }
        sum = sum.mul_add(ms, vs);
    }
    for (r, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(o.as_mut_ptr().add(8 * r), *a);
    }
    sum
}

/// `attention_tiled::tiled_head_scalar` eight values at a time: the K·q dot keeps `dot_lanes`'
/// eight partial sums in one register (each product rounded, then added, element `i` into
/// lane `i % 8`) and sums the lanes in order as it does; the rescale and the V update are the
/// same multiply, and multiply-then-add, per element. Same bits.
///
/// # Safety
/// AVX2, FMA and F16C must be available.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tiled_head(q: &[f32], rows: TiledRows, scale: f32, o: &mut [f32]) -> f32 {
    let hd = o.len();
    let n8 = hd & !7;
    let q = &q[..hd];
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    let own = super::expf::matches_libm();
    o.fill(0.0);
    let po = o.as_mut_ptr();
    for j in 0..rows.n {
        let k = &rows.k[j * rows.stride + rows.at..][..hd];
        let v = &rows.v[j * rows.stride + rows.at..][..hd];
        let mut acc = _mm256_setzero_ps();
        for i in (0..n8).step_by(8) {
            let p = _mm256_mul_ps(
                _mm256_loadu_ps(k.as_ptr().add(i)),
                _mm256_loadu_ps(q.as_ptr().add(i)),
            );
            acc = _mm256_add_ps(acc, p);
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
        for i in n8..hd {
            lanes[i % 8] += k[i] * q[i];
        }
        let s = lanes.iter().sum::<f32>() * scale;
        if s > max {
            let ms = softmax_exp(own, max - s);
            let m = _mm256_set1_ps(ms);
            for i in (0..n8).step_by(8) {
                _mm256_storeu_ps(po.add(i), _mm256_mul_ps(_mm256_loadu_ps(po.add(i)), m));
            }
            o[n8..].iter_mut().for_each(|a| *a *= ms);
            sum *= ms;
            max = s;
        }
        let vs = softmax_exp(own, s - max);
        let w = _mm256_set1_ps(vs);
        for i in (0..n8).step_by(8) {
            let add = _mm256_mul_ps(_mm256_loadu_ps(v.as_ptr().add(i)), w);
            _mm256_storeu_ps(po.add(i), _mm256_add_ps(_mm256_loadu_ps(po.add(i)), add));
        }
        for (a, v) in o[n8..].iter_mut().zip(&v[n8..]) {
            *a += v * vs;
        }
        sum += vs;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn vec16(rng: &mut SplitMix64, n: usize, scale: f32) -> Vec<f16> {
        (0..n)
            .map(|_| f16::from_f32(rng.next_signed() * scale))
            .collect()
    }

    #[test]
    fn equal_the_scalar_reference_bit_for_bit() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = SplitMix64::new(11);
        for n in [7usize, 64, 100, 128, 130] {
            for scale in [1e-3f32, 1.0, 300.0] {
                let (x, y) = (vec16(&mut rng, n, scale), vec16(&mut rng, n, 1.0));
                // SAFETY: the features were just detected.
                let got = unsafe { dot_f16(&x, &y) };
                let want = simd_order::dot_f16(&x, &y).to_bits();
                assert_eq!(got.to_bits(), want, "dot n={n}");
                let yf: Vec<f32> = y.iter().map(|v| v.to_f32()).collect();
                // SAFETY: as above.
                let got = unsafe { dot_f16_f32(&x, &yf) };
                assert_eq!(got.to_bits(), want, "dot_f16_f32 n={n}");
                let scalar = simd_order::dot_f16_f32(&x, &yf);
                assert_eq!(scalar.to_bits(), want, "scalar dot_f16_f32 n={n}");
                let vs = rng.next_signed().abs();
                let mut fast = vec16(&mut rng, n, scale);
                let mut slow = fast.clone();
                // SAFETY: as above.
                unsafe { mad_f16(&mut fast, &y, vs) };
                for (a, v) in slow.iter_mut().zip(&y) {
                    *a = f16::from_f32(v.to_f32().mul_add(vs, a.to_f32()));
                }
                assert_eq!(fast, slow, "mad n={n}");
                // SAFETY: as above.
                unsafe { scale_f16(&mut fast, vs * 0.37) };
                for a in &mut slow {
                    *a = f16::from_f32(a.to_f32() * (vs * 0.37));
                }
                assert_eq!(fast, slow, "scale n={n}");
            }
        }
    }

    #[test]
    fn decode_head_equals_the_step_by_step_loop_bit_for_bit() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = SplitMix64::new(23);
        for hd in [64usize, 128, 256] {
            for n in [1usize, 2, 33, 300] {
                for kscale in [0.05f32, 1.0, 20.0] {
                    let (stride, at) = (3 * hd, hd);
                    let keys = vec16(&mut rng, n * stride, kscale);
                    let values = vec16(&mut rng, n * stride, 4.0);
                    let q: Vec<f32> = vec16(&mut rng, hd, 1.0)
                        .iter()
                        .map(|v| v.to_f32())
                        .collect();
                    let scale = 1.0 / (hd as f32).sqrt();
                    // The loop of `attention.rs` over the separately tested steps.
                    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
                    let mut acc = vec![f16::ZERO; hd];
                    for j in 0..n {
                        let row = j * stride + at;
                        // SAFETY (this block): the features were just detected.
                        let s = unsafe { dot_f16_f32(&keys[row..row + hd], &q) } * scale;
                        let (mut ms, mut vs) = (1.0f32, 1.0f32);
                        if s > max {
                            ms = (max - s).exp();
                            max = s;
                            unsafe { scale_f16(&mut acc, ms) };
                        } else {
                            vs = (s - max).exp();
                        }
                        unsafe { mad_f16(&mut acc, &values[row..row + hd], vs) };
                        sum = sum.mul_add(ms, vs);
                    }
                    let mut o = vec![7f32; hd];
                    // SAFETY: the features were just detected; the rows are in bounds.
                    let got = unsafe {
                        match hd {
                            64 => {
                                decode_head::<8>(&q, &keys, &values, (stride, at, n), scale, &mut o)
                            }
                            128 => decode_head::<16>(
                                &q,
                                &keys,
                                &values,
                                (stride, at, n),
                                scale,
                                &mut o,
                            ),
                            _ => decode_head::<32>(
                                &q,
                                &keys,
                                &values,
                                (stride, at, n),
                                scale,
                                &mut o,
                            ),
                        }
                    };
                    assert_eq!(got.to_bits(), sum.to_bits(), "sum hd={hd} n={n}");
                    let want: Vec<u32> = acc.iter().map(|a| a.to_f32().to_bits()).collect();
                    let o: Vec<u32> = o.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(o, want, "accumulator hd={hd} n={n} kscale={kscale}");
                }
            }
        }
    }

    #[test]
    fn tiled_head_equals_the_scalar_reference_bit_for_bit() {
        if !crate::quant::x86::available() {
            eprintln!("skipped: no AVX2/FMA/F16C on this CPU");
            return;
        }
        let mut rng = SplitMix64::new(5);
        for hd in [4usize, 8, 12, 64, 128] {
            for n in [1usize, 2, 17, 90] {
                for scale in [0.1f32, 1.0, 30.0] {
                    let stride = 3 * hd;
                    let f = |rng: &mut SplitMix64, len: usize, s: f32| -> Vec<f32> {
                        (0..len).map(|_| rng.next_signed() * s).collect()
                    };
                    let (k, v) = (f(&mut rng, n * stride, scale), f(&mut rng, n * stride, 1.0));
                    let q = f(&mut rng, hd, 1.0);
                    let rows = TiledRows {
                        k: &k,
                        v: &v,
                        stride,
                        at: hd,
                        n,
                    };
                    let (mut fast, mut slow) = (vec![1f32; hd], vec![2f32; hd]);
                    // SAFETY: the features were just detected.
                    let a = unsafe { tiled_head(&q, rows, 0.125, &mut fast) };
                    let b = super::super::attention_tiled::tiled_head_scalar(
                        &q, rows, 0.125, &mut slow,
                    );
                    assert_eq!(a.to_bits(), b.to_bits(), "sum hd={hd} n={n}");
                    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&fast), bits(&slow), "o hd={hd} n={n}");
                }
            }
        }
    }
}
