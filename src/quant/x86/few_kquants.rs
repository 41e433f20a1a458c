//! Two to eight tokens (sequences decoding together) against Q4_K or Q6_K rows in the file's
//! layout under `fast` numerics on AVX-512 VNNI: each block is read and decoded once into four
//! 64-weight vectors of unsigned levels and their sub-block scales as 16-bit words, then each
//! token takes it with four `maddubs` (level times activation, pairs summed in 16 bits) and four
//! `vpdpwssd` (those pairs times their scale, summed in 32 bits), one integer sum of the block's
//! scaled products per lane; the mins' (Q4_K) or the `- 32` offset's (Q6_K) term comes from the
//! activation block's 16-weight sums (`bsums`). A block then costs about sixteen instructions a
//! token against the one-token kernel's decoding per token. The float sums are reordered
//! (per lane, then across lanes), so the results differ from the reference by rounding only.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::loads::f16_one;
use super::prefetch::prefetch_ahead;
use crate::quant::blocks::BlockQ8K;
use crate::quant::kquants::{Q4_K_BYTES, Q6_K_BYTES};
use crate::quant::GgmlType;

/// Most tokens `rows_few` takes.
pub const MAX_TOKENS: usize = 8;

/// Whether `rows_few` takes `ty` rows on this CPU.
pub fn takes(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K) && super::vnni::available()
}

/// A block decoded for the tokens: `w[g]` the unsigned levels of weights `64g..64g + 64`,
/// `sc[g]` the scale of each 16-bit pair `maddubs` makes of them, `mins` the factor of each of
/// the activation block's 16 sums, and the scales of the two terms (`d`: the scaled products',
/// `m`: the sums').
struct Decoded {
    w: [__m512i; 4],
    sc: [__m512i; 4],
    mins: __m256i,
    d: f32,
    m: f32,
}

/// A k-quant type this kernel decodes.
trait Block {
    const BYTES: usize;
    /// The block at the start of `b`.
    unsafe fn decode(b: &[u8]) -> Decoded;
}

struct Q4K;
struct Q6K;

/// The 16-bit pair index `k` (0..32) of a 64-weight vector's `maddubs` to the index of its
/// scale: `first + k / per`.
#[inline(always)]
unsafe fn scale_index(first: i16, per: i16) -> __m512i {
    let idx: [i16; 32] = std::array::from_fn(|k| first + k as i16 / per);
    _mm512_loadu_si512(idx.as_ptr() as *const _)
}

impl Block for Q4K {
    const BYTES: usize = Q4_K_BYTES;

    /// Q4_K: weight `d·sc_s·u - dmin·m_s`, sub-blocks of 32, `u` a nibble: vector g holds
    /// sub-block 2g (low nibbles of bytes `32g..32g + 32`) then 2g + 1 (their high nibbles).
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> Decoded {
        // The eight 6-bit scales and mins (`scale_min_k4`) as bytes, four to a word: scales
        // 0-3 and mins 0-3 are the low six bits of bytes 0-3 and 4-7; scales and mins 4-7
        // take their low four bits from bytes 8-11 and their top two from bytes 0-3's and
        // 4-7's top bits.
        let word = |i: usize| u32::from_le_bytes([b[4 + i], b[5 + i], b[6 + i], b[7 + i]]);
        let (q0, q1, q2) = (word(0), word(4), word(8));
        let (six, four, two) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x0303_0303);
        let scales = [q0 & six, (q2 & four) | (((q0 >> 6) & two) << 4)];
        let mins = [q1 & six, ((q2 >> 4) & four) | (((q1 >> 6) & two) << 4)];
        let v = _mm_set_epi32(
            mins[1] as i32,
            mins[0] as i32,
            scales[1] as i32,
            scales[0] as i32,
        );
        let sc8 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(v));
        let m8 = _mm256_zextsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128::<8>(v)));
        let pairs: [i16; 16] = std::array::from_fn(|k| k as i16 / 2);
        let mins =
            _mm256_permutexvar_epi16(_mm256_loadu_si256(pairs.as_ptr() as *const __m256i), m8);
        let shift = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(4));
        let low = _mm512_set1_epi8(0x0F);
        // Loops, not closures: a closure would not take its caller's target features.
        let (mut w, mut sc) = ([_mm512_setzero_si512(); 4], [_mm512_setzero_si512(); 4]);
        for g in 0..4 {
            let q = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                b.as_ptr().add(16 + 32 * g) as *const __m256i
            ));
            w[g] = _mm512_and_si512(_mm512_srlv_epi16(q, shift), low);
            sc[g] = _mm512_permutexvar_epi16(scale_index(2 * g as i16, 16), sc8);
        }
        Decoded {
            w,
            sc,
            mins,
            d: f16_one(b, 0),
            m: f16_one(b, 2),
        }
    }
}

impl Block for Q6K {
    const BYTES: usize = Q6_K_BYTES;

    /// Q6_K: weight `d·sc_s·(u - 32)`, sub-blocks of 16, `u` four bits of `ql` and two of
    /// `qh`. Half h (128 weights) takes `ql[64h..64h + 64]` and `qh[32h..32h + 32]`: vector 2h
    /// the low nibbles with `qh` bits 0-1 (first 32 weights) and 2-3 (next 32), vector 2h + 1
    /// the high nibbles with bits 4-5 and 6-7. The offset is `- 32·sc_s` on sum s.
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> Decoded {
        let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(b.as_ptr().add(192) as *const __m128i));
        let scz = _mm512_zextsi256_si512(sc16);
        let shift = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(2));
        let (low, two, top) = (
            _mm512_set1_epi8(0x0F),
            _mm512_set1_epi8(0x03),
            _mm512_set1_epi8(0x30),
        );
        let mut w = [_mm512_setzero_si512(); 4];
        for h in 0..2 {
            let l = _mm512_loadu_si512(b.as_ptr().add(64 * h) as *const _);
            let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                b.as_ptr().add(128 + 32 * h) as *const __m256i
            ));
            let hs = _mm512_srlv_epi16(qh, shift);
            w[2 * h] = _mm512_or_si512(
                _mm512_and_si512(l, low),
                _mm512_slli_epi16::<4>(_mm512_and_si512(hs, two)),
            );
            w[2 * h + 1] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(l), low),
                _mm512_and_si512(hs, top),
            );
        }
        let mut sc = [_mm512_setzero_si512(); 4];
        for (g, s) in sc.iter_mut().enumerate() {
            *s = _mm512_permutexvar_epi16(scale_index(4 * g as i16, 8), scz);
        }
        Decoded {
            w,
            sc,
            mins: _mm256_slli_epi16::<5>(sc16),
            d: f16_one(b, 208),
            m: f16_one(b, 208),
        }
    }
}

/// One row (`w`, whole blocks) against `T` tokens' Q8_K rows: each token's float
/// accumulator, the block sums scaled into it block after block.
#[inline(always)]
unsafe fn row<K: Block, const T: usize>(w: &[u8], a: [&[BlockQ8K]; T]) -> [f32; T] {
    let mut acc = [_mm512_setzero_ps(); T];
    for (i, b) in w.chunks_exact(K::BYTES).enumerate() {
        prefetch_ahead(b.as_ptr());
        let k = K::decode(b);
        for t in 0..T {
            // SAFETY: every token's row holds as many blocks as the weight row (`rows_few`).
            let y = unsafe { a[t].get_unchecked(i) };
            let mut q = [_mm512_setzero_si512(); 4];
            for (g, q) in q.iter_mut().enumerate() {
                *q = _mm512_loadu_si512(y.qs.as_ptr().add(64 * g) as *const _);
            }
            // Two chains of two, so a token's four `vpdpwssd` are not one dependency chain.
            let mut s0 = _mm512_dpwssd_epi32(
                _mm512_setzero_si512(),
                _mm512_maddubs_epi16(k.w[0], q[0]),
                k.sc[0],
            );
            let mut s1 = _mm512_dpwssd_epi32(
                _mm512_setzero_si512(),
                _mm512_maddubs_epi16(k.w[1], q[1]),
                k.sc[1],
            );
            s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(k.w[2], q[2]), k.sc[2]);
            s1 = _mm512_dpwssd_epi32(s1, _mm512_maddubs_epi16(k.w[3], q[3]), k.sc[3]);
            let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
            let off = _mm512_zextsi256_si512(_mm256_madd_epi16(bsums, k.mins));
            let sums = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
            acc[t] = _mm512_fmadd_ps(sums, _mm512_set1_ps(k.d * y.d), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(off), _mm512_set1_ps(k.m * y.d), acc[t]);
        }
    }
    let mut sums = [0f32; T];
    for t in 0..T {
        sums[t] = _mm512_reduce_add_ps(acc[t]);
    }
    sums
}

/// Bytes of the tokens' activation blocks that a row reads from L1 (with room left for the
/// weights streaming past): rows whose tokens' blocks are more go in passes of blocks. Four
/// tokens of a 4864-wide row (22 KiB) ran faster in one pass, eight (44 KiB) in passes.
const ACT_L1_BYTES: usize = 28 << 10;

/// Rows a pass of blocks goes over before the next pass (their partial sums kept).
const PASS_ROWS: usize = 16;

/// Every row of `rows` against the `T` tokens: `out[t][r]`. Where the tokens' blocks of a
/// row do not fit `ACT_L1_BYTES` (eight tokens of a 4864-wide row: 44 KiB), `PASS_ROWS` rows
/// at a time go over as many blocks as fit, pass after pass, so the rows read the tokens'
/// blocks from L1 instead of L2; each pass's sums are added to the row's.
#[inline(always)]
unsafe fn run<K: Block, const T: usize>(
    rows: &[u8],
    row_bytes: usize,
    acts: &[&[BlockQ8K]],
    out: &mut [&mut [f32]],
) {
    let a: [&[BlockQ8K]; T] = std::array::from_fn(|t| acts[t]);
    let blocks = row_bytes / K::BYTES;
    // A token's block as the kernel reads it: 256 levels, 16 sums and the scale.
    let most = (ACT_L1_BYTES / (T * 292)).max(1);
    if blocks <= most {
        for (r, w) in rows.chunks_exact(row_bytes).enumerate() {
            let v = row::<K, T>(w, a);
            for t in 0..T {
                out[t][r] = v[t];
            }
        }
        return;
    }
    // Passes of even length.
    let pass = blocks.div_ceil(blocks.div_ceil(most));
    let count = rows.len() / row_bytes;
    for r0 in (0..count).step_by(PASS_ROWS) {
        let r1 = (r0 + PASS_ROWS).min(count);
        for r in r0..r1 {
            for o in out.iter_mut() {
                o[r] = 0.0;
            }
        }
        for b0 in (0..blocks).step_by(pass) {
            let b1 = (b0 + pass).min(blocks);
            let part: [&[BlockQ8K]; T] = std::array::from_fn(|t| &a[t][b0..b1]);
            for r in r0..r1 {
                let w = &rows[r * row_bytes + b0 * K::BYTES..r * row_bytes + b1 * K::BYTES];
                let v = row::<K, T>(w, part);
                for t in 0..T {
                    out[t][r] += v[t];
                }
            }
        }
    }
}

/// `out[t][r]` = row r of `rows` (`ty`: Q4_K or Q6_K, `row_bytes` each) dotted with token t's
/// Q8_K row, for two to `MAX_TOKENS` tokens, within float rounding of the reference.
///
/// # Safety
/// The CPU must support what `vnni::available()` checks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn rows_few(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    acts: &[&[BlockQ8K]],
    out: &mut [&mut [f32]],
) {
    let count = rows.len() / row_bytes;
    assert!(
        (1..=MAX_TOKENS).contains(&acts.len()) && out.len() == acts.len(),
        "one to {MAX_TOKENS} tokens, an output each"
    );
    assert!(
        rows.len() == count * row_bytes
            && acts.iter().all(|a| a.len() * ty.block_bytes() == row_bytes),
        "whole {ty} rows as long as every token's row"
    );
    assert!(
        out.iter().all(|o| o.len() >= count),
        "an output row is short"
    );
    match ty {
        GgmlType::Q4_K => by_tokens::<Q4K>(rows, row_bytes, acts, out),
        GgmlType::Q6_K => by_tokens::<Q6K>(rows, row_bytes, acts, out),
        _ => panic!("{ty} rows are not Q4_K or Q6_K"),
    }
}

/// `run` for the number of tokens.
#[inline(always)]
unsafe fn by_tokens<K: Block>(
    rows: &[u8],
    rb: usize,
    acts: &[&[BlockQ8K]],
    out: &mut [&mut [f32]],
) {
    // SAFETY (each arm): `rows_few`'s checks and target features.
    unsafe {
        match acts.len() {
            1 => run::<K, 1>(rows, rb, acts, out),
            2 => run::<K, 2>(rows, rb, acts, out),
            3 => run::<K, 3>(rows, rb, acts, out),
            4 => run::<K, 4>(rows, rb, acts, out),
            5 => run::<K, 5>(rows, rb, acts, out),
            6 => run::<K, 6>(rows, rb, acts, out),
            7 => run::<K, 7>(rows, rb, acts, out),
            _ => run::<K, 8>(rows, rb, acts, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kquants::{quantize_act_q8_k, quantize_q4_k, quantize_q6_k};
    use crate::rng::SplitMix64 as Rng;

    /// One to eight tokens against Q4_K and Q6_K rows quantized from random values (and a
    /// row with the extreme levels), within float reordering of an f64 dot of the dequantized
    /// rows and the Q8_K activations: rows short enough for one pass, and 4864-wide rows
    /// (more rows than a pass takes) that go in passes from six tokens on.
    #[test]
    fn few_tokens_match_an_f64_dot() {
        if !super::super::vnni::available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (F, BW, VL and VNNI)");
            return;
        }
        let mut rng = Rng::new(0x37e);
        for (cols, n_rows) in [(1280, 5), (4864, PASS_ROWS + 3)] {
            assert_eq!(cols > 256 * ACT_L1_BYTES / (8 * 292), n_rows > 5, "passes");
            few_tokens_case(&mut rng, cols, n_rows);
        }
    }

    fn few_tokens_case(rng: &mut Rng, cols: usize, n_rows: usize) {
        let rand = |rng: &mut Rng, n: usize, s: f32| -> Vec<f32> {
            (0..n).map(|_| rng.next_signed() * s).collect()
        };
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let mut w = rand(rng, cols * n_rows, 1.0);
            // Row 1 at the extremes: every level 0 or the top one, largest scales.
            for (i, v) in w[cols..2 * cols].iter_mut().enumerate() {
                *v = if i % 3 == 0 { -8.0 } else { 8.0 };
            }
            let mut bytes = Vec::new();
            match ty {
                GgmlType::Q4_K => quantize_q4_k(&w, &mut bytes),
                _ => quantize_q6_k(&w, &mut bytes),
            }
            let acts: Vec<Vec<BlockQ8K>> = (0..MAX_TOKENS)
                .map(|t| {
                    let scale = if t == 3 { 1e3 } else { 2.0 };
                    quantize_act_q8_k(&rand(rng, cols, scale))
                })
                .collect();
            for n in 1..=MAX_TOKENS {
                let mut got = vec![vec![f32::NAN; n_rows]; n];
                let a: Vec<&[BlockQ8K]> = acts[..n].iter().map(|a| a.as_slice()).collect();
                let mut o: Vec<&mut [f32]> = got.iter_mut().map(|v| v.as_mut_slice()).collect();
                // SAFETY: AVX-512 VNNI was just detected.
                unsafe { rows_few(ty, &bytes, bytes.len() / n_rows, &a, &mut o) };
                super::super::tests::assert_near_f64_dot(
                    ty,
                    &bytes,
                    n_rows,
                    cols,
                    &acts[..n],
                    &got,
                );
            }
        }
    }
}
