//! Activation quantization to Q8_K (`quantize_row_q8_K_ref`), the scalar reference of the
//! AVX2 quantizer in `x86::act`.

use crate::quant::blocks::{nearest_int, pair_order, BlockQ8K, QK_K};

/// Quantize activations to Q8_K as the x86 CPU backend does. ggml-cpu/arch/x86/quants.c's
/// `quantize_row_q8_K` is a plain call to `quantize_row_q8_K_ref` (no SIMD path), so this is the
/// reference: `iscale = -127 / max` where `max` is the signed value of largest magnitude (the
/// first one, on ties), `q = min(127, nearest_int(iscale * x))`, `d = 1 / iscale`, and `bsums`
/// the sums of each 16 q. A block of zeros gets `d = 0`, zero qs and zero bsums (ggml leaves its
/// bsums unwritten there; with d = 0 they cannot affect a dot product).
pub fn quantize_act_q8_k(x: &[f32]) -> Vec<BlockQ8K> {
    assert!(
        x.len().is_multiple_of(QK_K),
        "Q8_K needs whole blocks of {QK_K}, got {}",
        x.len()
    );
    x.chunks_exact(QK_K)
        .map(|xb| {
            let mut max = 0f32;
            let mut amax = 0f32;
            for &v in xb {
                let av = v.abs();
                if av > amax {
                    amax = av;
                    max = v;
                }
            }
            let mut blk = BlockQ8K::ZERO;
            if amax == 0.0 {
                return blk;
            }
            let iscale = -127.0 / max;
            for (q, &v) in blk.qs.iter_mut().zip(xb) {
                *q = nearest_int(iscale * v).min(127) as i8;
            }
            for (s, qs) in blk.bsums.iter_mut().zip(blk.qs.chunks_exact(16)) {
                *s = qs.iter().map(|&q| q as i16).sum();
            }
            blk.qs_pairs = pair_order(&blk.qs);
            blk.d = 1.0 / iscale;
            blk
        })
        .collect()
}
