//! GPT-2's reversible byte ↔ unicode map. Byte-level BPE vocabularies store every token as a string
//! of "printable" stand-in characters, one per byte (a space is `Ġ`, a newline `Ċ`); text is mapped
//! byte by byte before merging and mapped back when decoding.

/// The stand-in character for each byte (GPT-2's `bytes_to_unicode`).
pub(crate) fn byte_to_char(b: u8) -> char {
    BYTE_TO_CHAR[b as usize]
}

/// The byte a stand-in character represents, or `None` for any other character.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if is_printable(cp) {
        return Some(cp as u8);
    }
    // The 68 remaining bytes map, in increasing order, to U+0100, U+0101, ...
    if (256..256 + 68).contains(&cp) {
        return Some(UNPRINTABLE[(cp - 256) as usize]);
    }
    None
}

/// Map UTF-8 text to its byte-level representation.
pub(crate) fn encode_bytes(text: &str, out: &mut String) {
    for &b in text.as_bytes() {
        out.push(byte_to_char(b));
    }
}

/// Bytes that stand for themselves: `!`..=`~`, `¡`..=`¬`, `®`..=`ÿ`.
const fn is_printable(cp: u32) -> bool {
    (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)
}

const UNPRINTABLE: [u8; 68] = {
    let mut t = [0u8; 68];
    let mut n = 0;
    let mut b = 0u32;
    while b < 256 {
        if !is_printable(b) {
            t[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    t
};

const BYTE_TO_CHAR: [char; 256] = {
    let mut t = ['\0'; 256];
    let mut n = 0u32;
    let mut b = 0u32;
    while b < 256 {
        let cp = if is_printable(b) {
            b
        } else {
            n += 1;
            256 + n - 1
        };
        t[b as usize] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_256_bytes_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = byte_to_char(b);
            assert!(
                seen.insert(c),
                "byte {b:#04x} maps to a character already used"
            );
            assert_eq!(
                char_to_byte(c),
                Some(b),
                "byte {b:#04x} -> {c:?} does not map back"
            );
        }
        assert_eq!(seen.len(), 256);
    }

    #[test]
    fn known_stand_ins() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'\t'), 'ĉ');
        assert_eq!(byte_to_char(0), 'Ā');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xAD), 'Ń');
        assert_eq!(char_to_byte('Ń'), Some(0xAD));
        assert_eq!(char_to_byte(' '), None);
        assert_eq!(char_to_byte('中'), None);
        let mut s = String::new();
        encode_bytes("é x", &mut s);
        assert_eq!(s, "Ã©Ġx");
    }
}
