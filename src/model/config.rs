//! Model hyper-parameters from GGUF metadata for the `llama` and `qwen2` architectures, with
//! llama.cpp's defaults and the consistency checks an engine relies on.

use crate::gguf::GgufFile;

/// Supported architectures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        }
    }

    /// How rotary embedding pairs dimensions: llama pairs (2i, 2i+1), qwen2 (i, i + d/2).
    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama => RopeStyle::Norm,
            Arch::Qwen2 => RopeStyle::Neox,
        }
    }
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
    #[error("architecture {0:?} is not supported (cbtop runs llama and qwen2)")]
    UnsupportedArch(String),
    #[error("metadata key {0} is missing or not a number")]
    Missing(String),
    #[error("metadata key {key} = {value} is out of range ({why})")]
    OutOfRange {
        key: String,
        value: f64,
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
}

impl Config {
    /// Read and validate the configuration of `file`.
    pub fn from_gguf(file: &GgufFile) -> Result<Config, ConfigError> {
        let md = &file.metadata;
        let arch_name = md
            .get_str("general.architecture")
            .ok_or(ConfigError::NoArch)?;
        let arch = match arch_name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            other => return Err(ConfigError::UnsupportedArch(other.to_string())),
        };
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
        })
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
