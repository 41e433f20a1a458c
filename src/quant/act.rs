//! Activation quantization and the llama.cpp-compatible dot product.
//!
//! llama.cpp does not multiply quantized weights by f32 activations: each weight type has a
//! "vec_dot type" into which the activation vector is quantized once per product (Q8_0 for
//! Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the k-quants, F16/BF16 for those float types),
//! then the dot runs block by block on integers. Doing the same keeps our logits within the
//! noise of llama.cpp's, which exact greedy-token agreement on real models needs.

use super::{float, kquants, legacy, GgmlType};

/// The format an activation vector is quantized into for a given weight type.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q8_1,
    Q8_K,
}

impl ActType {
    /// The activation format llama.cpp pairs with weights of type `ty`.
    pub fn for_weights(ty: GgmlType) -> ActType {
        match ty {
            GgmlType::F32 => ActType::F32,
            GgmlType::F16 => ActType::F16,
            GgmlType::BF16 => ActType::BF16,
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => ActType::Q8_0,
            GgmlType::Q4_1 | GgmlType::Q5_1 => ActType::Q8_1,
            GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
                ActType::Q8_K
            }
        }
    }
}

/// An activation vector in a vec-dot format. Float variants hold the (rounded) values as f32.
#[allow(non_camel_case_types)]
#[derive(Clone, Debug)]
pub enum QuantizedAct {
    F32(Vec<f32>),
    F16(Vec<f32>),
    BF16(Vec<f32>),
    Q8_0(Vec<legacy::BlockQ8_0>),
    Q8_1(Vec<legacy::BlockQ8_1>),
    Q8_K(Vec<kquants::BlockQ8K>),
}

impl QuantizedAct {
    /// The format of this activation.
    pub fn act_type(&self) -> ActType {
        match self {
            QuantizedAct::F32(_) => ActType::F32,
            QuantizedAct::F16(_) => ActType::F16,
            QuantizedAct::BF16(_) => ActType::BF16,
            QuantizedAct::Q8_0(_) => ActType::Q8_0,
            QuantizedAct::Q8_1(_) => ActType::Q8_1,
            QuantizedAct::Q8_K(_) => ActType::Q8_K,
        }
    }

    /// The Q8_0 blocks, where this is Q8_0.
    pub fn q8_0(&self) -> Option<&[legacy::BlockQ8_0]> {
        match self {
            QuantizedAct::Q8_0(a) => Some(a),
            _ => None,
        }
    }

    /// The Q8_1 blocks, where this is Q8_1.
    pub fn q8_1(&self) -> Option<&[legacy::BlockQ8_1]> {
        match self {
            QuantizedAct::Q8_1(a) => Some(a),
            _ => None,
        }
    }

    /// The Q8_K blocks, where this is Q8_K.
    pub fn q8_k(&self) -> Option<&[kquants::BlockQ8K]> {
        match self {
            QuantizedAct::Q8_K(a) => Some(a),
            _ => None,
        }
    }
}

/// Quantize activations `x` into `kind`. `x.len()` must be a multiple of the format's block
/// (32 for Q8_0/Q8_1, 256 for Q8_K).
pub fn quantize_act(kind: ActType, x: &[f32]) -> QuantizedAct {
    let mut out = QuantizedAct::F32(Vec::new());
    quantize_act_into(kind, x, &mut out);
    out
}

/// `quantize_act` into `out`, reusing its buffer when it already holds `kind` (a decode step
/// quantizes every product's input: with the engine's buffers kept, the AVX2 quantizers
/// allocate nothing after the first token).
pub fn quantize_act_into(kind: ActType, x: &[f32], out: &mut QuantizedAct) {
    if out.act_type() != kind {
        *out = match kind {
            ActType::F32 => QuantizedAct::F32(Vec::new()),
            ActType::F16 => QuantizedAct::F16(Vec::new()),
            ActType::BF16 => QuantizedAct::BF16(Vec::new()),
            ActType::Q8_0 => QuantizedAct::Q8_0(Vec::new()),
            ActType::Q8_1 => QuantizedAct::Q8_1(Vec::new()),
            ActType::Q8_K => QuantizedAct::Q8_K(Vec::new()),
        };
    }
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        // SAFETY: AVX2, FMA and F16C were detected; the results are the references' bits.
        unsafe {
            match out {
                QuantizedAct::Q8_0(v) => return super::x86::act::quantize_q8_0(x, v),
                QuantizedAct::Q8_1(v) => return super::x86::act::quantize_q8_1(x, v),
                QuantizedAct::Q8_K(v) => return super::x86::act::quantize_q8_k(x, v),
                QuantizedAct::F16(v) => return super::x86::float::round_f16_into(x, v),
                _ => {}
            }
        }
    }
    match out {
        QuantizedAct::F32(v) => {
            v.clear();
            v.extend_from_slice(x);
        }
        QuantizedAct::F16(v) => float::round_f16_into(x, v),
        QuantizedAct::BF16(v) => float::round_bf16_into(x, v),
        QuantizedAct::Q8_0(v) => *v = legacy::quantize_act_q8_0(x),
        QuantizedAct::Q8_1(v) => *v = legacy::quantize_act_q8_1(x),
        QuantizedAct::Q8_K(v) => *v = kquants::quantize_act_q8_k(x),
    }
}

/// Whether `vec_dot_x4` has a four-row kernel for `ty` weights on this CPU (asked once per
/// matrix, not per row).
pub fn has_x4(ty: GgmlType) -> bool {
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        return matches!(
            ty,
            GgmlType::F32
                | GgmlType::Q4_1
                | GgmlType::Q5_0
                | GgmlType::Q8_0
                | GgmlType::Q2_K
                | GgmlType::Q3_K
                | GgmlType::Q4_K
                | GgmlType::Q5_K
                | GgmlType::Q6_K
        );
    }
    false
}

/// A prompt's k-quant kernel for four tokens against one row, Q4_K/Q5_K/Q6_K in that order.
#[cfg(target_arch = "x86_64")]
type KDot4 = unsafe fn(&[u8], [&[super::kquants::BlockQ8K]; 4]) -> [f32; 4];

/// The same over a task's rows (`out[t][r]`).
#[cfg(target_arch = "x86_64")]
type KRows4 = unsafe fn(&[u8], usize, [&[super::kquants::BlockQ8K]; 4], [&mut [f32]; 4]);

/// The k-quant four-token kernels this CPU runs: AVX-512 (`x86_kquants512`) where it has
/// AVX-512 F/BW, else AVX2 (`x86_kquants`; the caller has checked `x86::available()`). Both
/// give the same bits.
#[cfg(target_arch = "x86_64")]
fn kquant_x4() -> ([KDot4; 3], [KRows4; 3]) {
    use super::x86::kquants as k;
    use super::x86::kquants512 as k512;
    if k512::available() {
        (
            [
                k512::vec_dot_q4_k_q8_k_x4,
                k512::vec_dot_q5_k_q8_k_x4,
                k512::vec_dot_q6_k_q8_k_x4,
            ],
            [
                k512::rows_q4_k_q8_k_x4,
                k512::rows_q5_k_q8_k_x4,
                k512::rows_q6_k_q8_k_x4,
            ],
        )
    } else {
        (
            [
                k::vec_dot_q4_k_q8_k_x4,
                k::vec_dot_q5_k_q8_k_x4,
                k::vec_dot_q6_k_q8_k_x4,
            ],
            [
                k::rows_q4_k_q8_k_x4,
                k::rows_q5_k_q8_k_x4,
                k::rows_q6_k_q8_k_x4,
            ],
        )
    }
}

/// Q3_K's four-token kernels this CPU runs, as `kquant_x4` picks the others'.
#[cfg(target_arch = "x86_64")]
fn q3_k_x4() -> (KDot4, KRows4) {
    use super::x86::kquants as k;
    use super::x86::kquants512 as k512;
    if k512::available() {
        (k512::vec_dot_q3_k_q8_k_x4, k512::rows_q3_k_q8_k_x4)
    } else {
        (k::vec_dot_q3_k_q8_k_x4, k::rows_q3_k_q8_k_x4)
    }
}

/// `vec_dot` of one weight row with four activation rows at once, where a SIMD kernel takes
/// four (a prompt's products unpack each weight block once for them); every result is
/// bit-identical to `vec_dot`'s. None where no such kernel exists: call `vec_dot` per row.
#[inline(always)]
pub fn vec_dot_x4(ty: GgmlType, w: &[u8], acts: [&QuantizedAct; 4]) -> Option<[f32; 4]> {
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() && ty == GgmlType::F32 {
        // The F32 kernel exists for a task's rows only: one row is such a task.
        let mut out = [[0f32; 1]; 4];
        vec_dot_rows_x4(ty, w, w.len(), acts, out.each_mut().map(|o| &mut o[..]));
        return Some(out.map(|o| o[0]));
    }
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        use QuantizedAct::{Q8_0, Q8_1, Q8_K};
        let (k, _) = kquant_x4();
        let (q3, _) = q3_k_x4();
        // SAFETY: AVX2 and FMA were just detected (and the k-quant kernels' own features by
        // `kquant_x4`).
        unsafe {
            return match (ty, acts) {
                (GgmlType::Q2_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    Some(super::x86::q2k::vec_dot_q2_k_q8_k_x4(w, [a, b, c, d]))
                }
                (GgmlType::Q3_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => Some(q3(w, [a, b, c, d])),
                (GgmlType::Q4_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    Some(k[0](w, [a, b, c, d]))
                }
                (GgmlType::Q5_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    Some(k[1](w, [a, b, c, d]))
                }
                (GgmlType::Q6_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    Some(k[2](w, [a, b, c, d]))
                }
                (GgmlType::Q4_1, [Q8_1(a), Q8_1(b), Q8_1(c), Q8_1(d)]) => {
                    Some(super::x86::vec_dot_q4_1_q8_1_x4(w, [a, b, c, d]))
                }
                (GgmlType::Q5_0, [Q8_0(a), Q8_0(b), Q8_0(c), Q8_0(d)]) => {
                    Some(super::x86::vec_dot_q5_0_q8_0_x4(w, [a, b, c, d]))
                }
                (GgmlType::Q8_0, [Q8_0(a), Q8_0(b), Q8_0(c), Q8_0(d)]) => {
                    Some(super::x86::vec_dot_q8_0_q8_0_x4(w, [a, b, c, d]))
                }
                _ => None,
            };
        }
    }
    #[allow(unreachable_code)]
    None
}

/// `out[r] = vec_dot(ty, row r, act)` for the rows of `rows` (`row_bytes` each), bit for bit;
/// the type dispatch and feature check happen once, and on x86 the whole loop runs in one
/// kernel function.
pub fn vec_dot_rows(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    act: &QuantizedAct,
    out: &mut [f32],
) {
    debug_assert_eq!(rows.len(), out.len() * row_bytes);
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        use super::x86 as l;
        use super::x86::kquants as k;
        use QuantizedAct::{Q8_0, Q8_1, Q8_K};
        // The k-quants' one-token rows two at a time on AVX-512 (`x86_kquants512`), the same
        // bits as the AVX2 kernels below.
        if super::x86::kquants512::available() {
            use super::x86::kquants512 as k512;
            // SAFETY: AVX-512 F/BW (with AVX2, FMA and F16C) were just detected.
            unsafe {
                match (ty, act) {
                    (GgmlType::Q3_K, Q8_K(a)) => {
                        return k512::rows_q3_k_q8_k(rows, row_bytes, a, out)
                    }
                    (GgmlType::Q4_K, Q8_K(a)) => {
                        return k512::rows_q4_k_q8_k(rows, row_bytes, a, out)
                    }
                    (GgmlType::Q5_K, Q8_K(a)) => {
                        return k512::rows_q5_k_q8_k(rows, row_bytes, a, out)
                    }
                    (GgmlType::Q6_K, Q8_K(a)) => {
                        return k512::rows_q6_k_q8_k(rows, row_bytes, a, out)
                    }
                    _ => {}
                }
            }
        }
        // SAFETY: AVX2, FMA and F16C were just detected.
        unsafe {
            match (ty, act) {
                (GgmlType::Q4_0, Q8_0(a)) => return l::rows_q4_0_q8_0(rows, row_bytes, a, out),
                (GgmlType::Q5_0, Q8_0(a)) => return l::rows_q5_0_q8_0(rows, row_bytes, a, out),
                (GgmlType::Q8_0, Q8_0(a)) => return l::rows_q8_0_q8_0(rows, row_bytes, a, out),
                (GgmlType::F32, QuantizedAct::F32(x)) => {
                    return l::float::rows_f32(rows, row_bytes, x, out)
                }
                (GgmlType::F16, QuantizedAct::F16(x)) => {
                    return l::float::rows_f16(rows, row_bytes, x, out)
                }
                (GgmlType::BF16, QuantizedAct::BF16(x)) => {
                    return l::float::rows_bf16(rows, row_bytes, x, out)
                }
                (GgmlType::Q4_1, Q8_1(a)) => return l::rows_q4_1_q8_1(rows, row_bytes, a, out),
                (GgmlType::Q5_1, Q8_1(a)) => return l::rows_q5_1_q8_1(rows, row_bytes, a, out),
                (GgmlType::Q2_K, Q8_K(a)) => {
                    return super::x86::q2k::rows_q2_k_q8_k(rows, row_bytes, a, out)
                }
                (GgmlType::Q3_K, Q8_K(a)) => return k::rows_q3_k_q8_k(rows, row_bytes, a, out),
                (GgmlType::Q4_K, Q8_K(a)) => return k::rows_q4_k_q8_k(rows, row_bytes, a, out),
                (GgmlType::Q5_K, Q8_K(a)) => return k::rows_q5_k_q8_k(rows, row_bytes, a, out),
                (GgmlType::Q6_K, Q8_K(a)) => return k::rows_q6_k_q8_k(rows, row_bytes, a, out),
                _ => {}
            }
        }
    }
    for (r, o) in rows.chunks_exact(row_bytes).zip(out) {
        *o = vec_dot(ty, r, act);
    }
}

/// `out[t][r] = vec_dot(ty, row r, acts[t])` for the rows of `rows` and four activation rows,
/// through the four-row kernels (each weight block unpacked once for the four), bit for bit.
/// Only for types where `has_x4` holds; panics otherwise.
pub fn vec_dot_rows_x4(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    acts: [&QuantizedAct; 4],
    out: [&mut [f32]; 4],
) {
    out.iter()
        .for_each(|o| debug_assert_eq!(rows.len(), o.len() * row_bytes));
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        use super::x86 as l;
        use QuantizedAct::{F32, Q8_0, Q8_1, Q8_K};
        let rb = row_bytes;
        let (_, k) = kquant_x4();
        let (_, q3) = q3_k_x4();
        // SAFETY: AVX2, FMA and F16C were just detected (and the k-quant kernels' own
        // features by `kquant_x4`).
        unsafe {
            match (ty, acts) {
                (GgmlType::F32, [F32(a), F32(b), F32(c), F32(d)]) => {
                    return l::float::rows_f32_x4(rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q4_1, [Q8_1(a), Q8_1(b), Q8_1(c), Q8_1(d)]) => {
                    return l::rows_q4_1_q8_1_x4(rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q5_0, [Q8_0(a), Q8_0(b), Q8_0(c), Q8_0(d)]) => {
                    return l::rows_q5_0_q8_0_x4(rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q8_0, [Q8_0(a), Q8_0(b), Q8_0(c), Q8_0(d)]) => {
                    return l::rows_q8_0_q8_0_x4(rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q2_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    return l::q2k::rows_q2_k_q8_k_x4(rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q3_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    return q3(rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q4_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    return k[0](rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q5_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    return k[1](rows, rb, [a, b, c, d], out)
                }
                (GgmlType::Q6_K, [Q8_K(a), Q8_K(b), Q8_K(c), Q8_K(d)]) => {
                    return k[2](rows, rb, [a, b, c, d], out)
                }
                _ => {}
            }
        }
    }
    panic!("no four-row kernel for {ty} weights on this CPU");
}

/// Dot product of one weight row (`ty` blocks in `w`) with an activation already quantized
/// into `ActType::for_weights(ty)`. Panics if the activation format does not match.
#[inline(always)]
pub fn vec_dot(ty: GgmlType, w: &[u8], act: &QuantizedAct) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::x86::available() {
        // SAFETY: AVX2 and FMA were just detected.
        unsafe {
            match (ty, act) {
                (GgmlType::Q4_0, QuantizedAct::Q8_0(a)) => {
                    return super::x86::vec_dot_q4_0_q8_0(w, a)
                }
                (GgmlType::Q5_0, QuantizedAct::Q8_0(a)) => {
                    return super::x86::vec_dot_q5_0_q8_0(w, a)
                }
                (GgmlType::Q8_0, QuantizedAct::Q8_0(a)) => {
                    return super::x86::vec_dot_q8_0_q8_0(w, a)
                }
                (GgmlType::Q4_1, QuantizedAct::Q8_1(a)) => {
                    return super::x86::vec_dot_q4_1_q8_1(w, a)
                }
                (GgmlType::Q5_1, QuantizedAct::Q8_1(a)) => {
                    return super::x86::vec_dot_q5_1_q8_1(w, a)
                }
                (GgmlType::Q2_K, QuantizedAct::Q8_K(a)) => {
                    return super::x86::q2k::vec_dot_q2_k_q8_k(w, a)
                }
                (GgmlType::Q3_K, QuantizedAct::Q8_K(a)) => {
                    return super::x86::kquants::vec_dot_q3_k_q8_k(w, a)
                }
                (GgmlType::Q4_K, QuantizedAct::Q8_K(a)) => {
                    return super::x86::kquants::vec_dot_q4_k_q8_k(w, a)
                }
                (GgmlType::Q5_K, QuantizedAct::Q8_K(a)) => {
                    return super::x86::kquants::vec_dot_q5_k_q8_k(w, a)
                }
                (GgmlType::Q6_K, QuantizedAct::Q8_K(a)) => {
                    return super::x86::kquants::vec_dot_q6_k_q8_k(w, a)
                }
                (GgmlType::F32, QuantizedAct::F32(x)) => {
                    return super::x86::float::dot_f32_row(w, x)
                }
                (GgmlType::F16, QuantizedAct::F16(x)) => {
                    return super::x86::float::dot_f16_row(w, x)
                }
                (GgmlType::BF16, QuantizedAct::BF16(x)) => {
                    return super::x86::float::dot_bf16_row(w, x)
                }
                _ => {}
            }
        }
    }
    match (ty, act) {
        (GgmlType::F32, QuantizedAct::F32(x)) => float::dot_f32_row(w, x),
        (GgmlType::F16, QuantizedAct::F16(x)) => float::dot_f16_row(w, x),
        (GgmlType::BF16, QuantizedAct::BF16(x)) => float::dot_bf16_row(w, x),
        (GgmlType::Q4_0, QuantizedAct::Q8_0(a)) => legacy::vec_dot_q4_0_q8_0(w, a),
        (GgmlType::Q5_0, QuantizedAct::Q8_0(a)) => legacy::vec_dot_q5_0_q8_0(w, a),
        (GgmlType::Q8_0, QuantizedAct::Q8_0(a)) => legacy::vec_dot_q8_0_q8_0(w, a),
        (GgmlType::Q4_1, QuantizedAct::Q8_1(a)) => legacy::vec_dot_q4_1_q8_1(w, a),
        (GgmlType::Q5_1, QuantizedAct::Q8_1(a)) => legacy::vec_dot_q5_1_q8_1(w, a),
        (GgmlType::Q2_K, QuantizedAct::Q8_K(a)) => kquants::vec_dot_q2_k_q8_k(w, a),
        (GgmlType::Q3_K, QuantizedAct::Q8_K(a)) => kquants::vec_dot_q3_k_q8_k(w, a),
        (GgmlType::Q4_K, QuantizedAct::Q8_K(a)) => kquants::vec_dot_q4_k_q8_k(w, a),
        (GgmlType::Q5_K, QuantizedAct::Q8_K(a)) => kquants::vec_dot_q5_k_q8_k(w, a),
        (GgmlType::Q6_K, QuantizedAct::Q8_K(a)) => kquants::vec_dot_q6_k_q8_k(w, a),
        (ty, act) => panic!(
            "{ty} weights need {:?} activations, got {:?}",
            ActType::for_weights(ty),
            act.act_type()
        ),
    }
}
