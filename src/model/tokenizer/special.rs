//! Splitting special tokens out of text before tokenization, as llama.cpp's
//! `tokenizer_st_partition`: for each special token, longest text first, every occurrence in every
//! still-raw fragment becomes a token fragment. Control tokens are only recognised when the caller
//! asks for it (`parse_special`); user-defined tokens always are. A token marked to strip on its
//! right (llama.cpp's `LLAMA_TOKEN_ATTR_RSTRIP`, which it sets for Phi-3's special tokens) eats
//! the whitespace that follows it.

/// A piece of the input: raw text (byte range of the input) or an already-decided token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text { start: usize, end: usize },
    Token(u32),
}

/// Partition `text` by `specials` (`(id, text)`, already in matching order: longest first);
/// after a token for which `rstrip(id)`, the ASCII whitespace C's `isspace` knows is dropped.
pub(crate) fn partition<'a>(
    text: &str,
    specials: impl IntoIterator<Item = (u32, &'a str)>,
    rstrip: impl Fn(u32) -> bool,
) -> Vec<Fragment> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut frags = vec![Fragment::Text {
        start: 0,
        end: text.len(),
    }];
    for (id, pat) in specials {
        if pat.is_empty() {
            continue;
        }
        let mut next = Vec::with_capacity(frags.len() + 2);
        for f in frags {
            let Fragment::Text { start, end } = f else {
                next.push(f);
                continue;
            };
            let mut pos = start;
            while let Some(i) = text[pos..end].find(pat) {
                let m = pos + i;
                if m > pos {
                    next.push(Fragment::Text { start: pos, end: m });
                }
                next.push(Fragment::Token(id));
                pos = m + pat.len();
                if rstrip(id) {
                    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
                    pos += text.as_bytes()[pos..end]
                        .iter()
                        .take_while(|b| space(b))
                        .count();
                }
            }
            if pos < end {
                next.push(Fragment::Text { start: pos, end });
            }
        }
        frags = next;
    }
    frags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(text: &str, frags: &[Fragment]) -> Vec<String> {
        frags
            .iter()
            .map(|f| match *f {
                Fragment::Text { start, end } => text[start..end].to_string(),
                Fragment::Token(id) => format!("#{id}"),
            })
            .collect()
    }

    #[test]
    fn splits_every_occurrence() {
        let t = "<s>a<s><s>b<s>";
        assert_eq!(
            show(t, &partition(t, [(1, "<s>")], |_| false)),
            ["#1", "a", "#1", "#1", "b", "#1"]
        );
        assert!(partition("", [(1, "<s>")], |_| false).is_empty());
        let t = "plain";
        assert_eq!(show(t, &partition(t, [(1, "<s>")], |_| false)), ["plain"]);
    }

    #[test]
    fn longer_tokens_win_when_listed_first() {
        let t = "x<|im_end|>y";
        let frags = partition(t, [(2, "<|im_end|>"), (9, "<|im")], |_| false);
        assert_eq!(show(t, &frags), ["x", "#2", "y"]);
        // In the other order the shorter token takes the text.
        let frags = partition(t, [(9, "<|im"), (2, "<|im_end|>")], |_| false);
        assert_eq!(show(t, &frags), ["x", "#9", "_end|>y"]);
    }

    #[test]
    fn a_right_stripping_token_eats_the_whitespace_after_it() {
        let t = "<|user|>\n \thi<|end|>\n<s> x";
        let frags = partition(t, [(7, "<|user|>"), (8, "<|end|>"), (1, "<s>")], |id| {
            id != 1
        });
        assert_eq!(show(t, &frags), ["#7", "hi", "#8", "#1", " x"]);
    }
}
