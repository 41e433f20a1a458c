//! Profiles (`profiles/*.toml`): model shapes for `synth` and per-brick budgets. The files in
//! `profiles/` are embedded in the binary, so `--profile qwen2.5-0.5b` and
//! `synth --shape qwen2.5-0.5b` work from anywhere; a path to a TOML file works too.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::brick::id::is_valid_id;

/// The built-in profiles: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "qwen2.5-0.5b",
        include_str!("../../profiles/qwen2.5-0.5b.toml"),
    ),
    (
        "qwen2.5-1.5b",
        include_str!("../../profiles/qwen2.5-1.5b.toml"),
    ),
    ("qwen2.5-3b", include_str!("../../profiles/qwen2.5-3b.toml")),
    ("qwen2.5-7b", include_str!("../../profiles/qwen2.5-7b.toml")),
    (
        "llama-3.2-1b",
        include_str!("../../profiles/llama-3.2-1b.toml"),
    ),
    (
        "llama-3.1-8b",
        include_str!("../../profiles/llama-3.1-8b.toml"),
    ),
    (
        "smollm2-135m",
        include_str!("../../profiles/smollm2-135m.toml"),
    ),
    ("qwen3-0.6b", include_str!("../../profiles/qwen3-0.6b.toml")),
    ("qwen3-8b", include_str!("../../profiles/qwen3-8b.toml")),
    ("phi3-mini", include_str!("../../profiles/phi3-mini.toml")),
    ("mistral-7b", include_str!("../../profiles/mistral-7b.toml")),
    ("gemma3-1b", include_str!("../../profiles/gemma3-1b.toml")),
    ("gemma3-4b", include_str!("../../profiles/gemma3-4b.toml")),
    (
        "example-budgets",
        include_str!("../../profiles/example-budgets.toml"),
    ),
];

/// Why a profile could not be used; the message names the profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "profile {name:?} is neither a built-in profile ({}) nor a readable file: {why}",
        builtin_names()
    )]
    NotFound { name: String, why: String },
    #[error("profile {name}: {why}")]
    Invalid { name: String, why: String },
}

fn builtin_names() -> String {
    BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A model's published configuration, as `synth` needs it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub name: String,
    /// `llama`, `qwen2`, `qwen3`, `gemma3` or `phi3`.
    pub arch: String,
    pub n_layers: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub vocab: usize,
    pub context_length: usize,
    pub rope_base: f32,
    pub norm_eps: f32,
    /// No `output.weight`: the output head is `token_embd`.
    pub tied_embeddings: bool,
    /// The head width where it is not `n_embd / n_heads` (qwen3, gemma3:
    /// `attention.key_length`).
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// RoPE base of the sliding-window layers (gemma3: 10000).
    #[serde(default)]
    pub rope_base_swa: Option<f32>,
    /// Linear RoPE scaling factor (of the global layers, on gemma3).
    #[serde(default)]
    pub rope_scaling_factor: Option<f32>,
    /// Sliding-window width of the windowed layers (gemma3: five of every six).
    #[serde(default)]
    pub sliding_window: Option<usize>,
}

/// The architectures `synth` writes.
pub const SYNTH_ARCHS: [&str; 5] = ["llama", "qwen2", "qwen3", "gemma3", "phi3"];

impl Shape {
    pub fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.n_embd / self.n_heads)
    }

    /// Range checks, so a hand-written shape file fails with a sentence, not an allocation.
    fn validate(&self) -> Result<(), String> {
        let limit = |what: &str, v: usize, lo: usize, hi: usize| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("shape.{what} = {v} is outside {lo}..={hi}"))
            }
        };
        if !SYNTH_ARCHS.contains(&self.arch.as_str()) {
            return Err(format!(
                "shape.arch = {:?}: synth writes {}",
                self.arch,
                SYNTH_ARCHS.join(", ")
            ));
        }
        if let Some(hd) = self.head_dim {
            limit("head_dim", hd, 2, 1024)?;
            if !hd.is_multiple_of(2) {
                return Err(format!("shape.head_dim = {hd} is not even"));
            }
        }
        limit("n_layers", self.n_layers, 1, 512)?;
        limit("n_embd", self.n_embd, 32, 65536)?;
        limit("n_ff", self.n_ff, 32, 262144)?;
        limit("n_heads", self.n_heads, 1, 1024)?;
        limit("n_kv_heads", self.n_kv_heads, 1, self.n_heads)?;
        limit("vocab", self.vocab, 512, 1 << 20)?;
        limit("context_length", self.context_length, 16, 1 << 24)?;
        if let Some(n) = self.sliding_window {
            limit("sliding_window", n, 1, 1 << 24)?;
        }
        for (what, v) in [
            ("rope_base_swa", self.rope_base_swa),
            ("rope_scaling_factor", self.rope_scaling_factor),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(format!("shape.{what} must be a positive number"));
            }
        }
        if self.head_dim.is_none()
            && (!self.n_embd.is_multiple_of(self.n_heads) || !self.head_dim().is_multiple_of(2))
        {
            return Err(format!(
                "shape.n_embd = {} is not an even multiple of shape.n_heads = {}",
                self.n_embd, self.n_heads
            ));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(format!(
                "shape.n_heads = {} is not a multiple of shape.n_kv_heads = {}",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !self.n_embd.is_multiple_of(32) || !self.n_ff.is_multiple_of(32) {
            return Err("shape.n_embd and shape.n_ff must be multiples of 32".to_string());
        }
        if !(self.rope_base > 0.0 && self.norm_eps > 0.0 && self.norm_eps < 1.0) {
            return Err("shape.rope_base must be > 0 and shape.norm_eps in (0, 1)".to_string());
        }
        Ok(())
    }
}

/// Budgets of a profile.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    pub target_efficiency: Option<f64>,
    /// Brick id → microseconds per token (all layers).
    #[serde(default)]
    pub bricks_us: BTreeMap<String, f64>,
}

/// One profile file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub shape: Option<Shape>,
    #[serde(default)]
    pub budget: BudgetSection,
}

impl Profile {
    /// A built-in profile by name, else a TOML file at `name`.
    pub fn load(name: &str) -> Result<Profile, ProfileError> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) {
            return Profile::parse(name, text);
        }
        let text =
            std::fs::read_to_string(Path::new(name)).map_err(|e| ProfileError::NotFound {
                name: name.to_string(),
                why: e.to_string(),
            })?;
        Profile::parse(name, &text)
    }

    /// Parse and validate profile text; `name` is used in errors.
    pub fn parse(name: &str, text: &str) -> Result<Profile, ProfileError> {
        let invalid = |why: String| ProfileError::Invalid {
            name: name.to_string(),
            why,
        };
        let p: Profile = toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
        if let Some(s) = &p.shape {
            s.validate().map_err(invalid)?;
        }
        if let Some(t) = p.budget.target_efficiency {
            if !(t > 0.0 && t <= 1.0) {
                return Err(invalid(format!(
                    "budget.target_efficiency = {t} is not in (0, 1]"
                )));
            }
        }
        for (id, us) in &p.budget.bricks_us {
            if !is_valid_id(id) {
                return Err(invalid(format!(
                    "budget.bricks_us: {id:?} is not a brick id"
                )));
            }
            if !(us.is_finite() && *us > 0.0) {
                return Err(invalid(format!(
                    "budget.bricks_us.{id} = {us} is not a positive number"
                )));
            }
        }
        Ok(p)
    }

    /// The shape of a built-in or file profile, or an error saying it has none.
    pub fn shape(name: &str) -> Result<Shape, ProfileError> {
        Profile::load(name)?
            .shape
            .ok_or_else(|| ProfileError::Invalid {
                name: name.to_string(),
                why: "it has no [shape] section".to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_profile_parses() {
        for (name, _) in BUILTIN {
            let p = Profile::load(name).unwrap_or_else(|e| panic!("{e}"));
            if *name != "example-budgets" {
                let s = p.shape.expect("shape");
                assert_eq!(s.n_embd % s.n_heads, 0, "{name}");
            }
        }
        let q = Profile::shape("qwen2.5-0.5b").unwrap();
        assert_eq!((q.n_layers, q.n_embd, q.n_ff), (24, 896, 4864));
        assert_eq!((q.n_heads, q.n_kv_heads, q.vocab), (14, 2, 151936));
        assert_eq!(q.head_dim(), 64);
    }

    #[test]
    fn bad_profiles_are_named_errors() {
        let e = Profile::load("no-such-profile").unwrap_err().to_string();
        assert!(
            e.contains("no-such-profile") && e.contains("qwen2.5-0.5b"),
            "{e}"
        );
        let e = Profile::parse("x", "[budget.bricks_us]\nnope = 3.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope"), "{e}");
        let e = Profile::parse("x", "[budget]\ntarget_efficiency = 2.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("target_efficiency"), "{e}");
        assert!(Profile::parse("x", "[shape]\nname = 1\n").is_err());
    }
}
