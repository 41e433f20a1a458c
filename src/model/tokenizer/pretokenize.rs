//! Pre-tokenization for byte-level BPE: splitting text into words before merging, as llama.cpp's
//! `unicode_regex_split` does for each `tokenizer.ggml.pre` type.
//!
//! llama.cpp applies a list of regexes in sequence, each one splitting every piece left by the
//! previous one; text between matches is kept as its own piece, so nothing is ever dropped. Three
//! common regexes (GPT-2, llama3, qwen2) are not run as regexes at all in llama.cpp but by
//! hand-written scanners with slightly different edge cases (e.g. `\s+(?!\S)` and the
//! case-insensitive contractions); those scanners are ported here line by line. Every other regex is
//! run with `fancy-regex` on the same "collapsed" text llama.cpp builds, where each non-ASCII code
//! point is replaced by one marker per Unicode category, so `\p{L}` and friends mean exactly what
//! they mean in llama.cpp.

use fancy_regex::Regex;

use super::error::TokenizerError;
use super::unicode::Flags;

/// Per-pre-type settings, from llama.cpp's `llama_vocab::impl::load` and the `llm_tokenizer_bpe`
/// constructor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PreConfig {
    /// Name as llama.cpp's `LLAMA_VOCAB_PRE_TYPE_*` (for messages).
    pub kind: &'static str,
    pub regexes: &'static [&'static str],
    /// Use a whole word as one token when the vocabulary has it, without merging.
    pub ignore_merges: bool,
    /// Default of `add_bos` (before `tokenizer.ggml.add_bos_token` overrides it).
    pub add_bos: bool,
    /// Apply llama.cpp's `clean_spaces` pass when detokenizing.
    pub clean_spaces: bool,
    /// The pre type has no default BOS (chatglm).
    pub no_default_bos: bool,
}

const GPT2_RE: &str =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const LLAMA3_RE: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const LLAMA3_RE_ORIG: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_RE: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const DEFAULT_RES: &[&str] = &[
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    GPT2_RE,
    "\\p{N}+",
    "[0-9][0-9][0-9]",
];
const GPT2_RES: &[&str] = &[GPT2_RE];
const LLAMA3_RES: &[&str] = &[LLAMA3_RE];
const QWEN2_RES: &[&str] = &[QWEN2_RE];
const STARCODER_RES: &[&str] = &["\\p{N}", GPT2_RE];
const FALCON_RES: &[&str] = &["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"];
const DEEPSEEK_CODER_RES: &[&str] = &[
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}",
];
const PORO_RES: &[&str] = &[" ?[^(\\s|.,!?…。，、।۔،)]+"];
const VIKING_RES: &[&str] = &[" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"];

impl PreConfig {
    /// Settings for a `tokenizer.ggml.pre` value (`None`: the key is absent, llama.cpp's
    /// "default" with a warning about degraded quality).
    pub fn for_name(pre: Option<&str>) -> Result<PreConfig, TokenizerError> {
        let c = |kind, regexes, clean_spaces| PreConfig {
            kind,
            regexes,
            ignore_merges: false,
            add_bos: false,
            clean_spaces,
            no_default_bos: false,
        };
        let name = match pre {
            None => return Ok(c("DEFAULT", DEFAULT_RES, true)),
            Some(n) => n,
        };
        Ok(match name {
            "default" => c("DEFAULT", DEFAULT_RES, true),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => PreConfig {
                ignore_merges: true,
                add_bos: true,
                ..c("LLAMA3", LLAMA3_RES, true)
            },
            "dbrx" => c("DBRX", LLAMA3_RES, true),
            "smaug-bpe" => c("SMAUG", LLAMA3_RES, true),
            "deepseek-coder" => c("DEEPSEEK_CODER", DEEPSEEK_CODER_RES, false),
            "falcon" => c("FALCON", FALCON_RES, true),
            "mpt" => c("MPT", GPT2_RES, true),
            "starcoder" => c("STARCODER", STARCODER_RES, true),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" => {
                c("GPT2", GPT2_RES, true)
            }
            "refact" => c("REFACT", STARCODER_RES, true),
            "command-r" => c("COMMAND_R", STARCODER_RES, false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" => c("QWEN2", QWEN2_RES, false),
            "stablelm2" => c("STABLELM2", QWEN2_RES, true),
            "megrez" => c("QWEN2", QWEN2_RES, true),
            "hunyuan" => c("HUNYUAN", QWEN2_RES, false),
            "solar-open" => c("SOLAR_OPEN", QWEN2_RES, false),
            "olmo" => c("OLMO", GPT2_RES, true),
            "poro-chat" => c("PORO", PORO_RES, false),
            "bloom" => c("BLOOM", PORO_RES, true),
            "gpt3-finnish" => c("GPT3_FINNISH", PORO_RES, true),
            "chatglm-bpe" => PreConfig {
                no_default_bos: true,
                ..c("CHATGLM4", LLAMA3_RES, true)
            },
            "glm4" | "glm5" => PreConfig {
                no_default_bos: true,
                ignore_merges: true,
                ..c("CHATGLM4", LLAMA3_RES, true)
            },
            "viking" => c("VIKING", VIKING_RES, false),
            "jais" => c("JAIS", GPT2_RES, true),
            "smollm" => c("SMOLLM", STARCODER_RES, false),
            "codeshell" => c("CODESHELL", STARCODER_RES, true),
            "exaone" => c("EXAONE", STARCODER_RES, true),
            "minerva-7b" => c("MINERVA", STARCODER_RES, true),
            "mellum2" => c("MELLUM2", STARCODER_RES, true),
            "trillion" => c("TRILLION", GPT2_RES, false),
            "granite-docling" => c("GRANITE_DOCLING", GPT2_RES, false),
            other => return Err(TokenizerError::UnsupportedPre(other.to_string())),
        })
    }
}

/// One splitting step.
#[derive(Debug)]
enum Splitter {
    /// llama.cpp's `unicode_regex_split_custom_gpt2`.
    Gpt2,
    /// `unicode_regex_split_custom_llama3` (`max_digits` 3) and `_qwen2` (`max_digits` 1).
    Llama3 { max_digits: usize },
    /// A general regex, run on collapsed text when it uses Unicode categories.
    Regex { re: Box<Regex>, collapsed: bool },
}

/// The compiled splitting pipeline of one pre-tokenizer type.
#[derive(Debug)]
pub(crate) struct PreTokenizer {
    steps: Vec<Splitter>,
    needs_collapse: bool,
}

/// Marker code points standing for a non-ASCII code point of each category in collapsed text
/// (llama.cpp uses the bytes 0xD0..=0xD5; private-use code points play that role here).
const MARK_OTHER: char = '\u{E0D0}';
const MARK_NUMBER: char = '\u{E0D1}';
const MARK_LETTER: char = '\u{E0D2}';
const MARK_PUNCT: char = '\u{E0D3}';
const MARK_ACCENT: char = '\u{E0D4}';
const MARK_SYMBOL: char = '\u{E0D5}';

/// Unicode category escapes llama.cpp recognises, and the category each stands for (note that
/// llama.cpp approximates the letter sub-categories by all letters).
const UCATS: [(&str, u16); 10] = [
    ("\\p{N}", Flags::NUMBER),
    ("\\p{L}", Flags::LETTER),
    ("\\p{P}", Flags::PUNCTUATION),
    ("\\p{M}", Flags::ACCENT_MARK),
    ("\\p{S}", Flags::SYMBOL),
    ("\\p{Lu}", Flags::LETTER),
    ("\\p{Ll}", Flags::LETTER),
    ("\\p{Lt}", Flags::LETTER),
    ("\\p{Lm}", Flags::LETTER),
    ("\\p{Lo}", Flags::LETTER),
];

/// Class contents replacing a category escape in a collapsed regex: the marker plus the ASCII
/// members of the category (llama.cpp's `k_ucat_map`).
fn collapsed_class(cat: u16) -> String {
    let (mark, ascii) = match cat {
        Flags::NUMBER => (MARK_NUMBER, "\\x30-\\x39"),
        Flags::LETTER => (MARK_LETTER, "\\x41-\\x5A\\x61-\\x7A"),
        Flags::PUNCTUATION => (
            MARK_PUNCT,
            "\\x21-\\x23\\x25-\\x2A\\x2C-\\x2F\\x3A-\\x3B\\x3F-\\x40\\x5B-\\x5D\\x5F\\x7B\\x7D",
        ),
        Flags::ACCENT_MARK => (MARK_ACCENT, ""),
        _ => (MARK_SYMBOL, "\\x24\\x2B\\x3C-\\x3E\\x5E\\x60\\x7C\\x7E"),
    };
    format!("\\x{{{:X}}}{ascii}", mark as u32)
}

fn uses_categories(regex: &str) -> bool {
    UCATS.iter().any(|(pat, _)| regex.contains(pat))
}

/// Rewrite a regex for collapsed text, as llama.cpp's `unicode_regex_split` does.
fn collapse_regex(regex: &str) -> Result<String, String> {
    if !regex.is_ascii() {
        return Err("unicode categories and non-ASCII characters in one regex".into());
    }
    let b = regex.as_bytes();
    let mut out = String::new();
    let mut inside = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' && (i == 0 || b[i - 1] != b'\\') {
            out.push('[');
            inside = true;
            i += 1;
            continue;
        }
        if inside && b[i] == b']' && b[i - 1] != b'\\' {
            out.push(']');
            inside = false;
            i += 1;
            continue;
        }
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'p' && b[i + 2] == b'{' {
            if let Some(close) = regex[i + 3..].find('}').map(|p| p + i + 3) {
                if close <= i + 10 {
                    let pat = &regex[i..=close];
                    if let Some(&(_, cat)) = UCATS.iter().find(|(p, _)| *p == pat) {
                        if !inside {
                            out.push('[');
                        }
                        out.push_str(&collapsed_class(cat));
                        if !inside {
                            out.push(']');
                        }
                        i = close + 1;
                        continue;
                    }
                }
            }
        }
        out.push(b[i] as char);
        i += 1;
    }
    Ok(out)
}

impl PreTokenizer {
    pub fn new(pre_name: &str, regexes: &[&str]) -> Result<PreTokenizer, TokenizerError> {
        let mut steps = Vec::new();
        let bad = |regex: &str, why: String| TokenizerError::BadRegex {
            pre: pre_name.to_string(),
            regex: regex.to_string(),
            why,
        };
        for &r in regexes {
            let step = if r == GPT2_RE {
                Splitter::Gpt2
            } else if r == LLAMA3_RE || r == LLAMA3_RE_ORIG {
                Splitter::Llama3 { max_digits: 3 }
            } else if r == QWEN2_RE {
                Splitter::Llama3 { max_digits: 1 }
            } else {
                let collapsed = uses_categories(r);
                let src = if collapsed {
                    collapse_regex(r).map_err(|e| bad(r, e))?
                } else {
                    r.into()
                };
                let re = Regex::new(&src).map_err(|e| bad(r, e.to_string()))?;
                Splitter::Regex {
                    re: Box::new(re),
                    collapsed,
                }
            };
            steps.push(step);
        }
        let needs_collapse = regexes.iter().any(|r| uses_categories(r));
        Ok(PreTokenizer {
            steps,
            needs_collapse,
        })
    }

    /// Split `text` into words (as `&str` slices of `text`, in order, covering all of it).
    pub fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let cpts: Vec<char> = text.chars().collect();
        if cpts.is_empty() {
            return Vec::new();
        }
        let flags: Vec<Flags> = cpts.iter().map(|&c| Flags::of(c as u32)).collect();
        // Byte offset of each code point, plus the end.
        let mut byte_at: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        byte_at.push(text.len());

        let collapsed_text = if self.needs_collapse {
            Some(collapsed(&cpts, &flags, true))
        } else {
            None
        };
        let mut plain_text: Option<(String, Vec<usize>)> = None;

        let mut lens: Vec<usize> = vec![cpts.len()];
        for step in &self.steps {
            lens = match step {
                Splitter::Gpt2 => split_gpt2(&cpts, &flags, &lens),
                Splitter::Llama3 { max_digits } => split_llama3(&cpts, &flags, &lens, *max_digits),
                Splitter::Regex {
                    re,
                    collapsed: true,
                } => {
                    let (s, offs) = collapsed_text.as_ref().expect("collapsed text built");
                    split_regex(re, s, offs, &lens)
                }
                Splitter::Regex {
                    re,
                    collapsed: false,
                } => {
                    let (s, offs) =
                        plain_text.get_or_insert_with(|| collapsed(&cpts, &flags, false));
                    split_regex(re, s, offs, &lens)
                }
            };
        }

        let mut words = Vec::with_capacity(lens.len());
        let mut start = 0;
        for len in lens {
            words.push(&text[byte_at[start]..byte_at[start + len]]);
            start += len;
        }
        words
    }
}

/// The text a general regex runs on: with `categories`, llama.cpp's collapsed text (ASCII kept,
/// every other code point replaced by a marker of its category, non-ASCII whitespace by `\x0B`);
/// without, the text with only non-ASCII whitespace replaced by `\x0B`. Returns the string and the
/// byte offset of each code point (plus the end).
fn collapsed(cpts: &[char], flags: &[Flags], categories: bool) -> (String, Vec<usize>) {
    let mut s = String::with_capacity(cpts.len());
    let mut offs = Vec::with_capacity(cpts.len() + 1);
    for (&c, &f) in cpts.iter().zip(flags) {
        offs.push(s.len());
        if (c as u32) < 128 {
            s.push(c);
        } else if f.is_whitespace() {
            s.push('\x0B');
        } else if !categories {
            s.push(c);
        } else {
            s.push(match f.category() {
                Flags::NUMBER => MARK_NUMBER,
                Flags::LETTER => MARK_LETTER,
                Flags::PUNCTUATION => MARK_PUNCT,
                Flags::ACCENT_MARK => MARK_ACCENT,
                Flags::SYMBOL => MARK_SYMBOL,
                _ => MARK_OTHER,
            });
        }
    }
    offs.push(s.len());
    (s, offs)
}

/// `unicode_regex_split_stl`: within each piece, every match and every gap between matches
/// becomes a piece.
fn split_regex(re: &Regex, s: &str, offs: &[usize], lens: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(lens.len());
    let cpt_at = |byte: usize| offs.partition_point(|&o| o < byte);
    let mut start = 0;
    for &len in lens {
        let (b0, b1) = (offs[start], offs[start + len]);
        let piece = &s[b0..b1];
        let mut prev = start;
        for m in re.find_iter(piece) {
            // A regex that gives up (backtracking limit) leaves the rest of the piece whole.
            let Ok(m) = m else { break };
            if m.start() == m.end() {
                continue;
            }
            let (m0, m1) = (cpt_at(b0 + m.start()), cpt_at(b0 + m.end()));
            if m0 > prev {
                out.push(m0 - prev);
            }
            out.push(m1 - m0);
            prev = m1;
        }
        if prev < start + len {
            out.push(start + len - prev);
        }
        start += len;
    }
    out
}

/// Accessors over one piece `[ini, end)`: outside it, no code point and empty flags.
struct Piece<'a> {
    cpts: &'a [char],
    flags: &'a [Flags],
    ini: usize,
    end: usize,
}

impl Piece<'_> {
    fn cpt(&self, pos: usize) -> Option<char> {
        (self.ini <= pos && pos < self.end).then(|| self.cpts[pos])
    }
    fn flags(&self, pos: usize) -> Flags {
        if self.ini <= pos && pos < self.end {
            self.flags[pos]
        } else {
            Flags::default()
        }
    }
    /// Length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`) at `pos`, if any.
    fn contraction(&self, pos: usize, case_insensitive: bool) -> Option<usize> {
        if self.cpt(pos) != Some('\'') || pos + 1 >= self.end {
            return None;
        }
        let low = |c: Option<char>| {
            let c = c.unwrap_or('\0');
            if case_insensitive {
                c.to_ascii_lowercase()
            } else {
                c
            }
        };
        let next = low(self.cpt(pos + 1));
        if matches!(next, 's' | 't' | 'm' | 'd') {
            return Some(2);
        }
        if pos + 2 < self.end {
            let nn = low(self.cpt(pos + 2));
            if matches!((next, nn), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                return Some(3);
            }
        }
        None
    }
}

/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)` as llama.cpp's
/// `unicode_regex_split_custom_gpt2` scans it.
fn split_gpt2(cpts: &[char], flags: &[Flags], lens: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(lens.len());
    let mut start = 0;
    for &len in lens {
        let p = Piece {
            cpts,
            flags,
            ini: start,
            end: start + len,
        };
        start += len;
        let mut prev_end = p.ini;
        let mut add = |end: usize, out: &mut Vec<usize>| {
            let n = end - prev_end;
            if n > 0 {
                out.push(n);
            }
            prev_end = end;
        };
        let other =
            |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.bits() != 0;
        let mut pos = p.ini;
        while pos < p.end {
            let cpt = cpts[pos];
            let f = flags[pos];
            if let Some(n) = p.contraction(pos, false) {
                pos += n;
                add(pos, &mut out);
                continue;
            }
            let space = cpt == ' ';
            let mut f2 = if space { p.flags(pos + 1) } else { f };
            if f2.is_letter() {
                pos += space as usize;
                while f2.is_letter() {
                    pos += 1;
                    f2 = p.flags(pos);
                }
                add(pos, &mut out);
                continue;
            }
            if f2.is_number() {
                pos += space as usize;
                while f2.is_number() {
                    pos += 1;
                    f2 = p.flags(pos);
                }
                add(pos, &mut out);
                continue;
            }
            if other(f2) {
                pos += space as usize;
                while other(f2) {
                    pos += 1;
                    f2 = p.flags(pos);
                }
                add(pos, &mut out);
                continue;
            }
            let mut n_ws = 0;
            while p.flags(pos + n_ws).is_whitespace() {
                n_ws += 1;
            }
            // \s+(?!\S): leave the last whitespace for the next word.
            if n_ws > 1 && p.cpt(pos + n_ws).is_some() {
                pos += n_ws - 1;
                add(pos, &mut out);
                continue;
            }
            if n_ws > 0 {
                pos += n_ws;
                add(pos, &mut out);
                continue;
            }
            pos += 1;
            add(pos, &mut out);
        }
    }
    out
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
/// \s*[\r\n]+|\s+(?!\S)|\s+` as llama.cpp's `unicode_regex_split_custom_llama3` scans it; with
/// `max_digits` 1 it is `unicode_regex_split_custom_qwen2` (`\p{N}` instead of `\p{N}{1,3}`).
fn split_llama3(cpts: &[char], flags: &[Flags], lens: &[usize], max_digits: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(lens.len());
    let mut start = 0;
    for &len in lens {
        let p = Piece {
            cpts,
            flags,
            ini: start,
            end: start + len,
        };
        start += len;
        let mut prev_end = p.ini;
        let mut add = |end: usize, out: &mut Vec<usize>| {
            let n = end - prev_end;
            if n > 0 {
                out.push(n);
            }
            prev_end = end;
        };
        let mut pos = p.ini;
        while pos < p.end {
            let cpt = cpts[pos];
            let f = flags[pos];
            if let Some(n) = p.contraction(pos, true) {
                pos += n;
                add(pos, &mut out);
                continue;
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(cpt == '\r' || cpt == '\n' || f.is_number())
                && (f.is_letter() || p.flags(pos + 1).is_letter())
            {
                pos += 1;
                while p.flags(pos).is_letter() {
                    pos += 1;
                }
                add(pos, &mut out);
                continue;
            }
            // \p{N}{1,3} (llama3) or \p{N} (qwen2)
            if f.is_number() {
                if max_digits == 1 {
                    pos += 1;
                    add(pos, &mut out);
                    continue;
                }
                let mut ini = pos;
                while p.flags(pos).is_number() {
                    pos += 1;
                    if pos - ini >= max_digits {
                        add(pos, &mut out);
                        ini = pos;
                    }
                }
                add(pos, &mut out);
                continue;
            }
            // <space>?[^\s\p{L}\p{N}]+[\r\n]*
            let mut f2 = if cpt == ' ' { p.flags(pos + 1) } else { f };
            let other = |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number());
            if other(f2) && f.bits() != 0 {
                pos += (cpt == ' ') as usize;
                while other(f2) && f2.bits() != 0 {
                    pos += 1;
                    f2 = p.flags(pos);
                }
                while matches!(p.cpt(pos), Some('\r' | '\n')) {
                    pos += 1;
                }
                add(pos, &mut out);
                continue;
            }
            let mut n_ws = 0;
            let mut last_end_r_or_n = 0;
            while p.flags(pos + n_ws).is_whitespace() {
                if matches!(p.cpt(pos + n_ws), Some('\r' | '\n')) {
                    last_end_r_or_n = pos + n_ws + 1;
                }
                n_ws += 1;
            }
            // \s*[\r\n]+
            if last_end_r_or_n > 0 {
                pos = last_end_r_or_n;
                add(pos, &mut out);
                continue;
            }
            // \s+(?!\S)
            if n_ws > 1 && p.cpt(pos + n_ws).is_some() {
                pos += n_ws - 1;
                add(pos, &mut out);
                continue;
            }
            if n_ws > 0 {
                pos += n_ws;
                add(pos, &mut out);
                continue;
            }
            pos += 1;
            add(pos, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: &str, text: &str) -> Vec<String> {
        let cfg = PreConfig::for_name(Some(pre)).unwrap();
        let p = PreTokenizer::new(pre, cfg.regexes).unwrap();
        p.split(text).into_iter().map(str::to_string).collect()
    }

    #[test]
    fn every_supported_pre_type_compiles() {
        for name in [
            "default",
            "llama3",
            "llama-bpe",
            "dbrx",
            "smaug-bpe",
            "deepseek-coder",
            "falcon",
            "mpt",
            "starcoder",
            "gpt-2",
            "refact",
            "command-r",
            "qwen2",
            "stablelm2",
            "megrez",
            "olmo",
            "poro-chat",
            "bloom",
            "chatglm-bpe",
            "glm4",
            "viking",
            "jais",
            "smollm",
            "codeshell",
            "exaone",
            "minerva-7b",
            "trillion",
            "granite-docling",
        ] {
            let cfg = PreConfig::for_name(Some(name)).unwrap();
            let p = PreTokenizer::new(name, cfg.regexes).unwrap();
            let text = "Hello, world! 12345 don't\n\n  x  ";
            assert_eq!(p.split(text).concat(), text, "{name} loses text");
        }
        assert!(matches!(
            PreConfig::for_name(Some("no-such-pre")),
            Err(TokenizerError::UnsupportedPre(_))
        ));
    }

    #[test]
    fn gpt2_splits() {
        assert_eq!(split("gpt-2", "Hello world"), ["Hello", " world"]);
        // \s+(?!\S): the last space of a run joins the next word.
        assert_eq!(split("gpt-2", "a   b"), ["a", "  ", " b"]);
        // Trailing whitespace stays together.
        assert_eq!(split("gpt-2", "a  "), ["a", "  "]);
        // Contractions are case-sensitive in GPT-2.
        assert_eq!(
            split("gpt-2", "don't DON'T"),
            ["don", "'t", " DON", "'", "T"]
        );
        assert_eq!(split("gpt-2", "x 12 !!"), ["x", " 12", " !!"]);
    }

    #[test]
    fn smollm_splits_digits_first() {
        assert_eq!(split("smollm", "abc 123"), ["abc", " ", "1", "2", "3"]);
        assert_eq!(split("smollm", "1, 2"), ["1", ",", " ", "2"]);
    }

    #[test]
    fn llama3_splits() {
        // Case-insensitive contractions.
        assert_eq!(
            split("llama-bpe", "DON'T we'LL"),
            ["DON", "'T", " we", "'LL"]
        );
        // Digits in groups of up to three.
        assert_eq!(split("llama-bpe", "1234567"), ["123", "456", "7"]);
        // One non-letter may lead a word; newlines collect.
        assert_eq!(
            split("llama-bpe", "(hello)\n\n x"),
            ["(hello", ")\n\n", " x"]
        );
        assert_eq!(split("llama-bpe", "a \n\n b"), ["a", " \n\n", " b"]);
        assert_eq!(split("llama-bpe", "a   b"), ["a", "  ", " b"]);
    }

    #[test]
    fn qwen2_splits_single_digits() {
        assert_eq!(split("qwen2", "x1234"), ["x", "1", "2", "3", "4"]);
    }

    #[test]
    fn default_pre_uses_collapsed_regexes() {
        // Punctuation runs split first, then GPT-2, then numbers, then groups of three digits.
        assert_eq!(
            split("default", "a,b 12345"),
            ["a", ",", "b", " ", "123", "45"]
        );
    }

    #[test]
    fn collapse_rewrites_categories() {
        let r = collapse_regex("[^\\s\\p{L}]\\p{N}+").unwrap();
        assert_eq!(
            r,
            "[^\\s\\x{E0D2}\\x41-\\x5A\\x61-\\x7A][\\x{E0D1}\\x30-\\x39]+"
        );
        assert!(collapse_regex("\\p{L}é").is_err());
    }
}
