//! `evict_mru`: most-recently-used replacement for the buffer cache (`cache.Enqueue` and
//! `cache.Evict`; Seltzer et al. '95, Cao et al. '94: MRU suits a file scanned in a loop
//! larger than the cache).
//!
//! Every referenced block goes to the LRU end of queue 0, so the block used last is the
//! next victim; asked for a victim, it names the candidate referenced most recently
//! (smallest age), the earlier candidate among equals. These are the buffer cache's
//! reference `mru_placement` and `mru_victim`, reimplemented here on the ABI's records so
//! every technology can be compared with them.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{CACHE_ENQUEUE, CACHE_EVICT, CacheBlockEntry, CacheEnqueue, CacheEvict, CachePlacement, CacheVictim};

spindle_abi::extension! {
    name: "evict_mru",
    version: "0.1.0",
    budget_microseconds: 200,
    memory_quota_bytes: 16 * 1024,
    domains: ["cache"],
    bindings: [
        CACHE_ENQUEUE => enqueue,
        CACHE_EVICT => evict,
    ],
}

/// `cache.Enqueue`: the LRU end of queue 0.
fn enqueue(_: &CacheEnqueue) -> CachePlacement {
    CachePlacement { place: CachePlacement::LRU, level: 0 }
}

/// The candidate referenced most recently (smallest age); ties to the earlier one.
pub fn choose(candidates: impl Iterator<Item = CacheBlockEntry>) -> Option<CacheBlockEntry> {
    // `min_by_key` keeps the first of equal minima.
    candidates.min_by_key(|candidate| candidate.age)
}

/// `cache.Evict`: the most recently used candidate, or no answer if none can be read.
fn evict(_: &CacheEvict) -> CacheVictim {
    CacheVictim::choose_among_candidates(|candidates| choose(candidates.iter().copied()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(block: u64, age: u64) -> CacheBlockEntry {
        CacheBlockEntry { block, age, references: 1, ..CacheBlockEntry::default() }
    }

    #[test]
    fn youngest_candidate_first_ties_to_the_earlier() {
        let candidates = [entry(10, 5), entry(11, 2), entry(12, 9), entry(13, 2)];
        assert_eq!(choose(candidates.into_iter()).map(|entry| entry.block), Some(11));
        assert_eq!(choose(core::iter::empty()), None);
        assert_eq!(enqueue(&CacheEnqueue::default()), CachePlacement { place: CachePlacement::LRU, level: 0 });
    }

    #[test]
    fn without_a_kernel_there_is_no_answer() {
        assert_eq!(evict(&CacheEvict::default()).block, CacheVictim::NO_ANSWER);
        assert_eq!(spindle_extension().domains, ["cache"]);
    }
}
