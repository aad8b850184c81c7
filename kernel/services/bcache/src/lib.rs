//! `spindle-service-bcache`: the policy half of the buffer cache — the cache core as a
//! state machine that says what I/O to do, the four decision points an extension may take
//! over, the checks on their answers, the default and reference policies, and the
//! exported state.
//!
//! A core service is split in two (docs/architecture.md): this crate holds the decisions
//! and the data — `no_std`, no `unsafe`, tested on the host — and the kernel wires it to
//! the disk and raises the events `cache.Enqueue`, `cache.Evict`, `cache.Writeback` and
//! `cache.ReadAhead` (Seltzer et al.'s enqueue, evict, synchronize and preallocate) by
//! implementing [`Policy`]. The parts:
//!
//! - [`cache`]: [`Cache`], up to `capacity` buffers of [`BLOCK_SIZE`] bytes ([`Buffer`]s the
//!   owner supplies, or the heap's; the owner may take clean ones back under memory
//!   pressure, [`Cache::give_back`], and return them, [`Cache::take_back`]). It
//!   does no I/O: [`Cache::get`] answers hit, in flight (wait and retry), "read block B into
//!   buffer S", or "first write back dirty victim V"; the caller reports completions
//!   ([`Cache::complete_read`], [`Cache::complete_write`]). Writes, counted pins,
//!   write-back rounds and the sync barrier in sorted runs, invalidation after unlink or
//!   truncate, and prefetches nobody waits for.
//! - [`policy`]: the [`Policy`] trait, its small `Copy` event records and answers, the
//!   pure checks of every answer ([`check_placement`], [`check_victim`],
//!   [`check_writeback`], [`check_prefetch`]), the defaults (LRU, write everything,
//!   BSD/OS's clustered sequential read-ahead: [`default_read_ahead`]) and the reference policies
//!   MRU, LFU, PinRange and application-set read-ahead.
//! - exported state (Infokernel): [`Cache::next_victims`] (the victim list in eviction
//!   order), [`Cache::file_counts`] (resident and dirty blocks of a file), [`Counters`].
//! - [`device`]: [`BlockDevice`] and [`CachedDevice`], a blocking wrapper that drives the
//!   state machine synchronously over a device.
//!
//! A read through the state machine:
//!
//! ```
//! use spindle_service_bcache::{Cache, Config, DefaultPolicy, Lookup, Owner};
//!
//! let mut cache = Cache::new(Config::new(4)).unwrap();
//! let mut policy = DefaultPolicy;
//! let Ok(Lookup::Read(slot)) = cache.get(7, Owner::of(3, 0), &mut policy) else { panic!() };
//! // Someone else asking meanwhile waits.
//! assert_eq!(cache.get(7, Owner::of(3, 0), &mut policy), Ok(Lookup::InFlight));
//! cache.read_buffer(slot).unwrap().fill(0xab); // the device read
//! cache.complete_read(slot, Ok::<(), ()>(())).unwrap();
//! assert_eq!(cache.get(7, Owner::of(3, 0), &mut policy), Ok(Lookup::Hit(slot)));
//! assert_eq!(cache.data(slot).unwrap()[0], 0xab);
//! assert_eq!((cache.counters().misses, cache.counters().hits), (1, 1));
//! ```
//!
//! Known limitations: blocks are found through a `BTreeMap` and per-file counts are kept in
//! another (both allocate as blocks and files come and go; the buffers themselves only when
//! the owner gives them or takes them back);
//! the read-ahead detector follows [`cache::STREAMS`] files at once; a partial write to a
//! block not in the cache counts a miss (the read) and then a hit (the write).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod cache;
pub mod device;
pub mod policy;

#[cfg(test)]
mod tests;

pub use cache::{
    BlockBuffer, Buffer, Cache, CacheError, Config, ConfigError, Counters, heap_buffer, FileCounts, Invalidated, Lookup, MAX_CAPACITY, Owner, PrefetchOutcome, Run, Slot,
    WriteOutcome, WritebackBatch,
};
pub use device::{BlockDevice, CachedDevice, CachedError};
pub use policy::{
    Access, AppReadAhead, BlockInfo, DefaultPolicy, EVICT_CANDIDATES, EnqueueEvent, Event, EvictEvent, LEVELS, Lfu, Mru, PinRange, Place,
    Placement, Policy, Prefetch, Range, ReadAheadEvent, Rejection, Victim, VictimState, WRITEBACK_BATCH, WritebackEvent, WritebackReason,
    WritebackSet, app_read_ahead, check_placement, check_prefetch, check_victim, check_writeback, default_placement, default_read_ahead, default_reads_ahead,
    default_victim, default_writeback, lfu_placement, lfu_victim, mru_placement, mru_victim, pin_range_placement, pin_range_victim,
};

/// Bytes in a block (and in a buffer).
pub const BLOCK_SIZE: usize = 4096;

/// A file: its inode number.
pub type FileId = u32;
