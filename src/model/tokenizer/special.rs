//! Splitting special tokens out of text before tokenization, as llama.cpp's
//! `tokenizer_st_partition`: for each special token, longest text first, every occurrence in every
//! still-raw fragment becomes a token fragment. Control tokens are only recognised when the caller
//! asks for it (`parse_special`); user-defined tokens always are.

/// A piece of the input: raw text (byte range of the input) or an already-decided token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text { start: usize, end: usize },
    Token(u32),
}

/// Partition `text` by `specials` (`(id, text)`, already in matching order: longest first).
pub(crate) fn partition<'a>(
    text: &str,
    specials: impl IntoIterator<Item = (u32, &'a str)>,
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
            show(t, &partition(t, [(1, "<s>")])),
            ["#1", "a", "#1", "#1", "b", "#1"]
        );
        assert!(partition("", [(1, "<s>")]).is_empty());
        let t = "plain";
        assert_eq!(show(t, &partition(t, [(1, "<s>")])), ["plain"]);
    }

    #[test]
    fn longer_tokens_win_when_listed_first() {
        let t = "x<|im_end|>y";
        let frags = partition(t, [(2, "<|im_end|>"), (9, "<|im")]);
        assert_eq!(show(t, &frags), ["x", "#2", "y"]);
        // In the other order the shorter token takes the text.
        let frags = partition(t, [(9, "<|im"), (2, "<|im_end|>")]);
        assert_eq!(show(t, &frags), ["x", "#9", "_end|>y"]);
    }
}
