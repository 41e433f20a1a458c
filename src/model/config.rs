//! Model hyper-parameters from GGUF metadata for the `llama` (and Mistral), `qwen2`, `qwen3`,
//! `gemma3` and `phi3` architectures, read with llama.cpp's keys, defaults and per-architecture
//! rules, with the consistency checks an engine relies on.

use crate::gguf::GgufFile;

/// Supported architectures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama and the files Mistral publishes (they differ only in metadata).
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
    Phi3,
}

impl Arch {
    /// Every supported architecture, in the order the refusal message lists them.
    pub const ALL: [Arch; 5] = [
        Arch::Llama,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Gemma3,
        Arch::Phi3,
    ];

    /// The `general.architecture` value.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Phi3 => "phi3",
        }
    }

    /// The architecture named `name` (`general.architecture`), if cbtop runs it.
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// `llama, qwen2, qwen3, gemma3, phi3`: what the refusal of an unknown one lists.
    pub fn supported_names() -> String {
        Arch::ALL.map(Arch::name).join(", ")
    }

    /// How rotary embedding pairs dimensions: llama pairs (2i, 2i+1), the others
    /// (i, i + d/2) (llama.cpp's `LLAMA_ROPE_TYPE_NORM` and `_NEOX`).
    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama => RopeStyle::Norm,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 | Arch::Phi3 => RopeStyle::Neox,
        }
    }
}

/// The feed-forward block's gated activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnAct {
    /// `silu(gate) * up` (llama, qwen, phi3).
    SiluGlu,
    /// `gelu(gate) * up` with GELU's tanh form (gemma3).
    GeluGlu,
}

/// One layer's rotary embedding: `theta_i = pos * freq_scale * base^(-2i/n_rot)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    pub base: f32,
    /// Linear position scaling (`1 / rope.scaling.factor`; 1 without scaling).
    pub freq_scale: f32,
}

/// Rotary embedding pairing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (2i, 2i+1).
    Norm,
    /// Split halves (i, i + n_rot/2).
    Neox,
}

/// Errors interpreting metadata as a model; each names the key.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("metadata key general.architecture is missing")]
    NoArch,
    #[error("architecture {0:?} is not supported (cbtop runs {names})", names = Arch::supported_names())]
    UnsupportedArch(String),
    #[error("metadata key {0} is missing or not a number")]
    Missing(String),
    #[error("metadata key {key} = {value} is out of range ({why})")]
    OutOfRange {
        key: String,
        value: f64,
        why: &'static str,
    },
    #[error("metadata key {key} = {value:?} is not supported ({why})")]
    Unsupported {
        key: String,
        value: String,
        why: &'static str,
    },
}

/// Hyper-parameters of a decoder-only transformer.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub n_layers: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Dimensions rotated by RoPE (<= head_dim).
    pub rope_dims: usize,
    pub rope_base: f32,
    pub norm_eps: f32,
    pub vocab_size: usize,
    pub context_length: usize,
    /// RMSNorm of each head of Q and of K after the projection, before RoPE (qwen3, gemma3;
    /// weights `attn_q_norm` / `attn_k_norm` of `head_dim`, eps `norm_eps`).
    pub qk_norm: bool,
    /// RMSNorm of the attention output and of the FFN output before each residual add
    /// (gemma3; weights `post_attention_norm` / `post_ffw_norm`).
    pub post_norms: bool,
    pub ffn_act: FfnAct,
    /// Factor on every embedding row (gemma3: sqrt(n_embd) in f32).
    pub embed_scale: Option<f32>,
    /// The attention score scale (1/sqrt(head_dim) unless the architecture says otherwise).
    pub attn_scale: f32,
    /// Whether llama.cpp multiplies Q by `attn_scale` (an f32 `ggml_scale` after RoPE) and
    /// runs attention with scale 1 (phi3, gemma3), rather than passing the scale to attention
    /// (llama, qwen2, qwen3). The product is rounded before attention reads it, so the bits
    /// differ.
    pub attn_scale_on_q: bool,
    /// The sliding window on sliding layers (gemma3's `attention.sliding_window`).
    pub sliding_window: Option<usize>,
    /// Per layer, whether it is a sliding-window layer (all false without a window).
    pub swa_layers: Vec<bool>,
    /// RoPE of the global (non-sliding) layers: `rope_base` and the linear scale.
    pub rope_freq_scale: f32,
    /// RoPE of sliding layers (gemma3: `rope.freq_base_swa`, default 10000, scale 1).
    pub rope_swa: RopeParams,
    /// `tanh(x / cap) * cap` on the output logits (gemma3's `final_logit_softcapping`).
    pub final_logit_softcap: Option<f32>,
    /// The same on attention scores. llama.cpp applies it only for gemma2, which cbtop does
    /// not run, and ignores the key for gemma3, so it stays None here too.
    pub attn_logit_softcap: Option<f32>,
}

impl Config {
    /// Read and validate the configuration of `file`.
    pub fn from_gguf(file: &GgufFile) -> Result<Config, ConfigError> {
        let md = &file.metadata;
        let arch_name = md
            .get_str("general.architecture")
            .ok_or(ConfigError::NoArch)?;
        let arch = Arch::from_name(arch_name)
            .ok_or_else(|| ConfigError::UnsupportedArch(arch_name.to_string()))?;
        let key = |k: &str| format!("{arch_name}.{k}");
        let req = |k: &str| -> Result<usize, ConfigError> {
            md.get_u64(&key(k))
                .map(|v| v as usize)
                .ok_or_else(|| ConfigError::Missing(key(k)))
        };
        let range = |k: &str, v: usize, lo: usize, hi: usize| -> Result<usize, ConfigError> {
            if v < lo || v > hi {
                return Err(ConfigError::OutOfRange {
                    key: key(k),
                    value: v as f64,
                    why: "outside the sizes cbtop accepts",
                });
            }
            Ok(v)
        };
        let n_layers = range("block_count", req("block_count")?, 1, 1024)?;
        let n_embd = range("embedding_length", req("embedding_length")?, 1, 1 << 16)?;
        let n_ff = range(
            "feed_forward_length",
            req("feed_forward_length")?,
            1,
            1 << 18,
        )?;
        let n_heads = range(
            "attention.head_count",
            req("attention.head_count")?,
            1,
            1024,
        )?;
        let n_kv_heads = match md.get_u64(&key("attention.head_count_kv")) {
            Some(v) => range("attention.head_count_kv", v as usize, 1, n_heads)?,
            None => n_heads,
        };
        if n_heads % n_kv_heads != 0 {
            return Err(ConfigError::OutOfRange {
                key: key("attention.head_count_kv"),
                value: n_kv_heads as f64,
                why: "must divide attention.head_count",
            });
        }
        let head_dim = match md.get_u64(&key("attention.key_length")) {
            Some(v) => range("attention.key_length", v as usize, 1, 1024)?,
            None => {
                if n_embd % n_heads != 0 {
                    return Err(ConfigError::OutOfRange {
                        key: key("attention.head_count"),
                        value: n_heads as f64,
                        why: "must divide embedding_length",
                    });
                }
                n_embd / n_heads
            }
        };
        if let Some(v) = md.get_u64(&key("attention.value_length")) {
            if v as usize != head_dim {
                return Err(ConfigError::OutOfRange {
                    key: key("attention.value_length"),
                    value: v as f64,
                    why: "cbtop needs it equal to attention.key_length",
                });
            }
        }
        for k in ["attention.key_length_swa", "attention.value_length_swa"] {
            if let Some(v) = md.get_u64(&key(k)) {
                if v as usize != head_dim {
                    return Err(ConfigError::OutOfRange {
                        key: key(k),
                        value: v as f64,
                        why: "cbtop needs sliding layers' heads as wide as the others",
                    });
                }
            }
        }
        let rope_dims = match md.get_u64(&key("rope.dimension_count")) {
            Some(v) => range("rope.dimension_count", v as usize, 2, head_dim)?,
            None => head_dim,
        };
        if rope_dims % 2 != 0 {
            return Err(ConfigError::OutOfRange {
                key: key("rope.dimension_count"),
                value: rope_dims as f64,
                why: "must be even",
            });
        }
        let rope_base = md.get_f32(&key("rope.freq_base")).unwrap_or(10000.0);
        if !(rope_base.is_finite() && rope_base > 1.0) {
            return Err(ConfigError::OutOfRange {
                key: key("rope.freq_base"),
                value: rope_base as f64,
                why: "must be a finite number above 1",
            });
        }
        let norm_eps = md
            .get_f32(&key("attention.layer_norm_rms_epsilon"))
            .ok_or_else(|| ConfigError::Missing(key("attention.layer_norm_rms_epsilon")))?;
        if !((0.0..1.0).contains(&norm_eps)) {
            return Err(ConfigError::OutOfRange {
                key: key("attention.layer_norm_rms_epsilon"),
                value: norm_eps as f64,
                why: "must be in [0, 1)",
            });
        }
        let vocab_size = match md.get_u64(&key("vocab_size")) {
            Some(v) => v as usize,
            None => md
                .get("tokenizer.ggml.tokens")
                .and_then(|v| v.as_array())
                .map(|a| a.len())
                .or_else(|| file.tensor("token_embd.weight").map(|t| t.n_rows()))
                .ok_or_else(|| ConfigError::Missing(key("vocab_size")))?,
        };
        let vocab_size = range("vocab_size", vocab_size, 1, 1 << 22)?;
        let context_length = match md.get_u64(&key("context_length")) {
            Some(v) => range("context_length", v as usize, 1, 1 << 24)?,
            None => 4096,
        };
        let rope_freq_scale = rope_scale(md, &key)?;
        let (sliding_window, swa_layers, rope_swa) = sliding(md, &key, arch, n_layers)?;
        let rope_swa = rope_swa.unwrap_or(RopeParams {
            base: rope_base,
            freq_scale: rope_freq_scale,
        });
        let positive = |k: &str| -> Result<Option<f32>, ConfigError> {
            match md.get_f32(&key(k)) {
                None => Ok(None),
                Some(0.0) => Ok(None),
                Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
                Some(v) => Err(ConfigError::OutOfRange {
                    key: key(k),
                    value: v as f64,
                    why: "must be a finite positive number",
                }),
            }
        };
        let gemma3 = arch == Arch::Gemma3;
        // llama.cpp reads the final soft cap for gemma3 only (and no attention cap at all).
        let final_logit_softcap = if gemma3 {
            positive("final_logit_softcapping")?
        } else {
            None
        };
        // llama.cpp: gemma3 27B (62 layers) scales by n_embd / n_head, others by the head
        // width; phi3 and gemma3 scale Q before attention.
        let attn_scale = if gemma3 && n_layers == 62 {
            1.0 / ((n_embd / n_heads) as f32).sqrt()
        } else {
            1.0 / (head_dim as f32).sqrt()
        };
        Ok(Config {
            arch,
            n_layers,
            n_embd,
            n_ff,
            n_heads,
            n_kv_heads,
            head_dim,
            rope_dims,
            rope_base,
            norm_eps,
            vocab_size,
            context_length,
            qk_norm: matches!(arch, Arch::Qwen3 | Arch::Gemma3),
            post_norms: gemma3,
            ffn_act: if gemma3 {
                FfnAct::GeluGlu
            } else {
                FfnAct::SiluGlu
            },
            embed_scale: gemma3.then(|| (n_embd as f32).sqrt()),
            attn_scale,
            attn_scale_on_q: matches!(arch, Arch::Phi3 | Arch::Gemma3),
            sliding_window,
            swa_layers,
            rope_freq_scale,
            rope_swa,
            final_logit_softcap,
            attn_logit_softcap: None,
        })
    }

    /// The sliding window of layer `l`: Some(n) on a sliding layer, where a key at position
    /// p1 is visible to the query at p0 iff p1 <= p0 and p0 - p1 < n (llama.cpp's
    /// `is_masked_swa`, standard type).
    pub fn layer_window(&self, l: usize) -> Option<usize> {
        match self.swa_layers.get(l) {
            Some(true) => self.sliding_window,
            _ => None,
        }
    }

    /// Layer `l`'s RoPE base and linear frequency scale (sliding layers take the SWA ones).
    pub fn layer_rope(&self, l: usize) -> RopeParams {
        if self.layer_window(l).is_some() {
            self.rope_swa
        } else {
            RopeParams {
                base: self.rope_base,
                freq_scale: self.rope_freq_scale,
            }
        }
    }

    /// The factor attention multiplies Q·K by: `attn_scale`, or 1 where Q was scaled before.
    pub fn kq_scale(&self) -> f32 {
        if self.attn_scale_on_q {
            1.0
        } else {
            self.attn_scale
        }
    }

    /// Width of the query projection output.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of the key/value projection outputs.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}

/// llama.cpp's linear RoPE scale: `rope.scaling.type` (default `linear`; `none` never
/// scales) and `rope.scaling.factor` (else the old `rope.scale_linear`; 0 or absent: 1).
/// YaRN and LongRoPE change more than the frequency and are refused by key.
fn rope_scale(
    md: &crate::gguf::Metadata,
    key: &dyn Fn(&str) -> String,
) -> Result<f32, ConfigError> {
    let ty = md.get_str(&key("rope.scaling.type")).unwrap_or("linear");
    match ty {
        "none" => return Ok(1.0),
        "linear" => {}
        other => {
            return Err(ConfigError::Unsupported {
                key: key("rope.scaling.type"),
                value: other.to_string(),
                why: "cbtop runs none and linear RoPE scaling",
            })
        }
    }
    let factor = md
        .get_f32(&key("rope.scaling.factor"))
        .or_else(|| md.get_f32(&key("rope.scale_linear")))
        .unwrap_or(0.0);
    if factor == 0.0 {
        return Ok(1.0);
    }
    if !(factor.is_finite() && factor > 0.0) {
        return Err(ConfigError::OutOfRange {
            key: key("rope.scaling.factor"),
            value: factor as f64,
            why: "must be a finite positive number",
        });
    }
    Ok(1.0 / factor)
}

/// The sliding window, which layers slide, and their RoPE, as llama.cpp reads them: only
/// gemma3 slides (phi3's window is read and switched off by llama.cpp; the others never
/// read one). The layer pattern is `attention.sliding_window_pattern`: an array of bools
/// (one per layer), else a period n (default 6) where layer l slides iff l % n < n - 1 (n = 0:
/// every layer).
type Sliding = (Option<usize>, Vec<bool>, Option<RopeParams>);

fn sliding(
    md: &crate::gguf::Metadata,
    key: &dyn Fn(&str) -> String,
    arch: Arch,
    n_layers: usize,
) -> Result<Sliding, ConfigError> {
    let none = (None, vec![false; n_layers], None);
    if arch != Arch::Gemma3 {
        return Ok(none);
    }
    let window = match md.get_u64(&key("attention.sliding_window")) {
        Some(0) | None => return Ok(none),
        Some(v) if v > 1 << 24 => {
            return Err(ConfigError::OutOfRange {
                key: key("attention.sliding_window"),
                value: v as f64,
                why: "outside the sizes cbtop accepts",
            })
        }
        Some(v) => v as usize,
    };
    let pattern_key = key("attention.sliding_window_pattern");
    let layers = match md.get(&pattern_key) {
        // One flag per layer; layers past the array's end do not slide (llama.cpp's get_arr).
        Some(v) if v.as_array().is_some() => {
            let a = v.as_array().unwrap_or(&[]);
            let flags: Option<Vec<bool>> = a.iter().map(|b| b.as_bool()).collect();
            match flags {
                Some(f) if f.len() <= n_layers.max(512) => (0..n_layers)
                    .map(|l| f.get(l).copied().unwrap_or(false))
                    .collect(),
                _ => {
                    return Err(ConfigError::OutOfRange {
                        key: pattern_key,
                        value: a.len() as f64,
                        why: "must be an array of bools, one per layer",
                    })
                }
            }
        }
        Some(v) => {
            let n = v
                .as_u64()
                .ok_or_else(|| ConfigError::Missing(pattern_key.clone()))?;
            let n = n.min(u32::MAX as u64) as usize;
            (0..n_layers).map(|l| n == 0 || l % n < n - 1).collect()
        }
        None => (0..n_layers).map(|l| l % 6 < 5).collect(),
    };
    let base = md.get_f32(&key("rope.freq_base_swa")).unwrap_or(10000.0);
    if !(base.is_finite() && base > 1.0) {
        return Err(ConfigError::OutOfRange {
            key: key("rope.freq_base_swa"),
            value: base as f64,
            why: "must be a finite number above 1",
        });
    }
    let rope = RopeParams {
        base,
        freq_scale: 1.0,
    };
    Ok((Some(window), layers, Some(rope)))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::gguf::{GgufWriter, MetaValue};

    /// The configuration of a metadata-only file of `arch` with `extra` keys (unprefixed).
    fn config(arch: &str, extra: &[(&str, MetaValue)]) -> Result<Config, ConfigError> {
        let mut w = GgufWriter::new();
        let k = |s: &str| format!("{arch}.{s}");
        w.meta("general.architecture", MetaValue::String(arch.into()))
            .meta(&k("block_count"), MetaValue::U32(8))
            .meta(&k("embedding_length"), MetaValue::U32(256))
            .meta(&k("feed_forward_length"), MetaValue::U32(512))
            .meta(&k("attention.head_count"), MetaValue::U32(4))
            .meta(&k("attention.head_count_kv"), MetaValue::U32(2))
            .meta(&k("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-6))
            .meta(&k("vocab_size"), MetaValue::U32(512));
        for (key, v) in extra {
            w.meta(&k(key), v.clone());
        }
        let file = crate::gguf::GgufFile::from_bytes(Path::new("t.gguf"), w.to_bytes()).unwrap();
        Config::from_gguf(&file)
    }

    #[test]
    fn an_unknown_architecture_is_refused_listing_the_supported_ones() {
        let e = config("mamba", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "architecture \"mamba\" is not supported (cbtop runs llama, qwen2, qwen3, gemma3, phi3)"
        );
    }

    #[test]
    fn llama_and_qwen2_keep_their_plain_defaults() {
        for arch in ["llama", "qwen2"] {
            let c = config(arch, &[]).unwrap();
            assert!(!c.qk_norm && !c.post_norms && !c.attn_scale_on_q);
            assert_eq!(c.ffn_act, FfnAct::SiluGlu);
            assert_eq!((c.embed_scale, c.final_logit_softcap), (None, None));
            assert_eq!(c.attn_scale, 1.0 / 8.0);
            assert_eq!(c.kq_scale(), 1.0 / 8.0);
            assert!((0..8).all(|l| c.layer_window(l).is_none()));
            let r = c.layer_rope(3);
            assert_eq!((r.base, r.freq_scale), (10000.0, 1.0));
        }
        assert_eq!(
            config("llama", &[]).unwrap().arch.rope_style(),
            RopeStyle::Norm
        );
    }

    #[test]
    fn qwen3_has_qk_norm_and_its_own_head_width() {
        let c = config(
            "qwen3",
            &[
                ("attention.key_length", MetaValue::U32(128)),
                ("attention.value_length", MetaValue::U32(128)),
                ("rope.freq_base", MetaValue::F32(1e6)),
            ],
        )
        .unwrap();
        assert!(c.qk_norm && !c.post_norms);
        assert_eq!((c.head_dim, c.q_dim(), c.kv_dim()), (128, 512, 256));
        assert_eq!(c.arch.rope_style(), RopeStyle::Neox);
        assert_eq!(c.kq_scale(), 1.0 / (128f32).sqrt());
        assert_eq!(c.layer_rope(0).base, 1e6);
    }

    #[test]
    fn phi3_scales_q_first_and_ignores_its_window() {
        let c = config(
            "phi3",
            &[("attention.sliding_window", MetaValue::U32(2047))],
        )
        .unwrap();
        assert!(c.attn_scale_on_q && !c.qk_norm);
        assert_eq!(c.kq_scale(), 1.0);
        assert_eq!(c.attn_scale, 1.0 / 8.0);
        assert_eq!(c.sliding_window, None);
        assert!((0..8).all(|l| c.layer_window(l).is_none()));
    }

    #[test]
    fn gemma3_reads_its_window_pattern_rope_bases_and_caps() {
        let c = config(
            "gemma3",
            &[
                ("attention.sliding_window", MetaValue::U32(512)),
                ("rope.freq_base", MetaValue::F32(1e6)),
                ("rope.scaling.type", MetaValue::String("linear".into())),
                ("rope.scaling.factor", MetaValue::F32(8.0)),
                ("final_logit_softcapping", MetaValue::F32(30.0)),
                ("attn_logit_softcapping", MetaValue::F32(50.0)),
            ],
        )
        .unwrap();
        assert!(c.qk_norm && c.post_norms && c.attn_scale_on_q);
        assert_eq!(c.ffn_act, FfnAct::GeluGlu);
        assert_eq!(c.embed_scale, Some(16.0));
        assert_eq!(c.final_logit_softcap, Some(30.0));
        assert_eq!(c.attn_logit_softcap, None);
        // Pattern 6 by default: layers 0-4 slide, 5 is global, 6-7 slide.
        let windows: Vec<_> = (0..8).map(|l| c.layer_window(l)).collect();
        let s = Some(512);
        assert_eq!(windows, [s, s, s, s, s, None, s, s]);
        assert_eq!(
            c.layer_rope(0),
            RopeParams {
                base: 10000.0,
                freq_scale: 1.0
            }
        );
        assert_eq!(
            c.layer_rope(5),
            RopeParams {
                base: 1e6,
                freq_scale: 0.125
            }
        );
        // A pattern key and an array of flags.
        let c = config(
            "gemma3",
            &[
                ("attention.sliding_window", MetaValue::U32(4)),
                ("attention.sliding_window_pattern", MetaValue::U32(2)),
                ("rope.freq_base_swa", MetaValue::F32(5000.0)),
            ],
        )
        .unwrap();
        assert_eq!(c.layer_window(0), Some(4));
        assert_eq!(c.layer_window(1), None);
        assert_eq!(c.layer_rope(2).base, 5000.0);
        let flags = MetaValue::Array(
            crate::gguf::value_type::BOOL,
            vec![MetaValue::Bool(false), MetaValue::Bool(true)],
        );
        let c = config(
            "gemma3",
            &[
                ("attention.sliding_window", MetaValue::U32(4)),
                ("attention.sliding_window_pattern", flags),
            ],
        )
        .unwrap();
        let windows: Vec<_> = (0..3).map(|l| c.layer_window(l)).collect();
        assert_eq!(windows, [None, Some(4), None]);
        // No window: no sliding layer.
        let c = config("gemma3", &[]).unwrap();
        assert!((0..8).all(|l| c.layer_window(l).is_none()));
    }

    #[test]
    fn rope_scaling_reads_linear_and_refuses_yarn_by_key() {
        let c = config("llama", &[("rope.scale_linear", MetaValue::F32(2.0))]).unwrap();
        assert_eq!(c.layer_rope(0).freq_scale, 0.5);
        let none = [
            ("rope.scaling.type", MetaValue::String("none".into())),
            ("rope.scaling.factor", MetaValue::F32(4.0)),
        ];
        assert_eq!(config("llama", &none).unwrap().rope_freq_scale, 1.0);
        let yarn = [("rope.scaling.type", MetaValue::String("yarn".into()))];
        let e = config("qwen3", &yarn).unwrap_err().to_string();
        assert!(e.contains("qwen3.rope.scaling.type"), "{e}");
    }

    #[test]
    fn a_value_width_unlike_the_key_width_is_refused_by_key() {
        let e = config("qwen3", &[("attention.value_length", MetaValue::U32(32))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("qwen3.attention.value_length"), "{e}");
    }
}
