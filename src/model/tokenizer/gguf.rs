//! Reading a vocabulary out of GGUF metadata (`tokenizer.ggml.*`), with errors that name the key
//! that is missing or has the wrong type.

use super::error::TokenizerError;
use super::tokenize::{Tokenizer, TokenizerData};
use crate::gguf::{GgufFile, MetaValue};

const MODEL: &str = "tokenizer.ggml.model";
const PRE: &str = "tokenizer.ggml.pre";
const TOKENS: &str = "tokenizer.ggml.tokens";
const SCORES: &str = "tokenizer.ggml.scores";
const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
const MERGES: &str = "tokenizer.ggml.merges";
const BOS: &str = "tokenizer.ggml.bos_token_id";
const EOS: &str = "tokenizer.ggml.eos_token_id";
const EOT: &str = "tokenizer.ggml.eot_token_id";
const UNK: &str = "tokenizer.ggml.unknown_token_id";
const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";

impl Tokenizer {
    /// Build the tokenizer of a GGUF model file.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::new(read_data(|k| file.metadata.get(k))?)
    }
}

/// Collect [`TokenizerData`] from metadata lookups.
pub(crate) fn read_data<'a>(
    get: impl Fn(&str) -> Option<&'a MetaValue>,
) -> Result<TokenizerData, TokenizerError> {
    let wrong = |key: &str, expected| TokenizerError::WrongType {
        key: key.to_string(),
        expected,
    };
    let string = |key: &str| -> Result<Option<String>, TokenizerError> {
        get(key)
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| wrong(key, "a string"))
            })
            .transpose()
    };
    let boolean = |key: &str| -> Result<Option<bool>, TokenizerError> {
        get(key)
            .map(|v| v.as_bool().ok_or_else(|| wrong(key, "a bool")))
            .transpose()
    };
    let id = |key: &str| -> Result<Option<u32>, TokenizerError> {
        get(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(|| wrong(key, "a token id (unsigned 32-bit integer)"))
            })
            .transpose()
    };
    fn array<'v, T>(
        key: &str,
        v: Option<&'v MetaValue>,
        expected: &'static str,
        f: impl Fn(&'v MetaValue) -> Option<T>,
    ) -> Result<Option<Vec<T>>, TokenizerError> {
        let Some(v) = v else { return Ok(None) };
        let items = v.as_array().ok_or_else(|| TokenizerError::WrongType {
            key: key.to_string(),
            expected: "an array",
        })?;
        items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                f(item).ok_or_else(|| TokenizerError::WrongElement {
                    key: key.to_string(),
                    index,
                    expected,
                })
            })
            .collect::<Result<Vec<T>, _>>()
            .map(Some)
    }
    let strings = |key: &str| {
        array(key, get(key), "a string", |v| {
            v.as_str().map(str::to_string)
        })
    };

    let model = string(MODEL)?.ok_or_else(|| TokenizerError::MissingKey(MODEL.into()))?;
    let tokens = strings(TOKENS)?.ok_or_else(|| TokenizerError::MissingKey(TOKENS.into()))?;
    let merges = strings(MERGES)?;
    if model == "gpt2" && merges.is_none() {
        return Err(TokenizerError::MissingMerges);
    }
    Ok(TokenizerData {
        name: get("general.name")
            .and_then(MetaValue::as_str)
            .map(str::to_string),
        model,
        pre: string(PRE)?,
        tokens,
        scores: array(SCORES, get(SCORES), "a number", MetaValue::as_f32)?.unwrap_or_default(),
        token_types: array(TOKEN_TYPE, get(TOKEN_TYPE), "a 32-bit integer", |v| {
            v.as_i64().and_then(|x| i32::try_from(x).ok())
        })?
        .unwrap_or_default(),
        merges: merges.unwrap_or_default(),
        bos: id(BOS)?,
        eos: id(EOS)?,
        eot: id(EOT)?,
        unk: id(UNK)?,
        add_bos: boolean(ADD_BOS)?,
        add_eos: boolean(ADD_EOS)?,
        add_space_prefix: boolean(ADD_SPACE_PREFIX)?,
    })
}
