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
        for (x, &u) in g.iter_mut().zip(&up[i * CHUNK..]) {
            *x = geglu_one(table, *x, u);
        }
    });
}

/// The kernel `geglu` runs (for the drill-down).
pub fn geglu_kernel() -> &'static str {
    "geglu::geglu (f16 gelu table)"
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
