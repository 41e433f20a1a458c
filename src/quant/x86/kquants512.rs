//! AVX-512 form of a prompt's Q4_K, Q5_K and Q6_K products (four tokens against each weight
//! row, `x86_kquants::vec_dot_q*_k_q8_k_x4`), used where the CPU has AVX-512 F and BW
//! (detected at run time; never AMX). A q4_k_m Qwen2.5-0.5b's ffn_down (4864 columns, its one
//! product whose row length is a multiple of 256) is a large share of its prefill and was AVX2
//! only.
//!
//! Same bits as the AVX2 kernels, hence as `kquants::vec_dot_q*_k_q8_k`: every step of
//! `x86_kquants::lanes` works within 128-bit lanes (`maddubs`, `unpacklo/hi_epi16`, `madd`)
//! or joins the two 128-bit halves of one 256-bit register. Here each 256-bit half of a
//! 512-bit register is one token: the weight block's levels and scales are broadcast to both
//! halves, the two tokens' activations sit side by side, and the final join takes each half's
//! own two 128-bit lanes (`permutex2var`). The integers per token are therefore the AVX2
//! kernel's; the float steps that follow (convert, multiply by the token's `d`, add, all
//! unfused, then the same ordered fold) run per lane as there. Per block and pair of tokens
//! that is one set of `maddubs`/`unpack`/`madd` at 512 bits instead of two at 256.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::kquants::{block_bytes, fold, min_sum, unpack, Kind, Unpacked};
use super::prefetch::prefetch_ahead;
use crate::quant::blocks::BlockQ8K;

/// Whether the CPU runs these kernels (cached by std after the first call).
pub fn available() -> bool {
    super::features::available()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
}

/// One weight block's levels and scales broadcast to both 256-bit halves.
pub(super) struct Wide {
    levels: [__m512i; 8],
    scales: [__m512i; 4],
}

#[inline(always)]
pub(super) unsafe fn widen(u: &Unpacked) -> Wide {
    // Loops, not `array::from_fn`: see `dot_rows4` on closures.
    let mut w = Wide {
        levels: [_mm512_setzero_si512(); 8],
        scales: [_mm512_setzero_si512(); 4],
    };
    for i in 0..8 {
        w.levels[i] = _mm512_broadcast_i64x4(u.levels[i]);
    }
    for i in 0..4 {
        w.scales[i] = _mm512_broadcast_i64x4(u.scales[i]);
    }
    w
}

/// Two tokens' activation block side by side: 32-byte chunk `c` of token `a` in the low half
/// of `x[c]`, token `b`'s in the high half.
pub(super) type Paired = [__m512i; 8];

#[inline(always)]
pub(super) unsafe fn paired(a: &BlockQ8K, b: &BlockQ8K) -> Paired {
    let mut x = [_mm512_setzero_si512(); 8];
    for (c, x) in x.iter_mut().enumerate() {
        let lo = _mm256_loadu_si256(a.qs_pairs.as_ptr().add(32 * c) as *const __m256i);
        let hi = _mm256_loadu_si256(b.qs_pairs.as_ptr().add(32 * c) as *const __m256i);
        *x = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
    }
    x
}

/// `sum` plus the two tokens' lane sums `l` (low 256 bits the first token's, high the
/// second's, as `lanes2` gives them) times the block's d times each token's d.
#[inline(always)]
pub(super) unsafe fn add_scaled2(sum: __m512, l: __m512, d: f32, da: f32, db: f32) -> __m512 {
    let s = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(d * da), _mm512_set1_ps(d * db));
    _mm512_add_ps(sum, _mm512_mul_ps(s, l))
}

/// `x86_kquants::lanes` for two tokens at once (`x`, from `paired`): the first token's eight
/// lane sums in the low 256 bits, the second's in the high.
#[inline(always)]
pub(super) unsafe fn lanes2(w: &Wide, x: &Paired, offset: i8) -> __m512i {
    let mut lo = _mm512_setzero_si512();
    let mut hi = _mm512_setzero_si512();
    for p in 0..4 {
        let (xa, xb) = (x[2 * p], x[2 * p + 1]);
        // |pair| <= 2 * 63 * 127: no saturation
        let mut ma = _mm512_maddubs_epi16(w.levels[2 * p], xa);
        let mut mb = _mm512_maddubs_epi16(w.levels[2 * p + 1], xb);
        if offset != 0 {
            let m = _mm512_set1_epi8(offset);
            ma = _mm512_sub_epi16(ma, _mm512_maddubs_epi16(m, xa));
            mb = _mm512_sub_epi16(mb, _mm512_maddubs_epi16(m, xb));
        }
        let sc = w.scales[p];
        lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(ma, mb), sc));
        hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(ma, mb), sc));
    }
    // Per token (256-bit half h, 128-bit lanes 2h and 2h + 1): [lo.2h + lo.2h+1, hi.2h +
    // hi.2h+1], as the AVX2 kernel's two `permute2x128` and add. Indices in 64-bit words,
    // 8..15 naming `hi`'s.
    let first = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    let second = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    _mm512_add_epi32(
        _mm512_permutex2var_epi64(lo, first, hi),
        _mm512_permutex2var_epi64(lo, second, hi),
    )
}

/// One weight row against four activation rows, two per 512-bit register; each result the
/// AVX2 kernel's (and the reference's) for its row. `pairs`: the tokens' blocks paired
/// beforehand (block `i`'s tokens 0 and 1 at `2i`, 2 and 3 at `2i + 1`), else paired here.
/// (No closures: a closure defined in a function without this module's target features (the
/// `#[inline(always)]` helpers here) does not get them, so the intrinsics in it become calls.)
#[inline(always)]
unsafe fn dot_rows4(
    w: &[u8],
    a: [&[BlockQ8K]; 4],
    kind: Kind,
    pairs: Option<&[Paired]>,
) -> [f32; 4] {
    let bytes = block_bytes(w, &a, kind);
    let mut sums = [_mm512_setzero_ps(); 2];
    let mut sumf = [0f32; 4];
    for (i, b) in w.chunks_exact(bytes).enumerate() {
        let u = unpack(b, kind);
        let wide = widen(&u);
        for p in 0..2 {
            let (ya, yb) = (&a[2 * p][i], &a[2 * p + 1][i]);
            let here;
            let x = match pairs {
                Some(b) => &b[2 * i + p],
                None => {
                    here = paired(ya, yb);
                    &here
                }
            };
            let l = _mm512_cvtepi32_ps(lanes2(&wide, x, kind.offset()));
            sums[p] = add_scaled2(sums[p], l, u.d, ya.d, yb.d);
        }
        if kind.has_mins() {
            for (t, s) in sumf.iter_mut().enumerate() {
                let y = &a[t][i];
                *s -= u.dmin * y.d * min_sum(u.mins, y) as f32;
            }
        }
    }
    let mut out = [0f32; 4];
    for (t, o) in out.iter_mut().enumerate() {
        let s = sums[t / 2];
        let half = if t % 2 == 0 {
            _mm512_castps512_ps256(s)
        } else {
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s)))
        };
        *o = fold(sumf[t], half);
    }
    out
}

/// Two weight rows against one token (a decode step's product), one row a 256-bit half: the
/// blocks' levels and scales side by side, the token's activations broadcast to both halves;
/// each result the AVX2 kernel's (and the reference's) for its row. Each block's lines are
/// asked for a fixed distance ahead, as the AVX2 one-token kernel does.
#[inline(always)]
unsafe fn dot_two_rows(w0: &[u8], w1: &[u8], a: &[BlockQ8K], kind: Kind) -> [f32; 2] {
    let bytes = block_bytes(w0, &[a], kind);
    assert_eq!(w1.len(), w0.len(), "two rows of unequal length");
    let mut sums = _mm512_setzero_ps();
    let mut sumf = [0f32; 2];
    for (i, (b0, b1)) in w0
        .chunks_exact(bytes)
        .zip(w1.chunks_exact(bytes))
        .enumerate()
    {
        for line in (0..bytes).step_by(64) {
            prefetch_ahead(b0.as_ptr().wrapping_add(line));
            prefetch_ahead(b1.as_ptr().wrapping_add(line));
        }
        let (u0, u1) = (unpack(b0, kind), unpack(b1, kind));
        let mut w = Wide {
            levels: [_mm512_setzero_si512(); 8],
            scales: [_mm512_setzero_si512(); 4],
        };
        for c in 0..8 {
            w.levels[c] =
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(u0.levels[c]), u1.levels[c]);
        }
        for p in 0..4 {
            w.scales[p] =
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(u0.scales[p]), u1.scales[p]);
        }
        let y = &a[i];
        let mut x = [_mm512_setzero_si512(); 8];
        for (c, x) in x.iter_mut().enumerate() {
            let q = _mm256_loadu_si256(y.qs_pairs.as_ptr().add(32 * c) as *const __m256i);
            *x = _mm512_broadcast_i64x4(q);
        }
        let l = _mm512_cvtepi32_ps(lanes2(&w, &x, kind.offset()));
        let d = _mm512_mask_blend_ps(
            0xff00,
            _mm512_set1_ps(u0.d * y.d),
            _mm512_set1_ps(u1.d * y.d),
        );
        sums = _mm512_add_ps(sums, _mm512_mul_ps(d, l));
        if kind.has_mins() {
            for (s, u) in sumf.iter_mut().zip([&u0, &u1]) {
                let dmin = u.dmin * y.d;
                *s -= dmin * min_sum(u.mins, y) as f32;
            }
        }
    }
    let lo = _mm512_castps512_ps256(sums);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(sums)));
    [fold(sumf[0], lo), fold(sumf[1], hi)]
}

/// A task's rows against one token, two rows at a time (`dot_two_rows`), a last odd row on
/// the AVX2 kernel.
#[inline(always)]
unsafe fn rows_one(rows: &[u8], row_bytes: usize, a: &[BlockQ8K], out: &mut [f32], kind: Kind) {
    let n = rows.len() / row_bytes;
    let row = |r: usize| &rows[r * row_bytes..(r + 1) * row_bytes];
    for r in (0..n / 2 * 2).step_by(2) {
        let [v0, v1] = dot_two_rows(row(r), row(r + 1), a, kind);
        (out[r], out[r + 1]) = (v0, v1);
    }
    if n % 2 == 1 {
        out[n - 1] = super::kquants::dot_one(row(n - 1), a, kind);
    }
}

/// `dot_rows4` pairing the tokens' blocks as it goes (one row: nothing to share).
#[inline(always)]
unsafe fn dot_row4(w: &[u8], a: [&[BlockQ8K]; 4], kind: Kind) -> [f32; 4] {
    dot_rows4(w, a, kind, None)
}

/// The entry points: `$dot` (four activation rows against one row, bit-identical to the
/// AVX2 kernel of the same name) and `$rows` (a task's rows, `rows_x4`).
macro_rules! entries {
    ($dot:ident, $rows:ident, $kind:expr) => {
        /// Four activation rows against one weight row (`dot_row4`).
        ///
        /// # Safety
        /// The CPU must support AVX-512 F and BW, AVX2, FMA and F16C (`available()`).
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
        pub unsafe fn $dot(w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
            dot_row4(w, a, $kind)
        }

        /// The rows of `rows` against four tokens (`rows_x4`).
        ///
        /// # Safety
        /// As the one-row kernel.
        #[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
        pub unsafe fn $rows(
            rows: &[u8],
            row_bytes: usize,
            a: [&[BlockQ8K]; 4],
            out: [&mut [f32]; 4],
        ) {
            rows_x4(rows, row_bytes, a, out, $kind)
        }
    };
}

/// The one-token entry points: `$rows(rows, row_bytes, a, out)`, `rows_one` for `$kind`.
macro_rules! one_token {
    ($rows:ident, $kind:expr) => {
        /// The rows of `rows` against one token (`rows_one`), each result the AVX2 kernel's.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F and BW, AVX2, FMA and F16C (`available()`).
        #[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
        pub unsafe fn $rows(rows: &[u8], row_bytes: usize, a: &[BlockQ8K], out: &mut [f32]) {
            rows_one(rows, row_bytes, a, out, $kind)
        }
    };
}

one_token!(rows_q3_k_q8_k, Kind::Q3K);
one_token!(rows_q4_k_q8_k, Kind::Q4K);
one_token!(rows_q5_k_q8_k, Kind::Q5K);
one_token!(rows_q6_k_q8_k, Kind::Q6K);

entries!(vec_dot_q3_k_q8_k_x4, rows_q3_k_q8_k_x4, Kind::Q3K);
entries!(vec_dot_q4_k_q8_k_x4, rows_q4_k_q8_k_x4, Kind::Q4K);
entries!(vec_dot_q5_k_q8_k_x4, rows_q5_k_q8_k_x4, Kind::Q5K);
entries!(vec_dot_q6_k_q8_k_x4, rows_q6_k_q8_k_x4, Kind::Q6K);

std::thread_local! {
    /// A prompt task's paired activations (`rows_x4`), kept between calls so that a task
    /// allocates only when a product's rows are longer than any before on its thread.
    static PAIRED: std::cell::RefCell<Vec<Paired>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The rows of `rows` against four tokens, each result `dot_row4`'s; the tokens' blocks are
/// paired once for all the rows (`PAIRED`: per block, tokens 0 and 1 then 2 and 3).
#[inline(always)]
unsafe fn rows_x4(
    rows: &[u8],
    row_bytes: usize,
    a: [&[BlockQ8K]; 4],
    out: [&mut [f32]; 4],
    kind: Kind,
) {
    let blocks = a[0].len();
    assert!(
        a.iter().all(|a| a.len() == blocks),
        "four tokens of unequal length"
    );
    // Taken out and put back rather than used inside `with_borrow_mut`'s closure, where the
    // intrinsics would not inline (see `dot_rows4`).
    let mut buf = PAIRED.take();
    buf.clear();
    for (((b0, b1), b2), b3) in a[0].iter().zip(a[1]).zip(a[2]).zip(a[3]) {
        buf.push(paired(b0, b1));
        buf.push(paired(b2, b3));
    }
    let [o0, o1, o2, o3] = out;
    for (r, row) in rows.chunks_exact(row_bytes).enumerate() {
        let v = dot_rows4(row, a, kind, Some(&buf));
        (o0[r], o1[r], o2[r], o3[r]) = (v[0], v[1], v[2], v[3]);
    }
    PAIRED.set(buf);
}
