//! One to eight tokens (sequences decoding together) against Q4_0, Q5_0 or Q8_0 rows in the
//! file's layout on AVX-512 VNNI: each weight block is read and decoded once for all the
//! tokens, two rows per 512-bit register (the first row's block in the low half, the
//! second's in the high half), and every token takes the pair of blocks with one `vpdpbusd`,
//! conversion, multiply and FMA, its accumulators staying in registers over the whole row.
//! Same bits as `legacy::vec_dot_q*_0_q8_0`, for the reason `vnni` gives: each half of an
//! accumulator is one row's and token's eight-lane accumulator, updated block after block
//! in the reference's order, from the same exact integers.
//!
//! The integers: Q4_0/Q5_0 weights go in as their stored unsigned values (a nibble, or the
//! nibble and fifth bit, decoded at 512 bits with the fifth bits as a mask register) against
//! the tokens' signed values, each lane starting at minus 8 or 16 times the token's
//! four-value sum (made once per token and block, `FewTokens`), so no weight needs its
//! offset subtracted or its sums made; Q8_0's signed weights go against the tokens biased to
//! unsigned (`a + 128`), each lane starting at minus 128 times the weights' four-value sum.
//!
//! A prompt's rows are unpacked once per task instead (`vnni::rows_signed`): there each block
//! serves many tokens, here a block's decoding is a share of one to eight tokens' work and
//! storing it would cost as much as redoing it.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::vnni::pair_sums;
use crate::quant::blocks::BlockQ8_0;
use crate::quant::GgmlType;

/// Asks for the cache line at `p` (a prefetch never faults, at any address).
#[inline(always)]
fn prefetch(p: *const u8) {
    // SAFETY: a prefetch reads nothing architecturally.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) }
}

/// Most tokens `rows_few` takes.
pub const MAX_TOKENS: usize = 8;

/// Whether `rows_few` takes `ty` rows on this CPU.
pub fn takes(ty: GgmlType) -> bool {
    super::vnni::SignedRows::unpacks(ty) && super::vnni::available()
}

/// The tokens' Q8_0 rows laid out for `rows_few`, block-major (entry `block * n + token`):
/// the values as stored and biased to unsigned, minus 8 and minus 16 times each four
/// values' sum (the lanes' starts against Q4_0's and Q5_0's unsigned weights), and the
/// scale. Made once per call; a decode step makes it for every product's input.
#[derive(Clone, Default)]
pub struct FewTokens {
    n: usize,
    blocks: usize,
    qs: Vec<[i8; 32]>,
    biased: Vec<[u8; 32]>,
    neg8: Vec<[i32; 8]>,
    neg16: Vec<[i32; 8]>,
    d: Vec<f32>,
}

impl FewTokens {
    /// `tokens` (one to `MAX_TOKENS` rows of one length) into this value's buffers.
    pub fn set(&mut self, tokens: &[&[BlockQ8_0]]) {
        let n = tokens.len();
        assert!(
            (1..=MAX_TOKENS).contains(&n),
            "one to {MAX_TOKENS} tokens, not {n}"
        );
        let blocks = tokens[0].len();
        assert!(
            tokens.iter().all(|t| t.len() == blocks),
            "activation rows differ in length"
        );
        (self.n, self.blocks) = (n, blocks);
        let len = n * blocks;
        self.qs.resize(len, [0; 32]);
        self.biased.resize(len, [0; 32]);
        self.neg8.resize(len, [0; 8]);
        self.neg16.resize(len, [0; 8]);
        self.d.resize(len, 0.0);
        for (t, tok) in tokens.iter().enumerate() {
            for (i, b) in tok.iter().enumerate() {
                let k = i * n + t;
                self.qs[k] = b.qs;
                for (o, &v) in self.biased[k].iter_mut().zip(&b.qs) {
                    *o = (v as u8) ^ 0x80;
                }
                for l in 0..8 {
                    let s: i32 = b.qs[4 * l..4 * l + 4].iter().map(|&v| v as i32).sum();
                    self.neg8[k][l] = -8 * s;
                    self.neg16[k][l] = -16 * s;
                }
                self.d[k] = b.d;
            }
        }
    }

    /// Tokens held.
    pub fn tokens(&self) -> usize {
        self.n
    }

    /// Blocks per token.
    pub fn blocks(&self) -> usize {
        self.blocks
    }
}

/// A weight type's decoding of two rows' blocks into one register.
trait Kind {
    /// Whether the weights go in signed (the tokens then biased, the lanes starting at the
    /// weights' sums) rather than unsigned (the lanes starting at the tokens' sums).
    const SIGNED: bool;
    /// The tokens' starts for unsigned weights (`FewTokens::neg8` or `neg16`).
    fn starts(a: &FewTokens) -> &[[i32; 8]];
    /// The blocks at `b0` and `b1`: the first's 32 weights in the low half, the second's in
    /// the high half, weight order.
    unsafe fn weights(b0: *const u8, b1: *const u8) -> __m512i;
}

struct Q4_0;
struct Q5_0;
struct Q8_0;

/// Two Q4_0/Q5_0 blocks' 16 nibble bytes (at `at`), each block's bytes in two 128-bit lanes,
/// the second lane's shifted right by 4: the low four bits of each byte are the 64 nibbles
/// in weight order.
#[inline(always)]
unsafe fn shifted2(b0: *const u8, b1: *const u8, at: usize) -> __m512i {
    let q = _mm512_broadcast_i32x4(_mm_loadu_si128(b0.add(at) as *const __m128i));
    let q = _mm512_mask_broadcast_i32x4(q, 0xFF00, _mm_loadu_si128(b1.add(at) as *const __m128i));
    _mm512_srlv_epi64(q, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0))
}

/// `shifted2`'s 64 nibbles.
#[inline(always)]
unsafe fn nibbles2(b0: *const u8, b1: *const u8, at: usize) -> __m512i {
    _mm512_and_si512(shifted2(b0, b1, at), _mm512_set1_epi8(0x0F))
}

impl Kind for Q4_0 {
    const SIGNED: bool = false;
    fn starts(a: &FewTokens) -> &[[i32; 8]] {
        &a.neg8
    }
    #[inline(always)]
    unsafe fn weights(b0: *const u8, b1: *const u8) -> __m512i {
        nibbles2(b0, b1, 2)
    }
}

impl Kind for Q5_0 {
    const SIGNED: bool = false;
    fn starts(a: &FewTokens) -> &[[i32; 8]] {
        &a.neg16
    }
    #[inline(always)]
    unsafe fn weights(b0: *const u8, b1: *const u8) -> __m512i {
        // Bit j of a block's `qh` is weight j's fifth bit: the two words are the mask of the
        // 64 bytes that take 16.
        let qh0 = (b0.add(2) as *const u32).read_unaligned() as u64;
        let qh1 = (b1.add(2) as *const u32).read_unaligned() as u64;
        let high = _mm512_maskz_mov_epi8(qh0 | qh1 << 32, _mm512_set1_epi8(16));
        // (shifted & 0x0F) | high in one `vpternlogd`.
        _mm512_ternarylogic_epi32::<0xEA>(shifted2(b0, b1, 6), _mm512_set1_epi8(0x0F), high)
    }
}

impl Kind for Q8_0 {
    const SIGNED: bool = true;
    fn starts(a: &FewTokens) -> &[[i32; 8]] {
        &a.neg16[..0]
    }
    #[inline(always)]
    unsafe fn weights(b0: *const u8, b1: *const u8) -> __m512i {
        let lo = _mm256_loadu_si256(b0.add(2) as *const __m256i);
        let hi = _mm256_loadu_si256(b1.add(2) as *const __m256i);
        _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)
    }
}

/// The f16 scales at `b0` and `b1` as f32, the first over the low eight lanes, the second
/// over the high eight.
#[inline(always)]
unsafe fn scales2(b0: *const u8, b1: *const u8) -> __m512 {
    let h0 = (b0 as *const u16).read_unaligned() as i32;
    let h1 = (b1 as *const u16).read_unaligned() as i32;
    let f = _mm_cvtph_ps(_mm_cvtsi32_si128(h0 | h1 << 16));
    let idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f))
}

/// `R` pairs of rows (`rows[r]`: the two rows' first bytes; a pair may name one row twice)
/// against the `N` tokens: per block, each pair's weights, scales (and for Q8_0 lane
/// starts) once, then per token one `vpdpbusd`, conversion, multiply and FMA per pair.
/// `acc[t][r]`'s halves are pair r's two rows' accumulators for token t.
#[inline(always)]
unsafe fn tile<K: Kind, const R: usize, const N: usize>(
    rows: [[*const u8; 2]; R],
    (bytes, next): (usize, *const u8),
    a: &FewTokens,
) -> [[__m512; R]; N] {
    let blocks = a.blocks;
    let starts = K::starts(a);
    let mut acc = [[_mm512_setzero_ps(); R]; N];
    let (zero, bias) = (_mm512_setzero_si512(), _mm512_set1_epi8(-128));
    // The prefetches walk the next tile's bytes (from `next`) in address order, as fast as
    // this tile's are read: the tile's rows are read side by side, so a fixed distance ahead
    // of them fell inside the tile itself once its rows were long (8 rows of 4864 Q8_0
    // weights are 41 KiB).
    let mut ahead = next;
    for i in 0..blocks {
        let mut wv = [zero; R];
        let mut start = [zero; R];
        let mut dw = [_mm512_setzero_ps(); R];
        for r in 0..R {
            prefetch(ahead);
            prefetch(ahead.wrapping_add(bytes));
            ahead = ahead.wrapping_add(2 * bytes);
            // SAFETY: each row holds `blocks` blocks of `bytes` (the caller's slices).
            let (b0, b1) = (rows[r][0].add(i * bytes), rows[r][1].add(i * bytes));
            wv[r] = K::weights(b0, b1);
            if K::SIGNED {
                // 128 * (four weights' sum) per lane, exact in 32 bits, negated.
                start[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, wv[r]));
            }
            dw[r] = scales2(b0, b1);
        }
        for (t, acc) in acc.iter_mut().enumerate() {
            let k = i * N + t;
            let da = _mm512_set1_ps(*a.d.get_unchecked(k));
            if K::SIGNED {
                let q = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    a.biased.as_ptr().add(k) as *const __m256i
                ));
                for r in 0..R {
                    let lanes = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start[r], q, wv[r]));
                    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da), lanes, acc[r]);
                }
            } else {
                let q = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    a.qs.as_ptr().add(k) as *const __m256i
                ));
                let s = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    starts.as_ptr().add(k) as *const __m256i
                ));
                for r in 0..R {
                    let lanes = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(s, wv[r], q));
                    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da), lanes, acc[r]);
                }
            }
        }
    }
    acc
}

/// Every row of `rows` against the `N` tokens, `2R` rows at a time (then two, and a last
/// odd row paired with itself): `out[t][r]`.
#[inline(always)]
unsafe fn run<K: Kind, const R: usize, const N: usize>(
    rows: &[u8],
    (row_bytes, bytes): (usize, usize),
    a: &FewTokens,
    out: &mut [&mut [f32]],
) {
    let count = rows.len() / row_bytes;
    let p = rows.as_ptr();
    // Past the end only as a prefetch address (never read).
    let row = |r: usize| p.wrapping_add(r * row_bytes);
    let whole = count / (2 * R) * (2 * R);
    for r in (0..whole).step_by(2 * R) {
        let pairs = std::array::from_fn(|k| [row(r + 2 * k), row(r + 2 * k + 1)]);
        let acc = tile::<K, R, N>(pairs, (bytes, row(r + 2 * R)), a);
        for k in 0..R {
            put(out, (r + 2 * k, Some(r + 2 * k + 1)), &acc, k);
        }
    }
    for r in (whole..count).step_by(2) {
        let second = (r + 1 < count).then_some(r + 1);
        let acc = tile::<K, 1, N>([[row(r), row(second.unwrap_or(r))]], (bytes, row(r + 2)), a);
        put(out, (r, second), &acc, 0);
    }
}

/// Pair `k`'s results of the `N` tokens' accumulators (`tile`'s) into `out[t][r]`.
#[inline(always)]
unsafe fn put<const R: usize, const N: usize>(
    out: &mut [&mut [f32]],
    (r0, r1): (usize, Option<usize>),
    acc: &[[__m512; R]; N],
    k: usize,
) {
    for (t, v) in acc.iter().enumerate() {
        let [s0, s1] = pair_sums(v[k]);
        *out[t].get_unchecked_mut(r0) = s0;
        if let Some(r1) = r1 {
            *out[t].get_unchecked_mut(r1) = s1;
        }
    }
}

/// `out[t][r]` = `legacy::vec_dot_q*_0_q8_0(row r of rows, token t)`, bit for bit, for `ty`
/// rows (Q4_0, Q5_0 or Q8_0) of `row_bytes` and the one to `MAX_TOKENS` tokens of `a`.
///
/// # Safety
/// The CPU must support what `vnni::available()` checks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn rows_few(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    a: &FewTokens,
    out: &mut [&mut [f32]],
) {
    let bytes = ty.block_bytes();
    let count = rows.len() / row_bytes;
    assert!(
        (1..=MAX_TOKENS).contains(&a.n) && out.len() == a.n,
        "one to {MAX_TOKENS} tokens, an output each"
    );
    assert!(
        rows.len() == count * row_bytes && a.blocks * bytes == row_bytes,
        "whole {ty} rows as long as every token's row"
    );
    assert!(
        out.iter().all(|o| o.len() >= count),
        "an output row is short"
    );
    match ty {
        GgmlType::Q4_0 => by_tokens::<Q4_0>(rows, (row_bytes, bytes), a, out),
        GgmlType::Q5_0 => by_tokens::<Q5_0>(rows, (row_bytes, bytes), a, out),
        GgmlType::Q8_0 => by_tokens::<Q8_0>(rows, (row_bytes, bytes), a, out),
        _ => panic!("{ty} rows are not Q4_0, Q5_0 or Q8_0"),
    }
}

/// Rows of `rows_few`'s whole tile for `n` tokens (`by_tokens`'s pairs of rows, twice):
/// a task's rows past a multiple of it go a pair at a time.
pub fn tile_rows(n: usize) -> usize {
    match n {
        0..=2 => 8,
        3 | 4 => 6,
        _ => 4,
    }
}

/// `run` with its row tile for the number of tokens (the accumulators, weights and scales
/// within the 32 registers; `tile_rows` gives its rows).
#[inline(always)]
unsafe fn by_tokens<K: Kind>(
    rows: &[u8],
    g: (usize, usize),
    a: &FewTokens,
    out: &mut [&mut [f32]],
) {
    // SAFETY (each arm): `rows_few`'s checks and target features.
    unsafe {
        match a.n {
            1 => run::<K, 4, 1>(rows, g, a, out),
            2 => run::<K, 4, 2>(rows, g, a, out),
            3 => run::<K, 3, 3>(rows, g, a, out),
            4 => run::<K, 3, 4>(rows, g, a, out),
            5 => run::<K, 2, 5>(rows, g, a, out),
            6 => run::<K, 2, 6>(rows, g, a, out),
            7 => run::<K, 2, 7>(rows, g, a, out),
            _ => run::<K, 2, 8>(rows, g, a, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::test_rows::{assert_products, rows_and_acts, Q8_0_ACT_TYPES};
    use crate::rng::SplitMix64 as Rng;

    /// One to eight tokens against rows of odd and even block counts and row counts not a
    /// multiple of the row tile (odd ones included): the reference's bits.
    #[test]
    fn few_tokens_equal_the_reference_bit_for_bit() {
        if !super::super::vnni::available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (F, BW, VL and VNNI)");
            return;
        }
        let mut rng = Rng::new(37);
        for ty in Q8_0_ACT_TYPES {
            for blocks in [1usize, 2, 3, 28, 29, 152] {
                for rows in [1usize, 2, 5, 7, 13] {
                    let (w, acts) = rows_and_acts(&mut rng, ty, rows, blocks);
                    for n in 1..=8 {
                        let all: Vec<&[BlockQ8_0]> =
                            acts[..n].iter().map(|a| a.as_slice()).collect();
                        let mut few = FewTokens::default();
                        few.set(&all);
                        let mut outs = vec![vec![f32::NAN; rows]; n];
                        let mut o: Vec<&mut [f32]> =
                            outs.iter_mut().map(|v| v.as_mut_slice()).collect();
                        // SAFETY: AVX-512 VNNI was just detected.
                        unsafe { rows_few(ty, &w, blocks * ty.block_bytes(), &few, &mut o) };
                        let got: Vec<&[f32]> = outs.iter().map(|v| v.as_slice()).collect();
                        let what = format!("{n} tokens, {rows} rows of {blocks} blocks");
                        assert_products(ty, &w, blocks, &all, &got, &what);
                    }
                }
            }
        }
    }
}
