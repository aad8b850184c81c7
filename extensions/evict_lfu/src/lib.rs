//! `evict_lfu`: least-frequently-used replacement for the buffer cache (`cache.Enqueue`
//! and `cache.Evict`).
//!
//! A referenced block goes to the MRU end of the queue its reference count earns: level 0
//! for 1 reference, 1 for 2–3, 2 for 4–7, 3 for 8 or more (frequently used blocks are
//! evicted later; within a level, LRU). Asked for a victim, it names the candidate with the
//! fewest references, the earlier (less recently used) among equals. These are the buffer
//! cache's reference `lfu_placement` and `lfu_victim`, reimplemented on the ABI's records.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{CACHE_ENQUEUE, CACHE_EVICT, CacheBlockEntry, CacheEnqueue, CacheEvict, CachePlacement, CacheVictim};

spindle_abi::extension! {
    name: "evict_lfu",
    version: "0.1.0",
    budget_microseconds: 200,
    memory_quota_bytes: 16 * 1024,
    domains: ["cache"],
    bindings: [
        CACHE_ENQUEUE => enqueue,
        CACHE_EVICT => evict,
    ],
}

/// The queue a block with `references` references goes to: `floor(log2(references))`,
/// at most the last queue.
pub fn level(references: u32) -> u32 {
    (31 - references.max(1).leading_zeros()).min(CacheEnqueue::LEVELS - 1)
}

/// `cache.Enqueue`: the MRU end of the block's frequency level.
fn enqueue(args: &CacheEnqueue) -> CachePlacement {
    CachePlacement { place: CachePlacement::MRU, level: level(args.references) }
}

/// The candidate with the fewest references; ties to the earlier one.
pub fn choose(candidates: impl Iterator<Item = CacheBlockEntry>) -> Option<CacheBlockEntry> {
    // `min_by_key` keeps the first of equal minima.
    candidates.min_by_key(|candidate| candidate.references)
}

/// `cache.Evict`: the least frequently used candidate, or no answer.
fn evict(_: &CacheEvict) -> CacheVictim {
    CacheVictim::choose_among_candidates(|candidates| choose(candidates.iter().copied()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_grow_with_the_logarithm_of_the_references() {
        let levels: [u32; 10] = core::array::from_fn(|references| level(references as u32));
        assert_eq!(levels, [0, 0, 1, 1, 2, 2, 2, 2, 3, 3]);
        assert_eq!(level(u32::MAX), 3);
        let args = CacheEnqueue { references: 5, ..CacheEnqueue::default() };
        assert_eq!(enqueue(&args), CachePlacement { place: CachePlacement::MRU, level: 2 });
    }

    #[test]
    fn fewest_references_first_ties_to_the_earlier() {
        let entry = |block, references| CacheBlockEntry { block, references, ..CacheBlockEntry::default() };
        let candidates = [entry(1, 4), entry(2, 1), entry(3, 7), entry(4, 1)];
        assert_eq!(choose(candidates.into_iter()).map(|entry| entry.block), Some(2));
        assert_eq!(evict(&CacheEvict::default()).block, CacheVictim::NO_ANSWER);
        assert_eq!(spindle_extension().domains, ["cache"]);
    }
}
