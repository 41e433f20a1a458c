//! The tokenizers (byte-level BPE of the llama-bpe, qwen2 and smollm families, and
//! SentencePiece): encoding arbitrary bytes and soups of special-token text, and decoding
//! arbitrary ids (in and out of the vocabulary), never panics, and every id produced is inside
//! the vocabulary.
//!
//! Input: byte 0 picks the tokenizer (low 2 bits) and the mode (next 2 bits) and the
//! add/parse-special flags (bits 4, 5); the rest is the text, the soup recipe or the ids.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use cbtop::gguf::GgufFile;
use cbtop::model::tokenizer::{token_type, Tokenizer, TokenizerData};
use libfuzzer_sys::fuzz_target;

static LLAMA: &[u8] =
    include_bytes!("../../tests/fixtures/conformance/models/conf-llama-Q4_K_S.gguf");
static QWEN2: &[u8] =
    include_bytes!("../../tests/fixtures/conformance/models/conf-qwen2-Q2_K.gguf");

fn from_gguf(name: &str, bytes: &[u8]) -> Tokenizer {
    let f = GgufFile::from_bytes(Path::new(name), bytes.to_vec()).expect("fixture parses");
    Tokenizer::from_gguf(&f).expect("fixture tokenizer")
}

/// SmolLM2's family, from the synthetic vocabulary `cbtop synth` writes.
fn smollm() -> Tokenizer {
    let v = cbtop::synth::vocab::build("llama", "smollm2-135m", 2048);
    Tokenizer::new(TokenizerData {
        model: "gpt2".into(),
        pre: Some(v.pre.into()),
        tokens: v.tokens,
        token_types: v.types,
        merges: v.merges,
        bos: Some(v.bos),
        eos: Some(v.eos),
        add_bos: Some(v.add_bos),
        ..TokenizerData::default()
    })
    .expect("synthetic smollm tokenizer")
}

/// A SentencePiece vocabulary made from a BPE one: <unk>, <s>, </s>, the 256 byte tokens, the
/// UTF-8 tokens with spaces as `▁` (score -id), then user-defined and control tokens.
fn spm(from: &Tokenizer) -> Tokenizer {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![
        token_type::UNKNOWN,
        token_type::CONTROL,
        token_type::CONTROL,
    ];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([token_type::BYTE; 256]);
    let mut scores = vec![0.0f32; tokens.len()];
    let mut seen: std::collections::HashSet<String> = tokens.iter().cloned().collect();
    for (i, &ty) in from.data().token_types.iter().enumerate() {
        if ty != token_type::NORMAL {
            continue;
        }
        let Ok(text) = String::from_utf8(from.token_bytes(i as u32)) else {
            continue;
        };
        let piece = text.replace(' ', "\u{2581}");
        // Tokenizer::new cuts token text at a NUL (as llama.cpp does): skip those.
        if piece.is_empty() || piece.contains('\0') || !seen.insert(piece.clone()) {
            continue;
        }
        tokens.push(piece);
        types.push(token_type::NORMAL);
        scores.push(-(i as f32));
    }
    for (u, ty) in [
        ("<tool>", token_type::USER_DEFINED),
        ("\u{2581}<tool>", token_type::USER_DEFINED),
        ("<|im_start|>", token_type::CONTROL),
        ("<|im_end|>", token_type::CONTROL),
    ] {
        tokens.push(u.into());
        types.push(ty);
        scores.push(0.0);
    }
    Tokenizer::new(TokenizerData {
        model: "llama".into(),
        tokens,
        scores,
        token_types: types,
        bos: Some(1),
        eos: Some(2),
        unk: Some(0),
        ..TokenizerData::default()
    })
    .expect("spm tokenizer")
}

struct Fixture {
    tok: Tokenizer,
    /// Texts of the special (control, user-defined) tokens and pieces of them.
    soup: Vec<String>,
}

fn fixtures() -> &'static [Fixture; 4] {
    static F: OnceLock<[Fixture; 4]> = OnceLock::new();
    F.get_or_init(|| {
        let llama = from_gguf("llama.gguf", LLAMA);
        let spm = spm(&llama);
        [llama, from_gguf("qwen2.gguf", QWEN2), smollm(), spm].map(|tok| {
            let mut soup: Vec<String> = Vec::new();
            for (i, &ty) in tok.data().token_types.iter().enumerate() {
                if ty == token_type::CONTROL || ty == token_type::USER_DEFINED {
                    let t = tok.piece(i as u32).to_string();
                    let half: String = t.chars().take(t.chars().count() / 2).collect();
                    soup.push(half);
                    soup.push(t);
                }
            }
            soup.extend(
                [
                    "<|", "|>", "<s>", "</s>", "\u{2581}", " ", "\n", "\u{0120}", "<0x41>", "'s",
                ]
                .map(String::from),
            );
            Fixture { tok, soup }
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let fx = &fixtures()[(head & 3) as usize];
    let tok = &fx.tok;
    let n = tok.vocab_size() as u32;
    let (add_special, parse_special) = (head & 0x10 != 0, head & 0x20 != 0);
    let check = |ids: &[u32]| {
        assert!(ids.iter().all(|&i| i < n), "an id outside the vocabulary");
        let _ = tok.decode(ids);
    };
    match (head >> 2) & 3 {
        // Arbitrary bytes as text.
        0 => {
            let text = String::from_utf8_lossy(rest);
            check(&tok.encode_with(&text, add_special, parse_special));
        }
        // Byte-level BPE is lossless: the pieces of plain text (no specials added or parsed)
        // are its bytes. (`decode` may also clean spaces, as llama.cpp does.)
        3 => {
            let text = String::from_utf8_lossy(rest);
            let ids = tok.encode_with(&text, false, false);
            check(&ids);
            if (head & 3) != 3 {
                let bytes: Vec<u8> = ids.iter().flat_map(|&i| tok.token_bytes(i)).collect();
                assert_eq!(bytes, text.as_bytes(), "round trip of {text:?}: {ids:?}");
            }
        }
        // Special-token soup: each byte picks a soup entry or stands for a character.
        1 => {
            let mut text = String::new();
            for &b in rest {
                if b & 0x80 != 0 {
                    text.push_str(&fx.soup[(b & 0x7f) as usize % fx.soup.len()]);
                } else {
                    text.push(b as char);
                }
            }
            check(&tok.encode_with(&text, add_special, true));
        }
        // Arbitrary ids, some outside the vocabulary.
        _ => {
            let ids: Vec<u32> = rest
                .chunks(2)
                .map(|c| {
                    let x = u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
                    if x & 0x8000 != 0 {
                        u32::MAX - (x & 0xff)
                    } else {
                        x % (n + 16)
                    }
                })
                .collect();
            let _ = tok.decode(&ids);
            let _ = tok.decode_bytes(&ids);
            for &i in &ids {
                let _ = tok.token_bytes(i);
                let _ = tok.piece(i);
                let _ = tok.is_eog(i);
                let _ = tok.is_control(i);
            }
        }
    }
});
