//! The accumulation order and approximations of ggml's x86 SIMD kernels, reproduced in scalar
//! Rust.
//!
//! A real model amplifies one-ulp differences: a hidden value that lands on the other side of
//! an 8-bit rounding boundary when the next activation is quantized moves the logits by ~0.1,
//! enough to flip a greedy choice. Matching llama.cpp's greedy tokens on real models therefore
//! needs its float operations in its order, not just the same math. These helpers give that
//! order for the kernels on cbtop's reference path (llama.cpp built for AVX2/AVX-512 with FMA,
//! as its x86 builds are): 8-lane FMA accumulators reduced by `hsum_float_8`, the 16-lane f16
//! dot of attention, and ggml's polynomial `expf` inside SiLU.

use half::f16;

/// Eight f32 lanes accumulated with fused multiply-adds, as an `__m256` accumulator.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lanes8([f32; 8]);

impl From<[f32; 8]> for Lanes8 {
    fn from(lanes: [f32; 8]) -> Lanes8 {
        Lanes8(lanes)
    }
}

impl Lanes8 {
    /// `acc[l] = fma(d, sums[l], acc[l])` (`_mm256_fmadd_ps(d, q, acc)`).
    #[inline(always)]
    pub fn fma(&mut self, d: f32, sums: [i32; 8]) {
        for (a, s) in self.0.iter_mut().zip(sums) {
            *a = d.mul_add(s as f32, *a);
        }
    }

    /// ggml's `hsum_float_8`: high half + low half, then pairs, then the last two.
    #[inline(always)]
    pub fn hsum(&self) -> f32 {
        let x = &self.0;
        let r: [f32; 4] = std::array::from_fn(|i| x[i + 4] + x[i]);
        (r[0] + r[2]) + (r[1] + r[3])
    }
}

/// Sums of four consecutive products per lane (`maddubs` + `madd`, or VNNI `dpbusd`): lane `l`
/// holds `Σ_{k<4} q[4l+k]·a[4l+k]`. Integer-exact, so any ISA gives the same lanes.
#[inline(always)]
pub fn lane_sums(q: &[i8; 32], a: &[i8; 32]) -> [i32; 8] {
    std::array::from_fn(|l| {
        (0..4)
            .map(|k| q[4 * l + k] as i32 * a[4 * l + k] as i32)
            .sum()
    })
}

/// ggml's `_mm512_reduce_add_ps` order for 16 lanes (GCC's expansion).
#[inline(always)]
fn reduce_add_16(x: &[f32; 16]) -> f32 {
    let t3: [f32; 8] = std::array::from_fn(|i| x[i + 8] + x[i]);
    let t6: [f32; 4] = std::array::from_fn(|i| t3[i + 4] + t3[i]);
    (t6[0] + t6[2]) + (t6[1] + t6[3])
}

/// `ggml_vec_dot_f16` as built for AVX-512: four 16-lane f32 FMA accumulators over steps of
/// 64, reduced pairwise, then the leftover elements added in f64.
pub fn dot_f16(x: &[f16], y: &[f16]) -> f32 {
    dot_f16_by(x, y.len(), |k| y[k].to_f32())
}

/// `dot_f16` with `y` already widened to f32 (each value an f16's, so exactly what
/// `dot_f16` would widen it to): the same bits, without converting `y` on every call.
pub fn dot_f16_f32(x: &[f16], y: &[f32]) -> f32 {
    dot_f16_by(x, y.len(), |k| y[k])
}

#[inline(always)]
fn dot_f16_by(x: &[f16], y_len: usize, y: impl Fn(usize) -> f32) -> f32 {
    let n = x.len().min(y_len);
    let np = n & !63;
    let mut sum = [[0f32; 16]; 4];
    for i in (0..np).step_by(64) {
        for (j, acc) in sum.iter_mut().enumerate() {
            for (l, a) in acc.iter_mut().enumerate() {
                let k = i + 16 * j + l;
                *a = x[k].to_f32().mul_add(y(k), *a);
            }
        }
    }
    let mut total = 0f64;
    if np > 0 {
        let [s0, s1, s2, s3] = sum;
        let folded: [f32; 16] = std::array::from_fn(|l| (s0[l] + s2[l]) + (s1[l] + s3[l]));
        total = reduce_add_16(&folded) as f64;
    }
    for (k, xk) in (np..n).zip(&x[np..n]) {
        total += (xk.to_f32() * y(k)) as f64;
    }
    total as f32
}

/// ggml's AVX-512 `ggml_v_expf` (an Arm-optimized-routines polynomial, max error ~1.5 ulp).
#[inline(always)]
pub fn expf(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // log2(e)
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),
        (-n).mul_add(f32::from_bits(0x3f31_7200), x),
    );
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010)
        .mul_add(b, f32::from_bits(0x3d2b_9f17))
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)),
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6).mul_add(b, 1.0));
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    // _mm512_scalef_ps(j, n) = j * 2^n, rounded once: n is a whole number with |n| <= 192, so
    // 2^n is an exact f64 built from its exponent bits (no libm `exp2` call in the hot loop),
    // the f64 product is exact (j has 24 bits), and the cast rounds once.
    let pow2 = f64::from_bits(((n as i64 + 1023) as u64) << 52);
    (j as f64 * pow2) as f32
}

/// SiLU as ggml's vector path computes it: `x / (1 + expf(0 - x))`.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + expf(0.0 - x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expf_is_within_two_ulp_of_exp() {
        let mut x = -80.0f32;
        while x < 80.0 {
            let (got, want) = (expf(x), (x as f64).exp());
            let ulp = (want as f32).to_bits().abs_diff(got.to_bits());
            assert!(ulp <= 2, "expf({x}) = {got}, exp = {want} ({ulp} ulp)");
            x += 0.0137;
        }
        assert_eq!(expf(-200.0), 0.0);
        assert_eq!(expf(200.0), f32::INFINITY);
    }

    #[test]
    fn expf_scaling_by_exponent_bits_equals_exp2() {
        for n in -192i64..=192 {
            let bits = f64::from_bits(((n + 1023) as u64) << 52);
            assert_eq!(bits, (n as f64).exp2(), "2^{n}");
        }
    }

    #[test]
    fn silu_matches_definition() {
        for &x in &[-10.0f32, -1.0, -0.1, 0.0, 0.3, 2.0, 15.0] {
            let want = x as f64 / (1.0 + (-x as f64).exp());
            assert!(
                (silu(x) as f64 - want).abs() <= 1e-6 * want.abs().max(1e-3),
                "{x}"
            );
        }
    }

    #[test]
    fn dot_f16_equals_exact_dot_on_small_integers_and_handles_leftovers() {
        // Small integers make every order exact, so the result must equal the true dot.
        for n in [1usize, 7, 64, 100, 130] {
            let x: Vec<f16> = (0..n)
                .map(|i| f16::from_f32((i % 7) as f32 - 3.0))
                .collect();
            let y: Vec<f16> = (0..n)
                .map(|i| f16::from_f32((i % 5) as f32 - 2.0))
                .collect();
            let want: f32 = x.iter().zip(&y).map(|(a, b)| a.to_f32() * b.to_f32()).sum();
            assert_eq!(dot_f16(&x, &y), want, "n = {n}");
        }
    }

    #[test]
    fn lanes_and_hsum() {
        let q: [i8; 32] = std::array::from_fn(|i| i as i8 - 16);
        let a: [i8; 32] = std::array::from_fn(|i| (i % 3) as i8);
        let s = lane_sums(&q, &a);
        let want: i32 = q.iter().zip(&a).map(|(x, y)| *x as i32 * *y as i32).sum();
        assert_eq!(s.iter().sum::<i32>(), want);
        let mut acc = Lanes8::default();
        acc.fma(0.5, s);
        assert_eq!(acc.hsum(), want as f32 * 0.5);
    }
}
