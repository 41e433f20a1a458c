//! A synthetic byte-level BPE tokenizer of any vocabulary size, so a synthetic model carries a
//! tokenizer that both cbtop and llama.cpp load (llama.cpp refuses a `gpt2` vocabulary without
//! merges). Tokens are the 256 byte tokens, then every pair and triple of printable symbols,
//! each reachable by its merge, then the architecture's special tokens. Text tokenizes (into
//! short pieces); the weights are random, so the text a synthetic model writes is noise.

use crate::model::tokenizer::byte_to_char;

/// Token type ids of GGUF's `tokenizer.ggml.token_type`.
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;

/// The vocabulary of a synthetic model.
pub struct SynthVocab {
    pub tokens: Vec<String>,
    pub types: Vec<i32>,
    pub merges: Vec<String>,
    /// The pre-tokenizer name llama.cpp knows the architecture's real tokenizer by.
    pub pre: &'static str,
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
    } else if arch == "qwen2" {
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

/// A vocabulary of exactly `size` tokens (at least 256 + 3).
pub fn build(arch: &str, shape_name: &str, size: usize) -> SynthVocab {
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
        tokens,
        types,
        merges,
        pre,
        bos: first_special + bos as u32,
        eos: first_special + eos as u32,
        add_bos,
        eot: eot.map(|i| first_special + i as u32),
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
}
