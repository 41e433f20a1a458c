//! Element-wise and per-row operations of a transformer layer on the CPU, with llama.cpp's
//! arithmetic (f32 values, f64 sums where ggml uses them).

use crate::engine::sampler::first_max;
use crate::model::RopeStyle;
use crate::quant::fma::with_fma;
use crate::quant::simd_order::silu;

/// `out = x / rms(x) * w` for one row, as ggml's rms_norm followed by mul.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0 / (mean + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v * scale) * g;
    }
}

/// `rms_norm` of each `w.len()`-value head of `x`, in place (the per-head Q/K norm of qwen3
/// and gemma3: ggml's rms_norm over a `[head_dim, heads, tokens]` view, then mul): each head's
/// sum is taken before any of it is overwritten, so the bits are `rms_norm`'s.
pub fn rms_norm_heads(x: &mut [f32], w: &[f32], eps: f32) {
    for head in x.chunks_exact_mut(w.len()) {
        let sum: f64 = head.iter().map(|&v| (v * v) as f64).sum();
        let mean = (sum / head.len() as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        for (v, &g) in head.iter_mut().zip(w) {
            *v = (*v * scale) * g;
        }
    }
}

/// `x *= s`, as ggml_scale (one f32 product per value).
pub fn scale_in_place(x: &mut [f32], s: f32) {
    x.iter_mut().for_each(|v| *v *= s);
}

/// `x = tanh(x / cap) * cap` per value, as llama.cpp's logit soft cap (ggml_scale by
/// `1 / cap`, ggml_tanh, ggml_scale by `cap`).
pub fn softcap_in_place(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    x.iter_mut().for_each(|v| *v = (*v * inv).tanh() * cap);
}

/// `x += y`.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// `sampler::argmax` over the engine's pool: each thread finds the first largest value of
/// its piece (`sampler::first_max`), and the pieces combine in order with `>` (a later piece
/// wins only with a larger value: the lowest index on ties), from index 0 (which wins when it
/// is NaN). The same index as the serial loop.
pub fn argmax(logits: &[f32]) -> u32 {
    let pool = super::pool::global();
    let pieces = (pool.threads() * 2)
        .min(logits.len().div_ceil(ARGMAX_MIN_PIECE))
        .max(1);
    let piece = logits.len().div_ceil(pieces).max(1);
    let mut found = vec![None; logits.len().div_ceil(piece)];
    super::pool::par_chunks_mut(&mut found, 1, |i, f| {
        let part = &logits[i * piece..((i + 1) * piece).min(logits.len())];
        f[0] = first_max(part).map(|j| i * piece + j);
    });
    let mut best = 0;
    for i in found.into_iter().flatten() {
        if logits[i] > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The smallest piece of an `argmax` worth a task of its own.
const ARGMAX_MIN_PIECE: usize = 16384;

/// Values per `silu_mul` task: large enough that a pool hand-off costs little against it.
const SILU_CHUNK: usize = 1024;

/// `gate = silu(gate) * up`, SiLU(x) = x / (1 + e^-x) with ggml's vector `expf`. Each element
/// is computed on its own (the same operations whichever thread takes it), so the work is split
/// over the engine's pool in `SILU_CHUNK` pieces.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    let up = &up[..gate.len()];
    super::pool::par_chunks_mut(gate, SILU_CHUNK, |i, g| {
        silu_mul_serial(g, &up[i * SILU_CHUNK..][..g.len()])
    });
}

/// The kernel `silu_mul` takes here, named with its instruction set (for the drill-down).
pub fn silu_mul_kernel() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        return "ops_x86::silu_mul (avx2)";
    }
    "ops::silu_mul (scalar)"
}

/// `silu_mul` on the calling thread: AVX2 where the CPU has it (`ops_x86::silu_mul`, the
/// same bits), else the scalar loop.
fn silu_mul_serial(gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::x86::available() {
        // SAFETY: the features were just detected.
        return unsafe { super::ops_x86::silu_mul(gate, up) };
    }
    with_fma(
        #[inline(always)]
        || {
            for (g, &u) in gate.iter_mut().zip(up) {
                *g = silu(*g) * u;
            }
        },
    )
}

/// Cosine/sine table for one position: `n_rot / 2` pairs, as ggml's rope cache (theta
/// multiplied by `base^(-2/n_rot)` step by step in f32).
pub fn rope_table(pos: usize, n_rot: usize, base: f32) -> Vec<(f32, f32)> {
    rope_table_scaled(pos, n_rot, base, 1.0)
}

/// `rope_table` with a linear frequency scale: each angle multiplied by `freq_scale` before
/// its cosine and sine, as ggml's `rope_yarn` without extrapolation mix (the running angle
/// itself stays unscaled; a scale of 1 leaves every bit as `rope_table`'s).
pub fn rope_table_scaled(pos: usize, n_rot: usize, base: f32, freq_scale: f32) -> Vec<(f32, f32)> {
    let theta_scale = base.powf(-2.0 / n_rot as f32);
    let mut theta = pos as f32;
    (0..n_rot / 2)
        .map(|_| {
            let t = freq_scale * theta;
            let cs = (t.cos(), t.sin());
            theta *= theta_scale;
            cs
        })
        .collect()
}

/// Rotate each head of `x` (`n_heads` heads of `head_dim`) in place.
/// The fused operations run as FMA instructions where the CPU has them (`with_fma`; without
/// it `mul_add` is a libm call per element), the same bits either way.
pub fn rope(x: &mut [f32], head_dim: usize, table: &[(f32, f32)], style: RopeStyle) {
    with_fma(
        #[inline(always)]
        || rope_serial(x, head_dim, table, style),
    )
}

#[inline(always)]
fn rope_serial(x: &mut [f32], head_dim: usize, table: &[(f32, f32)], style: RopeStyle) {
    let n_rot = table.len() * 2;
    for head in x.chunks_exact_mut(head_dim) {
        for (i, &(c, s)) in table.iter().enumerate() {
            let (a, b) = match style {
                RopeStyle::Norm => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + n_rot / 2),
            };
            let (x0, x1) = (head[a], head[b]);
            // ggml computes `x0*c - x1*s` and `x0*s + x1*c`; GCC contracts each into one FMA
            // (first product fused, second rounded), and a real model notices the last bit.
            head[a] = x0.mul_add(c, -(x1 * s));
            head[b] = x0.mul_add(s, x1 * c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_matches_definition() {
        let x = [1.0f32, -2.0, 3.0, 0.5];
        let w = [1.0f32, 2.0, 0.5, 1.0];
        let mut out = [0f32; 4];
        rms_norm(&x, &w, 1e-6, &mut out);
        let rms = ((1.0 + 4.0 + 9.0 + 0.25) / 4.0f32 + 1e-6).sqrt();
        for i in 0..4 {
            assert!((out[i] - x[i] / rms * w[i]).abs() < 1e-6);
        }
    }

    #[test]
    fn per_head_rms_norm_is_rms_norm_of_each_head() {
        let mut rng = crate::rng::SplitMix64::new(5);
        let x: Vec<f32> = (0..3 * 8).map(|_| rng.next_signed() * 4.0).collect();
        let w: Vec<f32> = (0..8).map(|_| rng.next_signed()).collect();
        let mut heads = x.clone();
        rms_norm_heads(&mut heads, &w, 1e-6);
        for (h, got) in x.chunks_exact(8).zip(heads.chunks_exact(8)) {
            let mut want = [0f32; 8];
            rms_norm(h, &w, 1e-6, &mut want);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn scaled_rope_table_scales_each_angle_and_scale_one_is_the_plain_table() {
        assert_eq!(rope_table_scaled(7, 8, 1e6, 1.0), rope_table(7, 8, 1e6));
        let half = rope_table_scaled(6, 4, 10000.0, 0.5);
        assert_eq!(half[0], (3f32.cos(), 3f32.sin()));
        let mut x = [2.0f32, -40.0, 0.0];
        softcap_in_place(&mut x, 30.0);
        assert!((x[0] - (2.0f32 / 30.0).tanh() * 30.0).abs() < 1e-6);
        assert!(x[1] > -30.0 && x[1] < -25.0 && x[2] == 0.0);
    }

    #[test]
    fn rope_rotates_the_right_pairs() {
        let table = rope_table(3, 4, 10000.0);
        assert!((table[0].0 - 3f32.cos()).abs() < 1e-6);
        assert!((table[1].1 - (3.0f32 * 0.01).sin()).abs() < 1e-6);
        let orig = [1.0f32, 2.0, 3.0, 4.0];
        let mut norm = orig;
        rope(&mut norm, 4, &table, RopeStyle::Norm);
        let (c, s) = table[0];
        assert!((norm[0] - (1.0 * c - 2.0 * s)).abs() < 1e-6);
        assert!((norm[1] - (1.0 * s + 2.0 * c)).abs() < 1e-6);
        let mut neox = orig;
        rope(&mut neox, 4, &table, RopeStyle::Neox);
        assert!((neox[0] - (1.0 * c - 3.0 * s)).abs() < 1e-6);
        assert!((neox[2] - (1.0 * s + 3.0 * c)).abs() < 1e-6);
        // Position 0 is the identity.
        let mut id = orig;
        rope(&mut id, 4, &rope_table(0, 4, 10000.0), RopeStyle::Neox);
        assert_eq!(id, orig);
    }

    /// The pooled `silu_mul` gives each element the serial loop's bits.
    #[test]
    fn silu_mul_split_over_the_pool_equals_the_serial_loop() {
        let mut rng = crate::rng::SplitMix64::new(3);
        for n in [1usize, 7, SILU_CHUNK, SILU_CHUNK + 1, 4864] {
            let g: Vec<f32> = (0..n).map(|_| rng.next_signed() * 12.0).collect();
            let u: Vec<f32> = (0..n).map(|_| rng.next_signed() * 3.0).collect();
            let (mut fast, mut slow) = (g.clone(), g);
            silu_mul(&mut fast, &u);
            for (a, &b) in slow.iter_mut().zip(&u) {
                *a = silu(*a) * b;
            }
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&slow), "n={n}");
        }
    }

    /// The pooled `argmax` picks the serial loop's index (NaNs, ties, signed zeros, pieces
    /// starting with a NaN).
    #[test]
    fn pooled_argmax_equals_the_serial_reference() {
        use crate::engine::sampler::argmax_serial;
        let mut rng = crate::rng::SplitMix64::new(21);
        for len in [0usize, 1, 5, ARGMAX_MIN_PIECE + 3, 151_936] {
            for round in 0..12 {
                let mut l: Vec<f32> = (0..len)
                    .map(|_| {
                        let r = rng.next_signed();
                        match round % 3 {
                            0 => r,
                            1 => (r * 2.0).round(),
                            _ => -r.abs() * 1e-3,
                        }
                    })
                    .collect();
                if round % 4 == 3 {
                    // NaN at the start of every piece a pool of any size could cut
                    for k in (0..len).step_by(997) {
                        l[k] = f32::NAN;
                    }
                }
                assert_eq!(argmax(&l), argmax_serial(&l), "len {len} round {round}");
            }
        }
        let mut l = vec![f32::NAN; 3 * ARGMAX_MIN_PIECE];
        l[2 * ARGMAX_MIN_PIECE + 5] = -0.0;
        l[ARGMAX_MIN_PIECE + 9] = 0.0;
        assert_eq!(argmax(&l), 0);
        l[0] = -1.0;
        assert_eq!(argmax(&l), (ARGMAX_MIN_PIECE + 9) as u32);
    }

    #[test]
    fn silu_mul_values() {
        let mut g = [0.0f32, 1.0, -1.0];
        silu_mul(&mut g, &[2.0, 2.0, 2.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 2.0 / (1.0 + (-1.0f32).exp())).abs() < 1e-6);
        assert!((g[2] + 2.0 / (1.0 + 1.0f32.exp())).abs() < 1e-6);
    }
}
