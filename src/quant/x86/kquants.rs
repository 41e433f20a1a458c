//! AVX2 dot products of Q3_K, Q4_K, Q5_K and Q6_K rows with Q8_K activations, for one activation row
//! (decode) and for four at once (a prompt: each weight block unpacked once for four tokens),
//! giving bit for bit what the scalar reference `kquants::vec_dot_q*_k_q8_k` gives.
//!
//! The reference follows ggml's generic k-quant kernels: per 256-weight block eight integer lane
//! sums, lane `l` collecting `scale(sub-block) * level[i] * q8[i]` for every weight `i` with
//! `i % 8 == l`; then per lane `sums[l] += d * lane` (a multiply and an add, unfused), the min
//! term of Q4_K/Q5_K in a scalar, and the lanes folded in order at the end. Integer sums are
//! exact in any order, so only the eight integers per block have to come out the same:
//! - weights' levels and activations are both reordered within each 16 as `PAIR_ORDER`
//!   (`[0, 8, 1, 9, ..]`; the activations once per token, `BlockQ8K::qs_pairs`), so `maddubs`
//!   adds the two products that share a lane: 16-bit slot `j` of each 128-bit half is lane `j`;
//! - two 32-weight chunks' slots are interleaved (`unpacklo/hi_epi16`) and one `madd` with the
//!   two chunks' scales gives 32-bit sums for lanes 0..3 (and 4..7) per 128-bit half;
//! - at the end of the block the two halves are added: the eight lanes.
//!
//! Q6_K's levels are signed (-32..31); `maddubs` wants unsigned weights, so the kernel uses the
//! stored 0..63 and subtracts 32 times the activations' pair sums (llama.cpp's own trick), which
//! is the same integer. Q3_K's (-4..3) are taken the same way, as 0..7 less 4; its 16 scales of
//! 16 weights are laid out as Q6_K's.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::loads::{f16_one, f16_pair};
use super::prefetch::prefetch_ahead;
use crate::quant::blocks::{BlockQ8K, PAIR_ORDER};
use crate::quant::kquants::{Q3_K_BYTES, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES};

/// The weight type of a kernel (a constant wherever `dot_rows` is inlined).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

impl Kind {
    /// What the unpacked levels exceed the weights' by (`maddubs` takes them unsigned).
    pub(super) fn offset(self) -> i8 {
        match self {
            Kind::Q3K => 4,
            Kind::Q6K => 32,
            Kind::Q4K | Kind::Q5K => 0,
        }
    }

    /// Whether its blocks subtract a min term (Q4_K, Q5_K).
    pub(super) fn has_mins(self) -> bool {
        matches!(self, Kind::Q4K | Kind::Q5K)
    }
}

/// One weight block, unpacked once for however many activation rows use it.
pub(super) struct Unpacked {
    /// The eight 32-weight chunks' levels, unsigned (Q6_K: plus 32, Q3_K: plus 4), in
    /// `PAIR_ORDER`.
    pub(super) levels: [__m256i; 8],
    /// For chunk pair `p` (chunks `2p`, `2p + 1`): their scales as 16-bit pairs, the first
    /// 16 weights' in the low 128 bits and the last 16 weights' in the high 128 bits.
    pub(super) scales: [__m256i; 4],
    /// Q4_K/Q5_K: the eight mins as 16-bit values.
    pub(super) mins: __m128i,
    pub(super) d: f32,
    pub(super) dmin: f32,
}

/// `PAIR_ORDER` in both 128-bit halves, as a `pshufb` mask.
#[inline(always)]
unsafe fn pair_shuffle() -> __m256i {
    let p = _mm_loadu_si128(PAIR_ORDER.as_ptr() as *const __m128i);
    _mm256_set_m128i(p, p)
}

#[inline(always)]
unsafe fn load(b: &[u8], at: usize) -> __m256i {
    debug_assert!(b.len() >= at + 32);
    _mm256_loadu_si256(b.as_ptr().add(at) as *const __m256i)
}

/// The three little-endian u32 words of `b[at..at + 12]` (after one bounds check).
#[inline(always)]
fn words3(b: &[u8], at: usize) -> [u32; 3] {
    let s: &[u8; 12] = b[at..at + 12].try_into().expect("12 bytes");
    std::array::from_fn(|i| {
        u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]])
    })
}

/// Q4_K/Q5_K's eight 6-bit scales and eight 6-bit mins from their 12 packed bytes, as bytes
/// (`kquants::scale_min_k4` for all eight at once; llama.cpp's `utmp` shuffle).
#[inline(always)]
fn k4_scales_mins(b: &[u8]) -> (u64, u64) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let [u0, u1, u2] = words3(b, 4);
    let scales = (u0 & LOW6) as u64 | (((u2 & LOW4) | (((u0 >> 6) & LOW2) << 4)) as u64) << 32;
    let mins = (u1 & LOW6) as u64 | ((((u2 >> 4) & LOW4) | (((u1 >> 6) & LOW2) << 4)) as u64) << 32;
    (scales, mins)
}

/// Broadcast 32-bit element `p` of each 128-bit half (`p` a constant after unrolling).
#[inline(always)]
unsafe fn pair_scales(s: __m256i) -> [__m256i; 4] {
    [
        _mm256_shuffle_epi32::<0x00>(s),
        _mm256_shuffle_epi32::<0x55>(s),
        _mm256_shuffle_epi32::<0xAA>(s),
        _mm256_shuffle_epi32::<0xFF>(s),
    ]
}

/// A Q4_K (no `qh`) or Q5_K block: `d`, `dmin`, 12 scale bytes, then Q5_K's 32 `qh` bytes, then
/// 128 bytes of nibbles (group `g`'s 32 bytes: chunk `2g` in the low nibbles, `2g + 1` high).
#[inline(always)]
unsafe fn unpack_k45(b: &[u8], q5: bool) -> Unpacked {
    let shuf = pair_shuffle();
    let m4 = _mm256_set1_epi8(0x0F);
    let (sc, mn) = k4_scales_mins(b);
    let sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64));
    let qs_at = if q5 { 48 } else { 16 };
    let qh = if q5 {
        _mm256_shuffle_epi8(load(b, 16), shuf)
    } else {
        _mm256_setzero_si256()
    };
    let mut levels = [_mm256_setzero_si256(); 8];
    for g in 0..4 {
        let v = _mm256_shuffle_epi8(load(b, qs_at + 32 * g), shuf);
        for half in 0..2 {
            let j = 2 * g + half;
            let shifted = if half == 0 {
                v
            } else {
                _mm256_srli_epi16::<4>(v)
            };
            let mut q = _mm256_and_si256(shifted, m4);
            if q5 {
                // bit j of each qh byte, moved to bit 4
                let bit = _mm256_and_si256(
                    _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j as i32)),
                    _mm256_set1_epi8(1),
                );
                q = _mm256_or_si256(q, _mm256_slli_epi16::<4>(bit));
            }
            levels[j] = q;
        }
    }
    let (d, dmin) = f16_pair(b, 0);
    Unpacked {
        levels,
        scales: pair_scales(_mm256_set_m128i(sc16, sc16)),
        mins: _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn as i64)),
        d,
        dmin,
    }
}

/// A Q6_K block: 128 bytes of low nibbles (`ql`), 64 of top bits (`qh`), 16 i8 scales, `d`.
/// Half `h`, chunk `k` (weights `128h + 32k ..`): nibble `k / 2` of `ql[64h + 32(k % 2) ..]`
/// with bits `2k..2k + 2` of `qh[32h ..]` above it.
#[inline(always)]
unsafe fn unpack_q6_k(b: &[u8]) -> Unpacked {
    let shuf = pair_shuffle();
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let mut levels = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        let qh = _mm256_shuffle_epi8(load(b, 128 + 32 * h), shuf);
        let ql = [
            _mm256_shuffle_epi8(load(b, 64 * h), shuf),
            _mm256_shuffle_epi8(load(b, 64 * h + 32), shuf),
        ];
        for k in 0..4 {
            let low = if k < 2 {
                _mm256_and_si256(ql[k % 2], m4)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql[k % 2]), m4)
            };
            let top = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k as i32)), m2);
            levels[4 * h + k] = _mm256_or_si256(low, _mm256_slli_epi16::<4>(top));
        }
    }
    Unpacked {
        levels,
        scales: scales16(_mm_loadu_si128(b.as_ptr().add(192) as *const __m128i)),
        mins: _mm_setzero_si128(),
        d: f16_one(b, 208),
        dmin: 0.0,
    }
}

/// Sixteen i8 scales of 16 weights each as chunk-pair scales: for pair p, (s[4p], s[4p + 2])
/// for the first 16 weights of each chunk, (s[4p + 1], s[4p + 3]) for the last 16 (even
/// scales into the low half, odd into the high).
#[inline(always)]
unsafe fn scales16(s: __m128i) -> [__m256i; 4] {
    let evens_odds = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    pair_scales(_mm256_cvtepi8_epi16(_mm_shuffle_epi8(s, evens_odds)))
}

/// Q3_K's 16 scales (`kquants::q3_scales`, less 32) from its 12 packed bytes, a 32-bit word
/// (four scales) at a time: the low nibbles from words 0 and 1, each shifted down by four for
/// scales 8..16, the top two bits from word 2 shifted by `2 * (j / 4)`.
#[inline(always)]
pub(super) fn q3_scales_words(b: &[u8]) -> [i8; 16] {
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let [a0, a1, top] = words3(b, 0);
    let words = [
        (a0 & LOW4) | ((top & LOW2) << 4),
        (a1 & LOW4) | (((top >> 2) & LOW2) << 4),
        ((a0 >> 4) & LOW4) | (((top >> 4) & LOW2) << 4),
        ((a1 >> 4) & LOW4) | (((top >> 6) & LOW2) << 4),
    ];
    std::array::from_fn(|j| (words[j / 4].to_le_bytes()[j % 4] as i8).wrapping_sub(32))
}

/// `q3_scales_words` as the bytes of one vector, built from four words in registers (bytes
/// stored one by one and loaded back as a vector wait on the stores).
///
/// # Safety
/// SSE2 must be available (every x86-64 CPU has it).
#[inline(always)]
pub(super) unsafe fn q3_scales_vec(b: &[u8]) -> __m128i {
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let [a0, a1, top] = words3(b, 0);
    let v = _mm_setr_epi32(
        ((a0 & LOW4) | ((top & LOW2) << 4)) as i32,
        ((a1 & LOW4) | (((top >> 2) & LOW2) << 4)) as i32,
        (((a0 >> 4) & LOW4) | (((top >> 4) & LOW2) << 4)) as i32,
        (((a1 >> 4) & LOW4) | (((top >> 6) & LOW2) << 4)) as i32,
    );
    _mm_sub_epi8(v, _mm_set1_epi8(32))
}

/// A Q3_K block: 32 bytes of high bits (`hmask`), 64 of 2-bit levels (`qs`), 12 scale bytes,
/// `d`. Half `n`, chunk `j` (weights `128n + 32j ..`): bits `2j..2j + 2` of `qs[32n ..]`,
/// plus 4 where bit `4n + j` of `hmask` is set (the stored level less 4 is the weight's).
#[inline(always)]
unsafe fn unpack_q3_k(b: &[u8]) -> Unpacked {
    let shuf = pair_shuffle();
    let m2 = _mm256_set1_epi8(0x03);
    let four = _mm256_set1_epi8(4);
    let hmask = _mm256_shuffle_epi8(load(b, 0), shuf);
    let mut levels = [_mm256_setzero_si256(); 8];
    for n in 0..2 {
        let qs = _mm256_shuffle_epi8(load(b, 32 + 32 * n), shuf);
        for j in 0..4 {
            let low = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * j as i32)), m2);
            let bit = _mm256_set1_epi8((1u8 << (4 * n + j)) as i8);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
            levels[4 * n + j] = _mm256_or_si256(low, _mm256_and_si256(set, four));
        }
    }
    Unpacked {
        levels,
        scales: scales16(q3_scales_vec(&b[96..108])),
        mins: _mm_setzero_si128(),
        d: f16_one(b, 108),
        dmin: 0.0,
    }
}

/// The block's eight integer lane sums against one activation block (`q` in `PAIR_ORDER`).
#[inline(always)]
unsafe fn lanes(u: &Unpacked, q: &[i8; 256], offset: i8) -> __m256i {
    let mut lo = _mm256_setzero_si256();
    let mut hi = _mm256_setzero_si256();
    for p in 0..4 {
        let qa = _mm256_loadu_si256(q.as_ptr().add(64 * p) as *const __m256i);
        let qb = _mm256_loadu_si256(q.as_ptr().add(64 * p + 32) as *const __m256i);
        // |pair| <= 2 * 63 * 127: no saturation
        let mut ma = _mm256_maddubs_epi16(u.levels[2 * p], qa);
        let mut mb = _mm256_maddubs_epi16(u.levels[2 * p + 1], qb);
        if offset != 0 {
            let m = _mm256_set1_epi8(offset);
            ma = _mm256_sub_epi16(ma, _mm256_maddubs_epi16(m, qa));
            mb = _mm256_sub_epi16(mb, _mm256_maddubs_epi16(m, qb));
        }
        let sc = u.scales[p];
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(ma, mb), sc));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(ma, mb), sc));
    }
    // lo: lanes 0..3 (first 16 weights of each chunk | last 16), hi: lanes 4..7
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(lo, hi),
        _mm256_permute2x128_si256::<0x31>(lo, hi),
    )
}

/// `Σ_j bsums[j] * mins[j / 2]`, exact.
#[inline(always)]
pub(super) unsafe fn min_sum(mins: __m128i, y: &BlockQ8K) -> i32 {
    let b = y.bsums.as_ptr() as *const __m128i;
    let pairs = _mm_hadd_epi16(_mm_loadu_si128(b), _mm_loadu_si128(b.add(1)));
    let p = _mm_madd_epi16(mins, pairs);
    let p = _mm_add_epi32(p, _mm_unpackhi_epi64(p, p));
    _mm_cvtsi128_si32(_mm_add_epi32(p, _mm_shuffle_epi32::<1>(p)))
}

/// `sumf + lane 0 + lane 1 + .. + lane 7`, in that order (the reference's fold).
#[inline(always)]
pub(super) unsafe fn fold(sumf: f32, sums: __m256) -> f32 {
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), sums);
    lanes.iter().fold(sumf, |acc, &s| acc + s)
}

/// The bytes of one of `kind`'s blocks, after checking that the weight row `w` holds as many
/// blocks as each activation row in `a`.
pub(super) fn block_bytes(w: &[u8], a: &[&[BlockQ8K]], kind: Kind) -> usize {
    let bytes = match kind {
        Kind::Q3K => Q3_K_BYTES,
        Kind::Q4K => Q4_K_BYTES,
        Kind::Q5K => Q5_K_BYTES,
        Kind::Q6K => Q6_K_BYTES,
    };
    for a in a {
        assert_eq!(
            w.len(),
            a.len() * bytes,
            "weight row of {} bytes against {} Q8_K blocks",
            w.len(),
            a.len()
        );
    }
    bytes
}

/// One `kind` weight block, unpacked.
#[inline(always)]
pub(super) unsafe fn unpack(b: &[u8], kind: Kind) -> Unpacked {
    match kind {
        Kind::Q3K => unpack_q3_k(b),
        Kind::Q4K => unpack_k45(b, false),
        Kind::Q5K => unpack_k45(b, true),
        Kind::Q6K => unpack_q6_k(b),
    }
}

/// One weight row against `N` activation rows, each result the reference's for its row.
#[inline(always)]
unsafe fn dot_rows<const N: usize>(w: &[u8], a: [&[BlockQ8K]; N], kind: Kind) -> [f32; N] {
    let bytes = block_bytes(w, &a, kind);
    let mut sums = [_mm256_setzero_ps(); N];
    let mut sumf = [0f32; N];
    for (i, b) in w.chunks_exact(bytes).enumerate() {
        if N == 1 {
            // decode: one token streams the matrix; a line ahead for each of the block's
            // (`prefetch_ahead`)
            for line in (0..bytes).step_by(64) {
                prefetch_ahead(b.as_ptr().wrapping_add(line));
            }
        }
        let u = unpack(b, kind);
        for t in 0..N {
            let y = &a[t][i];
            let l = _mm256_cvtepi32_ps(lanes(&u, &y.qs_pairs, kind.offset()));
            let d = u.d * y.d;
            sums[t] = _mm256_add_ps(sums[t], _mm256_mul_ps(_mm256_set1_ps(d), l));
            if kind.has_mins() {
                let dmin = u.dmin * y.d;
                sumf[t] -= dmin * min_sum(u.mins, y) as f32;
            }
        }
    }
    std::array::from_fn(|t| fold(sumf[t], sums[t]))
}

/// One row against one token (`dot_rows`), for callers that pick the kind at run time.
#[inline(always)]
pub(super) unsafe fn dot_one(w: &[u8], a: &[BlockQ8K], kind: Kind) -> f32 {
    dot_rows(w, [a], kind)[0]
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    dot_rows(w, [a], Kind::Q4K)[0]
}

/// # Safety
/// As `vec_dot_q4_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    dot_rows(w, [a], Kind::Q5K)[0]
}

/// # Safety
/// As `vec_dot_q4_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q6_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    dot_rows(w, [a], Kind::Q6K)[0]
}

/// # Safety
/// As `vec_dot_q4_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q3_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    dot_rows(w, [a], Kind::Q3K)[0]
}

/// `vec_dot_q4_k_q8_k_x4` for Q3_K.
///
/// # Safety
/// As `vec_dot_q4_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q3_k_q8_k_x4(w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
    dot_rows(w, a, Kind::Q3K)
}

/// Four activation rows against one Q4_K weight row; each result bit-identical to
/// `vec_dot_q4_k_q8_k`'s for that row.
///
/// # Safety
/// As `vec_dot_q4_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_k_q8_k_x4(w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
    dot_rows(w, a, Kind::Q4K)
}

/// `vec_dot_q4_k_q8_k_x4` for Q5_K.
///
/// # Safety
/// As `vec_dot_q4_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_k_q8_k_x4(w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
    dot_rows(w, a, Kind::Q5K)
}

/// `vec_dot_q4_k_q8_k_x4` for Q6_K.
///
/// # Safety
/// As `vec_dot_q4_k_q8_k`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q6_k_q8_k_x4(w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
    dot_rows(w, a, Kind::Q6K)
}

row_loops!(rows_q4_k_q8_k = vec_dot_q4_k_q8_k, BlockQ8K);
row_loops!(rows_q5_k_q8_k = vec_dot_q5_k_q8_k, BlockQ8K);
row_loops!(rows_q6_k_q8_k = vec_dot_q6_k_q8_k, BlockQ8K);
row_loops!(rows_q3_k_q8_k = vec_dot_q3_k_q8_k, BlockQ8K);
row_loops!(rows_q3_k_q8_k_x4 = vec_dot_q3_k_q8_k_x4 x4, BlockQ8K);
row_loops!(rows_q4_k_q8_k_x4 = vec_dot_q4_k_q8_k_x4 x4, BlockQ8K);
row_loops!(rows_q5_k_q8_k_x4 = vec_dot_q5_k_q8_k_x4 x4, BlockQ8K);
row_loops!(rows_q6_k_q8_k_x4 = vec_dot_q6_k_q8_k_x4 x4, BlockQ8K);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kquants;
    use crate::rng::SplitMix64 as Rng;

    #[test]
    fn packed_scales_and_mins_equal_the_reference() {
        // Q4_K/Q5_K's scales and mins, and Q3_K's scales, from random packed bytes.
        let mut rng = Rng::new(3);
        for _ in 0..1000 {
            let b: Vec<u8> = (0..16).map(|_| rng.next_u64() as u8).collect();
            let (sc, mn) = k4_scales_mins(&b);
            for j in 0..8 {
                let (s, m) = kquants::scale_min_k4(j, &b[4..16]);
                assert_eq!((sc >> (8 * j)) as u8, s, "scale {j}");
                assert_eq!((mn >> (8 * j)) as u8, m, "min {j}");
            }
            assert_eq!(
                q3_scales_words(&b[..12]),
                kquants::q3_scales(&b[..12]),
                "Q3_K"
            );
        }
    }
}
