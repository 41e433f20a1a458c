//! The `fast` numerics' product tasks (`matmul` hands them theirs): which matrices take a fast
//! kernel (`fast_rows`), the repacked Q4_0/Q4_1/Q5_1/Q8_0 groups against a prompt's or a token's
//! rows (`packed_task`, two groups at a time on AVX-512 VNNI), the k-quants unpacked per task
//! (`kquant_task`), and the activation forms those kernels take, made once per call
//! (`act_rows`). They reorder float sums; `matmul` keeps the reference's arithmetic.

use std::cell::RefCell;

use super::pool;
use super::repack::{Packed, Repacked};
use crate::model::weights::Mat;
use crate::quant::{vec_dot_rows, ActType, GgmlType, QuantizedAct};

/// The `n` tokens' Q8_0 rows (`q8`, where quantized) each block made into `A` by `f`, into
/// `rows`, when `wanted`; else none.
#[cfg(target_arch = "x86_64")]
pub(super) fn act_rows<'s, A: Send>(
    n: usize,
    q8: Option<&(ActType, Vec<QuantizedAct>)>,
    wanted: bool,
    rows: &'s mut Vec<Vec<A>>,
    f: fn(&crate::quant::blocks::BlockQ8_0) -> A,
) -> &'s [Vec<A>] {
    let (true, Some((_, q8))) = (wanted, q8) else {
        return &rows[..0];
    };
    rows.resize_with(n, Vec::new);
    let make = |t: usize, row: &mut Vec<A>| {
        let a = q8[t].q8_0().expect("quantized as Q8_0");
        row.clear();
        row.extend(a.iter().map(f));
    };
    if n == 1 {
        make(0, &mut rows[0]);
    } else {
        pool::par_chunks_mut(&mut rows[..n], 1, |t, row| make(t, &mut row[0]));
    }
    &rows[..n]
}

/// Rows a fast task's row count is a multiple of: two repacked groups where the Q4_0, Q4_1,
/// Q5_1 and Q8_0 kernels take them side by side (AVX-512 VNNI; Q5_0 is repacked as Q8_0), else one.
pub(super) fn group_rows(ty: GgmlType) -> usize {
    #[cfg(target_arch = "x86_64")]
    if matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_0 | GgmlType::Q5_0
    ) && crate::quant::x86::fast_rows_vnni::available()
    {
        return 16;
    }
    let _ = ty;
    8
}

/// Repacked groups two at a time on AVX-512 VNNI (`x86::fast_rows_vnni`) against every token,
/// eight at a time (then four, then one), taking the activations as `wide` gives them; an odd
/// last group on `rows8`, taking them as `act` does. `from(t, g)`: token t's results from the
/// task's group g on.
#[cfg(target_arch = "x86_64")]
fn pairs_vnni<'o, B: crate::quant::x86::fast_rows_vnni::Pairs>(
    blocks: &[B],
    per_row: usize,
    n: usize,
    (wide, act): (
        &impl Fn(usize) -> &'o [B::Wide],
        &impl Fn(usize) -> &'o [B::Act],
    ),
    from: &impl Fn(usize, usize) -> &'o mut [f32],
) {
    use crate::quant::x86::fast_rows::rows8;
    use crate::quant::x86::fast_rows_vnni::rows16;
    let groups = blocks.len() / per_row;
    let group = |g: usize| &blocks[g * per_row..(g + 1) * per_row];
    for g in (0..groups).step_by(2) {
        if g + 1 < groups {
            let (g0, g1) = (group(g), group(g + 1));
            let eights = n / 8 * 8;
            for t in (0..eights).step_by(8) {
                let a = std::array::from_fn(|i| wide(t + i));
                let outs = std::array::from_fn(|i| from(t + i, g));
                // SAFETY: the caller checked AVX-512 VNNI; both groups and every
                // activation row hold `per_row` blocks.
                unsafe { rows16::<B, 8>(g0, g1, a, outs) };
            }
            let fours = eights + (n - eights) / 4 * 4;
            for t in (eights..fours).step_by(4) {
                let a = std::array::from_fn(|i| wide(t + i));
                let outs = std::array::from_fn(|i| from(t + i, g));
                // SAFETY: as above.
                unsafe { rows16::<B, 4>(g0, g1, a, outs) };
            }
            for t in fours..n {
                // SAFETY: as above.
                unsafe { rows16::<B, 1>(g0, g1, [wide(t)], [from(t, g)]) };
            }
        } else {
            for t in 0..n {
                // SAFETY: AVX-512 VNNI implies AVX2, FMA and F16C (`fast_rows_vnni::available`).
                unsafe { rows8::<B, 1>(group(g), [act(t)], [from(t, g)]) };
            }
        }
    }
}

/// `m`'s rows repacked at load, where its `n`-token products under `fast` numerics take them.
pub(super) fn fast_rows<'r>(fast: Option<&'r Repacked>, m: &Mat, n: usize) -> Option<&'r Packed> {
    match fast?.get(m) {
        // Q8_0's products of one or two tokens, and Q5_0's of one (repacked as Q8_0 on AVX-512
        // VNNI), read the file's layout faster than the repacked one
        // (docs/measurements/cpu-engine.md).
        #[cfg(target_arch = "x86_64")]
        Some(Packed::Q8_0(_)) if n == 1 || (n == 2 && m.ty == GgmlType::Q8_0) => None,
        p => p,
    }
}

/// A task's Q4_0, Q4_1, Q5_1 or Q8_0 rows (`rows`: the task's file bytes, from row `r0`, a multiple
/// of eight) against every token under `fast` numerics, repacked at load (`how`): each group of
/// eight against the tokens `T` at a time (then four, then one; on AVX-512 VNNI two groups at a
/// time); rows past the matrix's last whole group take the exact one-token kernel. `acts` are the
/// tokens' Q8_0 rows (Q8_1 for Q4_1 and Q5_1, which take them as they are), `summed` the same with
/// their sums (for Q4_0), `biased` offset to unsigned bytes (for Q8_0 on AVX-512 VNNI).
#[cfg(target_arch = "x86_64")]
pub(super) fn packed_task<'o>(
    how: &Packed,
    (m, r0): (&Mat, usize),
    rows: &[u8],
    acts: &'o [QuantizedAct],
    (summed, biased): (
        &'o [Vec<crate::quant::x86::fast_rows::SummedBlock>],
        &'o [Vec<crate::quant::x86::fast_rows_vnni::BiasedBlock>],
    ),
    out_rows: &impl Fn(usize) -> &'o mut [f32],
) {
    use crate::quant::x86::fast_rows::{rows8, Interleaved};
    let rb = m.row_bytes();
    let (n, per_row, task_rows) = (acts.len(), rb / m.ty.block_bytes(), rows.len() / rb);
    let whole = (m.rows / 8 * 8).saturating_sub(r0).min(task_rows);
    // Token t's results for rows g * 8 .. g * 8 + 8 of the task.
    let eight = |t: usize, g: usize| out_rows(t).split_at_mut(g * 8).1.split_at_mut(8).0;
    /// The task's groups (of `blocks`), each against every token `T` at a time.
    fn groups<'o, B: Interleaved, const T: usize>(
        blocks: &[B],
        per_row: usize,
        n: usize,
        act: &impl Fn(usize) -> &'o [B::Act],
        eight: &impl Fn(usize, usize) -> &'o mut [f32],
    ) {
        for (g, group) in blocks.chunks_exact(per_row).enumerate() {
            let wide = n / T * T;
            for t in (0..wide).step_by(T) {
                let a = std::array::from_fn(|i| act(t + i));
                let outs = std::array::from_fn(|i| eight(t + i, g));
                // SAFETY: repacking needed AVX2, FMA and F16C (`Repacked::build`); `group`
                // holds as many blocks as every activation row.
                unsafe { rows8::<B, T>(group, a, outs) };
            }
            let fours = wide + (n - wide) / 4 * 4;
            for t in (wide..fours).step_by(4) {
                let a = std::array::from_fn(|i| act(t + i));
                let outs = std::array::from_fn(|i| eight(t + i, g));
                // SAFETY: as above.
                unsafe { rows8::<B, 4>(group, a, outs) };
            }
            for t in fours..n {
                // SAFETY: as above.
                unsafe { rows8::<B, 1>(group, [act(t)], [eight(t, g)]) };
            }
        }
    }
    let q8 = |t: usize| {
        acts[t]
            .q8_0()
            .expect("a Q4_0, Q5_0 or Q8_0 product's activations are Q8_0")
    };
    let q8_1 = |t: usize| {
        acts[t]
            .q8_1()
            .expect("a Q4_1 or Q5_1 product's activations are Q8_1")
    };
    let span = r0 / 8 * per_row..(r0 + whole) / 8 * per_row;
    let from = |t: usize, g: usize| out_rows(t).split_at_mut(g * 8).1;
    let vnni = crate::quant::x86::fast_rows_vnni::available();
    match how {
        Packed::Q4_0(b) => {
            let act = |t: usize| summed[t].as_slice();
            if vnni {
                pairs_vnni(&b[span], per_row, n, (&act, &act), &from);
            } else {
                groups::<_, 8>(&b[span], per_row, n, &act, &eight);
            }
        }
        Packed::Q4_1(b) => {
            if vnni {
                pairs_vnni(&b[span], per_row, n, (&q8_1, &q8_1), &from);
            } else {
                groups::<_, 8>(&b[span], per_row, n, &q8_1, &eight);
            }
        }
        // Repacked as its own only without AVX-512 VNNI (`Repacked::build`).
        Packed::Q5_0(b) => {
            let act = |t: usize| summed[t].as_slice();
            groups::<_, 8>(&b[span], per_row, n, &act, &eight);
        }
        Packed::Q5_1(b) => {
            if vnni {
                pairs_vnni(&b[span], per_row, n, (&q8_1, &q8_1), &from);
            } else {
                groups::<_, 8>(&b[span], per_row, n, &q8_1, &eight);
            }
        }
        Packed::Q8_0(b) => {
            if vnni {
                let wide = |t: usize| biased[t].as_slice();
                pairs_vnni(&b[span], per_row, n, (&wide, &q8), &from);
            } else {
                groups::<_, 8>(&b[span], per_row, n, &q8, &eight);
            }
        }
    }
    if whole < task_rows {
        for (t, act) in acts.iter().enumerate() {
            let out = out_rows(t).split_at_mut(whole).1;
            vec_dot_rows(m.ty, &rows[whole * rb..], rb, act, out);
        }
    }
}

/// Whether a prompt's `ty` product under `fast` numerics takes `kquant_task`.
#[cfg(target_arch = "x86_64")]
pub(super) fn kquant_unpacks(ty: GgmlType) -> bool {
    use crate::quant::x86::{fast_kquants, kquants_vnni};
    fast_kquants::unpacks(ty) || (kquants_vnni::available() && kquants_vnni::unpacks(ty))
}

/// Whether `kquant_task` takes `ty` in lane order (`x86::kquants_vnni`, AVX-512 VNNI), its
/// tokens' rows made by `lane_rows`.
#[cfg(target_arch = "x86_64")]
pub(super) fn kquant_lanes(ty: GgmlType) -> bool {
    use crate::quant::x86::kquants_vnni;
    kquants_vnni::available() && kquants_vnni::unpacks(ty)
}

/// The `n` tokens' Q8_K rows (`q8k`) in lane order for `x86::kquants_vnni`, into `rows`, a
/// token a task.
#[cfg(target_arch = "x86_64")]
pub(super) fn lane_rows<'s>(
    n: usize,
    q8k: &[QuantizedAct],
    rows: &'s mut Vec<Vec<crate::quant::x86::kquants_vnni::LaneAct>>,
) -> &'s [Vec<crate::quant::x86::kquants_vnni::LaneAct>] {
    use crate::quant::x86::kquants_vnni::lane_act;
    rows.resize_with(n, Vec::new);
    pool::par_chunks_mut(&mut rows[..n], 1, |t, row| {
        let a = q8k[t].q8_k().expect("quantized as Q8_K");
        lane_act(a, &mut row[0]);
    });
    &rows[..n]
}

/// A prompt task's k-quant rows (`per_row` blocks each) against every token under `fast`
/// numerics, unpacked once into a buffer each pool thread keeps: on AVX-512 VNNI every
/// k-quant in lane order (`x86::kquants_vnni`, the tokens' rows `lanes`), else Q4_K, Q5_K and
/// Q6_K for `x86::fast_kquants`, taken against the tokens eight at a time on AVX-512, four at
/// a time, a last few one by one.
#[cfg(target_arch = "x86_64")]
pub(super) fn kquant_task<'o>(
    ty: GgmlType,
    rows: &[u8],
    per_row: usize,
    (acts, lanes): (
        &[QuantizedAct],
        &[Vec<crate::quant::x86::kquants_vnni::LaneAct>],
    ),
    out_rows: &impl Fn(usize) -> &'o mut [f32],
) {
    use crate::quant::x86::fast_kquants::{rows as dots, rows512, unpack, KBlock};
    use crate::quant::x86::kquants_vnni::{self, LaneBlock};

    thread_local! {
        static BLOCKS: RefCell<Vec<KBlock>> = const { RefCell::new(Vec::new()) };
        static LANES: RefCell<Vec<LaneBlock>> = const { RefCell::new(Vec::new()) };
    }
    let n = acts.len();
    if kquant_lanes(ty) {
        debug_assert_eq!(lanes.len(), n);
        return LANES.with_borrow_mut(|blocks| {
            let act = |t: usize| lanes[t].as_slice();
            // SAFETY: AVX-512 VNNI (with AVX2, FMA and F16C) was detected (`kquant_lanes`);
            // every token's row has `per_row` blocks and every output one result per row.
            unsafe {
                kquants_vnni::unpack(ty, rows, blocks);
                kquants_vnni::rows(blocks, per_row, n, &act, out_rows);
            }
        });
    }
    let act = |t: usize| {
        acts[t]
            .q8_k()
            .expect("a k-quant product's activations are Q8_K")
    };
    BLOCKS.with_borrow_mut(|blocks| {
        // SAFETY: `Repacked::kernels` says AVX2, FMA and F16C are there; every token's row
        // has `per_row` blocks and every output one result per task row.
        unsafe {
            unpack(ty, rows, blocks);
            let eights = if crate::quant::x86_kquants512::available() {
                n / 8 * 8
            } else {
                0
            };
            for t in (0..eights).step_by(8) {
                let a = std::array::from_fn(|p| [act(t + 2 * p), act(t + 2 * p + 1)]);
                let outs = std::array::from_fn(|p| [out_rows(t + 2 * p), out_rows(t + 2 * p + 1)]);
                // AVX-512 F and BW were just detected.
                rows512::<4>(blocks, per_row, a, outs);
            }
            let fours = eights + (n - eights) / 4 * 4;
            for t in (eights..fours).step_by(4) {
                let a = std::array::from_fn(|i| act(t + i));
                let outs = std::array::from_fn(|i| out_rows(t + i));
                dots::<4>(blocks, per_row, a, outs);
            }
            for t in fours..n {
                dots::<1>(blocks, per_row, [act(t)], [out_rows(t)]);
            }
        }
    });
}
