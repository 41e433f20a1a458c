//! Loads of block fields (f16 scales, packed nibbles and high bits) and the integer lane
//! arithmetic shared by the AVX2 kernels, all inlined into their `target_feature` callers.

use std::arch::x86_64::*;

use crate::quant::simd_order::Lanes8;

/// The two f16 at `b[at..at + 4]` as f32 (a block's `d`, and `m` or the first quant bytes),
/// with F16C in line (`half`'s conversion dispatches at run time through a call; the values are
/// the same, f16 to f32 being exact). One 32-bit load (`vmovd`, which clears the register's
/// upper lanes): a 16-bit load became `vpinsrw` into whatever register the compiler liked, in
/// the q4_1 loop the `summs` accumulator, chaining every block's scale behind the previous
/// block's sum.
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
pub(super) unsafe fn f16_bits(bits: u32) -> (f32, f32) {
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
pub(super) unsafe fn f16_splat(b: &[u8]) -> __m256 {
    debug_assert!(b.len() >= 2);
    _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes([b[0], b[1]])))
}

/// One bounds check for the four bytes, so the load is one 32-bit load (indexing byte by
/// byte kept four loads and shifts: each index could panic on its own).
#[inline(always)]
pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    let bytes: [u8; 4] = b[at..at + 4].try_into().expect("four bytes");
    u32::from_le_bytes(bytes)
}

/// 16 packed bytes → 32 nibbles in weight order (low nibbles, then high nibbles): the bytes
/// broadcast to both halves (a load, no shuffle), the high half shifted right by 4 in one
/// `vpsrlvd` (the bits it pulls into each byte's top are masked away), as `q5_0_unsigned`.
#[inline(always)]
pub(super) unsafe fn nibbles(qs: &[u8]) -> __m256i {
    debug_assert!(qs.len() >= 16);
    let b = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs.as_ptr() as *const __m128i));
    let shifted = _mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F))
}

/// Bit `j` of `qh` → byte `j` = 0x10 (the fifth bit of weight `j`), else 0.
#[inline(always)]
pub(super) unsafe fn high_bits(qh: u32) -> __m256i {
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
pub(super) unsafe fn lanes_unsigned(q: __m256i, a: __m256i) -> __m256 {
    let pairs = _mm256_maddubs_epi16(q, a);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// Lane sums for signed `q`: |q| times `a` with q's sign (no i16 overflow: |q| ≤ 128 and the
/// activations are within ±127).
#[inline(always)]
pub(super) unsafe fn lanes_signed(q: __m256i, a: __m256i) -> __m256 {
    lanes_unsigned(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q))
}

#[inline(always)]
pub(super) unsafe fn load32(p: &[i8; 32]) -> __m256i {
    _mm256_loadu_si256(p.as_ptr() as *const __m256i)
}

/// `hsum_float_8` of the accumulator (through `Lanes8`, the reference reduction).
#[inline(always)]
pub(super) unsafe fn hsum(acc: __m256) -> f32 {
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    Lanes8::from(lanes).hsum()
}

/// 32 bytes at `lo` and 32 at `hi` as the two halves of one 512-bit vector.
///
/// # Safety
/// AVX-512 F must be available; both pointers must be valid for 32 bytes.
#[inline(always)]
pub(super) unsafe fn halves(lo: *const u8, hi: *const u8) -> __m512i {
    _mm512_inserti64x4::<1>(
        _mm512_castsi256_si512(_mm256_loadu_si256(lo as *const __m256i)),
        _mm256_loadu_si256(hi as *const __m256i),
    )
}
