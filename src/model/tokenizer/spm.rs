//! SentencePiece-style merging (`tokenizer.ggml.model` = llama), as llama.cpp's
//! `llm_tokenizer_spm_session`: the text (spaces already escaped to `▁`) is split into characters,
//! and the adjacent pair whose concatenation is the highest-scoring vocabulary token (leftmost on
//! ties) is merged until no pair forms a token. Characters left without a token fall back to
//! `<0xNN>` byte tokens.

use super::symbol::Symbol;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

/// A candidate merge, ordered like llama.cpp's `llm_bigram_spm::comparator` (max score, then
/// min left index).
#[derive(Debug)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| Reverse(self.left).cmp(&Reverse(o.left)))
    }
}

/// Tokenize one escaped fragment, appending ids to `out`. `byte_token` gives the fallback token
/// for a byte (or `None` to drop it).
pub(crate) fn tokenize(
    text: &str,
    token_to_id: &HashMap<String, u32>,
    scores: &[f32],
    byte_token: impl Fn(u8) -> Option<u32>,
    out: &mut Vec<u32>,
) {
    let n = text.chars().count();
    if n == 0 {
        return;
    }
    let mut symbols: Vec<Symbol> = text
        .char_indices()
        .enumerate()
        .map(|(i, (start, c))| Symbol {
            start,
            len: c.len_utf8(),
            prev: i.checked_sub(1),
            next: (i + 1 < n).then_some(i + 1),
        })
        .collect();
    let mut queue = BinaryHeap::new();
    let try_add = |queue: &mut BinaryHeap<Bigram>, syms: &[Symbol], l: usize, r: usize| {
        let (a, b) = (syms[l], syms[r]);
        let piece = &text[a.start..b.start + b.len];
        if let Some(&id) = token_to_id.get(piece) {
            let score = scores.get(id as usize).copied().unwrap_or(0.0);
            queue.push(Bigram {
                score,
                left: l,
                right: r,
                len: piece.len(),
            });
        }
    };
    for i in 1..symbols.len() {
        try_add(&mut queue, &symbols, i - 1, i);
    }
    while let Some(bg) = queue.pop() {
        let (a, b) = (symbols[bg.left], symbols[bg.right]);
        if a.len == 0 || b.len == 0 || a.len + b.len != bg.len {
            continue;
        }
        symbols[bg.left].len += b.len;
        symbols[bg.right].len = 0;
        symbols[bg.left].next = b.next;
        if let Some(nx) = b.next {
            symbols[nx].prev = Some(bg.left);
        }
        if let Some(pv) = symbols[bg.left].prev {
            try_add(&mut queue, &symbols, pv, bg.left);
        }
        if let Some(nx) = symbols[bg.left].next {
            try_add(&mut queue, &symbols, bg.left, nx);
        }
    }
    // Every merged symbol is a token (a pair is only queued when its text is one), so llama.cpp's
    // `resegment` through `rev_merge` never applies: a symbol is a token or a lone character.
    let mut i = Some(0);
    while let Some(k) = i {
        let s = symbols[k];
        let piece = &text[s.start..s.start + s.len];
        match token_to_id.get(piece) {
            Some(&id) => out.push(id),
            None => out.extend(piece.bytes().filter_map(&byte_token)),
        }
        i = s.next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(entries: &[(&str, f32)]) -> (HashMap<String, u32>, Vec<f32>) {
        let map = entries
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (t.to_string(), i as u32))
            .collect();
        (map, entries.iter().map(|e| e.1).collect())
    }

    #[test]
    fn highest_score_merges_first() {
        let (map, scores) = vocab(&[
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", -2.0),
            ("bc", -1.0),
        ]);
        let mut out = Vec::new();
        tokenize("abc", &map, &scores, |_| None, &mut out);
        assert_eq!(out, [0, 4]); // a + bc: "bc" scores higher than "ab"
    }

    #[test]
    fn ties_merge_leftmost() {
        let (map, scores) = vocab(&[("a", 0.0), ("aa", -1.0)]);
        let mut out = Vec::new();
        tokenize("aaa", &map, &scores, |_| None, &mut out);
        assert_eq!(out, [1, 0]);
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes() {
        let (map, scores) = vocab(&[("a", 0.0)]);
        let mut out = Vec::new();
        tokenize("aé", &map, &scores, |b| Some(1000 + b as u32), &mut out);
        assert_eq!(out, [0, 1000 + 0xC3, 1000 + 0xA9]);
    }
}
