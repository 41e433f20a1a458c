//! A prompt's k-quant products (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) under `fast` numerics on
//! AVX-512 VNNI. `fast_kquants` takes each 32 weights with a `maddubs`, a `madd` by the
//! sub-block scales and an add; here the weights and the tokens' activations are both laid
//! out so that 32-bit lane `j` of each 512-bit vector holds four weights of sub-block `j`
//! (16 weights each, 16 sub-blocks a block), so one `vpdpbusd` takes 64 weights and four of
//! them leave each sub-block's unscaled integer sum in its own lane. A block then costs two
//! float steps per token: the scales' term `d·scale_j · d_a · Σ level·q` and the mins' (or
//! offsets') term `B_j · d_a · bsum_j`. Every type is `A_j · u + B_j` per weight, `u` the
//! unsigned level, so one kernel takes them all. The float sums are reordered, so the results
//! differ from the reference by float rounding only.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::kquant_core::{q3_levels, q45_levels, q6_levels};
use super::loads::{f16_one, f16_pair};
use crate::quant::blocks::BlockQ8K;
use crate::quant::kquants::{
    scale_min_k4, Q2_K_BYTES, Q3_K_BYTES, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES,
};
use crate::quant::GgmlType;

/// Whether the CPU runs these kernels.
pub fn available() -> bool {
    super::fast_rows_vnni::available()
}

/// Whether `ty` has a kernel here.
pub fn unpacks(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K
    )
}

/// One row's 256-weight block in lane order.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct LaneBlock {
    /// Unsigned levels; vector `s` (bytes `64s..64s + 64`), lane `j` holds weights
    /// `16j + 4s .. 16j + 4s + 4`.
    u: [u8; 256],
    /// `A_j`: sub-block j's weights are `A_j · u + B_j`.
    a: [f32; 16],
    /// `B_j`.
    b: [f32; 16],
}

impl LaneBlock {
    const ZERO: LaneBlock = LaneBlock {
        u: [0; 256],
        a: [0.0; 16],
        b: [0.0; 16],
    };
}

/// One token's Q8_K block in lane order.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct LaneAct {
    /// The 256 values in `LaneBlock::u`'s order.
    qs: [i8; 256],
    /// `d · bsum_j`, the scaled sum of sub-block j's values.
    bs: [f32; 16],
    d: f32,
}

/// 256 bytes in weight order put in lane order (a transpose of 4-byte words: word `4j + s`
/// goes to word `16s + j`).
#[inline(always)]
fn to_lanes(src: &[u8; 256], dst: &mut [u8; 256]) {
    for j in 0..16 {
        for s in 0..4 {
            let (from, to) = (4 * (4 * j + s), 4 * (16 * s + j));
            dst[to..to + 4].copy_from_slice(&src[from..from + 4]);
        }
    }
}

/// A token's Q8_K row in lane order, into `out`.
pub fn lane_act(row: &[BlockQ8K], out: &mut Vec<LaneAct>) {
    out.clear();
    out.extend(row.iter().map(|a| {
        let mut qs = [0i8; 256];
        // SAFETY: i8 and u8 arrays of one length have one layout.
        let (src, dst) = unsafe {
            (
                &*(a.qs.as_ptr() as *const [u8; 256]),
                &mut *(qs.as_mut_ptr() as *mut [u8; 256]),
            )
        };
        to_lanes(src, dst);
        LaneAct {
            qs,
            bs: std::array::from_fn(|j| a.d * a.bsums[j] as f32),
            d: a.d,
        }
    }));
}

/// Q2_K levels (0..3) in weight order: weight `w` is bits `2((w % 128) / 32)` of
/// `qs[32(w / 128) + w % 32]`.
#[target_feature(enable = "avx2")]
unsafe fn q2_levels(qs: &[u8], out: &mut [i8; 256]) {
    assert!(qs.len() >= 64);
    let m2 = _mm256_set1_epi8(3);
    for n in 0..2 {
        let q = _mm256_loadu_si256(qs.as_ptr().add(32 * n) as *const __m256i);
        for j in 0..4 {
            let lv = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j as i32)), m2);
            _mm256_storeu_si256(out.as_mut_ptr().add(128 * n + 32 * j) as *mut __m256i, lv);
        }
    }
}

/// `rows` (whole rows of `ty`) in lane order into `out`, row after row.
///
/// # Safety
/// AVX2, FMA and F16C must be available (`x86::available`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn unpack(ty: GgmlType, rows: &[u8], out: &mut Vec<LaneBlock>) {
    let bytes = match ty {
        GgmlType::Q2_K => Q2_K_BYTES,
        GgmlType::Q3_K => Q3_K_BYTES,
        GgmlType::Q4_K => Q4_K_BYTES,
        GgmlType::Q5_K => Q5_K_BYTES,
        GgmlType::Q6_K => Q6_K_BYTES,
        _ => unreachable!("`unpacks` said no to {ty:?}"),
    };
    out.clear();
    out.resize(rows.len() / bytes, LaneBlock::ZERO);
    for (b, k) in rows.chunks_exact(bytes).zip(out.iter_mut()) {
        let mut lv = [0i8; 256];
        // The offset that makes the levels unsigned.
        let offset: i8 = match ty {
            GgmlType::Q2_K => {
                q2_levels(&b[16..80], &mut lv);
                let (d, dmin) = (f16_one(b, 80), f16_one(b, 82));
                for (j, &sm) in b[..16].iter().enumerate() {
                    k.a[j] = d * (sm & 15) as f32;
                    k.b[j] = -dmin * (sm >> 4) as f32;
                }
                0
            }
            GgmlType::Q3_K => {
                q3_levels(b, &mut lv);
                let d = f16_one(b, 108);
                for (j, &sc) in super::kquants::q3_scales_words(&b[96..108])
                    .iter()
                    .enumerate()
                {
                    k.a[j] = d * sc as f32;
                    k.b[j] = -4.0 * k.a[j];
                }
                4
            }
            GgmlType::Q6_K => {
                q6_levels(b, &mut lv);
                let d = f16_one(b, 208);
                for j in 0..16 {
                    k.a[j] = d * b[192 + j] as i8 as f32;
                    k.b[j] = -32.0 * k.a[j];
                }
                32
            }
            _ => {
                let (qs, qh) = if ty == GgmlType::Q4_K {
                    (&b[16..144], None)
                } else {
                    (&b[48..176], Some(&b[16..48]))
                };
                q45_levels(qs, qh, &mut lv);
                let (d, dmin) = f16_pair(b, 0);
                for j in 0..16 {
                    let (sc, mn) = scale_min_k4(j / 2, &b[4..16]);
                    k.a[j] = d * sc as f32;
                    k.b[j] = -dmin * mn as f32;
                }
                0
            }
        };
        let u: [u8; 256] = std::array::from_fn(|i| lv[i].wrapping_add(offset) as u8);
        to_lanes(&u, &mut k.u);
    }
}

/// Rows `R` at a time against tokens `T` at a time (`T` tokens' activations read once for `R`
/// rows' weights, the weights once for `T` tokens). On the 2-core EPYC the tiles 2x4, 1x8,
/// 2x6, 3x4, 4x2 and 2x8 ran within 6% of each other (one thread at about one `vpdpbusd` a
/// cycle: the instruction, not the loads, bounds it).
const R: usize = 2;
const T: usize = 4;

/// `out(t)[r] = row r · act(t)` for the lane-order rows `blocks` (`per_row` blocks each) and
/// the `n` tokens: `T` tokens at a time against every row, so those tokens' blocks stay in
/// cache while the rows go past them. `out(t)` is asked for each time a result is written.
///
/// # Safety
/// AVX-512 F, BW and VNNI must be available (`available`); every `act(t)` holds `per_row`
/// blocks and every `out(t)` one result per row.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn rows<'a, 'o>(
    blocks: &[LaneBlock],
    per_row: usize,
    n: usize,
    act: &impl Fn(usize) -> &'a [LaneAct],
    out: &impl Fn(usize) -> &'o mut [f32],
) {
    let n_rows = blocks.len() / per_row;
    for t in 0..n {
        assert_eq!(act(t).len(), per_row);
        assert!(out(t).len() >= n_rows);
    }
    let row = |r: usize| blocks.get_unchecked(r * per_row..(r + 1) * per_row);
    let mut t = 0;
    while t < n {
        let take = if n - t >= T { T } else { 1 };
        let mut r = 0;
        while r < n_rows {
            if n_rows - r >= R && take == T {
                let w = std::array::from_fn(|i| row(r + i));
                let a = std::array::from_fn(|i| act(t + i));
                let s = tile::<R, T>(w, a);
                for (i, s) in s.iter().enumerate() {
                    for (j, &v) in s.iter().enumerate() {
                        *out(t + j).get_unchecked_mut(r + i) = v;
                    }
                }
                r += R;
            } else if take == T {
                let a = std::array::from_fn(|i| act(t + i));
                let s = tile::<1, T>([row(r)], a);
                for (j, &v) in s[0].iter().enumerate() {
                    *out(t + j).get_unchecked_mut(r) = v;
                }
                r += 1;
            } else {
                let w = std::array::from_fn(|i| row((r + i).min(n_rows - 1)));
                let s = tile::<R, 1>(w, [act(t)]);
                for (i, s) in s.iter().enumerate().take(n_rows - r) {
                    *out(t).get_unchecked_mut(r + i) = s[0];
                }
                r += R;
            }
        }
        t += take;
    }
}

/// `RR` rows' dots with `TT` tokens' rows.
#[inline(always)]
unsafe fn tile<const RR: usize, const TT: usize>(
    w: [&[LaneBlock]; RR],
    a: [&[LaneAct]; TT],
) -> [[f32; TT]; RR] {
    let mut acc = [[_mm512_setzero_ps(); TT]; RR];
    for b in 0..a[0].len() {
        let wb: [&LaneBlock; RR] = std::array::from_fn(|i| w[i].get_unchecked(b));
        let u: [[__m512i; 4]; RR] = std::array::from_fn(|i| {
            std::array::from_fn(|s| _mm512_load_si512(wb[i].u.as_ptr().add(64 * s).cast()))
        });
        for t in 0..TT {
            let ab = a[t].get_unchecked(b);
            let q: [__m512i; 4] =
                std::array::from_fn(|s| _mm512_load_si512(ab.qs.as_ptr().add(64 * s).cast()));
            let da = _mm512_set1_ps(ab.d);
            let bs = _mm512_load_ps(ab.bs.as_ptr());
            for i in 0..RR {
                let mut s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[i][0], q[0]);
                s = _mm512_dpbusd_epi32(s, u[i][1], q[1]);
                s = _mm512_dpbusd_epi32(s, u[i][2], q[2]);
                s = _mm512_dpbusd_epi32(s, u[i][3], q[3]);
                let scale = _mm512_mul_ps(_mm512_load_ps(wb[i].a.as_ptr()), da);
                acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[i][t]);
                acc[i][t] = _mm512_fmadd_ps(_mm512_load_ps(wb[i].b.as_ptr()), bs, acc[i][t]);
            }
        }
    }
    acc.map(|r| r.map(|v| _mm512_reduce_add_ps(v)))
}

#[cfg(test)]
mod tests {
    use super::super::tests::random_kquant_blocks;
    use super::*;
    use crate::quant::kquants::{quantize_act_q8_k, quantize_q4_k, quantize_q6_k};
    use crate::quant::x86::available as avx2;
    use crate::rng::SplitMix64 as Rng;

    /// Every type's rows (an odd count, so the one-row tile runs) against 6 tokens (a tile of
    /// four and two alone), within float reordering of an f64 dot of the dequantized rows and
    /// the Q8_K activations. Q4_K and Q6_K are quantized from random values; Q2_K, Q3_K and
    /// Q5_K are random bytes with small finite scales (no quantizer here for them).
    #[test]
    fn lane_rows_match_an_f64_dot() {
        if !avx2() || !available() {
            eprintln!("skipped: no AVX-512 VNNI on this CPU");
            return;
        }
        let mut rng = Rng::new(0x0001_a9e5);
        let (cols, n_rows, tokens) = (768, 7, 6);
        let rand = |rng: &mut Rng, n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
                .collect()
        };
        for ty in [
            GgmlType::Q2_K,
            GgmlType::Q3_K,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ] {
            let w = rand(&mut rng, cols * n_rows);
            let mut bytes = Vec::new();
            match ty {
                GgmlType::Q4_K => quantize_q4_k(&w, &mut bytes),
                GgmlType::Q6_K => quantize_q6_k(&w, &mut bytes),
                _ => bytes = random_kquant_blocks(ty, cols / 256 * n_rows, &mut rng),
            }
            let per_row = cols / 256;
            let q8: Vec<Vec<BlockQ8K>> = (0..tokens)
                .map(|_| quantize_act_q8_k(&rand(&mut rng, cols)))
                .collect();
            let acts: Vec<Vec<LaneAct>> = q8
                .iter()
                .map(|r| {
                    let mut v = Vec::new();
                    lane_act(r, &mut v);
                    v
                })
                .collect();
            let mut blocks = Vec::new();
            // SAFETY: AVX2/FMA/F16C were just detected.
            unsafe { unpack(ty, &bytes, &mut blocks) };
            let mut got = vec![vec![0f32; n_rows]; tokens];
            {
                let ptrs: Vec<*mut f32> = got.iter_mut().map(|o| o.as_mut_ptr()).collect();
                // SAFETY: each pointer is a live row of `n_rows` results, written only here.
                let out = |t: usize| unsafe { std::slice::from_raw_parts_mut(ptrs[t], n_rows) };
                let act = |t: usize| acts[t].as_slice();
                // SAFETY: AVX-512 VNNI was just detected; per_row blocks per token, one
                // result per row.
                unsafe { rows(&blocks, per_row, tokens, &act, &out) };
            }
            super::super::tests::assert_near_f64_dot(ty, &bytes, n_rows, cols, &q8, &got);
        }
    }
}
