//! One token against Q5_0 rows in the file's layout under `fast` numerics on AVX-512 VNNI
//! (256-bit, AVX-512 VL): a decode step's Q5_0 products (a q4_k_m Qwen2.5-0.5b's Q, K, gate and
//! up: 896 columns are no multiple of 256), which otherwise take the exact row dot, one row and
//! one float chain at a time, and at one thread use less of the memory's rate than the core's
//! arithmetic.
//!
//! Four rows a step share each activation block's loads. A row's block is made its stored 5-bit
//! values (the level plus 16; the fifth bits added under a mask taken straight from `qh`), and
//! one `vpdpbusd` started at minus 16 times the activations' four-value lane sums
//! (`BlockQ8_0::sums16`) leaves the exact integer lane sums of the signed products, where AVX2
//! takes a `maddubs`, a `madd` and a subtraction. Each block's lanes then take one fused
//! multiply-add by `d_w * d_a` into the row's float lanes, summed at the end: the float order
//! of `fast_rows::rows_q8_0_one`, not the exact row's. AVX2-only CPUs keep the exact row dot,
//! and Q8_0 rows `rows_q8_0_one` (docs/measurements/cpu-engine.md says why).

use std::arch::x86_64::*;

use super::loads::{f16_pair, hsum, nibbles, u32_at};
use super::prefetch::prefetch_ahead;
use crate::quant::blocks::BlockQ8_0;

/// Bytes of a Q5_0 block: d, qh (32 fifth bits), 16 bytes of nibbles.
const BYTES: usize = 22;

/// Whether the CPU runs this kernel (cached by std after the first call).
pub fn available() -> bool {
    super::features::available()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

/// `out[r] = row r · a` for one token against Q5_0 rows in the file's layout, `row_bytes`
/// each.
///
/// # Safety
/// The CPU must support what `available` asks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn rows_q5_0_one(rows: &[u8], row_bytes: usize, a: &[BlockQ8_0], out: &mut [f32]) {
    assert_eq!(
        row_bytes,
        BYTES * a.len(),
        "a row of {row_bytes} bytes against {} blocks",
        a.len()
    );
    assert!(
        rows.len() >= out.len() * row_bytes,
        "fewer rows than outputs"
    );
    let fours = out.len() / 4 * 4;
    for (i, o) in out[..fours].chunks_exact_mut(4).enumerate() {
        // SAFETY: rows 4i..4i + 4 lie inside `rows` (asserted above).
        unsafe { group::<4>(rows.as_ptr().add(4 * i * row_bytes), row_bytes, a, o) };
    }
    for r in fours..out.len() {
        // SAFETY: as above, row r.
        unsafe {
            group::<1>(
                rows.as_ptr().add(r * row_bytes),
                row_bytes,
                a,
                &mut out[r..],
            )
        };
    }
}

/// A block (d, qh, qs) as its 32 stored 5-bit values (level plus 16), weight order: the
/// nibbles (`loads::nibbles`), then 16 added where `qh` has the weight's fifth bit.
#[inline(always)]
unsafe fn unsigned(b: &[u8]) -> __m256i {
    // SAFETY: the caller's target features; `nibbles` reads qs's 16 bytes.
    let nib = unsafe { nibbles(&b[6..BYTES]) };
    _mm256_mask_add_epi8(
        nib,
        _cvtu32_mask32(u32_at(b, 2)),
        nib,
        _mm256_set1_epi8(0x10),
    )
}

/// `R` consecutive rows from `p` against the token, into `out[..R]`.
#[inline(always)]
unsafe fn group<const R: usize>(p: *const u8, row_bytes: usize, a: &[BlockQ8_0], out: &mut [f32]) {
    let mut acc = [_mm256_setzero_ps(); R];
    for (i, y) in a.iter().enumerate() {
        // SAFETY: an activation block is 32 levels and eight lane sums.
        let (x, start) = unsafe {
            let sums16 = _mm256_loadu_si256(y.sums16.as_ptr() as *const __m256i);
            (
                _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i),
                _mm256_sub_epi32(_mm256_setzero_si256(), sums16),
            )
        };
        for (k, acc) in acc.iter_mut().enumerate() {
            // SAFETY: block i of row k lies inside the rows the caller passed.
            let b = unsafe { std::slice::from_raw_parts(p.add(k * row_bytes + i * BYTES), BYTES) };
            prefetch_ahead(b.as_ptr());
            // SAFETY: the caller's target features; a whole block.
            let (lanes, dw) =
                unsafe { (_mm256_dpbusd_epi32(start, unsigned(b), x), f16_pair(b, 0).0) };
            let lanes = _mm256_cvtepi32_ps(lanes);
            *acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * y.d), lanes, *acc);
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        // SAFETY: AVX2 is enabled in every caller.
        *o = unsafe { hsum(s) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::test_rows::rows_and_acts;
    use crate::quant::{dequantize_row, vec_dot, GgmlType, QuantizedAct};
    use crate::rng::SplitMix64;

    /// Q5_0 rows (counts that leave every remainder of four) against each of eight tokens,
    /// within float reordering of the exact kernel's result: the same integer block sums,
    /// other float order, so each row's error is bounded by the sum of its blocks' absolute
    /// products.
    #[test]
    fn one_token_rows_match_the_exact_ones() {
        if !available() {
            eprintln!("skipped: no AVX-512 F/BW/VL/VNNI on this CPU");
            return;
        }
        let mut rng = SplitMix64::new(0x0001_5a11);
        for (blocks, n_rows) in [(1usize, 1usize), (3, 7), (28, 13), (152, 4)] {
            let (rows, acts) = rows_and_acts(&mut rng, GgmlType::Q5_0, n_rows, blocks);
            let rb = BYTES * blocks;
            let mut plain = vec![0f32; 32 * blocks];
            for a in &acts {
                let ax: Vec<f32> = a
                    .iter()
                    .flat_map(|y| y.qs.map(|q| q as f32 * y.d))
                    .collect();
                let act = QuantizedAct::Q8_0(a.clone());
                let mut got = vec![f32::NAN; n_rows];
                // SAFETY: the features were just detected; `a` has a block per row block.
                unsafe { rows_q5_0_one(&rows, rb, a, &mut got) };
                for (r, row) in rows.chunks_exact(rb).enumerate() {
                    let want = vec_dot(GgmlType::Q5_0, row, &act);
                    dequantize_row(GgmlType::Q5_0, row, &mut plain);
                    let scale: f32 = plain.iter().zip(&ax).map(|(w, x)| (w * x).abs()).sum();
                    assert!(
                        (got[r] - want).abs() <= 1e-5 * scale.max(1.0),
                        "{blocks} blocks, row {r}: {} vs {want}",
                        got[r]
                    );
                }
            }
        }
    }
}
