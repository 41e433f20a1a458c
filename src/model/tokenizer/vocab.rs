//! Token attributes and the special-token bookkeeping llama.cpp derives from a vocabulary at load
//! time: attribute flags from `tokenizer.ggml.token_type`, default BOS/EOS/UNK ids per tokenizer
//! model, the EOT/EOM/FIM tokens it recognises by their text, and the set of end-of-generation
//! tokens (`llama_vocab::impl::load`).

use std::collections::BTreeSet;

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
pub mod token_type {
    pub const UNDEFINED: i32 = 0;
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// Attribute bits (llama.cpp's `llama_token_attr`).
pub(crate) mod attr {
    pub const UNDEFINED: u16 = 0;
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    /// Whitespace after the token is dropped when it is split out of text.
    pub const RSTRIP: u16 = 1 << 8;
}

/// Attribute of a token type; types outside 0..=6 are UNDEFINED, as in llama.cpp.
pub(crate) fn attr_of_type(t: i32) -> u16 {
    match t {
        token_type::NORMAL => attr::NORMAL,
        token_type::UNKNOWN => attr::UNKNOWN,
        token_type::CONTROL => attr::CONTROL,
        token_type::USER_DEFINED => attr::USER_DEFINED,
        token_type::UNUSED => attr::UNUSED,
        token_type::BYTE => attr::BYTE,
        _ => attr::UNDEFINED,
    }
}

/// The byte of a `<0xNN>` token text.
pub(crate) fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Special ids after auto-detection, and the end-of-generation set.
#[derive(Debug, Default)]
pub(crate) struct Specials {
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub eog: BTreeSet<u32>,
}

/// llama.cpp's text-based detection of EOT/EOM/FIM tokens and of the end-of-generation set.
/// Recognised tokens get the CONTROL attribute, as in llama.cpp. Where several tokens match one
/// role, llama.cpp takes whichever its hash map yields first; here the lowest id wins (all of them
/// are end-of-generation either way).
pub(crate) fn detect_specials(
    texts: &[String],
    attrs: &mut [u16],
    eos: Option<u32>,
    eot: Option<u32>,
) -> Specials {
    let mut eot = eot;
    let mut eom = None;
    let mut fim: [Option<u32>; 6] = [None; 6];
    let fim_lists = [
        FIM_PRE_TEXTS,
        FIM_SUF_TEXTS,
        FIM_MID_TEXTS,
        FIM_PAD_TEXTS,
        FIM_REP_TEXTS,
        FIM_SEP_TEXTS,
    ];
    for (id, text) in texts.iter().enumerate() {
        let id = id as u32;
        let t = text.as_str();
        let mut hit = false;
        if eot.is_none() && EOT_TEXTS.contains(&t) {
            eot = Some(id);
            hit = true;
        }
        if eom.is_none() && EOM_TEXTS.contains(&t) {
            eom = Some(id);
            hit = true;
        }
        for (slot, list) in fim.iter_mut().zip(fim_lists) {
            if slot.is_none() && list.contains(&t) {
                *slot = Some(id);
                hit = true;
            }
        }
        if hit {
            attrs[id as usize] |= attr::CONTROL;
        }
    }

    let mut eog = BTreeSet::new();
    // FIM pad, repo and file-separator tokens end generation.
    eog.extend(fim[3..].iter().flatten());
    for (id, text) in texts.iter().enumerate() {
        if EOG_TEXTS.contains(&text.as_str()) {
            eog.insert(id as u32);
            attrs[id] |= attr::CONTROL;
        }
    }
    // gpt-oss: these always render.
    for (id, text) in texts.iter().enumerate() {
        if matches!(
            text.as_str(),
            "<|channel|>" | "<|message|>" | "<|start|>" | "<|constrain|>"
        ) {
            attrs[id] = attr::USER_DEFINED;
        }
    }
    eog.extend([eos, eot, eom].into_iter().flatten());

    let find = |eog: &BTreeSet<u32>, s: &str| {
        eog.iter()
            .copied()
            .find(|&id| texts.get(id as usize).is_some_and(|t| t == s))
    };
    // o200k_harmony / solar-open: "<|end|>" is not end-of-generation next to "<|return|>" and
    // "<|call|>" (or "<|calls|>" and "<|flush|>").
    let has_return = find(&eog, "<|return|>").is_some();
    let has_call = find(&eog, "<|call|>").is_some() || find(&eog, "<|calls|>").is_some();
    let has_flush = find(&eog, "<|flush|>").is_some();
    if has_call && (has_return || has_flush) {
        if let Some(end) = find(&eog, "<|end|>") {
            eog.remove(&end);
            attrs[end as usize] = attr::USER_DEFINED;
        }
    }
    // gemma4 / plamo2: "</s>" is a normal token there.
    if find(&eog, "<|tool_response>").is_some() || find(&eog, "<|plamo:eos|>").is_some() {
        if let Some(s) = find(&eog, "</s>") {
            eog.remove(&s);
            attrs[s as usize] = attr::NORMAL;
        }
    }
    Specials { eot, eom, eog }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_parse() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(10));
        assert_eq!(parse_byte_token("<0xff>"), Some(255));
        assert_eq!(parse_byte_token("<0xFFF>"), None);
        assert_eq!(parse_byte_token("0x0A"), None);
        assert_eq!(parse_byte_token("<0xZZ>"), None);
    }

    #[test]
    fn detects_eot_and_end_of_generation_by_text() {
        let texts: Vec<String> = [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "a",
            "<reponame>",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut attrs = vec![attr::NORMAL; texts.len()];
        let s = detect_specials(&texts, &mut attrs, Some(2), None);
        assert_eq!(s.eot, Some(0));
        assert_eq!(s.eog.iter().copied().collect::<Vec<_>>(), [0, 2, 4]);
        assert_ne!(attrs[0] & attr::CONTROL, 0);
        assert_eq!(attrs[1], attr::NORMAL);
        assert_eq!(attrs[3], attr::NORMAL);
    }
}
