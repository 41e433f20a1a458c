//! Whole-tokenizer unit tests on small hand-made vocabularies (the real-model conformance tests
//! are in `tests/tokenizer.rs`).

use super::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// A SentencePiece vocabulary: <unk>, <s>, </s>, 256 byte tokens, then scored pieces.
fn spm_data() -> TokenizerData {
    let mut tokens = s(&["<unk>", "<s>", "</s>"]);
    let mut types = vec![
        token_type::UNKNOWN,
        token_type::CONTROL,
        token_type::CONTROL,
    ];
    let mut scores = vec![0.0, 0.0, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(token_type::BYTE);
        scores.push(0.0);
    }
    for (t, sc) in [
        ("▁", -1.0),
        ("h", -2.0),
        ("e", -2.0),
        ("l", -2.0),
        ("o", -2.0),
        ("w", -2.0),
        ("r", -2.0),
        ("d", -2.0),
        ("▁h", -3.0),
        ("ll", -3.5),
        ("▁he", -4.0),
        ("llo", -4.5),
        ("▁hello", -5.0),
        ("▁w", -3.0),
        ("or", -3.0),
        ("ld", -3.0),
        ("▁wor", -6.0),
        ("▁world", -7.0),
        ("<tool>", 0.0),
    ] {
        tokens.push(t.to_string());
        types.push(if t == "<tool>" {
            token_type::USER_DEFINED
        } else {
            token_type::NORMAL
        });
        scores.push(sc);
    }
    TokenizerData {
        model: "llama".into(),
        tokens,
        scores,
        token_types: types,
        ..Default::default()
    }
}

fn id(t: &Tokenizer, text: &str) -> u32 {
    t.token_id(text)
        .unwrap_or_else(|| panic!("{text:?} not in vocab"))
}

#[test]
fn spm_prefix_space_bos_and_scores() {
    let t = Tokenizer::new(spm_data()).unwrap();
    assert_eq!(t.kind(), TokenizerKind::Spm);
    assert_eq!((t.bos(), t.eos(), t.unk()), (Some(1), Some(2), Some(0)));
    assert!(t.add_bos());
    let ids = t.encode("hello world", false);
    assert_eq!(ids, [1, id(&t, "▁hello"), id(&t, "▁world")]);
    // Decoding keeps the control token's text and drops nothing else.
    assert_eq!(t.decode(&ids), "<s> hello world");
    assert_eq!(t.decode(&ids[1..]), "hello world");
    // Without add_special there is no BOS.
    assert_eq!(t.encode_with("hello", false, false), [id(&t, "▁hello")]);
}

#[test]
fn spm_merges_highest_score_first() {
    let t = Tokenizer::new(spm_data()).unwrap();
    // "▁hell": "▁h"(-3) merges before "ll"(-3.5), then "▁he"(-4): ▁he + ll (no "▁hell" token).
    assert_eq!(
        t.encode_with("hell", false, false),
        [id(&t, "▁he"), id(&t, "ll")]
    );
}

#[test]
fn spm_byte_fallback() {
    let t = Tokenizer::new(spm_data()).unwrap();
    let ids = t.encode_with("hé", false, false);
    assert_eq!(ids, [id(&t, "▁h"), id(&t, "<0xC3>"), id(&t, "<0xA9>")]);
    assert_eq!(t.token_bytes(id(&t, "<0xC3>")), [0xC3]);
    assert_eq!(t.decode(&ids), "hé");
    // A lone continuation byte decodes lossily.
    assert_eq!(t.decode(&[id(&t, "<0xC3>")]), "\u{FFFD}");
}

#[test]
fn spm_special_tokens_and_space_prefix_after_them() {
    let t = Tokenizer::new(spm_data()).unwrap();
    // Control tokens only with parse_special; the text after one gets a space prefix again.
    let ids = t.encode_with("<s>hello", false, true);
    assert_eq!(ids, [1, id(&t, "▁hello")]);
    let ids = t.encode_with("<s>hello", false, false);
    assert_ne!(ids[0], 1);
    assert!(ids.contains(&id(&t, "<0x3C>")));
    // User-defined tokens are always split out.
    let ids = t.encode_with("hello<tool>", false, false);
    assert_eq!(ids, [id(&t, "▁hello"), id(&t, "<tool>")]);
}

#[test]
fn spm_add_bos_and_prefix_from_metadata() {
    let mut d = spm_data();
    d.add_bos = Some(false);
    d.add_space_prefix = Some(false);
    let t = Tokenizer::new(d).unwrap();
    assert_eq!(t.encode("hello", false)[0], id(&t, "h"));
    // No prefix space to strip when decoding either.
    assert_eq!(t.decode(&[id(&t, "▁hello")]), " hello");
}

/// A byte-level BPE vocabulary: the 256 byte characters, merged tokens, two control tokens.
fn bpe_data(pre: &str) -> TokenizerData {
    let mut tokens: Vec<String> = (0..=255u8)
        .map(|b| bytes::byte_to_char(b).to_string())
        .collect();
    let merges = s(&[
        "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "Ġ Ġ",
    ]);
    for m in &merges {
        tokens.push(m.replace(' ', ""));
    }
    tokens.extend(s(&["<|endoftext|>", "<|im_start|>", "<|im_end|>"]));
    let mut types = vec![token_type::NORMAL; tokens.len()];
    let n = types.len();
    types[n - 3..].fill(token_type::CONTROL);
    TokenizerData {
        model: "gpt2".into(),
        pre: Some(pre.into()),
        tokens,
        token_types: types,
        merges,
        bos: Some(n as u32 - 2),
        eos: Some(n as u32 - 1),
        ..Default::default()
    }
}

#[test]
fn bpe_merges_by_rank() {
    let t = Tokenizer::new(bpe_data("gpt-2")).unwrap();
    assert_eq!(t.kind(), TokenizerKind::Bpe);
    assert_eq!(t.pre_type(), Some("GPT2"));
    assert!(!t.add_bos());
    let ids = t.encode("hello world", false);
    assert_eq!(ids, [id(&t, "hello"), id(&t, "Ġworld")]);
    assert_eq!(t.decode(&ids), "hello world");
    // Unmerged bytes: one token per byte character.
    let ids = t.encode("hé!", false);
    assert_eq!(ids, [id(&t, "h"), id(&t, "Ã"), id(&t, "©"), id(&t, "!")]);
    assert_eq!(t.decode(&ids), "hé!");
    assert_eq!(t.token_bytes(id(&t, "Ġworld")), b" world");
}

#[test]
fn bpe_special_token_splitting() {
    let t = Tokenizer::new(bpe_data("smollm")).unwrap();
    let (start, end) = (id(&t, "<|im_start|>"), id(&t, "<|im_end|>"));
    let ids = t.encode("<|im_start|>hello<|im_end|>", true);
    assert_eq!(ids, [start, id(&t, "hello"), end]);
    assert_eq!(t.decode(&ids), "<|im_start|>hello<|im_end|>");
    // Without parse_special the markers are plain text.
    let ids = t.encode("<|im_end|>", false);
    assert!(!ids.contains(&end));
    assert_eq!(t.decode(&ids), "<|im_end|>");
}

#[test]
fn bpe_add_bos_defaults_follow_llama_cpp() {
    // llama3-style pre-tokenizers add BOS by default; add_bos_token overrides.
    let t = Tokenizer::new(bpe_data("llama-bpe")).unwrap();
    assert!(t.add_bos());
    assert_eq!(
        t.encode("hello", false),
        [t.bos().unwrap(), id(&t, "hello")]
    );
    let mut d = bpe_data("llama-bpe");
    d.add_bos = Some(false);
    assert!(!Tokenizer::new(d).unwrap().add_bos());
    let mut d = bpe_data("qwen2");
    d.add_bos = Some(true);
    let t = Tokenizer::new(d).unwrap();
    assert_eq!(t.encode("hello", false)[0], t.bos().unwrap());
}

#[test]
fn end_of_generation_tokens() {
    let t = Tokenizer::new(bpe_data("gpt-2")).unwrap();
    let (eot, end) = (id(&t, "<|endoftext|>"), id(&t, "<|im_end|>"));
    assert!(t.is_eog(eot));
    assert!(t.is_eog(end));
    assert!(t.is_eog(t.eos().unwrap()));
    assert!(!t.is_eog(id(&t, "<|im_start|>")));
    assert!(!t.is_eog(id(&t, "hello")));
    assert_eq!(t.eot(), Some(eot));
}

#[test]
fn clean_spaces_applies_only_where_llama_cpp_does() {
    // gpt-2 pre: clean_spaces on; "hello" + " ." decodes without the space.
    let mut d = bpe_data("gpt-2");
    d.tokens.push("Ġ.".into());
    d.token_types.push(token_type::NORMAL);
    let dot = d.tokens.len() as u32 - 1;
    let t = Tokenizer::new(d.clone()).unwrap();
    assert_eq!(t.decode(&[id(&t, "hello"), dot]), "hello.");
    d.pre = Some("smollm".into());
    let t = Tokenizer::new(d).unwrap();
    assert_eq!(t.decode(&[id(&t, "hello"), dot]), "hello .");
}

#[test]
fn malformed_vocabularies_are_errors() {
    let err = |d: TokenizerData| Tokenizer::new(d).unwrap_err();

    let mut d = bpe_data("gpt-2");
    d.tokens[5] = d.tokens[6].clone();
    assert!(matches!(
        err(d),
        TokenizerError::DuplicateToken {
            id: 6,
            first: 5,
            ..
        }
    ));

    let mut d = bpe_data("gpt-2");
    d.bos = Some(100_000);
    let e = err(d);
    assert!(
        matches!(e, TokenizerError::IdOutOfRange { id: 100_000, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("tokenizer.ggml.bos_token_id"), "{e}");

    let mut d = bpe_data("gpt-2");
    d.merges.push("nospace".into());
    let e = err(d);
    assert!(
        matches!(e, TokenizerError::BadMerge { index: 10, .. }),
        "{e}"
    );

    let mut d = spm_data();
    d.tokens[3] = "<0xGG>".into();
    assert!(matches!(err(d), TokenizerError::BadByteToken { id: 3, .. }));

    let mut d = spm_data();
    d.scores.truncate(10);
    assert!(matches!(
        err(d),
        TokenizerError::LengthMismatch {
            key: "tokenizer.ggml.scores",
            ..
        }
    ));

    let mut d = spm_data();
    d.token_types.truncate(10);
    assert!(matches!(
        err(d),
        TokenizerError::LengthMismatch {
            key: "tokenizer.ggml.token_type",
            ..
        }
    ));

    let mut d = bpe_data("gpt-2");
    d.model = "bert".into();
    assert!(matches!(err(d), TokenizerError::UnsupportedModel(_)));

    let mut d = bpe_data("gpt-2");
    d.pre = Some("nonsense".into());
    assert!(matches!(err(d), TokenizerError::UnsupportedPre(_)));

    let mut d = bpe_data("chatglm-bpe");
    d.bos = None;
    d.add_bos = Some(true);
    assert!(matches!(err(d), TokenizerError::MissingSpecial { .. }));

    let d = TokenizerData {
        model: "gpt2".into(),
        ..Default::default()
    };
    assert!(matches!(err(d), TokenizerError::EmptyVocab));
}

#[test]
fn out_of_range_ids_never_panic() {
    let t = Tokenizer::new(bpe_data("gpt-2")).unwrap();
    let big = t.vocab_size() as u32 + 10;
    assert_eq!(t.piece(big), "");
    assert!(t.token_bytes(big).is_empty());
    assert_eq!(t.decode(&[big, id(&t, "hello"), big]), "hello");
    assert!(!t.is_eog(big));
}

mod from_gguf {
    use super::*;
    use crate::gguf::{value_type, GgufFile, GgufWriter, MetaValue};
    use std::path::Path;

    fn strings(v: &[String]) -> MetaValue {
        MetaValue::Array(
            value_type::STRING,
            v.iter().map(|s| MetaValue::String(s.clone())).collect(),
        )
    }

    fn file(edit: impl FnOnce(&mut Vec<(&'static str, MetaValue)>)) -> GgufFile {
        let d = bpe_data("qwen2");
        let mut kv: Vec<(&'static str, MetaValue)> = vec![
            ("general.architecture", MetaValue::String("qwen2".into())),
            ("tokenizer.ggml.model", MetaValue::String("gpt2".into())),
            ("tokenizer.ggml.pre", MetaValue::String("qwen2".into())),
            ("tokenizer.ggml.tokens", strings(&d.tokens)),
            (
                "tokenizer.ggml.token_type",
                MetaValue::Array(
                    value_type::I32,
                    d.token_types.iter().map(|&t| MetaValue::I32(t)).collect(),
                ),
            ),
            ("tokenizer.ggml.merges", strings(&d.merges)),
            (
                "tokenizer.ggml.eos_token_id",
                MetaValue::U32(d.eos.unwrap()),
            ),
            ("tokenizer.ggml.add_bos_token", MetaValue::Bool(false)),
        ];
        edit(&mut kv);
        let mut w = GgufWriter::new();
        for (k, v) in kv {
            w.meta(k, v);
        }
        GgufFile::from_bytes(Path::new("test.gguf"), w.to_bytes()).unwrap()
    }

    #[test]
    fn loads_keys() {
        let t = Tokenizer::from_gguf(&file(|_| {})).unwrap();
        assert_eq!(t.pre_type(), Some("QWEN2"));
        assert_eq!(t.data().pre.as_deref(), Some("qwen2"));
        assert_eq!(t.data().add_bos, Some(false));
        assert_eq!(t.eos(), Some(t.vocab_size() as u32 - 1));
        assert_eq!(t.decode(&t.encode("hello world", false)), "hello world");
    }

    #[test]
    fn errors_name_the_key() {
        let e = Tokenizer::from_gguf(&file(|kv| {
            kv.retain(|(k, _)| *k != "tokenizer.ggml.tokens")
        }))
        .unwrap_err();
        assert_eq!(
            e,
            TokenizerError::MissingKey("tokenizer.ggml.tokens".into())
        );

        let e = Tokenizer::from_gguf(&file(|kv| {
            kv.retain(|(k, _)| *k != "tokenizer.ggml.merges")
        }))
        .unwrap_err();
        assert_eq!(e, TokenizerError::MissingMerges);

        let e = Tokenizer::from_gguf(&file(|kv| {
            kv.push(("tokenizer.ggml.bos_token_id", MetaValue::String("1".into())))
        }))
        .unwrap_err();
        assert!(e.to_string().contains("tokenizer.ggml.bos_token_id"), "{e}");

        let e = Tokenizer::from_gguf(&file(|kv| {
            kv.retain(|(k, _)| *k != "tokenizer.ggml.merges");
            kv.push((
                "tokenizer.ggml.merges",
                MetaValue::Array(value_type::U32, vec![MetaValue::U32(1)]),
            ));
        }))
        .unwrap_err();
        assert!(
            matches!(&e, TokenizerError::WrongElement { key, index: 0, .. } if key == "tokenizer.ggml.merges"),
            "{e}"
        );

        let e = Tokenizer::from_gguf(&file(|kv| {
            kv.push(("tokenizer.ggml.unknown_token_id", MetaValue::U32(1 << 20)))
        }))
        .unwrap_err();
        assert!(
            e.to_string().contains("tokenizer.ggml.unknown_token_id"),
            "{e}"
        );
    }
}

#[test]
fn tokenizer_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tokenizer>();
}

mod round_trip {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Byte-level BPE loses nothing: any text decodes back to itself (smollm has no
        /// clean_spaces pass; control-token text is not parsed without parse_special).
        #[test]
        fn bpe_any_text(text in any::<String>()) {
            let t = Tokenizer::new(bpe_data("smollm")).unwrap();
            prop_assert_eq!(t.decode(&t.encode(&text, false)), text);
        }

        /// SentencePiece with byte fallback loses nothing either, once BOS is dropped and with no
        /// `<` (a user-defined token would make the next fragment get a space prefix).
        #[test]
        fn spm_any_text(text in "[^<]*") {
            let t = Tokenizer::new(spm_data()).unwrap();
            let ids = t.encode(&text, false);
            prop_assert_eq!(ids[0], 1);
            prop_assert_eq!(t.decode(&ids[1..]), text);
        }
    }
}
