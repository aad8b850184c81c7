//! The block path's events — stream filters on reads and logical-disk placement of
//! writes — and their primary module, standing in for the block I/O service.
//!
//! There is no block service over virtio-blk yet, so this module plays its part with
//! in-memory state, enough for Small & Seltzer's stream and black-box grafts:
//!
//! - **Reads** ([`read_through_filters`]): a read request over the in-memory *file* (1 MiB
//!   of the `md5` workload's deterministic bytes, [`file`]) is given an id, made *active*,
//!   and passed block by block (4 KiB) through `block.ReadFilter`; handlers copy the
//!   block's bytes into their own memory with the `block` domain's `spindle_block_read`,
//!   which ends in [`copy_block`] (only the active request, only inside it). Then
//!   `block.ReadDone` asks for the digest. Validation: a filter may consume at most the
//!   block's length; a digest must name the request and cover exactly its bytes (or be no
//!   digest).
//! - **Writes** ([`write`]): `block.Write { logical }` asks where a logical block goes on a
//!   1 GiB disk of 4 KiB blocks ([`DISK_BLOCKS`]). The module keeps a *shadow map* — the
//!   forward map logical → physical and the reverse map physical → logical of every
//!   accepted write, 1 MiB each — and validates every answer against it: the physical
//!   block must be inside the disk and must not hold another logical block's live data
//!   (the reverse map names a logical block whose forward entry still points there).
//!   A rejected answer counts in [`rejections`] and the default is used: in place
//!   (physical = logical) when that is free, else the write is refused
//!   ([`WriteError::NoSpace`]). [`verify_map`] then checks the logical disk's own map
//!   (`block.MapLookup`) against the shadow map: every logical block written maps to the
//!   physical block holding its latest write.
//!
//! Raised by the benchmarks (`bench::stream`, `bench::blackbox`), the in-kernel tests and
//! the `md5` and `logdisk` console commands. Known limits: one read request is active at a
//! time (a new one replaces it); the shadow map is allocated on the first
//! [`format`] and kept.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spindle_abi::event::{
    BLOCK_FORMAT, BLOCK_MAP_LOOKUP, BLOCK_READ_DONE, BLOCK_READ_FILTER, BLOCK_WRITE, BlockWrite, Digest, DiskFormat, FilterVerdict, MapLookup, Placement,
    ReadBlock, ReadDone,
};
use spindle_dispatch::{Authorization, Combiner, EventTable, InstallRequest, PrimaryModule, Refusal, ResultRejection};
use spin::Once;

/// Bytes per block.
pub const BLOCK_SIZE: u64 = ReadBlock::MAX_LENGTH;
/// Blocks on the simulated disk: 1 GiB of 4 KiB blocks (Small & Seltzer §5.6).
pub const DISK_BLOCKS: u64 = 262_144;
/// Blocks per log segment: 64 KiB.
pub const SEGMENT_BLOCKS: u64 = 16;
/// Bytes of the in-memory file reads go over (the `md5` workload: 1 MiB).
pub const FILE_BYTES: usize = md5::workload::BYTES;

static REJECTIONS: AtomicU64 = AtomicU64::new(0);

/// Answers of block-path handlers the primary module rejected since boot.
pub fn rejections() -> u64 {
    REJECTIONS.load(Ordering::Relaxed)
}

fn reject(reason: &'static str) -> Result<(), ResultRejection> {
    REJECTIONS.fetch_add(1, Ordering::Relaxed);
    Err(ResultRejection { reason })
}

// ---------------------------------------------------------------------------------------
// Reads.
// ---------------------------------------------------------------------------------------

static FILE: Once<Box<[u8]>> = Once::new();
/// The active read request (0: none) and its extent in [`file`].
static ACTIVE_REQUEST: AtomicU64 = AtomicU64::new(0);
static ACTIVE_START: AtomicU64 = AtomicU64::new(0);
static ACTIVE_LENGTH: AtomicU64 = AtomicU64::new(0);
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

/// The in-memory file: [`FILE_BYTES`] of `md5::workload` bytes, generated on first use.
pub fn file() -> &'static [u8] {
    FILE.call_once(|| {
        let mut bytes = alloc::vec![0u8; FILE_BYTES].into_boxed_slice();
        md5::workload::fill(0, &mut bytes);
        bytes
    })
}

/// Makes bytes `start..start + length` of [`file`] the active read request (clamped to
/// the file) and returns its new id.
pub fn begin_read(start: u64, length: u64) -> u64 {
    let size = file().len() as u64;
    let start = start.min(size);
    let request = NEXT_REQUEST.fetch_add(1, Ordering::Relaxed);
    ACTIVE_REQUEST.store(0, Ordering::Relaxed);
    ACTIVE_START.store(start, Ordering::Relaxed);
    ACTIVE_LENGTH.store(length.min(size - start), Ordering::Relaxed);
    ACTIVE_REQUEST.store(request, Ordering::Relaxed);
    request
}

/// Ends `request` (no effect if another request is active).
pub fn end_read(request: u64) {
    let _ = ACTIVE_REQUEST.compare_exchange(request, 0, Ordering::Relaxed, Ordering::Relaxed);
}

/// The kernel side of `spindle_block_read`: copies `destination.len()` bytes at `offset`
/// of the active request `request`; returns the bytes copied, 0 when `request` is not
/// active or the range is not inside it.
pub fn copy_block(request: u64, offset: u64, destination: &mut [u8]) -> u64 {
    if request == 0 || request != ACTIVE_REQUEST.load(Ordering::Relaxed) {
        return 0;
    }
    let length = destination.len() as u64;
    let within = offset.checked_add(length).is_some_and(|end| end <= ACTIVE_LENGTH.load(Ordering::Relaxed));
    let start = ACTIVE_START.load(Ordering::Relaxed) + offset;
    match file().get(start as usize..(start + length) as usize).filter(|_| within) {
        Some(source) => {
            destination.copy_from_slice(source);
            length
        }
        None => 0,
    }
}

/// What a read through the filters produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOutcome {
    /// The request's id.
    pub request: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Bytes the filters consumed, summed over the blocks.
    pub consumed: u64,
    /// The digest `block.ReadDone` answered, if any.
    pub digest: Option<[u8; 16]>,
}

/// Reads `length` bytes of [`file`] from `start` through the stream filters, block by
/// block, and asks for the digest.
pub fn read_through_filters(start: u64, length: u64) -> ReadOutcome {
    let request = begin_read(start, length);
    let bytes = ACTIVE_LENGTH.load(Ordering::Relaxed);
    let mut consumed = 0;
    if let Some(table) = READ_FILTER.get() {
        let mut offset = 0;
        while offset < bytes {
            let block = ReadBlock { request, offset, length: BLOCK_SIZE.min(bytes - offset) };
            consumed += super::raise(table, &block).consumed;
            offset += block.length;
        }
    }
    let digest = READ_DONE.get().map(|table| super::raise(table, &ReadDone { request, length: bytes })).filter(|digest| digest.request == request);
    end_read(request);
    ReadOutcome { request, bytes, consumed, digest: digest.map(|digest| digest.bytes()) }
}

/// The primary module of `block.ReadFilter`: default = consume nothing; a verdict past the
/// block's length is rejected.
pub struct ReadFilterService;

impl PrimaryModule<ReadBlock, FilterVerdict> for ReadFilterService {
    fn name(&self) -> &str {
        "block"
    }
    fn default_result(&self, _: &ReadBlock) -> FilterVerdict {
        FilterVerdict { consumed: 0 }
    }
    fn combiner(&self) -> Combiner<FilterVerdict> {
        Combiner::Last
    }
    fn authorize(&self, _: &InstallRequest<'_, ReadBlock>) -> Result<Authorization<ReadBlock>, Refusal> {
        Ok(Authorization::allow())
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &ReadBlock, result: &FilterVerdict) -> Result<(), ResultRejection> {
        if result.consumed <= args.length { Ok(()) } else { reject("a filter consumed more bytes than the block has") }
    }
}

/// The primary module of `block.ReadDone`: default = no digest; a digest must name the
/// request and cover all of its bytes.
pub struct ReadDoneService;

impl PrimaryModule<ReadDone, Digest> for ReadDoneService {
    fn name(&self) -> &str {
        "block"
    }
    fn default_result(&self, _: &ReadDone) -> Digest {
        Digest::default()
    }
    fn combiner(&self) -> Combiner<Digest> {
        Combiner::Last
    }
    fn authorize(&self, _: &InstallRequest<'_, ReadDone>) -> Result<Authorization<ReadDone>, Refusal> {
        Ok(Authorization::allow())
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &ReadDone, result: &Digest) -> Result<(), ResultRejection> {
        if *result == Digest::default() {
            Ok(())
        } else if result.request != args.request {
            reject("the digest names another request")
        } else if result.bytes != args.length {
            reject("the digest does not cover exactly the request's bytes")
        } else {
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------
// Writes.
// ---------------------------------------------------------------------------------------

/// The module's record of accepted writes: `physical + 1` per logical block and
/// `logical + 1` per physical block (0: none).
struct ShadowMap {
    forward: Box<[AtomicU32]>,
    reverse: Box<[AtomicU32]>,
}

static SHADOW: Once<ShadowMap> = Once::new();

fn shadow() -> &'static ShadowMap {
    SHADOW.call_once(|| {
        let entries = || (0..DISK_BLOCKS).map(|_| AtomicU32::new(0)).collect::<Vec<_>>().into_boxed_slice();
        ShadowMap { forward: entries(), reverse: entries() }
    })
}

impl ShadowMap {
    /// Where `logical` lives, if it was written.
    fn placed(&self, logical: u64) -> Option<u64> {
        match self.forward.get(logical as usize)?.load(Ordering::Relaxed) {
            0 => None,
            stored => Some(u64::from(stored) - 1),
        }
    }

    /// Whether `physical` holds the live data of a logical block other than `logical`.
    fn live_for_other(&self, physical: u64, logical: u64) -> bool {
        match self.reverse.get(physical as usize).map(|entry| entry.load(Ordering::Relaxed)) {
            Some(0) | None => false,
            Some(stored) => {
                let holder = u64::from(stored) - 1;
                holder != logical && self.placed(holder) == Some(physical)
            }
        }
    }

    /// Whether a write of `logical` may go to `physical`.
    fn admits(&self, logical: u64, physical: u64) -> bool {
        physical < DISK_BLOCKS && !self.live_for_other(physical, logical)
    }
}

/// Why a write was not placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The logical block is outside the disk.
    OutOfRange,
    /// No valid physical block: the logical disk's log is full (or its answer was rejected
    /// and the block's home holds another block's data).
    NoSpace,
}

static REFUSED_WRITES: AtomicU64 = AtomicU64::new(0);

/// Writes refused for lack of space since boot.
pub fn refused_writes() -> u64 {
    REFUSED_WRITES.load(Ordering::Relaxed)
}

/// Writes `logical`: raises `block.Write`, records the (validated) placement in the shadow
/// map and returns it.
#[inline]
pub fn write(logical: u64) -> Result<u64, WriteError> {
    if logical >= DISK_BLOCKS {
        return Err(WriteError::OutOfRange);
    }
    let map = shadow();
    let physical = match WRITE.get() {
        Some(table) => super::raise(table, &BlockWrite { logical }).physical,
        None => WriteService.default_result(&BlockWrite { logical }).physical,
    };
    // Every binding's answer was validated; the default is valid or NONE. Checked again
    // (two loads) so a bug elsewhere cannot index past the maps.
    if physical == Placement::NONE || !map.admits(logical, physical) {
        REFUSED_WRITES.fetch_add(1, Ordering::Relaxed);
        return Err(WriteError::NoSpace);
    }
    map.forward[logical as usize].store(physical as u32 + 1, Ordering::Relaxed);
    map.reverse[physical as usize].store(logical as u32 + 1, Ordering::Relaxed);
    Ok(physical)
}

/// Formats the disk: clears the shadow map and raises `block.Format` (the logical disk
/// resets its map and log).
pub fn format() {
    let map = shadow();
    for entry in map.forward.iter().chain(map.reverse.iter()) {
        entry.store(0, Ordering::Relaxed);
    }
    if let Some(table) = FORMAT.get() {
        super::raise(table, &DiskFormat { blocks: DISK_BLOCKS, segment_blocks: SEGMENT_BLOCKS });
    }
}

/// Where the logical disk says `logical` lives (`block.MapLookup`); `None` if unmapped.
pub fn look_up(logical: u64) -> Option<u64> {
    let physical = MAP_LOOKUP.get().map_or(Placement::NONE, |table| super::raise(table, &MapLookup { logical }).physical);
    (physical != Placement::NONE).then_some(physical)
}

/// A difference between the logical disk's map and the shadow map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapMismatch {
    /// The logical block.
    pub logical: u64,
    /// Where its latest write is (shadow map).
    pub expected: Option<u64>,
    /// What `block.MapLookup` answered.
    pub answered: Option<u64>,
}

/// Checks every logical block of the disk: the logical disk's map (`block.MapLookup`)
/// must name the physical block holding the block's latest accepted write, whose reverse
/// entry names the block back, and must not map blocks never written. Returns the number
/// of blocks mapped, or the first mismatch.
pub fn verify_map() -> Result<u64, MapMismatch> {
    verify_map_of(0..DISK_BLOCKS)
}

/// [`verify_map`] for the given logical blocks only (a test's sample).
pub fn verify_map_of(logicals: impl IntoIterator<Item = u64>) -> Result<u64, MapMismatch> {
    let map = shadow();
    let mut mapped = 0;
    for logical in logicals {
        if logical >= DISK_BLOCKS {
            continue;
        }
        let expected = map.placed(logical);
        let answered = look_up(logical);
        let holds_latest = expected.is_none_or(|physical| map.reverse[physical as usize].load(Ordering::Relaxed) == logical as u32 + 1);
        if answered != expected || !holds_latest {
            return Err(MapMismatch { logical, expected, answered });
        }
        mapped += u64::from(expected.is_some());
    }
    Ok(mapped)
}

/// The primary module of `block.Write`: default = in place if free, else no space;
/// answers are validated against the shadow map.
pub struct WriteService;

impl PrimaryModule<BlockWrite, Placement> for WriteService {
    fn name(&self) -> &str {
        "block"
    }
    fn default_result(&self, args: &BlockWrite) -> Placement {
        let in_place = shadow().admits(args.logical, args.logical);
        Placement { physical: if in_place { args.logical } else { Placement::NONE } }
    }
    fn combiner(&self) -> Combiner<Placement> {
        Combiner::Last
    }
    fn authorize(&self, _: &InstallRequest<'_, BlockWrite>) -> Result<Authorization<BlockWrite>, Refusal> {
        Ok(Authorization::allow())
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &BlockWrite, result: &Placement) -> Result<(), ResultRejection> {
        if result.physical == Placement::NONE {
            Ok(())
        } else if result.physical >= DISK_BLOCKS {
            reject("the physical block is outside the disk")
        } else if shadow().live_for_other(result.physical, args.logical) {
            reject("the physical block holds another logical block's live data")
        } else {
            Ok(())
        }
    }
}

/// The primary module of `block.MapLookup`: default = not mapped; answers are compared
/// by [`verify_map`], not here.
pub struct MapLookupService;

impl PrimaryModule<MapLookup, Placement> for MapLookupService {
    fn name(&self) -> &str {
        "block"
    }
    fn default_result(&self, _: &MapLookup) -> Placement {
        Placement { physical: Placement::NONE }
    }
    fn authorize(&self, _: &InstallRequest<'_, MapLookup>) -> Result<Authorization<MapLookup>, Refusal> {
        Ok(Authorization::allow())
    }
}

/// The primary module of `block.Format`: anyone may bind; nothing is returned.
pub struct FormatService;

impl PrimaryModule<DiskFormat, ()> for FormatService {
    fn name(&self) -> &str {
        "block"
    }
    fn default_result(&self, _: &DiskFormat) {}
    fn authorize(&self, _: &InstallRequest<'_, DiskFormat>) -> Result<Authorization<DiskFormat>, Refusal> {
        Ok(Authorization::allow())
    }
}

static READ_FILTER: Once<Arc<EventTable<ReadBlock, FilterVerdict>>> = Once::new();
static READ_DONE: Once<Arc<EventTable<ReadDone, Digest>>> = Once::new();
static WRITE: Once<Arc<EventTable<BlockWrite, Placement>>> = Once::new();
static MAP_LOOKUP: Once<Arc<EventTable<MapLookup, Placement>>> = Once::new();
static FORMAT: Once<Arc<EventTable<DiskFormat, ()>>> = Once::new();

/// Registers the block path's events.
pub fn init() {
    let dispatcher = super::dispatcher();
    let table = dispatcher.register(&BLOCK_READ_FILTER, Arc::new(ReadFilterService)).expect("block.ReadFilter registered twice");
    READ_FILTER.call_once(|| table);
    let table = dispatcher.register(&BLOCK_READ_DONE, Arc::new(ReadDoneService)).expect("block.ReadDone registered twice");
    READ_DONE.call_once(|| table);
    let table = dispatcher.register(&BLOCK_WRITE, Arc::new(WriteService)).expect("block.Write registered twice");
    WRITE.call_once(|| table);
    let table = dispatcher.register(&BLOCK_MAP_LOOKUP, Arc::new(MapLookupService)).expect("block.MapLookup registered twice");
    MAP_LOOKUP.call_once(|| table);
    let table = dispatcher.register(&BLOCK_FORMAT, Arc::new(FormatService)).expect("block.Format registered twice");
    FORMAT.call_once(|| table);
}
