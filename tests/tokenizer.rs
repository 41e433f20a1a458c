//! Tokenizer conformance with llama.cpp: the real SmolLM2 vocabulary (gpt2 BPE, `smollm`
//! pre-tokenizer) must give exactly the ids llama.cpp gave for every fixture string, decode them
//! back to the same text, and render every generated token's bytes as llama.cpp did; the tiny
//! conformance models' vocabularies (`qwen2` and `llama-bpe` pre-tokenizers) must load and
//! round-trip text.

mod common;

use cbtop::gguf::GgufFile;
use cbtop::model::tokenizer::{token_type, Tokenizer, TokenizerData, TokenizerKind};

fn smollm2() -> Tokenizer {
    let path = common::smollm2();
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// (prompt, prompt_ids) of every line of a fixture file.
fn prompts(rel: &str) -> Vec<(String, Vec<u32>)> {
    common::jsonl(&common::fixture(rel))
        .iter()
        .filter_map(|l| {
            Some((
                l["prompt"].as_str()?.to_string(),
                common::ids(&l["prompt_ids"]),
            ))
        })
        .collect()
}

/// Encode every prompt and compare with llama.cpp's ids; decode the ids back to the prompt.
/// Reports every mismatch, not just the first.
fn check_prompts(t: &Tokenizer, cases: &[(String, Vec<u32>)]) {
    let mut failures = Vec::new();
    for (prompt, want) in cases {
        let got = t.encode(prompt, true);
        if &got != want {
            failures.push(format!(
                "encode {prompt:?}:\n  got  {got:?}\n  want {want:?}"
            ));
        }
        let text = t.decode(want);
        if &text != prompt {
            failures.push(format!(
                "decode {want:?}:\n  got  {text:?}\n  want {prompt:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm2_vocabulary_and_special_tokens() {
    let t = smollm2();
    assert_eq!(t.kind(), TokenizerKind::Bpe);
    assert_eq!(t.pre_type(), Some("SMOLLM"));
    assert_eq!(t.vocab_size(), 49152);
    assert_eq!(t.bos(), Some(1));
    assert_eq!(t.eos(), Some(2));
    assert!(!t.add_bos(), "SmolLM2 has add_bos_token = false");
    assert_eq!(t.piece(0), "<|endoftext|>");
    assert_eq!(t.piece(2), "<|im_end|>");
    // End of generation: EOS (<|im_end|>) and <|endoftext|>, as in llama.cpp; not <|im_start|>.
    assert!(t.is_eog(2));
    assert!(t.is_eog(0));
    assert!(!t.is_eog(1));
    // llama.cpp also ends generation at FIM repo-name tokens (<reponame>, id 4).
    assert_eq!(t.eog_ids().collect::<Vec<_>>(), [0, 2, 4]);
    assert!(!t.is_eog(504));
    assert_eq!(t.token_bytes(7042), b" Paris");
    assert_eq!(t.token_bytes(2), b"<|im_end|>");
}

#[test]
fn smollm2_tokenizer_fixture_ids() {
    let cases = prompts("smollm2/tokenizer.jsonl");
    assert_eq!(cases.len(), 19, "tokenizer.jsonl should have 19 strings");
    check_prompts(&smollm2(), &cases);
}

#[test]
fn smollm2_generation_prompt_ids() {
    let cases = prompts("smollm2/generation.jsonl");
    assert_eq!(cases.len(), 8, "generation.jsonl should have 8 prompts");
    assert!(
        cases.iter().any(|(p, _)| p.contains("<|im_start|>")),
        "one prompt uses ChatML"
    );
    check_prompts(&smollm2(), &cases);
}

#[test]
fn smollm2_parse_special_off_keeps_markers_as_text() {
    let t = smollm2();
    let ids = t.encode("<|im_start|>user", false);
    assert!(!ids.contains(&1), "{ids:?}");
    assert_eq!(t.decode(&ids), "<|im_start|>user");
}

#[test]
fn smollm2_generated_pieces_and_text() {
    let t = smollm2();
    let mut failures = Vec::new();
    for line in common::jsonl(&common::fixture("smollm2/generation.jsonl")) {
        for step in line["steps"].as_array().expect("steps") {
            let id = step["token"].as_u64().expect("token") as u32;
            let bytes = t.token_bytes(id);
            let want_hex = step["piece_hex"].as_str().expect("piece_hex");
            if hex(&bytes) != want_hex {
                failures.push(format!("token {id}: bytes {} want {want_hex}", hex(&bytes)));
            }
            let want_piece = step["piece"].as_str().expect("piece");
            if let Ok(s) = std::str::from_utf8(&bytes) {
                if s != want_piece {
                    failures.push(format!("token {id}: piece {s:?} want {want_piece:?}"));
                }
            }
        }
        let ids = common::ids(&line["generated_ids"]);
        let want = line["generated_text"].as_str().expect("generated_text");
        let got = t.decode(&ids);
        if got != want {
            failures.push(format!("decode {ids:?}:\n  got  {got:?}\n  want {want:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn conformance_model_vocabularies_load_and_round_trip() {
    let dir = common::fixture("conformance/models");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 2,
        "expected conformance models in {}",
        dir.display()
    );
    let texts = [
        "Hello world",
        "The quick brown fox jumps over the lazy dog.",
        "  leading spaces, trailing  ",
        "line one\nline two\r\n\ttabbed 123 4567 don't WE'LL",
        "!!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    ];
    let mut seen_pre = std::collections::BTreeSet::new();
    for path in &paths {
        let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let t = Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(t.vocab_size(), 512, "{}", path.display());
        seen_pre.insert(t.data().pre.clone().unwrap_or_default());
        for text in texts {
            let ids = t.encode(text, true);
            assert!(
                ids.iter().all(|&i| (i as usize) < 512),
                "{}: {ids:?}",
                path.display()
            );
            // llama-bpe adds BOS by default (llama.cpp's LLAMA3 pre type); qwen2 does not.
            let body = match (t.add_bos(), t.bos()) {
                (true, Some(bos)) => {
                    assert_eq!(ids.first(), Some(&bos), "{}", path.display());
                    &ids[1..]
                }
                _ => &ids[..],
            };
            assert!(!body.is_empty());
            assert_eq!(t.decode(body), text, "{}: {ids:?}", path.display());
            // The vocabulary's only merges are "!" + byte: "!!" must merge.
            if text.starts_with("!!") {
                assert_eq!(
                    body[0],
                    t.token_id("!!").expect("!! token"),
                    "{}",
                    path.display()
                );
            }
        }
    }
    assert!(
        seen_pre.contains("qwen2") && seen_pre.contains("llama-bpe"),
        "{seen_pre:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Differential cases: the SmolLM2 vocabulary re-labelled with other pre-tokenizer types, and a
// SentencePiece vocabulary synthesised from it, tokenized by llama.cpp itself (llama-vocab.cpp,
// vocab-only load of a GGUF holding exactly the metadata built below, `llama_tokenize` with
// add_special and parse_special, `llama_detokenize` with remove_special = false and
// unparse_special = true). This pins the llama3/qwen2/gpt2/default pre-tokenizers and the SPM
// algorithm to llama.cpp on a real 49k vocabulary.

/// SmolLM2's vocabulary with `tokenizer.ggml.pre` = `pre` (`None`: key absent) and only the keys
/// llama.cpp saw (model, pre, tokens, token_type, merges, bos 1, eos 2).
fn smollm2_as(t: &Tokenizer, pre: Option<&str>) -> Tokenizer {
    let d = t.data();
    Tokenizer::new(TokenizerData {
        model: "gpt2".into(),
        pre: pre.map(str::to_string),
        tokens: d.tokens.clone(),
        token_types: d.token_types.clone(),
        merges: d.merges.clone(),
        bos: Some(1),
        eos: Some(2),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("pre {pre:?}: {e}"))
}

/// A SentencePiece vocabulary made from SmolLM2's: <unk>, <s>, </s>, the 256 byte tokens, every
/// NORMAL token whose bytes are UTF-8 (spaces as `▁`, first occurrence kept, score `-id`, minus
/// 0.5 for pieces over 3 characters), then user-defined `<tool>`, `▁<tool>` and control
/// `<|im_start|>`, `<|im_end|>`.
fn spm_from(t: &Tokenizer) -> Tokenizer {
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
    for (i, &ty) in t.data().token_types.iter().enumerate() {
        if ty != token_type::NORMAL {
            continue;
        }
        let Ok(text) = String::from_utf8(t.token_bytes(i as u32)) else {
            continue;
        };
        let piece = text.replace(' ', "\u{2581}");
        if piece.is_empty() || !seen.insert(piece.clone()) {
            continue;
        }
        let extra = if piece.chars().count() > 3 { 0.5 } else { 0.0 };
        tokens.push(piece);
        types.push(token_type::NORMAL);
        scores.push(-(i as f32) - extra);
    }
    for u in ["<tool>", "\u{2581}<tool>", "<|im_start|>", "<|im_end|>"] {
        if seen.insert(u.to_string()) {
            tokens.push(u.to_string());
            types.push(if u.contains("tool") {
                token_type::USER_DEFINED
            } else {
                token_type::CONTROL
            });
            scores.push(0.0);
        }
    }
    Tokenizer::new(TokenizerData {
        model: "llama".into(),
        tokens,
        scores,
        token_types: types,
        ..Default::default()
    })
    .expect("synthesised SPM vocabulary")
}

fn check_variant(name: &str, t: &Tokenizer, expected: &[(&[u32], &str)]) {
    assert_eq!(expected.len(), CASES.len());
    let mut failures = Vec::new();
    for (text, (ids, detok)) in CASES.iter().zip(expected) {
        let got = t.encode(text, true);
        if got != *ids {
            failures.push(format!("encode {text:?}:\n  got  {got:?}\n  want {ids:?}"));
        }
        let d = t.decode(ids);
        if d != *detok {
            failures.push(format!("decode {ids:?}:\n  got  {d:?}\n  want {detok:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn llama_cpp_differential_smollm() {
    let t = smollm2();
    check_variant("smollm", &smollm2_as(&t, Some("smollm")), SMOLLM);
}

#[test]
fn llama_cpp_differential_llama_bpe() {
    let t = smollm2_as(&smollm2(), Some("llama-bpe"));
    assert!(t.add_bos(), "llama-bpe adds BOS by default in llama.cpp");
    check_variant("llama-bpe", &t, LLAMA_BPE);
}

#[test]
fn llama_cpp_differential_qwen2() {
    check_variant("qwen2", &smollm2_as(&smollm2(), Some("qwen2")), QWEN2);
}

#[test]
fn llama_cpp_differential_gpt2() {
    check_variant("gpt-2", &smollm2_as(&smollm2(), Some("gpt-2")), GPT2);
}

#[test]
fn llama_cpp_differential_default_pre() {
    check_variant("default", &smollm2_as(&smollm2(), None), DEFAULT);
}

#[test]
fn llama_cpp_differential_spm() {
    let t = spm_from(&smollm2());
    assert_eq!(t.kind(), TokenizerKind::Spm);
    assert_eq!((t.bos(), t.eos(), t.unk()), (Some(1), Some(2), Some(0)));
    check_variant("spm", &t, SPM);
}

/// Digit grouping only shows with a vocabulary that merges digits (SmolLM2's never does): add
/// two-digit tokens, some three-digit ones and " 1", " 12", with their merges, and compare how
/// the pre-tokenizers group numbers (llama3: up to 3 digits; qwen2: 1; gpt2: whole runs;
/// default: runs, then groups of 3) against llama.cpp.
#[test]
fn llama_cpp_differential_digit_merges() {
    let base = smollm2();
    let mut extra: Vec<(String, String)> = Vec::new();
    for a in '0'..='9' {
        for b in '0'..='9' {
            extra.push((format!("{a}{b}"), format!("{a} {b}")));
        }
    }
    for a in '1'..='3' {
        for b in '0'..='9' {
            for c in ['0', '5'] {
                extra.push((format!("{a}{b}{c}"), format!("{a}{b} {c}")));
            }
        }
    }
    extra.push(("\u{120}1".into(), "\u{120} 1".into()));
    extra.push(("\u{120}12".into(), "\u{120} 12".into()));
    let texts = ["1234567 89 3.14159 x1050 12 2000", " 123456\n150 1 12"];
    let expected: [(Option<&str>, [&[u32]; 2]); 4] = [
        (
            Some("llama-bpe"),
            [
                &[
                    1, 49164, 35, 49197, 38, 39, 216, 49241, 216, 35, 30, 49166, 33, 49211, 1792,
                    49253, 32, 216, 49164, 216, 49272, 32,
                ],
                &[
                    1, 216, 49164, 35, 49197, 38, 198, 49262, 216, 33, 216, 49164,
                ],
            ],
        ),
        (
            Some("qwen2"),
            [
                &[
                    33, 34, 35, 36, 37, 38, 39, 216, 40, 41, 216, 35, 30, 33, 36, 33, 37, 41, 1792,
                    33, 32, 37, 32, 216, 33, 34, 216, 34, 32, 32, 32,
                ],
                &[
                    216, 33, 34, 35, 36, 37, 38, 198, 33, 37, 32, 216, 33, 216, 33, 34,
                ],
            ],
        ),
        (
            Some("gpt-2"),
            [
                &[
                    49164, 49186, 49208, 39, 216, 49241, 216, 35, 30, 49166, 49167, 41, 1792, 33,
                    49157, 32, 49313, 216, 34, 49152, 32,
                ],
                &[49313, 49186, 49208, 198, 49262, 49312, 49313],
            ],
        ),
        (
            None,
            [
                &[
                    49164, 35, 49197, 38, 39, 216, 49241, 216, 35, 30, 49166, 33, 49211, 1792, 33,
                    49157, 32, 216, 49164, 216, 34, 49152, 32,
                ],
                &[216, 49164, 35, 49197, 38, 198, 49262, 216, 33, 216, 49164],
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (pre, want) in expected {
        let d = base.data();
        let mut tokens = d.tokens.clone();
        let mut types = d.token_types.clone();
        let mut merges = d.merges.clone();
        for (t, m) in &extra {
            tokens.push(t.clone());
            types.push(token_type::NORMAL);
            merges.push(m.clone());
        }
        let t = Tokenizer::new(TokenizerData {
            model: "gpt2".into(),
            pre: pre.map(str::to_string),
            tokens,
            token_types: types,
            merges,
            bos: Some(1),
            eos: Some(2),
            ..Default::default()
        })
        .expect("vocabulary with digit merges");
        for (text, want) in texts.iter().zip(want) {
            let got = t.encode(text, true);
            if got != want {
                failures.push(format!(
                    "{pre:?} {text:?}:\n  got  {got:?}\n  want {want:?}"
                ));
            }
            let body = if t.add_bos() { &want[1..] } else { want };
            if t.decode(body) != *text {
                failures.push(format!("{pre:?} decode {want:?}: {:?}", t.decode(body)));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Strings whose llama.cpp tokenization is recorded below, per vocabulary variant.
const CASES: &[&str] = &[
    "Hello world",
    " Hello  world ",
    "hello\nworld\n\n",
    "a \n\n b",
    "x\r\n\r\ny\r",
    "don't WON'T it's I'M we'LL they've You'RE he'd",
    "1234567 89 3.14159 ½ ² Ⅻ ١٢٣",
    "    indented\n\t\tcode();  // comment   ",
    "Γειά σου Κόσμε Привет мир 日本語のテキスト 한국어 مرحبا नमस्ते",
    "emoji 🙂🚀 👨\u{200d}👩\u{200d}👧 ❤️",
    "e\u{301} ñ ß İ ǅ \u{200b}\u{200d}\u{feff}",
    "Ġ Ċ ▁hello \u{a0}nbsp\u{3000}ideographic\u{2009}thin",
    "(hello) [world] {x} <y> $5 +7 =8 ^9 ~0 |a `b",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "mixed<|endoftext|>text<tool> and <s></s>",
    "URL: https://example.com/path?q=1&r=2#frag",
    "snake_case_identifier CamelCaseIdentifier SCREAMING_CASE",
    "''s ' 'S x'LL y'",
    "   ",
    "\n",
    "a",
    "!!!???...,,, . ,",
    "trailing spaces   \n   ",
    "\u{0}\u{7}\u{1b}\u{7f}\u{85}",
    "\u{e0d1}\u{e000}\u{e0001}\u{378}",
    "Hello , world ! It 's done ' ok",
];
/// llama.cpp's `(ids, detokenized text)` for each of [`CASES`], variant SMOLLM.
const SMOLLM: &[(&[u32], &str)] = &[
    (&[19556, 905], "Hello world"),
    (&[38699, 216, 905, 216], " Hello  world "),
    (&[28120, 198, 6693, 1116], "hello\nworld\n\n"),
    (&[81, 38028, 278], "a \n\n b"),
    (&[104, 7209, 198, 105, 201], "x\r\n\r\ny\r"),
    (
        &[
            12420, 982, 408, 2154, 23, 68, 357, 506, 339, 23, 61, 392, 23, 16421, 502, 3543, 1206,
            23, 3256, 384, 6737,
        ],
        "don't WON'T it's I'M we'LL they've You'RE he'd",
    ),
    (
        &[
            33, 34, 35, 36, 37, 38, 39, 216, 40, 41, 216, 35, 30, 33, 36, 33, 37, 41, 216, 16738,
            216, 19133, 216, 173, 223, 121, 216, 164, 111, 164, 112, 164, 113,
        ],
        "1234567 89 3.14159 ½ ² Ⅻ ١٢٣",
    ),
    (
        &[
            333, 641, 6574, 3354, 197, 4635, 35040, 216, 13241, 5189, 333,
        ],
        "    indented\n\t\tcode();  // comment   ",
    ),
    (
        &[
            153, 237, 14240, 12001, 26112, 32437, 39963, 5664, 244, 36180, 18751, 16674, 14240,
            5470, 249, 46879, 16464, 32547, 41337, 7872, 9175, 17097, 241, 115, 40993, 179, 120,
            248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 216, 33085, 246, 181, 130,
            251, 183, 240, 129, 36395, 20602, 44626, 31462, 10805, 12335, 118, 35090, 38770, 16525,
            26293, 30581,
        ],
        "Γειά σου Κόσμε Привет мир 日本語のテキスト 한국어 مرحبا नमस्ते",
    ),
    (
        &[
            391, 33777, 47526, 10813, 244, 218, 15107, 235, 118, 321, 231, 10813, 235, 119, 321,
            231, 10813, 235, 117, 4636, 247, 114, 31752,
        ],
        "emoji 🙂🚀 👨\u{200d}👩\u{200d}👧 ❤️",
    ),
    (
        &[
            85, 151, 219, 5549, 126, 5549, 249, 24488, 125, 216, 146, 223, 459, 229, 321, 231, 186,
            136, 140,
        ],
        "e\u{301} ñ ß İ ǅ \u{200b}\u{200d}\u{feff}",
    ),
    (
        &[
            143, 250, 24488, 228, 29566, 219, 28120, 216, 15442, 94, 32093, 12109, 218, 489, 4551,
            321, 227, 39200,
        ],
        "Ġ Ċ ▁hello \u{a0}nbsp\u{3000}ideographic\u{2009}thin",
    ),
    (
        &[
            24, 28120, 25, 933, 6693, 77, 1662, 104, 109, 2067, 105, 46, 1885, 37, 1232, 39, 446,
            40, 13481, 41, 11417, 32, 2504, 81, 2179, 82,
        ],
        "(hello) [world] {x} <y> $5 +7 =8 ^9 ~0 |a `b",
    ),
    (
        &[
            1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198,
        ],
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        &[35781, 0, 2692, 44, 19324, 46, 284, 2067, 99, 29299, 99, 46],
        "mixed<|endoftext|>text<tool> and <s></s>",
    ),
    (
        &[
            14492, 42, 5141, 1742, 7434, 30, 824, 31, 1537, 47, 97, 45, 33, 22, 98, 45, 34, 19,
            28082,
        ],
        "URL: https://example.com/path?q=1&r=2#frag",
    ),
    (
        &[
            48284, 79, 7544, 79, 27281, 5784, 299, 10802, 38367, 15341, 48815, 4728, 79, 51, 13108,
        ],
        "snake_case_identifier CamelCaseIdentifier SCREAMING_CASE",
    ),
    (
        &[3816, 99, 637, 637, 67, 1792, 23, 16421, 329, 23],
        "''s ' 'S x'LL y'",
    ),
    (&[333], "   "),
    (&[198], "\n"),
    (&[81], "a"),
    (
        &[29646, 16693, 47, 27040, 12002, 1673, 3297],
        "!!!???...,,, . ,",
    ),
    (&[4861, 4966, 5600, 333, 472], "trailing spaces   \n   "),
    (
        &[190, 195, 212, 217, 141, 223],
        "\u{0}\u{7}\u{1b}\u{7f}\u{85}",
    ),
    (
        &[185, 221, 235, 185, 218, 218, 188, 250, 218, 219, 152, 133],
        "\u{e0d1}\u{e000}\u{e0001}\u{378}",
    ),
    (
        &[19556, 3297, 905, 5728, 657, 637, 99, 2294, 637, 10907],
        "Hello , world ! It 's done ' ok",
    ),
];
/// llama.cpp's `(ids, detokenized text)` for each of [`CASES`], variant LLAMA_BPE.
const LLAMA_BPE: &[(&[u32], &str)] = &[
    (&[1, 19556, 905], "<|im_start|>Hello world"),
    (&[1, 38699, 216, 905, 216], "<|im_start|> Hello  world "),
    (&[1, 28120, 198, 6693, 1116], "<|im_start|>hello\nworld\n\n"),
    (&[1, 81, 38028, 278], "<|im_start|>a \n\n b"),
    (&[1, 104, 18682, 105, 201], "<|im_start|>x\r\n\r\ny\r"),
    (
        &[
            1, 12420, 982, 408, 2154, 23, 68, 357, 506, 339, 23, 61, 392, 23, 16421, 502, 3543,
            1206, 23, 3256, 384, 6737,
        ],
        "<|im_start|>don't WON'T it's I'M we'LL they've You'RE he'd",
    ),
    (
        &[
            1, 33, 34, 35, 36, 37, 38, 39, 216, 40, 41, 216, 35, 30, 33, 36, 33, 37, 41, 216,
            16738, 216, 19133, 216, 173, 223, 121, 216, 164, 111, 164, 112, 164, 113,
        ],
        "<|im_start|>1234567 89 3.14159 ½ ² Ⅻ ١٢٣",
    ),
    (
        &[
            1, 333, 641, 6574, 198, 197, 197, 4635, 35040, 216, 13241, 5189, 333,
        ],
        "<|im_start|>    indented\n\t\tcode();  // comment   ",
    ),
    (
        &[
            1, 153, 237, 14240, 12001, 26112, 32437, 39963, 5664, 244, 36180, 18751, 16674, 14240,
            5470, 249, 46879, 16464, 32547, 41337, 7872, 9175, 17097, 241, 115, 40993, 179, 120,
            248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 216, 33085, 246, 181, 130,
            251, 183, 240, 129, 36395, 20602, 44626, 31462, 10805, 12335, 118, 35090, 38770, 16525,
            26293, 30581,
        ],
        "<|im_start|>Γειά σου Κόσμε Привет мир 日本語のテキスト 한국어 مرحبا नमस्ते",
    ),
    (
        &[
            1, 391, 33777, 47526, 10813, 244, 218, 15107, 235, 118, 321, 231, 10813, 235, 119, 321,
            231, 10813, 235, 117, 4636, 247, 114, 31752,
        ],
        "<|im_start|>emoji 🙂🚀 👨\u{200d}👩\u{200d}👧 ❤️",
    ),
    (
        &[
            1, 85, 151, 219, 5549, 126, 5549, 249, 24488, 125, 216, 146, 223, 459, 229, 321, 231,
            186, 136, 140,
        ],
        "<|im_start|>e\u{301} ñ ß İ ǅ \u{200b}\u{200d}\u{feff}",
    ),
    (
        &[
            1, 143, 250, 24488, 228, 29566, 219, 28120, 216, 15442, 94, 32093, 12109, 218, 489,
            4551, 321, 227, 39200,
        ],
        "<|im_start|>Ġ Ċ ▁hello \u{a0}nbsp\u{3000}ideographic\u{2009}thin",
    ),
    (
        &[
            1, 24, 28120, 25, 933, 6693, 77, 1662, 104, 109, 2067, 105, 46, 1885, 37, 1232, 39,
            446, 40, 13481, 41, 11417, 32, 2504, 81, 2179, 82,
        ],
        "<|im_start|>(hello) [world] {x} <y> $5 +7 =8 ^9 ~0 |a `b",
    ),
    (
        &[
            1, 1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198,
        ],
        "<|im_start|><|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        &[
            1, 35781, 0, 2692, 44, 19324, 46, 284, 2067, 99, 29299, 99, 46,
        ],
        "<|im_start|>mixed<|endoftext|>text<tool> and <s></s>",
    ),
    (
        &[
            1, 14492, 42, 5141, 1742, 7434, 30, 824, 31, 1537, 47, 97, 45, 33, 22, 98, 45, 34, 19,
            28082,
        ],
        "<|im_start|>URL: https://example.com/path?q=1&r=2#frag",
    ),
    (
        &[
            1, 48284, 79, 7544, 79, 27281, 5784, 299, 10802, 38367, 15341, 48815, 4728, 79, 51,
            13108,
        ],
        "<|im_start|>snake_case_identifier CamelCaseIdentifier SCREAMING_CASE",
    ),
    (
        &[1, 3816, 99, 637, 637, 67, 1792, 23, 16421, 329, 23],
        "<|im_start|>''s''S x'LL y'",
    ),
    (&[1, 333], "<|im_start|>   "),
    (&[1, 198], "<|im_start|>\n"),
    (&[1, 81], "<|im_start|>a"),
    (
        &[1, 29646, 16693, 47, 27040, 12002, 1673, 3297],
        "<|im_start|>!!!???...,,,.,",
    ),
    (
        &[1, 4861, 4966, 5600, 333, 198, 333],
        "<|im_start|>trailing spaces   \n   ",
    ),
    (
        &[1, 190, 195, 212, 217, 141, 223],
        "<|im_start|>\u{0}\u{7}\u{1b}\u{7f}\u{85}",
    ),
    (
        &[
            1, 185, 221, 235, 185, 218, 218, 188, 250, 218, 219, 152, 133,
        ],
        "<|im_start|>\u{e0d1}\u{e000}\u{e0001}\u{378}",
    ),
    (
        &[1, 19556, 3297, 905, 5728, 657, 637, 99, 2294, 637, 10907],
        "<|im_start|>Hello, world! It's done'ok",
    ),
];
/// llama.cpp's `(ids, detokenized text)` for each of [`CASES`], variant QWEN2.
const QWEN2: &[(&[u32], &str)] = &[
    (&[19556, 905], "Hello world"),
    (&[38699, 216, 905, 216], " Hello  world "),
    (&[28120, 198, 6693, 1116], "hello\nworld\n\n"),
    (&[81, 38028, 278], "a \n\n b"),
    (&[104, 18682, 105, 201], "x\r\n\r\ny\r"),
    (
        &[
            12420, 982, 408, 2154, 23, 68, 357, 506, 339, 23, 61, 392, 23, 16421, 502, 3543, 1206,
            23, 3256, 384, 6737,
        ],
        "don't WON'T it's I'M we'LL they've You'RE he'd",
    ),
    (
        &[
            33, 34, 35, 36, 37, 38, 39, 216, 40, 41, 216, 35, 30, 33, 36, 33, 37, 41, 216, 16738,
            216, 19133, 216, 173, 223, 121, 216, 164, 111, 164, 112, 164, 113,
        ],
        "1234567 89 3.14159 ½ ² Ⅻ ١٢٣",
    ),
    (
        &[
            333, 641, 6574, 198, 197, 197, 4635, 35040, 216, 13241, 5189, 333,
        ],
        "    indented\n\t\tcode();  // comment   ",
    ),
    (
        &[
            153, 237, 14240, 12001, 26112, 32437, 39963, 5664, 244, 36180, 18751, 16674, 14240,
            5470, 249, 46879, 16464, 32547, 41337, 7872, 9175, 17097, 241, 115, 40993, 179, 120,
            248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 216, 33085, 246, 181, 130,
            251, 183, 240, 129, 36395, 20602, 44626, 31462, 10805, 12335, 118, 35090, 38770, 16525,
            26293, 30581,
        ],
        "Γειά σου Κόσμε Привет мир 日本語のテキスト 한국어 مرحبا नमस्ते",
    ),
    (
        &[
            391, 33777, 47526, 10813, 244, 218, 15107, 235, 118, 321, 231, 10813, 235, 119, 321,
            231, 10813, 235, 117, 4636, 247, 114, 31752,
        ],
        "emoji 🙂🚀 👨\u{200d}👩\u{200d}👧 ❤️",
    ),
    (
        &[
            85, 151, 219, 5549, 126, 5549, 249, 24488, 125, 216, 146, 223, 459, 229, 321, 231, 186,
            136, 140,
        ],
        "e\u{301} ñ ß İ ǅ \u{200b}\u{200d}\u{feff}",
    ),
    (
        &[
            143, 250, 24488, 228, 29566, 219, 28120, 216, 15442, 94, 32093, 12109, 218, 489, 4551,
            321, 227, 39200,
        ],
        "Ġ Ċ ▁hello \u{a0}nbsp\u{3000}ideographic\u{2009}thin",
    ),
    (
        &[
            24, 28120, 25, 933, 6693, 77, 1662, 104, 109, 2067, 105, 46, 1885, 37, 1232, 39, 446,
            40, 13481, 41, 11417, 32, 2504, 81, 2179, 82,
        ],
        "(hello) [world] {x} <y> $5 +7 =8 ^9 ~0 |a `b",
    ),
    (
        &[
            1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198,
        ],
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        &[35781, 0, 2692, 44, 19324, 46, 284, 2067, 99, 29299, 99, 46],
        "mixed<|endoftext|>text<tool> and <s></s>",
    ),
    (
        &[
            14492, 42, 5141, 1742, 7434, 30, 824, 31, 1537, 47, 97, 45, 33, 22, 98, 45, 34, 19,
            28082,
        ],
        "URL: https://example.com/path?q=1&r=2#frag",
    ),
    (
        &[
            48284, 79, 7544, 79, 27281, 5784, 299, 10802, 38367, 15341, 48815, 4728, 79, 51, 13108,
        ],
        "snake_case_identifier CamelCaseIdentifier SCREAMING_CASE",
    ),
    (
        &[3816, 99, 637, 637, 67, 1792, 23, 16421, 329, 23],
        "''s ' 'S x'LL y'",
    ),
    (&[333], "   "),
    (&[198], "\n"),
    (&[81], "a"),
    (
        &[29646, 16693, 47, 27040, 12002, 1673, 3297],
        "!!!???...,,, . ,",
    ),
    (
        &[4861, 4966, 5600, 333, 198, 333],
        "trailing spaces   \n   ",
    ),
    (
        &[190, 195, 212, 217, 141, 223],
        "\u{0}\u{7}\u{1b}\u{7f}\u{85}",
    ),
    (
        &[185, 221, 235, 185, 218, 218, 188, 250, 218, 219, 152, 133],
        "\u{e0d1}\u{e000}\u{e0001}\u{378}",
    ),
    (
        &[19556, 3297, 905, 5728, 657, 637, 99, 2294, 637, 10907],
        "Hello , world ! It 's done ' ok",
    ),
];
/// llama.cpp's `(ids, detokenized text)` for each of [`CASES`], variant GPT2.
const GPT2: &[(&[u32], &str)] = &[
    (&[19556, 905], "Hello world"),
    (&[38699, 216, 905, 216], " Hello  world "),
    (&[28120, 198, 6693, 1116], "hello\nworld\n\n"),
    (&[81, 38028, 278], "a \n\n b"),
    (&[104, 7209, 198, 105, 201], "x\r\n\r\ny\r"),
    (
        &[
            12420, 982, 408, 2154, 23, 68, 357, 506, 339, 23, 61, 392, 23, 16421, 502, 3543, 1206,
            23, 3256, 384, 6737,
        ],
        "don't WON'T it's I'M we'LL they've You'RE he'd",
    ),
    (
        &[
            33, 34, 35, 36, 37, 38, 39, 216, 40, 41, 216, 35, 30, 33, 36, 33, 37, 41, 3351, 138,
            3351, 127, 4636, 223, 121, 16936, 111, 164, 112, 164, 113,
        ],
        "1234567 89 3.14159 ½ ² Ⅻ ١٢٣",
    ),
    (
        &[
            333, 641, 6574, 3354, 197, 4635, 35040, 216, 13241, 5189, 333,
        ],
        "    indented\n\t\tcode();  // comment   ",
    ),
    (
        &[
            153, 237, 14240, 12001, 26112, 32437, 39963, 5664, 244, 36180, 18751, 16674, 14240,
            5470, 249, 46879, 16464, 32547, 41337, 7872, 9175, 17097, 241, 115, 40993, 179, 120,
            248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 216, 33085, 246, 181, 130,
            251, 183, 240, 129, 36395, 20602, 44626, 31462, 10805, 12335, 118, 35090, 38770, 16525,
            26293, 30581,
        ],
        "Γειά σου Κόσμε Привет мир 日本語のテキスト 한국어 مرحبا नमस्ते",
    ),
    (
        &[
            391, 33777, 47526, 10813, 244, 218, 15107, 235, 118, 321, 231, 10813, 235, 119, 321,
            231, 10813, 235, 117, 4636, 247, 114, 31752,
        ],
        "emoji 🙂🚀 👨\u{200d}👩\u{200d}👧 ❤️",
    ),
    (
        &[
            85, 151, 219, 5549, 126, 5549, 249, 24488, 125, 216, 146, 223, 459, 229, 321, 231, 186,
            136, 140,
        ],
        "e\u{301} ñ ß İ ǅ \u{200b}\u{200d}\u{feff}",
    ),
    (
        &[
            143, 250, 24488, 228, 29566, 219, 28120, 216, 15442, 94, 32093, 12109, 218, 489, 4551,
            321, 227, 39200,
        ],
        "Ġ Ċ ▁hello \u{a0}nbsp\u{3000}ideographic\u{2009}thin",
    ),
    (
        &[
            24, 28120, 25, 933, 6693, 77, 1662, 104, 109, 2067, 105, 46, 1885, 37, 1232, 39, 446,
            40, 13481, 41, 11417, 32, 2504, 81, 2179, 82,
        ],
        "(hello) [world] {x} <y> $5 +7 =8 ^9 ~0 |a `b",
    ),
    (
        &[
            1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198,
        ],
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        &[35781, 0, 2692, 44, 19324, 46, 284, 2067, 99, 29299, 99, 46],
        "mixed<|endoftext|>text<tool> and <s></s>",
    ),
    (
        &[
            14492, 42, 5141, 1742, 7434, 30, 824, 31, 1537, 47, 97, 45, 33, 22, 98, 45, 34, 19,
            28082,
        ],
        "URL: https://example.com/path?q=1&r=2#frag",
    ),
    (
        &[
            48284, 79, 7544, 79, 27281, 5784, 299, 10802, 38367, 15341, 48815, 4728, 79, 51, 13108,
        ],
        "snake_case_identifier CamelCaseIdentifier SCREAMING_CASE",
    ),
    (
        &[3816, 99, 637, 637, 67, 1792, 23, 16421, 329, 23],
        "''s''S x'LL y'",
    ),
    (&[333], "   "),
    (&[198], "\n"),
    (&[81], "a"),
    (
        &[29646, 16693, 47, 27040, 12002, 1673, 3297],
        "!!!???...,,,.,",
    ),
    (&[4861, 4966, 5600, 333, 472], "trailing spaces   \n   "),
    (
        &[190, 195, 212, 217, 141, 223],
        "\u{0}\u{7}\u{1b}\u{7f}\u{85}",
    ),
    (
        &[185, 221, 235, 185, 218, 218, 188, 250, 218, 219, 152, 133],
        "\u{e0d1}\u{e000}\u{e0001}\u{378}",
    ),
    (
        &[19556, 3297, 905, 5728, 657, 637, 99, 2294, 637, 10907],
        "Hello, world! It's done'ok",
    ),
];
/// llama.cpp's `(ids, detokenized text)` for each of [`CASES`], variant DEFAULT.
const DEFAULT: &[(&[u32], &str)] = &[
    (&[19556, 905], "Hello world"),
    (&[38699, 216, 905, 216], " Hello  world "),
    (&[28120, 198, 6693, 1116], "hello\nworld\n\n"),
    (&[81, 38028, 278], "a \n\n b"),
    (&[104, 7209, 198, 105, 201], "x\r\n\r\ny\r"),
    (
        &[
            12420, 23, 100, 408, 2154, 23, 68, 357, 23, 99, 339, 23, 61, 392, 23, 16421, 502, 23,
            307, 1206, 23, 3256, 384, 23, 84,
        ],
        "don't WON'T it's I'M we'LL they've You'RE he'd",
    ),
    (
        &[
            33, 34, 35, 36, 37, 38, 39, 216, 40, 41, 216, 35, 30, 33, 36, 33, 37, 41, 216, 16738,
            216, 19133, 216, 173, 223, 121, 216, 164, 111, 164, 112, 164, 113,
        ],
        "1234567 89 3.14159 ½ ² Ⅻ ١٢٣",
    ),
    (
        &[333, 641, 6574, 3354, 197, 4635, 35040, 256, 1559, 5189, 333],
        "    indented\n\t\tcode();  // comment   ",
    ),
    (
        &[
            153, 237, 14240, 12001, 26112, 32437, 39963, 5664, 244, 36180, 18751, 16674, 14240,
            5470, 249, 46879, 16464, 32547, 41337, 7872, 9175, 17097, 241, 115, 40993, 179, 120,
            248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 216, 33085, 246, 181, 130,
            251, 183, 240, 129, 36395, 20602, 44626, 31462, 10805, 12335, 118, 35090, 38770, 16525,
            26293, 30581,
        ],
        "Γειά σου Κόσμε Привет мир 日本語のテキスト 한국어 مرحبا नमस्ते",
    ),
    (
        &[
            391, 33777, 47526, 10813, 244, 218, 15107, 235, 118, 321, 231, 10813, 235, 119, 321,
            231, 10813, 235, 117, 4636, 247, 114, 31752,
        ],
        "emoji 🙂🚀 👨\u{200d}👩\u{200d}👧 ❤️",
    ),
    (
        &[
            85, 151, 219, 5549, 126, 5549, 249, 24488, 125, 216, 146, 223, 459, 229, 321, 231, 186,
            136, 140,
        ],
        "e\u{301} ñ ß İ ǅ \u{200b}\u{200d}\u{feff}",
    ),
    (
        &[
            143, 250, 24488, 228, 29566, 219, 28120, 216, 15442, 94, 32093, 12109, 218, 489, 4551,
            321, 227, 39200,
        ],
        "Ġ Ċ ▁hello \u{a0}nbsp\u{3000}ideographic\u{2009}thin",
    ),
    (
        &[
            24, 28120, 25, 216, 75, 6693, 77, 216, 107, 104, 109, 216, 44, 105, 46, 216, 20, 37,
            216, 27, 39, 216, 45, 40, 216, 78, 41, 216, 110, 32, 216, 108, 81, 2179, 82,
        ],
        "(hello) [world] {x} <y> $5 +7 =8 ^9 ~0 |a `b",
    ),
    (
        &[
            1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198,
        ],
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        &[
            35781, 0, 2692, 44, 19324, 46, 284, 216, 44, 99, 29299, 99, 46,
        ],
        "mixed<|endoftext|>text<tool> and <s></s>",
    ),
    (
        &[
            14492, 42, 5141, 1742, 7434, 30, 824, 31, 1537, 47, 97, 45, 33, 22, 98, 45, 34, 19,
            28082,
        ],
        "URL: https://example.com/path?q=1&r=2#frag",
    ),
    (
        &[
            48284, 79, 7544, 79, 27281, 5784, 299, 10802, 38367, 15341, 48815, 4728, 79, 51, 13108,
        ],
        "snake_case_identifier CamelCaseIdentifier SCREAMING_CASE",
    ),
    (
        &[3816, 99, 216, 23, 216, 23, 67, 1792, 23, 16421, 329, 23],
        "''s''S x'LL y'",
    ),
    (&[333], "   "),
    (&[198], "\n"),
    (&[81], "a"),
    (
        &[29646, 16693, 47, 27040, 12002, 216, 30, 216, 28],
        "!!!???...,,,.,",
    ),
    (&[4861, 4966, 5600, 333, 472], "trailing spaces   \n   "),
    (
        &[190, 195, 212, 217, 141, 223],
        "\u{0}\u{7}\u{1b}\u{7f}\u{85}",
    ),
    (
        &[185, 221, 235, 185, 218, 218, 188, 250, 218, 219, 152, 133],
        "\u{e0d1}\u{e000}\u{e0001}\u{378}",
    ),
    (
        &[
            19556, 216, 28, 905, 216, 17, 657, 216, 23, 99, 2294, 216, 23, 10907,
        ],
        "Hello, world! It's done'ok",
    ),
];
/// llama.cpp's `(ids, detokenized text)` for each of [`CASES`], variant SPM.
const SPM: &[(&[u32], &str)] = &[
    (&[1, 38682, 1032], "<s> Hello world"),
    (&[1, 385, 19630, 385, 6814, 379], "<s>  Hello  world "),
    (&[1, 33669, 361, 6814, 1243], "<s> hello\nworld\n\n"),
    (&[1, 382, 38016, 407], "<s> a \n\n b"),
    (&[1, 1919, 18760, 347, 364], "<s> x\r\n\r\ny\r"),
    (
        &[
            1, 1453, 1109, 536, 2281, 265, 310, 485, 633, 467, 265, 303, 520, 265, 16510, 629,
            3669, 1333, 265, 3383, 512, 6858,
        ],
        "<s> don't WON'T it's I'M we'LL they've You'RE he'd",
    ),
    (
        &[
            1, 379, 275, 276, 277, 278, 279, 280, 281, 379, 282, 283, 379, 277, 272, 275, 278, 275,
            279, 283, 379, 16826, 379, 19207, 379, 229, 136, 174, 379, 220, 164, 220, 165, 220,
            166,
        ],
        "<s> 1234567 89 3.14159 ½ ² Ⅻ ١٢٣",
    ),
    (
        &[1, 418, 768, 6695, 3684, 4760, 35041, 385, 1686, 5313, 461],
        "<s>     indented\n\t\tcode();  // comment   ",
    ),
    (
        &[
            1, 379, 209, 150, 14338, 12105, 26158, 32454, 39941, 379, 209, 157, 36175, 18829,
            16763, 14338, 379, 211, 162, 46822, 16553, 32564, 41306, 7992, 9293, 379, 233, 154,
            168, 40963, 235, 173, 161, 26498, 230, 134, 137, 230, 133, 176, 230, 133, 188, 230,
            134, 139, 379, 240, 152, 159, 237, 184, 176, 239, 153, 183, 36389, 20672, 44581, 31483,
            10917, 379, 30682, 35091, 38753, 16614, 26338, 30605,
        ],
        "<s> Γειά σου Κόσμε Привет мир 日本語のテキスト 한국어 مرحبا नमस्ते",
    ),
    (
        &[
            1, 776, 33784, 47465, 243, 162, 157, 131, 379, 243, 162, 148, 171, 229, 131, 144, 243,
            162, 148, 172, 229, 131, 144, 243, 162, 148, 170, 379, 229, 160, 167, 31771,
        ],
        "<s> emoji 🙂🚀 👨\u{200d}👩\u{200d}👧 ❤️",
    ),
    (
        &[
            1, 426, 207, 132, 379, 10329, 379, 34881, 379, 199, 179, 379, 202, 136, 379, 229, 131,
            142, 229, 131, 144, 242, 190, 194,
        ],
        "<s> e\u{301} ñ ß İ ǅ \u{200b}\u{200d}\u{feff}",
    ),
    (
        &[
            1, 379, 199, 163, 379, 199, 141, 385, 28153, 379, 15535, 336, 32110, 230, 131, 131,
            616, 4676, 229, 131, 140, 39180,
        ],
        "<s> Ġ Ċ  hello \u{a0}nbsp\u{3000}ideographic\u{2009}thin",
    ),
    (
        &[
            1, 493, 28153, 267, 1060, 6814, 319, 1789, 346, 351, 2194, 347, 288, 2012, 279, 1359,
            281, 574, 282, 13580, 283, 11524, 274, 2631, 323, 2306, 324,
        ],
        "<s> (hello) [world] {x} <y> $5 +7 =8 ^9 ~0 |a `b",
    ),
    (
        &[
            1, 49083, 3041, 361, 1907, 443, 379, 276, 269, 276, 289, 49084, 3843, 49083, 11281, 361,
        ],
        "<s><|im_start|> user\nWhat is 2+2?<|im_end|> \n<|im_start|> assistant\n",
    ),
    (
        &[
            1, 6589, 286, 350, 613, 1841, 2819, 350, 288, 2819, 49081, 379, 413, 379, 1, 2,
        ],
        "<s> mixed<|endoftext|>text<tool>  and <s></s>",
    ),
    (
        &[
            1, 12210, 284, 5265, 1869, 7554, 272, 951, 273, 1664, 289, 339, 287, 275, 264, 340,
            287, 276, 261, 28115,
        ],
        "<s> URL: https://example.com/path?q=1&r=2#frag",
    ),
    (
        &[
            1, 14419, 321, 7664, 321, 27319, 5905, 428, 10914, 38352, 15434, 48744, 4852, 321, 293,
            13208,
        ],
        "<s> snake_case_identifier CamelCaseIdentifier SCREAMING_CASE",
    ),
    (
        &[1, 764, 633, 764, 764, 309, 1919, 265, 16510, 457, 265],
        "<s> ''s ' 'S x'LL y'",
    ),
    (&[1, 418], "<s>    "),
    (&[1, 3843], "<s> \n"),
    (&[1, 382], "<s> a"),
    (
        &[1, 5849, 10210, 16782, 289, 27079, 12106, 1800, 3424],
        "<s> !!!???...,,, . ,",
    ),
    (&[1, 35080, 5722, 461, 599], "<s> trailing spaces   \n   "),
    (
        &[1, 379, 3, 358, 375, 380, 197, 136],
        "<s> \u{0}\u{7}\u{1b}\u{7f}\u{85}",
    ),
    (
        &[
            1, 379, 241, 134, 148, 241, 131, 131, 246, 163, 131, 132, 208, 187,
        ],
        "<s> \u{e0d1}\u{e000}\u{e0001}\u{378}",
    ),
    (
        &[1, 38682, 3424, 1032, 5849, 784, 379, 633, 2421, 764, 11018],
        "<s> Hello , world ! It 's done ' ok",
    ),
];

/// The synthesized vocabularies of the new architectures at their real sizes (qwen3's
/// byte-level BPE with the qwen2 pre-tokenizer; gemma3's, Phi-3's and Mistral's SentencePiece
/// with byte fallback, gemma3's without the dummy-prefix space) give exactly llama.cpp's ids for every text of
/// `conformance/ref/tokenizer-synth.jsonl` (BOS as the vocabulary asks, special tokens
/// parsed; scripts/arch-fixtures.sh), and decode the ids after BOS back to texts without
/// special-token markup.
#[test]
fn synthesized_vocabularies_tokenize_as_llama_cpp() {
    let lines = common::jsonl(&common::fixture("conformance/ref/tokenizer-synth.jsonl"));
    let mut by_shape: std::collections::BTreeMap<String, Vec<(String, Vec<u32>)>> =
        Default::default();
    for l in &lines {
        let shape = l["shape"].as_str().expect("shape").to_string();
        let text = l["prompt"].as_str().expect("prompt").to_string();
        by_shape
            .entry(shape)
            .or_default()
            .push((text, common::ids(&l["prompt_ids"])));
    }
    assert_eq!(
        by_shape.keys().collect::<Vec<_>>(),
        ["vocab-gemma3", "vocab-mistral", "vocab-phi3", "vocab-qwen3"]
    );
    let mut failures = Vec::new();
    for (shape, cases) in &by_shape {
        let path = common::fixture(&format!("conformance/shapes/{shape}.toml"));
        let s = cbtop::profile::Profile::shape(path.to_str().unwrap()).unwrap();
        let mix = cbtop::synth::QuantMix::Q8_0;
        let model = cbtop::model::Model::from_bytes(shape, cbtop::synth::build(&s, mix, 38))
            .unwrap_or_else(|e| panic!("{shape}: {e}"));
        let t = &model.tokenizer;
        let kind = if shape == "vocab-qwen3" {
            TokenizerKind::Bpe
        } else {
            TokenizerKind::Spm
        };
        assert_eq!(t.kind(), kind, "{shape}");
        for (text, want) in cases {
            let got = t.encode(text, true);
            if &got != want {
                failures.push(format!(
                    "{shape} {text:?}:\n  got  {got:?}\n  want {want:?}"
                ));
            }
            let markup = ["<|", "<s>", "</s>"].iter().any(|m| text.contains(m));
            let body = match t.bos() {
                Some(bos) if t.add_bos() && want.first() == Some(&bos) => &want[1..],
                _ => &want[..],
            };
            if !markup && &t.decode(body) != text {
                failures.push(format!("{shape}: decode {body:?} -> {:?}", t.decode(body)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
