//! Unit tests of the x86 kernels that compare them with the reference through the dispatch
//! (`quantize_act`, `vec_dot`, `vec_dot_rows`, `vec_dot_x4`), which sits above the kernels.

/// `blocks` blocks of k-quant `ty` of random bytes but for their scales, small finite f16
/// values (`d` 0.01, `dmin` 0.02 where the type has one), so every dot stays finite.
pub(super) fn random_kquant_blocks(
    ty: crate::quant::GgmlType,
    blocks: usize,
    rng: &mut crate::rng::SplitMix64,
) -> Vec<u8> {
    use crate::quant::GgmlType;
    let per = ty.block_bytes();
    let mut bytes: Vec<u8> = (0..blocks * per).map(|_| rng.next_u64() as u8).collect();
    let (d_at, dmin_at) = match ty {
        GgmlType::Q2_K => (80, Some(82)),
        GgmlType::Q3_K => (108, None),
        GgmlType::Q4_K | GgmlType::Q5_K => (0, Some(2)),
        GgmlType::Q6_K => (208, None),
        _ => panic!("{ty} is not a k-quant"),
    };
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    for b in bytes.chunks_exact_mut(per) {
        b[d_at..d_at + 2].copy_from_slice(&f16(0.01));
        if let Some(at) = dmin_at {
            b[at..at + 2].copy_from_slice(&f16(0.02));
        }
    }
    bytes
}

/// Each token's results `got[t][r]` within float reordering (1e-5 of the sum of |w x|) of the
/// f64 dot of row r of `bytes` (`n_rows` rows of `cols` values of type `ty`), dequantized, with
/// the token's Q8_K values `acts[t]`.
pub(super) fn assert_near_f64_dot(
    ty: crate::quant::GgmlType,
    bytes: &[u8],
    n_rows: usize,
    cols: usize,
    acts: &[Vec<crate::quant::kquants::BlockQ8K>],
    got: &[Vec<f32>],
) {
    let rb = bytes.len() / n_rows;
    for (t, a) in acts.iter().enumerate() {
        let x: Vec<f64> = a
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| q as f64 * b.d as f64))
            .collect();
        for r in 0..n_rows {
            let mut wr = vec![0f32; cols];
            crate::quant::dequantize_row(ty, &bytes[r * rb..(r + 1) * rb], &mut wr);
            let want: f64 = wr.iter().zip(&x).map(|(&w, &x)| w as f64 * x).sum();
            let scale: f64 = wr.iter().zip(&x).map(|(&w, &x)| (w as f64 * x).abs()).sum();
            let g = got[t][r] as f64;
            assert!(
                (g - want).abs() <= 1e-5 * scale.max(1.0),
                "{ty:?} row {r} token {t}: {g} vs {want}"
            );
        }
    }
}

/// The legacy-quant kernels (`legacy`, `q5_0`).
mod legacy_kernels {
    use super::super::legacy::*;
    use crate::quant::blocks::{BlockQ8_0, BlockQ8_1};
    use crate::quant::legacy::LEGACY;
    use crate::quant::x86::available;
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

    /// The dot of a Q4_0, Q5_0 or Q8_0 row with `a` in f64, from the same integer block sums and
    /// f32 scale products, and the sum of the blocks' magnitudes (a reordering bound's scale).
    fn dot_f64(ty: GgmlType, w: &[u8], a: &[BlockQ8_0]) -> (f64, f64) {
        let level = |blk: &[u8], k: usize| match ty {
            GgmlType::Q4_0 if k < 16 => (blk[2 + k] & 15) as i32 - 8,
            GgmlType::Q4_0 => (blk[2 + k - 16] >> 4) as i32 - 8,
            GgmlType::Q5_0 => {
                let nibble = if k < 16 {
                    blk[6 + k] & 15
                } else {
                    blk[6 + k - 16] >> 4
                };
                let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
                (nibble as i32 | (((qh >> k) & 1) << 4) as i32) - 16
            }
            _ => blk[2 + k] as i8 as i32,
        };
        let (mut sum, mut mag) = (0f64, 0f64);
        for (blk, y) in w.chunks_exact(ty.block_bytes()).zip(a) {
            let d = f16::from_le_bytes([blk[0], blk[1]]).to_f32() * y.d;
            let isum: i32 = (0..32).map(|k| level(blk, k) * y.qs[k] as i32).sum();
            sum += d as f64 * isum as f64;
            mag += (d as f64 * isum as f64).abs();
        }
        (sum, mag)
    }

    /// The AVX-512 VNNI kernels (`fast_rows_vnni::rows16`, two groups side by side) give
    /// `rows8`'s bits (`groups`: its results per group, five tokens).
    fn vnni_pairs_match<'a, B: crate::quant::x86::fast_rows_vnni::Pairs>(
        w: &[u8],
        rb: usize,
        per_row: usize,
        q8: &dyn Fn(usize) -> &'a [BlockQ8_0],
        groups: &[[[f32; 8]; 5]],
    ) {
        use crate::quant::x86::fast_rows::repack;
        use crate::quant::x86::fast_rows_vnni::{available, rows16};
        if !available() {
            eprintln!("AVX-512 VNNI pairs skipped: this CPU lacks AVX-512 F, BW or VNNI");
            return;
        }
        let mut blocks: Vec<B> = Vec::new();
        repack(w, rb, &mut blocks);
        let acts: Vec<Vec<_>> = (0..5)
            .map(|t| q8(t).iter().map(B::wide).collect())
            .collect();
        let a = |t: usize| acts[t].as_slice();
        let (g0, g1) = blocks.split_at(per_row);
        let mut o = [[0f32; 16]; 5];
        let [o0, o1, o2, o3, o4] = &mut o;
        // SAFETY: `available()` was checked above.
        unsafe {
            rows16::<B, 4>(g0, g1, [a(0), a(1), a(2), a(3)], [o0, o1, o2, o3]);
            rows16::<B, 1>(g0, g1, [a(4)], [o4]);
        }
        for (t, o) in o.iter().enumerate() {
            for r in 0..16 {
                let want = groups[r / 8][t][r % 8];
                assert_eq!(
                    o[r].to_bits(),
                    want.to_bits(),
                    "{per_row} blocks, row {r} token {t}: {} vs rows8's {want}",
                    o[r]
                );
            }
        }
    }

    /// The fast numerics' interleaved rows (`fast_rows`): within float reordering of an f64 dot
    /// and of the exact kernel.
    #[test]
    fn interleaved_rows_match_the_reference_within_float_reordering() {
        use crate::quant::x86::fast_rows::{repack, rows8, Interleaved, Q4_0x8, Q5_0x8, Q8_0x8};
        if !available() {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C");
            return;
        }
        let mut rng = Rng::new(7);
        for ty in [GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0] {
            for per_row in [1usize, 3, 28, 152] {
                let n_rows = 19; // two groups of eight and three rows left out
                let w: Vec<u8> = (0..n_rows)
                    .flat_map(|_| row(&mut rng, ty, per_row))
                    .collect();
                let rb = per_row * ty.block_bytes();
                let acts: Vec<QuantizedAct> = (0..5)
                    .map(|_| {
                        let x: Vec<f32> =
                            (0..per_row * 32).map(|_| rng.next_signed() * 3.0).collect();
                        quantize_act(ActType::Q8_0, &x)
                    })
                    .collect();
                let q8 = |t: usize| acts[t].q8_0().expect("quantized as Q8_0");
                /// Eight rows of each whole group against five tokens (four, then one).
                fn group_outs<'a, B: Interleaved>(
                    w: &[u8],
                    rb: usize,
                    per_row: usize,
                    q8: &dyn Fn(usize) -> &'a [BlockQ8_0],
                ) -> Vec<[[f32; 8]; 5]> {
                    let mut blocks: Vec<B> = Vec::new();
                    repack(w, rb, &mut blocks);
                    let acts: Vec<Vec<B::Act>> =
                        (0..5).map(|t| q8(t).iter().map(B::act).collect()).collect();
                    let q8 = |t: usize| acts[t].as_slice();
                    assert_eq!(blocks.len(), 2 * per_row, "whole groups only");
                    blocks
                        .chunks_exact(per_row)
                        .map(|group| {
                            let mut o = [[0f32; 8]; 5];
                            let [o0, o1, o2, o3, o4] = &mut o;
                            let a = [q8(0), q8(1), q8(2), q8(3)];
                            // SAFETY: the caller checked `available()`.
                            unsafe {
                                rows8::<B, 4>(group, a, [o0, o1, o2, o3]);
                                rows8::<B, 1>(group, [q8(4)], [o4]);
                            }
                            o
                        })
                        .collect()
                }
                let groups = if ty == GgmlType::Q8_0 {
                    let groups = group_outs::<Q8_0x8>(&w, rb, per_row, &q8);
                    vnni_pairs_match::<Q8_0x8>(&w, rb, per_row, &q8, &groups);
                    groups
                } else if ty == GgmlType::Q5_0 {
                    // Repacked as its own only without AVX-512 VNNI: no pairs to compare.
                    group_outs::<Q5_0x8>(&w, rb, per_row, &q8)
                } else {
                    let groups = group_outs::<Q4_0x8>(&w, rb, per_row, &q8);
                    vnni_pairs_match::<Q4_0x8>(&w, rb, per_row, &q8, &groups);
                    groups
                };
                for (g, o) in groups.iter().enumerate() {
                    for (t, o) in o.iter().enumerate() {
                        for (r, &got) in o.iter().enumerate() {
                            let wr = &w[(g * 8 + r) * rb..][..rb];
                            let (want, mag) = dot_f64(ty, wr, q8(t));
                            let bound = per_row as f64 * 1.2e-7 * mag + 1e-6;
                            assert!(
                                (got as f64 - want).abs() <= bound,
                                "{ty} {per_row} blocks, group {g} row {r} token {t}: {got} vs \
                                 {want} (bound {bound})"
                            );
                            // The exact kernel's own rounding: its eight lane sums and their
                            // adding up.
                            let exact = reference(ty, wr, &acts[t]);
                            let exact_bound = (per_row + 8) as f64 * 1.2e-7 * mag + 1e-6;
                            assert!(
                                (got - exact).abs() as f64 <= bound + exact_bound,
                                "{ty}: {got} vs the exact kernel's {exact}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Thirteen tokens' outputs as the engine's steps take them: eight, four and one.
    fn eight_four_one<const W: usize>(
        o: &mut [[f32; W]; 13],
    ) -> ([&mut [f32]; 8], [&mut [f32]; 4], &mut [f32]) {
        let (eight, rest) = o.split_at_mut(8);
        let (four, one) = rest.split_at_mut(4);
        let mut it = eight.iter_mut();
        let outs8 = std::array::from_fn(|_| it.next().unwrap().as_mut_slice());
        let mut it = four.iter_mut();
        let outs4 = std::array::from_fn(|_| it.next().unwrap().as_mut_slice());
        (outs8, outs4, one[0].as_mut_slice())
    }

    /// Q4_1's interleaved rows (`fast_rows::Q4_1x8`): eight tokens, four and one on AVX2
    /// within float reordering of an f64 dot and of the exact kernel, and on AVX-512 VNNI
    /// (two groups side by side) bit for bit the AVX2 kernel's results.
    #[test]
    fn q4_1_interleaved_rows_match_the_reference_within_float_reordering() {
        min_rows_match::<crate::quant::x86::fast_rows::Q4_1x8>(0x41);
    }

    /// Q5_1's interleaved rows (`fast_rows::Q5_1x8`, the fifth bits put back from `qh`): as
    /// Q4_1's.
    #[test]
    fn q5_1_interleaved_rows_match_the_reference_within_float_reordering() {
        min_rows_match::<crate::quant::x86::fast_rows::Q5_1x8>(0x51);
    }

    /// Level k (0..32) of a Q4_1 or Q5_1 block `b`: its nibble, and for Q5_1 its fifth bit.
    fn min_level(ty: GgmlType, b: &[u8], k: usize) -> i32 {
        let head = if ty == GgmlType::Q5_1 { 8 } else { 4 };
        let nibble = if k < 16 {
            b[head + k] & 15
        } else {
            b[head + k - 16] >> 4
        };
        let fifth = if ty == GgmlType::Q5_1 {
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            ((qh >> k) & 1) << 4
        } else {
            0
        };
        nibble as i32 + fifth as i32
    }

    /// A `d * q + m` type's interleaved rows (`B`: Q4_1x8 or Q5_1x8) against thirteen tokens
    /// as the engine's steps take them (eight, four, one) on AVX2, within float reordering of an
    /// f64 dot and of the exact kernel; on AVX-512 VNNI (two groups side by side) bit for bit
    /// the AVX2 results.
    fn min_rows_match<
        B: crate::quant::x86::fast_rows_vnni::Pairs<Act = BlockQ8_1, Wide = BlockQ8_1>,
    >(
        seed: u64,
    ) {
        use crate::quant::x86::fast_rows::{repack, rows8};
        use crate::quant::x86::fast_rows_vnni::{self as vnni, rows16};
        if !available() {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C");
            return;
        }
        let ty = B::TYPE;
        let mut rng = Rng::new(seed);
        for per_row in [1usize, 3, 18, 28, 152] {
            let n_rows = 19; // two groups of eight and three rows left out
            let w: Vec<u8> = (0..n_rows)
                .flat_map(|_| row(&mut rng, ty, per_row))
                .collect();
            let (bb, rb) = (ty.block_bytes(), per_row * ty.block_bytes());
            let x: Vec<Vec<f32>> = (0..13)
                .map(|_| (0..per_row * 32).map(|_| rng.next_signed() * 3.0).collect())
                .collect();
            let acts: Vec<QuantizedAct> =
                x.iter().map(|x| quantize_act(ActType::Q8_1, x)).collect();
            let q8: Vec<&[BlockQ8_1]> = acts
                .iter()
                .map(|a| a.q8_1().expect("quantized as Q8_1"))
                .collect();
            // `act` (the bench's way in) makes Q8_1 blocks from Q8_0 ones.
            for (x, want) in x.iter().zip(&q8) {
                let QuantizedAct::Q8_0(a) = quantize_act(ActType::Q8_0, x) else {
                    unreachable!("quantized as Q8_0")
                };
                // The same scale and levels; the sum from the rounded scale, where Q8_1's own
                // takes the unrounded one (an f16 rounding apart).
                for (made, want) in a.iter().map(B::act).zip(want.iter()) {
                    assert_eq!((made.d, made.qs), (want.d, want.qs), "{per_row} blocks");
                    let off = (made.s - want.s).abs();
                    assert!(
                        off <= want.s.abs() / 512.0 + 1e-6,
                        "{} vs {}",
                        made.s,
                        want.s
                    );
                }
            }
            let mut blocks: Vec<B> = Vec::new();
            repack(&w, rb, &mut blocks);
            assert_eq!(blocks.len(), 2 * per_row, "whole groups only");
            // Tokens 0..8 eight at a time, 8..12 four at a time, 12 alone (the engine's steps).
            let mut groups = vec![[[f32::NAN; 8]; 13]; 2];
            for (group, o) in blocks.chunks_exact(per_row).zip(&mut groups) {
                let (outs8, outs4, one) = eight_four_one(o);
                // SAFETY: the features were checked above; every row holds `per_row` blocks.
                unsafe {
                    rows8::<B, 8>(group, std::array::from_fn(|t| q8[t]), outs8);
                    rows8::<B, 4>(group, std::array::from_fn(|t| q8[8 + t]), outs4);
                    rows8::<B, 1>(group, [q8[12]], [one]);
                }
            }
            for (g, o) in groups.iter().enumerate() {
                for (t, o) in o.iter().enumerate() {
                    for (r, &got) in o.iter().enumerate() {
                        let wr = &w[(g * 8 + r) * rb..][..rb];
                        let (mut want, mut mag) = (0f64, 0f64);
                        for (b, y) in wr.chunks_exact(bb).zip(q8[t]) {
                            let f = |at: usize| f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
                            let isum: i32 =
                                (0..32).map(|k| min_level(ty, b, k) * y.qs[k] as i32).sum();
                            let (levels, min) =
                                ((f(0) * y.d) as f64 * isum as f64, (f(2) * y.s) as f64);
                            want += levels + min;
                            mag += levels.abs() + min.abs();
                        }
                        // Two roundings a block: the levels' and the minimum's multiply-adds.
                        let bound = 2.0 * per_row as f64 * 1.2e-7 * mag + 1e-6;
                        assert!(
                            (got as f64 - want).abs() <= bound,
                            "{ty} {per_row} blocks, group {g} row {r} token {t}: {got} vs \
                             {want} (bound {bound})"
                        );
                        let exact = reference(ty, wr, &acts[t]);
                        let exact_bound = (per_row + 8) as f64 * 1.2e-7 * mag + 1e-6;
                        assert!(
                            (got - exact).abs() as f64 <= bound + exact_bound,
                            "{ty} {per_row} blocks: {got} vs the exact kernel's {exact}"
                        );
                    }
                }
            }
            if !vnni::available() {
                eprintln!("{ty} AVX-512 VNNI pairs skipped: this CPU lacks AVX-512 F, BW or VNNI");
                continue;
            }
            let (g0, g1) = blocks.split_at(per_row);
            let mut o = [[f32::NAN; 16]; 13];
            let (outs8, outs4, one) = eight_four_one(&mut o);
            // SAFETY: `vnni::available()` was checked above.
            unsafe {
                rows16::<B, 8>(g0, g1, std::array::from_fn(|t| q8[t]), outs8);
                rows16::<B, 4>(g0, g1, std::array::from_fn(|t| q8[8 + t]), outs4);
                rows16::<B, 1>(g0, g1, [q8[12]], [one]);
            }
            for (t, o) in o.iter().enumerate() {
                for (r, got) in o.iter().enumerate() {
                    let want = groups[r / 8][t][r % 8];
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty} {per_row} blocks, row {r} token {t}: {got} vs rows8's {want}"
                    );
                }
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
    fn unpacked_prompt_rows_equal_the_reference_bit_for_bit() {
        use crate::quant::test_rows::{assert_products, rows_and_acts, Q8_0_ACT_TYPES};
        use crate::quant::x86::prompt_rows::{
            rows_unpacked, unpack_offset, unpack_signed, Unpacked,
        };
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA");
            return;
        }
        /// Eight tokens at once and one alone, against the reference.
        fn check<B: Unpacked>(
            ty: GgmlType,
            w: &[u8],
            blocks: usize,
            acts: &[Vec<BlockQ8_0>],
            unpacked: &[B],
        ) {
            let rows = w.len() / (ty.block_bytes() * blocks);
            let mut eight = vec![vec![0f32; rows]; 8];
            let mut one = vec![0f32; rows];
            let [o0, o1, o2, o3, o4, o5, o6, o7] = &mut eight[..] else {
                unreachable!()
            };
            let a = std::array::from_fn(|t| acts[t].as_slice());
            // SAFETY: the caller detected the features; `unpacked` holds whole rows.
            unsafe {
                rows_unpacked::<B, 1, 8>(unpacked, blocks, a, [o0, o1, o2, o3, o4, o5, o6, o7]);
                rows_unpacked::<B, 1, 1>(unpacked, blocks, [&acts[3]], [&mut one]);
            }
            let all: Vec<&[BlockQ8_0]> = acts.iter().map(|a| a.as_slice()).collect();
            let outs: Vec<&[f32]> = eight.iter().map(|o| o.as_slice()).collect();
            assert_products(ty, w, blocks, &all, &outs, "eight tokens");
            assert_products(ty, w, blocks, &[&acts[3]], &[&one], "one token");
            // The engine's tile: four rows (and the rest alone) by two tokens, and by one.
            let (mut two, mut last) = (vec![vec![0f32; rows]; 2], vec![0f32; rows]);
            let [t0, t1] = &mut two[..] else {
                unreachable!()
            };
            // SAFETY: as above.
            unsafe {
                rows_unpacked::<B, 4, 2>(unpacked, blocks, [&acts[5], &acts[7]], [t0, t1]);
                rows_unpacked::<B, 4, 1>(unpacked, blocks, [&acts[6]], [&mut last]);
            }
            let pair = [acts[5].as_slice(), acts[7].as_slice()];
            assert_products(
                ty,
                w,
                blocks,
                &pair,
                &[&two[0], &two[1]],
                "four rows by two",
            );
            assert_products(ty, w, blocks, &[&acts[6]], &[&last], "four rows by one");
        }
        let mut rng = Rng::new(29);
        for ty in Q8_0_ACT_TYPES {
            for blocks in [1usize, 3, 28] {
                let (w, acts) = rows_and_acts(&mut rng, ty, 5, blocks);
                // SAFETY: the features were just detected; `w` holds whole rows.
                unsafe {
                    if ty == GgmlType::Q8_0 {
                        let mut unpacked = Vec::new();
                        unpack_signed(&w, &mut unpacked);
                        check(ty, &w, blocks, &acts, &unpacked);
                    } else {
                        let mut unpacked = Vec::new();
                        unpack_offset(ty, &w, &mut unpacked);
                        check(ty, &w, blocks, &acts, &unpacked);
                    }
                }
            }
        }
    }

    #[test]
    fn unpacked_q8_1_rows_equal_the_reference_bit_for_bit() {
        use crate::quant::x86::prompt_rows::{rows_unpacked_q8_1, unpack_min};
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA");
            return;
        }
        let mut rng = Rng::new(37);
        for ty in [GgmlType::Q4_1, GgmlType::Q5_1] {
            for blocks in [1usize, 3, 28] {
                let rows = 5;
                let w: Vec<u8> = (0..rows).flat_map(|_| row(&mut rng, ty, blocks)).collect();
                let acts: Vec<QuantizedAct> = (0..8)
                    .map(|k| {
                        let scale = if k == 7 { 1e4 } else { 3.0 };
                        let x: Vec<f32> = (0..blocks * 32)
                            .map(|_| rng.next_signed() * scale)
                            .collect();
                        quantize_act(ActType::Q8_1, &x)
                    })
                    .collect();
                let q8: Vec<&[crate::quant::blocks::BlockQ8_1]> = acts
                    .iter()
                    .map(|a| a.q8_1().expect("Q8_1 activations"))
                    .collect();
                let mut unpacked = Vec::new();
                let mut eight = vec![vec![0f32; rows]; 8];
                let mut one = vec![0f32; rows];
                // SAFETY: the features were just detected; `w` holds whole rows.
                unsafe {
                    unpack_min(ty, &w, &mut unpacked);
                    let [o0, o1, o2, o3, o4, o5, o6, o7] = &mut eight[..] else {
                        unreachable!()
                    };
                    let a = std::array::from_fn(|t| q8[t]);
                    rows_unpacked_q8_1::<8>(&unpacked, blocks, a, [o0, o1, o2, o3, o4, o5, o6, o7]);
                    rows_unpacked_q8_1::<1>(&unpacked, blocks, [q8[3]], [&mut one]);
                }
                let bytes = ty.block_bytes() * blocks;
                for (r, wr) in w.chunks_exact(bytes).enumerate() {
                    for t in 0..8 {
                        let want = reference(ty, wr, &acts[t]).to_bits();
                        assert_eq!(
                            eight[t][r].to_bits(),
                            want,
                            "{ty} x {blocks}: row {r}, token {t}"
                        );
                    }
                    let want = reference(ty, wr, &acts[3]).to_bits();
                    assert_eq!(
                        one[r].to_bits(),
                        want,
                        "{ty} x {blocks}: row {r}, one token"
                    );
                }
            }
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

/// The k-quant kernels (`kquants`, `kquants512`).
mod kquant_kernels {
    use super::super::kquants::*;
    use crate::quant::blocks::BlockQ8K;
    use crate::quant::kquants::{self, quantize_act_q8_k, QK_K};
    use crate::quant::kquants::{Q3_K_BYTES, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES};
    use crate::quant::x86::available;
    use half::f16;

    use crate::rng::SplitMix64 as Rng;

    fn put_f16(b: &mut [u8], at: usize, v: f32) {
        b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
    }

    /// A random row: random quant and scale bytes, finite f16 `d` (and `dmin`) of either sign.
    fn row(rng: &mut Rng, bytes: usize, blocks: usize) -> Vec<u8> {
        let mut out: Vec<u8> = (0..blocks * bytes).map(|_| rng.next_u64() as u8).collect();
        for b in out.chunks_exact_mut(bytes) {
            if bytes == Q6_K_BYTES {
                put_f16(b, 208, rng.next_signed() * 0.05);
            } else if bytes == Q3_K_BYTES {
                put_f16(b, 108, rng.next_signed() * 0.05);
            } else {
                put_f16(b, 0, rng.next_signed() * 0.05);
                put_f16(b, 2, rng.next_signed() * 0.05);
            }
        }
        out
    }

    /// Activations: mostly moderate, some blocks with one large value, some all zero, some at
    /// the extremes (every q8 at ±127).
    fn acts(rng: &mut Rng, blocks: usize) -> Vec<BlockQ8K> {
        let mut x: Vec<f32> = (0..blocks * QK_K)
            .map(|_| rng.next_signed() * 3.0)
            .collect();
        for blk in x.chunks_exact_mut(QK_K) {
            match rng.next_u64() % 6 {
                0 => blk[(rng.next_u64() % 256) as usize] = 40.0,
                1 => blk.fill(0.0),
                2 => blk
                    .iter_mut()
                    .for_each(|v| *v = if *v < 0.0 { -1.0 } else { 1.0 }),
                _ => {}
            }
        }
        quantize_act_q8_k(&x)
    }

    type Kernel = unsafe fn(&[u8], &[BlockQ8K]) -> f32;
    type Kernel4 = unsafe fn(&[u8], [&[BlockQ8K]; 4]) -> [f32; 4];
    type Reference = fn(&[u8], &[BlockQ8K]) -> f32;

    #[test]
    fn k_quant_kernels_equal_the_scalar_reference_bit_for_bit() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2/FMA/F16C");
            return;
        }
        let cases: [(&str, usize, Kernel, Kernel4, Reference); 4] = [
            (
                "Q3_K",
                Q3_K_BYTES,
                vec_dot_q3_k_q8_k,
                vec_dot_q3_k_q8_k_x4,
                kquants::vec_dot_q3_k_q8_k,
            ),
            (
                "Q4_K",
                Q4_K_BYTES,
                vec_dot_q4_k_q8_k,
                vec_dot_q4_k_q8_k_x4,
                kquants::vec_dot_q4_k_q8_k,
            ),
            (
                "Q5_K",
                Q5_K_BYTES,
                vec_dot_q5_k_q8_k,
                vec_dot_q5_k_q8_k_x4,
                kquants::vec_dot_q5_k_q8_k,
            ),
            (
                "Q6_K",
                Q6_K_BYTES,
                vec_dot_q6_k_q8_k,
                vec_dot_q6_k_q8_k_x4,
                kquants::vec_dot_q6_k_q8_k,
            ),
        ];
        let mut rng = Rng::new(0x6b71);
        for (name, bytes, one, four, reference) in cases {
            for blocks in [1usize, 2, 3, 19] {
                for _ in 0..40 {
                    let w = row(&mut rng, bytes, blocks);
                    let a: Vec<Vec<BlockQ8K>> = (0..4).map(|_| acts(&mut rng, blocks)).collect();
                    // SAFETY: the features were just detected; the shapes match.
                    let got4 = unsafe { four(&w, std::array::from_fn(|t| &a[t][..])) };
                    for (t, a) in a.iter().enumerate() {
                        let want = reference(&w, a);
                        // SAFETY: as above.
                        let got = unsafe { one(&w, a) };
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{name} x {blocks}: {got} vs {want}"
                        );
                        assert_eq!(
                            got4[t].to_bits(),
                            want.to_bits(),
                            "{name} x {blocks}, row {t}"
                        );
                        // and through the dispatch the engine uses
                        let act = crate::quant::QuantizedAct::Q8_K(a.clone());
                        let ty = match name {
                            "Q3_K" => crate::quant::GgmlType::Q3_K,
                            "Q4_K" => crate::quant::GgmlType::Q4_K,
                            "Q5_K" => crate::quant::GgmlType::Q5_K,
                            _ => crate::quant::GgmlType::Q6_K,
                        };
                        let via = crate::quant::vec_dot(ty, &w, &act);
                        assert_eq!(via.to_bits(), want.to_bits(), "{name} via vec_dot");
                    }
                }
            }
        }
    }

    #[test]
    fn avx512_k_quant_kernels_equal_the_scalar_reference_bit_for_bit() {
        use crate::quant::x86_kquants512 as k512;
        if !k512::available() {
            eprintln!(
                "skipped: this CPU has no AVX-512 F/BW (the kernels run on the GPU machine's Xeon)"
            );
            return;
        }
        type Rows4 = unsafe fn(&[u8], usize, [&[BlockQ8K]; 4], [&mut [f32]; 4]);
        type Rows1 = unsafe fn(&[u8], usize, &[BlockQ8K], &mut [f32]);
        let cases: [(&str, usize, Kernel4, Rows4, Rows1, Reference); 4] = [
            (
                "Q3_K",
                Q3_K_BYTES,
                k512::vec_dot_q3_k_q8_k_x4,
                k512::rows_q3_k_q8_k_x4,
                k512::rows_q3_k_q8_k,
                kquants::vec_dot_q3_k_q8_k,
            ),
            (
                "Q4_K",
                Q4_K_BYTES,
                k512::vec_dot_q4_k_q8_k_x4,
                k512::rows_q4_k_q8_k_x4,
                k512::rows_q4_k_q8_k,
                kquants::vec_dot_q4_k_q8_k,
            ),
            (
                "Q5_K",
                Q5_K_BYTES,
                k512::vec_dot_q5_k_q8_k_x4,
                k512::rows_q5_k_q8_k_x4,
                k512::rows_q5_k_q8_k,
                kquants::vec_dot_q5_k_q8_k,
            ),
            (
                "Q6_K",
                Q6_K_BYTES,
                k512::vec_dot_q6_k_q8_k_x4,
                k512::rows_q6_k_q8_k_x4,
                k512::rows_q6_k_q8_k,
                kquants::vec_dot_q6_k_q8_k,
            ),
        ];
        let mut rng = Rng::new(0x5120);
        for (name, bytes, four, rows4, rows1, reference) in cases {
            for blocks in [1usize, 2, 3, 19] {
                // a few rows at once (the prompt path pairs the tokens once for all of them)
                let n_rows = 5;
                for _ in 0..10 {
                    let w: Vec<u8> = (0..n_rows)
                        .flat_map(|_| row(&mut rng, bytes, blocks))
                        .collect();
                    let a: Vec<Vec<BlockQ8K>> = (0..4).map(|_| acts(&mut rng, blocks)).collect();
                    let mut out = vec![vec![0f32; n_rows]; 4];
                    let [o0, o1, o2, o3] = &mut out[..] else {
                        unreachable!()
                    };
                    let rb = bytes * blocks;
                    // SAFETY: the features were just detected; the shapes match.
                    unsafe { rows4(&w, rb, std::array::from_fn(|t| &a[t][..]), [o0, o1, o2, o3]) };
                    // One token, two rows a step and the odd last row alone.
                    let mut one = vec![0f32; n_rows];
                    // SAFETY: as above.
                    unsafe { rows1(&w, rb, &a[0], &mut one) };
                    for (r, wr) in w.chunks_exact(rb).enumerate() {
                        let want = reference(wr, &a[0]).to_bits();
                        assert_eq!(
                            one[r].to_bits(),
                            want,
                            "{name} x {blocks}, one token, row {r}"
                        );
                    }
                    for (r, wr) in w.chunks_exact(rb).enumerate() {
                        // SAFETY: as above.
                        let got = unsafe { four(wr, std::array::from_fn(|t| &a[t][..])) };
                        for (t, a) in a.iter().enumerate() {
                            let want = reference(wr, a).to_bits();
                            assert_eq!(
                                got[t].to_bits(),
                                want,
                                "{name} x {blocks}, row {r}, token {t}"
                            );
                            assert_eq!(
                                out[t][r].to_bits(),
                                want,
                                "{name} x {blocks} rows, row {r}, token {t}"
                            );
                        }
                    }
                }
            }
        }
    }
}
