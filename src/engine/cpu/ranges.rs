//! Work split into one contiguous range of units per thread: each thread takes its own range
//! front to back a few units at a time and, once it runs out, the back half of what another
//! thread has left. A token's products stream their weights from memory once: long ranges keep
//! each thread's stream unbroken, and taking halves at the end keeps a thread that runs slower
//! for a moment, or starts late, from holding the others at the end of every call (as two or
//! four fixed tasks per thread did).
//!
//! Each range is one atomic word holding its next unit and its end. Its owner claims from the
//! front and the others take from the back, each by compare-and-swap on the whole word, so a
//! unit leaves a range exactly once; a taken piece becomes the taker's own range, open to
//! others in turn. Written here because rayon's splitting halves the whole job from the start,
//! which cuts every thread's stream into pieces, and the pool (`pool.rs`) hands out chunks from
//! one counter, which has no notion of a thread's own contiguous share.

use crossbeam_utils::CachePadded;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most units an owner claims at once: its claims shrink to one as its range runs down, so
/// what others can take stays most of what is left.
const MAX_CLAIM: usize = 8;

/// The ranges of one parallel call.
#[derive(Default)]
pub struct Ranges {
    words: Vec<CachePadded<AtomicU64>>,
}

/// A range's word: its next unit in the low half, its end in the high half.
fn pack(next: usize, end: usize) -> u64 {
    next as u64 | (end as u64) << 32
}

fn unpack(word: u64) -> (usize, usize) {
    ((word & 0xffff_ffff) as usize, (word >> 32) as usize)
}

impl Ranges {
    /// Units `0..units` in `parts` contiguous ranges (part `i` before part `i + 1`), as equal
    /// as can be. Made before the parallel call that takes them (the pool's publishing of the
    /// call orders these stores before its threads' loads).
    pub fn split(&mut self, units: usize, parts: usize) {
        assert!(
            units <= u32::MAX as usize,
            "{units} units do not fit a range's word"
        );
        let parts = parts.max(1);
        if self.words.len() < parts {
            self.words.resize_with(parts, Default::default);
        }
        self.words.truncate(parts);
        for (i, w) in self.words.iter().enumerate() {
            w.store(
                pack(i * units / parts, (i + 1) * units / parts),
                Ordering::Relaxed,
            );
        }
    }

    /// Ranges `split` made.
    pub fn parts(&self) -> usize {
        self.words.len()
    }

    /// Runs `f` on pieces of units until no range has any left: part `part`'s own range
    /// first, front to back, then pieces taken from the back of the others'. Each unit goes to
    /// exactly one `f` call, whichever thread runs it, as long as each part's `work` runs once
    /// at a time (a range has one owner).
    pub fn work(&self, part: usize, mut f: impl FnMut(Range<usize>)) {
        let own = &self.words[part];
        loop {
            while let Some(units) = claim(own) {
                f(units);
            }
            let Some((next, end)) = self.take_half() else {
                return;
            };
            // The owner's range is empty, and nobody takes from an empty range, so nothing
            // changes it between the last claim and this store.
            own.store(pack(next, end), Ordering::Release);
        }
    }

    /// The back half (rounded up) of the range with the most units left, taken out of it, or
    /// None once every range is empty.
    fn take_half(&self) -> Option<(usize, usize)> {
        loop {
            let (word, seen) = self
                .words
                .iter()
                .map(|w| (w, w.load(Ordering::Acquire)))
                .max_by_key(|&(_, v)| {
                    let (next, end) = unpack(v);
                    end.saturating_sub(next)
                })?;
            let (next, end) = unpack(seen);
            if next >= end {
                return None;
            }
            let from = end - (end - next).div_ceil(2);
            let taken =
                word.compare_exchange(seen, pack(next, from), Ordering::AcqRel, Ordering::Acquire);
            if taken.is_ok() {
                return Some((from, end));
            }
        }
    }
}

/// The next few units from the front of `word`'s range (a quarter of what is left, between one
/// and `MAX_CLAIM`), or None when it is empty.
fn claim(word: &AtomicU64) -> Option<Range<usize>> {
    let mut seen = word.load(Ordering::Acquire);
    loop {
        let (next, end) = unpack(seen);
        if next >= end {
            return None;
        }
        let take = ((end - next) / 4).clamp(1, MAX_CLAIM);
        match word.compare_exchange_weak(
            seen,
            pack(next + take, end),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return Some(next..next + take),
            Err(now) => seen = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Every unit runs exactly once, with threads of different speeds (one starting late, one
    /// slowed on each unit) and with more parts than units.
    #[test]
    fn every_unit_runs_exactly_once() {
        for (units, parts) in [
            (0, 2),
            (1, 2),
            (3, 4),
            (7, 2),
            (100, 3),
            (1000, 4),
            (5000, 8),
        ] {
            for round in 0..20 {
                let mut r = Ranges::default();
                r.split(units, parts);
                let counts: Vec<AtomicU32> = (0..units).map(|_| AtomicU32::new(0)).collect();
                std::thread::scope(|s| {
                    for part in 0..parts {
                        let (r, counts) = (&r, &counts);
                        s.spawn(move || {
                            if part == 1 && round % 2 == 0 {
                                std::thread::sleep(std::time::Duration::from_micros(300));
                            }
                            r.work(part, |u| {
                                for i in u {
                                    counts[i].fetch_add(1, Ordering::Relaxed);
                                    if part == 0 {
                                        for _ in 0..200 {
                                            std::hint::spin_loop();
                                        }
                                    }
                                }
                            })
                        });
                    }
                });
                for (i, c) in counts.iter().enumerate() {
                    let c = c.load(Ordering::Relaxed);
                    assert_eq!(c, 1, "unit {i} of {units} in {parts} parts ran {c} times");
                }
            }
        }
    }

    /// Alone, a part's owner takes its range front to back in pieces of one to `MAX_CLAIM`
    /// units, then the other range from its back half forward: every unit once.
    #[test]
    fn one_thread_takes_its_range_in_order_then_the_back_halves_of_the_rest() {
        let mut r = Ranges::default();
        r.split(40, 2);
        assert_eq!(r.parts(), 2);
        let mut pieces = Vec::new();
        r.work(0, |u| pieces.push(u));
        assert!(pieces.iter().all(|u| !u.is_empty() && u.len() <= MAX_CLAIM));
        let order: Vec<usize> = pieces.into_iter().flatten().collect();
        assert_eq!(order[..20], (0..20).collect::<Vec<_>>()[..]);
        assert_eq!(order[20..30], (30..40).collect::<Vec<_>>()[..]);
        let mut all = order.clone();
        all.sort_unstable();
        assert_eq!(all, (0..40).collect::<Vec<_>>());
        // A second call of the same shape starts over.
        r.split(40, 2);
        let mut again = 0;
        r.work(1, |u| again += u.len());
        assert_eq!(again, 40);
    }
}
