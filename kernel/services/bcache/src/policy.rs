//! The four decision points of the cache (Seltzer et al.'s buffer-manager interface), the
//! records they exchange, the checks on every answer, the default answers and the
//! reference policies the project ships as extensions.
//!
//! # The events
//!
//! | Event             | Seltzer       | Asked when                                   | Answer        |
//! |-------------------|---------------|----------------------------------------------|---------------|
//! | `cache.Enqueue`   | enqueue       | a block enters the cache or is referenced    | [`Placement`] |
//! | `cache.Evict`     | evict         | a buffer is needed and none is free          | [`Victim`]    |
//! | `cache.Writeback` | synchronize   | a sync round, or dirty buffers above a limit | [`WritebackSet`] |
//! | `cache.ReadAhead` | preallocate   | after a read of a file block                 | [`Prefetch`]  |
//!
//! Every method of [`Policy`] may answer `None`: no answer (no extension attached), and the
//! default decides. An answer is checked by a pure function ([`check_placement`],
//! [`check_victim`], [`check_writeback`], [`check_prefetch`]); a refused answer is
//! counted ([`crate::Counters::rejections`]) and the default decides instead.
//!
//! # Eviction order
//!
//! Resident buffers sit on [`LEVELS`] queues. Each queue is ordered from its LRU end (evicted
//! first) to its MRU end. The eviction order is queue 0 from its LRU end to its MRU end, then
//! queue 1, and so on: a higher level is kept longer. The default places every referenced
//! block at the MRU end of queue 0, which makes the cache pure LRU. The `cache.Enqueue`
//! answer changes where a block goes (see [`Placement`]); this is how MRU (reference at the
//! LRU end), FIFO ([`Place::Keep`]), LFU (levels by frequency) and PinRange (the range on a
//! higher level) are expressed. The `cache.Evict` answer then picks one of the first
//! [`EVICT_CANDIDATES`] evictable buffers in this order.
//!
//! All records are small `Copy` data, so that the kernel can turn them into `#[repr(C)]`
//! event records; [`encode_file`] and [`decode_file`] map `Option<FileId>` to one `u32`.

use core::fmt;

use crate::FileId;
use crate::cache::Cache;

/// Number of eviction queues (levels 0 to 3).
pub const LEVELS: usize = 4;

/// How many buffers `cache.Evict` is offered at most: the first evictable buffers in
/// eviction order.
pub const EVICT_CANDIDATES: usize = 8;

/// How many dirty blocks `cache.Writeback` is offered at most (the answer is a bit mask).
pub const WRITEBACK_BATCH: usize = 64;

/// The `u32` that stands for "no file" in an event record ([`encode_file`]).
pub const NO_FILE: u32 = u32::MAX;

/// `Option<FileId>` as one `u32` for an event record: `None` is [`NO_FILE`].
pub fn encode_file(file: Option<FileId>) -> u32 {
    file.unwrap_or(NO_FILE)
}

/// The inverse of [`encode_file`].
pub fn decode_file(raw: u32) -> Option<FileId> {
    if raw == NO_FILE { None } else { Some(raw) }
}

/// The four events, for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `cache.Enqueue`.
    Enqueue,
    /// `cache.Evict`.
    Evict,
    /// `cache.Writeback`.
    Writeback,
    /// `cache.ReadAhead`.
    ReadAhead,
}

impl Event {
    /// Every event, in the order of [`crate::Counters::rejections`].
    pub const ALL: [Event; 4] = [Event::Enqueue, Event::Evict, Event::Writeback, Event::ReadAhead];

    /// The event's name as the kernel raises it.
    pub fn name(self) -> &'static str {
        match self {
            Event::Enqueue => "cache.Enqueue",
            Event::Evict => "cache.Evict",
            Event::Writeback => "cache.Writeback",
            Event::ReadAhead => "cache.ReadAhead",
        }
    }

    /// Index into per-event counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a buffer holds and how it has been used, as offered to `cache.Evict` and
/// `cache.Writeback` and exported as the victim list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockInfo {
    /// Device block number.
    pub block: u64,
    /// The owner file, if any.
    pub file: Option<FileId>,
    /// Block index inside the owner file (0 without an owner).
    pub file_block: u64,
    /// Holds data not yet on the device.
    pub dirty: bool,
    /// Pinned (never evicted; may still be written back).
    pub pinned: bool,
    /// References since the block entered the cache (at least 1; saturates).
    pub references: u32,
    /// References to any block since this one was last referenced (0: the latest).
    pub age: u64,
    /// Its eviction queue (0 to [`LEVELS`] - 1).
    pub level: u8,
}

/// Why a block is referenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A read (or lookup) by a caller.
    Read,
    /// A write by a caller.
    Write,
    /// A prefetch nobody waits for.
    Prefetch,
}

/// Arguments of `cache.Enqueue`: a block enters the cache or is referenced again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnqueueEvent {
    /// The block and its state after this reference (`references` counts it, `age` is 0).
    pub info: BlockInfo,
    /// The kind of reference.
    pub access: Access,
    /// Whether the block just entered the cache (else it was resident).
    pub first: bool,
}

/// Where a referenced block goes in its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The MRU end of the queue: evicted last within its level.
    Mru,
    /// The LRU end of the queue: evicted first within its level.
    Lru,
    /// No move; `level` is ignored. For a block entering the cache it means [`Place::Mru`]
    /// on `level` (FIFO: a block keeps its place from its first reference).
    Keep,
}

/// Answer to `cache.Enqueue`: where the block goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Which end of the queue.
    pub place: Place,
    /// Which queue: 0 to [`LEVELS`] - 1; higher levels are evicted later.
    pub level: u8,
}

impl Placement {
    /// The default: MRU end of queue 0 (LRU replacement).
    pub const DEFAULT: Placement = Placement { place: Place::Mru, level: 0 };
}

/// Arguments of `cache.Evict`: a buffer is needed for `block` and none is free. The
/// candidates (the first evictable buffers in eviction order, at most
/// [`EVICT_CANDIDATES`]) are passed alongside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictEvent {
    /// The block that needs a buffer.
    pub block: u64,
    /// Its owner file.
    pub file: Option<FileId>,
    /// Its block index in that file.
    pub file_block: u64,
    /// Whether the buffer is for a prefetch (a dirty victim is then not written back: the
    /// prefetch is skipped instead).
    pub prefetch: bool,
    /// How many candidates are offered (at least 1).
    pub candidates: u32,
}

/// Answer to `cache.Evict`: the block to evict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    /// A candidate's block, or (for a policy with a file, [`Policy::scope`]) any evictable
    /// block of that file.
    pub block: u64,
}

/// Why `cache.Writeback` is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritebackReason {
    /// A sync round (the periodic update, or an explicit request): dirty blocks offered in
    /// ascending block order from a cursor. A durability barrier (fsync, unmount) does not
    /// ask: it writes everything ([`crate::Cache::take_all_dirty`]).
    Sync,
    /// More dirty buffers than the configured limit: the dirty blocks nearest eviction are
    /// offered (in ascending block order).
    Pressure,
}

/// Arguments of `cache.Writeback`. The offered dirty blocks (at most [`WRITEBACK_BATCH`],
/// ascending block order, none of them already being written) are passed alongside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WritebackEvent {
    /// Why.
    pub reason: WritebackReason,
    /// Dirty buffers in the cache.
    pub dirty: u32,
    /// The dirty count above which the cache is under pressure.
    pub limit: u32,
    /// Buffers in the cache.
    pub capacity: u32,
    /// How many blocks are offered (at least 1).
    pub offered: u32,
}

/// Answer to `cache.Writeback`: bit `i` set = write the `i`-th offered block now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WritebackSet {
    /// The selection.
    pub mask: u64,
}

impl WritebackSet {
    /// Every one of `offered` blocks.
    pub fn all(offered: usize) -> WritebackSet {
        WritebackSet { mask: mask_of(offered) }
    }
}

fn mask_of(offered: usize) -> u64 {
    if offered >= 64 { u64::MAX } else { (1u64 << offered) - 1 }
}

/// Arguments of `cache.ReadAhead`: a caller read block `file_block` of a file of
/// `file_blocks` blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadAheadEvent {
    /// The file.
    pub file: FileId,
    /// The block read.
    pub file_block: u64,
    /// Blocks in the file.
    pub file_blocks: u64,
    /// Length of the sequential run this read belongs to (1: not sequential — the first
    /// read of the stream, or a jump).
    pub run: u32,
    /// The first file block of this stream not yet prefetched (`file_block + 1` when
    /// nothing beyond the read is).
    pub ahead: u64,
}

/// Answer to `cache.ReadAhead`: prefetch file blocks `first .. first + count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefetch {
    /// The first file block.
    pub first: u64,
    /// How many (0: none).
    pub count: u32,
}

impl Prefetch {
    /// Nothing.
    pub const NONE: Prefetch = Prefetch { first: 0, count: 0 };
}

/// The decision points. The kernel implements this by raising the `cache.*` events; the
/// host uses the reference policies below. Every method defaults to `None` (no answer: the
/// default decides).
pub trait Policy {
    /// The file this policy is for, if it is per file: `cache.Evict` may then also name any
    /// evictable block of that file.
    fn scope(&self) -> Option<FileId> {
        None
    }

    /// `cache.Enqueue`: where a referenced block goes. `cache` (here and below) is the cache
    /// asking, consistent and unchanged until the method returns: a policy that exports
    /// the cache's state to its handlers (the kernel's: the victim list, Infokernel-style)
    /// reads it then, when someone may look, instead of copying it after every operation.
    fn enqueue(&mut self, event: &EnqueueEvent, cache: &Cache) -> Option<Placement> {
        let _ = (event, cache);
        None
    }

    /// `cache.Evict`: which buffer to give up (`candidates` in eviction order).
    fn evict(&mut self, event: &EvictEvent, candidates: &[BlockInfo], cache: &Cache) -> Option<Victim> {
        let _ = (event, candidates, cache);
        None
    }

    /// `cache.Writeback`: which offered dirty blocks to write now.
    fn writeback(&mut self, event: &WritebackEvent, offered: &[BlockInfo], cache: &Cache) -> Option<WritebackSet> {
        let _ = (event, offered, cache);
        None
    }

    /// `cache.ReadAhead`: which file blocks to prefetch after a read.
    fn read_ahead(&mut self, event: &ReadAheadEvent, cache: &Cache) -> Option<Prefetch> {
        let _ = (event, cache);
        None
    }
}

/// Why an answer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// `cache.Enqueue`: the level is not below [`LEVELS`].
    LevelOutOfRange,
    /// `cache.Evict`: the block is not in the cache.
    VictimNotResident,
    /// `cache.Evict`: the block is pinned.
    VictimPinned,
    /// `cache.Evict`: the block is being read or written.
    VictimInFlight,
    /// `cache.Evict`: the block is neither a candidate nor a block of the policy's file.
    VictimNotCandidate,
    /// `cache.Writeback`: the mask selects a block beyond the offered ones (an unknown or
    /// clean block).
    NotOffered,
    /// `cache.ReadAhead`: the range reaches past the end of the file.
    OutsideFile,
    /// `cache.ReadAhead`: more blocks than the cache's prefetch cap.
    TooMany,
}

impl Rejection {
    /// The event whose answer this refuses.
    pub fn event(self) -> Event {
        match self {
            Rejection::LevelOutOfRange => Event::Enqueue,
            Rejection::VictimNotResident | Rejection::VictimPinned | Rejection::VictimInFlight | Rejection::VictimNotCandidate => {
                Event::Evict
            }
            Rejection::NotOffered => Event::Writeback,
            Rejection::OutsideFile | Rejection::TooMany => Event::ReadAhead,
        }
    }

    /// The reason as the dispatcher records it.
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::LevelOutOfRange => "the placement names a queue level that does not exist",
            Rejection::VictimNotResident => "the victim is not in the cache",
            Rejection::VictimPinned => "the victim is pinned",
            Rejection::VictimInFlight => "the victim is being read or written",
            Rejection::VictimNotCandidate => "the victim is neither a candidate nor a block of the policy's file",
            Rejection::NotOffered => "the write-back selects a block that was not offered",
            Rejection::OutsideFile => "the prefetch reaches past the end of the file",
            Rejection::TooMany => "the prefetch asks for more blocks than the cap",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} answer refused: {}", self.event().name(), self.reason())
    }
}

impl core::error::Error for Rejection {}

/// The state of a block named as a victim, as the cache sees it (`None` in
/// [`check_victim`]: not resident).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VictimState {
    /// Pinned.
    pub pinned: bool,
    /// Being read or written.
    pub in_flight: bool,
    /// Its owner file.
    pub file: Option<FileId>,
}

/// Checks a `cache.Enqueue` answer.
///
/// Errors: [`Rejection::LevelOutOfRange`] (also for [`Place::Keep`], whose level applies to
/// a block entering the cache).
pub fn check_placement(answer: Placement) -> Result<Placement, Rejection> {
    if usize::from(answer.level) < LEVELS { Ok(answer) } else { Err(Rejection::LevelOutOfRange) }
}

/// Checks a `cache.Evict` answer: the block must be resident (`state` is what the cache
/// knows of it), neither pinned nor in flight, and among `candidates` or owned by the
/// policy's file `scope`.
///
/// Errors, in this order: [`Rejection::VictimNotResident`], [`Rejection::VictimInFlight`],
/// [`Rejection::VictimPinned`], [`Rejection::VictimNotCandidate`].
pub fn check_victim(
    answer: Victim,
    candidates: &[BlockInfo],
    scope: Option<FileId>,
    state: Option<VictimState>,
) -> Result<Victim, Rejection> {
    let state = state.ok_or(Rejection::VictimNotResident)?;
    if state.in_flight {
        return Err(Rejection::VictimInFlight);
    }
    if state.pinned {
        return Err(Rejection::VictimPinned);
    }
    let offered = candidates.iter().any(|candidate| candidate.block == answer.block);
    let own = scope.is_some() && state.file == scope;
    if offered || own { Ok(answer) } else { Err(Rejection::VictimNotCandidate) }
}

/// Checks a `cache.Writeback` answer against `offered` blocks.
///
/// Errors: [`Rejection::NotOffered`].
pub fn check_writeback(answer: WritebackSet, offered: usize) -> Result<WritebackSet, Rejection> {
    if answer.mask & !mask_of(offered) == 0 { Ok(answer) } else { Err(Rejection::NotOffered) }
}

/// Checks a `cache.ReadAhead` answer for a file of `file_blocks` blocks and a cap of `cap`
/// blocks. A count of 0 is always valid.
///
/// Errors: [`Rejection::TooMany`], [`Rejection::OutsideFile`].
pub fn check_prefetch(answer: Prefetch, file_blocks: u64, cap: u32) -> Result<Prefetch, Rejection> {
    if answer.count == 0 {
        return Ok(answer);
    }
    if answer.count > cap {
        return Err(Rejection::TooMany);
    }
    match answer.first.checked_add(u64::from(answer.count)) {
        Some(end) if end <= file_blocks => Ok(answer),
        _ => Err(Rejection::OutsideFile),
    }
}

/// The default `cache.Enqueue` answer: [`Placement::DEFAULT`] for every reference.
pub fn default_placement(event: &EnqueueEvent) -> Placement {
    let _ = event;
    Placement::DEFAULT
}

/// The default `cache.Evict` answer: the first candidate (the least recently used buffer
/// of the lowest level).
pub fn default_victim(candidates: &[BlockInfo]) -> Option<Victim> {
    candidates.first().map(|candidate| Victim { block: candidate.block })
}

/// The default `cache.Writeback` answer: every offered block (on a sync round and under
/// pressure alike).
pub fn default_writeback(event: &WritebackEvent) -> WritebackSet {
    WritebackSet::all(event.offered as usize)
}

/// The default `cache.ReadAhead` answer — the classic clustered sequential read-ahead of
/// BSD/OS's FFS as Seltzer '95 §4.3 describes it: "when the file system receives a read
/// request for a block, it determines whether the subsequent block of the file is already
/// in the file system cache. If it is not, the file system issues a request for the entire
/// cluster containing that block."
///
/// 1. no sequential run (`run < 2`): nothing (random access and the first read of a
///    stream prefetch nothing);
/// 2. the block after the one read (`file_block + 1`) was asked for already
///    (`ahead > file_block + 1`) or lies past the end of the file: nothing;
/// 3. otherwise the cluster that begins at that block: `cluster(file_block + 1)` blocks
///    (the caller's count of blocks stored physically one after the other from there, at
///    most its largest cluster), clipped at the end of the file.
///
/// `cluster` is called only in case 3 (it may have to look the file's layout up). A reader
/// whose read spans the end of a cluster therefore waits for the disk — the behaviour the
/// paper's application-controlled read-ahead improves on.
pub fn default_read_ahead(event: &ReadAheadEvent, cluster: impl FnOnce(u64) -> u32) -> Prefetch {
    if !default_reads_ahead(event) {
        return Prefetch::NONE;
    }
    let next = event.file_block + 1;
    let count = u64::from(cluster(next)).min(event.file_blocks - next);
    Prefetch { first: next, count: count as u32 }
}

/// Whether [`default_read_ahead`] prefetches after this read (cases 1 and 2 of its rule
/// do not hold): the caller then has to say how long the cluster is.
pub fn default_reads_ahead(event: &ReadAheadEvent) -> bool {
    let next = event.file_block.saturating_add(1);
    event.run >= 2 && event.ahead <= next && next < event.file_blocks
}

// ---------------------------------------------------------------------------------------
// Reference policies: the answers the kernel's tests compare extensions with.
// ---------------------------------------------------------------------------------------

/// MRU `cache.Enqueue`: every referenced block goes to the LRU end of queue 0, so the most
/// recently used block is the next victim.
pub fn mru_placement(event: &EnqueueEvent) -> Placement {
    let _ = event;
    Placement { place: Place::Lru, level: 0 }
}

/// MRU `cache.Evict`: the candidate referenced most recently (smallest age); ties to the
/// earlier candidate.
pub fn mru_victim(candidates: &[BlockInfo]) -> Option<Victim> {
    let mut best: Option<&BlockInfo> = None;
    for candidate in candidates {
        if best.is_none_or(|best| candidate.age < best.age) {
            best = Some(candidate);
        }
    }
    best.map(|candidate| Victim { block: candidate.block })
}

/// LFU `cache.Enqueue`: MRU end of the level given by the reference count — level 0 for 1
/// reference, 1 for 2–3, 2 for 4–7, 3 for 8 or more (frequently used blocks are evicted
/// later; within a level, LRU).
pub fn lfu_placement(event: &EnqueueEvent) -> Placement {
    let references = event.info.references.max(1);
    let level = (31 - references.leading_zeros()).min(LEVELS as u32 - 1);
    Placement { place: Place::Mru, level: level as u8 }
}

/// LFU `cache.Evict`: the candidate with the fewest references; ties to the earlier
/// candidate (the less recently used).
pub fn lfu_victim(candidates: &[BlockInfo]) -> Option<Victim> {
    let mut best: Option<&BlockInfo> = None;
    for candidate in candidates {
        if best.is_none_or(|best| candidate.references < best.references) {
            best = Some(candidate);
        }
    }
    best.map(|candidate| Victim { block: candidate.block })
}

/// A file range kept resident (Arpaci-Dusseau et al.'s PinRange): file blocks
/// `first .. end` of `file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// The file.
    pub file: FileId,
    /// First file block of the range.
    pub first: u64,
    /// One past the last file block.
    pub end: u64,
}

impl Range {
    /// Whether `info` is a block of the range.
    pub fn contains(&self, file: Option<FileId>, file_block: u64) -> bool {
        file == Some(self.file) && (self.first..self.end).contains(&file_block)
    }
}

/// PinRange `cache.Enqueue`: blocks of the range at the MRU end of level 1, others at the
/// default place (so the range is evicted only when nothing else is evictable).
pub fn pin_range_placement(range: &Range, event: &EnqueueEvent) -> Placement {
    if range.contains(event.info.file, event.info.file_block) { Placement { place: Place::Mru, level: 1 } } else { Placement::DEFAULT }
}

/// PinRange `cache.Evict`: the first candidate outside the range; only if every candidate
/// is inside it, the first candidate.
pub fn pin_range_victim(range: &Range, candidates: &[BlockInfo]) -> Option<Victim> {
    candidates
        .iter()
        .find(|candidate| !range.contains(candidate.file, candidate.file_block))
        .or(candidates.first())
        .map(|candidate| Victim { block: candidate.block })
}

/// Application-set read-ahead (Seltzer §4.3): `count` blocks after every read, whether
/// sequential or not, without asking again for blocks this stream already prefetched:
/// from `max(file_block + 1, ahead)` up to `min(file_block + 1 + count, file_blocks)`.
/// A count of 0 turns read-ahead off.
pub fn app_read_ahead(count: u32, event: &ReadAheadEvent) -> Prefetch {
    let next = event.file_block.saturating_add(1);
    let start = next.max(event.ahead);
    let end = next.saturating_add(u64::from(count)).min(event.file_blocks);
    if start >= end { Prefetch::NONE } else { Prefetch { first: start, count: (end - start) as u32 } }
}

/// No answers: every decision is the default (LRU, write everything, clustered sequential
/// read-ahead).
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultPolicy;

impl Policy for DefaultPolicy {}

/// MRU replacement ([`mru_placement`], [`mru_victim`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mru;

impl Policy for Mru {
    fn enqueue(&mut self, event: &EnqueueEvent, _cache: &Cache) -> Option<Placement> {
        Some(mru_placement(event))
    }

    fn evict(&mut self, _event: &EvictEvent, candidates: &[BlockInfo], _cache: &Cache) -> Option<Victim> {
        mru_victim(candidates)
    }
}

/// LFU replacement ([`lfu_placement`], [`lfu_victim`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Lfu;

impl Policy for Lfu {
    fn enqueue(&mut self, event: &EnqueueEvent, _cache: &Cache) -> Option<Placement> {
        Some(lfu_placement(event))
    }

    fn evict(&mut self, _event: &EvictEvent, candidates: &[BlockInfo], _cache: &Cache) -> Option<Victim> {
        lfu_victim(candidates)
    }
}

/// PinRange replacement for one file ([`pin_range_placement`], [`pin_range_victim`]).
#[derive(Clone, Copy, Debug)]
pub struct PinRange {
    /// The range kept resident.
    pub range: Range,
}

impl Policy for PinRange {
    fn scope(&self) -> Option<FileId> {
        Some(self.range.file)
    }

    fn enqueue(&mut self, event: &EnqueueEvent, _cache: &Cache) -> Option<Placement> {
        Some(pin_range_placement(&self.range, event))
    }

    fn evict(&mut self, _event: &EvictEvent, candidates: &[BlockInfo], _cache: &Cache) -> Option<Victim> {
        pin_range_victim(&self.range, candidates)
    }
}

/// Application-set read-ahead of a fixed count ([`app_read_ahead`]); replacement is the
/// default.
#[derive(Clone, Copy, Debug)]
pub struct AppReadAhead {
    /// Blocks to prefetch after each read.
    pub count: u32,
}

impl Policy for AppReadAhead {
    fn read_ahead(&mut self, event: &ReadAheadEvent, _cache: &Cache) -> Option<Prefetch> {
        Some(app_read_ahead(self.count, event))
    }
}
