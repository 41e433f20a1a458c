//! Which tensor type each weight gets in a quant mix, following llama.cpp's
//! `llama_tensor_get_type` for dense llama/qwen2 models, so a synthetic file of a mix has the
//! tensor types (and so the bytes per layer) `llama-quantize` gives a real model of the same
//! shape. tests/synth.rs checks every mix against llama-quantize's output on four shapes
//! (tests/fixtures/quant-mixes/).

use crate::quant::GgmlType;

/// A weight matrix's role in the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    TokenEmbd,
    Output,
    AttnQ,
    AttnK,
    AttnV,
    /// A fused Q, K and V matrix (phi3's `attn_qkv`).
    AttnQkv,
    AttnOut,
    FfnGate,
    FfnUp,
    FfnDown,
}

/// The weight mixes `synth` writes: llama-quantize's file types of the same names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantMix {
    /// Every weight F32 (llama.cpp's `all F32`), for conformance references.
    F32,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3KM,
    Q4KM,
    Q5KM,
    Q6K,
    F16,
    BF16,
}

impl QuantMix {
    pub const ALL: [QuantMix; 13] = [
        QuantMix::F32,
        QuantMix::Q4_0,
        QuantMix::Q4_1,
        QuantMix::Q5_0,
        QuantMix::Q5_1,
        QuantMix::Q8_0,
        QuantMix::Q2K,
        QuantMix::Q3KM,
        QuantMix::Q4KM,
        QuantMix::Q5KM,
        QuantMix::Q6K,
        QuantMix::F16,
        QuantMix::BF16,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuantMix::F32 => "f32",
            QuantMix::Q4_0 => "q4_0",
            QuantMix::Q4_1 => "q4_1",
            QuantMix::Q5_0 => "q5_0",
            QuantMix::Q5_1 => "q5_1",
            QuantMix::Q8_0 => "q8_0",
            QuantMix::Q2K => "q2_k",
            QuantMix::Q3KM => "q3_k_m",
            QuantMix::Q4KM => "q4_k_m",
            QuantMix::Q5KM => "q5_k_m",
            QuantMix::Q6K => "q6_k",
            QuantMix::F16 => "f16",
            QuantMix::BF16 => "bf16",
        }
    }

    pub fn from_name(s: &str) -> Option<QuantMix> {
        QuantMix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
    }

    /// llama.cpp's `general.file_type` (`LLAMA_FTYPE_MOSTLY_*`).
    pub fn file_type(self) -> u32 {
        match self {
            QuantMix::F32 => 0,
            QuantMix::F16 => 1,
            QuantMix::Q4_0 => 2,
            QuantMix::Q4_1 => 3,
            QuantMix::Q8_0 => 7,
            QuantMix::Q5_0 => 8,
            QuantMix::Q5_1 => 9,
            QuantMix::Q2K => 10,
            QuantMix::Q3KM => 12,
            QuantMix::Q4KM => 15,
            QuantMix::Q5KM => 17,
            QuantMix::Q6K => 18,
            QuantMix::BF16 => 32,
        }
    }

    /// The type every weight starts from before the mix's per-role choices
    /// (`llama_ftype_get_default_type`).
    fn default_type(self) -> GgmlType {
        match self {
            QuantMix::F32 => GgmlType::F32,
            QuantMix::Q4_0 => GgmlType::Q4_0,
            QuantMix::Q4_1 => GgmlType::Q4_1,
            QuantMix::Q5_0 => GgmlType::Q5_0,
            QuantMix::Q5_1 => GgmlType::Q5_1,
            QuantMix::Q8_0 => GgmlType::Q8_0,
            QuantMix::Q2K => GgmlType::Q2_K,
            QuantMix::Q3KM => GgmlType::Q3_K,
            QuantMix::Q4KM => GgmlType::Q4_K,
            QuantMix::Q5KM => GgmlType::Q5_K,
            QuantMix::Q6K => GgmlType::Q6_K,
            QuantMix::F16 => GgmlType::F16,
            QuantMix::BF16 => GgmlType::BF16,
        }
    }
}

/// llama.cpp's choice of layers that get more bits in the `_M` mixes.
fn use_more_bits(layer: usize, n_layers: usize) -> bool {
    let (i, n) = (layer as i64, n_layers as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// Where a weight sits, as the type choice needs it.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub role: Role,
    pub layer: usize,
    pub n_layers: usize,
    /// Its row length (the first GGUF dimension).
    pub ncols: usize,
    /// The output head is the token embedding.
    pub tied: bool,
    /// Query heads per KV head.
    pub n_gqa: usize,
}

/// The type of the weight at `p` in `mix`: llama.cpp's `llama_tensor_get_type` for dense
/// llama/qwen2 models, then its fallback for rows a block does not divide.
pub fn weight_type(mix: QuantMix, p: Place) -> GgmlType {
    use GgmlType as T;
    let default = mix.default_type();
    if !default.is_quantized() {
        return default;
    }
    let head = p.role == Role::Output || (p.tied && p.role == Role::TokenEmbd);
    let more_bits = use_more_bits(p.layer, p.n_layers);
    let chosen = match (mix, p.role) {
        _ if head && !p.ncols.is_multiple_of(default.block_size()) => T::Q8_0,
        _ if head && default != T::Q8_0 => T::Q6_K,
        _ if head => default,
        (QuantMix::Q2K, Role::AttnV) if p.n_gqa >= 4 => T::Q4_K,
        (QuantMix::Q2K, Role::AttnV | Role::FfnDown | Role::AttnOut) => T::Q3_K,
        (QuantMix::Q3KM, Role::AttnV) if p.layer < 2 => T::Q5_K,
        (QuantMix::Q3KM, Role::FfnDown) if p.layer < p.n_layers / 16 => T::Q5_K,
        (QuantMix::Q3KM, Role::AttnV | Role::FfnDown | Role::AttnOut) => T::Q4_K,
        (QuantMix::Q4KM | QuantMix::Q5KM, Role::AttnV | Role::FfnDown) if more_bits => T::Q6_K,
        (QuantMix::Q3KM, Role::AttnQkv) => T::Q4_K,
        (QuantMix::Q4KM, Role::AttnQkv) => T::Q5_K,
        (QuantMix::Q5KM, Role::AttnQkv) => T::Q6_K,
        _ => default,
    };
    fallback(chosen, p.ncols)
}

/// llama.cpp's `tensor_type_fallback`: a type whose blocks do not divide the row gives way to
/// a 32-weight type of about as many bits, and F16 where even that does not divide it.
fn fallback(ty: GgmlType, ncols: usize) -> GgmlType {
    use GgmlType as T;
    if ncols.is_multiple_of(ty.block_size()) {
        return ty;
    }
    let smaller = match ty {
        T::Q2_K | T::Q3_K => T::Q4_0,
        T::Q4_K => T::Q5_0,
        T::Q5_K => T::Q5_1,
        T::Q6_K => T::Q8_0,
        t => t,
    };
    if ncols.is_multiple_of(smaller.block_size()) {
        smaller
    } else {
        T::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(role: Role, layer: usize, n_layers: usize, ncols: usize, tied: bool) -> Place {
        Place {
            role,
            layer,
            n_layers,
            ncols,
            tied,
            n_gqa: 7,
        }
    }

    #[test]
    fn q4_k_m_matches_llama_cpp_placement() {
        // 24 layers: n/8 = 3, 7n/8 = 21; more bits in 0,1,2, 21,22,23 and every third from 5
        let more: Vec<usize> = (0..24).filter(|&i| use_more_bits(i, 24)).collect();
        assert_eq!(more, [0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23]);
        let t = |role, layer, ncols, tied| {
            weight_type(QuantMix::Q4KM, place(role, layer, 24, ncols, tied))
        };
        assert_eq!(t(Role::AttnV, 0, 1536, false), GgmlType::Q6_K);
        assert_eq!(t(Role::AttnV, 3, 1536, false), GgmlType::Q4_K);
        assert_eq!(t(Role::FfnDown, 5, 8960, false), GgmlType::Q6_K);
        assert_eq!(t(Role::FfnDown, 5, 4000, false), GgmlType::Q8_0); // 4000 % 256 != 0
        assert_eq!(t(Role::FfnDown, 6, 4000, false), GgmlType::Q5_0);
        assert_eq!(t(Role::AttnQ, 5, 896, false), GgmlType::Q5_0); // 896 % 256 != 0
        assert_eq!(t(Role::TokenEmbd, 0, 1536, true), GgmlType::Q6_K);
        assert_eq!(t(Role::TokenEmbd, 0, 1536, false), GgmlType::Q4_K);
        assert_eq!(t(Role::TokenEmbd, 0, 896, true), GgmlType::Q8_0);
        assert_eq!(t(Role::Output, 0, 4096, false), GgmlType::Q6_K);
        // the conformance fixture made by llama-quantize: 2 layers, attn_v Q4_K then Q6_K
        let two = |layer| weight_type(QuantMix::Q4KM, place(Role::AttnV, layer, 2, 256, false));
        assert_eq!((two(0), two(1)), (GgmlType::Q4_K, GgmlType::Q6_K));
        let q4_0 = |role| weight_type(QuantMix::Q4_0, place(role, 0, 2, 4096, false));
        assert_eq!(q4_0(Role::Output), GgmlType::Q6_K);
        assert_eq!(q4_0(Role::FfnUp), GgmlType::Q4_0);
    }

    #[test]
    fn rows_no_block_divides_fall_back_to_f16() {
        assert_eq!(fallback(GgmlType::Q4_K, 1000), GgmlType::F16); // 1000 % 32 != 0
        assert_eq!(fallback(GgmlType::Q4_0, 1000), GgmlType::F16);
        assert_eq!(fallback(GgmlType::Q3_K, 896), GgmlType::Q4_0);
        assert_eq!(fallback(GgmlType::Q5_K, 896), GgmlType::Q5_1);
        assert_eq!(fallback(GgmlType::Q5_K, 1024), GgmlType::Q5_K);
    }

    #[test]
    fn every_mix_has_its_name_and_file_type() {
        for m in QuantMix::ALL {
            assert_eq!(QuantMix::from_name(m.name()), Some(m));
            assert_eq!(QuantMix::from_name(&m.name().to_uppercase()), Some(m));
        }
        let mut types: Vec<u32> = QuantMix::ALL.iter().map(|m| m.file_type()).collect();
        types.dedup();
        assert_eq!(types.len(), QuantMix::ALL.len());
    }
}
