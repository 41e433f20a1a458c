//! The tokenizer itself: a vocabulary as plain data (`TokenizerData`), its kind, and the
//! `Tokenizer` built from it that encodes text, decodes ids and knows the special tokens.

use std::collections::{BTreeSet, HashMap};

use super::bpe;
use super::bytes;
use super::decode;
use super::error::TokenizerError;
use super::kind::TokenizerKind;
use super::pretokenize::{PreConfig, PreTokenizer};
use super::special::{self, Fragment};
use super::spm;
use super::vocab::{self, attr};

/// A vocabulary as GGUF stores it under `tokenizer.ggml.*`; plain data, no validation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenizerData {
    /// `tokenizer.ggml.model`: "gpt2" (byte-level BPE) or "llama" (SentencePiece).
    pub model: String,
    /// `tokenizer.ggml.pre`: the BPE pre-tokenizer type (e.g. "smollm", "llama-bpe", "qwen2").
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`: token text by id.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores` (SentencePiece merge priorities); may be empty.
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.token_type` (see [`token_type`]); may be empty (all NORMAL).
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: "left right", rank = index; may be empty.
    pub merges: Vec<String>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    pub add_space_prefix: Option<bool>,
    /// `general.name`: llama.cpp marks Phi-3's special tokens to strip the whitespace after
    /// them when the lowercased name contains `phi-3` or `phi3`.
    pub name: Option<String>,
}

/// What llama.cpp assumes for a tokenizer model before reading the metadata. (The gpt2 default of
/// id 11 for BOS/EOS is llama.cpp's, applied only when the vocabulary has that many tokens.)
struct Defaults {
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    add_bos: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
}

#[derive(Debug)]
enum Algo {
    Bpe {
        ranks: bpe::Ranks,
        pre: PreTokenizer,
        ignore_merges: bool,
    },
    Spm,
}

/// A ready tokenizer. Cheap to share (`&self` everywhere).
#[derive(Debug)]
pub struct Tokenizer {
    data: TokenizerData,
    algo: Algo,
    pre_kind: Option<&'static str>,
    token_to_id: HashMap<String, u32>,
    /// llama.cpp token attributes (`vocab::attr`).
    attrs: Vec<u16>,
    /// `token_to_piece(id, special = true)` for every id.
    pieces: Vec<Vec<u8>>,
    /// Special tokens in matching order (longest text first).
    specials: Vec<u32>,
    eog: BTreeSet<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    eom: Option<u32>,
    unk: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
}

/// The vocabulary's size, once the per-token arrays are checked to cover it.
fn check_lengths(data: &TokenizerData) -> Result<usize, TokenizerError> {
    let n = data.tokens.len();
    if n == 0 {
        return Err(TokenizerError::EmptyVocab);
    }
    if n > u32::MAX as usize {
        return Err(TokenizerError::LengthMismatch {
            key: "tokenizer.ggml.tokens",
            got: n,
            want: u32::MAX as usize,
        });
    }
    if !data.scores.is_empty() && data.scores.len() < n {
        return Err(TokenizerError::LengthMismatch {
            key: "tokenizer.ggml.scores",
            got: data.scores.len(),
            want: n,
        });
    }
    if !data.token_types.is_empty() && data.token_types.len() < n {
        return Err(TokenizerError::LengthMismatch {
            key: "tokenizer.ggml.token_type",
            got: data.token_types.len(),
            want: n,
        });
    }
    Ok(n)
}

/// Token and merge texts as llama.cpp reads them, and the map from a token's text to its id.
fn index_tokens(data: &mut TokenizerData) -> Result<HashMap<String, u32>, TokenizerError> {
    let n = data.tokens.len();
    // Token texts and the reverse map. llama.cpp reads token and merge strings as C strings
    // (cut at the first NUL) and renames empty tokens.
    for s in data.tokens.iter_mut().chain(data.merges.iter_mut()) {
        if let Some(nul) = s.find('\0') {
            s.truncate(nul);
        }
    }
    for (i, t) in data.tokens.iter_mut().enumerate() {
        if t.is_empty() {
            *t = format!("[EMPTY_{i}]");
        }
    }
    let mut token_to_id = HashMap::with_capacity(n);
    for (i, t) in data.tokens.iter().enumerate() {
        if let Some(first) = token_to_id.insert(t.clone(), i as u32) {
            return Err(TokenizerError::DuplicateToken {
                id: i as u32,
                first,
                text: t.clone(),
            });
        }
    }
    Ok(token_to_id)
}

/// Each token's llama.cpp attributes from its GGUF type; byte tokens must name a byte.
fn attributes(data: &TokenizerData) -> Result<Vec<u16>, TokenizerError> {
    let n = data.tokens.len();
    let attrs: Vec<u16> = if data.token_types.is_empty() {
        vec![attr::NORMAL; n]
    } else {
        data.token_types[..n]
            .iter()
            .map(|&t| vocab::attr_of_type(t))
            .collect()
    };
    for (i, &a) in attrs.iter().enumerate() {
        if a & attr::BYTE != 0 && vocab::parse_byte_token(&data.tokens[i]).is_none() {
            return Err(TokenizerError::BadByteToken {
                id: i as u32,
                text: data.tokens[i].clone(),
            });
        }
    }
    Ok(attrs)
}

/// The algorithm for `kind`, its pre-tokenizer, and llama.cpp's defaults for the model type.
fn algorithm(
    kind: TokenizerKind,
    data: &TokenizerData,
) -> Result<(Algo, Option<&'static str>, Defaults), TokenizerError> {
    Ok(match kind {
        TokenizerKind::Bpe => {
            let cfg = PreConfig::for_name(data.pre.as_deref())?;
            let pre = PreTokenizer::new(data.pre.as_deref().unwrap_or("default"), cfg.regexes)?;
            let ranks = bpe::Ranks::new(&data.merges)?;
            let def = Defaults {
                bos: if cfg.no_default_bos { None } else { Some(11) },
                eos: Some(11),
                unk: None,
                add_bos: cfg.add_bos,
                add_space_prefix: false,
                clean_spaces: cfg.clean_spaces,
            };
            let algo = Algo::Bpe {
                ranks,
                pre,
                ignore_merges: cfg.ignore_merges,
            };
            (algo, Some(cfg.kind), def)
        }
        TokenizerKind::Spm => {
            let def = Defaults {
                bos: Some(1),
                eos: Some(2),
                unk: Some(0),
                add_bos: true,
                add_space_prefix: true,
                clean_spaces: false,
            };
            (Algo::Spm, None, def)
        }
    })
}

impl Tokenizer {
    /// Validate `data` and build the tokenizer, applying llama.cpp's per-model defaults.
    pub fn new(data: TokenizerData) -> Result<Tokenizer, TokenizerError> {
        let kind = match data.model.as_str() {
            "gpt2" => TokenizerKind::Bpe,
            "llama" => TokenizerKind::Spm,
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        let n = check_lengths(&data)?;
        let mut data = data;
        let token_to_id = index_tokens(&mut data)?;
        let mut attrs = attributes(&data)?;
        // Model-type defaults (llama.cpp `load`), then the metadata.
        let (algo, pre_kind, def) = algorithm(kind, &data)?;
        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        let explicit =
            |key: &'static str, id: Option<u32>| -> Result<Option<u32>, TokenizerError> {
                match id {
                    Some(i) if i as usize >= n => Err(TokenizerError::IdOutOfRange {
                        key,
                        id: i as u64,
                        n_vocab: n,
                    }),
                    other => Ok(other),
                }
            };
        let bos = explicit("tokenizer.ggml.bos_token_id", data.bos)?.or(in_range(def.bos));
        let eos = explicit("tokenizer.ggml.eos_token_id", data.eos)?.or(in_range(def.eos));
        let unk = explicit("tokenizer.ggml.unknown_token_id", data.unk)?.or(in_range(def.unk));
        let eot = explicit("tokenizer.ggml.eot_token_id", data.eot)?;
        let add_bos = data.add_bos.unwrap_or(def.add_bos);
        let add_eos = data.add_eos.unwrap_or(false);
        let add_space_prefix = data.add_space_prefix.unwrap_or(def.add_space_prefix);
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingSpecial {
                key: "tokenizer.ggml.add_bos_token",
                what: "BOS",
            });
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingSpecial {
                key: "tokenizer.ggml.add_eos_token",
                what: "EOS",
            });
        }

        let sp = vocab::detect_specials(&data.tokens, &mut attrs, eos, eot);

        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&i| {
                attrs[i as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(data.tokens[i as usize].len()));
        let name = data.name.as_deref().unwrap_or_default().to_lowercase();
        if name.contains("phi-3") || name.contains("phi3") {
            for &i in &specials {
                attrs[i as usize] |= attr::RSTRIP;
            }
            let mut set = |text: &str, on: bool| {
                if let Some(&i) = token_to_id.get(text) {
                    match on {
                        true => attrs[i as usize] |= attr::RSTRIP,
                        false => attrs[i as usize] &= !attr::RSTRIP,
                    }
                }
            };
            set("</s>", true);
            for text in ["<unk>", "<s>", "<|endoftext|>"] {
                set(text, false);
            }
        }

        let pieces = (0..n)
            .map(|i| decode::piece_bytes(kind, &data.tokens[i], attrs[i]))
            .collect();

        Ok(Tokenizer {
            data,
            algo,
            pre_kind,
            token_to_id,
            attrs,
            pieces,
            specials,
            eog: sp.eog,
            bos,
            eos,
            eot: sp.eot,
            eom: sp.eom,
            unk,
            add_bos,
            add_eos,
            add_space_prefix,
            clean_spaces: def.clean_spaces,
        })
    }

    /// Tokenize `text`, adding BOS/EOS as the model asks (`add_bos` / `add_eos`, with llama.cpp's
    /// defaults). With `parse_special`, control tokens written in the text (e.g. `<|im_start|>`)
    /// become their ids; user-defined tokens always do.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        self.encode_with(text, true, parse_special)
    }

    /// [`Tokenizer::encode`] with llama.cpp's `add_special` made explicit: `false` never adds
    /// BOS/EOS (for continuing a sequence).
    pub fn encode_with(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let specials = self.specials.iter().copied().filter(|&id| {
            parse_special || self.attrs[id as usize] & (attr::CONTROL | attr::UNKNOWN) == 0
        });
        let frags = special::partition(
            text,
            specials.map(|id| (id, self.data.tokens[id as usize].as_str())),
            |id| self.attrs[id as usize] & attr::RSTRIP != 0,
        );
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        match &self.algo {
            Algo::Spm => {
                let mut prev_special = true;
                for f in frags {
                    match f {
                        Fragment::Text { start, end } => {
                            let mut s = String::with_capacity(end - start + 4);
                            if self.add_space_prefix && prev_special {
                                s.push(' ');
                            }
                            s.push_str(&text[start..end]);
                            let s = s.replace(' ', "\u{2581}");
                            spm::tokenize(
                                &s,
                                &self.token_to_id,
                                &self.data.scores,
                                |b| self.spm_byte_token(b),
                                &mut out,
                            );
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            Algo::Bpe {
                ranks,
                pre,
                ignore_merges,
            } => {
                for f in frags {
                    match f {
                        Fragment::Text { start, end } => self.bpe_fragment(
                            &text[start..end],
                            ranks,
                            pre,
                            *ignore_merges,
                            &mut out,
                        ),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        out
    }

    fn bpe_fragment(
        &self,
        text: &str,
        ranks: &bpe::Ranks,
        pre: &PreTokenizer,
        ignore_merges: bool,
        out: &mut Vec<u32>,
    ) {
        let mut word = String::new();
        for w in pre.split(text) {
            word.clear();
            bytes::encode_bytes(w, &mut word);
            if ignore_merges {
                if let Some(&id) = self.token_to_id.get(word.as_str()) {
                    out.push(id);
                    continue;
                }
            }
            for (s, l) in bpe::merge_word(&word, ranks) {
                let sym = &word[s..s + l];
                match self.token_to_id.get(sym) {
                    Some(&id) => out.push(id),
                    // A merge whose result is not in the vocabulary: fall back to one token per
                    // byte character (llama.cpp looks up single *bytes* of the UTF-8 here, which
                    // only works for ASCII stand-ins and silently drops the rest).
                    None => {
                        let mut buf = [0u8; 4];
                        for c in sym.chars() {
                            if let Some(&id) = self.token_to_id.get(&*c.encode_utf8(&mut buf)) {
                                out.push(id);
                            }
                        }
                    }
                }
            }
        }
    }

    /// SentencePiece byte fallback: `<0xNN>`, else the byte as a one-character token, else UNK
    /// (llama.cpp throws here; SentencePiece without byte fallback emits UNK).
    fn spm_byte_token(&self, b: u8) -> Option<u32> {
        let hex = format!("<0x{b:02X}>");
        if let Some(&id) = self.token_to_id.get(&hex) {
            return Some(id);
        }
        if b.is_ascii() {
            if let Some(&id) = self.token_to_id.get(&(b as char).to_string()) {
                return Some(id);
            }
        }
        self.unk
    }

    /// The bytes token `id` stands for, as llama.cpp's `token_to_piece(special = true)`: GPT-2
    /// byte characters mapped back to bytes (BPE), `▁` as a space and `<0xNN>` as its byte
    /// (SentencePiece), control and user-defined tokens as their text, unused/undefined tokens as
    /// nothing. Empty for an id outside the vocabulary.
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        self.pieces.get(id as usize).cloned().unwrap_or_default()
    }

    /// Detokenize as llama.cpp's `llama_detokenize(remove_special = false, unparse_special =
    /// true)`: concatenated [`Tokenizer::token_bytes`], minus one leading space when the model adds
    /// a space prefix, with llama.cpp's `clean_spaces` pass where the pre-tokenizer type enables
    /// it, as lossy UTF-8. Ids outside the vocabulary are skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// [`Tokenizer::decode`] before the UTF-8 conversion.
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut first = true;
        for &id in ids {
            let Some(p) = self.pieces.get(id as usize) else {
                continue;
            };
            let p = if first && self.add_space_prefix {
                p.strip_prefix(b" ").unwrap_or(p)
            } else {
                p
            };
            first = false;
            out.extend_from_slice(p);
        }
        if self.clean_spaces {
            decode::clean_spaces(&mut out);
        }
        out
    }

    /// Token text as stored in the vocabulary ("" for an id outside it).
    pub fn piece(&self, id: u32) -> &str {
        self.data.tokens.get(id as usize).map_or("", String::as_str)
    }

    /// The id of a token text, if the vocabulary has it.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(text).copied()
    }

    pub fn vocab_size(&self) -> usize {
        self.data.tokens.len()
    }

    pub fn kind(&self) -> TokenizerKind {
        match self.algo {
            Algo::Bpe { .. } => TokenizerKind::Bpe,
            Algo::Spm => TokenizerKind::Spm,
        }
    }

    /// llama.cpp's name of the pre-tokenizer type (`LLAMA_VOCAB_PRE_TYPE_*` without the prefix);
    /// `None` for SentencePiece.
    pub fn pre_type(&self) -> Option<&'static str> {
        self.pre_kind
    }

    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// End-of-turn token: `tokenizer.ggml.eot_token_id`, else found by text like llama.cpp.
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }

    pub fn unk(&self) -> Option<u32> {
        self.unk
    }

    /// Whether [`Tokenizer::encode`] starts with BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether [`Tokenizer::encode`] ends with EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether generation ends at `id`: EOS, EOT, EOM, and the tokens llama.cpp recognises by text
    /// (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, FIM pad/repo/separator, ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// All end-of-generation ids, ascending.
    pub fn eog_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.eog.iter().copied()
    }

    /// Control tokens (type CONTROL, or recognised as special by their text).
    pub fn is_control(&self, id: u32) -> bool {
        self.attrs
            .get(id as usize)
            .is_some_and(|a| a & attr::CONTROL != 0)
    }

    /// The vocabulary this tokenizer was built from (token and merge texts cut at a NUL and empty
    /// tokens renamed `[EMPTY_<id>]`, as llama.cpp reads them).
    pub fn data(&self) -> &TokenizerData {
        &self.data
    }

    /// End-of-message token (`<|eom_id|>`), found by text like llama.cpp.
    pub fn eom(&self) -> Option<u32> {
        self.eom
    }
}
