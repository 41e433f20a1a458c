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
    /// Per-head RMSNorm of Q and K (qwen3, gemma3).
    QkNorm,
    Rope,
    Attention,
    AttnOut,
    /// RMSNorm of the attention output before its residual add (gemma3).
    PostAttnNorm,
    AttnResidual,
    FfnNorm,
    FfnGateUp,
    FfnAct,
    /// `gelu(gate) * up`, recorded instead of `FfnAct` on a GeGLU model (gemma3).
    FfnGeglu,
    FfnDown,
    /// RMSNorm of the FFN output before its residual add (gemma3).
    PostFfnNorm,
    FfnResidual,
    FinalNorm,
    LmHead,
    Sample,
}

impl BrickId {
    /// Every brick, in pipeline order.
    pub const ALL: [BrickId; 19] = [
        BrickId::Embed,
        BrickId::AttnNorm,
        BrickId::Qkv,
        BrickId::QkNorm,
        BrickId::Rope,
        BrickId::Attention,
        BrickId::AttnOut,
        BrickId::PostAttnNorm,
        BrickId::AttnResidual,
        BrickId::FfnNorm,
        BrickId::FfnGateUp,
        BrickId::FfnAct,
        BrickId::FfnGeglu,
        BrickId::FfnDown,
        BrickId::PostFfnNorm,
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
            BrickId::QkNorm => "qk_norm",
            BrickId::Rope => "rope",
            BrickId::Attention => "attention",
            BrickId::AttnOut => "attn_out",
            BrickId::PostAttnNorm => "post_attn_norm",
            BrickId::AttnResidual => "attn_residual",
            BrickId::FfnNorm => "ffn_norm",
            BrickId::FfnGateUp => "ffn_gate_up",
            BrickId::FfnAct => "ffn_act",
            BrickId::FfnGeglu => "ffn_geglu",
            BrickId::FfnDown => "ffn_down",
            BrickId::PostFfnNorm => "post_ffn_norm",
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

    /// Whether only some architectures run the brick (qwen3's and gemma3's extra steps, or
    /// gemma3's GeGLU in place of `ffn_act`): a model records it only where it has the step.
    pub const fn arch_specific(self) -> bool {
        matches!(
            self,
            BrickId::QkNorm | BrickId::PostAttnNorm | BrickId::FfnGeglu | BrickId::PostFfnNorm
        )
    }

    /// Position in the pipeline (for ordering report rows).
    pub fn order(self) -> usize {
        self as usize
    }

    /// A layer's brick after its attention: it works on the attention's output only, so a
    /// prompt's last layer may run it for the rows whose logits are wanted alone.
    pub fn past_attention(self) -> bool {
        use BrickId as B;
        matches!(
            self,
            B::AttnOut
                | B::PostAttnNorm
                | B::AttnResidual
                | B::FfnNorm
                | B::FfnGateUp
                | B::FfnAct
                | B::FfnGeglu
                | B::FfnDown
                | B::PostFfnNorm
                | B::FfnResidual
        )
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

    #[test]
    fn all_lists_every_brick_in_pipeline_order() {
        for (i, b) in BrickId::ALL.into_iter().enumerate() {
            assert_eq!(b.order(), i, "{}", b.name());
        }
        assert!(BrickId::QkNorm.order() > BrickId::Qkv.order());
        assert!(BrickId::QkNorm.order() < BrickId::Rope.order());
        assert!(BrickId::PostFfnNorm.order() < BrickId::FfnResidual.order());
        assert_eq!(BrickId::ALL.iter().filter(|b| b.arch_specific()).count(), 4);
    }
}
