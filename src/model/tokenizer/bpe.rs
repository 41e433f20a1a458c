//! Byte-level BPE merging (`tokenizer.ggml.model` = gpt2), as llama.cpp's
//! `llm_tokenizer_bpe_session::tokenize`: each pre-tokenized word is mapped to GPT-2 byte
//! characters, split into characters, and the adjacent pair with the lowest merge rank (leftmost
//! on ties) is merged until no ranked pair is left.

use super::symbol::Symbol;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::error::TokenizerError;

/// Merge ranks: `(left, right)` → index in `tokenizer.ggml.merges`.
#[derive(Debug, Default)]
pub(crate) struct Ranks {
    /// Key: left length (4 bytes LE) ++ left ++ right, so pairs cannot collide.
    map: HashMap<Vec<u8>, u32>,
}

fn key(buf: &mut Vec<u8>, left: &str, right: &str) {
    buf.clear();
    buf.extend_from_slice(&(left.len() as u32).to_le_bytes());
    buf.extend_from_slice(left.as_bytes());
    buf.extend_from_slice(right.as_bytes());
}

impl Ranks {
    /// Parse `"left right"` merges; the split is at the first space after the first byte, as in
    /// llama.cpp. A merge without such a space, or with an empty side, is an error. A repeated
    /// pair keeps its first (lowest) rank.
    pub fn new(merges: &[String]) -> Result<Ranks, TokenizerError> {
        let mut map = HashMap::with_capacity(merges.len());
        let mut buf = Vec::new();
        for (i, m) in merges.iter().enumerate() {
            let bad = || TokenizerError::BadMerge {
                index: i,
                text: m.clone(),
            };
            let first_len = m.chars().next().ok_or_else(bad)?.len_utf8();
            let pos = m[first_len..].find(' ').ok_or_else(bad)? + first_len;
            let (left, right) = (&m[..pos], &m[pos + 1..]);
            if right.is_empty() {
                return Err(bad());
            }
            key(&mut buf, left, right);
            map.entry(buf.clone()).or_insert(i as u32);
        }
        Ok(Ranks { map })
    }

    fn rank(&self, buf: &mut Vec<u8>, left: &str, right: &str) -> Option<u32> {
        key(buf, left, right);
        self.map.get(buf.as_slice()).copied()
    }
}

/// Merge one (byte-encoded) word; returns the byte ranges of the final symbols, in order.
pub(crate) fn merge_word(word: &str, ranks: &Ranks) -> Vec<(usize, usize)> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
    let n = word.chars().count();
    for (i, (start, c)) in word.char_indices().enumerate() {
        symbols.push(Symbol {
            start,
            len: c.len_utf8(),
            prev: i.checked_sub(1),
            next: (i + 1 < n).then_some(i + 1),
        });
    }
    // Min-heap on (rank, left index); the stored length detects stale entries (a symbol only
    // ever grows, or empties when merged into its left neighbour).
    let mut queue: BinaryHeap<Reverse<(u32, usize, usize, usize)>> = BinaryHeap::new();
    let mut buf = Vec::new();
    let push =
        |queue: &mut BinaryHeap<_>, buf: &mut Vec<u8>, syms: &[Symbol], l: usize, r: usize| {
            let (a, b) = (syms[l], syms[r]);
            let left = &word[a.start..a.start + a.len];
            let right = &word[b.start..b.start + b.len];
            if let Some(rank) = ranks.rank(buf, left, right) {
                queue.push(Reverse((rank, l, r, a.len + b.len)));
            }
        };
    for i in 1..symbols.len() {
        push(&mut queue, &mut buf, &symbols, i - 1, i);
    }
    while let Some(Reverse((_, l, r, len))) = queue.pop() {
        let (a, b) = (symbols[l], symbols[r]);
        if a.len == 0 || b.len == 0 || a.len + b.len != len || a.next != Some(r) {
            continue;
        }
        symbols[l].len += b.len;
        symbols[r].len = 0;
        symbols[l].next = b.next;
        if let Some(nx) = b.next {
            symbols[nx].prev = Some(l);
        }
        if let Some(pv) = symbols[l].prev {
            push(&mut queue, &mut buf, &symbols, pv, l);
        }
        if let Some(nx) = symbols[l].next {
            push(&mut queue, &mut buf, &symbols, l, nx);
        }
    }
    symbols
        .iter()
        .filter(|s| s.len > 0)
        .map(|s| (s.start, s.len))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merges(list: &[&str]) -> Ranks {
        Ranks::new(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn pieces(word: &str, r: &Ranks) -> Vec<String> {
        merge_word(word, r)
            .into_iter()
            .map(|(s, l)| word[s..s + l].to_string())
            .collect()
    }

    #[test]
    fn merges_by_rank_not_position() {
        let r = merges(&["b c", "a b", "a bc"]);
        // "b c" ranks first, so "abc" becomes a + bc, then abc.
        assert_eq!(pieces("abc", &r), ["abc"]);
        let r = merges(&["a b", "b c"]);
        assert_eq!(pieces("abc", &r), ["ab", "c"]);
    }

    #[test]
    fn ties_go_leftmost() {
        let r = merges(&["a a"]);
        assert_eq!(pieces("aaa", &r), ["aa", "a"]);
        let r = merges(&["a a", "aa aa"]);
        assert_eq!(pieces("aaaaa", &r), ["aaaa", "a"]);
    }

    #[test]
    fn unranked_pairs_stay_apart() {
        let r = merges(&["x y"]);
        assert_eq!(pieces("ĠHé", &r), ["Ġ", "H", "é"]);
        assert_eq!(pieces("", &r), Vec::<String>::new());
    }

    #[test]
    fn malformed_merges_are_errors() {
        for bad in ["ab", "a ", "", " "] {
            let e = Ranks::new(&[bad.to_string()]).unwrap_err();
            assert!(
                matches!(e, TokenizerError::BadMerge { index: 0, .. }),
                "{bad:?}: {e}"
            );
        }
        // The split is at the first space after the first character: "  x" is (" ", "x").
        let r = merges(&["  x"]);
        assert_eq!(pieces(" x", &r), [" x"]);
    }
}
