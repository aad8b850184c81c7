//! The block path in the kernel: stream filters on reads and logical-disk placement of
//! writes, raised as `block.*` events whose rules (shadow map, active read, answer checks,
//! write runs) are the host-tested crate `spindle-service-blockpath`.
//!
//! The path works on the disk ([`crate::services::disk`], a virtio-blk device behind the
//! disk model and `disk.Schedule`) and, for the bookkeeping-only benchmark rows, over a
//! byte source in memory:
//!
//! - **Reads** ([`read_disk_through_filters`], or [`read_through_filters`] over memory): a
//!   read request is given an id, made *active*, and its data passed block by block (4 KiB)
//!   through `block.ReadFilter` as it arrives from the device ([`READ_CHUNK_BYTES`] per
//!   device request); handlers copy the block's bytes into their own memory with the
//!   `block` domain's `spindle_block_read`, which ends in [`copy_block`] (only the active
//!   request, only inside it, only data that has arrived). Then `block.ReadDone` asks for
//!   the digest.
//! - **Placement** ([`write`]): `block.Write { logical }` asks where a logical block goes
//!   on a 1 GiB disk of 4 KiB blocks ([`DISK_BLOCKS`]); every answer is checked against
//!   the shadow map, a rejected one is counted in [`rejections`] and the default used (in
//!   place when free, else [`WriteError::NoSpace`]). [`verify_map`] checks the logical
//!   disk's own map (`block.MapLookup`) against the shadow map.
//! - **Data** ([`write_block`], [`read_block`], [`sync`]): a block's bytes go where
//!   [`write`] placed it — physical block `p` is sectors `8p..8p + 8` of the disk. Writes
//!   to consecutive physical blocks are gathered into one device request of up to
//!   [`SEGMENT_BLOCKS`] blocks (a logical disk's segment reaches the disk whole); the run
//!   held is written out when the next write does not extend it, when it is full, and by
//!   [`sync`] — the point after which data survives the machine. A device error on that
//!   write-out is returned to the call that caused it. Reads go through the logical disk's
//!   map (`block.MapLookup`, checked against the shadow map: a wrong answer is an error,
//!   never another block's data) and see writes still held.
//!
//! Raised by the benchmarks (`bench::stream`, `bench::blackbox`, `bench::blockio`), the
//! in-kernel tests and the `md5` and `logdisk` console commands. Known limits: one read
//! request is active at a time (a new one replaces it); the data path serves one caller at
//! a time (others wait); the shadow map is allocated on first use and kept.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use spindle_abi::event::{
    BLOCK_FORMAT, BLOCK_MAP_LOOKUP, BLOCK_READ_DONE, BLOCK_READ_FILTER, BLOCK_WRITE, BlockWrite, Digest, DiskFormat, FilterVerdict, MapLookup, Placement,
    ReadBlock, ReadDone,
};
use spindle_dispatch::{Combiner, EventTable, PrimaryModule, ResultRejection};
use spindle_service_blockpath::{ReadRequests, Rejection, Run, ShadowMap, WriteRun};
use spin::Once;

pub use spindle_service_blockpath::MapMismatch;

use crate::services::disk::{self, DiskError};

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

/// Where the active read request's bytes are.
enum Source {
    /// A buffer in memory (the bookkeeping-only benchmark's workload).
    Memory(&'static [u8]),
    /// The disk: the bytes that have arrived, from byte `start` of the disk on.
    Disk {
        /// Disk byte of `data[0]`.
        start: u64,
        /// What the device delivered.
        data: Vec<u8>,
    },
}

/// What the active request reads from (set by [`begin_read`] and the disk read).
static SOURCE: spin::Mutex<Source> = spin::Mutex::new(Source::Memory(&[]));

/// Replaces what the active request reads from; the old source (a disk window's buffer)
/// is freed after the lock is released, with interrupts on.
fn set_source(source: Source) {
    let old = crate::arch::csr::without_interrupts(|| core::mem::replace(&mut *SOURCE.lock(), source));
    drop(old);
}

/// Makes bytes `start..start + length` of `source` the active read request (clamped to
/// the source) and returns its new id.
pub fn begin_read(source: &'static [u8], start: u64, length: u64) -> u64 {
    set_source(Source::Memory(source));
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
    crate::arch::csr::without_interrupts(|| {
        let source = SOURCE.lock();
        let bytes = match &*source {
            Source::Memory(bytes) => bytes.get(start..end),
            // Only what has arrived: the window the device delivered.
            Source::Disk { start: window, data } => usize::try_from(*window)
                .ok()
                .and_then(|window| Some((start.checked_sub(window)?, end.checked_sub(window)?)))
                .and_then(|(first, last)| data.get(first..last)),
        };
        match bytes {
            Some(bytes) => {
                destination.copy_from_slice(bytes);
                destination.len() as u64
            }
            None => 0,
        }
    })
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

/// Bytes one device request of a disk read carries (16 blocks: the data of one request is
/// filtered block by block before the next is asked for).
pub const READ_CHUNK_BYTES: u64 = SEGMENT_BLOCKS * BLOCK_SIZE;

/// Why a read or write of the disk through the block path failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockIoError {
    /// The placement was refused ([`write`]).
    Write(WriteError),
    /// The disk refused or failed a request.
    Disk(DiskError),
    /// The start is not on a sector boundary, or the range leaves the disk.
    BadRange {
        /// First byte asked for.
        start: u64,
        /// Bytes asked for.
        length: u64,
    },
    /// A block buffer is not exactly [`BLOCK_SIZE`] bytes.
    BadBlockLength(usize),
    /// The logical disk's map (`block.MapLookup`) disagrees with the writes it placed.
    Map(MapMismatch),
}

impl core::fmt::Display for BlockIoError {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BlockIoError::Write(WriteError::OutOfRange) => write!(formatter, "the logical block is outside the {DISK_BLOCKS}-block disk"),
            BlockIoError::Write(WriteError::NoSpace) => formatter.write_str("no space: the logical disk's log is full or its answer was refused"),
            BlockIoError::Disk(error) => write!(formatter, "{error}"),
            BlockIoError::BadRange { start, length } => {
                write!(formatter, "bytes {start}..{} are not a range of the disk starting on a {SECTOR_BYTES}-byte sector", start.saturating_add(*length))
            }
            BlockIoError::BadBlockLength(length) => write!(formatter, "a block is {BLOCK_SIZE} bytes, not {length}"),
            BlockIoError::Map(mismatch) => write!(
                formatter,
                "the logical disk maps block {} to {:?}, but its latest write is at {:?}",
                mismatch.logical, mismatch.answered, mismatch.expected
            ),
        }
    }
}

impl From<DiskError> for BlockIoError {
    fn from(error: DiskError) -> Self {
        BlockIoError::Disk(error)
    }
}

/// Bytes per sector of the disk.
const SECTOR_BYTES: u64 = crate::drivers::virtio_blk::SECTOR_SIZE as u64;

/// Reads `length` bytes of the disk from byte `start` (on a sector boundary) through the
/// stream filters: [`READ_CHUNK_BYTES`] per device request, each block of it raised as
/// `block.ReadFilter` once it has arrived; then asks for the digest.
///
/// Errors: [`BlockIoError::BadRange`], or the disk's error (the request is ended, no digest).
pub fn read_disk_through_filters(start: u64, length: u64) -> Result<ReadOutcome, BlockIoError> {
    let _gate = DataGate::enter();
    let disk_bytes = crate::drivers::virtio_blk::capacity().ok_or(BlockIoError::Disk(DiskError::NoDisk))?.saturating_mul(SECTOR_BYTES);
    if !start.is_multiple_of(SECTOR_BYTES) || start.checked_add(length).is_none_or(|end| end > disk_bytes) {
        return Err(BlockIoError::BadRange { start, length });
    }
    let request = READS.begin(disk_bytes, start, length);
    set_source(Source::Disk { start, data: Vec::new() });
    let outcome = filter_disk_chunks(request, start, length);
    end_read(request);
    set_source(Source::Memory(&[]));
    let consumed = outcome?;
    let digest =
        READ_DONE.get().map(|table| crate::events::raise(table, &ReadDone { request, length })).filter(|digest| digest.request == request);
    Ok(ReadOutcome { request, bytes: length, consumed, digest: digest.map(|digest| digest.bytes()) })
}

/// The chunk loop of [`read_disk_through_filters`]: returns the bytes the filters consumed.
fn filter_disk_chunks(request: u64, start: u64, length: u64) -> Result<u64, BlockIoError> {
    let mut consumed = 0;
    let mut offset = 0;
    while offset < length {
        let chunk = READ_CHUNK_BYTES.min(length - offset);
        // Whole sectors from the device; the request's end clamps what handlers see.
        let mut data = alloc::vec![0u8; chunk.next_multiple_of(SECTOR_BYTES) as usize];
        disk::read((start + offset) / SECTOR_BYTES, &mut data)?;
        set_source(Source::Disk { start: start + offset, data });
        if let Some(table) = READ_FILTER.get() {
            let mut done = 0;
            while done < chunk {
                let block = ReadBlock { request, offset: offset + done, length: BLOCK_SIZE.min(chunk - done) };
                consumed += crate::events::raise(table, &block).consumed;
                done += block.length;
            }
        }
        offset += chunk;
    }
    Ok(consumed)
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
    // Writes still held belonged to the disk being forgotten.
    let _ = crate::arch::csr::without_interrupts(|| RUN.lock().take());
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

// ---------------------------------------------------------------------------------------
// Data on the disk.
// ---------------------------------------------------------------------------------------

/// Sectors per block.
const BLOCK_SECTORS: u64 = BLOCK_SIZE / SECTOR_BYTES;

/// Writes placed but not yet written out (see [`sync`]).
static RUN: spin::Mutex<Option<WriteRun>> = spin::Mutex::new(None);

/// One caller at a time on the data path: a write-out in progress must not be overtaken
/// by a read of the same block, and the active read request is one.
static DATA_BUSY: AtomicBool = AtomicBool::new(false);

/// Holding the data path ([`DataGate::enter`]); released on drop.
struct DataGate;

impl DataGate {
    /// Waits (sleeping a tick at a time) until the data path is free and takes it.
    fn enter() -> DataGate {
        while DATA_BUSY.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            crate::sched::sleep_ticks(1);
        }
        DataGate
    }
}

impl Drop for DataGate {
    fn drop(&mut self) {
        DATA_BUSY.store(false, Ordering::Release);
    }
}

/// Writes a run out to the disk.
fn write_out(run: &Run) -> Result<(), BlockIoError> {
    disk::write(run.start * BLOCK_SECTORS, &run.data)?;
    WRITTEN_OUT.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

static WRITTEN_OUT: AtomicU64 = AtomicU64::new(0);

/// Device write requests the data path has made since boot (one per run written out).
pub fn device_writes() -> u64 {
    WRITTEN_OUT.load(Ordering::Relaxed)
}

/// Writes one block of data (exactly [`BLOCK_SIZE`] bytes) as logical block `logical`:
/// placed by [`write`] (`block.Write`), held in the write run and written out with the
/// blocks that follow it on the disk. Returns the physical block. The data is on the disk
/// after the next [`sync`].
///
/// Errors: [`BlockIoError::BadBlockLength`], the placement's [`WriteError`], or a device
/// error writing out the run held before (whose blocks are then lost; nothing is retried).
pub fn write_block(logical: u64, data: &[u8]) -> Result<u64, BlockIoError> {
    if data.len() as u64 != BLOCK_SIZE {
        return Err(BlockIoError::BadBlockLength(data.len()));
    }
    let _gate = DataGate::enter();
    let physical = write(logical).map_err(BlockIoError::Write)?;
    let runs = crate::arch::csr::without_interrupts(|| RUN.lock().get_or_insert_with(|| WriteRun::new(SEGMENT_BLOCKS, BLOCK_SIZE as usize)).push(physical, data));
    for run in runs.map_err(BlockIoError::BadBlockLength)? {
        write_out(&run)?;
    }
    Ok(physical)
}

/// Writes out every block [`write_block`] still holds: once this returns `Ok`, everything
/// written before it is on the device.
///
/// Errors: the device's.
pub fn sync() -> Result<(), BlockIoError> {
    let _gate = DataGate::enter();
    let run = crate::arch::csr::without_interrupts(|| RUN.lock().as_mut().and_then(WriteRun::take));
    match run {
        Some(run) => write_out(&run),
        None => Ok(()),
    }
}

/// Where logical block `logical`'s latest data is: the logical disk's answer
/// (`block.MapLookup`) when one is bound, checked against the shadow map; else the shadow
/// map's record (in place).
fn mapped(logical: u64) -> Result<Option<u64>, BlockIoError> {
    let map = shadow();
    if MAP_LOOKUP.get().is_some_and(|table| table.has_bindings()) {
        let answered = look_up(logical);
        map.check_lookup(logical, answered).map_err(BlockIoError::Map)?;
        Ok(answered)
    } else {
        Ok(map.placed(logical))
    }
}

/// Reads logical block `logical` into `buffer` (exactly [`BLOCK_SIZE`] bytes) through the
/// logical disk's map: its latest data, from the write run if still held there. Returns
/// the physical block, or `None` (and zeros) for a block never written since the format.
///
/// Errors: [`BlockIoError::BadBlockLength`], [`BlockIoError::Write`] (`OutOfRange`),
/// [`BlockIoError::Map`] (the logical disk's map is wrong), or the disk's error.
pub fn read_block(logical: u64, buffer: &mut [u8]) -> Result<Option<u64>, BlockIoError> {
    if buffer.len() as u64 != BLOCK_SIZE {
        return Err(BlockIoError::BadBlockLength(buffer.len()));
    }
    if logical >= DISK_BLOCKS {
        return Err(BlockIoError::Write(WriteError::OutOfRange));
    }
    let _gate = DataGate::enter();
    let Some(physical) = mapped(logical)? else {
        buffer.fill(0);
        return Ok(None);
    };
    let held = crate::arch::csr::without_interrupts(|| {
        let run = RUN.lock();
        run.as_ref().and_then(|run| run.get(physical)).map(|bytes| buffer.copy_from_slice(bytes)).is_some()
    });
    if !held {
        disk::read(physical * BLOCK_SECTORS, buffer)?;
    }
    Ok(Some(physical))
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
