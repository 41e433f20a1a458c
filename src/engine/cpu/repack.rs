//! Weights repacked at load for the CPU's `fast` numerics: every Q4_0, Q4_1, Q5_1, Q8_0 and Q5_0
//! matrix's rows in groups of eight (`quant::x86::fast_rows`; Q5_0 as Q8_0, one signed byte a
//! level, where the CPU has AVX-512 VNNI, whose kernels take Q8_0's groups in pairs, else in its
//! own layout), so decode and prompt products take eight rows per broadcast activation word
//! without reordering bytes on every call. Built once per engine, on the pool; the file's own
//! bytes stay mapped for everything else (the embedding lookup, the rows past a matrix's last
//! whole group, the exact kernels). The output matrix is repacked too: a batch step takes it for
//! every sequence (a prompt, only for its last token), and against the file's layout it was the
//! largest share of such a step; its copy is the largest of a small model's (the report shows
//! the bytes and seconds).

use std::collections::HashMap;
use std::time::Instant;

use super::huge::HugeSlice;
use super::pool;
use crate::model::weights::{Mat, Weights};
use crate::quant::GgmlType;

/// One matrix's repacked rows: whole groups of eight, group g's block i at `g * per_row + i`.
pub enum Packed {
    #[cfg(target_arch = "x86_64")]
    Q4_0(HugeSlice<crate::quant::x86::fast_rows::Q4_0x8>),
    #[cfg(target_arch = "x86_64")]
    Q4_1(HugeSlice<crate::quant::x86::fast_rows::Q4_1x8>),
    #[cfg(target_arch = "x86_64")]
    Q5_0(HugeSlice<crate::quant::x86::fast_rows::Q5_0x8>),
    #[cfg(target_arch = "x86_64")]
    Q5_1(HugeSlice<crate::quant::x86::fast_rows::Q5_1x8>),
    #[cfg(target_arch = "x86_64")]
    Q8_0(HugeSlice<crate::quant::x86::fast_rows::Q8_0x8>),
}

#[cfg(target_arch = "x86_64")]
impl Packed {
    /// Bytes the copy holds.
    fn bytes(&self) -> usize {
        match self {
            Packed::Q4_0(b) => std::mem::size_of_val(&b[..]),
            Packed::Q4_1(b) => std::mem::size_of_val(&b[..]),
            Packed::Q5_0(b) => std::mem::size_of_val(&b[..]),
            Packed::Q5_1(b) => std::mem::size_of_val(&b[..]),
            Packed::Q8_0(b) => std::mem::size_of_val(&b[..]),
        }
    }
}

/// Every repacked matrix of a model, by its offset in the file, with what building them cost.
#[derive(Default)]
pub struct Repacked {
    mats: HashMap<usize, Packed>,
    /// Bytes held by the repacked copies.
    pub bytes: usize,
    /// Wall time the repacking took, seconds.
    pub seconds: f64,
    /// Whether this CPU runs the fast kernels (AVX2, FMA and F16C).
    pub kernels: bool,
}

impl Repacked {
    /// The model's Q4_0, Q4_1, Q5_1, Q8_0 and Q5_0 matrices repacked (none where the CPU lacks
    /// AVX2, FMA and F16C, or on other architectures).
    pub fn build(w: &Weights) -> Repacked {
        let t0 = Instant::now();
        let mut out = Repacked::default();
        #[cfg(target_arch = "x86_64")]
        if crate::quant::x86::available() {
            use crate::quant::x86::fast_rows::{
                Interleaved, Q4_0x8, Q4_1x8, Q5_0x8, Q5_1x8, Q8_0x8,
            };
            out.kernels = true;
            /// `m`'s whole groups repacked on the pool, a group per piece.
            fn groups<B: Interleaved>(w: &Weights, m: &Mat) -> Option<HugeSlice<B>> {
                let (rb, per_row) = (m.row_bytes(), m.row_bytes() / B::TYPE.block_bytes());
                let rows = w.bytes(m);
                let mut blocks = HugeSlice::new(m.rows / 8 * per_row).ok()?;
                pool::par_chunks_mut(&mut blocks, per_row * 16, |p, chunk| {
                    for (k, b) in chunk.iter_mut().enumerate() {
                        let at = p * per_row * 16 + k;
                        *b = B::repack(rows, rb, at / per_row, at % per_row);
                    }
                });
                Some(blocks)
            }
            /// A Q5_0 matrix's whole groups as Q8_0 ones (`fast_rows::q5_0_as_q8_0`), a group
            /// per piece.
            fn q5_0_groups(w: &Weights, m: &Mat) -> Option<HugeSlice<Q8_0x8>> {
                use crate::quant::x86::fast_rows::q5_0_as_q8_0;
                let (rb, per_row) = (m.row_bytes(), m.row_bytes() / 22);
                let rows = w.bytes(m);
                let mut blocks = HugeSlice::new(m.rows / 8 * per_row).ok()?;
                pool::par_chunks_mut(&mut blocks, per_row, |g, group| {
                    let q8: Vec<u8> = rows[8 * g * rb..(8 * g + 8) * rb]
                        .chunks_exact(22)
                        .flat_map(q5_0_as_q8_0)
                        .collect();
                    for (i, b) in group.iter_mut().enumerate() {
                        *b = Q8_0x8::repack(&q8, per_row * 34, 0, i);
                    }
                });
                Some(blocks)
            }
            let mut mats: Vec<&Mat> = vec![&w.output];
            for l in &w.layers {
                mats.extend([&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]);
            }
            for m in mats {
                if m.rows < 8 || out.mats.contains_key(&m.offset()) {
                    continue;
                }
                let packed = match m.ty {
                    GgmlType::Q4_0 => groups::<Q4_0x8>(w, m).map(Packed::Q4_0),
                    GgmlType::Q4_1 => groups::<Q4_1x8>(w, m).map(Packed::Q4_1),
                    GgmlType::Q5_1 => groups::<Q5_1x8>(w, m).map(Packed::Q5_1),
                    GgmlType::Q8_0 => groups::<Q8_0x8>(w, m).map(Packed::Q8_0),
                    // Without AVX-512 VNNI in its own layout: the AVX2 kernels take a Q5_0
                    // group with less work than a Q8_0 one, and stream two thirds the bytes.
                    GgmlType::Q5_0 if !crate::quant::x86::fast_rows_vnni::available() => {
                        groups::<Q5_0x8>(w, m).map(Packed::Q5_0)
                    }
                    GgmlType::Q5_0 => q5_0_groups(w, m).map(Packed::Q8_0),
                    _ => continue,
                };
                // Without the memory for a copy, the matrix keeps its file layout's kernels.
                let Some(packed) = packed else {
                    continue;
                };
                out.bytes += packed.bytes();
                out.mats.insert(m.offset(), packed);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (w, GgmlType::F32);
        out.seconds = t0.elapsed().as_secs_f64();
        out
    }

    /// `m`'s repacked rows, if it has them.
    pub fn get(&self, m: &Mat) -> Option<&Packed> {
        self.mats.get(&m.offset())
    }
}
