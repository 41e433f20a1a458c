//! Brick ids: the canonical names of the logical steps of one decode step (docs/DESIGN.md
//! "Bricks"). They are the vocabulary shared by the engine's recorder, the JSON report,
//! profiles and the TUI, so they live in one place.

use std::fmt;

/// One logical operation of a decode step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BrickId {
    Embed,
    AttnNorm,
    Qkv,
    Rope,
    Attention,
    AttnOut,
    AttnResidual,
    FfnNorm,
    FfnGateUp,
    FfnAct,
    FfnDown,
    FfnResidual,
    FinalNorm,
    LmHead,
    Sample,
}

impl BrickId {
    /// Every brick, in pipeline order.
    pub const ALL: [BrickId; 15] = [
        BrickId::Embed,
        BrickId::AttnNorm,
        BrickId::Qkv,
        BrickId::Rope,
        BrickId::Attention,
        BrickId::AttnOut,
        BrickId::AttnResidual,
        BrickId::FfnNorm,
        BrickId::FfnGateUp,
        BrickId::FfnAct,
        BrickId::FfnDown,
        BrickId::FfnResidual,
        BrickId::FinalNorm,
        BrickId::LmHead,
        BrickId::Sample,
    ];

    /// The id used in JSON, profiles and the TUI.
    pub const fn name(self) -> &'static str {
        match self {
            BrickId::Embed => "embed",
            BrickId::AttnNorm => "attn_norm",
            BrickId::Qkv => "qkv",
            BrickId::Rope => "rope",
            BrickId::Attention => "attention",
            BrickId::AttnOut => "attn_out",
            BrickId::AttnResidual => "attn_residual",
            BrickId::FfnNorm => "ffn_norm",
            BrickId::FfnGateUp => "ffn_gate_up",
            BrickId::FfnAct => "ffn_act",
            BrickId::FfnDown => "ffn_down",
            BrickId::FfnResidual => "ffn_residual",
            BrickId::FinalNorm => "final_norm",
            BrickId::LmHead => "lm_head",
            BrickId::Sample => "sample",
        }
    }

    pub fn from_name(s: &str) -> Option<BrickId> {
        BrickId::ALL.into_iter().find(|b| b.name() == s)
    }

    /// Whether the brick runs once per layer (else once per token).
    pub const fn per_layer(self) -> bool {
        !matches!(
            self,
            BrickId::Embed | BrickId::FinalNorm | BrickId::LmHead | BrickId::Sample
        )
    }

    /// Position in the pipeline (for ordering report rows).
    pub fn order(self) -> usize {
        self as usize
    }
}

/// What a span is recorded under: one logical brick, or a fused kernel covering several
/// (recorded once under the fused id; nothing is split proportionally).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Brick {
    One(BrickId),
    Fused(&'static [BrickId]),
}

impl Brick {
    /// The logical bricks covered.
    pub fn covers(self) -> Vec<BrickId> {
        match self {
            Brick::One(b) => vec![b],
            Brick::Fused(bs) => bs.to_vec(),
        }
    }

    /// Pipeline position of the first covered brick.
    pub fn order(self) -> usize {
        match self {
            Brick::One(b) => b.order(),
            Brick::Fused(bs) => bs.first().map_or(0, |b| b.order()),
        }
    }

    pub fn per_layer(self) -> bool {
        self.covers().iter().any(|b| b.per_layer())
    }
}

impl From<BrickId> for Brick {
    fn from(b: BrickId) -> Brick {
        Brick::One(b)
    }
}

/// `qkv`, or `ffn_norm+ffn_gate_up` for a fused brick.
impl fmt::Display for Brick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Brick::One(b) => f.write_str(b.name()),
            Brick::Fused(bs) => {
                for (i, b) in bs.iter().enumerate() {
                    if i > 0 {
                        f.write_str("+")?;
                    }
                    f.write_str(b.name())?;
                }
                Ok(())
            }
        }
    }
}

/// Whether `id` names a brick: a canonical id or canonical ids joined by `+`.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty() && id.split('+').all(|p| BrickId::from_name(p).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_fused_ids_join() {
        for b in BrickId::ALL {
            assert_eq!(BrickId::from_name(b.name()), Some(b));
        }
        const F: &[BrickId] = &[BrickId::FfnNorm, BrickId::FfnGateUp];
        assert_eq!(Brick::Fused(F).to_string(), "ffn_norm+ffn_gate_up");
        assert!(is_valid_id("ffn_norm+ffn_gate_up"));
        assert!(!is_valid_id("ffn_norm+nope"));
        assert!(!is_valid_id(""));
    }
}
