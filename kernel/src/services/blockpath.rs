//! The block path in the kernel: stream filters on reads and logical-disk placement of
//! writes, raised as `block.*` events whose rules (shadow map, active read, answer checks)
//! are the host-tested crate `spindle-service-blockpath`.
//!
//! There is no block device yet (the storage issue brings virtio-blk), so reads go over a
//! byte source the caller passes (the benchmark's 1 MiB workload today) and writes only
//! decide placement, enough for Small & Seltzer's stream and black-box grafts:
//!
//! - **Reads** ([`read_through_filters`]): a read request over `source` is given an id,
//!   made *active*, and passed block by block (4 KiB) through `block.ReadFilter`; handlers
//!   copy the block's bytes into their own memory with the `block` domain's
//!   `spindle_block_read`, which ends in [`copy_block`] (only the active request, only
//!   inside it). Then `block.ReadDone` asks for the digest.
//! - **Writes** ([`write`]): `block.Write { logical }` asks where a logical block goes on a
//!   1 GiB disk of 4 KiB blocks ([`DISK_BLOCKS`]); every answer is checked against the
//!   shadow map, a rejected one is counted in [`rejections`] and the default used (in
//!   place when free, else [`WriteError::NoSpace`]). [`verify_map`] checks the logical
//!   disk's own map (`block.MapLookup`) against the shadow map.
//!
//! Raised by the benchmarks (`bench::stream`, `bench::blackbox`), the in-kernel tests and
//! the `md5` and `logdisk` console commands. Known limits: one read request is active at a
//! time (a new one replaces it); the shadow map is allocated on first use and kept.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{
    BLOCK_FORMAT, BLOCK_MAP_LOOKUP, BLOCK_READ_DONE, BLOCK_READ_FILTER, BLOCK_WRITE, BlockWrite, Digest, DiskFormat, FilterVerdict, MapLookup, Placement,
    ReadBlock, ReadDone,
};
use spindle_dispatch::{Combiner, EventTable, PrimaryModule, ResultRejection};
use spindle_service_blockpath::{ReadRequests, Rejection, ShadowMap};
use spin::Once;

pub use spindle_service_blockpath::MapMismatch;

/// Bytes per block.
pub const BLOCK_SIZE: u64 = ReadBlock::MAX_LENGTH;
/// Blocks on the simulated disk: 1 GiB of 4 KiB blocks (Small & Seltzer §5.6).
pub const DISK_BLOCKS: u64 = 262_144;
/// Blocks per log segment: 64 KiB.
pub const SEGMENT_BLOCKS: u64 = 16;

static REJECTIONS: AtomicU64 = AtomicU64::new(0);

/// Answers of block-path handlers the primary module rejected since boot.
pub fn rejections() -> u64 {
    REJECTIONS.load(Ordering::Relaxed)
}

fn counted(outcome: Result<(), Rejection>) -> Result<(), ResultRejection> {
    outcome.map_err(|rejection| {
        REJECTIONS.fetch_add(1, Ordering::Relaxed);
        ResultRejection { reason: rejection.reason() }
    })
}

// ---------------------------------------------------------------------------------------
// Reads.
// ---------------------------------------------------------------------------------------

static READS: ReadRequests = ReadRequests::new();
/// What the active request reads from (set by [`begin_read`]).
static SOURCE: spin::Mutex<&'static [u8]> = spin::Mutex::new(&[]);

/// Makes bytes `start..start + length` of `source` the active read request (clamped to
/// the source) and returns its new id.
pub fn begin_read(source: &'static [u8], start: u64, length: u64) -> u64 {
    crate::arch::csr::without_interrupts(|| *SOURCE.lock() = source);
    READS.begin(source.len() as u64, start, length)
}

/// Ends `request` (no effect if another request is active).
pub fn end_read(request: u64) {
    READS.end(request);
}

/// The kernel side of `spindle_block_read`: copies `destination.len()` bytes at `offset`
/// of the active request `request`; returns the bytes copied, 0 when `request` is not
/// active or the range is not inside it.
pub fn copy_block(request: u64, offset: u64, destination: &mut [u8]) -> u64 {
    let Some((start, end)) = READS.range(request, offset, destination.len() as u64) else { return 0 };
    let source = crate::arch::csr::without_interrupts(|| *SOURCE.lock());
    match source.get(start..end) {
        Some(bytes) => {
            destination.copy_from_slice(bytes);
            destination.len() as u64
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

/// Reads `length` bytes of `source` from `start` through the stream filters, block by
/// block, and asks for the digest.
pub fn read_through_filters(source: &'static [u8], start: u64, length: u64) -> ReadOutcome {
    let request = begin_read(source, start, length);
    let bytes = READS.active_length();
    let mut consumed = 0;
    if let Some(table) = READ_FILTER.get() {
        let mut offset = 0;
        while offset < bytes {
            let block = ReadBlock { request, offset, length: BLOCK_SIZE.min(bytes - offset) };
            consumed += crate::events::raise(table, &block).consumed;
            offset += block.length;
        }
    }
    let digest =
        READ_DONE.get().map(|table| crate::events::raise(table, &ReadDone { request, length: bytes })).filter(|digest| digest.request == request);
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
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &ReadBlock, result: &FilterVerdict) -> Result<(), ResultRejection> {
        counted(spindle_service_blockpath::check_filter(args.length, result.consumed))
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
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &ReadDone, result: &Digest) -> Result<(), ResultRejection> {
        counted(spindle_service_blockpath::check_digest(args.request, args.length, result))
    }
}

// ---------------------------------------------------------------------------------------
// Writes.
// ---------------------------------------------------------------------------------------

static SHADOW: Once<ShadowMap> = Once::new();

fn shadow() -> &'static ShadowMap {
    SHADOW.call_once(|| ShadowMap::new(DISK_BLOCKS))
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
        Some(table) => crate::events::raise(table, &BlockWrite { logical }).physical,
        None => map.default_placement(logical),
    };
    // Every binding's answer was validated; the default is valid or NONE. `record` checks
    // again, so a bug elsewhere cannot index past the maps.
    if !map.record(logical, physical) {
        REFUSED_WRITES.fetch_add(1, Ordering::Relaxed);
        return Err(WriteError::NoSpace);
    }
    Ok(physical)
}

/// Formats the disk: clears the shadow map and raises `block.Format` (the logical disk
/// resets its map and log).
pub fn format() {
    shadow().clear();
    if let Some(table) = FORMAT.get() {
        crate::events::raise(table, &DiskFormat { blocks: DISK_BLOCKS, segment_blocks: SEGMENT_BLOCKS });
    }
}

/// Where the logical disk says `logical` lives (`block.MapLookup`); `None` if unmapped.
pub fn look_up(logical: u64) -> Option<u64> {
    let physical = MAP_LOOKUP.get().map_or(Placement::NONE, |table| crate::events::raise(table, &MapLookup { logical }).physical);
    (physical != Placement::NONE).then_some(physical)
}

/// Checks every logical block of the disk: the logical disk's map (`block.MapLookup`)
/// must name the physical block holding the block's latest accepted write and must not map
/// blocks never written. Returns the number of blocks mapped, or the first mismatch.
pub fn verify_map() -> Result<u64, MapMismatch> {
    verify_map_of(0..DISK_BLOCKS)
}

/// [`verify_map`] for the given logical blocks only (a test's sample).
pub fn verify_map_of(logicals: impl IntoIterator<Item = u64>) -> Result<u64, MapMismatch> {
    let map = shadow();
    let mut mapped = 0;
    for logical in logicals.into_iter().filter(|&logical| logical < DISK_BLOCKS) {
        mapped += u64::from(map.check_lookup(logical, look_up(logical))?);
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
        Placement { physical: shadow().default_placement(args.logical) }
    }
    fn combiner(&self) -> Combiner<Placement> {
        Combiner::Last
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &BlockWrite, result: &Placement) -> Result<(), ResultRejection> {
        counted(shadow().check_placement(args.logical, result.physical))
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
}

/// The primary module of `block.Format`: anyone may bind; nothing is returned.
pub struct FormatService;

impl PrimaryModule<DiskFormat, ()> for FormatService {
    fn name(&self) -> &str {
        "block"
    }
    fn default_result(&self, _: &DiskFormat) {}
}

static READ_FILTER: Once<Arc<EventTable<ReadBlock, FilterVerdict>>> = Once::new();
static READ_DONE: Once<Arc<EventTable<ReadDone, Digest>>> = Once::new();
static WRITE: Once<Arc<EventTable<BlockWrite, Placement>>> = Once::new();
static MAP_LOOKUP: Once<Arc<EventTable<MapLookup, Placement>>> = Once::new();
static FORMAT: Once<Arc<EventTable<DiskFormat, ()>>> = Once::new();

/// Registers the block path's events.
pub fn init() {
    let dispatcher = crate::events::dispatcher();
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

/// Longest copy one `spindle_block_read` call may make (one block).
pub const BLOCK_READ_MAX: usize = spindle_abi::event::ReadBlock::MAX_LENGTH as usize;

/// Domain `block` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Block for crate::ext::glue::KernelFunctions {
    /// [`copy_block`]; 0 for an empty destination or one longer than [`BLOCK_READ_MAX`].
    fn block_read(&self, request: u64, offset: u64, destination: &mut [u8]) -> u64 {
        if destination.is_empty() || destination.len() > BLOCK_READ_MAX {
            return 0;
        }
        copy_block(request, offset, destination)
    }
}
