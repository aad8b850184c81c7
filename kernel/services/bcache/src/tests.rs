//! Host tests of the cache core, the policies and the blocking wrapper.

use alloc::format;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use crate::policy::{NO_FILE, decode_file, encode_file};
use crate::*;

// --- helpers -------------------------------------------------------------------------------

/// A deterministic PRNG (xorshift64*), so the randomized tests are reproducible.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A device error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Failed;

impl core::fmt::Display for Failed {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str("injected device error")
    }
}

/// An in-memory device with injectable errors.
struct MemDisk {
    blocks: Vec<[u8; BLOCK_SIZE]>,
    fail_reads: u32,
    fail_writes: u32,
    reads: u64,
    writes: Vec<u64>,
    flushes: u64,
}

impl MemDisk {
    /// `count` blocks, block `b` filled with the byte `b` (mod 251).
    fn new(count: usize) -> MemDisk {
        MemDisk {
            blocks: (0..count).map(|block| [(block % 251) as u8; BLOCK_SIZE]).collect(),
            fail_reads: 0,
            fail_writes: 0,
            reads: 0,
            writes: Vec::new(),
            flushes: 0,
        }
    }
}

impl BlockDevice for MemDisk {
    type Error = Failed;

    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), Failed> {
        if self.fail_reads > 0 {
            self.fail_reads -= 1;
            return Err(Failed);
        }
        self.reads += 1;
        buf.copy_from_slice(&self.blocks[block as usize]);
        Ok(())
    }

    fn write(&mut self, block: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), Failed> {
        if self.fail_writes > 0 {
            self.fail_writes -= 1;
            return Err(Failed);
        }
        self.writes.push(block);
        self.blocks[block as usize].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Failed> {
        self.flushes += 1;
        Ok(())
    }
}

fn cache(capacity: usize) -> Cache {
    Cache::new(Config::new(capacity)).unwrap()
}

/// Brings `block` in clean through the state machine (filled with `fill`).
fn load(cache: &mut Cache, block: u64, owner: Owner, policy: &mut impl Policy, fill: u8) -> Slot {
    match cache.get(block, owner, policy).unwrap() {
        Lookup::Read(slot) => {
            cache.read_buffer(slot).unwrap().fill(fill);
            cache.complete_read(slot, Ok::<(), ()>(())).unwrap();
            cache.check();
            slot
        }
        Lookup::Hit(slot) => slot,
        other => panic!("unexpected {other:?}"),
    }
}

fn victims(cache: &Cache) -> Vec<u64> {
    let mut out = [BlockInfo::default(); 16];
    let count = cache.next_victims(&mut out);
    out[..count].iter().map(|info| info.block).collect()
}

fn one(byte: u8) -> [u8; BLOCK_SIZE] {
    [byte; BLOCK_SIZE]
}

/// A policy with fixed answers (None: no answer), counting the questions.
#[derive(Default)]
struct Scripted {
    scope: Option<FileId>,
    placement: Option<Placement>,
    victim: Option<Victim>,
    writeback: Option<WritebackSet>,
    prefetch: Option<Prefetch>,
    asked: [u32; 4],
    last_candidates: Vec<BlockInfo>,
    last_offered: Vec<BlockInfo>,
}

impl Policy for Scripted {
    fn scope(&self) -> Option<FileId> {
        self.scope
    }

    fn enqueue(&mut self, _event: &EnqueueEvent, _cache: &Cache) -> Option<Placement> {
        self.asked[0] += 1;
        self.placement
    }

    fn evict(&mut self, _event: &EvictEvent, candidates: &[BlockInfo], _cache: &Cache) -> Option<Victim> {
        self.asked[1] += 1;
        self.last_candidates = candidates.to_vec();
        self.victim
    }

    fn writeback(&mut self, _event: &WritebackEvent, offered: &[BlockInfo], _cache: &Cache) -> Option<WritebackSet> {
        self.asked[2] += 1;
        self.last_offered = offered.to_vec();
        self.writeback
    }

    fn read_ahead(&mut self, _event: &ReadAheadEvent, _cache: &Cache) -> Option<Prefetch> {
        self.asked[3] += 1;
        self.prefetch
    }
}

// --- the core ------------------------------------------------------------------------------

#[test]
fn configs_are_checked() {
    assert_eq!(Cache::new(Config::new(0)).err(), Some(ConfigError::Capacity { capacity: 0 }));
    assert_eq!(Cache::new(Config::new(MAX_CAPACITY + 1)).err(), Some(ConfigError::Capacity { capacity: MAX_CAPACITY + 1 }));
    let config = Config { dirty_limit_percent: 101, ..Config::new(4) };
    assert_eq!(Cache::new(config).err(), Some(ConfigError::DirtyLimit { percent: 101 }));
    assert_eq!(ConfigError::Capacity { capacity: 0 }.to_string(), "buffer cache capacity 0 is not between 1 and 65536");
    assert_eq!(cache(4).dirty_limit(), 2);
    assert_eq!(cache(4).prefetch_cap(), 2, "half the capacity");
    assert_eq!(cache(100).prefetch_cap(), 32);
}

#[test]
fn lru_order_is_exact() {
    let mut c = cache(4);
    let mut p = DefaultPolicy;
    for block in [10, 11, 12, 13] {
        load(&mut c, block, Owner::NONE, &mut p, 0);
    }
    assert_eq!(victims(&c), [10, 11, 12, 13]);
    load(&mut c, 11, Owner::NONE, &mut p, 0); // a hit moves 11 to the MRU end
    load(&mut c, 10, Owner::NONE, &mut p, 0);
    assert_eq!(victims(&c), [12, 13, 11, 10]);
    // Misses evict in exactly that order.
    for (block, evicted) in [(20, 12), (21, 13), (22, 11), (23, 10), (24, 20)] {
        load(&mut c, block, Owner::NONE, &mut p, 0);
        assert!(!c.is_resident(evicted), "{block} should have evicted {evicted}");
    }
    assert_eq!(victims(&c), [21, 22, 23, 24]);
    let counters = c.counters();
    assert_eq!((counters.hits, counters.misses, counters.evictions), (2, 9, 5));
}

#[test]
fn pinned_blocks_are_never_evicted() {
    let mut c = cache(3);
    let mut p = DefaultPolicy;
    for block in 0..3 {
        load(&mut c, block, Owner::NONE, &mut p, 0);
    }
    let pin0 = c.pin(0).unwrap();
    let again = c.pin(0).unwrap();
    assert_eq!(pin0, again);
    assert_eq!(victims(&c), [1, 2]);
    load(&mut c, 3, Owner::NONE, &mut p, 0);
    assert!(c.is_resident(0) && !c.is_resident(1));
    let pin2 = c.pin(2).unwrap();
    let pin3 = c.pin(3).unwrap();
    assert_eq!(c.get(4, Owner::NONE, &mut p), Err(CacheError::NoBuffer), "everything pinned: an error, no panic");
    assert_eq!(c.prefetch(4, Owner::NONE, &mut p), PrefetchOutcome::Skipped);
    c.unpin(pin0).unwrap();
    assert_eq!(victims(&c), [], "pins are counted: one unpin is not enough");
    c.unpin(pin0).unwrap();
    assert_eq!(c.unpin(pin0), Err(CacheError::WrongState { slot: pin0 }));
    assert_eq!(victims(&c), [0]);
    c.unpin(pin2).unwrap();
    c.unpin(pin3).unwrap();
    assert_eq!(c.pin(99), Err(CacheError::NotResident { block: 99 }));
    assert_eq!(c.unpin(Slot(7)), Err(CacheError::BadSlot { slot: Slot(7) }));
    c.check();
}

#[test]
fn blocks_in_flight_are_not_candidates() {
    let mut c = cache(3);
    let mut p = DefaultPolicy;
    let Lookup::Read(reading) = c.get(1, Owner::NONE, &mut p).unwrap() else { panic!() };
    assert_eq!(c.pin(1), Err(CacheError::InFlight { block: 1 }));
    assert_eq!(c.get(1, Owner::NONE, &mut p), Ok(Lookup::InFlight));
    assert_eq!(c.write(1, Owner::NONE, 0, &[1], &mut p), Ok(WriteOutcome::InFlight));
    assert_eq!(c.data(reading), Err(CacheError::WrongState { slot: reading }));
    assert!(matches!(c.put(2, Owner::NONE, &one(2), &mut p), Ok(WriteOutcome::Written { .. })));
    assert!(matches!(c.put(3, Owner::NONE, &one(3), &mut p), Ok(WriteOutcome::Written { .. })));
    // 2 and 3 are being written back; 1 is being read: nothing can be evicted.
    let runs = c.take_all_dirty();
    assert_eq!(runs, vec![Run { start: 2, slots: vec![Slot(1), Slot(2)] }]);
    assert_eq!(victims(&c), []);
    assert_eq!(c.get(9, Owner::NONE, &mut p), Err(CacheError::NoBuffer));
    // A block being written can still be read, not written.
    assert_eq!(c.get(2, Owner::NONE, &mut p), Ok(Lookup::Hit(Slot(1))));
    assert_eq!(c.write(2, Owner::NONE, 0, &[1], &mut p), Ok(WriteOutcome::InFlight));
    c.complete_write(Slot(1), Ok::<(), ()>(())).unwrap();
    assert_eq!(victims(&c), [2]);
    c.complete_read(reading, Ok::<(), ()>(())).unwrap();
    assert_eq!(c.complete_read(reading, Ok::<(), ()>(())), Err(CacheError::WrongState { slot: reading }));
    assert_eq!(victims(&c), [1, 2]);
    assert_eq!(c.counters().waits, 3);
    c.check();
}

#[test]
fn a_failed_read_frees_the_buffer() {
    let mut c = cache(2);
    let mut p = DefaultPolicy;
    let Lookup::Read(slot) = c.get(5, Owner::of(1, 0), &mut p).unwrap() else { panic!() };
    c.complete_read(slot, Err(())).unwrap();
    assert!(!c.is_resident(5));
    assert_eq!(c.file_counts(1), FileCounts::default());
    assert_eq!(c.counters().read_errors, 1);
    assert!(matches!(c.get(5, Owner::of(1, 0), &mut p), Ok(Lookup::Read(_))), "the next lookup reads again");
    c.check();
}

#[test]
fn dirty_victims_are_written_back_before_reuse() {
    let mut c = cache(2);
    let mut p = DefaultPolicy;
    assert!(matches!(c.put(0, Owner::NONE, &one(0xa0), &mut p), Ok(WriteOutcome::Written { .. })));
    assert!(matches!(c.put(1, Owner::NONE, &one(0xa1), &mut p), Ok(WriteOutcome::Written { .. })));
    let Ok(Lookup::WriteBackFirst { slot, block }) = c.get(2, Owner::NONE, &mut p) else { panic!() };
    assert_eq!(block, 0);
    assert_eq!(c.data(slot).unwrap()[0], 0xa0, "the victim's data is still there to write");
    assert!(!c.is_resident(2), "nothing reserved for the new block yet");
    // The write fails: the victim stays, dirty.
    c.complete_write(slot, Err(())).unwrap();
    assert_eq!(c.dirty_blocks(), [0, 1]);
    assert_eq!(c.counters().write_errors, 1);
    let Ok(Lookup::WriteBackFirst { slot, block: 0 }) = c.get(2, Owner::NONE, &mut p) else { panic!() };
    c.complete_write(slot, Ok::<(), ()>(())).unwrap();
    assert_eq!(c.dirty_blocks(), [1]);
    assert_eq!(c.get(2, Owner::NONE, &mut p), Ok(Lookup::Read(slot)), "the cleaned victim's buffer is reused");
    assert!(!c.is_resident(0));
    assert_eq!(c.counters().writebacks, 1);
    c.check();
}

#[test]
fn writes_need_a_read_only_when_partial() {
    let mut c = cache(2);
    let mut p = DefaultPolicy;
    assert_eq!(c.write(3, Owner::NONE, 4000, &[0; 97], &mut p), Err(CacheError::BadRange { offset: 4000, length: 97 }));
    let Ok(WriteOutcome::Read(slot)) = c.write(3, Owner::NONE, 10, &[7, 7], &mut p) else { panic!() };
    c.read_buffer(slot).unwrap().fill(1);
    c.complete_read(slot, Ok::<(), ()>(())).unwrap();
    assert_eq!(c.write(3, Owner::NONE, 10, &[7, 7], &mut p), Ok(WriteOutcome::Written { slot, pressure: false }));
    assert_eq!(&c.data(slot).unwrap()[8..14], &[1, 1, 7, 7, 1, 1]);
    assert_eq!(c.dirty_blocks(), [3]);
    // A whole block needs no read; two dirty of 2 buffers is above the 50 % limit.
    assert!(matches!(c.put(4, Owner::NONE, &one(4), &mut p), Ok(WriteOutcome::Written { pressure: true, .. })));
    assert!(c.under_pressure());
    c.check();
}

#[test]
fn writeback_rounds_offer_sorted_batches_and_runs() {
    let mut c = cache(80);
    let mut p = Scripted::default();
    for block in (0..70u64).rev() {
        c.put(block * 2 / 3, Owner::of(1, block), &one(1), &mut p).unwrap();
    }
    let dirty = c.dirty_blocks();
    assert_eq!(dirty.len(), 47);
    // Sync rounds walk from the cursor in ascending order.
    let batch = c.take_writeback(WritebackReason::Sync, 10, &mut p);
    assert!(p.last_offered.windows(2).all(|pair| pair[0].block < pair[1].block));
    assert_eq!(p.last_offered.first().unwrap().block, 10);
    assert_eq!(batch.next, None);
    assert_eq!(batch.blocks(), 47 - 10, "default: everything offered");
    assert_eq!(batch.runs, vec![Run { start: 10, slots: batch.runs[0].slots.clone() }], "one run of consecutive blocks");
    for run in &batch.runs {
        for &slot in &run.slots {
            c.complete_write(slot, Ok::<(), ()>(())).unwrap();
        }
    }
    assert_eq!(c.dirty_blocks(), (0..10).collect::<Vec<_>>());
    // An answer selects a subset; a sync barrier then takes the rest, skipping 3 (writing).
    p.writeback = Some(WritebackSet { mask: 0b1000 });
    let batch = c.take_writeback(WritebackReason::Pressure, 0, &mut p);
    assert_eq!(batch.runs, vec![Run { start: 3, slots: batch.runs[0].slots.clone() }]);
    let rest: Vec<u64> = c.take_all_dirty().iter().map(|run| run.start).collect();
    assert_eq!(rest, [0, 4]);
    assert!(c.take_all_dirty().is_empty());
    c.check();
}

#[test]
fn sync_rounds_continue_past_a_full_batch() {
    let mut c = cache(100);
    let mut p = DefaultPolicy;
    for block in 0..70 {
        c.put(block, Owner::NONE, &one(1), &mut p).unwrap();
    }
    let first = c.take_writeback(WritebackReason::Sync, 0, &mut p);
    assert_eq!((first.blocks(), first.next), (WRITEBACK_BATCH, Some(64)));
    let second = c.take_writeback(WritebackReason::Sync, 64, &mut p);
    assert_eq!((second.blocks(), second.next), (6, None));
}

#[test]
fn invalidation_drops_clean_discards_freed_dirty_and_defers_busy_buffers() {
    let mut c = cache(8);
    let mut p = DefaultPolicy;
    for file_block in 0..4 {
        load(&mut c, 100 + file_block, Owner::of(7, file_block), &mut p, 0);
    }
    c.put(104, Owner::of(7, 4), &one(4), &mut p).unwrap();
    c.put(105, Owner::of(7, 5), &one(5), &mut p).unwrap();
    c.put(101, Owner::of(7, 1), &one(1), &mut p).unwrap();
    load(&mut c, 200, Owner::of(8, 0), &mut p, 0);
    let pinned = c.pin(102).unwrap();
    assert_eq!(c.file_counts(7), FileCounts { resident: 6, dirty: 3 });
    // Truncate to 3 blocks: file blocks 3.. are freed.
    let done = c.invalidate_file(7, 3);
    assert_eq!(done, Invalidated { dropped: 3, discarded: 2 });
    assert_eq!(c.dirty_blocks(), [101], "dirty data below the cut stays");
    assert_eq!(c.file_counts(7), FileCounts { resident: 1, dirty: 1 });
    assert!(!c.is_resident(102), "a pinned block leaves the map at once");
    assert_eq!(c.resident_count(), 2);
    c.check();
    // Its buffer comes back when the pin goes.
    assert_eq!(c.capacity() - c.resident_count(), 6);
    c.unpin(pinned).unwrap();
    c.check();
    // Unlink: everything goes.
    assert_eq!(c.invalidate_file(7, 0), Invalidated { dropped: 0, discarded: 1 });
    assert_eq!(c.file_counts(7), FileCounts::default());
    assert_eq!(c.file_counts(8), FileCounts { resident: 1, dirty: 0 });
    assert_eq!(c.counters().discarded, 3);
    c.check();
}

#[test]
fn invalidation_during_io_frees_the_buffer_on_completion() {
    let mut c = cache(2);
    let mut p = DefaultPolicy;
    let Lookup::Read(reading) = c.get(1, Owner::of(3, 0), &mut p).unwrap() else { panic!() };
    c.put(2, Owner::of(3, 1), &one(2), &mut p).unwrap();
    let runs = c.take_all_dirty();
    assert_eq!(c.invalidate_file(3, 0), Invalidated { dropped: 1, discarded: 1 });
    c.check();
    assert_eq!(c.get(9, Owner::NONE, &mut p), Err(CacheError::NoBuffer));
    c.complete_read(reading, Ok::<(), ()>(())).unwrap();
    c.complete_write(runs[0].slots[0], Ok::<(), ()>(())).unwrap();
    c.check();
    assert_eq!(c.resident_count(), 0);
    assert!(matches!(c.get(9, Owner::NONE, &mut p), Ok(Lookup::Read(_))));
}

#[test]
fn prefetches_are_counted_and_never_evict_dirty_blocks() {
    let mut c = cache(2);
    let mut p = DefaultPolicy;
    let PrefetchOutcome::Read(slot) = c.prefetch(4, Owner::of(1, 4), &mut p) else { panic!() };
    assert_eq!(c.prefetch(4, Owner::of(1, 4), &mut p), PrefetchOutcome::Resident);
    assert_eq!(c.get(4, Owner::of(1, 4), &mut p), Ok(Lookup::InFlight), "a reader waits for the prefetch");
    c.complete_read(slot, Ok::<(), ()>(())).unwrap();
    assert_eq!(c.get(4, Owner::of(1, 4), &mut p), Ok(Lookup::Hit(slot)));
    assert_eq!(c.get(4, Owner::of(1, 4), &mut p), Ok(Lookup::Hit(slot)));
    let counters = c.counters();
    assert_eq!((counters.prefetches, counters.prefetch_hits, counters.misses, counters.hits), (1, 1, 0, 2));
    let PrefetchOutcome::Read(unused) = c.prefetch(5, Owner::NONE, &mut p) else { panic!() };
    c.complete_read(unused, Ok::<(), ()>(())).unwrap();
    load(&mut c, 6, Owner::NONE, &mut p, 0);
    load(&mut c, 7, Owner::NONE, &mut p, 0);
    assert_eq!(c.counters().prefetch_unused, 1, "5 was evicted without a hit");
    c.put(5, Owner::NONE, &one(5), &mut p).unwrap();
    c.put(4, Owner::NONE, &one(4), &mut p).unwrap();
    assert_eq!(c.prefetch(8, Owner::NONE, &mut p), PrefetchOutcome::Skipped, "the only victims are dirty");
    c.check();
}

#[test]
fn exported_state_follows_files() {
    let mut c = cache(4);
    let mut p = DefaultPolicy;
    load(&mut c, 1, Owner::of(5, 0), &mut p, 0);
    load(&mut c, 2, Owner::of(5, 1), &mut p, 0);
    c.put(3, Owner::of(6, 0), &one(3), &mut p).unwrap();
    assert_eq!(c.file_counts(5), FileCounts { resident: 2, dirty: 0 });
    assert_eq!(c.file_counts(6), FileCounts { resident: 1, dirty: 1 });
    // The block changes hands (the newest owner is recorded).
    c.write(2, Owner::of(6, 1), 0, &[1], &mut p).unwrap();
    assert_eq!(c.file_counts(5), FileCounts { resident: 1, dirty: 0 });
    assert_eq!(c.file_counts(6), FileCounts { resident: 2, dirty: 2 });
    let mut out = [BlockInfo::default(); 2];
    assert_eq!(c.next_victims(&mut out), 2, "as many as fit");
    assert_eq!(out[0], BlockInfo { block: 1, file: Some(5), file_block: 0, dirty: false, pinned: false, references: 1, age: 3, level: 0 });
    assert_eq!(out[1].block, 3);
    assert_eq!(c.block_info(2).map(|info| (info.references, info.age, info.dirty)), Some((2, 0, true)));
    assert_eq!(encode_file(None), NO_FILE);
    assert_eq!(decode_file(encode_file(Some(5))), Some(5));
    assert_eq!(decode_file(NO_FILE), None);
    c.check();
}

// --- validation --------------------------------------------------------------------------------

fn candidate(block: u64, file: Option<FileId>, file_block: u64) -> BlockInfo {
    BlockInfo { block, file, file_block, references: 1, ..BlockInfo::default() }
}

#[test]
fn every_rejection_reason_is_reported() {
    assert_eq!(check_placement(Placement { place: Place::Lru, level: 3 }), Ok(Placement { place: Place::Lru, level: 3 }));
    assert_eq!(check_placement(Placement { place: Place::Keep, level: 4 }), Err(Rejection::LevelOutOfRange));

    let candidates = [candidate(1, Some(2), 0), candidate(5, None, 0)];
    let state = |pinned, in_flight, file| Some(VictimState { pinned, in_flight, file });
    assert_eq!(check_victim(Victim { block: 5 }, &candidates, None, state(false, false, None)), Ok(Victim { block: 5 }));
    assert_eq!(check_victim(Victim { block: 9 }, &candidates, None, None), Err(Rejection::VictimNotResident));
    assert_eq!(check_victim(Victim { block: 9 }, &candidates, None, state(true, true, None)), Err(Rejection::VictimInFlight));
    assert_eq!(check_victim(Victim { block: 9 }, &candidates, None, state(true, false, None)), Err(Rejection::VictimPinned));
    assert_eq!(check_victim(Victim { block: 9 }, &candidates, None, state(false, false, Some(3))), Err(Rejection::VictimNotCandidate));
    assert_eq!(check_victim(Victim { block: 9 }, &candidates, Some(4), state(false, false, Some(3))), Err(Rejection::VictimNotCandidate));
    assert_eq!(check_victim(Victim { block: 9 }, &candidates, Some(3), state(false, false, Some(3))), Ok(Victim { block: 9 }), "own file");
    assert_eq!(check_victim(Victim { block: 9 }, &candidates, None, state(false, false, None)), Err(Rejection::VictimNotCandidate));

    assert_eq!(check_writeback(WritebackSet { mask: 0b101 }, 3), Ok(WritebackSet { mask: 0b101 }));
    assert_eq!(check_writeback(WritebackSet { mask: 0b1000 }, 3), Err(Rejection::NotOffered));
    assert_eq!(check_writeback(WritebackSet { mask: u64::MAX }, 64), Ok(WritebackSet { mask: u64::MAX }));
    assert_eq!(check_writeback(WritebackSet { mask: 0 }, 0), Ok(WritebackSet { mask: 0 }));

    assert_eq!(check_prefetch(Prefetch { first: 6, count: 4 }, 10, 8), Ok(Prefetch { first: 6, count: 4 }));
    assert_eq!(check_prefetch(Prefetch { first: 7, count: 4 }, 10, 8), Err(Rejection::OutsideFile));
    assert_eq!(check_prefetch(Prefetch { first: u64::MAX, count: 4 }, 10, 8), Err(Rejection::OutsideFile), "no overflow");
    assert_eq!(check_prefetch(Prefetch { first: 0, count: 9 }, 10, 8), Err(Rejection::TooMany));
    assert_eq!(check_prefetch(Prefetch { first: 99, count: 0 }, 10, 8), Ok(Prefetch { first: 99, count: 0 }), "nothing is always fine");

    for rejection in [Rejection::LevelOutOfRange, Rejection::VictimPinned, Rejection::NotOffered, Rejection::TooMany] {
        assert!(rejection.to_string().starts_with(rejection.event().name()));
    }
    assert_eq!(Rejection::VictimInFlight.to_string(), "cache.Evict answer refused: the victim is being read or written");
}

#[test]
fn a_refused_placement_is_counted_and_the_default_used() {
    let mut c = cache(4);
    let mut p = Scripted { placement: Some(Placement { place: Place::Lru, level: 9 }), ..Scripted::default() };
    for block in 0..3 {
        load(&mut c, block, Owner::NONE, &mut p, 0);
    }
    assert_eq!(victims(&c), [0, 1, 2], "default: MRU end of level 0");
    assert_eq!(c.counters().rejected(Event::Enqueue), 3);
    p.placement = Some(Placement { place: Place::Lru, level: 0 });
    load(&mut c, 2, Owner::NONE, &mut p, 0);
    assert_eq!(victims(&c), [2, 0, 1]);
    p.placement = Some(Placement { place: Place::Mru, level: 2 });
    load(&mut c, 2, Owner::NONE, &mut p, 0);
    p.placement = Some(Placement { place: Place::Keep, level: 3 });
    load(&mut c, 0, Owner::NONE, &mut p, 0);
    assert_eq!(victims(&c), [0, 1, 2], "Keep leaves 0 where it is; 2 is on a higher level");
    load(&mut c, 3, Owner::NONE, &mut p, 0);
    assert_eq!(c.block_info(3).unwrap().level, 3, "Keep for a new block: MRU end of its level");
    assert_eq!(p.asked[0], 7);
    assert_eq!(c.counters().rejected(Event::Enqueue), 3);
    c.check();
}

#[test]
fn refused_victims_are_counted_and_lru_used() {
    let mut c = cache(10);
    let mut p = Scripted::default();
    for block in 0..10 {
        load(&mut c, block, Owner::of(block as u32 % 2, block), &mut p, 0);
    }
    let pinned = c.pin(0).unwrap();
    let mut next = 100;
    let mut evict = |c: &mut Cache, p: &mut Scripted, victim: u64| {
        p.victim = Some(Victim { block: victim });
        next += 1;
        load(c, next, Owner::NONE, p, 0);
    };
    // Not resident: the LRU candidate (1) goes.
    evict(&mut c, &mut p, 55);
    assert!(!c.is_resident(1));
    assert_eq!(p.last_candidates.iter().map(|info| info.block).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6, 7, 8]);
    // Pinned.
    evict(&mut c, &mut p, 0);
    assert!(c.is_resident(0) && !c.is_resident(2));
    // Resident but not among the 8 candidates, and the policy has no file.
    assert_eq!(victims(&c)[..9], [3, 4, 5, 6, 7, 8, 9, 101, 102]);
    evict(&mut c, &mut p, 102);
    assert!(c.is_resident(102) && !c.is_resident(3));
    assert_eq!(c.counters().rejected(Event::Evict), 3);
    // With a file, a block of that file outside the candidates is fine.
    p.scope = Some(0);
    assert_eq!(c.block_info(102).unwrap().file, None);
    c.put(102, Owner::of(0, 50), &one(0), &mut p).unwrap();
    c.take_all_dirty().iter().for_each(|run| run.slots.iter().for_each(|&slot| c.complete_write(slot, Ok::<(), ()>(())).unwrap()));
    assert!(!victims(&c)[..8].contains(&102));
    evict(&mut c, &mut p, 102);
    assert!(!c.is_resident(102) && c.is_resident(4));
    assert_eq!(c.counters().rejected(Event::Evict), 3);
    // In flight.
    p.victim = None;
    let Lookup::Read(reading) = c.get(300, Owner::NONE, &mut p).unwrap() else { panic!() };
    c.complete_read(reading, Err(())).unwrap();
    let Lookup::Read(reading) = c.get(301, Owner::NONE, &mut p).unwrap() else { panic!() };
    evict(&mut c, &mut p, 301);
    assert!(c.is_resident(301));
    assert_eq!(c.counters().rejected(Event::Evict), 4);
    c.complete_read(reading, Ok::<(), ()>(())).unwrap();
    c.unpin(pinned).unwrap();
    c.check();
}

#[test]
fn refused_writeback_answers_write_everything_offered() {
    let mut c = cache(4);
    let mut p = Scripted { writeback: Some(WritebackSet { mask: 0b100 }), ..Scripted::default() };
    c.put(8, Owner::NONE, &one(8), &mut p).unwrap();
    c.put(9, Owner::NONE, &one(9), &mut p).unwrap();
    let batch = c.take_writeback(WritebackReason::Sync, 0, &mut p);
    assert_eq!(batch.blocks(), 2);
    assert_eq!(c.counters().rejected(Event::Writeback), 1);
    assert_eq!(p.asked[2], 1);
    let batch = c.take_writeback(WritebackReason::Sync, 0, &mut p);
    assert_eq!(batch.blocks(), 0, "nothing to offer: not asked");
    assert_eq!(p.asked[2], 1);
}

#[test]
fn refused_read_ahead_answers_fall_back_to_the_default() {
    let mut c = cache(8);
    let mut p = Scripted { prefetch: Some(Prefetch { first: 8, count: 3 }), ..Scripted::default() };
    assert_eq!(c.read_ahead(1, 0, 10, &mut p), Prefetch::NONE, "outside the file: default (first read, nothing)");
    p.prefetch = Some(Prefetch { first: 2, count: 5 });
    assert_eq!(c.read_ahead(1, 1, 10, &mut p), Prefetch { first: 2, count: 4 }, "too many (cap 4): the default, a cluster cut to the cap");
    assert_eq!(c.counters().rejected(Event::ReadAhead), 2);
    p.prefetch = Some(Prefetch { first: 6, count: 4 });
    assert_eq!(c.read_ahead(1, 5, 10, &mut p), Prefetch { first: 6, count: 4 });
    assert_eq!(c.counters().rejected(Event::ReadAhead), 2);
}

// --- read-ahead ----------------------------------------------------------------------------------

#[test]
fn default_read_ahead_reads_the_next_cluster_when_the_block_after_a_read_is_not_asked_for() {
    let mut c = cache(64);
    let mut p = DefaultPolicy;
    let plans: Vec<(u64, u64, u32)> =
        (0..40).map(|k| (k, c.read_ahead(3, k, 100, &mut p))).filter(|(_, plan)| plan.count > 0).map(|(k, plan)| (k, plan.first, plan.count)).collect();
    // The first block read is no run; from the second on, a whole cluster (16 blocks) is
    // read each time the block after the one read was not asked for yet: at 1, 17, 33.
    assert_eq!(plans, [(1, 2, 16), (17, 18, 16), (33, 34, 16)]);
    // Re-reading the same block neither breaks the run nor asks again.
    assert_eq!(c.read_ahead(3, 39, 100, &mut p), Prefetch::NONE);
    // The end of the file clips the cluster.
    for k in 40..97 {
        c.read_ahead(3, k, 100, &mut p);
    }
    assert_eq!(c.read_ahead(3, 97, 100, &mut p), Prefetch { first: 98, count: 2 }, "clipped at block 99");
    assert_eq!(c.read_ahead(3, 99, 100, &mut p), Prefetch::NONE, "nothing after the last block");
}

#[test]
fn default_read_ahead_asks_for_the_cluster_only_when_it_reads_ahead() {
    let event = |file_block, run, ahead| ReadAheadEvent { file: 3, file_block, file_blocks: 100, run, ahead };
    let unused = |_| -> u32 { panic!("the cluster was asked for although nothing is read ahead") };
    assert_eq!(default_read_ahead(&event(11, 1, 12), unused), Prefetch::NONE, "no run");
    assert_eq!(default_read_ahead(&event(11, 12, 20), unused), Prefetch::NONE, "block 12 asked for already");
    assert_eq!(default_read_ahead(&event(99, 12, 100), unused), Prefetch::NONE, "past the end");
    // A cluster ends where the blocks stop lying one after the other (the caller's count):
    // block 12 follows the single indirect block on the disk, not block 11.
    let mut asked = None;
    let answer = default_read_ahead(&event(11, 12, 12), |first| {
        asked = Some(first);
        5
    });
    assert_eq!(answer, Prefetch { first: 12, count: 5 });
    assert_eq!(asked, Some(12));
    // Through the cache: the caller's cluster length is used, clamped to the largest cluster.
    let mut c = cache(64);
    let first = c.read_ahead_event(5, 0, 100);
    assert_eq!(c.decide_read_ahead(&first, &mut DefaultPolicy, unused), Prefetch::NONE);
    let second = c.read_ahead_event(5, 1, 100);
    assert_eq!(second, ReadAheadEvent { file: 5, file_block: 1, file_blocks: 100, run: 2, ahead: 2 });
    assert_eq!(c.decide_read_ahead(&second, &mut DefaultPolicy, |_| 10), Prefetch { first: 2, count: 10 });
    let third = c.read_ahead_event(5, 11, 100);
    assert_eq!(third.run, 1, "a jump starts a new run");
    let fourth = c.read_ahead_event(5, 12, 100);
    assert_eq!(c.decide_read_ahead(&fourth, &mut DefaultPolicy, |_| 1000), Prefetch { first: 13, count: 16 }, "at most 16");
}

#[test]
fn default_read_ahead_does_nothing_on_random_access() {
    let mut c = cache(64);
    let mut p = DefaultPolicy;
    for k in [50, 3, 77, 20, 21, 60, 5] {
        let plan = c.read_ahead(4, k, 100, &mut p);
        if k == 21 {
            assert_eq!(plan, Prefetch { first: 22, count: 16 }, "two in a row is a run");
        } else {
            assert_eq!(plan, Prefetch::NONE, "read of {k}");
        }
    }
    // Streams are per file: another file's reads do not break this run.
    c.read_ahead(4, 10, 100, &mut p);
    c.read_ahead(9, 0, 100, &mut p);
    assert_eq!(c.read_ahead(4, 11, 100, &mut p), Prefetch { first: 12, count: 16 });
}

#[test]
fn sequential_reads_through_the_device_hit_prefetched_blocks() {
    let mut cached = CachedDevice::new(MemDisk::new(64), Config::new(32), DefaultPolicy).unwrap();
    let mut buf = [0u8; 16];
    let mut prefetched = 0;
    for k in 0..40 {
        prefetched += cached.read_file(2, k, 40, |k| Some(k + 10), 0, &mut buf).unwrap();
        assert_eq!(buf, [(k + 10) as u8; 16]);
    }
    let counters = cached.cache().counters();
    assert_eq!(counters.prefetches, u64::from(prefetched));
    assert_eq!(counters.misses, 2, "only the first two reads wait for the disk");
    assert_eq!(counters.prefetch_hits, 38);
    assert_eq!(cached.device().reads, 40);
}

// --- reference policies -------------------------------------------------------------------------

#[test]
fn reference_victims_on_scripted_candidates() {
    let mut candidates = [candidate(10, Some(1), 0), candidate(11, Some(1), 5), candidate(12, Some(2), 1), candidate(13, None, 0)];
    for (candidate, (age, references)) in candidates.iter_mut().zip([(9, 4), (3, 1), (5, 1), (3, 7)]) {
        candidate.age = age;
        candidate.references = references;
    }
    assert_eq!(default_victim(&candidates), Some(Victim { block: 10 }));
    assert_eq!(mru_victim(&candidates), Some(Victim { block: 11 }), "youngest; ties to the earlier");
    assert_eq!(lfu_victim(&candidates), Some(Victim { block: 11 }), "fewest references; ties to the earlier");
    let range = Range { file: 1, first: 0, end: 8 };
    assert_eq!(pin_range_victim(&range, &candidates), Some(Victim { block: 12 }));
    assert_eq!(pin_range_victim(&range, &candidates[..2]), Some(Victim { block: 10 }), "all inside: the first");
    let range = Range { file: 1, first: 1, end: 8 };
    assert_eq!(pin_range_victim(&range, &candidates), Some(Victim { block: 10 }), "file block 0 is outside");
    for victim in [default_victim(&[]), mru_victim(&[]), lfu_victim(&[]), pin_range_victim(&range, &[])] {
        assert_eq!(victim, None);
    }
}

#[test]
fn reference_placements_and_read_ahead() {
    let event = |file, file_block, references| EnqueueEvent {
        info: BlockInfo { file, file_block, references, ..BlockInfo::default() },
        access: Access::Read,
        first: references == 1,
    };
    assert_eq!(default_placement(&event(None, 0, 1)), Placement::DEFAULT);
    assert_eq!(mru_placement(&event(None, 0, 1)), Placement { place: Place::Lru, level: 0 });
    let levels: Vec<u8> = [1, 2, 3, 4, 7, 8, 1000].into_iter().map(|references| lfu_placement(&event(None, 0, references)).level).collect();
    assert_eq!(levels, [0, 1, 1, 2, 2, 3, 3]);
    let range = Range { file: 4, first: 2, end: 6 };
    assert_eq!(pin_range_placement(&range, &event(Some(4), 2, 1)), Placement { place: Place::Mru, level: 1 });
    assert_eq!(pin_range_placement(&range, &event(Some(4), 6, 1)), Placement::DEFAULT);
    assert_eq!(pin_range_placement(&range, &event(Some(5), 3, 1)), Placement::DEFAULT);

    let ahead = |file_block, ahead| ReadAheadEvent { file: 1, file_block, file_blocks: 20, run: 1, ahead };
    assert_eq!(app_read_ahead(4, &ahead(3, 4)), Prefetch { first: 4, count: 4 }, "even without a run");
    assert_eq!(app_read_ahead(4, &ahead(4, 8)), Prefetch { first: 8, count: 1 }, "only what is not prefetched yet");
    assert_eq!(app_read_ahead(4, &ahead(17, 18)), Prefetch { first: 18, count: 2 }, "clipped at the end");
    assert_eq!(app_read_ahead(0, &ahead(3, 4)), Prefetch::NONE);
    let mut c = cache(64);
    let mut p = AppReadAhead { count: 6 };
    assert_eq!(c.read_ahead(1, 50, 100, &mut p), Prefetch { first: 51, count: 6 });
    assert_eq!(c.read_ahead(1, 51, 100, &mut p), Prefetch { first: 57, count: 1 });
}

#[test]
fn pin_range_keeps_its_range_resident() {
    let range = Range { file: 1, first: 0, end: 4 };
    let mut cached = CachedDevice::new(MemDisk::new(64), Config::new(8), PinRange { range }).unwrap();
    let mut buf = [0u8; 1];
    // The index root (file 1, blocks 0..4) once, then a long scan of file 2.
    for k in 0..4 {
        cached.read(k, Owner::of(1, k), 0, &mut buf).unwrap();
    }
    for k in 0..40 {
        cached.read(20 + k, Owner::of(2, k), 0, &mut buf).unwrap();
    }
    assert_eq!(cached.cache().file_counts(1).resident, 4);
    let hits = cached.cache().counters().hits;
    for k in 0..4 {
        cached.read(k, Owner::of(1, k), 0, &mut buf).unwrap();
    }
    assert_eq!(cached.cache().counters().hits, hits + 4);
}

fn scan_hits<P: Policy>(policy: P) -> u64 {
    let mut cached = CachedDevice::new(MemDisk::new(64), Config::new(16), policy).unwrap();
    let mut buf = [0u8; 8];
    for _ in 0..10 {
        for block in 0..24 {
            cached.read(block, Owner::of(1, block), 0, &mut buf).unwrap();
        }
    }
    cached.cache().counters().hits
}

#[test]
fn a_scan_of_one_and_a_half_caches_favours_mru() {
    let lru = scan_hits(DefaultPolicy);
    let mru = scan_hits(Mru);
    let lfu = scan_hits(Lfu);
    assert_eq!(lru, 0, "LRU evicts each block just before it is needed");
    assert!(mru >= 2 * lru && mru >= 9 * 14, "MRU {mru}, LRU {lru}");
    assert_eq!(lfu, lru, "every block has one reference when it is evicted: LFU is LRU here");
}

/// Looks at the cache it is handed at every decision, as the kernel's event policy does
/// for its handlers.
#[derive(Default)]
struct Viewing {
    /// The victim list as each decision saw it.
    views: Vec<Vec<u64>>,
    /// The candidates each eviction was offered, with the view it was decided under.
    candidates: Vec<(usize, Vec<u64>)>,
}

impl Policy for Viewing {
    fn enqueue(&mut self, _event: &EnqueueEvent, cache: &Cache) -> Option<Placement> {
        self.views.push(victims(cache));
        None
    }

    fn evict(&mut self, _event: &EvictEvent, candidates: &[BlockInfo], cache: &Cache) -> Option<Victim> {
        self.views.push(victims(cache));
        self.candidates.push((self.views.len() - 1, candidates.iter().map(|info| info.block).collect()));
        None
    }

    fn writeback(&mut self, _event: &WritebackEvent, _offered: &[BlockInfo], cache: &Cache) -> Option<WritebackSet> {
        self.views.push(victims(cache));
        None
    }

    fn read_ahead(&mut self, _event: &ReadAheadEvent, cache: &Cache) -> Option<Prefetch> {
        self.views.push(victims(cache));
        None
    }
}

#[test]
fn every_decision_sees_the_cache_as_it_is() {
    let mut cached = CachedDevice::new(MemDisk::new(64), Config::new(8), Viewing::default()).unwrap();
    let mut buf = [0u8; 8];
    for block in [1, 2, 3, 4, 5, 6, 7, 8, 2, 9, 10, 3] {
        cached.read(block, Owner::of(1, block), 0, &mut buf).unwrap();
    }
    cached.write(11, Owner::of(1, 11), 0, &[1; 8]).unwrap();
    cached.writeback(WritebackReason::Sync).unwrap();
    let after = victims(cached.cache());
    let (_, policy) = cached.into_parts();
    // Every decision (enqueue per reference, read-ahead per read, evictions, the sync
    // round) looked, and each eviction's view began with exactly its candidates (the view
    // is the cache at the moment of the question, not a copy from an earlier operation).
    assert!(policy.views.len() >= 16, "{} views", policy.views.len());
    assert!(!policy.candidates.is_empty(), "the reads never evicted");
    for (view, candidates) in &policy.candidates {
        assert!(!candidates.is_empty());
        assert_eq!(&policy.views[*view][..candidates.len()], &candidates[..], "an eviction's view is not the cache it was decided on");
    }
    assert_ne!(policy.views.first(), Some(&after), "the views did not follow the cache");
}

// --- the blocking wrapper and the model-based test ------------------------------------------------

#[test]
fn a_failed_write_keeps_the_data_dirty() {
    let mut cached = CachedDevice::new(MemDisk::new(16), Config::new(4), DefaultPolicy).unwrap();
    cached.write(3, Owner::NONE, 100, &[9, 9, 9]).unwrap();
    cached.write(4, Owner::NONE, 0, &one(4)).unwrap();
    cached.device_mut().fail_writes = 1;
    let error = cached.sync().unwrap_err();
    assert_eq!(error, CachedError::Device(Failed));
    assert_eq!(error.to_string(), "block device: injected device error");
    assert_eq!(cached.cache().dirty_blocks(), [3], "the failed block stays dirty; the other was written");
    assert_eq!(cached.cache().counters().write_errors, 1);
    assert_eq!(cached.device().flushes, 0);
    let mut buf = [0u8; 4];
    cached.read(3, Owner::NONE, 99, &mut buf).unwrap();
    assert_eq!(buf, [3, 9, 9, 9]);
    cached.sync().unwrap();
    assert_eq!(cached.cache().dirty_blocks(), []);
    assert_eq!(&cached.device().blocks[3][99..103], &[3, 9, 9, 9]);
    assert_eq!(cached.device().flushes, 1);
    assert_eq!(
        CachedError::<Failed>::Cache(CacheError::NoBuffer).to_string(),
        "buffer cache: no buffer can be reused: every buffer is pinned or in flight"
    );
}

#[test]
fn pressure_writes_back_through_the_device() {
    let mut cached = CachedDevice::new(MemDisk::new(16), Config::new(4), DefaultPolicy).unwrap();
    cached.write(1, Owner::NONE, 0, &one(1)).unwrap();
    cached.write(2, Owner::NONE, 0, &one(2)).unwrap();
    assert!(cached.device().writes.is_empty());
    cached.write(3, Owner::NONE, 0, &one(3)).unwrap();
    assert_eq!(cached.device().writes, [1, 2, 3], "above 2 dirty of 4: a pressure round writes them, ascending");
    assert_eq!(cached.writeback(WritebackReason::Sync).unwrap(), 0);
}

/// Answers at random, often invalidly.
struct Chaotic(Rng);

impl Policy for Chaotic {
    fn scope(&self) -> Option<FileId> {
        Some(1)
    }

    fn enqueue(&mut self, _event: &EnqueueEvent, _cache: &Cache) -> Option<Placement> {
        let place = [Place::Mru, Place::Lru, Place::Keep][self.0.below(3) as usize];
        (self.0.below(4) != 0).then(|| Placement { place, level: self.0.below(6) as u8 })
    }

    fn evict(&mut self, _event: &EvictEvent, candidates: &[BlockInfo], _cache: &Cache) -> Option<Victim> {
        match self.0.below(3) {
            0 => None,
            1 => Some(Victim { block: candidates[self.0.below(candidates.len() as u64) as usize].block }),
            _ => Some(Victim { block: self.0.below(30) }),
        }
    }

    fn writeback(&mut self, _event: &WritebackEvent, offered: &[BlockInfo], _cache: &Cache) -> Option<WritebackSet> {
        let mask = self.0.next() & if self.0.below(4) == 0 { u64::MAX } else { (1u64 << offered.len()) - 1 };
        Some(WritebackSet { mask })
    }

    fn read_ahead(&mut self, event: &ReadAheadEvent, _cache: &Cache) -> Option<Prefetch> {
        Some(Prefetch { first: self.0.below(event.file_blocks + 2), count: self.0.below(5) as u32 })
    }
}

const MODEL_BLOCKS: u64 = 24;
const FILE_BLOCKS: u64 = 8;

/// Random reads, writes, syncs, write-back rounds, pins, invalidation-free file reads with
/// read-ahead, and injected device errors over a 5-buffer cache; every read is compared
/// with a plain model of the disk's contents, and at the end the device must equal it.
fn model_run<P: Policy>(seed: u64, policy: P) {
    let mut rng = Rng::new(seed);
    let mut cached = CachedDevice::new(MemDisk::new(MODEL_BLOCKS as usize), Config::new(5), policy).unwrap();
    let mut model: Vec<[u8; BLOCK_SIZE]> = cached.device().blocks.clone();
    let mut pins: Vec<(u64, Slot)> = Vec::new();
    let owner = |block: u64| Owner::of((block / FILE_BLOCKS) as u32, block % FILE_BLOCKS);
    for step in 0..1500 {
        let block = rng.below(MODEL_BLOCKS);
        let context = format!("seed {seed} step {step} block {block}");
        match rng.below(100) {
            0..=34 => {
                let offset = rng.below(BLOCK_SIZE as u64) as usize;
                let length = rng.below((BLOCK_SIZE - offset) as u64 + 1) as usize;
                let mut buf = vec![0u8; length];
                match cached.read(block, owner(block), offset, &mut buf) {
                    Ok(()) => assert_eq!(buf, &model[block as usize][offset..offset + length], "{context}"),
                    Err(CachedError::Device(Failed) | CachedError::Cache(CacheError::NoBuffer)) => {}
                    Err(error) => panic!("{context}: {error:?}"),
                }
            }
            35..=44 => {
                let file = block / FILE_BLOCKS;
                let mut buf = [0u8; 32];
                let result =
                    cached.read_file(file as u32, block % FILE_BLOCKS, FILE_BLOCKS, |k| Some(file * FILE_BLOCKS + k), 64, &mut buf);
                match result {
                    Ok(_) => assert_eq!(buf, model[block as usize][64..96], "{context}"),
                    Err(CachedError::Device(Failed) | CachedError::Cache(CacheError::NoBuffer)) => {}
                    Err(error) => panic!("{context}: {error:?}"),
                }
            }
            45..=69 => {
                let (offset, length) = if rng.below(3) == 0 {
                    (0, BLOCK_SIZE)
                } else {
                    let offset = rng.below(BLOCK_SIZE as u64) as usize;
                    (offset, rng.below((BLOCK_SIZE - offset) as u64 + 1) as usize)
                };
                let byte = rng.next() as u8;
                let data = vec![byte; length];
                match cached.write(block, owner(block), offset, &data) {
                    Ok(()) => model[block as usize][offset..offset + length].copy_from_slice(&data),
                    Err(CachedError::Device(Failed) | CachedError::Cache(CacheError::NoBuffer)) => {}
                    Err(error) => panic!("{context}: {error:?}"),
                }
            }
            70..=74 => {
                let _ = cached.sync();
            }
            75..=79 => {
                let reason = if rng.below(2) == 0 { WritebackReason::Sync } else { WritebackReason::Pressure };
                let _ = cached.writeback(reason);
            }
            80..=87 => {
                if pins.len() < 3 {
                    if let Ok(slot) = cached.pin(block) {
                        pins.push((block, slot));
                    }
                } else {
                    let (_, slot) = pins.swap_remove(rng.below(pins.len() as u64) as usize);
                    cached.unpin(slot).unwrap();
                }
            }
            88..=93 => cached.device_mut().fail_writes += 1,
            _ => cached.device_mut().fail_reads += 1,
        }
        cached.cache().check();
        for &(block, _) in &pins {
            assert!(cached.cache().is_resident(block), "{context}: pinned block {block} was evicted");
        }
    }
    for (_, slot) in pins.drain(..) {
        cached.unpin(slot).unwrap();
    }
    cached.device_mut().fail_writes = 0;
    cached.device_mut().fail_reads = 0;
    cached.sync().unwrap();
    assert_eq!(cached.cache().dirty_count(), 0);
    let counters = cached.cache().counters();
    assert!(counters.hits > 0 && counters.misses > 0 && counters.writebacks > 0, "seed {seed}: {counters:?}");
    for (block, (on_disk, expected)) in cached.device().blocks.iter().zip(&model).enumerate() {
        assert!(on_disk == expected, "seed {seed}: block {block} differs on the device after sync");
    }
}

#[test]
fn model_based_random_operations_never_lose_data() {
    for seed in 1..=6 {
        model_run(seed, DefaultPolicy);
        model_run(seed, Mru);
        model_run(seed, Lfu);
        model_run(seed, PinRange { range: Range { file: 1, first: 2, end: 6 } });
        model_run(seed, Chaotic(Rng::new(seed + 100)));
    }
}

#[test]
fn chaotic_answers_are_refused_and_counted() {
    let mut cached = CachedDevice::new(MemDisk::new(MODEL_BLOCKS as usize), Config::new(5), Chaotic(Rng::new(7))).unwrap();
    let mut buf = [0u8; 1];
    for step in 0..300u64 {
        let block = (step * 7) % MODEL_BLOCKS;
        cached.write(block, Owner::of(1, block), 0, &[1]).unwrap();
        cached.read_file(2, step % FILE_BLOCKS, FILE_BLOCKS, Some, 0, &mut buf).unwrap();
        let _ = cached.writeback(WritebackReason::Sync);
    }
    let counters = cached.cache().counters();
    for event in Event::ALL {
        assert!(counters.rejected(event) > 0, "{}: {counters:?}", event.name());
    }
}

/// I/O the asynchronous model has submitted and not completed.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Read(Slot, u64),
    Write(Slot, u64),
}

/// The state machine driven as the kernel will drive it: many reads, write-backs, dirty
/// victims and prefetches in flight at once, completed in random order, some failing.
/// Every hit is compared with the model; at the end every dirty block is written and the
/// disk must equal the model.
fn async_model_run<P: Policy>(seed: u64, mut policy: P) {
    let mut rng = Rng::new(seed);
    let mut c = cache(4);
    let mut disk = MemDisk::new(12);
    let mut model = disk.blocks.clone();
    let mut pending: Vec<Pending> = Vec::new();
    for step in 0..4000 {
        let block = rng.below(12);
        let context = format!("seed {seed} step {step} block {block}");
        match rng.below(12) {
            0..=2 => match c.get(block, Owner::of(1, block), &mut policy) {
                Ok(Lookup::Hit(slot)) => assert!(c.data(slot).unwrap() == &model[block as usize], "{context}"),
                Ok(Lookup::Read(slot)) => pending.push(Pending::Read(slot, block)),
                Ok(Lookup::WriteBackFirst { slot, block }) => pending.push(Pending::Write(slot, block)),
                Ok(Lookup::InFlight) | Err(CacheError::NoBuffer) => {}
                Err(error) => panic!("{context}: {error:?}"),
            },
            3..=5 => {
                let (offset, length) = if rng.below(2) == 0 { (0, BLOCK_SIZE) } else { (rng.below(4000) as usize, 96) };
                let data = vec![rng.next() as u8; length];
                match c.write(block, Owner::of(1, block), offset, &data, &mut policy) {
                    Ok(WriteOutcome::Written { slot, .. }) => {
                        model[block as usize][offset..offset + length].copy_from_slice(&data);
                        assert!(c.data(slot).unwrap() == &model[block as usize], "{context}");
                    }
                    Ok(WriteOutcome::Read(slot)) => pending.push(Pending::Read(slot, block)),
                    Ok(WriteOutcome::WriteBackFirst { slot, block }) => pending.push(Pending::Write(slot, block)),
                    Ok(WriteOutcome::InFlight) | Err(CacheError::NoBuffer) => {}
                    Err(error) => panic!("{context}: {error:?}"),
                }
            }
            6 => {
                let reason = if rng.below(2) == 0 { WritebackReason::Sync } else { WritebackReason::Pressure };
                for run in c.take_writeback(reason, rng.below(12), &mut policy).runs {
                    for (offset, slot) in run.slots.into_iter().enumerate() {
                        pending.push(Pending::Write(slot, run.start + offset as u64));
                    }
                }
            }
            7 => {
                if let PrefetchOutcome::Read(slot) = c.prefetch(block, Owner::of(1, block), &mut policy) {
                    pending.push(Pending::Read(slot, block));
                }
            }
            _ if pending.is_empty() => {}
            _ => {
                let io = pending.swap_remove(rng.below(pending.len() as u64) as usize);
                let fail = rng.below(8) == 0;
                match io {
                    Pending::Read(slot, _) if fail => c.complete_read(slot, Err(())).unwrap(),
                    Pending::Read(slot, block) => {
                        c.read_buffer(slot).unwrap().copy_from_slice(&disk.blocks[block as usize]);
                        c.complete_read(slot, Ok::<(), ()>(())).unwrap();
                    }
                    Pending::Write(slot, _) if fail => c.complete_write(slot, Err(())).unwrap(),
                    Pending::Write(slot, block) => {
                        disk.write(block, c.data(slot).unwrap()).unwrap();
                        c.complete_write(slot, Ok::<(), ()>(())).unwrap();
                    }
                }
            }
        }
        c.check();
    }
    for io in pending {
        match io {
            Pending::Read(slot, block) => {
                c.read_buffer(slot).unwrap().copy_from_slice(&disk.blocks[block as usize]);
                c.complete_read(slot, Ok::<(), ()>(())).unwrap();
            }
            Pending::Write(slot, block) => {
                disk.write(block, c.data(slot).unwrap()).unwrap();
                c.complete_write(slot, Ok::<(), ()>(())).unwrap();
            }
        }
    }
    for run in c.take_all_dirty() {
        for (offset, slot) in run.slots.into_iter().enumerate() {
            disk.write(run.start + offset as u64, c.data(slot).unwrap()).unwrap();
            c.complete_write(slot, Ok::<(), ()>(())).unwrap();
        }
    }
    c.check();
    assert_eq!(c.dirty_count(), 0);
    let counters = c.counters();
    assert!(counters.waits > 0 && counters.write_errors > 0 && counters.read_errors > 0, "seed {seed}: {counters:?}");
    for (block, (on_disk, expected)) in disk.blocks.iter().zip(&model).enumerate() {
        assert!(on_disk == expected, "seed {seed}: block {block} differs on the disk");
    }
}

#[test]
fn async_model_with_overlapping_io_never_loses_data() {
    for seed in 1..=6 {
        async_model_run(seed, DefaultPolicy);
        async_model_run(seed, Mru);
        async_model_run(seed, Chaotic(Rng::new(seed + 200)));
    }
}

/// A device that counts its requests and can read and write runs.
struct RunDevice {
    blocks: alloc::vec::Vec<[u8; BLOCK_SIZE]>,
    requests: usize,
}

impl crate::BlockDevice for RunDevice {
    type Error = ();

    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), ()> {
        self.requests += 1;
        buf.copy_from_slice(self.blocks.get(block as usize).ok_or(())?);
        Ok(())
    }

    fn write(&mut self, block: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), ()> {
        self.requests += 1;
        self.blocks.get_mut(block as usize).ok_or(())?.copy_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ()> {
        Ok(())
    }

    fn max_run_blocks(&self) -> usize {
        4
    }

    fn read_run(&mut self, start: u64, buf: &mut [u8]) -> Result<(), ()> {
        self.requests += 1;
        for (offset, chunk) in buf.chunks_exact_mut(BLOCK_SIZE).enumerate() {
            chunk.copy_from_slice(self.blocks.get(start as usize + offset).ok_or(())?);
        }
        Ok(())
    }

    fn write_run(&mut self, start: u64, blocks: &[&[u8; BLOCK_SIZE]]) -> Result<(), ()> {
        self.requests += 1;
        for (offset, block) in blocks.iter().enumerate() {
            self.blocks.get_mut(start as usize + offset).ok_or(())?.copy_from_slice(&block[..]);
        }
        Ok(())
    }
}

#[test]
fn runs_reach_the_device_as_one_request_each() {
    let blocks = (0..32u8).map(|index| [index; BLOCK_SIZE]).collect();
    let mut cached = crate::CachedDevice::new(RunDevice { blocks, requests: 0 }, crate::Config::new(32), crate::DefaultPolicy).unwrap();
    // Ten blocks to prefetch: 3..=9 consecutive (two runs: 4 + 3, the device takes 4), 12
    // alone, 14 and 15 together; 5 is already resident.
    let mut one = [0u8; 1];
    cached.read(5, Owner::NONE, 0, &mut one).unwrap();
    cached.device_mut().requests = 0;
    let wanted: alloc::vec::Vec<(u64, Owner)> = [3, 4, 5, 6, 7, 8, 9, 12, 14, 15].iter().map(|&block| (block, Owner::NONE)).collect();
    assert_eq!(cached.prefetch_blocks(&wanted), Ok(9));
    // 3-4 (5 resident splits the run), 6-9, 12, 14-15.
    assert_eq!(cached.device().requests, 4);
    for block in [3u64, 4, 6, 9, 12, 15] {
        cached.read(block, Owner::NONE, 0, &mut one).unwrap();
        assert_eq!(one[0], block as u8, "block {block} holds another block's data");
    }
    assert_eq!(cached.device().requests, 4, "the prefetched blocks were hits");
    // Ten dirty consecutive blocks are written back as runs of at most four.
    for block in 20..30u64 {
        cached.write(block, Owner::NONE, 0, &[0xee; BLOCK_SIZE]).unwrap();
    }
    cached.device_mut().requests = 0;
    cached.sync().unwrap();
    assert_eq!(cached.device().requests, 3);
    assert!(cached.device().blocks[20..30].iter().all(|block| block.iter().all(|&byte| byte == 0xee)));
}

// --- giving buffers back under memory pressure ----------------------------------------------

#[test]
fn give_back_takes_free_then_clean_never_dirty_pinned_or_in_flight() {
    let mut c = cache(8);
    let mut p = DefaultPolicy;
    for block in 0..4 {
        load(&mut c, block, Owner::of(1, block), &mut p, block as u8);
    }
    c.put(10, Owner::of(2, 0), &one(10), &mut p).unwrap();
    let pinned = c.pin(1).unwrap();
    let Lookup::Read(reading) = c.get(20, Owner::of(3, 0), &mut p).unwrap() else { panic!() };
    // 8 slots: 4 clean (one pinned), 1 dirty, 1 reading, 2 free.
    let given = c.give_back(3, 0);
    assert_eq!(given.len(), 3);
    assert_eq!((c.buffer_count(), c.retired_count()), (5, 3));
    assert!(!c.is_resident(0), "the clean block nearest eviction went with the third buffer");
    assert!(c.is_resident(1) && c.is_resident(2), "the pinned block and the next clean one stay");
    c.check();
    // Everything that may go, down to nothing: blocks 2 and 3; never 1 (pinned), 10
    // (dirty) or 20 (reading).
    let more = c.give_back(100, 0);
    assert_eq!(more.len(), 2);
    assert!(c.is_resident(1) && c.is_resident(10) && c.is_resident(20));
    assert_eq!(c.dirty_blocks(), [10]);
    assert_eq!(c.counters().given_back, 5);
    c.check();
    // The floor keeps buffers.
    c.complete_read(reading, Ok::<(), ()>(())).unwrap();
    c.unpin(pinned).unwrap();
    assert_eq!(c.give_back(100, 2).len(), 1, "3 held, floor 2: one more goes");
    assert_eq!(c.buffer_count(), 2);
    c.check();
    // The buffers come back to retired slots, then no further.
    let mut all: Vec<Buffer> = given.into_iter().chain(more).collect();
    all.push(heap_buffer());
    let mut returned = 0;
    for buffer in all {
        if c.take_back(buffer).is_ok() {
            returned += 1;
        }
    }
    assert_eq!(returned, 6);
    assert_eq!((c.buffer_count(), c.retired_count()), (8, 0));
    assert!(c.take_back(heap_buffer()).is_err(), "no retired slot left");
    assert_eq!(c.counters().taken_back, 6);
    c.check();
}

#[test]
fn a_shrunken_cache_still_reads_and_writes_what_the_device_holds() {
    let mut cached = CachedDevice::new(MemDisk::new(64), Config::new(16), DefaultPolicy).unwrap();
    for block in 0..16 {
        cached.write(block, Owner::of(1, block), 0, &one(block as u8 + 1)).unwrap();
    }
    cached.sync().unwrap();
    let given = cached.give_back(14, 2);
    assert_eq!(given.len(), 14);
    assert_eq!(cached.cache().buffer_count(), 2);
    assert_eq!(cached.cache().dirty_limit(), 1, "the dirty limit follows the buffers held");
    // Every block reads back right through two buffers, and writes still reach the device.
    for block in 0..16 {
        let mut buf = [0u8; 8];
        cached.read(block, Owner::of(1, block), 100, &mut buf).unwrap();
        assert_eq!(buf, [block as u8 + 1; 8], "block {block}");
        cached.write(block, Owner::of(1, block), 0, &one(block as u8 + 50)).unwrap();
    }
    cached.sync().unwrap();
    for block in 0..16 {
        assert_eq!(cached.device().blocks[block as usize], one(block as u8 + 50));
    }
    for buffer in given {
        assert!(cached.take_back(buffer).is_ok());
    }
    assert_eq!(cached.cache().buffer_count(), 16);
    cached.cache().check();
}

#[test]
fn give_back_finds_a_clean_block_behind_many_dirty_ones() {
    let mut c = cache(16);
    let mut p = DefaultPolicy;
    // The eviction order starts with more dirty blocks than cache.Evict is offered.
    for block in 0..(EVICT_CANDIDATES as u64 + 4) {
        c.put(block, Owner::of(1, block), &one(block as u8), &mut p).unwrap();
    }
    load(&mut c, 100, Owner::of(2, 0), &mut p, 7);
    let free = c.capacity() - c.resident_count();
    let given = c.give_back(free + 1, 0);
    assert_eq!(given.len(), free + 1, "the free buffers and the clean block");
    assert!(!c.is_resident(100));
    assert_eq!(c.dirty_count(), EVICT_CANDIDATES + 4, "no dirty block went");
    c.check();
}

#[test]
fn a_cache_starts_with_the_buffers_it_could_have() {
    let mut supplied = 0;
    let c = Cache::with_buffers(Config::new(8), || {
        supplied += 1;
        (supplied % 2 == 0).then(heap_buffer)
    })
    .unwrap();
    assert_eq!((c.capacity(), c.buffer_count(), c.retired_count()), (8, 4, 4));
    c.check();
    assert_eq!(Cache::with_buffers(Config::new(8), || None).err(), Some(ConfigError::NoBuffers));
    assert!(ConfigError::NoBuffers.to_string().contains("no memory"));
}
