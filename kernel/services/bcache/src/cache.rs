//! The cache core: buffers, their state, and what I/O the caller must do.
//!
//! # Design
//!
//! [`Cache`] owns up to `capacity` buffers of [`BLOCK_SIZE`] bytes ([`Buffer`]s: on the heap
//! from [`Cache::new`], or whatever its owner supplies to [`Cache::with_buffers`] — the kernel
//! gives each a physical frame of its own). Under memory pressure the owner may take clean
//! buffers back ([`Cache::give_back`]) and return them later ([`Cache::take_back`]); a slot
//! without a buffer is *retired* and holds no block. It does no I/O: each call says what the caller must do, and the caller
//! reports back when the device has done it. A buffer ([`Slot`]) is in one of four states:
//!
//! - free;
//! - **reading**: reserved for a block whose data is being read ([`Lookup::Read`]); the
//!   caller fills [`Cache::read_buffer`] and calls [`Cache::complete_read`]. Others asking for
//!   the block get [`Lookup::InFlight`] and retry after the read completes;
//! - **valid**: holds the block's data, clean or dirty;
//! - **writing**: a dirty block being written to the device (a write-back, or a dirty
//!   eviction victim, [`Lookup::WriteBackFirst`]). Reads still hit it (its data does not
//!   change); writes wait ([`WriteOutcome::InFlight`]); [`Cache::complete_write`] ends it: on
//!   success the block is clean, on failure it stays dirty (counted).
//!
//! Only valid, unpinned buffers are eviction candidates; reading and writing buffers are
//! in flight. A dirty victim is never dropped: a miss that needs it answers
//! [`Lookup::WriteBackFirst`], and the caller writes it, completes the write and asks again —
//! the now-clean victim (or another buffer) is then reused.
//!
//! Blocks are found through an ordered map (block → slot); the eviction queues are
//! intrusive doubly linked lists over the slots (see [`crate::policy`] for the order).
//!
//! Invalidated blocks ([`Cache::invalidate_file`]) leave the map at once; a buffer still
//! pinned or in flight is freed when the pin is released or the I/O completes.
//!
//! Giving buffers back takes free buffers first, then clean, unpinned, valid blocks in the
//! exported victim order ([`Cache::next_victims`]: the LRU ends of the queues) — never a
//! dirty, pinned or in-flight one, and it raises no `cache.Evict` (no block is coming in).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::policy::{
    Access, BlockInfo, EVICT_CANDIDATES, EnqueueEvent, Event, EvictEvent, LEVELS, Place, Placement, Policy, Prefetch, ReadAheadEvent,
    Rejection, VictimState, WRITEBACK_BATCH, WritebackEvent, WritebackReason, WritebackSet, check_placement, check_prefetch, check_victim,
    check_writeback, default_placement, default_read_ahead, default_writeback,
};
use crate::{BLOCK_SIZE, FileId};

/// The largest capacity a cache may be configured with (256 MiB of buffers).
pub const MAX_CAPACITY: usize = 1 << 16;

/// How many files' sequential streams the read-ahead detector follows at once (the least
/// recently read one is forgotten first).
pub const STREAMS: usize = 16;

const NIL: u32 = u32::MAX;

/// Who a cached block belongs to: given by whoever inserts or references it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    /// The owner file (an inode number), if any.
    pub file: Option<FileId>,
    /// The block's index inside the file (0 without a file).
    pub file_block: u64,
}

impl Owner {
    /// No owner (metadata, raw device access).
    pub const NONE: Owner = Owner { file: None, file_block: 0 };

    /// Block `file_block` of `file`.
    pub fn of(file: FileId, file_block: u64) -> Owner {
        Owner { file: Some(file), file_block }
    }
}

/// A buffer of the cache (an index below the capacity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(pub u32);

impl Slot {
    /// The buffer's index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// How a [`Cache`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Buffers, 1 to [`MAX_CAPACITY`].
    pub capacity: usize,
    /// Dirty buffers above this percentage of the capacity put the cache under pressure
    /// (a write says so; `cache.Writeback` is then asked with [`WritebackReason::Pressure`]).
    /// 0 to 100.
    pub dirty_limit_percent: u8,
    /// Largest cluster the default read-ahead reads, in blocks (16 × 4 KiB = 64 KiB,
    /// BSD/OS's largest cluster: 8 × 8 KiB).
    pub read_ahead_cluster: u32,
    /// Most blocks one `cache.ReadAhead` answer may ask for; also capped at half the
    /// capacity (at least 1).
    pub prefetch_cap: u32,
}

impl Config {
    /// `capacity` buffers; dirty limit 50 %, read-ahead clusters of 16 blocks, prefetch cap 32.
    pub fn new(capacity: usize) -> Config {
        Config { capacity, dirty_limit_percent: 50, read_ahead_cluster: 16, prefetch_cap: 32 }
    }
}

/// A [`Config`] the cache refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The capacity is 0 or above [`MAX_CAPACITY`].
    Capacity {
        /// The capacity asked for.
        capacity: usize,
    },
    /// The dirty limit is above 100 %.
    DirtyLimit {
        /// The percentage asked for.
        percent: u8,
    },
    /// No buffer could be had for any slot ([`Cache::with_buffers`]).
    NoBuffers,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Capacity { capacity } => write!(formatter, "buffer cache capacity {capacity} is not between 1 and {MAX_CAPACITY}"),
            ConfigError::DirtyLimit { percent } => write!(formatter, "dirty limit {percent} % is above 100 %"),
            ConfigError::NoBuffers => formatter.write_str("no memory for any of the buffer cache's buffers"),
        }
    }
}

impl core::error::Error for ConfigError {}

/// Where a buffer's bytes live: a [`BLOCK_SIZE`]-byte array on the heap (host tests,
/// [`Cache::new`]), or memory its owner manages (the kernel: a frame of its own, recorded as
/// the buffer cache's).
pub trait BlockBuffer: Send + Sync {
    /// The bytes.
    fn bytes(&self) -> &[u8; BLOCK_SIZE];
    /// The bytes, to change them.
    fn bytes_mut(&mut self) -> &mut [u8; BLOCK_SIZE];
}

impl BlockBuffer for [u8; BLOCK_SIZE] {
    fn bytes(&self) -> &[u8; BLOCK_SIZE] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8; BLOCK_SIZE] {
        self
    }
}

/// One buffer of the cache.
pub type Buffer = Box<dyn BlockBuffer>;

/// A zeroed buffer on the heap (built there, not on the stack).
pub fn heap_buffer() -> Buffer {
    let bytes: Box<[u8]> = vec![0u8; BLOCK_SIZE].into_boxed_slice();
    match Box::<[u8; BLOCK_SIZE]>::try_from(bytes) {
        Ok(array) => array,
        // Cannot happen: the slice has BLOCK_SIZE bytes.
        Err(_) => Box::new([0u8; BLOCK_SIZE]),
    }
}

/// Why a cache call failed (nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// Every buffer is pinned or in flight: none can be reused now.
    NoBuffer,
    /// The block is not in the cache.
    NotResident {
        /// The block.
        block: u64,
    },
    /// The block is being read, so it cannot be pinned or its data used yet.
    InFlight {
        /// The block.
        block: u64,
    },
    /// `offset + length` is past the end of the block.
    BadRange {
        /// The offset asked for.
        offset: usize,
        /// The length asked for.
        length: usize,
    },
    /// The slot is not a buffer of this cache.
    BadSlot {
        /// The slot.
        slot: Slot,
    },
    /// The buffer is not in the state the call needs (e.g. completing a read that was never
    /// started, or unpinning an unpinned buffer).
    WrongState {
        /// The slot.
        slot: Slot,
    },
}

impl fmt::Display for CacheError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::NoBuffer => formatter.write_str("no buffer can be reused: every buffer is pinned or in flight"),
            CacheError::NotResident { block } => write!(formatter, "block {block} is not in the buffer cache"),
            CacheError::InFlight { block } => write!(formatter, "block {block} is being read"),
            CacheError::BadRange { offset, length } => {
                write!(formatter, "{length} bytes at offset {offset} do not fit in a {BLOCK_SIZE}-byte block")
            }
            CacheError::BadSlot { slot } => write!(formatter, "slot {} is not a buffer of this cache", slot.0),
            CacheError::WrongState { slot } => write!(formatter, "buffer {} is not in the state this call needs", slot.0),
        }
    }
}

impl core::error::Error for CacheError {}

/// What a [`Cache::get`] caller must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The block's data is in the buffer ([`Cache::data`]).
    Hit(Slot),
    /// Someone is reading the block: wait for that read and ask again.
    InFlight,
    /// A miss: read the block into the buffer ([`Cache::read_buffer`]), then
    /// [`Cache::complete_read`].
    Read(Slot),
    /// A miss whose victim is dirty: write the buffer's data ([`Cache::data`]) to `block`,
    /// then [`Cache::complete_write`], and ask again.
    WriteBackFirst {
        /// The victim's buffer (now writing).
        slot: Slot,
        /// The victim's block.
        block: u64,
    },
}

/// What a [`Cache::write`] caller must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The bytes are in the cache, dirty.
    Written {
        /// The buffer.
        slot: Slot,
        /// More dirty buffers than the limit: the caller should run a pressure write-back
        /// ([`Cache::take_writeback`] with [`WritebackReason::Pressure`]).
        pressure: bool,
    },
    /// The block is being read or written: wait and ask again.
    InFlight,
    /// A partial write to a block not in the cache: read it into the buffer first
    /// ([`Cache::complete_read`]), then write again.
    Read(Slot),
    /// A dirty victim must be written first, as [`Lookup::WriteBackFirst`]; then write again.
    WriteBackFirst {
        /// The victim's buffer (now writing).
        slot: Slot,
        /// The victim's block.
        block: u64,
    },
}

/// What a [`Cache::prefetch`] caller must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefetchOutcome {
    /// Nothing: the block is in the cache or being read.
    Resident,
    /// Read the block into the buffer and [`Cache::complete_read`]; nobody waits for it.
    Read(Slot),
    /// Nothing: no buffer can be had without writing a dirty block or waiting (a prefetch
    /// never does either).
    Skipped,
}

/// Consecutive blocks to write: `start`, `start + 1`, … from these buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The first block.
    pub start: u64,
    /// The buffers, one per block, in block order (each now writing; complete each with
    /// [`Cache::complete_write`]).
    pub slots: Vec<Slot>,
}

/// One write-back round ([`Cache::take_writeback`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WritebackBatch {
    /// What to write, in ascending block order.
    pub runs: Vec<Run>,
    /// For a sync round: where the next round starts (`None`: the round reached the last
    /// dirty block).
    pub next: Option<u64>,
}

impl WritebackBatch {
    /// Blocks to write.
    pub fn blocks(&self) -> usize {
        self.runs.iter().map(|run| run.slots.len()).sum()
    }
}

/// A file's buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// Buffers holding (or reading) the file's blocks.
    pub resident: u32,
    /// Of them, dirty.
    pub dirty: u32,
}

/// What [`Cache::invalidate_file`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Invalidated {
    /// Clean blocks dropped.
    pub dropped: u32,
    /// Dirty blocks of freed data discarded without writing.
    pub discarded: u32,
}

/// The cache's counters (Infokernel's procedure counters): fixed-size and `Copy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Lookups and writes that found the block valid.
    pub hits: u64,
    /// Lookups and writes that reserved a buffer for the block.
    pub misses: u64,
    /// Lookups and writes that found the block in flight (the caller waits).
    pub waits: u64,
    /// Prefetch reads issued.
    pub prefetches: u64,
    /// First hits on prefetched blocks.
    pub prefetch_hits: u64,
    /// Prefetched blocks that left the cache (evicted, invalidated, failed read) before
    /// any hit: false read-ahead.
    pub prefetch_unused: u64,
    /// Buffers taken from a block to hold another.
    pub evictions: u64,
    /// Dirty blocks written successfully.
    pub writebacks: u64,
    /// Failed writes (the block stayed dirty).
    pub write_errors: u64,
    /// Failed reads (the buffer was freed).
    pub read_errors: u64,
    /// Dirty blocks of freed data discarded.
    pub discarded: u64,
    /// Buffers given back to the owner under memory pressure ([`Cache::give_back`]); the
    /// clean blocks they held left the cache.
    pub given_back: u64,
    /// Buffers the owner returned ([`Cache::take_back`]).
    pub taken_back: u64,
    /// Refused answers per event, in the order of [`Event::ALL`].
    pub rejections: [u64; 4],
}

impl Counters {
    /// Refused answers to `event`.
    pub fn rejected(&self, event: Event) -> u64 {
        self.rejections[event.index()]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Reading,
    Valid,
    Writing,
}

#[derive(Clone, Copy, Debug)]
struct Meta {
    block: u64,
    owner: Owner,
    state: State,
    dirty: bool,
    pins: u32,
    /// Invalidated: out of the map and the queues; freed when unpinned and not in flight.
    doomed: bool,
    /// Read by a prefetch and not referenced since.
    prefetched: bool,
    references: u32,
    last_use: u64,
    level: u8,
    linked: bool,
    prev: u32,
    next: u32,
}

impl Meta {
    const FREE: Meta = Meta {
        block: 0,
        owner: Owner::NONE,
        state: State::Free,
        dirty: false,
        pins: 0,
        doomed: false,
        prefetched: false,
        references: 0,
        last_use: 0,
        level: 0,
        linked: false,
        prev: NIL,
        next: NIL,
    };
}

#[derive(Clone, Copy, Debug)]
struct Stream {
    file: FileId,
    last: u64,
    run: u32,
    ahead: u64,
    used: u64,
    live: bool,
}

enum Reserved {
    Slot(u32),
    WriteBackFirst(u32),
    Skipped,
}

/// The buffer cache core (see the module documentation).
pub struct Cache {
    config: Config,
    /// One per slot; `None`: the slot is retired (its buffer was given back).
    buffers: Vec<Option<Buffer>>,
    /// The retired slots.
    retired: Vec<u32>,
    meta: Vec<Meta>,
    index: BTreeMap<u64, u32>,
    /// LRU end of each queue (evicted first).
    heads: [u32; LEVELS],
    /// MRU end of each queue.
    tails: [u32; LEVELS],
    free: Vec<u32>,
    files: BTreeMap<FileId, FileCounts>,
    streams: [Stream; STREAMS],
    clock: u64,
    stream_clock: u64,
    dirty: usize,
    counters: Counters,
}

impl Cache {
    /// A cache of `config.capacity` empty buffers on the heap (allocated here, once).
    ///
    /// Errors: [`ConfigError`].
    pub fn new(config: Config) -> Result<Cache, ConfigError> {
        Cache::with_buffers(config, || Some(heap_buffer()))
    }

    /// A cache of up to `config.capacity` buffers, each from `supply`: the slots `supply`
    /// has no buffer for start retired ([`Cache::take_back`] fills them later).
    ///
    /// Errors: [`ConfigError`]; [`ConfigError::NoBuffers`] if `supply` gave none.
    pub fn with_buffers(config: Config, mut supply: impl FnMut() -> Option<Buffer>) -> Result<Cache, ConfigError> {
        if config.capacity == 0 || config.capacity > MAX_CAPACITY {
            return Err(ConfigError::Capacity { capacity: config.capacity });
        }
        if config.dirty_limit_percent > 100 {
            return Err(ConfigError::DirtyLimit { percent: config.dirty_limit_percent });
        }
        let capacity = config.capacity;
        let buffers: Vec<Option<Buffer>> = (0..capacity).map(|_| supply()).collect();
        if buffers.iter().all(Option::is_none) {
            return Err(ConfigError::NoBuffers);
        }
        let free = (0..capacity as u32).rev().filter(|&slot| buffers[slot as usize].is_some()).collect();
        let retired = (0..capacity as u32).rev().filter(|&slot| buffers[slot as usize].is_none()).collect();
        Ok(Cache {
            config,
            buffers,
            retired,
            meta: vec![Meta::FREE; capacity],
            index: BTreeMap::new(),
            heads: [NIL; LEVELS],
            tails: [NIL; LEVELS],
            free,
            files: BTreeMap::new(),
            streams: [Stream { file: 0, last: 0, run: 0, ahead: 0, used: 0, live: false }; STREAMS],
            clock: 0,
            stream_clock: 0,
            dirty: 0,
            counters: Counters::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Slots: the most buffers the cache holds.
    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    /// Buffers the cache holds now: [`Cache::capacity`] less the retired slots.
    pub fn buffer_count(&self) -> usize {
        self.capacity() - self.retired.len()
    }

    /// Slots whose buffer was given back ([`Cache::give_back`]) and not yet returned.
    pub fn retired_count(&self) -> usize {
        self.retired.len()
    }

    /// Most blocks a `cache.ReadAhead` answer may ask for.
    pub fn prefetch_cap(&self) -> u32 {
        self.config.prefetch_cap.min((self.buffer_count() / 2).max(1) as u32)
    }

    /// The dirty count above which the cache is under pressure (a share of the buffers it
    /// holds now).
    pub fn dirty_limit(&self) -> usize {
        self.buffer_count() * usize::from(self.config.dirty_limit_percent) / 100
    }

    /// Gives up to `wanted` buffers back to the owner while more than `floor` remain: free
    /// buffers first, then the clean, unpinned, valid blocks nearest eviction (which leave
    /// the cache; counted in [`Counters::given_back`]). Never a dirty, pinned or in-flight
    /// block. Their slots are retired until [`Cache::take_back`].
    pub fn give_back(&mut self, wanted: usize, floor: usize) -> Vec<Buffer> {
        let mut out = Vec::new();
        while out.len() < wanted && self.buffer_count() > floor {
            let slot = match self.free.pop() {
                Some(slot) => slot,
                None => {
                    let Some(slot) = self.first_clean_victim() else { break };
                    self.remove(slot);
                    self.meta[slot as usize] = Meta::FREE;
                    slot
                }
            };
            match self.buffers[slot as usize].take() {
                Some(buffer) => {
                    out.push(buffer);
                    self.retired.push(slot);
                    self.counters.given_back += 1;
                }
                // Cannot happen (free and resident slots hold buffers); keep the slot usable.
                None => self.retired.push(slot),
            }
        }
        out
    }

    /// The first clean evictable block in eviction order (the whole order, not only the
    /// candidates `cache.Evict` is offered).
    fn first_clean_victim(&self) -> Option<u32> {
        for level in 0..LEVELS {
            let mut slot = self.heads[level];
            while slot != NIL {
                if self.evictable(slot) && !self.meta[slot as usize].dirty {
                    return Some(slot);
                }
                slot = self.meta[slot as usize].next;
            }
        }
        None
    }

    /// Returns a buffer to a retired slot, which becomes free; `Err` gives it back if no
    /// slot is retired. Its contents do not matter (a read or a whole-block write fills it).
    pub fn take_back(&mut self, buffer: Buffer) -> Result<(), Buffer> {
        let Some(slot) = self.retired.pop() else { return Err(buffer) };
        self.buffers[slot as usize] = Some(buffer);
        self.free.push(slot);
        self.counters.taken_back += 1;
        Ok(())
    }

    /// The buffer of a slot that holds one.
    fn buffer(&self, slot: Slot) -> Result<&[u8; BLOCK_SIZE], CacheError> {
        self.buffers[slot.index()].as_deref().map(BlockBuffer::bytes).ok_or(CacheError::WrongState { slot })
    }

    /// The buffer of a slot that holds one, to change it.
    fn buffer_mut(&mut self, slot: Slot) -> Result<&mut [u8; BLOCK_SIZE], CacheError> {
        self.buffers[slot.index()].as_deref_mut().map(BlockBuffer::bytes_mut).ok_or(CacheError::WrongState { slot })
    }

    /// Dirty buffers.
    pub fn dirty_count(&self) -> usize {
        self.dirty
    }

    /// Blocks in the cache (valid or in flight).
    pub fn resident_count(&self) -> usize {
        self.index.len()
    }

    /// Whether there are more dirty buffers than [`Cache::dirty_limit`].
    pub fn under_pressure(&self) -> bool {
        self.dirty > self.dirty_limit()
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Whether `block` is in the cache (valid or in flight).
    pub fn is_resident(&self, block: u64) -> bool {
        self.index.contains_key(&block)
    }

    /// What the cache knows of `block`, if it is resident.
    pub fn block_info(&self, block: u64) -> Option<BlockInfo> {
        self.index.get(&block).map(|&slot| self.info(slot))
    }

    /// A file's resident and dirty block counts.
    pub fn file_counts(&self, file: FileId) -> FileCounts {
        self.files.get(&file).copied().unwrap_or_default()
    }

    /// The exported victim list: the next evictable blocks in eviction order — what the
    /// default `cache.Evict` answer would give up next, first to last — written to `out`
    /// (as many as fit). Returns how many were written.
    pub fn next_victims(&self, out: &mut [BlockInfo]) -> usize {
        let mut written = 0;
        for level in 0..LEVELS {
            let mut slot = self.heads[level];
            while slot != NIL && written < out.len() {
                if self.evictable(slot) {
                    out[written] = self.info(slot);
                    written += 1;
                }
                slot = self.meta[slot as usize].next;
            }
        }
        written
    }

    /// Every dirty block (including those being written), ascending.
    pub fn dirty_blocks(&self) -> Vec<u64> {
        self.index.iter().filter(|&(_, &slot)| self.meta[slot as usize].dirty).map(|(&block, _)| block).collect()
    }

    /// The data of a valid (or writing) buffer.
    ///
    /// Errors: [`CacheError::BadSlot`], [`CacheError::WrongState`] (free or reading).
    pub fn data(&self, slot: Slot) -> Result<&[u8; BLOCK_SIZE], CacheError> {
        let index = self.slot(slot)?;
        match self.meta[index].state {
            State::Valid | State::Writing => self.buffer(slot),
            State::Free | State::Reading => Err(CacheError::WrongState { slot }),
        }
    }

    /// The buffer a read fills ([`Lookup::Read`] and the like).
    ///
    /// Errors: [`CacheError::BadSlot`], [`CacheError::WrongState`] (not reading).
    pub fn read_buffer(&mut self, slot: Slot) -> Result<&mut [u8; BLOCK_SIZE], CacheError> {
        let index = self.slot(slot)?;
        if self.meta[index].state != State::Reading {
            return Err(CacheError::WrongState { slot });
        }
        self.buffer_mut(slot)
    }

    /// Looks `block` up for a read by `owner` (see [`Lookup`]). A hit asks `cache.Enqueue`;
    /// a miss may ask `cache.Evict` and then `cache.Enqueue` for the new block.
    ///
    /// Errors: [`CacheError::NoBuffer`] (a miss, and every buffer is pinned or in flight).
    pub fn get<P: Policy + ?Sized>(&mut self, block: u64, owner: Owner, policy: &mut P) -> Result<Lookup, CacheError> {
        if let Some(&slot) = self.index.get(&block) {
            return Ok(match self.meta[slot as usize].state {
                State::Valid | State::Writing => {
                    self.hit(slot, owner, Access::Read, policy);
                    Lookup::Hit(Slot(slot))
                }
                State::Reading | State::Free => {
                    self.counters.waits += 1;
                    Lookup::InFlight
                }
            });
        }
        match self.reserve(block, owner, Access::Read, policy)? {
            Reserved::Slot(slot) => {
                self.counters.misses += 1;
                Ok(Lookup::Read(Slot(slot)))
            }
            Reserved::WriteBackFirst(slot) => Ok(Lookup::WriteBackFirst { slot: Slot(slot), block: self.meta[slot as usize].block }),
            Reserved::Skipped => Err(CacheError::NoBuffer),
        }
    }

    /// Writes `bytes` at `offset` of `block` for `owner` (see [`WriteOutcome`]). A write of
    /// the whole block to a block not in the cache needs no read.
    ///
    /// Errors: [`CacheError::BadRange`], [`CacheError::NoBuffer`].
    pub fn write<P: Policy + ?Sized>(
        &mut self,
        block: u64,
        owner: Owner,
        offset: usize,
        bytes: &[u8],
        policy: &mut P,
    ) -> Result<WriteOutcome, CacheError> {
        let end =
            offset.checked_add(bytes.len()).filter(|&end| end <= BLOCK_SIZE).ok_or(CacheError::BadRange { offset, length: bytes.len() })?;
        let slot = match self.index.get(&block) {
            Some(&slot) => match self.meta[slot as usize].state {
                State::Valid => {
                    self.hit(slot, owner, Access::Write, policy);
                    slot
                }
                State::Reading | State::Writing | State::Free => {
                    self.counters.waits += 1;
                    return Ok(WriteOutcome::InFlight);
                }
            },
            None => match self.reserve(block, owner, Access::Write, policy)? {
                Reserved::Slot(slot) => {
                    self.counters.misses += 1;
                    if bytes.len() != BLOCK_SIZE {
                        return Ok(WriteOutcome::Read(Slot(slot)));
                    }
                    self.meta[slot as usize].state = State::Valid;
                    slot
                }
                Reserved::WriteBackFirst(slot) => {
                    return Ok(WriteOutcome::WriteBackFirst { slot: Slot(slot), block: self.meta[slot as usize].block });
                }
                Reserved::Skipped => return Err(CacheError::NoBuffer),
            },
        };
        self.buffer_mut(Slot(slot))?[offset..end].copy_from_slice(bytes);
        self.set_dirty(slot, true);
        Ok(WriteOutcome::Written { slot: Slot(slot), pressure: self.under_pressure() })
    }

    /// Writes a whole block ([`Cache::write`] at offset 0; never needs a read).
    ///
    /// Errors: [`CacheError::NoBuffer`].
    pub fn put<P: Policy + ?Sized>(
        &mut self,
        block: u64,
        owner: Owner,
        data: &[u8; BLOCK_SIZE],
        policy: &mut P,
    ) -> Result<WriteOutcome, CacheError> {
        self.write(block, owner, 0, data, policy)
    }

    /// A miss nobody waits for (see [`PrefetchOutcome`]); counted as a prefetch. It may
    /// evict a clean block, never a dirty one.
    pub fn prefetch<P: Policy + ?Sized>(&mut self, block: u64, owner: Owner, policy: &mut P) -> PrefetchOutcome {
        if self.index.contains_key(&block) {
            return PrefetchOutcome::Resident;
        }
        match self.reserve(block, owner, Access::Prefetch, policy) {
            Ok(Reserved::Slot(slot)) => {
                self.counters.prefetches += 1;
                PrefetchOutcome::Read(Slot(slot))
            }
            Ok(Reserved::WriteBackFirst(_) | Reserved::Skipped) | Err(_) => PrefetchOutcome::Skipped,
        }
    }

    /// Ends the read into `slot`: with `Ok` the data is valid; with `Err` the buffer is
    /// freed and the block leaves the cache (counted), so the next lookup reads again.
    ///
    /// Errors: [`CacheError::BadSlot`], [`CacheError::WrongState`] (not reading).
    pub fn complete_read<E>(&mut self, slot: Slot, result: Result<(), E>) -> Result<(), CacheError> {
        let index = self.slot(slot)?;
        if self.meta[index].state != State::Reading {
            return Err(CacheError::WrongState { slot });
        }
        let index = index as u32;
        if result.is_err() {
            self.counters.read_errors += 1;
            if !self.meta[index as usize].doomed {
                self.remove(index);
            }
            self.release(index);
        } else if self.meta[index as usize].doomed {
            self.release(index);
        } else {
            self.meta[index as usize].state = State::Valid;
        }
        Ok(())
    }

    /// Ends the write of `slot` (a write-back or a dirty victim): with `Ok` the block is
    /// clean; with `Err` it stays dirty and the error is counted.
    ///
    /// Errors: [`CacheError::BadSlot`], [`CacheError::WrongState`] (not writing).
    pub fn complete_write<E>(&mut self, slot: Slot, result: Result<(), E>) -> Result<(), CacheError> {
        let index = self.slot(slot)?;
        if self.meta[index].state != State::Writing {
            return Err(CacheError::WrongState { slot });
        }
        let index = index as u32;
        if result.is_ok() {
            self.counters.writebacks += 1;
            self.set_dirty(index, false);
        } else {
            self.counters.write_errors += 1;
        }
        let meta = &mut self.meta[index as usize];
        meta.state = State::Valid;
        if meta.doomed && meta.pins == 0 {
            self.release(index);
        }
        Ok(())
    }

    /// Pins `block` (counted: each pin needs an unpin): it is never evicted while pinned.
    /// Returns its buffer, which [`Cache::unpin`] takes.
    ///
    /// Errors: [`CacheError::NotResident`], [`CacheError::InFlight`] (still being read).
    pub fn pin(&mut self, block: u64) -> Result<Slot, CacheError> {
        let &slot = self.index.get(&block).ok_or(CacheError::NotResident { block })?;
        let meta = &mut self.meta[slot as usize];
        if meta.state == State::Reading {
            return Err(CacheError::InFlight { block });
        }
        meta.pins = meta.pins.saturating_add(1);
        Ok(Slot(slot))
    }

    /// Releases one pin of `slot` (from [`Cache::pin`]).
    ///
    /// Errors: [`CacheError::BadSlot`], [`CacheError::WrongState`] (not pinned).
    pub fn unpin(&mut self, slot: Slot) -> Result<(), CacheError> {
        let index = self.slot(slot)?;
        let meta = &mut self.meta[index];
        if meta.pins == 0 {
            return Err(CacheError::WrongState { slot });
        }
        meta.pins -= 1;
        if meta.pins == 0 && meta.doomed && meta.state == State::Valid {
            self.release(index as u32);
        }
        Ok(())
    }

    /// One write-back round: offers up to [`crate::policy::WRITEBACK_BATCH`] dirty blocks
    /// not already being written to `cache.Writeback` and marks the chosen ones writing.
    /// For [`WritebackReason::Sync`] the offered blocks are the first dirty ones at or
    /// after `from`, ascending (start at 0, continue at [`WritebackBatch::next`]); for
    /// [`WritebackReason::Pressure`] they are the dirty blocks nearest eviction (`from` is
    /// ignored), sorted ascending. The caller writes each run and completes each buffer.
    pub fn take_writeback<P: Policy + ?Sized>(&mut self, reason: WritebackReason, from: u64, policy: &mut P) -> WritebackBatch {
        let mut offered: Vec<(u64, u32)> = Vec::with_capacity(WRITEBACK_BATCH);
        let mut next = None;
        match reason {
            WritebackReason::Sync => {
                for (&block, &slot) in self.index.range(from..) {
                    if offered.len() == WRITEBACK_BATCH {
                        next = Some(block);
                        break;
                    }
                    if self.writable(slot) {
                        offered.push((block, slot));
                    }
                }
            }
            WritebackReason::Pressure => {
                'levels: for level in 0..LEVELS {
                    let mut slot = self.heads[level];
                    while slot != NIL {
                        if offered.len() == WRITEBACK_BATCH {
                            break 'levels;
                        }
                        if self.writable(slot) {
                            offered.push((self.meta[slot as usize].block, slot));
                        }
                        slot = self.meta[slot as usize].next;
                    }
                }
                offered.sort_unstable();
            }
        }
        if offered.is_empty() {
            return WritebackBatch { runs: Vec::new(), next };
        }
        let infos: Vec<BlockInfo> = offered.iter().map(|&(_, slot)| self.info(slot)).collect();
        let event = WritebackEvent {
            reason,
            dirty: self.dirty as u32,
            limit: self.dirty_limit() as u32,
            capacity: self.capacity() as u32,
            offered: offered.len() as u32,
        };
        let set = match policy.writeback(&event, &infos, self) {
            None => default_writeback(&event),
            Some(answer) => self.accept(check_writeback(answer, offered.len())).unwrap_or_else(|| default_writeback(&event)),
        };
        let chosen = offered.iter().enumerate().filter(|&(i, _)| set.mask & (1u64 << i) != 0).map(|(_, &pair)| pair);
        let chosen: Vec<(u64, u32)> = chosen.collect();
        for &(_, slot) in &chosen {
            self.meta[slot as usize].state = State::Writing;
        }
        WritebackBatch { runs: runs(&chosen), next }
    }

    /// The durability barrier (fsync, unmount): every dirty block not already being
    /// written, ascending, in runs of consecutive blocks, all marked writing. Does not ask
    /// `cache.Writeback`.
    pub fn take_all_dirty(&mut self) -> Vec<Run> {
        let chosen: Vec<(u64, u32)> =
            self.index.iter().filter(|&(_, &slot)| self.writable(slot)).map(|(&block, &slot)| (block, slot)).collect();
        for &(_, slot) in &chosen {
            self.meta[slot as usize].state = State::Writing;
        }
        runs(&chosen)
    }

    /// After an unlink or truncate of `file`: drops every clean block of the file and
    /// discards (without writing) its dirty blocks from file block `freed_from` on — the
    /// freed data (0 for an unlink). Dirty blocks below `freed_from` stay. A dropped block
    /// that is pinned or in flight leaves the cache at once; its buffer is freed when the
    /// pin is released or the I/O completes.
    pub fn invalidate_file(&mut self, file: FileId, freed_from: u64) -> Invalidated {
        let mut done = Invalidated::default();
        for slot in 0..self.meta.len() as u32 {
            let meta = self.meta[slot as usize];
            if meta.state == State::Free || meta.doomed || meta.owner.file != Some(file) {
                continue;
            }
            if meta.dirty {
                if meta.owner.file_block < freed_from {
                    continue;
                }
                done.discarded += 1;
                self.counters.discarded += 1;
            } else {
                done.dropped += 1;
            }
            self.remove(slot);
            let meta = &mut self.meta[slot as usize];
            if meta.state == State::Valid && meta.pins == 0 {
                self.release(slot);
            } else {
                meta.doomed = true;
            }
        }
        done
    }

    /// After a read of block `file_block` of `file` (a file of `file_blocks` blocks):
    /// updates the file's sequential-run detector, asks `cache.ReadAhead`, and returns the
    /// file blocks to prefetch (checked; the default if refused). The caller maps them to
    /// device blocks and calls [`Cache::prefetch`] for each.
    ///
    /// The default's clusters here are [`Config::read_ahead_cluster`] blocks: a caller that
    /// knows where the blocks lie (a cluster ends where the file's blocks stop being
    /// consecutive on the disk) uses [`Cache::read_ahead_event`] and
    /// [`Cache::decide_read_ahead`] instead.
    pub fn read_ahead<P: Policy + ?Sized>(&mut self, file: FileId, file_block: u64, file_blocks: u64, policy: &mut P) -> Prefetch {
        let event = self.read_ahead_event(file, file_block, file_blocks);
        let cluster = self.config.read_ahead_cluster;
        self.decide_read_ahead(&event, policy, |_| cluster)
    }

    /// The first half of [`Cache::read_ahead`]: updates the file's sequential-run detector
    /// for a read of `file_block` and returns the `cache.ReadAhead` event to decide.
    ///
    /// The detector: a read of the block after the previous one extends the run; a read of
    /// the same block leaves it; any other read starts a new run of 1.
    pub fn read_ahead_event(&mut self, file: FileId, file_block: u64, file_blocks: u64) -> ReadAheadEvent {
        self.stream_clock += 1;
        let index = self.stream(file);
        let next = file_block.saturating_add(1);
        let stream = &mut self.streams[index];
        if !stream.live {
            *stream = Stream { file, last: file_block, run: 1, ahead: next, used: self.stream_clock, live: true };
        } else {
            if stream.last.checked_add(1) == Some(file_block) {
                stream.run = stream.run.saturating_add(1);
            } else if stream.last != file_block {
                stream.run = 1;
                stream.ahead = next;
            }
            stream.ahead = stream.ahead.max(next);
            stream.last = file_block;
            stream.used = self.stream_clock;
        }
        ReadAheadEvent { file, file_block, file_blocks, run: stream.run, ahead: stream.ahead }
    }

    /// The second half of [`Cache::read_ahead`]: asks `policy` (`cache.ReadAhead`), checks
    /// its answer, falls back to [`default_read_ahead`] with clusters of `cluster(first)`
    /// blocks (called only when the default prefetches; at most
    /// [`Config::read_ahead_cluster`] and the prefetch cap are used), and moves the stream's
    /// `ahead` past what is prefetched.
    pub fn decide_read_ahead<P: Policy + ?Sized>(&mut self, event: &ReadAheadEvent, policy: &mut P, cluster: impl FnOnce(u64) -> u32) -> Prefetch {
        let cap = self.prefetch_cap();
        let largest = self.config.read_ahead_cluster.min(cap);
        let answer = match policy.read_ahead(event, self) {
            None => None,
            Some(answer) => self.accept(check_prefetch(answer, event.file_blocks, cap)),
        };
        let answer = answer.unwrap_or_else(|| default_read_ahead(event, |first| cluster(first).clamp(1, largest)));
        let index = self.stream(event.file);
        let stream = &mut self.streams[index];
        let end = answer.first + u64::from(answer.count);
        if stream.live && stream.file == event.file && answer.count > 0 && answer.first <= stream.ahead && end > stream.ahead {
            stream.ahead = end;
        }
        answer
    }

    // --- internals -------------------------------------------------------------------

    fn slot(&self, slot: Slot) -> Result<usize, CacheError> {
        if slot.index() < self.meta.len() { Ok(slot.index()) } else { Err(CacheError::BadSlot { slot }) }
    }

    fn accept<T>(&mut self, checked: Result<T, Rejection>) -> Option<T> {
        match checked {
            Ok(answer) => Some(answer),
            Err(rejection) => {
                self.counters.rejections[rejection.event().index()] += 1;
                None
            }
        }
    }

    fn evictable(&self, slot: u32) -> bool {
        let meta = &self.meta[slot as usize];
        meta.state == State::Valid && meta.pins == 0 && !meta.doomed
    }

    fn writable(&self, slot: u32) -> bool {
        let meta = &self.meta[slot as usize];
        meta.dirty && meta.state == State::Valid
    }

    fn info(&self, slot: u32) -> BlockInfo {
        let meta = &self.meta[slot as usize];
        BlockInfo {
            block: meta.block,
            file: meta.owner.file,
            file_block: meta.owner.file_block,
            dirty: meta.dirty,
            pinned: meta.pins > 0,
            references: meta.references,
            age: self.clock - meta.last_use,
            level: meta.level,
        }
    }

    fn stream(&self, file: FileId) -> usize {
        if let Some(index) = self.streams.iter().position(|stream| stream.live && stream.file == file) {
            return index;
        }
        if let Some(index) = self.streams.iter().position(|stream| !stream.live) {
            return index;
        }
        let mut oldest = 0;
        for (index, stream) in self.streams.iter().enumerate() {
            if stream.used < self.streams[oldest].used {
                oldest = index;
            }
        }
        oldest
    }

    fn hit<P: Policy + ?Sized>(&mut self, slot: u32, owner: Owner, access: Access, policy: &mut P) {
        self.counters.hits += 1;
        let meta = &mut self.meta[slot as usize];
        if meta.prefetched {
            meta.prefetched = false;
            self.counters.prefetch_hits += 1;
        }
        meta.references = meta.references.saturating_add(1);
        if owner.file.is_some() && owner != meta.owner {
            let (old, dirty) = (meta.owner.file, meta.dirty);
            meta.owner = owner;
            self.file_remove(old, dirty);
            self.file_add(owner.file, dirty);
        }
        self.clock += 1;
        self.meta[slot as usize].last_use = self.clock;
        self.enqueue(slot, access, false, policy);
    }

    /// Finds a buffer for `block`: a free one, or an eviction victim.
    fn reserve<P: Policy + ?Sized>(&mut self, block: u64, owner: Owner, access: Access, policy: &mut P) -> Result<Reserved, CacheError> {
        let prefetch = access == Access::Prefetch;
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let mut candidates = [BlockInfo::default(); EVICT_CANDIDATES];
                let count = self.next_victims(&mut candidates);
                if count == 0 {
                    return Err(CacheError::NoBuffer);
                }
                let candidates = &candidates[..count];
                let event = EvictEvent { block, file: owner.file, file_block: owner.file_block, prefetch, candidates: count as u32 };
                let mut victim = candidates[0].block;
                if let Some(answer) = policy.evict(&event, candidates, self) {
                    let state = self.index.get(&answer.block).map(|&slot| {
                        let meta = &self.meta[slot as usize];
                        VictimState { pinned: meta.pins > 0, in_flight: meta.state != State::Valid, file: meta.owner.file }
                    });
                    let checked = check_victim(answer, candidates, policy.scope(), state);
                    if let Some(answer) = self.accept(checked) {
                        victim = answer.block;
                    }
                }
                let Some(&slot) = self.index.get(&victim) else { return Err(CacheError::NoBuffer) };
                if self.meta[slot as usize].dirty {
                    if prefetch {
                        return Ok(Reserved::Skipped);
                    }
                    self.meta[slot as usize].state = State::Writing;
                    return Ok(Reserved::WriteBackFirst(slot));
                }
                self.remove(slot);
                self.counters.evictions += 1;
                slot
            }
        };
        self.clock += 1;
        self.meta[slot as usize] =
            Meta { block, owner, state: State::Reading, prefetched: prefetch, references: 1, last_use: self.clock, ..Meta::FREE };
        self.index.insert(block, slot);
        self.file_add(owner.file, false);
        self.enqueue(slot, access, true, policy);
        Ok(Reserved::Slot(slot))
    }

    /// Asks `cache.Enqueue` and moves the buffer where the (checked) answer says.
    fn enqueue<P: Policy + ?Sized>(&mut self, slot: u32, access: Access, first: bool, policy: &mut P) {
        let event = EnqueueEvent { info: self.info(slot), access, first };
        let placement = match policy.enqueue(&event, self) {
            None => default_placement(&event),
            Some(answer) => self.accept(check_placement(answer)).unwrap_or_else(|| default_placement(&event)),
        };
        let Placement { place, level } = placement;
        match place {
            Place::Keep if !first => {}
            Place::Keep | Place::Mru => {
                self.unlink(slot);
                self.link(slot, level, true);
            }
            Place::Lru => {
                self.unlink(slot);
                self.link(slot, level, false);
            }
        }
    }

    fn unlink(&mut self, slot: u32) {
        let Meta { linked, prev, next, level, .. } = self.meta[slot as usize];
        if !linked {
            return;
        }
        let level = usize::from(level);
        if prev == NIL {
            self.heads[level] = next;
        } else {
            self.meta[prev as usize].next = next;
        }
        if next == NIL {
            self.tails[level] = prev;
        } else {
            self.meta[next as usize].prev = prev;
        }
        let meta = &mut self.meta[slot as usize];
        meta.linked = false;
        meta.prev = NIL;
        meta.next = NIL;
    }

    /// Links an unlinked buffer at the MRU end (`mru`) or the LRU end of queue `level`.
    fn link(&mut self, slot: u32, level: u8, mru: bool) {
        let queue = usize::from(level);
        if mru {
            let tail = self.tails[queue];
            if tail == NIL {
                self.heads[queue] = slot;
            } else {
                self.meta[tail as usize].next = slot;
            }
            self.tails[queue] = slot;
            let meta = &mut self.meta[slot as usize];
            (meta.prev, meta.next) = (tail, NIL);
        } else {
            let head = self.heads[queue];
            if head == NIL {
                self.tails[queue] = slot;
            } else {
                self.meta[head as usize].prev = slot;
            }
            self.heads[queue] = slot;
            let meta = &mut self.meta[slot as usize];
            (meta.prev, meta.next) = (NIL, head);
        }
        let meta = &mut self.meta[slot as usize];
        meta.level = level;
        meta.linked = true;
    }

    fn set_dirty(&mut self, slot: u32, dirty: bool) {
        let meta = &mut self.meta[slot as usize];
        if meta.dirty == dirty {
            return;
        }
        meta.dirty = dirty;
        let (file, doomed) = (meta.owner.file, meta.doomed);
        if dirty {
            self.dirty += 1;
        } else {
            self.dirty -= 1;
        }
        if doomed {
            return;
        }
        if let Some(counts) = file.and_then(|file| self.files.get_mut(&file)) {
            if dirty {
                counts.dirty += 1;
            } else {
                counts.dirty -= 1;
            }
        }
    }

    fn file_add(&mut self, file: Option<FileId>, dirty: bool) {
        if let Some(file) = file {
            let counts = self.files.entry(file).or_default();
            counts.resident += 1;
            counts.dirty += u32::from(dirty);
        }
    }

    fn file_remove(&mut self, file: Option<FileId>, dirty: bool) {
        let Some(file) = file else { return };
        if let Some(counts) = self.files.get_mut(&file) {
            counts.resident -= 1;
            counts.dirty -= u32::from(dirty);
            if counts.resident == 0 {
                self.files.remove(&file);
            }
        }
    }

    /// Takes a buffer's block out of the map, the queues and the file counts (its data is
    /// dropped: any dirty data is discarded).
    fn remove(&mut self, slot: u32) {
        self.set_dirty(slot, false);
        let meta = self.meta[slot as usize];
        if meta.prefetched {
            self.counters.prefetch_unused += 1;
        }
        if self.index.get(&meta.block) == Some(&slot) {
            self.index.remove(&meta.block);
        }
        self.unlink(slot);
        self.file_remove(meta.owner.file, false);
    }

    fn release(&mut self, slot: u32) {
        self.meta[slot as usize] = Meta::FREE;
        self.free.push(slot);
    }

    /// Checks the internal invariants (tests).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        use alloc::collections::BTreeSet;
        let mut linked = BTreeSet::new();
        for level in 0..LEVELS {
            let (mut slot, mut prev) = (self.heads[level], NIL);
            while slot != NIL {
                let meta = &self.meta[slot as usize];
                assert!(meta.linked && usize::from(meta.level) == level && meta.prev == prev);
                assert!(linked.insert(slot), "slot {slot} linked twice");
                prev = slot;
                slot = meta.next;
            }
            assert_eq!(self.tails[level], prev);
        }
        let mut files: BTreeMap<FileId, FileCounts> = BTreeMap::new();
        let mut dirty = 0;
        for (&block, &slot) in &self.index {
            let meta = &self.meta[slot as usize];
            assert_eq!(meta.block, block);
            assert!(meta.state != State::Free && !meta.doomed);
            assert!(linked.contains(&slot));
            if let Some(file) = meta.owner.file {
                let counts = files.entry(file).or_default();
                counts.resident += 1;
                counts.dirty += u32::from(meta.dirty);
            }
            if meta.state == State::Reading {
                assert!(!meta.dirty && meta.pins == 0);
            }
        }
        assert_eq!(linked.len(), self.index.len());
        assert_eq!(files, self.files);
        for meta in &self.meta {
            dirty += usize::from(meta.dirty);
            if meta.doomed {
                assert!(!meta.dirty && !meta.linked);
            }
        }
        assert_eq!(dirty, self.dirty);
        let doomed = self.meta.iter().filter(|meta| meta.doomed).count();
        assert_eq!(self.free.len() + self.index.len() + doomed + self.retired.len(), self.capacity());
        for &slot in &self.free {
            assert_eq!(self.meta[slot as usize].state, State::Free);
            assert!(self.buffers[slot as usize].is_some(), "free slot {slot} has no buffer");
        }
        for &slot in &self.retired {
            assert_eq!(self.meta[slot as usize].state, State::Free);
            assert!(self.buffers[slot as usize].is_none(), "retired slot {slot} has a buffer");
            assert!(!self.free.contains(&slot));
        }
        for (&block, &slot) in &self.index {
            assert!(self.buffers[slot as usize].is_some(), "block {block} in slot {slot} without a buffer");
        }
    }
}

/// Groups ascending `(block, slot)` pairs into runs of consecutive blocks.
fn runs(pairs: &[(u64, u32)]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for &(block, slot) in pairs {
        match out.last_mut() {
            Some(run) if run.start + run.slots.len() as u64 == block => run.slots.push(Slot(slot)),
            _ => out.push(Run { start: block, slots: vec![Slot(slot)] }),
        }
    }
    out
}

impl WritebackSet {
    /// Whether the `index`-th offered block is selected.
    pub fn contains(self, index: usize) -> bool {
        index < 64 && self.mask & (1u64 << index) != 0
    }
}
