//! `readahead_app`: application-set read-ahead for `cache.ReadAhead` (Seltzer et al. '95
//! §4.3: the application knows how far ahead it will read).
//!
//! After every read of a file block — sequential or not — it prefetches `count` blocks,
//! without asking again for blocks the stream already prefetched: file blocks from
//! `max(file_block + 1, ahead)` up to `min(file_block + 1 + count, file_blocks)`. A count of
//! 0 turns read-ahead off. The count is the application's hint for the file
//! (`CacheHint::READ_AHEAD_COUNT`, read with the `cache` domain's `spindle_cache_file_hint`);
//! without one it is [`DEFAULT_COUNT`]. This is the buffer cache's reference
//! `app_read_ahead`, reimplemented on the ABI's records.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{CACHE_READ_AHEAD, CacheHint, CachePrefetch, CacheReadAhead};

spindle_abi::extension! {
    name: "readahead_app",
    version: "0.1.0",
    budget_microseconds: 200,
    memory_quota_bytes: 16 * 1024,
    domains: ["cache"],
    bindings: [
        CACHE_READ_AHEAD => read_ahead,
    ],
}

/// Blocks prefetched after each read when the application set no count.
pub const DEFAULT_COUNT: u32 = 4;

/// The blocks to prefetch after the read `args` with a count of `count`.
pub fn prefetch(count: u32, args: &CacheReadAhead) -> CachePrefetch {
    let next = args.file_block.saturating_add(1);
    let start = next.max(args.ahead);
    let end = next.saturating_add(u64::from(count)).min(u64::from(args.file_blocks));
    if start >= end { CachePrefetch { first: 0, count: 0 } } else { CachePrefetch { first: start, count: end - start } }
}

/// `cache.ReadAhead`: the application's count of blocks after the read.
fn read_ahead(args: &CacheReadAhead) -> CachePrefetch {
    let count = CacheHint::get(args.file, CacheHint::READ_AHEAD_COUNT).map_or(DEFAULT_COUNT, |count| count.min(u64::from(u32::MAX)) as u32);
    prefetch(count, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(file_block: u64, ahead: u64, file_blocks: u32) -> CacheReadAhead {
        CacheReadAhead { file_block, file_blocks, ahead, file: 1, run: 1, process: 0 }
    }

    #[test]
    fn count_blocks_after_the_read_without_repeating() {
        assert_eq!(prefetch(4, &read(0, 1, 100)), CachePrefetch { first: 1, count: 4 });
        assert_eq!(prefetch(4, &read(1, 5, 100)), CachePrefetch { first: 5, count: 1 }, "2..5 were prefetched already");
        assert_eq!(prefetch(4, &read(97, 98, 100)), CachePrefetch { first: 98, count: 2 }, "clipped at the end of the file");
        assert_eq!(prefetch(4, &read(99, 100, 100)), CachePrefetch { first: 0, count: 0 });
        assert_eq!(prefetch(0, &read(3, 4, 100)), CachePrefetch { first: 0, count: 0 }, "0 turns it off");
    }

    #[test]
    fn without_a_kernel_the_default_count() {
        assert_eq!(read_ahead(&read(10, 11, 100)), CachePrefetch { first: 11, count: u64::from(DEFAULT_COUNT) });
        assert_eq!(spindle_extension().domains, ["cache"]);
    }
}
