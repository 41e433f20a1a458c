//! From ids back to bytes: the per-token piece llama.cpp's `token_to_piece` renders, and the
//! `clean_spaces` post-pass of its `detokenize` (undoing tokenizer-inserted spaces before
//! punctuation and contractions) for the pre-tokenizer types that enable it.

use super::bytes::char_to_byte;
use super::kind::TokenizerKind;
use super::vocab::{attr, parse_byte_token};

/// `token_to_piece(special = true)` of one token.
pub(crate) fn piece_bytes(kind: TokenizerKind, text: &str, a: u16) -> Vec<u8> {
    if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
        return text.as_bytes().to_vec();
    }
    if a & attr::NORMAL != 0 {
        return match kind {
            TokenizerKind::Spm => text.replace('\u{2581}', " ").into_bytes(),
            TokenizerKind::Bpe => decode_byte_level(text),
        };
    }
    if a & attr::BYTE != 0 {
        // Validated when the tokenizer was built.
        return parse_byte_token(text).map(|b| vec![b]).unwrap_or_default();
    }
    Vec::new()
}

/// llama.cpp's `llama_decode_text`: each character to its byte; a character outside the map is
/// rendered as `[UNK_BYTE_0x..]` followed by the token text, exactly as llama.cpp does.
fn decode_byte_level(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// llama.cpp's `clean_spaces` passes, in place, with the same quirks.
pub(crate) fn clean_spaces(text: &mut Vec<u8>) {
    // First pass: " ?", " !", " .", " ," lose the space.
    let total1 = text.len();
    let mut total = usize::from(total1 > 0);
    for i in 1..total1 {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);

    // Second pass: a single apostrophe between spaces loses both spaces.
    let total2 = text.len();
    let mut total = usize::from(total2 > 0);
    let mut i = 1;
    while i < total2 {
        let x = text[i];
        if x == b'\'' && i + 1 < total2 && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    text.truncate(total);

    // Third pass: " 's", " 'm", " 're", " 've" lose the space.
    let total3 = text.len();
    let mut total = usize::from(total3 > 0);
    for i in 1..total3 {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < total3 {
            let x1 = text[i + 1];
            if x1 == b's' || x1 == b'm' {
                total -= 1;
            } else if i + 2 < total3 {
                let x2 = text[i + 2];
                if matches!((x1, x2), (b'r' | b'v', b'e')) {
                    total -= 1;
                }
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        clean_spaces(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn clean_spaces_matches_llama_cpp() {
        assert_eq!(clean("Hello , world !"), "Hello, world!");
        assert_eq!(clean("a ' b"), "a'b");
        assert_eq!(
            clean("it 's I 'm we 're they 've"),
            "it's I'm we're they've"
        );
        assert_eq!(clean("don 't we 'll"), "don 't we 'll");
        assert_eq!(clean(""), "");
        assert_eq!(clean(" ."), ".");
    }

    #[test]
    fn pieces_by_attribute() {
        assert_eq!(
            piece_bytes(TokenizerKind::Bpe, "ĠHello", attr::NORMAL),
            b" Hello"
        );
        assert_eq!(
            piece_bytes(TokenizerKind::Bpe, "<|im_end|>", attr::CONTROL),
            b"<|im_end|>"
        );
        assert_eq!(
            piece_bytes(TokenizerKind::Spm, "▁Hello", attr::NORMAL),
            b" Hello"
        );
        assert_eq!(piece_bytes(TokenizerKind::Spm, "<0x0A>", attr::BYTE), b"\n");
        assert_eq!(
            piece_bytes(TokenizerKind::Spm, "<unused>", attr::UNUSED),
            b""
        );
        assert_eq!(
            piece_bytes(TokenizerKind::Bpe, "a中", attr::NORMAL),
            b"a[UNK_BYTE_0xe4b8ada\xe4\xb8\xad]"
        );
    }
}
