//! Opening a model file: GGUF reader, configuration, weights table and tokenizer in one step,
//! with one error type whose message names the file and the key or tensor at fault.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::tokenizer::{Tokenizer, TokenizerError};
use super::{Config, ConfigError, Weights, WeightsError};
use crate::gguf::{GgufError, GgufFile};

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Gguf(#[from] GgufError),
    #[error("{}: {source}", file.display())]
    Config { file: PathBuf, source: ConfigError },
    #[error("{}: {source}", file.display())]
    Weights { file: PathBuf, source: WeightsError },
    #[error("{}: {source}", file.display())]
    Tokenizer {
        file: PathBuf,
        source: TokenizerError,
    },
    #[error(
        "{}: tokenizer.ggml.tokens has {tokens} tokens, more than the {rows} rows of \
         token_embd.weight (vocab_size)",
        file.display()
    )]
    VocabMismatch {
        file: PathBuf,
        tokens: usize,
        rows: usize,
    },
}

/// A loaded model: its file, configuration, weights and tokenizer.
pub struct Model {
    pub file: Arc<GgufFile>,
    pub config: Config,
    pub weights: Weights,
    pub tokenizer: Tokenizer,
}

impl Model {
    /// Open and validate everything needed to run `path`.
    pub fn load(path: &Path) -> Result<Model, LoadError> {
        Model::from_file(GgufFile::open(path)?)
    }

    /// Validate and load a model held in memory (e.g. the embedded synthetic default);
    /// `label` stands for the file name in errors.
    pub fn from_bytes(label: &str, bytes: Vec<u8>) -> Result<Model, LoadError> {
        Model::from_file(GgufFile::from_bytes(Path::new(label), bytes)?)
    }

    fn from_file(file: GgufFile) -> Result<Model, LoadError> {
        let file = Arc::new(file);
        let path = file.path.clone();
        let p = || path.clone();
        let config =
            Config::from_gguf(&file).map_err(|source| LoadError::Config { file: p(), source })?;
        let weights = Weights::load(file.clone(), &config)
            .map_err(|source| LoadError::Weights { file: p(), source })?;
        let tokenizer = Tokenizer::from_gguf(&file)
            .map_err(|source| LoadError::Tokenizer { file: p(), source })?;
        // Every id the tokenizer can produce must have an embedding row.
        if tokenizer.vocab_size() > config.vocab_size {
            return Err(LoadError::VocabMismatch {
                file: p(),
                tokens: tokenizer.vocab_size(),
                rows: config.vocab_size,
            });
        }
        Ok(Model {
            file,
            config,
            weights,
            tokenizer,
        })
    }

    /// `general.name`, else the file stem.
    pub fn name(&self) -> String {
        self.file
            .metadata
            .get_str("general.name")
            .map(str::to_string)
            .unwrap_or_else(|| {
                self.file
                    .path
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
    }
}
