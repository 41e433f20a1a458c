//! GeGLU, `gelu(gate) * up`, as ggml's CPU backend computes it for gemma3's feed-forward:
//! GELU (tanh form) looked up in a table of 65536 f16 entries indexed by the gate rounded to
//! f16 (ggml builds with `GGML_GELU_FP16`), with gates at or below -10 giving 0 and gates at
//! or above 10 passing through unchanged.

use std::sync::OnceLock;

use half::f16;

/// Values per `geglu` task: large enough that a pool hand-off costs little against it.
const CHUNK: usize = 1024;

const GELU_COEF_A: f32 = 0.044715;
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// ggml's `ggml_gelu_f32` as its x86 build compiles it: GCC contracts `1 + A*x*x` into one
/// fused multiply-add (`(A*x)` rounded, then `fma(A*x, x, 1)`), and the other products and
/// sums are rounded one by one. `tanh` is the C library's `tanhf`, as ggml's.
pub fn gelu_f32(x: f32) -> f32 {
    let inner = (GELU_COEF_A * x).mul_add(x, 1.0);
    let t = (SQRT_2_OVER_PI * x * inner).tanh();
    0.5 * x * (1.0 + t)
}

/// ggml's `ggml_table_gelu_f16`: entry `i` is `gelu_f32` of the f16 with bits `i`, rounded
/// to f16 (nearest, ties to even, as F16C's `vcvtps2ph`); a NaN entry is the quiet NaN of
/// its sign without payload, as ggml's table holds it. Built once, on first use.
pub fn gelu_table() -> &'static [u16; 1 << 16] {
    static TABLE: OnceLock<Box<[u16; 1 << 16]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0u16; 1 << 16]);
        for (i, e) in t.iter_mut().enumerate() {
            let x = f16::from_bits(i as u16);
            *e = if x.is_nan() {
                (i as u16 & 0x8000) | 0x7e00
            } else {
                f16::from_f32(gelu_f32(x.to_f32())).to_bits()
            };
        }
        t
    })
}

/// One element of ggml's `ggml_vec_geglu_f32` with the table built (`table`).
#[inline(always)]
fn geglu_one(table: &[u16; 1 << 16], x: f32, g: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x * g
    } else {
        let t = f16::from_f32(x).to_bits();
        f16::from_bits(table[t as usize]).to_f32() * g
    }
}

/// `gate = gelu(gate) * up` element by element, ggml's `ggml_vec_geglu_f32` bit for bit. Each
/// element is computed on its own, so the work is split over the engine's pool in `CHUNK`
/// pieces with the same bits whichever thread takes a piece.
pub fn geglu(gate: &mut [f32], up: &[f32]) {
    let up = &up[..gate.len()];
    let table = gelu_table();
    super::pool::par_chunks_mut(gate, CHUNK, |i, g| {
        geglu_serial(table, g, &up[i * CHUNK..][..g.len()])
    });
}

/// `geglu` on the calling thread: eight at a time with F16C's conversions where the CPU has
/// them (`geglu_f16c`, the same bits), else one at a time.
fn geglu_serial(table: &[u16; 1 << 16], gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        // SAFETY: the features were just detected.
        return unsafe { geglu_f16c(table, gate, up) };
    }
    geglu_scalar(table, gate, up)
}

fn geglu_scalar(table: &[u16; 1 << 16], gate: &mut [f32], up: &[f32]) {
    for (x, &u) in gate.iter_mut().zip(up) {
        *x = geglu_one(table, *x, u);
    }
}

/// `geglu_scalar` eight values at a time: the gates rounded to f16 by `vcvtps2ph` (nearest,
/// ties to even, as `f16::from_f32`), eight table lookups, the entries widened by `vcvtph2ps`
/// (exact), one product each, and the two cut-offs chosen per lane by ordered compares (a NaN
/// gate takes the table, as in the scalar branch). The same bits as `geglu_scalar`.
///
/// # Safety
/// AVX2 and F16C must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn geglu_f16c(table: &[u16; 1 << 16], gate: &mut [f32], up: &[f32]) {
    use std::arch::x86_64::*;
    let n = gate.len().min(up.len());
    let n8 = n & !7;
    let (lo, hi) = (_mm256_set1_ps(-10.0), _mm256_set1_ps(10.0));
    let (pg, pu) = (gate.as_mut_ptr(), up.as_ptr());
    let mut idx = [0u16; 8];
    let mut looked = [0u16; 8];
    for i in (0..n8).step_by(8) {
        let x = _mm256_loadu_ps(pg.add(i));
        let g = _mm256_loadu_ps(pu.add(i));
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
        _mm_storeu_si128(idx.as_mut_ptr() as *mut __m128i, h);
        for (l, &k) in looked.iter_mut().zip(&idx) {
            *l = table[k as usize];
        }
        let t = _mm256_cvtph_ps(_mm_loadu_si128(looked.as_ptr() as *const __m128i));
        let mid = _mm256_mul_ps(t, g);
        let big = _mm256_mul_ps(x, g);
        let y = _mm256_blendv_ps(mid, big, _mm256_cmp_ps::<_CMP_GE_OQ>(x, hi));
        let y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps::<_CMP_LE_OQ>(x, lo));
        _mm256_storeu_ps(pg.add(i), y);
    }
    geglu_scalar(table, &mut gate[n8..n], &up[n8..n]);
}

/// The kernel `geglu` runs here, named with its instruction set (for the drill-down).
pub fn geglu_kernel() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        return "geglu::geglu_f16c (f16 gelu table, avx2)";
    }
    "geglu::geglu (f16 gelu table, scalar)"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml's rule written out plainly, one element at a time from the definition (no table):
    /// the gate rounded to f16 and back, GELU of that in f32 with the one fused step, rounded
    /// to f16 and back, times `up`; the two cut-offs at +-10.
    fn reference(x: f32, g: f32) -> f32 {
        if x <= -10.0 {
            return 0.0;
        }
        if x >= 10.0 {
            return x * g;
        }
        let xh = f16::from_f32(x).to_f32();
        let a = GELU_COEF_A * xh;
        let inner = a.mul_add(xh, 1.0);
        let arg = SQRT_2_OVER_PI * xh;
        let arg = arg * inner;
        let y = 0.5 * xh * (1.0 + arg.tanh());
        f16::from_f32(y).to_f32() * g
    }

    /// The table is ggml's own: sha256 of `ggml_table_gelu_f16` as dumped (little-endian u16)
    /// from llama.cpp's CPU build of ../shared/peer after `ggml_cpu_init()` (the C library's
    /// `tanhf`, glibc on this machine; an exact match of all 65536 entries, where computing
    /// `1 + A*x*x` without the fused step differs in one entry).
    #[test]
    fn the_table_is_ggmls() {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for e in gelu_table().iter() {
            h.update(e.to_le_bytes());
        }
        let got: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            got,
            "5eceda6f287dec9dc0bcfa24516d6744a031a5c52d1984688b4558aeb1daf909"
        );
    }

    #[test]
    fn geglu_matches_the_plain_rule_bit_for_bit() {
        let mut rng = crate::rng::SplitMix64::new(38);
        for n in [1usize, 5, CHUNK, CHUNK + 3, 6912] {
            let mut x: Vec<f32> = (0..n).map(|_| rng.next_signed() * 14.0).collect();
            // the cut-offs and values either side of them
            for (i, v) in [-10.0f32, 10.0, -9.999, 9.999, -10.001, 10.001, 0.0, -0.0]
                .into_iter()
                .enumerate()
            {
                if i < n {
                    x[i] = v;
                }
            }
            let g: Vec<f32> = (0..n).map(|_| rng.next_signed() * 3.0).collect();
            let mut y = x.clone();
            geglu(&mut y, &g);
            for i in 0..n {
                let want = reference(x[i], g[i]);
                assert_eq!(y[i].to_bits(), want.to_bits(), "x={} g={}", x[i], g[i]);
            }
        }
    }

    /// The eight-wide path gives the scalar loop's bits, NaN, infinities, zeros of both signs
    /// and values rounding to either side of the cut-offs included, at every tail length.
    #[test]
    fn the_f16c_path_equals_the_scalar_loop_bit_for_bit() {
        #[cfg(target_arch = "x86_64")]
        {
            if !crate::quant::x86::available() {
                eprintln!("skipped: no AVX2/F16C on this CPU");
                return;
            }
            let table = gelu_table();
            let mut rng = crate::rng::SplitMix64::new(9);
            let special = [
                f32::NAN,
                -f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                0.0,
                -0.0,
                -10.0,
                10.0,
                9.999_999,
                -9.999_999,
                10.000_001,
                65520.0,
                1e-8,
                -3.4e38,
            ];
            for n in [0usize, 1, 7, 8, 9, 15, 16, 100, 6912] {
                let mut x: Vec<f32> = (0..n).map(|_| rng.next_signed() * 16.0).collect();
                for (v, s) in x.iter_mut().zip(special.iter().cycle().step_by(3)) {
                    if rng.next_u64().is_multiple_of(3) {
                        *v = *s;
                    }
                }
                let g: Vec<f32> = (0..n).map(|_| rng.next_signed() * 4.0).collect();
                let (mut fast, mut slow) = (x.clone(), x);
                // SAFETY: the features were just detected.
                unsafe { geglu_f16c(table, &mut fast, &g) };
                geglu_scalar(table, &mut slow, &g);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&fast), bits(&slow), "n={n}");
            }
        }
    }

    #[test]
    fn geglu_values() {
        // gelu(0) = 0; gelu(1) ~ 0.8412 (tanh form); large gates pass through, very negative
        // ones give 0.
        let mut g = [0.0f32, 1.0, -1.0, 12.0, -12.0];
        geglu(&mut g, &[2.0, 2.0, 2.0, 0.5, 3.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 2.0 * 0.841_192).abs() < 2e-3, "{}", g[1]);
        assert!((g[2] + 2.0 * 0.158_808).abs() < 2e-3, "{}", g[2]);
        assert_eq!(g[3], 6.0);
        assert_eq!(g[4], 0.0);
    }
}
