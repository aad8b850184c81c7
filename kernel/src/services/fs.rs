//! The file-system service: `spindle-service-fs`'s file system over
//! `spindle-service-bcache`'s buffer cache over the disk service ([`super::disk`]).
//!
//! ```text
//!  system calls, console commands, `run /bin/NAME`, `ext load /ext/NAME.kext`
//!        │  paths, open files (capabilities of kind File)
//!  FileSystem<CacheStore>            spindle-service-fs: directories, inodes, allocation
//!        │  BlockStore: block + usage (metadata, or file data of inode i, block k)
//!  CachedDevice<Disk, Policy>        spindle-service-bcache: buffers, LRU, write-back, read-ahead
//!        │  BlockDevice: one 4 KiB block
//!  services::disk                    queue, disk.Schedule, the HP 97560 model, virtio-blk
//! ```
//!
//! **Where.** The file system lives in the disk's region from byte
//! [`crate::param::FS_REGION_START`] (1 GiB): below it the block path's logical disk
//! (1 GiB) and the benchmarks' scratch extents; `cargo xtask fs mkfs` and the images xtask
//! builds put it there. Its size is the superblock's.
//!
//! **Mounting** is lazy: the first call that needs the file system mounts it (and says so
//! on the console); a disk without one (or with a refused superblock) answers
//! [`FsCallError::NotMounted`] with the reason, until `fs format` makes one.
//!
//! **Concurrency.** One [`SleepLock`] serialises the file system and its cache: a call
//! that waits for the disk blocks its strand, others wait their turn asleep. (One caller
//! at a time: the disk queue sees the cache's requests one by one.)
//!
//! **Durability.** [`sync`] (and `fsync`) writes every dirty block, metadata and data, in
//! ascending order, each through the disk service to the device, and returns when the
//! device has completed them. The virtio-blk device here has no volatile write cache the
//! driver could flush (QEMU writes a completed request to the host file), so a completed
//! write survives QEMU being killed; it would not survive the host losing power.
//!
//! **Read-ahead.** After a read, the cache's read-ahead rule (`cache.ReadAhead`: the
//! default clustered sequential rule, or a policy extension) names file blocks to prefetch;
//! a read-ahead strand (above the readers, below the disk service) reads them into the
//! cache — consecutive device blocks in one request of up to 64 KiB — while the reader goes
//! on computing. A reader that asks for a block being prefetched waits for the file
//! system's lock, which the prefetch holds until its blocks are in.
//!
//! **Open files** are counted per inode: a file or directory that is open cannot be
//! removed ([`FsCallError::Busy`]), so an inode number is never freed — and reused by
//! another file — under a handle that still names it. A running program's file
//! ([`open_program`]: its image pages are read from it on demand) cannot be opened for
//! writing ([`FsCallError::Running`]), and a file open for writing cannot be run
//! ([`FsCallError::Busy`]): the pages a process reads later are the bytes it started with.
//!
//! Limitations: one file system; no rename or hard links; no deferred removal of an open
//! file (POSIX lets `unlink` succeed and frees the file at its last close).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_capability::{KernelObject, ObjectKind};
use spindle_service_bcache::{BlockBuffer, BlockDevice, Buffer, Cache, CachedDevice, CachedError, Config, Counters, Owner, default_reads_ahead};
use spindle_service_fs::{BLOCK_BYTES, BlockStore, DirEntry, FileSystem, FormatOptions, FsError, FsStats, IoError, Kind, Stat, Usage};

use super::cache_events::{self, EventPolicy};
use super::disk::{self, DiskError};
use crate::sched::SleepLock;

/// Sectors per file-system block.
const SECTORS_PER_BLOCK: u64 = (BLOCK_BYTES / disk::SECTOR_SIZE) as u64;
/// Buffers in the cache unless `fs format`/mount is told otherwise (4 MiB).
pub const DEFAULT_CACHE_BLOCKS: usize = 1024;
/// Buffers the cache keeps when memory is under pressure ([`give_back_buffers`]).
pub const CACHE_FLOOR_BLOCKS: usize = 64;
/// Most buffers a file-system call returns to the cache ([`refill`]).
const REFILL_BATCH: usize = 32;
/// Free frames above the low-water mark before the cache takes buffers back: room for a
/// few refills, so that giving back and taking back do not alternate at the mark.
const REFILL_MARGIN_FRAMES: u64 = 4 * REFILL_BATCH as u64;
/// Largest file [`read_file`] returns (a program or an extension artifact).
pub const MAX_WHOLE_FILE: u64 = 8 * 1024 * 1024;
/// Most blocks one write-back request carries (64 KiB): a sorted run of dirty blocks goes
/// to the disk in requests of this size, not block by block (each request pays the
/// controller's overhead and a wait for the platter).
const RUN_BLOCKS: usize = 16;
/// How often a disk request that found the queue full is tried again (a tick apart).
const QUEUE_FULL_RETRIES: u32 = 100;

/// The disk region the file system lives in, as the cache's device: block `b` is the
/// 4 KiB at sector `start_sector + 8·b`.
pub struct Disk {
    start_sector: u64,
    blocks: u64,
}

/// Why the disk could not do a block request (the cache's device error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskIoError {
    /// The block is past the region's end.
    OutOfRange(u64),
    /// The disk service refused or failed it.
    Disk(u64, DiskError),
}

impl DiskIoError {
    /// A small code for `spindle_service_fs::IoError::Device`.
    fn code(self) -> i32 {
        match self {
            DiskIoError::OutOfRange(_) => -1,
            DiskIoError::Disk(_, DiskError::NoDisk) => -2,
            DiskIoError::Disk(_, DiskError::BadLength(_)) => -3,
            DiskIoError::Disk(_, DiskError::PastEnd { .. }) => -4,
            DiskIoError::Disk(_, DiskError::QueueFull) => -5,
            DiskIoError::Disk(_, DiskError::Device(_)) => -6,
        }
    }

    fn io_error(self) -> IoError {
        match self {
            DiskIoError::OutOfRange(block) => IoError::OutOfRange { block },
            DiskIoError::Disk(block, _) => IoError::Device { block, code: self.code() },
        }
    }
}

impl fmt::Display for DiskIoError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskIoError::OutOfRange(block) => write!(formatter, "block {block} is past the file system's region"),
            DiskIoError::Disk(block, error) => write!(formatter, "block {block}: {error}"),
        }
    }
}

/// The last disk error the file system met (for `fs` at the console).
static LAST_DISK_ERROR: spin::Mutex<Option<DiskIoError>> = spin::Mutex::new(None);

impl Disk {
    fn sector_of(&self, block: u64) -> Result<u64, DiskIoError> {
        if block >= self.blocks {
            return Err(DiskIoError::OutOfRange(block));
        }
        Ok(self.start_sector + block * SECTORS_PER_BLOCK)
    }

    /// Runs a disk request, retrying while the queue is full (other strands' requests).
    fn request(&self, block: u64, mut run: impl FnMut(u64) -> Result<(), DiskError>) -> Result<(), DiskIoError> {
        let sector = self.sector_of(block)?;
        let mut tries = 0;
        loop {
            match run(sector) {
                Err(DiskError::QueueFull) if tries < QUEUE_FULL_RETRIES => {
                    tries += 1;
                    crate::sched::sleep_ticks(1);
                }
                Err(error) => {
                    let error = DiskIoError::Disk(block, error);
                    crate::arch::csr::without_interrupts(|| *LAST_DISK_ERROR.lock() = Some(error));
                    return Err(error);
                }
                Ok(()) => return Ok(()),
            }
        }
    }
}

impl BlockDevice for Disk {
    type Error = DiskIoError;

    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK_BYTES]) -> Result<(), DiskIoError> {
        DISK_READS.fetch_add(1, Ordering::Relaxed);
        self.request(block, |sector| disk::read(sector, buf))
    }

    fn write(&mut self, block: u64, buf: &[u8; BLOCK_BYTES]) -> Result<(), DiskIoError> {
        DISK_WRITES.fetch_add(1, Ordering::Relaxed);
        self.request(block, |sector| disk::write(sector, buf))
    }

    fn max_run_blocks(&self) -> usize {
        RUN_BLOCKS
    }

    fn read_run(&mut self, start: u64, buf: &mut [u8]) -> Result<(), DiskIoError> {
        let blocks = (buf.len() / BLOCK_BYTES) as u64;
        if start.checked_add(blocks).is_none_or(|end| end > self.blocks) {
            return Err(DiskIoError::OutOfRange(start));
        }
        DISK_READS.fetch_add(blocks, Ordering::Relaxed);
        self.request(start, |sector| disk::read(sector, buf))
    }

    fn write_run(&mut self, start: u64, blocks: &[&[u8; BLOCK_BYTES]]) -> Result<(), DiskIoError> {
        if start.checked_add(blocks.len() as u64).is_none_or(|end| end > self.blocks) {
            return Err(DiskIoError::OutOfRange(start));
        }
        DISK_WRITES.fetch_add(blocks.len() as u64, Ordering::Relaxed);
        let mut bytes = Vec::with_capacity(blocks.len() * BLOCK_BYTES);
        for block in blocks {
            bytes.extend_from_slice(&block[..]);
        }
        self.request(start, |sector| disk::write(sector, &bytes))
    }

    fn flush(&mut self) -> Result<(), DiskIoError> {
        // Every write above returned after the device completed it (module docs).
        Ok(())
    }
}

/// Block reads and writes the file system sent to the disk since boot.
static DISK_READS: AtomicU64 = AtomicU64::new(0);
static DISK_WRITES: AtomicU64 = AtomicU64::new(0);

/// The cache over the region; its decisions are the `cache.*` events' (the defaults when
/// nothing is bound).
type Cached = CachedDevice<Disk, EventPolicy>;

/// The file system's store: every block through the cache, tagged with its owner (the
/// file and its block for file data, nobody for metadata).
pub struct CacheStore(Cached);

fn owner_of(usage: Usage) -> Owner {
    match usage {
        Usage::Metadata => Owner::NONE,
        Usage::Data { inode, file_block } => Owner::of(inode, file_block),
    }
}

fn cache_io_error(block: u64, error: CachedError<DiskIoError>) -> IoError {
    match error {
        CachedError::Device(error) => error.io_error(),
        // The cache refused (every buffer pinned or in flight): not the disk's fault, but
        // the block could not be moved either way.
        CachedError::Cache(_) => IoError::Device { block, code: -7 },
    }
}

impl BlockStore for CacheStore {
    fn read(&mut self, block: u64, usage: Usage, buf: &mut [u8; BLOCK_BYTES]) -> Result<(), IoError> {
        self.0.read(block, owner_of(usage), 0, buf).map_err(|error| cache_io_error(block, error))
    }

    fn write(&mut self, block: u64, usage: Usage, buf: &[u8; BLOCK_BYTES]) -> Result<(), IoError> {
        self.0.write(block, owner_of(usage), 0, buf).map_err(|error| cache_io_error(block, error))
    }

    fn sync(&mut self) -> Result<(), IoError> {
        self.0.sync().map_err(|error| cache_io_error(0, error))
    }

    /// Copies the part straight out of the cache's buffer (no block-sized copy).
    fn read_part(&mut self, block: u64, usage: Usage, offset: usize, out: &mut [u8]) -> Result<(), IoError> {
        if offset.checked_add(out.len()).is_none_or(|end| end > BLOCK_BYTES) {
            return Err(IoError::OutOfRange { block });
        }
        self.0.read(block, owner_of(usage), offset, out).map_err(|error| cache_io_error(block, error))
    }
}

/// Why a file-system call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsCallError {
    /// There is no mounted file system; the text says why (no disk, no superblock, …).
    NotMounted(String),
    /// The file system refused or failed the operation.
    Fs(FsError),
    /// The open file was not opened for this (reading or writing).
    NotPermitted,
    /// A whole-file read of a file larger than [`MAX_WHOLE_FILE`].
    TooLarge(u64),
    /// A seek to a negative or overflowing offset, or an unknown origin.
    BadSeek,
    /// The file is open (by this or another process): it cannot be removed (or, open for
    /// writing, run).
    Busy,
    /// The file is a running program's image: it cannot be written.
    Running,
}

impl fmt::Display for FsCallError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsCallError::NotMounted(why) => write!(formatter, "no file system: {why}"),
            FsCallError::Fs(error) => error.fmt(formatter),
            FsCallError::NotPermitted => formatter.write_str("the file is not open for that"),
            FsCallError::TooLarge(size) => write!(formatter, "the file has {size} bytes, more than {MAX_WHOLE_FILE} can be read at once"),
            FsCallError::BadSeek => formatter.write_str("bad seek (negative or overflowing offset, or unknown origin)"),
            FsCallError::Busy => formatter.write_str("the file is open"),
            FsCallError::Running => formatter.write_str("the file is a running program's image"),
        }
    }
}

impl From<FsError> for FsCallError {
    fn from(error: FsError) -> FsCallError {
        FsCallError::Fs(error)
    }
}

impl FsCallError {
    /// The system-call error for it.
    pub fn code(&self) -> spindle_abi::syscall::Error {
        use spindle_abi::syscall::Error;
        match self {
            FsCallError::NotMounted(_) => Error::NoDevice,
            FsCallError::NotPermitted => Error::NotPermitted,
            FsCallError::TooLarge(_) => Error::BadLength,
            FsCallError::BadSeek => Error::BadArgument,
            FsCallError::Busy | FsCallError::Running => Error::Busy,
            FsCallError::Fs(error) => match error {
                FsError::NotFound => Error::NotFound,
                FsError::Exists => Error::Exists,
                FsError::NotADirectory => Error::NotADirectory,
                FsError::IsADirectory => Error::IsADirectory,
                FsError::NotEmpty => Error::NotEmpty,
                FsError::NoSpace | FsError::NoInodes | FsError::DirectoryFull => Error::NoSpace,
                FsError::FileTooLarge => Error::NoSpace,
                FsError::Name(_) | FsError::Path(_) | FsError::Options(_) => Error::BadArgument,
                FsError::Io(_) => Error::Io,
                FsError::Superblock(_) | FsError::Corrupt { .. } | FsError::NoSuchInode(_) => Error::Corrupt,
            },
        }
    }
}

/// The service's state.
enum State {
    /// Not tried yet.
    Unmounted,
    /// Tried; refused for this reason (until `format` or `mount`).
    Refused(String),
    /// Mounted (boxed: the file system with its cache handle is large).
    Mounted(Box<FileSystem<CacheStore>>),
}

static FS: SleepLock<State> = SleepLock::new(State::Unmounted);

/// The region the file system may use: from [`crate::param::FS_REGION_START`] to the
/// swap area at the end of the disk ([`crate::param::SWAP_BYTES`]), in blocks. Errors: why there is none.
fn region() -> Result<Disk, String> {
    let sectors = disk::capacity_sectors().ok_or_else(|| String::from("the machine has no disk (or the disk service is not running)"))?;
    let start_sector = crate::param::FS_REGION_START / disk::SECTOR_SIZE as u64;
    if sectors <= start_sector {
        return Err(alloc::format!(
            "the disk has {} MiB; the file system's region starts at {} MiB",
            (sectors * disk::SECTOR_SIZE as u64) >> 20,
            crate::param::FS_REGION_START >> 20
        ));
    }
    // The swap area is the disk's last `SWAP_BYTES` (see `services::vm`).
    let end_sector = sectors.saturating_sub(crate::param::SWAP_BYTES / disk::SECTOR_SIZE as u64).max(start_sector);
    Ok(Disk { start_sector, blocks: (end_sector - start_sector) / SECTORS_PER_BLOCK })
}

fn cached(disk: Disk, cache_blocks: usize) -> Result<Cached, String> {
    let mut supply = BufferSupply::new(cache_blocks);
    let cache = Cache::with_buffers(Config::new(cache_blocks), || supply.next());
    match cache {
        Ok(cache) => Ok(CachedDevice::with_cache(disk, cache, EventPolicy::whole_cache())),
        Err(_) if supply.refused => Err(alloc::format!("cache: mm.Allocate refused the buffer cache's {cache_blocks} buffers")),
        Err(error) => Err(alloc::format!("cache: {error}")),
    }
}

/// Buffers for the cache, asked of `mm.Allocate` a batch at a time ([`REFILL_BATCH`]):
/// after a refusal (by a handler, or by the default for want of frames) it supplies none.
struct BufferSupply {
    /// Buffers still wanted.
    wanted: usize,
    /// Buffers of the batch `mm.Allocate` allowed that are still to be taken.
    allowed: usize,
    /// Whether `mm.Allocate` refused a batch.
    refused: bool,
}

impl BufferSupply {
    fn new(wanted: usize) -> BufferSupply {
        BufferSupply { wanted, allowed: 0, refused: false }
    }

    /// The next buffer, `None` once refused or out of frames.
    fn next(&mut self) -> Option<Buffer> {
        if self.refused || self.wanted == 0 {
            return None;
        }
        if self.allowed == 0 {
            let batch = self.wanted.min(REFILL_BATCH);
            let purpose = spindle_service_frames::Purpose::CacheBuffer;
            if super::vm::may_allocate_for(spindle_service_frames::Owner::BufferCache, batch as u64, purpose).is_err() {
                self.refused = true;
                return None;
            }
            self.allowed = batch;
        }
        self.allowed -= 1;
        self.wanted -= 1;
        CacheFrame::buffer()
    }
}

/// A buffer of the cache: a frame of its own, recorded in the frame table as the buffer
/// cache's while the cache holds it (`mem` counts them), freed when the cache gives it
/// back or goes.
struct CacheFrame(crate::mm::frame::FrameRun);

impl CacheFrame {
    /// A new buffer, `None` when no frame is free.
    fn buffer() -> Option<Buffer> {
        let run = crate::mm::frame::allocate_zeroed_for(1, spindle_service_frames::Owner::BufferCache)?;
        Some(Box::new(CacheFrame(run)))
    }
}

impl BlockBuffer for CacheFrame {
    fn bytes(&self) -> &[u8; BLOCK_BYTES] {
        self.0.first_page()
    }
    fn bytes_mut(&mut self) -> &mut [u8; BLOCK_BYTES] {
        self.0.first_page_mut()
    }
}

/// Under memory pressure (the translation service, before it pages a process out): gives
/// up to `wanted` of the cache's free or clean buffers back — their frames return to the
/// frame allocator — keeping [`CACHE_FLOOR_BLOCKS`]. Only if no strand is inside the file
/// system now (a fault may come from a kernel copy inside a file-system call): never
/// blocks. Returns how many went.
pub fn give_back_buffers(wanted: usize) -> usize {
    let Some(mut state) = FS.try_lock() else { return 0 };
    let State::Mounted(fs) = &mut *state else { return 0 };
    // The buffers' frames go back to the frame allocator as they are dropped here.
    fs.store_mut().0.give_back(wanted, CACHE_FLOOR_BLOCKS).len()
}

/// Returns up to `most` buffers to the slots the cache gave back, as far as frames are free
/// above the low-water mark (a file-system call returns a few each time on its own, see
/// [`refill`]); waits for the file system's lock. Returns how many came back.
pub fn refill_buffers(most: usize) -> usize {
    let mut state = FS.lock();
    let State::Mounted(fs) = &mut *state else { return 0 };
    let before = fs.store_mut().0.cache().retired_count();
    loop {
        let retired = fs.store_mut().0.cache().retired_count();
        let returned = before - retired;
        if returned >= most {
            return returned;
        }
        refill(fs, most - returned);
        if fs.store_mut().0.cache().retired_count() == retired {
            return returned;
        }
    }
}

/// Returns up to `most` (at most [`REFILL_BATCH`]) buffers to slots the cache gave back
/// (as `mm.Allocate` allows), if the free frames are [`REFILL_MARGIN_FRAMES`] above the
/// low-water mark.
fn refill(fs: &mut FileSystem<CacheStore>, most: usize) {
    let cached = &mut fs.store_mut().0;
    let retired = cached.cache().retired_count();
    if retired == 0 || super::vm::free_frames() < super::vm::low_water() + REFILL_MARGIN_FRAMES {
        return;
    }
    let mut supply = BufferSupply::new(retired.min(REFILL_BATCH).min(most));
    while let Some(buffer) = supply.next() {
        if cached.take_back(buffer).is_err() {
            return;
        }
    }
}

/// One line about a mounted file system: size, place, free blocks and inodes.
pub fn summary(stats: &FsStats) -> String {
    alloc::format!(
        "{} MiB at {} MiB on the disk; {} of {} data blocks free, {} of {} inodes free",
        (stats.blocks * stats.block_bytes) >> 20,
        crate::param::FS_REGION_START >> 20,
        stats.free_blocks,
        stats.data_blocks,
        stats.free_inodes,
        stats.inodes
    )
}

/// Mounts the file system in the region (with a cache of `cache_blocks` buffers).
fn mount_now(cache_blocks: usize) -> State {
    let attempt = || -> Result<FileSystem<CacheStore>, String> {
        let disk = region()?;
        let store = CacheStore(cached(disk, cache_blocks)?);
        FileSystem::mount(store).map_err(|error| alloc::format!("{error}"))
    };
    match attempt() {
        Ok(fs) => {
            let stats = fs.statfs();
            crate::println!("[fs] mounted: {}, cache {} KiB", summary(&stats), cache_blocks * BLOCK_BYTES / 1024);
            State::Mounted(Box::new(fs))
        }
        Err(why) => State::Refused(why),
    }
}

/// Runs `body` on the mounted file system (mounting it first if nobody tried yet).
fn with_fs<T>(body: impl FnOnce(&mut FileSystem<CacheStore>) -> Result<T, FsCallError>) -> Result<T, FsCallError> {
    let mut state = FS.lock();
    if matches!(*state, State::Unmounted) {
        *state = mount_now(DEFAULT_CACHE_BLOCKS);
    }
    match &mut *state {
        State::Mounted(fs) => {
            refill(fs, REFILL_BATCH);
            body(fs)
        }
        State::Refused(why) => Err(FsCallError::NotMounted(why.clone())),
        State::Unmounted => Err(FsCallError::NotMounted(String::from("not mounted"))),
    }
}

/// Runs `reader` on the mounted file system's cache if no strand is inside the file system
/// now (`None`: busy, or not mounted). Never blocks: for a kernel function called by an
/// extension outside a cache event (`spindle_cache_victims`).
pub fn with_idle_cache<T>(reader: impl FnOnce(&spindle_service_bcache::Cache) -> T) -> Option<T> {
    let mut state = FS.try_lock()?;
    match &mut *state {
        State::Mounted(fs) => Some(reader(fs.store_mut().0.cache())),
        State::Refused(_) | State::Unmounted => None,
    }
}

/// Writes everything back and forgets the mounted file system (a failed write-back keeps
/// it mounted and is returned).
fn unmount(state: &mut State) -> Result<(), FsCallError> {
    if let State::Mounted(fs) = state {
        fs.sync()?;
    }
    *state = State::Unmounted;
    Ok(())
}

/// Formats the region with a file system of `bytes` (rounded down to blocks; 0: the whole
/// region) and mounts it. What was there is lost. Errors: [`FsCallError::Busy`] while any
/// file is open, the region's and the format's.
pub fn format(bytes: u64) -> Result<FsStats, FsCallError> {
    let mut state = FS.lock();
    // Handles name inodes: a new file system would give their numbers to other files.
    if crate::arch::csr::without_interrupts(|| !OPEN_COUNTS.lock().is_empty()) {
        return Err(FsCallError::Busy);
    }
    unmount(&mut state)?;
    let disk = region().map_err(FsCallError::NotMounted)?;
    let available = disk.blocks;
    let blocks = if bytes == 0 { available } else { (bytes / BLOCK_BYTES as u64).min(available) }.min(u64::from(u32::MAX));
    let mut store = CacheStore(cached(disk, DEFAULT_CACHE_BLOCKS).map_err(FsCallError::NotMounted)?);
    spindle_service_fs::format(&mut store, FormatOptions { blocks, inodes: spindle_service_fs::default_inodes(blocks) })?;
    let fs = FileSystem::mount(store)?;
    let stats = fs.statfs();
    *state = State::Mounted(Box::new(fs));
    Ok(stats)
}

/// Writes back and mounts again with a cache of `cache_blocks` buffers (tests and
/// benchmarks that need a cold or a smaller cache).
pub fn remount(cache_blocks: usize) -> Result<FsStats, FsCallError> {
    settle_read_ahead();
    let mut state = FS.lock();
    unmount(&mut state)?;
    *state = mount_now(cache_blocks);
    match &*state {
        State::Mounted(fs) => Ok(fs.statfs()),
        State::Refused(why) => Err(FsCallError::NotMounted(why.clone())),
        State::Unmounted => Err(FsCallError::NotMounted(String::from("not mounted"))),
    }
}

/// What `fs` at the console shows.
#[derive(Clone, Debug)]
pub struct FsStatus {
    /// Blocks and inodes, free and total.
    pub stats: FsStats,
    /// The cache's counters.
    pub cache: Counters,
    /// Buffers the cache may hold (its slots).
    pub cache_blocks: usize,
    /// Buffers it holds now (fewer after memory pressure took some back; the counters say
    /// how many were given and taken back since the mount).
    pub cache_buffers: usize,
    /// Dirty buffers now.
    pub dirty: usize,
    /// Block reads and writes sent to the disk since boot.
    pub disk_reads: u64,
    /// Block writes sent to the disk since boot.
    pub disk_writes: u64,
}

/// The mounted file system's state (mounting it if nobody tried yet).
pub fn status() -> Result<FsStatus, FsCallError> {
    with_fs(|fs| {
        let stats = fs.statfs();
        let cache = fs.store_mut().0.cache();
        Ok(FsStatus {
            stats,
            cache: cache.counters(),
            cache_blocks: cache.capacity(),
            cache_buffers: cache.buffer_count(),
            dirty: cache.dirty_count(),
            disk_reads: DISK_READS.load(Ordering::Relaxed),
            disk_writes: DISK_WRITES.load(Ordering::Relaxed),
        })
    })
}

/// Checks the mounted file system (fsck-style, read-only: every inode, block pointer,
/// directory entry and the bitmap), after writing back so the disk agrees with the cache.
pub fn check() -> Result<spindle_service_fs::Report, FsCallError> {
    with_fs(|fs| {
        fs.sync()?;
        Ok(fs.check())
    })
}

/// The last disk error the file system met, if any.
pub fn last_disk_error() -> Option<String> {
    crate::arch::csr::without_interrupts(|| *LAST_DISK_ERROR.lock()).map(|error| alloc::format!("{error}"))
}

/// How [`open`] opens a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenMode {
    /// Reads allowed.
    pub read: bool,
    /// Writes allowed.
    pub write: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Cut it to 0 bytes.
    pub truncate: bool,
    /// Every write goes to the end.
    pub append: bool,
}

impl OpenMode {
    /// Whether the file may be changed through it.
    fn writes(self) -> bool {
        self.write || self.truncate || self.append
    }
}

/// An open file: its inode and position. A capability object (kind `File`): user space
/// holds it through its capability table.
pub struct OpenFile {
    inode: u32,
    mode: OpenMode,
    position: spin::Mutex<u64>,
    /// Opened by [`open_program`]: a running program's image.
    program: bool,
}

impl KernelObject for OpenFile {
    const KIND: ObjectKind = ObjectKind::File;
}

/// How often one inode is open: in all, for writing, as a running program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Opens {
    all: u32,
    writers: u32,
    programs: u32,
}

/// Open files per inode (see the module's note on open files).
static OPEN_COUNTS: spin::Mutex<alloc::collections::BTreeMap<u32, Opens>> = spin::Mutex::new(alloc::collections::BTreeMap::new());

/// Whether `inode` is open.
fn is_open(inode: u32) -> bool {
    crate::arch::csr::without_interrupts(|| OPEN_COUNTS.lock().contains_key(&inode))
}

/// Counts one more open of `inode` with `mode` (as a running program's image if
/// `program`), unless that would write a running program's file
/// ([`FsCallError::Running`]) or run a file open for writing ([`FsCallError::Busy`]).
/// Called under the file system's lock, so an unlink cannot slip in between.
fn count_open(inode: u32, mode: OpenMode, program: bool) -> Result<(), FsCallError> {
    crate::arch::csr::without_interrupts(|| {
        let mut counts = OPEN_COUNTS.lock();
        let opens = counts.entry(inode).or_default();
        let refused = if mode.writes() && opens.programs > 0 {
            Some(FsCallError::Running)
        } else if program && opens.writers > 0 {
            Some(FsCallError::Busy)
        } else {
            None
        };
        if let Some(refusal) = refused {
            if opens.all == 0 {
                counts.remove(&inode);
            }
            return Err(refusal);
        }
        opens.all += 1;
        opens.writers += u32::from(mode.writes());
        opens.programs += u32::from(program);
        Ok(())
    })
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        crate::arch::csr::without_interrupts(|| {
            let mut counts = OPEN_COUNTS.lock();
            if let Some(opens) = counts.get_mut(&self.inode) {
                opens.all -= 1;
                opens.writers -= u32::from(self.mode.writes());
                opens.programs -= u32::from(self.program);
                if opens.all == 0 {
                    counts.remove(&self.inode);
                }
            }
        });
    }
}

impl OpenFile {
    /// Its inode.
    pub fn inode(&self) -> u32 {
        self.inode
    }

    /// How it was opened.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    fn position(&self) -> u64 {
        crate::arch::csr::without_interrupts(|| *self.position.lock())
    }

    fn set_position(&self, position: u64) {
        crate::arch::csr::without_interrupts(|| *self.position.lock() = position);
    }
}

/// Opens `path` (absolute). A directory opens for reading only.
pub fn open(path: &str, mode: OpenMode) -> Result<Arc<OpenFile>, FsCallError> {
    with_fs(|fs| {
        let inode = match fs.lookup(path) {
            Ok(inode) => inode,
            Err(FsError::NotFound) if mode.create => fs.create_path(path)?,
            Err(error) => return Err(error.into()),
        };
        let stat = fs.stat(inode)?;
        if stat.kind == Kind::Directory && (mode.write || mode.truncate || mode.append) {
            return Err(FsError::IsADirectory.into());
        }
        // Counted (or refused: a running program's file) before it is truncated.
        count_open(inode, mode, false)?;
        let file = Arc::new(OpenFile { inode, mode, position: spin::Mutex::new(0), program: false });
        if mode.truncate && mode.write {
            fs.truncate(inode, 0)?;
            fs.store_mut().0.invalidate_file(inode, 0);
        }
        Ok(file)
    })
}

/// Opens the regular file `path` as a program's image (read only) and answers its size:
/// while the handle lives the file cannot be written or removed, so the process's image
/// pages read from it later ([`read_at`]) are the bytes it was started with. Errors:
/// [`FsCallError::Busy`] if it is open for writing; the file system's (not found, a
/// directory: `IsADirectory`).
pub fn open_program(path: &str) -> Result<(Arc<OpenFile>, u64), FsCallError> {
    with_fs(|fs| {
        let inode = fs.lookup(path)?;
        let stat = fs.stat(inode)?;
        if stat.kind == Kind::Directory {
            return Err(FsError::IsADirectory.into());
        }
        let mode = OpenMode { read: true, ..OpenMode::default() };
        count_open(inode, mode, true)?;
        Ok((Arc::new(OpenFile { inode, mode, position: spin::Mutex::new(0), program: true }), stat.size))
    })
}

/// Reads up to `buffer.len()` bytes of `file` at `offset` through the buffer cache (the
/// handle's position is neither used nor moved); fewer only at the file's end. For a
/// program's image pages, on the faulting process's strand (it blocks on the disk).
pub fn read_at(file: &OpenFile, offset: u64, buffer: &mut [u8]) -> Result<usize, FsCallError> {
    if !file.mode.read {
        return Err(FsCallError::NotPermitted);
    }
    with_fs(|fs| {
        let mut done = 0;
        while done < buffer.len() {
            let (count, _) = fs.read_at_sized(file.inode, offset + done as u64, &mut buffer[done..])?;
            if count == 0 {
                break;
            }
            done += count;
        }
        Ok(done)
    })
}

/// Reads up to `buffer.len()` bytes at the file's position and advances it; 0 at the end.
pub fn read(file: &OpenFile, buffer: &mut [u8]) -> Result<usize, FsCallError> {
    if !file.mode.read {
        return Err(FsCallError::NotPermitted);
    }
    let count = with_fs(|fs| {
        let position = file.position();
        let count = read_with_read_ahead(fs, file.inode, position, buffer)?;
        file.set_position(position + count as u64);
        Ok(count)
    })?;
    // The file system is free now: let the read-ahead strand (higher priority) start the
    // prefetch before this strand goes back to its computation.
    if READ_AHEAD_DONE.load(Ordering::Relaxed) < READ_AHEAD_QUEUED.load(Ordering::Relaxed) {
        crate::sched::yield_now();
    }
    Ok(count)
}

/// Reads at `offset` and then asks the cache's read-ahead rule what to prefetch after the
/// last block read; prefetches those blocks.
fn read_with_read_ahead(fs: &mut FileSystem<CacheStore>, inode: u32, offset: u64, buffer: &mut [u8]) -> Result<usize, FsCallError> {
    let (count, size) = fs.read_at_sized(inode, offset, buffer)?;
    if count > 0 {
        let file_blocks = size.div_ceil(BLOCK_BYTES as u64);
        let first = offset / BLOCK_BYTES as u64;
        let last = (offset + count as u64 - 1) / BLOCK_BYTES as u64;
        // The read-ahead rule sees every block read, in order (a 32 KiB read is eight
        // sequential block reads, not one jump of eight); what it names is read in
        // clusters, consecutive device blocks in one request. The default's cluster ends
        // where the file's blocks stop lying one after the other on the disk; it is looked
        // up only when the default would read ahead.
        let mut wanted = Vec::new();
        for block in first..=last {
            let event = fs.store_mut().0.read_ahead_event(inode, block, file_blocks);
            let cluster = if default_reads_ahead(&event) {
                let most = fs.store_mut().0.cache().config().read_ahead_cluster;
                fs.contiguous_blocks(inode, block + 1, most)?
            } else {
                0
            };
            let prefetch = fs.store_mut().0.decide_read_ahead(&event, cluster);
            for file_block in prefetch.first..prefetch.first.saturating_add(u64::from(prefetch.count)).min(file_blocks) {
                // A resident block's prefetch does nothing: leave it out (a read of
                // resident blocks then queues nothing and allocates nothing).
                if let Some(device_block) = fs.block_of(inode, file_block)?
                    && !fs.store_mut().0.cache().is_resident(device_block)
                {
                    wanted.push((device_block, Owner::of(inode, file_block)));
                }
            }
        }
        if !wanted.is_empty() {
            read_ahead_later(wanted);
        }
    }
    Ok(count)
}

/// Blocks named by read-ahead, waiting for the read-ahead strand.
static READ_AHEAD_QUEUE: spin::Mutex<alloc::collections::VecDeque<Vec<(u64, Owner)>>> = spin::Mutex::new(alloc::collections::VecDeque::new());
/// The read-ahead strand (started at the first read-ahead).
static READ_AHEAD_STRAND: spin::Once<Arc<crate::sched::Strand>> = spin::Once::new();
/// Read-ahead batches queued and done since boot.
static READ_AHEAD_QUEUED: AtomicU64 = AtomicU64::new(0);
static READ_AHEAD_DONE: AtomicU64 = AtomicU64::new(0);

/// Queues `wanted` for the read-ahead strand, which reads them into the cache while the
/// reader goes on (the reader's call yields to it once the file system is free, see
/// [`read`]): the disk works while the program computes, as read-ahead is meant to.
fn read_ahead_later(wanted: Vec<(u64, Owner)>) {
    crate::arch::csr::without_interrupts(|| READ_AHEAD_QUEUE.lock().push_back(wanted));
    READ_AHEAD_QUEUED.fetch_add(1, Ordering::Relaxed);
    let strand = READ_AHEAD_STRAND.call_once(|| {
        // Above the readers (NORMAL), below the disk service: it runs as soon as a reader
        // lets go of the file system, submits its cluster and sleeps on the disk.
        let priority = crate::sched::Priority::new(crate::sched::Priority::HIGHEST.level() as u8 - 1);
        crate::sched::spawn("fs-readahead", priority, read_ahead_strand).expect("the read-ahead strand's stack")
    });
    crate::sched::unblock(strand);
}

/// The read-ahead strand: prefetches queued batches, one at a time, under the file
/// system's lock.
fn read_ahead_strand() {
    loop {
        let batch = crate::arch::csr::without_interrupts(|| READ_AHEAD_QUEUE.lock().pop_front());
        match batch {
            Some(wanted) => {
                let mut state = FS.lock();
                if let State::Mounted(fs) = &mut *state {
                    // A prefetch that fails is only a lost hint: a read will ask again.
                    let _ = fs.store_mut().0.prefetch_blocks(&wanted);
                }
                drop(state);
                READ_AHEAD_DONE.fetch_add(1, Ordering::Relaxed);
            }
            None => crate::sched::block_current(),
        }
    }
}

/// Waits until every queued read-ahead is done (tests and benchmarks that count disk
/// requests or remount).
pub fn settle_read_ahead() {
    while READ_AHEAD_DONE.load(Ordering::Relaxed) < READ_AHEAD_QUEUED.load(Ordering::Relaxed) {
        crate::sched::sleep_ticks(1);
    }
}

/// Writes `data` at the file's position (the end for an append file) and advances it.
pub fn write(file: &OpenFile, data: &[u8]) -> Result<usize, FsCallError> {
    if !file.mode.write {
        return Err(FsCallError::NotPermitted);
    }
    with_fs(|fs| {
        let position = if file.mode.append { fs.stat(file.inode)?.size } else { file.position() };
        let count = fs.write_at(file.inode, position, data)?;
        file.set_position(position + count as u64);
        Ok(count)
    })
}

/// Where [`seek`] counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whence {
    /// The start of the file.
    Start,
    /// The current position.
    Current,
    /// The end of the file.
    End,
}

/// Moves the file's position to `offset` from `whence`; returns the new position.
pub fn seek(file: &OpenFile, offset: i64, whence: Whence) -> Result<u64, FsCallError> {
    let base = match whence {
        Whence::Start => 0,
        Whence::Current => file.position(),
        Whence::End => with_fs(|fs| Ok(fs.stat(file.inode)?.size))?,
    };
    let position = base.checked_add_signed(offset).ok_or(FsCallError::BadSeek)?;
    if position > spindle_service_fs::MAX_FILE_BYTES {
        return Err(FsCallError::BadSeek);
    }
    file.set_position(position);
    Ok(position)
}

/// Makes the file system's dirty blocks durable (all of them: `fsync` of one file writes
/// the metadata it depends on too, and the cache does not order one file's blocks apart).
pub fn sync() -> Result<(), FsCallError> {
    with_fs(|fs| fs.sync().map_err(FsCallError::from))
}

/// What `path` is.
pub fn stat(path: &str) -> Result<Stat, FsCallError> {
    with_fs(|fs| {
        let inode = fs.lookup(path)?;
        Ok(fs.stat(inode)?)
    })
}

/// The open file's [`Stat`].
pub fn stat_file(file: &OpenFile) -> Result<Stat, FsCallError> {
    with_fs(|fs| Ok(fs.stat(file.inode)?))
}

/// The entries of directory `path`, with their sizes.
pub fn list(path: &str) -> Result<Vec<(DirEntry, Stat)>, FsCallError> {
    with_fs(|fs| {
        let dir = fs.lookup(path)?;
        if fs.stat(dir)?.kind != Kind::Directory {
            return Err(FsError::NotADirectory.into());
        }
        let mut entries = Vec::new();
        let mut slot = 0;
        while let Some((at, entry)) = fs.entry_from(dir, slot)? {
            let stat = fs.stat(entry.inode)?;
            entries.push((entry, stat));
            slot = at + 1;
        }
        Ok(entries)
    })
}

/// Makes directory `path`.
pub fn mkdir(path: &str) -> Result<(), FsCallError> {
    with_fs(|fs| fs.mkdir_path(path).map(drop).map_err(FsCallError::from))
}

/// Splits an absolute path into its parent directory and last name.
fn split(path: &str) -> Result<(&str, &str), FsCallError> {
    let trimmed = path.trim_end_matches('/');
    match trimmed.rfind('/') {
        Some(at) if !trimmed[at + 1..].is_empty() => Ok((if at == 0 { "/" } else { &trimmed[..at] }, &trimmed[at + 1..])),
        _ => Err(FsError::NotFound.into()),
    }
}

/// Removes the file or empty directory `path`; its cached blocks go too. Errors: as the
/// file system says, and [`FsCallError::Busy`] while it is open.
pub fn unlink(path: &str) -> Result<(), FsCallError> {
    let (parent, name) = split(path)?;
    with_fs(|fs| {
        let dir = fs.lookup(parent)?;
        let inode = fs.lookup_in(dir, name)?;
        if is_open(inode) {
            return Err(FsCallError::Busy);
        }
        fs.unlink(dir, name)?;
        fs.store_mut().0.invalidate_file(inode, 0);
        cache_events::clear_hints(inode);
        Ok(())
    })
}

/// The inode of `path` (for binding a policy to the file).
pub fn inode_of(path: &str) -> Result<u32, FsCallError> {
    with_fs(|fs| Ok(fs.lookup(path)?))
}

/// What the cache holds of one file: resident and dirty blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileCacheState {
    /// The file's inode.
    pub inode: u32,
    /// Its blocks in the cache.
    pub resident: u64,
    /// Of those, the ones not yet written back.
    pub dirty: u64,
}

/// The cache's exported state (Infokernel): counters, the next victims in eviction order
/// (at most `victims`), and, for `file` (a path), its resident and dirty blocks.
pub fn cache_state(victims: usize, file: Option<&str>) -> Result<(FsStatus, Vec<spindle_service_bcache::BlockInfo>, Option<FileCacheState>), FsCallError> {
    let status = status()?;
    with_fs(|fs| {
        let per_file = match file {
            Some(path) => {
                let inode = fs.lookup(path)?;
                let counts = fs.store_mut().0.cache().file_counts(inode);
                Some(FileCacheState { inode, resident: counts.resident as u64, dirty: counts.dirty as u64 })
            }
            None => None,
        };
        let mut next = alloc::vec![spindle_service_bcache::BlockInfo::default(); victims];
        let count = fs.store_mut().0.cache().next_victims(&mut next);
        next.truncate(count);
        Ok((status.clone(), next, per_file))
    })
}

/// The whole contents of file `path` (a program or an extension artifact), at most
/// [`MAX_WHOLE_FILE`] bytes.
pub fn read_file(path: &str) -> Result<Vec<u8>, FsCallError> {
    with_fs(|fs| {
        let inode = fs.lookup(path)?;
        let stat = fs.stat(inode)?;
        if stat.kind == Kind::Directory {
            return Err(FsError::IsADirectory.into());
        }
        if stat.size > MAX_WHOLE_FILE {
            return Err(FsCallError::TooLarge(stat.size));
        }
        let mut bytes = alloc::vec![0u8; stat.size as usize];
        let mut done = 0;
        while done < bytes.len() {
            let count = read_with_read_ahead(fs, inode, done as u64, &mut bytes[done..])?;
            if count == 0 {
                break;
            }
            done += count;
        }
        bytes.truncate(done);
        Ok(bytes)
    })
}

/// Creates (or truncates) file `path` with `data`.
pub fn write_file(path: &str, data: &[u8]) -> Result<(), FsCallError> {
    let file = open(path, OpenMode { write: true, create: true, truncate: true, ..OpenMode::default() })?;
    let mut done = 0;
    while done < data.len() {
        let count = write(&file, &data[done..])?;
        if count == 0 {
            return Err(FsError::NoSpace.into());
        }
        done += count;
    }
    Ok(())
}
