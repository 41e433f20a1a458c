//! AVX2 kernels for the legacy-quant dot products (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights with
//! Q8_0/Q8_1 activations), the decode hot loop, and for the integer core of the k-quant dots
//! (`kquant_lane_sums`).
//!
//! They compute exactly what the scalar reference in `legacy` computes, bit for bit, because
//! the reference already follows the order of llama.cpp's x86 kernels (`simd_order`): per block,
//! eight integer lane sums of four consecutive products (exact, so `maddubs`+`madd` gives the
//! same integers), converted to f32 and accumulated by one 8-lane FMA with `d_w * d_a`, reduced
//! at the end by `hsum_float_8`; the min terms of Q4_1/Q5_1 accumulate in a scalar. The tests
//! compare every kernel with the reference on random rows by bit pattern.
//!
//! Written by hand with `std::arch` (no portable-SIMD crate gives `maddubs`), used only after
//! run-time detection of AVX2 and FMA.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::legacy::{BlockQ8_0, BlockQ8_1};
use super::prefetch_ahead;
use super::simd_order::Lanes8;

/// Whether the CPU runs these kernels (cached by std after the first call).
#[inline(always)]
pub fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// The two f16 at `b[at..at + 4]` as f32 (a block's `d`, and `m` or the first quant bytes),
/// with F16C in line (`half`'s conversion dispatches at run time through a call; the values are
/// the same, f16 to f32 being exact). One 32-bit load (`vmovd`, which clears the register's
/// upper lanes): a 16-bit load became `vpinsrw` into whatever register the compiler liked, in
/// the q4_1 loop the `summs` accumulator, chaining every block's scale behind the previous
/// block's sum (a third of the kernel's time on a 2-core EPYC).
/// The `vmovd` is written out: where only `d` is used, LLVM narrows `_mm_cvtsi32_si128` of a
/// loaded value back to a 16-bit `vpinsrw` into an arbitrary register (the loop's `acc`).
#[inline(always)]
pub(super) unsafe fn f16_pair(b: &[u8], at: usize) -> (f32, f32) {
    // SAFETY: as `f16_bits`.
    unsafe { f16_bits(u32_at(b, at)) }
}

/// The f16 at `b[at..at + 2]` as f32 (`f16_pair` where the next two bytes may lie past the
/// end: Q6_K's `d` ends its block).
#[inline(always)]
pub(super) unsafe fn f16_one(b: &[u8], at: usize) -> f32 {
    let bytes: [u8; 2] = b[at..at + 2].try_into().expect("two bytes");
    // SAFETY: as `f16_bits`.
    unsafe { f16_bits(u16::from_le_bytes(bytes) as u32).0 }
}

/// The two f16 in `bits` (low half first) as f32, through the written-out `vmovd` (see
/// `f16_pair`).
#[inline(always)]
unsafe fn f16_bits(bits: u32) -> (f32, f32) {
    let x: __m128i;
    // SAFETY: a register-to-register move with no memory access (AVX is enabled wherever this
    // is inlined: the callers are `avx2` target-feature functions).
    unsafe {
        std::arch::asm!(
            "vmovd {x}, {r:e}",
            x = out(xmm_reg) x,
            r = in(reg) bits,
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    let v = _mm_cvtph_ps(x);
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// The f16 at `b[0..2]` as f32 in all eight lanes: one `vpbroadcastw` from memory (which
/// writes the whole register, so no false dependency) and one 8-lane `vcvtph2ps`; then
/// `_mm256_mul_ps(splat, set1(y.d))` is the scalar `d_w * d_a` in every lane, with no
/// scalar-to-vector broadcast on the shuffle pipes.
#[inline(always)]
unsafe fn f16_splat(b: &[u8]) -> __m256 {
    debug_assert!(b.len() >= 2);
    _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes([b[0], b[1]])))
}

/// One bounds check for the four bytes, so the load is one 32-bit load (indexing byte by
/// byte kept four loads and shifts: each index could panic on its own).
#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    let bytes: [u8; 4] = b[at..at + 4].try_into().expect("four bytes");
    u32::from_le_bytes(bytes)
}

/// 16 packed bytes → 32 nibbles in weight order (low nibbles, then high nibbles): the bytes
/// broadcast to both halves (a load, no shuffle), the high half shifted right by 4 in one
/// `vpsrlvd` (the bits it pulls into each byte's top are masked away), as `q5_0_unsigned`.
#[inline(always)]
unsafe fn nibbles(qs: &[u8]) -> __m256i {
    debug_assert!(qs.len() >= 16);
    let b = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs.as_ptr() as *const __m128i));
    let shifted = _mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F))
}

/// Bit `j` of `qh` → byte `j` = 0x10 (the fifth bit of weight `j`), else 0.
#[inline(always)]
unsafe fn high_bits(qh: u32) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(qh as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// Lane sums of four consecutive products of unsigned `q` (< 128) and signed `a`, as f32.
#[inline(always)]
unsafe fn lanes_unsigned(q: __m256i, a: __m256i) -> __m256 {
    let pairs = _mm256_maddubs_epi16(q, a);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// Lane sums for signed `q`: |q| times `a` with q's sign (no i16 overflow: |q| ≤ 128 and the
/// activations are within ±127).
#[inline(always)]
unsafe fn lanes_signed(q: __m256i, a: __m256i) -> __m256 {
    lanes_unsigned(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q))
}

#[inline(always)]
unsafe fn load32(p: &[i8; 32]) -> __m256i {
    _mm256_loadu_si256(p.as_ptr() as *const __m256i)
}

/// `hsum_float_8` of the accumulator (through `Lanes8`, the reference reduction).
#[inline(always)]
unsafe fn hsum(acc: __m256) -> f32 {
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    Lanes8::from(lanes).hsum()
}

/// The k-quants' integer core (`kquants::lane_sums`): over a 256-weight block, lane `l`
/// collects `scale(i / sub) * level[i] * q8[i]` for every `i % 8 == l`. Sixteen products at a
/// time in i16 (|level| <= 32, |q8| <= 128: no overflow), widened so element `j` of each eight
/// lands in lane `j`, summed per sub-block, then scaled once per sub-block: the same integers
/// in another order, so exactly the reference's.
///
/// # Safety
/// AVX2 must be available (`available()`).
#[target_feature(enable = "avx2")]
pub unsafe fn kquant_lane_sums(
    levels: &[i8; 256],
    q8: &[i8; 256],
    sub: usize,
    scale: impl Fn(usize) -> i32,
) -> [i32; 8] {
    debug_assert!(sub == 16 || sub == 32);
    let mut aux = _mm256_setzero_si256();
    for s in 0..256 / sub {
        let mut part = _mm256_setzero_si256();
        for c in (s * sub..(s + 1) * sub).step_by(16) {
            let l = _mm256_cvtepi8_epi16(_mm_loadu_si128(levels.as_ptr().add(c) as *const __m128i));
            let q = _mm256_cvtepi8_epi16(_mm_loadu_si128(q8.as_ptr().add(c) as *const __m128i));
            let p = _mm256_mullo_epi16(l, q);
            let lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(p));
            let hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(p));
            part = _mm256_add_epi32(part, _mm256_add_epi32(lo, hi));
        }
        aux = _mm256_add_epi32(aux, _mm256_mullo_epi32(part, _mm256_set1_epi32(scale(s))));
    }
    let mut out = [0i32; 8];
    _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, aux);
    out
}

/// Q4_K/Q5_K levels (`kquants::q45_levels`), 32 at a time: in each 64-weight group, the low
/// nibbles of its 32 bytes then the high nibbles, plus Q5_K's fifth bit `j` of `qh[w % 32]`
/// for sub-block `j`.
///
/// # Safety
/// AVX2 must be available; `qs` holds 128 bytes and `qh` (when given) 32.
#[target_feature(enable = "avx2")]
pub unsafe fn q45_levels(qs: &[u8], qh: Option<&[u8]>, out: &mut [i8; 256]) {
    assert!(qs.len() >= 128 && qh.is_none_or(|h| h.len() >= 32));
    let m4 = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let high = qh.map(|h| _mm256_loadu_si256(h.as_ptr() as *const __m256i));
    for g in 0..4 {
        let v = _mm256_loadu_si256(qs.as_ptr().add(32 * g) as *const __m256i);
        for (half, mut q) in [
            (0, _mm256_and_si256(v, m4)),
            (1, _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4)),
        ] {
            let j = 2 * g + half;
            if let Some(h) = high {
                let bit = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(j as i32)), one);
                q = _mm256_or_si256(q, _mm256_slli_epi16::<4>(bit));
            }
            _mm256_storeu_si256(out.as_mut_ptr().add(32 * j) as *mut __m256i, q);
        }
    }
}

/// Q6_K levels (`kquants::q6_levels`), 32 at a time: for half `h` and quarter `k`, nibble
/// `k / 2` of `ql[64h + 32(k % 2) ..]`, bits `2k..2k+2` of `qh[32h ..]` above it, minus 32.
///
/// # Safety
/// AVX2 must be available; `b` holds a 210-byte Q6_K block.
#[target_feature(enable = "avx2")]
pub unsafe fn q6_levels(b: &[u8], out: &mut [i8; 256]) {
    assert!(b.len() >= 192);
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    for h in 0..2 {
        let qh = _mm256_loadu_si256(b.as_ptr().add(128 + 32 * h) as *const __m256i);
        for k in 0..4 {
            let ql = _mm256_loadu_si256(b.as_ptr().add(64 * h + 32 * (k % 2)) as *const __m256i);
            let low = if k < 2 {
                _mm256_and_si256(ql, m4)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql), m4)
            };
            let top = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k as i32)), m2);
            let q = _mm256_or_si256(low, _mm256_slli_epi16::<4>(top));
            let lv = _mm256_sub_epi8(q, _mm256_set1_epi8(32));
            _mm256_storeu_si256(out.as_mut_ptr().add(128 * h + 32 * k) as *mut __m256i, lv);
        }
    }
}

fn check(w: &[u8], bytes: usize, blocks: usize) {
    assert_eq!(
        w.len(),
        blocks * bytes,
        "weight row of {} bytes does not match {blocks} activation blocks",
        w.len()
    );
}

/// A row's dot through its type's block step (`q4_0_block`, ...): the blocks in order, each
/// line `PREFETCH_AHEAD` past it asked for (a decode product streams its matrix), and `fin`
/// reducing the accumulators.
#[inline(always)]
unsafe fn one_row<B>(
    w: &[u8],
    bytes: usize,
    a: &[B],
    step: unsafe fn(&[u8], &B, &mut __m256, &mut f32),
    fin: unsafe fn(__m256, f32) -> f32,
) -> f32 {
    check(w, bytes, a.len());
    let (mut acc, mut summs) = (_mm256_setzero_ps(), 0f32);
    for (b, y) in w.chunks_exact(bytes).zip(a) {
        prefetch_ahead(b.as_ptr());
        step(b, y, &mut acc, &mut summs);
    }
    fin(acc, summs)
}

/// Two consecutive rows' dots with one activation row, block by block side by side: each row
/// keeps its own accumulators and takes exactly `one_row`'s steps in its order (same bits), and
/// the two chains are independent, so the core overlaps one row's FMA and min-sum latencies
/// with the other's work (a one-token product's rows are short: 18 blocks for a 576-wide row).
/// The prefetches walk the pair's bytes in address order: step `i` asks for the lines
/// `PREFETCH_AHEAD` past the pair's blocks `2i` and `2i + 1`, counting through row 0 and then
/// row 1 as one stream. Asking past each row's own block `i` instead (two ranges a row apart,
/// interleaved) made Q8_0 streamed from memory 1.4x slower than one row at a time.
/// 2-core EPYC, `cargo bench --bench cpu_kernels -- Q8_0 --bench` and `-- Q4_1`, row loop,
/// best of five runs alternating with the one-row loop's binary: Q4_1 (576 columns) in L2
/// 2.37 -> 1.65 ns/block, streamed 2.22 -> 2.11; Q8_0 (896) in L2 1.83 -> 1.46, streamed
/// 3.09 -> 2.96 (each row's own prefetch: 4.28). Used for Q4_1 alone (`rows_q4_1_q8_1` says
/// why).
#[inline(always)]
unsafe fn two_rows<B>(
    w: [&[u8]; 2],
    bytes: usize,
    a: &[B],
    step: unsafe fn(&[u8], &B, &mut __m256, &mut f32),
    fin: unsafe fn(__m256, f32) -> f32,
) -> [f32; 2] {
    w.iter().for_each(|w| check(w, bytes, a.len()));
    let (mut acc, mut summs) = ([_mm256_setzero_ps(); 2], [0f32; 2]);
    let mut ahead = w[0].as_ptr();
    for ((b0, b1), y) in w[0]
        .chunks_exact(bytes)
        .zip(w[1].chunks_exact(bytes))
        .zip(a)
    {
        prefetch_ahead(ahead);
        prefetch_ahead(ahead.wrapping_add(bytes));
        ahead = ahead.wrapping_add(2 * bytes);
        step(b0, y, &mut acc[0], &mut summs[0]);
        step(b1, y, &mut acc[1], &mut summs[1]);
    }
    [fin(acc[0], summs[0]), fin(acc[1], summs[1])]
}

/// The reduction of a type without min terms: `hsum_float_8`.
#[inline(always)]
unsafe fn sum_plain(acc: __m256, _summs: f32) -> f32 {
    hsum(acc)
}

/// The reduction of Q4_1/Q5_1: `hsum_float_8` plus the min terms' sum.
#[inline(always)]
unsafe fn sum_with_mins(acc: __m256, summs: f32) -> f32 {
    hsum(acc) + summs
}

/// `out[r]` = the dot of row `r` of `rows` with `a`, through `two_rows` for each pair of rows
/// and `one_row` for an odd last one.
#[inline(always)]
unsafe fn row_pairs<B>(
    rows: &[u8],
    row_bytes: usize,
    bytes: usize,
    a: &[B],
    out: &mut [f32],
    step: unsafe fn(&[u8], &B, &mut __m256, &mut f32),
    fin: unsafe fn(__m256, f32) -> f32,
) {
    let mut pairs = rows.chunks_exact(2 * row_bytes);
    let mut outs = out.chunks_exact_mut(2);
    for (p, o) in (&mut pairs).zip(&mut outs) {
        let (w0, w1) = p.split_at(row_bytes);
        let [v0, v1] = two_rows([w0, w1], bytes, a, step, fin);
        (o[0], o[1]) = (v0, v1);
    }
    let tail = pairs.remainder().chunks_exact(row_bytes);
    for (r, o) in tail.zip(outs.into_remainder()) {
        *o = one_row(r, bytes, a, step, fin);
    }
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    one_row(w, 18, a, q4_0_block, sum_plain)
}

/// One Q4_0 block of a row's dot: `acc` advanced as llama.cpp's loop does.
#[inline(always)]
unsafe fn q4_0_block(b: &[u8], y: &BlockQ8_0, acc: &mut __m256, _summs: &mut f32) {
    let q = _mm256_sub_epi8(nibbles(&b[2..18]), _mm256_set1_epi8(8));
    let d = _mm256_set1_ps(f16_pair(b, 0).0 * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), *acc);
}

/// Q5_0's stored 5-bit values (0..31: the level plus 16), weight order. The 16 nibble bytes
/// are loaded into both halves and the high half's shifted right by 4 in one `vpsrlvd` (the
/// bits it pulls into each byte's top are masked away).
#[inline(always)]
pub(super) unsafe fn q5_0_unsigned(b: &[u8]) -> __m256i {
    debug_assert!(b.len() >= 22);
    let qs = _mm_loadu_si128(b.as_ptr().add(6) as *const __m128i);
    let shifts = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    let nib = _mm256_srlv_epi32(_mm256_broadcastsi128_si256(qs), shifts);
    _mm256_or_si256(
        _mm256_and_si256(nib, _mm256_set1_epi8(0x0F)),
        high_bits(u32_at(b, 2)),
    )
}

/// Lane sums of Q5_0 levels (`u - 16`) with an activation block: `maddubs` on the unsigned
/// values (|pair| <= 2 * 31 * 128, no saturation) minus `16 * Σ a` per lane, which the block
/// carries (`BlockQ8_0::sums16`): the same integers as the signed products, two `vpsignb`
/// fewer per block.
#[inline(always)]
unsafe fn lanes_q5_0(u: __m256i, y: &BlockQ8_0) -> __m256 {
    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, load32(&y.qs)), _mm256_set1_epi16(1));
    let off = _mm256_loadu_si256(y.sums16.as_ptr() as *const __m256i);
    _mm256_cvtepi32_ps(_mm256_sub_epi32(p, off))
}

/// `R` Q5_0 weight rows against `T` activation rows: each weight block unpacked once for the
/// `T` tokens, each (row, token) pair its own accumulator. Every result is exactly the
/// single-row kernel's: the same operations per pair in the same block order. (Two rows for
/// one token, R = 2 here with each row's own lines prefetched, measured no faster in L2 and
/// 1.7x slower streamed; through `two_rows` they were faster in L2 but slower in the engine,
/// see `rows_q4_1_q8_1`. R stays 1 in use.)
#[inline(always)]
unsafe fn q5_0_tile<const R: usize, const T: usize>(
    w: [&[u8]; R],
    a: [&[BlockQ8_0]; T],
) -> [[f32; T]; R] {
    let blocks = a[0].len();
    w.iter().for_each(|w| check(w, 22, blocks));
    a.iter()
        .for_each(|a| assert_eq!(a.len(), blocks, "activation rows differ in length"));
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    for i in 0..blocks {
        for r in 0..R {
            // SAFETY: `check` above: every row holds `blocks` blocks of 22 bytes.
            let b = unsafe { w[r].get_unchecked(22 * i..22 * i + 22) };
            let u = q5_0_unsigned(b);
            let dw = f16_splat(b);
            for t in 0..T {
                // SAFETY: every activation row holds `blocks` blocks (asserted above).
                let y = unsafe { a[t].get_unchecked(i) };
                let d = _mm256_mul_ps(dw, _mm256_set1_ps(y.d));
                acc[r][t] = _mm256_fmadd_ps(d, lanes_q5_0(u, y), acc[r][t]);
            }
        }
    }
    std::array::from_fn(|r| std::array::from_fn(|t| hsum(acc[r][t])))
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    one_row(w, 22, a, q5_0_block, sum_plain)
}

/// One Q5_0 block of a row's dot: `q5_0_tile`'s operations for one (row, token) pair.
#[inline(always)]
unsafe fn q5_0_block(b: &[u8], y: &BlockQ8_0, acc: &mut __m256, _summs: &mut f32) {
    let d = _mm256_mul_ps(f16_splat(b), _mm256_set1_ps(y.d));
    *acc = _mm256_fmadd_ps(d, lanes_q5_0(q5_0_unsigned(b), y), *acc);
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    one_row(w, 34, a, q8_0_block, sum_plain)
}

/// One Q8_0 block of a row's dot (see `q4_0_block`).
#[inline(always)]
unsafe fn q8_0_block(b: &[u8], y: &BlockQ8_0, acc: &mut __m256, _summs: &mut f32) {
    let q = _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i);
    let d = _mm256_set1_ps(f16_pair(b, 0).0 * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), *acc);
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    one_row(w, 20, a, q4_1_block, sum_with_mins)
}

/// One Q4_1 block of a row's dot: `acc` and the min terms' scalar `summs` advanced as
/// llama.cpp's loop does.
#[inline(always)]
unsafe fn q4_1_block(b: &[u8], y: &BlockQ8_1, acc: &mut __m256, summs: &mut f32) {
    let (dw, mw) = f16_pair(b, 0);
    *summs += mw * y.s;
    let d = _mm256_set1_ps(dw * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_unsigned(nibbles(&b[4..20]), load32(&y.qs)), *acc);
}

/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    one_row(w, 24, a, q5_1_block, sum_with_mins)
}

/// One Q5_1 block of a row's dot (see `q4_1_block`).
#[inline(always)]
unsafe fn q5_1_block(b: &[u8], y: &BlockQ8_1, acc: &mut __m256, summs: &mut f32) {
    let (dw, mw) = f16_pair(b, 0);
    *summs += mw * y.s;
    let q = _mm256_or_si256(nibbles(&b[8..24]), high_bits(u32_at(b, 4)));
    let d = _mm256_set1_ps(dw * y.d);
    *acc = _mm256_fmadd_ps(d, lanes_unsigned(q, load32(&y.qs)), *acc);
}

/// Four activation rows against one weight row (a prompt's products): each block's weights
/// are unpacked once for the four. Every result is exactly its single-row kernel's: the same
/// operations per (row, activation) pair, in the same block order, with its own accumulators.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_1_q8_1_x4(w: &[u8], a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    a.iter().for_each(|a| check(w, 20, a.len()));
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut summs = [0f32; 4];
    for (i, b) in w.chunks_exact(20).enumerate() {
        let (dw, mw) = f16_pair(b, 0);
        let q = nibbles(&b[4..20]);
        for t in 0..4 {
            let y = &a[t][i];
            summs[t] += mw * y.s;
            let d = _mm256_set1_ps(dw * y.d);
            acc[t] = _mm256_fmadd_ps(d, lanes_unsigned(q, load32(&y.qs)), acc[t]);
        }
    }
    std::array::from_fn(|t| hsum(acc[t]) + summs[t])
}

/// The Q8_0-activation four-row loop: `levels` gives a block's 32 signed weight levels; the
/// rest is `vec_dot_q*_0_q8_0`'s per-pair arithmetic (see `vec_dot_q4_1_q8_1_x4`).
#[inline(always)]
unsafe fn q8_0_acts_x4(
    w: &[u8],
    bytes: usize,
    a: [&[BlockQ8_0]; 4],
    levels: impl Fn(&[u8]) -> __m256i,
) -> [f32; 4] {
    a.iter().for_each(|a| check(w, bytes, a.len()));
    let mut acc = [_mm256_setzero_ps(); 4];
    for (i, b) in w.chunks_exact(bytes).enumerate() {
        let q = levels(b);
        let dw = f16_pair(b, 0).0;
        for t in 0..4 {
            let y = &a[t][i];
            let d = _mm256_set1_ps(dw * y.d);
            acc[t] = _mm256_fmadd_ps(d, lanes_signed(q, load32(&y.qs)), acc[t]);
        }
    }
    std::array::from_fn(|t| hsum(acc[t]))
}

/// `vec_dot_q5_0_q8_0` for four activation rows (see `vec_dot_q4_1_q8_1_x4`).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_0_q8_0_x4(w: &[u8], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    q5_0_tile([w], a)[0]
}

/// `vec_dot_q8_0_q8_0` for four activation rows (see `vec_dot_q4_1_q8_1_x4`).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`available()`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q8_0_q8_0_x4(w: &[u8], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    q8_0_acts_x4(w, 34, a, |b| {
        _mm256_loadu_si256(b[2..34].as_ptr() as *const __m256i)
    })
}

/// A Q5_0 block unpacked for a prompt's products: its 32 stored values (the level plus 16,
/// 0..31) one per byte, and its scale widened to f32 (exact).
#[derive(Clone, Copy)]
pub struct Q5_0Unpacked {
    u: [u8; 32],
    d: f32,
}

/// Every block of `rows` (whole Q5_0 rows) unpacked into `out` (cleared first). A prompt's
/// task dots a few rows against every token of the prompt; the 5-bit unpacking, a third of
/// the per-block work, then happens once per task instead of once per four tokens.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn unpack_q5_0(rows: &[u8], out: &mut Vec<Q5_0Unpacked>) {
    assert_eq!(rows.len() % 22, 0, "whole Q5_0 blocks");
    out.clear();
    out.extend(rows.chunks_exact(22).map(|b| {
        let mut u = [0u8; 32];
        _mm256_storeu_si256(u.as_mut_ptr() as *mut __m256i, q5_0_unsigned(b));
        Q5_0Unpacked {
            u,
            d: f16_pair(b, 0).0,
        }
    }));
}

/// `vec_dot_q5_0_q8_0` of every row of `blocks` (rows of `per_row` unpacked blocks) with `T`
/// activation rows: `out[t][r]`. Per (row, token) the same operations in the same block
/// order as the single-row kernel (`q5_0_tile`), so the same bits; each block's values are
/// loaded once for the `T` tokens.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q5_0_unpacked<const T: usize>(
    blocks: &[Q5_0Unpacked],
    per_row: usize,
    a: [&[BlockQ8_0]; T],
    out: [&mut [f32]; T],
) {
    assert!(per_row > 0 && blocks.len().is_multiple_of(per_row));
    let rows = blocks.len() / per_row;
    for t in 0..T {
        assert_eq!(a[t].len(), per_row, "activation rows differ in length");
        assert!(out[t].len() >= rows, "an output row is short");
    }
    for (r, row) in blocks.chunks_exact(per_row).enumerate() {
        let mut acc = [_mm256_setzero_ps(); T];
        for (i, b) in row.iter().enumerate() {
            let u = _mm256_loadu_si256(b.u.as_ptr() as *const __m256i);
            let dw = _mm256_set1_ps(b.d);
            for t in 0..T {
                // SAFETY: every activation row holds `per_row` blocks (asserted above).
                let y = unsafe { a[t].get_unchecked(i) };
                let d = _mm256_mul_ps(dw, _mm256_set1_ps(y.d));
                acc[t] = _mm256_fmadd_ps(d, lanes_q5_0(u, y), acc[t]);
            }
        }
        for t in 0..T {
            out[t][r] = hsum(acc[t]);
        }
    }
}

/// `out[r] = vec_dot_q4_1_q8_1(row r, a)` for every row of `rows`, two rows at a time
/// (`row_pairs`).
///
/// Q4_1 alone goes in pairs: in the engine (2-core EPYC, 2 threads, six runs alternating with
/// one row at a time, brick p50s) SmolLM2's Q4_1 products ran faster in pairs (qkv 916 -> 852
/// us, gate/up 2529 -> 2273, attn_out 590 -> 550; ffn_down level) but its Q8_0 output
/// projection slower (1640 -> 1778), and the 0.5b's Q5_0 products slower too (qkv 1183 ->
/// 1422, gate/up 9052 -> 9691), though the kernel bench had them faster (Q5_0 in L2 2.41 ->
/// 2.11 ns/block, streamed level; Q8_0 as in `two_rows`): streamed by two threads at once, the
/// pairs' heavier block steps gained nothing from the second chain. Q4_0 and Q5_1 were not
/// measured in the engine.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`available()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_q4_1_q8_1(rows: &[u8], row_bytes: usize, a: &[BlockQ8_1], out: &mut [f32]) {
    row_pairs(rows, row_bytes, 20, a, out, q4_1_block, sum_with_mins)
}

row_loops!(rows_q4_0_q8_0 = vec_dot_q4_0_q8_0, BlockQ8_0);
row_loops!(rows_q5_0_q8_0 = vec_dot_q5_0_q8_0, BlockQ8_0);
row_loops!(rows_q8_0_q8_0 = vec_dot_q8_0_q8_0, BlockQ8_0);
row_loops!(rows_q5_1_q8_1 = vec_dot_q5_1_q8_1, BlockQ8_1);
row_loops!(rows_q4_1_q8_1_x4 = vec_dot_q4_1_q8_1_x4 x4, BlockQ8_1);
row_loops!(rows_q5_0_q8_0_x4 = vec_dot_q5_0_q8_0_x4 x4, BlockQ8_0);
row_loops!(rows_q8_0_q8_0_x4 = vec_dot_q8_0_q8_0_x4 x4, BlockQ8_0);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::legacy::LEGACY;
    use crate::quant::{legacy, quantize_act, ActType, GgmlType, QuantizedAct};
    use half::f16;

    use crate::rng::SplitMix64 as Rng;

    /// The scalar reference dot (`legacy`) of a row of legacy type `ty` with `act`.
    fn reference(ty: GgmlType, w: &[u8], act: &QuantizedAct) -> f32 {
        match (act, ty) {
            (QuantizedAct::Q8_0(a), GgmlType::Q4_0) => legacy::vec_dot_q4_0_q8_0(w, a),
            (QuantizedAct::Q8_0(a), GgmlType::Q5_0) => legacy::vec_dot_q5_0_q8_0(w, a),
            (QuantizedAct::Q8_0(a), GgmlType::Q8_0) => legacy::vec_dot_q8_0_q8_0(w, a),
            (QuantizedAct::Q8_1(a), GgmlType::Q4_1) => legacy::vec_dot_q4_1_q8_1(w, a),
            (QuantizedAct::Q8_1(a), GgmlType::Q5_1) => legacy::vec_dot_q5_1_q8_1(w, a),
            _ => panic!("{ty} with these activations has no reference here"),
        }
    }

    /// A random row: random quant bytes, finite f16 scale fields.
    fn row(rng: &mut Rng, ty: GgmlType, blocks: usize) -> Vec<u8> {
        let bytes = ty.block_bytes();
        let mut out = Vec::with_capacity(blocks * bytes);
        for _ in 0..blocks {
            let mut b: Vec<u8> = (0..bytes).map(|_| rng.next_u64() as u8).collect();
            let scales = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                2
            } else {
                1
            };
            for s in 0..scales {
                let v = f16::from_f32(rng.next_signed() * 0.05).to_le_bytes();
                b[2 * s..2 * s + 2].copy_from_slice(&v);
            }
            out.extend(b);
        }
        out
    }

    #[test]
    fn kquant_levels_equal_the_reference() {
        if !available() {
            eprintln!("skipped: no AVX2 on this CPU");
            return;
        }
        let mut rng = Rng::new(0x1e7e1);
        for _ in 0..100 {
            let b: Vec<u8> = (0..210).map(|_| rng.next_u64() as u8).collect();
            let (mut want, mut got) = ([0i8; 256], [0i8; 256]);
            crate::quant::kquants::q6_levels_scalar(&b, &mut want);
            // SAFETY: AVX2 was just detected; b is a whole Q6_K block.
            unsafe { q6_levels(&b, &mut got) };
            assert_eq!(got, want, "Q6_K");
            for qh in [None, Some(&b[128..160])] {
                crate::quant::kquants::q45_levels_scalar(&b[..128], qh, &mut want);
                // SAFETY: as above; 128 bytes of nibbles and 32 of high bits.
                unsafe { q45_levels(&b[..128], qh, &mut got) };
                assert_eq!(got, want, "Q4_K/Q5_K, high bits: {}", qh.is_some());
            }
        }
    }

    #[test]
    fn kquant_lane_sums_equal_the_reference() {
        if !available() {
            eprintln!("skipped: no AVX2 on this CPU");
            return;
        }
        let mut rng = Rng::new(0x5eed);
        for sub in [16usize, 32] {
            for _ in 0..200 {
                let lv: [i8; 256] = std::array::from_fn(|_| (rng.next_u64() % 64) as i8 - 32);
                let q8: [i8; 256] = std::array::from_fn(|_| (rng.next_u64() % 256) as u8 as i8);
                let sc: Vec<i32> = (0..256 / sub)
                    .map(|_| (rng.next_u64() % 128) as i32 - 64)
                    .collect();
                let want = crate::quant::kquants::lane_sums_scalar(&lv, &q8, sub, |s| sc[s]);
                // SAFETY: AVX2 was just detected.
                let got = unsafe { kquant_lane_sums(&lv, &q8, sub, |s| sc[s]) };
                assert_eq!(got, want, "sub {sub}");
            }
        }
    }

    #[test]
    fn row_loops_equal_the_reference_bit_for_bit() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA");
            return;
        }
        let mut rng = Rng::new(13);
        for ty in LEGACY {
            // Odd and even row counts: pairs of rows and a lone last one.
            for (rows, blocks) in [(1usize, 1usize), (2, 3), (5, 18), (6, 7)] {
                let w: Vec<u8> = (0..rows).flat_map(|_| row(&mut rng, ty, blocks)).collect();
                let x: Vec<f32> = (0..blocks * 32).map(|_| rng.next_signed() * 3.0).collect();
                let act = quantize_act(ActType::for_weights(ty), &x);
                let rb = blocks * ty.block_bytes();
                let mut out = vec![f32::NAN; rows];
                crate::quant::vec_dot_rows(ty, &w, rb, &act, &mut out);
                for (r, wr) in w.chunks_exact(rb).enumerate() {
                    let want = reference(ty, wr, &act);
                    assert_eq!(
                        out[r].to_bits(),
                        want.to_bits(),
                        "{ty}: {rows} rows of {blocks} blocks, row {r}"
                    );
                }
            }
        }
    }

    #[test]
    fn four_row_kernels_equal_the_single_row_kernels_bit_for_bit() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA");
            return;
        }
        let mut rng = Rng::new(11);
        for ty in [GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0] {
            for blocks in [1usize, 3, 18, 28] {
                for _ in 0..20 {
                    let w = row(&mut rng, ty, blocks);
                    let acts: Vec<QuantizedAct> = (0..4)
                        .map(|_| {
                            let x: Vec<f32> =
                                (0..blocks * 32).map(|_| rng.next_signed() * 3.0).collect();
                            quantize_act(ActType::for_weights(ty), &x)
                        })
                        .collect();
                    let got = crate::quant::vec_dot_x4(ty, &w, std::array::from_fn(|t| &acts[t]))
                        .expect("a four-row kernel for this type");
                    for (t, a) in acts.iter().enumerate() {
                        let want = crate::quant::vec_dot(ty, &w, a);
                        let slow = reference(ty, &w, a);
                        assert_eq!(got[t].to_bits(), want.to_bits(), "{ty} x {blocks}, row {t}");
                        assert_eq!(got[t].to_bits(), slow.to_bits(), "{ty} x {blocks}, row {t}");
                    }
                }
            }
        }
    }

    #[test]
    fn unpacked_q5_0_rows_equal_the_reference_bit_for_bit() {
        use crate::quant::test_rows::{assert_q5_0_products, q5_0_rows_and_acts};
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA");
            return;
        }
        let mut rng = Rng::new(29);
        for blocks in [1usize, 3, 28] {
            let rows = 5;
            let (w, acts) = q5_0_rows_and_acts(&mut rng, rows, blocks);
            let mut unpacked = Vec::new();
            let mut eight = vec![vec![0f32; rows]; 8];
            let mut one = vec![0f32; rows];
            // SAFETY: the features were just detected; `w` holds whole rows.
            unsafe {
                unpack_q5_0(&w, &mut unpacked);
                let [o0, o1, o2, o3, o4, o5, o6, o7] = &mut eight[..] else {
                    unreachable!()
                };
                let a = std::array::from_fn(|t| acts[t].as_slice());
                rows_q5_0_unpacked::<8>(&unpacked, blocks, a, [o0, o1, o2, o3, o4, o5, o6, o7]);
                rows_q5_0_unpacked::<1>(&unpacked, blocks, [&acts[3]], [&mut one]);
            }
            let all: Vec<&[BlockQ8_0]> = acts.iter().map(|a| a.as_slice()).collect();
            let outs: Vec<&[f32]> = eight.iter().map(|o| o.as_slice()).collect();
            assert_q5_0_products(&w, blocks, &all, &outs, "eight tokens");
            assert_q5_0_products(&w, blocks, &[&acts[3]], &[&one], "one token");
        }
    }

    #[test]
    fn avx2_kernels_equal_the_reference_bit_for_bit() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA");
            return;
        }
        let mut rng = Rng::new(7);
        for ty in LEGACY {
            for blocks in [1usize, 2, 7, 18, 48] {
                for _ in 0..20 {
                    let w = row(&mut rng, ty, blocks);
                    let x: Vec<f32> = (0..blocks * 32).map(|_| rng.next_signed() * 3.0).collect();
                    let act = quantize_act(ActType::for_weights(ty), &x);
                    // SAFETY: the features were just detected.
                    let fast = unsafe {
                        match (&act, ty) {
                            (QuantizedAct::Q8_0(a), GgmlType::Q4_0) => vec_dot_q4_0_q8_0(&w, a),
                            (QuantizedAct::Q8_0(a), GgmlType::Q5_0) => vec_dot_q5_0_q8_0(&w, a),
                            (QuantizedAct::Q8_0(a), GgmlType::Q8_0) => vec_dot_q8_0_q8_0(&w, a),
                            (QuantizedAct::Q8_1(a), GgmlType::Q4_1) => vec_dot_q4_1_q8_1(&w, a),
                            (QuantizedAct::Q8_1(a), GgmlType::Q5_1) => vec_dot_q5_1_q8_1(&w, a),
                            _ => unreachable!(),
                        }
                    };
                    let slow = reference(ty, &w, &act);
                    assert_eq!(
                        fast.to_bits(),
                        slow.to_bits(),
                        "{ty} x {blocks}: {fast} vs {slow}"
                    );
                }
            }
        }
    }
}
