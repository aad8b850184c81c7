//! `cache_faulty`: a buffer-cache policy that is wrong on purpose, to test that every
//! `cache.*` event's answer is validated in every technology (the bad answer refused,
//! counted as a fault of the binding, the default used) and that a handler that panics or
//! loops is contained while the cache goes on with its defaults.
//!
//! | event | answer |
//! |---|---|
//! | `cache.Enqueue` | a queue level that does not exist |
//! | `cache.Evict` | a block that is not a candidate ([`NOT_A_BLOCK`]) |
//! | `cache.Writeback` | a mask naming blocks beyond those offered |
//! | `cache.ReadAhead` | a prefetch past the end of the file; on file [`PANIC_FILE`] a panic, on file [`LOOP_FILE`] an endless loop |

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{
    CACHE_ENQUEUE, CACHE_EVICT, CACHE_READ_AHEAD, CACHE_WRITEBACK, CacheEnqueue, CacheEvict, CachePlacement, CachePrefetch, CacheReadAhead,
    CacheVictim, CacheWriteback, CacheWritebackSet,
};

spindle_abi::extension! {
    name: "cache_faulty",
    version: "0.1.0",
    budget_microseconds: 200,
    memory_quota_bytes: 16 * 1024,
    domains: [],
    bindings: [
        CACHE_ENQUEUE => enqueue,
        CACHE_EVICT => evict,
        CACHE_WRITEBACK => writeback,
        CACHE_READ_AHEAD => read_ahead,
    ],
}

/// The victim every eviction names: no cache holds it.
pub const NOT_A_BLOCK: u64 = 0xdead_0000;
/// A read of this file makes `cache.ReadAhead` panic.
pub const PANIC_FILE: u32 = 61;
/// A read of this file makes `cache.ReadAhead` loop until its budget ends it.
pub const LOOP_FILE: u32 = 62;

/// `cache.Enqueue`: a level past the last queue.
pub fn enqueue(_args: &CacheEnqueue) -> CachePlacement {
    CachePlacement { place: CachePlacement::MRU, level: CacheEnqueue::LEVELS + 5 }
}

/// `cache.Evict`: a block that is not a candidate.
pub fn evict(_args: &CacheEvict) -> CacheVictim {
    CacheVictim { block: NOT_A_BLOCK }
}

/// `cache.Writeback`: every bit set, including those above `offered`.
pub fn writeback(_args: &CacheWriteback) -> CacheWritebackSet {
    CacheWritebackSet { mask: u64::MAX }
}

/// `cache.ReadAhead`: past the end of the file, or a panic / a loop on the trigger files.
pub fn read_ahead(args: &CacheReadAhead) -> CachePrefetch {
    match args.file {
        PANIC_FILE => panic_out_of_bounds(args),
        LOOP_FILE => loop_forever(args),
        _ => CachePrefetch { first: u64::from(args.file_blocks), count: 4 },
    }
}

fn panic_out_of_bounds(args: &CacheReadAhead) -> CachePrefetch {
    let table = [1u64, 2, 3];
    // `run` is at least 1, so the index is at least 3: out of bounds.
    CachePrefetch { first: table[core::hint::black_box(args.run as usize + 2)], count: 0 }
}

fn loop_forever(args: &CacheReadAhead) -> CachePrefetch {
    let mut value = args.file_block;
    loop {
        value = core::hint::black_box(value.wrapping_add(1));
        if value == args.file_block.wrapping_sub(1) && core::hint::black_box(false) {
            return CachePrefetch { first: value, count: 0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_is_out_of_bounds() {
        assert!(enqueue(&CacheEnqueue::default()).level >= CacheEnqueue::LEVELS);
        assert_eq!(evict(&CacheEvict::default()).block, NOT_A_BLOCK);
        let offered = CacheWriteback { offered: 3, ..CacheWriteback::default() };
        assert_ne!(writeback(&offered).mask >> offered.offered, 0, "names blocks beyond the offered");
        let read = CacheReadAhead { file_block: 2, ahead: 3, file_blocks: 10, file: 5, run: 1, process: 0 };
        assert!(read_ahead(&read).first >= u64::from(read.file_blocks), "past the end");
    }

    #[test]
    #[should_panic]
    fn panics_on_its_trigger_file() {
        read_ahead(&CacheReadAhead { file_block: 0, ahead: 1, file_blocks: 10, file: PANIC_FILE, run: 1, process: 0 });
    }
}
