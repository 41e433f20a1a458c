//! A synthetic tokenizer of any vocabulary size and of the kind the real model carries, so a
//! synthetic model has a tokenizer that both cbtop and llama.cpp load. Byte-level BPE (qwen,
//! llama 3, SmolLM; llama.cpp refuses a `gpt2` vocabulary without merges): the 256 byte
//! tokens, then every pair and triple of printable symbols, each reachable by its merge, then
//! the family's special tokens. SentencePiece (Phi-3, Mistral: `llama` with byte fallback):
//! `<unk>`, `<s>`, `</s>`, the 256 `<0xNN>` byte tokens, then printable symbols (space as
//! `▁`), their pairs and triples with falling scores, then the family's special tokens.
//! Gemma's (gemma3, SentencePiece with byte fallback and no dummy-prefix space): its special
//! tokens at their ids, the byte tokens, then `▁` and the printable symbols, their pairs,
//! triples..., shorter pieces scored higher. Text
//! tokenizes (into short pieces); the weights are random, so the text a synthetic model
//! writes is noise.

use crate::model::tokenizer::byte_to_char;

/// Token type ids of GGUF's `tokenizer.ggml.token_type`.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const BYTE: i32 = 6;

/// The vocabulary of a synthetic model.
pub struct SynthVocab {
    /// `tokenizer.ggml.model`: `gpt2` (byte-level BPE) or `llama` (SentencePiece).
    pub model: &'static str,
    pub tokens: Vec<String>,
    pub types: Vec<i32>,
    /// BPE merges (empty for SentencePiece).
    pub merges: Vec<String>,
    /// SentencePiece scores (empty for BPE).
    pub scores: Vec<f32>,
    /// The pre-tokenizer name llama.cpp knows the architecture's real tokenizer by (None for
    /// SentencePiece, which has none).
    pub pre: Option<&'static str>,
    pub unk: Option<u32>,
    pub bos: u32,
    pub eos: u32,
    pub add_bos: bool,
    /// End-of-turn token, when the family has one distinct from `eos`.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.add_space_prefix`, where the family sets it (gemma3: false).
    pub add_space_prefix: Option<bool>,
}
/// Append pieces to `tokens` until it holds `size`, level by level: each piece of `level`
/// followed by each symbol, in order, the new pieces making the next level (start from
/// `[""]` to take the symbols themselves first). `merged(a, b)` sees each new piece's parts.
fn grow_pieces(
    tokens: &mut Vec<String>,
    symbols: &[String],
    mut level: Vec<String>,
    size: usize,
    mut merged: impl FnMut(&str, &str),
) {
    while tokens.len() < size {
        let mut next = Vec::new();
        for a in &level {
            for b in symbols {
                if tokens.len() >= size {
                    return;
                }
                let t = format!("{a}{b}");
                merged(a, b);
                tokens.push(t.clone());
                next.push(t);
            }
        }
        level = next;
    }
}

/// Special tokens per family: (pre-tokenizer, specials, index of bos, index of eos, eot, add_bos).
fn family(
    arch: &str,
    shape_name: &str,
) -> (
    &'static str,
    &'static [&'static str],
    usize,
    usize,
    Option<usize>,
    bool,
) {
    if shape_name.to_ascii_lowercase().starts_with("smollm") {
        (
            "smollm",
            &["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            1,
            2,
            None,
            false,
        )
    } else if arch == "qwen2" || arch == "qwen3" {
        (
            "qwen2",
            &["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            0,
            0,
            Some(2),
            false,
        )
    } else {
        (
            "llama-bpe",
            &["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
            0,
            1,
            Some(2),
            true,
        )
    }
}

/// Whether the family's real tokenizer is SentencePiece: Phi-3's and Mistral's.
pub fn is_spm(arch: &str, shape_name: &str) -> bool {
    arch == "phi3" || shape_name.to_ascii_lowercase().starts_with("mistral")
}

/// A vocabulary of exactly `size` tokens (at least 256 + 3, SentencePiece 3 + 256 + 8).
pub fn build(arch: &str, shape_name: &str, size: usize) -> SynthVocab {
    if arch == "gemma3" {
        return gemma(size);
    }
    if is_spm(arch, shape_name) {
        return build_spm(arch, size);
    }
    let (pre, specials, bos, eos, eot, add_bos) = family(arch, shape_name);
    let n_plain = size - specials.len();
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
    tokens.truncate(n_plain);
    let mut merges = Vec::new();
    // printable ASCII and the space ('Ġ' in byte-level form)
    let symbols: Vec<String> = (32u8..=126).map(|b| byte_to_char(b).to_string()).collect();
    grow_pieces(&mut tokens, &symbols, symbols.clone(), n_plain, |a, b| {
        merges.push(format!("{a} {b}"))
    });
    let first_special = tokens.len() as u32;
    let mut types = vec![NORMAL; tokens.len()];
    for s in specials {
        tokens.push(s.to_string());
        types.push(CONTROL);
    }
    SynthVocab {
        model: "gpt2",
        tokens,
        types,
        merges,
        scores: Vec::new(),
        pre: Some(pre),
        unk: None,
        bos: first_special + bos as u32,
        eos: first_special + eos as u32,
        add_bos,
        eot: eot.map(|i| first_special + i as u32),
        add_space_prefix: None,
    }
}

/// A SentencePiece vocabulary of exactly `size` tokens, llama's layout: `<unk>` 0, `<s>` 1,
/// `</s>` 2, bytes 3..259, pieces, then (Phi-3) its chat tokens, `<|endoftext|>` the eos.
fn build_spm(arch: &str, size: usize) -> SynthVocab {
    let specials: &[&str] = if arch == "phi3" {
        &[
            "<|endoftext|>",
            "<|assistant|>",
            "<|end|>",
            "<|user|>",
            "<|system|>",
        ]
    } else {
        &[]
    };
    let n_plain = size.saturating_sub(specials.len());
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![UNKNOWN, CONTROL, CONTROL];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(BYTE);
    }
    let symbols: Vec<String> = (32u8..=126)
        .map(|b| match b {
            b' ' => "\u{2581}".to_string(),
            b => (b as char).to_string(),
        })
        .collect();
    grow_pieces(
        &mut tokens,
        &symbols,
        vec![String::new()],
        n_plain,
        |_, _| {},
    );
    tokens.truncate(n_plain);
    types.resize(tokens.len(), NORMAL);
    // Shorter pieces first and scored higher, as a trained vocabulary roughly is.
    let mut scores: Vec<f32> = (0..tokens.len()).map(|i| -(i as f32)).collect();
    scores[..3].iter_mut().for_each(|s| *s = 0.0);
    let first_special = tokens.len() as u32;
    for s in specials {
        tokens.push(s.to_string());
        types.push(CONTROL);
        scores.push(0.0);
    }
    let phi3 = !specials.is_empty();
    SynthVocab {
        model: "llama",
        tokens,
        types,
        merges: Vec::new(),
        scores,
        pre: None,
        unk: Some(0),
        bos: 1,
        eos: if phi3 { first_special } else { 2 },
        add_bos: true,
        eot: phi3.then_some(first_special + 2),
        add_space_prefix: None,
    }
}

/// Gemma's special tokens at their ids in the real vocabulary: `<pad>` 0, `<eos>` 1, `<bos>`
/// 2, `<unk>` 3, `<mask>` 4, `<start_of_turn>` 105, `<end_of_turn>` 106 (ids between are
/// unused controls here).
const GEMMA_SPECIALS: usize = 107;

/// A Gemma-style SentencePiece vocabulary of exactly `size` tokens (`size >= 512`), as
/// llama.cpp's converter writes gemma3's (`tokenizer.ggml.model` = llama, BOS added, no
/// dummy-prefix space, byte fallback).
fn gemma(size: usize) -> SynthVocab {
    let mut tokens: Vec<String> = Vec::with_capacity(size);
    let mut types = Vec::with_capacity(size);
    for i in 0..GEMMA_SPECIALS {
        tokens.push(match i {
            0 => "<pad>".to_string(),
            1 => "<eos>".to_string(),
            2 => "<bos>".to_string(),
            3 => "<unk>".to_string(),
            4 => "<mask>".to_string(),
            105 => "<start_of_turn>".to_string(),
            106 => "<end_of_turn>".to_string(),
            _ => format!("<unused{}>", i - 5),
        });
        types.push(if i == 3 { UNKNOWN } else { CONTROL });
    }
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(BYTE);
    }
    // `▁` (the escaped space) and printable ASCII, then longer pieces built from them, each
    // the concatenation of a shorter piece and one symbol so SentencePiece's merges reach it.
    let symbols: Vec<String> = std::iter::once("\u{2581}".to_string())
        .chain((33u8..=126).map(|b| (b as char).to_string()))
        .collect();
    grow_pieces(&mut tokens, &symbols, vec![String::new()], size, |_, _| {});
    tokens.truncate(size);
    types.resize(tokens.len(), NORMAL);
    // Normal pieces score by rank (earlier, shorter pieces merge first); specials and bytes 0.
    let first_piece = GEMMA_SPECIALS + 256;
    let scores = (0..tokens.len())
        .map(|i| i.checked_sub(first_piece).map_or(0.0, |r| -(r as f32)))
        .collect();
    SynthVocab {
        model: "llama",
        tokens,
        types,
        merges: Vec::new(),
        scores,
        pre: None,
        bos: 2,
        eos: 1,
        add_bos: true,
        eot: Some(106),
        unk: Some(3),
        add_space_prefix: Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn exact_size_unique_tokens_and_reachable_merges() {
        for (arch, name, size) in [
            ("qwen2", "Qwen2.5-0.5B", 151936),
            ("llama", "SmolLM2-135M", 49152),
        ] {
            let v = build(arch, name, size);
            assert_eq!(v.tokens.len(), size);
            assert_eq!(v.types.len(), size);
            let set: HashSet<&String> = v.tokens.iter().collect();
            assert_eq!(set.len(), size, "tokens are unique");
            for m in v.merges.iter().take(2000) {
                let (a, b) = m.split_once(' ').unwrap();
                assert!(
                    set.contains(&a.to_string()) && set.contains(&b.to_string()),
                    "{m}"
                );
                assert!(set.contains(&format!("{a}{b}")), "{m}");
            }
            assert!((v.bos as usize) < size && (v.eos as usize) < size);
        }
    }

    #[test]
    fn sentencepiece_vocabularies_have_llamas_layout() {
        for (arch, name, size) in [
            ("phi3", "Phi-3-mini", 32064),
            ("llama", "Mistral-7B", 32768),
        ] {
            let v = build(arch, name, size);
            assert_eq!(v.model, "llama");
            assert_eq!(
                (v.tokens.len(), v.types.len(), v.scores.len()),
                (size, size, size)
            );
            let set: HashSet<&String> = v.tokens.iter().collect();
            assert_eq!(set.len(), size, "tokens are unique");
            assert_eq!(v.tokens[3], "<0x00>");
            assert_eq!(v.types[258], BYTE);
            assert_eq!(v.tokens[259], "\u{2581}");
            assert_eq!((v.bos, v.unk), (1, Some(0)));
            assert!(v.merges.is_empty() && v.pre.is_none());
        }
        assert_eq!(build("phi3", "Phi-3-mini", 32064).eos, 32059);
        assert_eq!(build("llama", "Mistral-7B", 32768).eos, 2);
        assert!(!is_spm("qwen3", "Qwen3-8B"));
    }

    /// Gemma's SentencePiece vocabulary at its real size: every token unique, every piece
    /// reachable by a merge of two shorter ones, the special ids where Gemma has them, all 256
    /// byte tokens; the tokenizer built from it encodes text with BOS, no dummy-prefix space
    /// and byte fallback, and decodes it back.
    #[test]
    fn gemma_vocabulary_tokenizes_and_decodes() {
        use crate::model::tokenizer::{Tokenizer, TokenizerData};
        let size = 262_144;
        let v = build("gemma3", "Gemma-3-1B", size);
        assert_eq!(
            (v.tokens.len(), v.types.len(), v.scores.len()),
            (size, size, size)
        );
        let set: HashSet<&String> = v.tokens.iter().collect();
        assert_eq!(set.len(), size, "tokens are unique");
        assert_eq!(
            [
                &v.tokens[0],
                &v.tokens[1],
                &v.tokens[2],
                &v.tokens[3],
                &v.tokens[106]
            ],
            ["<pad>", "<eos>", "<bos>", "<unk>", "<end_of_turn>"]
        );
        for b in 0..=255u8 {
            assert!(set.contains(&format!("<0x{b:02X}>")));
        }
        for t in v.tokens[GEMMA_SPECIALS + 256..].iter() {
            let chars: Vec<char> = t.chars().collect();
            if chars.len() > 1 {
                let head: String = chars[..chars.len() - 1].iter().collect();
                assert!(set.contains(&head), "{t}: no {head}");
            }
        }
        let tok = Tokenizer::new(TokenizerData {
            name: Some("Gemma-3-1B".to_string()),
            model: v.model.to_string(),
            pre: v.pre.map(str::to_string),
            tokens: v.tokens.clone(),
            scores: v.scores.clone(),
            token_types: v.types.clone(),
            merges: Vec::new(),
            bos: Some(v.bos),
            eos: Some(v.eos),
            eot: v.eot,
            unk: v.unk,
            add_bos: Some(v.add_bos),
            add_eos: None,
            add_space_prefix: v.add_space_prefix,
        })
        .unwrap();
        let id = |t: &str| v.tokens.iter().position(|x| x == t).unwrap() as u32;
        // No dummy prefix: "Hi there" is "Hi" "▁th" "ere"-style pieces, not "▁Hi".
        let ids = tok.encode_with("Hi there", true, false);
        assert_eq!(ids[0], 2, "BOS first");
        assert_eq!(ids[1], id("Hi"), "{ids:?}");
        assert!(ids.contains(&id("\u{2581}th")) || ids.contains(&id("\u{2581}the")));
        // A character with no piece falls back to its UTF-8 bytes.
        let ids = tok.encode_with("é", false, false);
        assert_eq!(ids, [id("<0xC3>"), id("<0xA9>")]);
        for text in ["Hi there", "a  b\n\tc é ü 42!", "The quick brown fox."] {
            let ids = tok.encode_with(text, false, false);
            assert_eq!(tok.decode(&ids), text, "{ids:?}");
        }
    }
}
