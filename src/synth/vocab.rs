//! A synthetic tokenizer of any vocabulary size and of the kind the real model carries, so a
//! synthetic model has a tokenizer that both cbtop and llama.cpp load. Byte-level BPE (qwen,
//! llama 3, SmolLM; llama.cpp refuses a `gpt2` vocabulary without merges): the 256 byte
//! tokens, then every pair and triple of printable symbols, each reachable by its merge, then
//! the family's special tokens. SentencePiece (Phi-3, Mistral: `llama` with byte fallback):
//! `<unk>`, `<s>`, `</s>`, the 256 `<0xNN>` byte tokens, then printable symbols (space as
//! `▁`), their pairs and triples with falling scores, then the family's special tokens. Text
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
    let mut level: Vec<String> = symbols.clone();
    'outer: while tokens.len() < n_plain {
        let mut next = Vec::new();
        for a in &level {
            for b in &symbols {
                if tokens.len() == n_plain {
                    break 'outer;
                }
                let t = format!("{a}{b}");
                merges.push(format!("{a} {b}"));
                tokens.push(t.clone());
                next.push(t);
            }
        }
        level = next;
    }
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
    let mut level = vec![String::new()];
    'outer: while tokens.len() < n_plain {
        let mut next = Vec::new();
        for a in &level {
            for b in &symbols {
                if tokens.len() >= n_plain {
                    break 'outer;
                }
                let t = format!("{a}{b}");
                tokens.push(t.clone());
                types.push(NORMAL);
                next.push(t);
            }
        }
        level = next;
    }
    tokens.truncate(n_plain);
    types.truncate(n_plain);
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
}
