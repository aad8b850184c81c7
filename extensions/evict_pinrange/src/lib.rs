//! `evict_pinrange`: keeps a range of a file resident (Arpaci-Dusseau et al.'s PinRange),
//! on `cache.Enqueue` and `cache.Evict`.
//!
//! The range is blocks `first .. end` of a file, read from the application's hints with the
//! `cache` domain's `spindle_cache_file_hint` (`CacheHint::PIN_FIRST`, `CacheHint::PIN_END`);
//! without hints it is the file's first [`DEFAULT_PINNED_BLOCKS`] blocks. Blocks of the range
//! go to the MRU end of queue 1, every other block to the MRU end of queue 0 (the default),
//! so the range is evicted only when nothing else is evictable; asked for a victim it names
//! the first candidate outside the range, or the first candidate if all are inside. These
//! are the buffer cache's reference `pin_range_placement` and `pin_range_victim`.
//!
//! Which file: the policy is meant to be bound to one file (the kernel's
//! `cache_events::assign` imposes the guard `file == F`). Its range is the range of the
//! file the event names — for `cache.Evict` the policy's own file (`scope`) when the kernel
//! asks a per-file policy, else the file of the block that needs a buffer.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{
    CACHE_ENQUEUE, CACHE_EVICT, CACHE_NO_FILE, CacheBlockEntry, CacheEnqueue, CacheEvict, CacheHint, CachePlacement, CacheVictim,
};

spindle_abi::extension! {
    name: "evict_pinrange",
    version: "0.1.0",
    budget_microseconds: 200,
    memory_quota_bytes: 16 * 1024,
    domains: ["cache"],
    bindings: [
        CACHE_ENQUEUE => enqueue,
        CACHE_EVICT => evict,
    ],
}

/// Blocks pinned from the start of a file without the application's hints.
pub const DEFAULT_PINNED_BLOCKS: u64 = 8;

/// File blocks `first .. end` of `file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// The file.
    pub file: u32,
    /// First file block.
    pub first: u64,
    /// One past the last.
    pub end: u64,
}

impl Range {
    /// The range of `file` from its hints (`first`, `end`), or the default.
    pub fn of(file: u32, first: Option<u64>, end: Option<u64>) -> Range {
        let first = first.unwrap_or(0);
        Range { file, first, end: end.unwrap_or(first + DEFAULT_PINNED_BLOCKS) }
    }

    /// The range of `file` as the application set it (through the kernel).
    fn read(file: u32) -> Range {
        Range::of(file, CacheHint::get(file, CacheHint::PIN_FIRST), CacheHint::get(file, CacheHint::PIN_END))
    }

    /// Whether block `file_block` of `file` is in the range.
    pub fn contains(&self, file: u32, file_block: u64) -> bool {
        file != CACHE_NO_FILE && file == self.file && (self.first..self.end).contains(&file_block)
    }
}

/// Where a referenced block goes: level 1 inside `range`, else the default place.
pub fn placement(range: &Range, file: u32, file_block: u64) -> CachePlacement {
    CachePlacement { place: CachePlacement::MRU, level: if range.contains(file, file_block) { 1 } else { 0 } }
}

/// The first candidate outside `range`, else the first.
pub fn choose(range: &Range, candidates: impl Iterator<Item = CacheBlockEntry> + Clone) -> Option<CacheBlockEntry> {
    candidates.clone().find(|candidate| !range.contains(candidate.file, candidate.file_block)).or_else(|| candidates.clone().next())
}

/// `cache.Enqueue`: the range on level 1.
fn enqueue(args: &CacheEnqueue) -> CachePlacement {
    placement(&Range::read(args.file), args.file, args.file_block)
}

/// `cache.Evict`: a victim outside the range.
fn evict(args: &CacheEvict) -> CacheVictim {
    let file = if args.scope != CACHE_NO_FILE { args.scope } else { args.file };
    let range = Range::read(file);
    CacheVictim::choose_among_candidates(|candidates| choose(&range, candidates.iter().copied()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(block: u64, file: u32, file_block: u64) -> CacheBlockEntry {
        CacheBlockEntry { block, file, file_block, references: 1, ..CacheBlockEntry::default() }
    }

    #[test]
    fn the_range_goes_to_level_one_and_is_evicted_last() {
        let range = Range::of(3, None, None);
        assert_eq!(range, Range { file: 3, first: 0, end: DEFAULT_PINNED_BLOCKS });
        assert_eq!(placement(&range, 3, 7).level, 1);
        assert_eq!(placement(&range, 3, 8).level, 0);
        assert_eq!(placement(&range, 4, 0).level, 0);
        let candidates = [entry(100, 3, 1), entry(101, 3, 2), entry(102, 3, 20), entry(103, 4, 0)];
        assert_eq!(choose(&range, candidates.into_iter()).map(|entry| entry.block), Some(102));
        assert_eq!(choose(&range, candidates[..2].iter().copied()).map(|entry| entry.block), Some(100), "all inside: the first");
        assert_eq!(Range::of(3, Some(10), Some(12)).end, 12);
        assert_eq!(Range::of(3, Some(10), None).end, 10 + DEFAULT_PINNED_BLOCKS);
    }

    #[test]
    fn without_a_kernel_the_default_range_and_no_victim() {
        assert_eq!(enqueue(&CacheEnqueue { file: 2, file_block: 1, ..CacheEnqueue::default() }).level, 1);
        assert_eq!(evict(&CacheEvict::default()).block, CacheVictim::NO_ANSWER);
        assert_eq!(spindle_extension().domains, ["cache"]);
    }
}
