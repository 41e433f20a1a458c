//! Which tensor type each weight gets in a quant mix, following llama.cpp's
//! `llama_tensor_get_type` for the mixes `synth` offers, so a synthetic Q4_K_M file has the
//! same bytes per layer as a real one of the same shape:
//!
//! - `q4_k_m`: Q4_K, with Q6_K for `attn_v` and `ffn_down` in the layers `use_more_bits`
//!   picks, and Q6_K for the output head (or for `token_embd` when it is tied);
//! - `q4_0`: Q4_0, the output head Q6_K; `q8_0`: Q8_0 everywhere; `f16`: F16 everywhere;
//! - a row length that is not a multiple of 256 cannot hold K-quant blocks: Q4_K falls back to
//!   Q5_0 and Q6_K to Q8_0 (and the output head goes straight to Q8_0), as llama.cpp does.

use crate::quant::GgmlType;

/// A weight matrix's role in the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    TokenEmbd,
    Output,
    AttnQ,
    AttnK,
    AttnV,
    AttnOut,
    FfnGate,
    FfnUp,
    FfnDown,
}

/// The weight mixes `synth` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantMix {
    Q4KM,
    Q8_0,
    Q4_0,
    F16,
}

impl QuantMix {
    pub const ALL: [QuantMix; 4] = [
        QuantMix::Q4KM,
        QuantMix::Q8_0,
        QuantMix::Q4_0,
        QuantMix::F16,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuantMix::Q4KM => "q4_k_m",
            QuantMix::Q8_0 => "q8_0",
            QuantMix::Q4_0 => "q4_0",
            QuantMix::F16 => "f16",
        }
    }

    pub fn from_name(s: &str) -> Option<QuantMix> {
        QuantMix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
    }

    /// llama.cpp's `general.file_type` (`LLAMA_FTYPE_*`).
    pub fn file_type(self) -> u32 {
        match self {
            QuantMix::Q4KM => 15,
            QuantMix::Q8_0 => 7,
            QuantMix::Q4_0 => 2,
            QuantMix::F16 => 1,
        }
    }
}

/// llama.cpp's choice of layers that get more bits in the `_M` mixes.
fn use_more_bits(layer: usize, n_layers: usize) -> bool {
    let (i, n) = (layer as i64, n_layers as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The type of a weight with `ncols` columns in `role` at `layer`.
pub fn weight_type(
    mix: QuantMix,
    role: Role,
    layer: usize,
    n_layers: usize,
    ncols: usize,
    tied: bool,
) -> GgmlType {
    let head = role == Role::Output || (tied && role == Role::TokenEmbd);
    let wanted = match mix {
        QuantMix::F16 => return GgmlType::F16,
        QuantMix::Q8_0 => return GgmlType::Q8_0,
        _ if head => {
            if !ncols.is_multiple_of(256) {
                return GgmlType::Q8_0;
            }
            GgmlType::Q6_K
        }
        QuantMix::Q4_0 => GgmlType::Q4_0,
        QuantMix::Q4KM => match role {
            Role::AttnV | Role::FfnDown if use_more_bits(layer, n_layers) => GgmlType::Q6_K,
            _ => GgmlType::Q4_K,
        },
    };
    match wanted {
        GgmlType::Q4_K if !ncols.is_multiple_of(256) => GgmlType::Q5_0,
        GgmlType::Q6_K if !ncols.is_multiple_of(256) => GgmlType::Q8_0,
        t => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_k_m_matches_llama_cpp_placement() {
        // 24 layers: n/8 = 3, 7n/8 = 21; more bits in 0,1,2, 21,22,23 and every third from 5
        let more: Vec<usize> = (0..24).filter(|&i| use_more_bits(i, 24)).collect();
        assert_eq!(more, [0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23]);
        let t =
            |role, layer, ncols, tied| weight_type(QuantMix::Q4KM, role, layer, 24, ncols, tied);
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
        let two = |layer| weight_type(QuantMix::Q4KM, Role::AttnV, layer, 2, 256, false);
        assert_eq!((two(0), two(1)), (GgmlType::Q4_K, GgmlType::Q6_K));
        assert_eq!(
            weight_type(QuantMix::Q4_0, Role::Output, 0, 2, 4096, false),
            GgmlType::Q6_K
        );
        assert_eq!(
            weight_type(QuantMix::Q4_0, Role::FfnUp, 0, 2, 4096, false),
            GgmlType::Q4_0
        );
    }
}
