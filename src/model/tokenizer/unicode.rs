//! Per-code-point character classes (letter, number, whitespace, ...) as llama.cpp's
//! `unicode_cpt_flags` reports them. The pre-tokenizers decide where words end from these classes,
//! so they must agree with llama.cpp code point for code point; the table lives in
//! `unicode_data.rs`, generated from llama.cpp's own data.

use super::unicode_data::{CATEGORY_RANGES, WHITESPACE};

/// Code point flags; `0` means "outside the text" (llama.cpp's empty `unicode_cpt_flags{}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags(u16);

impl Flags {
    pub const UNDEFINED: u16 = 0x0001;
    pub const NUMBER: u16 = 0x0002;
    pub const LETTER: u16 = 0x0004;
    pub const ACCENT_MARK: u16 = 0x0010;
    pub const PUNCTUATION: u16 = 0x0020;
    pub const SYMBOL: u16 = 0x0040;
    pub const MASK_CATEGORIES: u16 = 0x00FF;
    pub const WHITESPACE: u16 = 0x0100;

    /// Flags of one code point.
    pub fn of(cpt: u32) -> Flags {
        if cpt >= 0x110000 {
            return Flags(Self::UNDEFINED);
        }
        // The table starts at 0 and ends with an entry at 0x110000, so the index is in range.
        let i = CATEGORY_RANGES.partition_point(|&(start, _)| start <= cpt) - 1;
        let mut f = CATEGORY_RANGES[i].1 as u16;
        if WHITESPACE.binary_search(&cpt).is_ok() {
            f |= Self::WHITESPACE;
        }
        Flags(f)
    }

    pub fn bits(self) -> u16 {
        self.0
    }
    pub fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    pub fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    pub fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }
    /// The general category bits alone (exactly one is set for a code point).
    pub fn category(self) -> u16 {
        self.0 & Self::MASK_CATEGORIES
    }
}

#[cfg(test)]
mod tests {
    use super::Flags;

    #[test]
    fn classes_of_sample_code_points() {
        assert!(Flags::of('a' as u32).is_letter());
        assert!(Flags::of('Ж' as u32).is_letter());
        assert!(Flags::of('語' as u32).is_letter());
        assert!(Flags::of('7' as u32).is_number());
        assert!(Flags::of('²' as u32).is_number());
        assert!(Flags::of('½' as u32).is_number());
        assert!(Flags::of(' ' as u32).is_whitespace());
        assert!(Flags::of('\n' as u32).is_whitespace());
        assert!(Flags::of(0x3000).is_whitespace());
        assert!(!Flags::of('x' as u32).is_whitespace());
        assert_eq!(Flags::of('!' as u32).category(), Flags::PUNCTUATION);
        assert_eq!(Flags::of('$' as u32).category(), Flags::SYMBOL);
        assert_eq!(Flags::of('🙂' as u32).category(), Flags::SYMBOL);
        assert_eq!(Flags::of(0x0301).category(), Flags::ACCENT_MARK);
        assert_eq!(Flags::of(0x10FFFF).category(), Flags::UNDEFINED);
        assert_ne!(Flags::of(0x10FFFF).bits(), 0);
    }
}
