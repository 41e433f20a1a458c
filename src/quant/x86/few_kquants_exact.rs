//! Two to eight tokens (sequences decoding together) against Q3_K, Q4_K, Q5_K or Q6_K rows
//! under exact numerics on AVX-512 F/BW: each weight block is unpacked once for all the
//! tokens, then taken against them two at a time as `kquants512`'s four-token rows take a
//! pair (one token a 256-bit half), so every result is the AVX2 one-token kernel's (and the
//! reference's) bit for bit. The one-token dots per token instead unpack every block once per
//! token, the larger share of a block's work for so few tokens.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::kquants::{block_bytes, fold, min_sum, unpack, Kind};
use super::kquants512::{add_scaled2, lanes2, paired, widen, Paired};
use super::prefetch::prefetch_ahead;
use crate::quant::blocks::BlockQ8K;
use crate::quant::GgmlType;

/// Most tokens `rows_few` takes.
pub const MAX_TOKENS: usize = 8;

/// Whether `rows_few` takes `ty` rows on this CPU.
pub fn takes(ty: GgmlType) -> bool {
    kind(ty).is_some() && super::kquants512::available()
}

fn kind(ty: GgmlType) -> Option<Kind> {
    match ty {
        GgmlType::Q3_K => Some(Kind::Q3K),
        GgmlType::Q4_K => Some(Kind::Q4K),
        GgmlType::Q5_K => Some(Kind::Q5K),
        GgmlType::Q6_K => Some(Kind::Q6K),
        _ => None,
    }
}

/// One row against `P` pairs of tokens (`a`: 2P rows, `pairs[i * P + p]` block i of pair p
/// side by side): per block one unpacking, then per pair the four-token kernel's steps.
/// (No closures: see `kquants512::dot_rows4`.)
#[inline(always)]
unsafe fn row<const P: usize>(
    w: &[u8],
    a: &[&[BlockQ8K]],
    kind: Kind,
    pairs: &[Paired],
) -> [[f32; 2]; P] {
    let bytes = block_bytes(w, a, kind);
    let mut sums = [_mm512_setzero_ps(); P];
    let mut sumf = [[0f32; 2]; P];
    for (i, b) in w.chunks_exact(bytes).enumerate() {
        for line in (0..bytes).step_by(64) {
            prefetch_ahead(b.as_ptr().wrapping_add(line));
        }
        let u = unpack(b, kind);
        let wide = widen(&u);
        for p in 0..P {
            // SAFETY: every token's row holds as many blocks as the weight row (`block_bytes`).
            let (ya, yb) = unsafe { (a[2 * p].get_unchecked(i), a[2 * p + 1].get_unchecked(i)) };
            let x = unsafe { pairs.get_unchecked(i * P + p) };
            let l = _mm512_cvtepi32_ps(lanes2(&wide, x, kind.offset()));
            sums[p] = add_scaled2(sums[p], l, u.d, ya.d, yb.d);
            if kind.has_mins() {
                sumf[p][0] -= u.dmin * ya.d * min_sum(u.mins, ya) as f32;
                sumf[p][1] -= u.dmin * yb.d * min_sum(u.mins, yb) as f32;
            }
        }
    }
    let mut out = [[0f32; 2]; P];
    for p in 0..P {
        let s = sums[p];
        let lo = _mm512_castps512_ps256(s);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s)));
        out[p] = [fold(sumf[p][0], lo), fold(sumf[p][1], hi)];
    }
    out
}

std::thread_local! {
    /// A task's paired activations, kept between calls (a task allocates only when a row is
    /// longer than any before on its thread).
    static PAIRED: std::cell::RefCell<Vec<Paired>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Every row of `rows` against the tokens of `a` (2P rows, an odd last token twice): the
/// pairs' blocks made once per call, then row after row; `out[t][r]` for the tokens out has.
#[inline(always)]
unsafe fn run<const P: usize>(
    rows: &[u8],
    row_bytes: usize,
    a: &[&[BlockQ8K]],
    out: &mut [&mut [f32]],
    kind: Kind,
) {
    // Taken out and put back rather than used inside a closure (see `row`).
    let mut buf = PAIRED.take();
    buf.clear();
    buf.resize(a[0].len() * P, [_mm512_setzero_si512(); 8]);
    for p in 0..P {
        for (i, (ya, yb)) in a[2 * p].iter().zip(a[2 * p + 1]).enumerate() {
            buf[i * P + p] = paired(ya, yb);
        }
    }
    for (r, w) in rows.chunks_exact(row_bytes).enumerate() {
        let v = row::<P>(w, a, kind, &buf);
        for (t, o) in out.iter_mut().enumerate() {
            o[r] = v[t / 2][t % 2];
        }
    }
    PAIRED.set(buf);
}

/// `out[t][r]` = the one-token dot of row r of `rows` (`ty`: Q3_K, Q4_K, Q5_K or Q6_K,
/// `row_bytes` each) with token t's Q8_K row, bit for bit, for one to `MAX_TOKENS` tokens.
///
/// # Safety
/// The CPU must support AVX-512 F and BW, AVX2, FMA and F16C (`takes`).
#[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
pub unsafe fn rows_few(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    acts: &[&[BlockQ8K]],
    out: &mut [&mut [f32]],
) {
    let n = acts.len();
    let kind = kind(ty).unwrap_or_else(|| panic!("{ty} rows are not Q3_K, Q4_K, Q5_K or Q6_K"));
    let count = rows.len() / row_bytes;
    assert!(
        (1..=MAX_TOKENS).contains(&n) && out.len() == n,
        "one to {MAX_TOKENS} tokens, an output each"
    );
    assert!(
        rows.len() == count * row_bytes && out.iter().all(|o| o.len() >= count),
        "whole {ty} rows, and an output for each"
    );
    // The tokens two by two, an odd last one paired with itself.
    let a: [&[BlockQ8K]; MAX_TOKENS] = std::array::from_fn(|t| acts[t.min(n - 1)]);
    let a = &a[..2 * n.div_ceil(2)];
    // SAFETY (each arm): the target features above; `row` checks the lengths.
    unsafe {
        match n.div_ceil(2) {
            1 => run::<1>(rows, row_bytes, a, out, kind),
            2 => run::<2>(rows, row_bytes, a, out, kind),
            3 => run::<3>(rows, row_bytes, a, out, kind),
            _ => run::<4>(rows, row_bytes, a, out, kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kquants::{
        quantize_act_q8_k, quantize_q4_k, quantize_q6_k, vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k,
        vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k,
    };
    use crate::rng::SplitMix64 as Rng;

    /// One to eight tokens against Q3_K-Q6_K rows (quantized values for Q4_K/Q6_K, random
    /// bytes with finite scales for all four): the scalar reference's bits.
    #[test]
    fn few_tokens_equal_the_reference_bit_for_bit() {
        if !super::super::kquants512::available() {
            eprintln!("skipped: this CPU has no AVX-512 F/BW");
            return;
        }
        let mut rng = Rng::new(0x37f);
        let (cols, n_rows) = (1024, 5);
        let acts: Vec<Vec<BlockQ8K>> = (0..MAX_TOKENS)
            .map(|t| {
                let scale = if t == 3 { 1e3 } else { 2.0 };
                let x: Vec<f32> = (0..cols).map(|_| rng.next_signed() * scale).collect();
                quantize_act_q8_k(&x)
            })
            .collect();
        type Dot = fn(&[u8], &[BlockQ8K]) -> f32;
        let cases: [(GgmlType, Dot); 4] = [
            (GgmlType::Q3_K, vec_dot_q3_k_q8_k),
            (GgmlType::Q4_K, vec_dot_q4_k_q8_k),
            (GgmlType::Q5_K, vec_dot_q5_k_q8_k),
            (GgmlType::Q6_K, vec_dot_q6_k_q8_k),
        ];
        for (ty, dot) in cases {
            let rb = cols / 256 * ty.block_bytes();
            let mut sets = vec![random_rows(&mut rng, ty, n_rows, rb)];
            let x: Vec<f32> = (0..cols * n_rows).map(|_| rng.next_signed()).collect();
            let mut q = Vec::new();
            match ty {
                GgmlType::Q4_K => quantize_q4_k(&x, &mut q),
                GgmlType::Q6_K => quantize_q6_k(&x, &mut q),
                _ => {}
            }
            if !q.is_empty() {
                sets.push(q);
            }
            for w in &sets {
                for n in 1..=MAX_TOKENS {
                    let a: Vec<&[BlockQ8K]> = acts[..n].iter().map(|a| a.as_slice()).collect();
                    let mut got = vec![vec![f32::NAN; n_rows]; n];
                    let mut o: Vec<&mut [f32]> = got.iter_mut().map(|v| v.as_mut_slice()).collect();
                    // SAFETY: AVX-512 F/BW were just detected (with AVX2, FMA and F16C).
                    unsafe { rows_few(ty, w, rb, &a, &mut o) };
                    for (r, wr) in w.chunks_exact(rb).enumerate() {
                        for t in 0..n {
                            assert_eq!(
                                got[t][r].to_bits(),
                                dot(wr, &acts[t]).to_bits(),
                                "{ty}, {n} tokens, row {r}, token {t}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// `rows` rows of random bytes, each block's f16 scales (the first two, and Q6_K's last)
    /// small and finite.
    fn random_rows(rng: &mut Rng, ty: GgmlType, rows: usize, rb: usize) -> Vec<u8> {
        let bytes = ty.block_bytes();
        let mut w = vec![0u8; rows * rb];
        rng.fill(&mut w);
        for b in w.chunks_exact_mut(bytes) {
            let d = |rng: &mut Rng| half::f16::from_f32(rng.next_signed() * 0.01).to_le_bytes();
            match ty {
                GgmlType::Q6_K => {
                    let at = bytes - 2;
                    b[at..].copy_from_slice(&d(rng));
                }
                GgmlType::Q3_K => {
                    let at = bytes - 2;
                    b[at..].copy_from_slice(&d(rng));
                }
                _ => {
                    b[..2].copy_from_slice(&d(rng));
                    b[2..4].copy_from_slice(&d(rng));
                }
            }
        }
        w
    }
}
