//! Per-page protections that differ from their region's, kept as runs: a sorted list of
//! page ranges, each with one protection, that do not overlap and where two neighbours
//! that touch have different protections.
//!
//! `protN` of a range is one run however many pages it covers, and `prot1` followed by
//! `unprot1` of the same page (a write barrier's rhythm) reuses the list's storage instead
//! of allocating a tree node each time. Lookups are a binary search.

use alloc::vec::Vec;

use crate::region::{PAGE_SIZE, Protection};

/// Pages `[start, end)` (byte addresses, page-aligned) with `protection`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// First page.
    pub start: u64,
    /// The page after the last.
    pub end: u64,
    /// Their protection.
    pub protection: Protection,
}

impl Run {
    fn pages(&self) -> u64 {
        (self.end - self.start) / PAGE_SIZE
    }
}

/// The runs of one address space (every region's, apart by address).
#[derive(Clone, Debug, Default)]
pub struct ProtectionRuns {
    runs: Vec<Run>,
    pages: u64,
}

impl ProtectionRuns {
    /// No page has a protection of its own.
    pub const fn new() -> ProtectionRuns {
        ProtectionRuns { runs: Vec::new(), pages: 0 }
    }

    /// The protection recorded for `page`, if it has one.
    pub fn get(&self, page: u64) -> Option<Protection> {
        let index = self.runs.partition_point(|run| run.end <= page);
        self.runs.get(index).filter(|run| run.start <= page).map(|run| run.protection)
    }

    /// Pages with a protection of their own.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// The runs, in address order.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Records `protection` for pages `[start, end)` (page-aligned, `start < end`): pages
    /// given `default` (their region's protection) have none of their own afterwards.
    pub fn set(&mut self, start: u64, end: u64, protection: Protection, default: Protection) {
        debug_assert!(start < end && start.is_multiple_of(PAGE_SIZE) && end.is_multiple_of(PAGE_SIZE));
        // runs[first..last] overlap the range.
        let first = self.runs.partition_point(|run| run.end <= start);
        // A write barrier's rhythm first (prot1 of a page, later its unprot1): the range is
        // exactly one run and goes back to the default, or it neither overlaps nor touches
        // a run and becomes one. Neither needs a join.
        let next = self.runs.get(first).copied();
        if let Some(run) = next
            && run.start == start
            && run.end == end
            && protection == default
        {
            self.pages -= run.pages();
            self.runs.remove(first);
            return;
        }
        let apart_before = first == 0 || self.runs[first - 1].end < start;
        if protection != default && apart_before && next.is_none_or(|run| run.start > end) {
            self.pages += (end - start) / PAGE_SIZE;
            self.runs.insert(first, Run { start, end, protection });
            return;
        }
        let last = self.runs.partition_point(|run| run.start < end);
        let (mut low, mut high) = (first, last.max(first));
        let mut left = None;
        let mut right = None;
        if first < last {
            let head = self.runs[first];
            let tail = self.runs[last - 1];
            left = (head.start < start).then_some(Run { start: head.start, end: start, protection: head.protection });
            right = (tail.end > end).then_some(Run { start: end, end: tail.end, protection: tail.protection });
        }
        let mut middle = (protection != default).then_some(Run { start, end, protection });
        if let Some(run) = middle.as_mut() {
            // Join the pieces of a split run, or the neighbours just outside, that carry the
            // same protection.
            match left {
                Some(piece) if piece.protection == run.protection => {
                    run.start = piece.start;
                    left = None;
                }
                None if low > 0 && self.runs[low - 1].end == run.start && self.runs[low - 1].protection == run.protection => {
                    low -= 1;
                    run.start = self.runs[low].start;
                }
                _ => {}
            }
            match right {
                Some(piece) if piece.protection == run.protection => {
                    run.end = piece.end;
                    right = None;
                }
                None if high < self.runs.len() && self.runs[high].start == run.end && self.runs[high].protection == run.protection => {
                    run.end = self.runs[high].end;
                    high += 1;
                }
                _ => {}
            }
        }
        let removed: u64 = self.runs[low..high].iter().map(Run::pages).sum();
        let added: u64 = [left, middle, right].iter().flatten().map(Run::pages).sum();
        self.pages = self.pages - removed + added;
        self.replace(low, high, [left, middle, right]);
    }

    /// Replaces `runs[low..high]` with the pieces that are `Some`, in order: overwritten in
    /// place where they fit, so a change that keeps the number of runs moves nothing.
    fn replace<const N: usize>(&mut self, low: usize, high: usize, pieces: [Option<Run>; N]) {
        let mut index = low;
        for piece in pieces.into_iter().flatten() {
            if index < high {
                self.runs[index] = piece;
            } else {
                self.runs.insert(index, piece);
            }
            index += 1;
        }
        if index < high {
            self.runs.drain(index..high);
        }
    }

    /// Forgets the protections of pages `[start, end)` (a region going away).
    pub fn clear(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let first = self.runs.partition_point(|run| run.end <= start);
        let last = self.runs.partition_point(|run| run.start < end);
        if first >= last {
            return;
        }
        let head = self.runs[first];
        let tail = self.runs[last - 1];
        let left = (head.start < start).then_some(Run { start: head.start, end: start, protection: head.protection });
        let right = (tail.end > end).then_some(Run { start: end, end: tail.end, protection: tail.protection });
        let removed: u64 = self.runs[first..last].iter().map(Run::pages).sum();
        let added: u64 = [left, right].iter().flatten().map(Run::pages).sum();
        self.pages = self.pages - removed + added;
        self.replace(first, last, [left, right]);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use alloc::collections::BTreeMap;

    const BASE: u64 = 0x14_0000_0000;
    const PAGES: u64 = 64;

    fn page(index: u64) -> u64 {
        BASE + index * PAGE_SIZE
    }

    /// The same operations on a page-by-page map, to compare with.
    #[derive(Default)]
    struct Model(BTreeMap<u64, Protection>);

    impl Model {
        fn set(&mut self, start: u64, end: u64, protection: Protection, default: Protection) {
            for page in (start..end).step_by(PAGE_SIZE as usize) {
                if protection == default {
                    self.0.remove(&page);
                } else {
                    self.0.insert(page, protection);
                }
            }
        }
    }

    fn check(runs: &ProtectionRuns, model: &Model) {
        for index in 0..PAGES + 2 {
            assert_eq!(runs.get(page(index)), model.0.get(&page(index)).copied(), "page {index}: {:?}", runs.runs());
        }
        assert_eq!(runs.pages(), model.0.len() as u64);
        for pair in runs.runs().windows(2) {
            assert!(pair[0].end <= pair[1].start, "overlap or disorder: {:?}", runs.runs());
            assert!(pair[0].end < pair[1].start || pair[0].protection != pair[1].protection, "unmerged neighbours: {:?}", runs.runs());
        }
        assert!(runs.runs().iter().all(|run| run.start < run.end), "empty run: {:?}", runs.runs());
    }

    #[test]
    fn one_range_is_one_run_and_splits_and_merges() {
        let mut runs = ProtectionRuns::new();
        runs.set(page(0), page(100), Protection::READ, Protection::READ_WRITE);
        assert_eq!(runs.runs().len(), 1);
        assert_eq!(runs.pages(), 100);
        runs.set(page(10), page(11), Protection::READ_WRITE, Protection::READ_WRITE);
        assert_eq!(runs.runs().len(), 2, "a hole splits the run");
        assert_eq!(runs.get(page(10)), None);
        assert_eq!(runs.get(page(11)), Some(Protection::READ));
        runs.set(page(10), page(11), Protection::READ, Protection::READ_WRITE);
        assert_eq!(runs.runs(), &[Run { start: page(0), end: page(100), protection: Protection::READ }], "refilled: one run again");
        runs.clear(page(0), page(50));
        assert_eq!(runs.runs(), &[Run { start: page(50), end: page(100), protection: Protection::READ }]);
        assert_eq!(runs.pages(), 50);
    }

    /// A repeatable stream of numbers below the bound asked (xorshift from `seed`), for
    /// the crate's randomized model tests.
    pub(crate) fn numbers(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |bound| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        }
    }

    /// Pages one or two at a time over a few pages: the barrier's shortcuts (a run that
    /// goes away whole, a run alone between gaps) next to touching neighbours that join.
    #[test]
    fn single_pages_agree_with_a_page_by_page_map() {
        let protections = [Protection::NONE, Protection::READ, Protection::READ_WRITE];
        let mut next = numbers(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200 {
            let mut runs = ProtectionRuns::new();
            let mut model = Model::default();
            for _ in 0..60 {
                let first = next(12);
                let (start, end) = (page(first), page(first + 1 + next(2)));
                let protection = protections[next(3) as usize];
                runs.set(start, end, protection, Protection::READ_WRITE);
                model.set(start, end, protection, Protection::READ_WRITE);
                check(&runs, &model);
            }
        }
    }

    #[test]
    fn agrees_with_a_page_by_page_map() {
        let protections = [Protection::NONE, Protection::READ, Protection::READ_WRITE, Protection::READ_EXECUTE];
        let mut next = numbers(0x2545_f491_4f6c_dd1d);
        for _ in 0..200 {
            let mut runs = ProtectionRuns::new();
            let mut model = Model::default();
            for _ in 0..40 {
                let first = next(PAGES);
                let count = 1 + next(PAGES - first);
                let (start, end) = (page(first), page(first + count));
                if next(8) == 0 {
                    runs.clear(start, end);
                    model.0.retain(|&page, _| page < start || page >= end);
                } else {
                    let protection = protections[next(4) as usize];
                    runs.set(start, end, protection, Protection::READ_WRITE);
                    model.set(start, end, protection, Protection::READ_WRITE);
                }
                check(&runs, &model);
            }
        }
    }
}
