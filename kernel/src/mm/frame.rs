//! The physical frame allocator: a buddy allocator over 4 KiB frames, with counters, and
//! the frame table (`spindle_service_frames::FrameTable`) that names every allocated
//! frame's owner.
//!
//! Every run the allocator hands out is recorded in the table for its owner at once — the
//! kernel's unless the caller names another ([`allocate_zeroed_for`]: an address space, an
//! extension's arena, the buffer cache) — and forgotten when the run is dropped. So the
//! frames the table holds for someone are exactly the allocated frames
//! ([`audit`], checked by `mem` and the tests).
//!
//! Its free lists, and the table, are kept in the kernel heap, also when frames are taken
//! or given back inside a private heap's routing (see [`super::private_heap`]).

use core::sync::atomic::{AtomicUsize, Ordering};

use buddy_system_allocator::FrameAllocator;
use spindle_service_frames::{FrameTable, Owner};

use crate::arch::PAGE_SIZE;
use crate::arch::sv39::FrameSource;

/// Largest block order (2^ORDER frames).
const FRAME_ORDER: usize = 32;

static FRAMES: spin::Mutex<FrameAllocator<FRAME_ORDER>> = spin::Mutex::new(FrameAllocator::new());
static TOTAL_FRAMES: AtomicUsize = AtomicUsize::new(0);
static ALLOCATED_FRAMES: AtomicUsize = AtomicUsize::new(0);
/// Who owns each frame (built over the boot RAM on first use).
static TABLE: spin::Mutex<Option<FrameTable>> = spin::Mutex::new(None);

/// Runs `body` on the frame table (interrupts off, its allocations on the kernel heap),
/// building it on first use over the RAM found at boot.
pub fn with_table<T>(body: impl FnOnce(&mut FrameTable) -> T) -> T {
    super::private_heap::on_kernel_heap(|| {
        crate::arch::csr::without_interrupts(|| {
            let mut table = TABLE.lock();
            let table = table.get_or_insert_with(|| {
                let (low, high) = super::boot_free_ranges()
                    .map(|ranges| ranges.iter().fold((usize::MAX, 0), |(low, high), (start, end)| (low.min(start), high.max(end))))
                    .unwrap_or((PAGE_SIZE, 2 * PAGE_SIZE));
                let base = (low / PAGE_SIZE).max(1) as u64;
                let length = (high.saturating_sub(low) / PAGE_SIZE).max(1) as u64;
                // Boot RAM is at most a few GiB: within MAX_FRAMES, and the base is not 0.
                FrameTable::new(base, length).expect("RAM fits a frame table")
            });
            body(table)
        })
    })
}

/// Checks the frame accounting: the frames the table records for an owner are exactly
/// the allocated ones (no frame allocated without an owner, none owned after its free),
/// and the table is consistent in itself (`FrameTable::audit`). For `mem` and the tests.
pub fn audit() -> Result<(), alloc::string::String> {
    let (owned, allocated, consistent) =
        with_table(|table| (table.len() - table.free_frames(), ALLOCATED_FRAMES.load(Ordering::Relaxed) as u64, table.audit()));
    consistent.map_err(|error| alloc::format!("frame table: {error}"))?;
    if owned == allocated { Ok(()) } else { Err(alloc::format!("the frame table records {owned} owned frames, the allocator {allocated} allocated")) }
}

/// Adds the page-aligned range `[start, end)` to the allocator (boot only).
pub fn add_range(start: usize, end: usize) {
    let first = start / PAGE_SIZE;
    let last = end / PAGE_SIZE;
    if first >= last {
        return;
    }
    FRAMES.lock().add_frame(first, last);
    TOTAL_FRAMES.fetch_add(last - first, Ordering::Relaxed);
}

/// A run of physically contiguous frames owned by the holder; freed on drop.
#[derive(Debug)]
pub struct FrameRun {
    start: usize,
    count: usize,
}

impl FrameRun {
    /// Physical (= kernel virtual) address of the first frame.
    pub fn address(&self) -> usize {
        self.start
    }
    /// Number of frames.
    pub fn count(&self) -> usize {
        self.count
    }
    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.count * PAGE_SIZE
    }
    /// Copies `bytes` to byte `offset` of the run; false (nothing copied) if the range
    /// leaves the run.
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> bool {
        if offset.checked_add(bytes.len()).is_none_or(|end| end > self.size()) {
            return false;
        }
        // A run's frames are reached only through it (one mapped into a user space is not
        // written by the kernel elsewhere while its owner writes here).
        // SAFETY: the run is owned by `self`, borrowed mutably for the slice's life, so no
        // other reference reaches these bytes meanwhile; identity-mapped read-write for the
        // kernel; the range lies inside the run (checked above).
        let target = unsafe { core::slice::from_raw_parts_mut((self.start + offset) as *mut u8, bytes.len()) };
        copy_bytes(target, bytes);
        true
    }

    /// Copies `buffer.len()` bytes from byte `offset` of the run into `buffer`; false
    /// (nothing copied) if the range leaves the run.
    pub fn read(&self, offset: usize, buffer: &mut [u8]) -> bool {
        if offset.checked_add(buffer.len()).is_none_or(|end| end > self.size()) {
            return false;
        }
        // A page still mapped into a user space could change under its program; the one
        // caller, a swap write, copies a page whose leaf is already gone.
        // SAFETY: the run is owned by `self`, borrowed for the slice's life, so nothing
        // writes it meanwhile; identity-mapped; the range lies inside it (checked above).
        let source = unsafe { core::slice::from_raw_parts((self.start + offset) as *const u8, buffer.len()) };
        copy_bytes(buffer, source);
        true
    }

    /// The bytes of the run's first frame.
    pub fn first_page(&self) -> &[u8; PAGE_SIZE] {
        // A run has at least one frame (`allocate_zeroed` refuses 0).
        // SAFETY: that frame is page-aligned, identity-mapped read-write and owned by
        // `self`, which the reference borrows: it is not freed or written meanwhile.
        unsafe { &*(self.start as *const [u8; PAGE_SIZE]) }
    }

    /// The bytes of the run's first frame, to change them.
    pub fn first_page_mut(&mut self) -> &mut [u8; PAGE_SIZE] {
        // SAFETY: as in `first_page`; the reference borrows `self` mutably, so it is the
        // only way to the frame while it lives.
        unsafe { &mut *(self.start as *mut [u8; PAGE_SIZE]) }
    }

    /// Gives up ownership without freeing (for frames that live forever, e.g. kernel
    /// page tables); returns the address.
    pub fn leak(self) -> usize {
        let address = self.start;
        core::mem::forget(self);
        address
    }
}

impl Drop for FrameRun {
    fn drop(&mut self) {
        // The table, the allocator and the counter change together (interrupts off), so no
        // strand sees them disagree ([`audit`]).
        crate::arch::csr::without_interrupts(|| {
            // Forgotten by the table first (unpinned: a pager's page is pinned while mapped).
            let first = (self.start / PAGE_SIZE) as u64;
            with_table(|table| {
                for frame in first..first + self.count as u64 {
                    let _ = table.unpin(frame);
                    let _ = table.free(frame);
                }
            });
            // The allocator's free lists allocate: on the kernel heap, whoever frees the run.
            super::private_heap::on_kernel_heap(|| FRAMES.lock().dealloc(self.start / PAGE_SIZE, self.count));
            ALLOCATED_FRAMES.fetch_sub(self.count, Ordering::Relaxed);
        });
    }
}

/// Allocates `count` contiguous zeroed frames for the kernel, or `None` when memory is
/// exhausted.
pub fn allocate_zeroed(count: usize) -> Option<FrameRun> {
    allocate_zeroed_for(count, Owner::Kernel)
}

/// Allocates `count` contiguous zeroed frames recorded in the frame table as `owner`'s, or
/// `None` when memory is exhausted or the table refuses them for `owner` (over its memory
/// limit).
pub fn allocate_zeroed_for(count: usize, owner: Owner) -> Option<FrameRun> {
    let run = allocate_for(count, owner)?;
    // SAFETY: the frames were just taken from the allocator, so nothing else refers to
    // them; RAM is identity-mapped read-write for the kernel; a run is whole pages,
    // page-aligned.
    unsafe { zero_blocks(run.start as *mut u64, run.size() / BLOCK) };
    Some(run)
}

/// [`allocate_zeroed_for`] without the zeroing: the frames hold whatever they last held.
/// Only for memory that nothing outside the kernel's own compiled code ever reads, and
/// that code writes before it reads — a strand's kernel stack (zeroing one is 64 pages,
/// about 41,000 instructions). Never for a page that user space, an extension or a device
/// may see.
pub fn allocate_for(count: usize, owner: Owner) -> Option<FrameRun> {
    if count == 0 {
        return None;
    }
    // The allocator, the counter and the table change together (interrupts off), so no
    // strand sees them disagree ([`audit`]).
    crate::arch::csr::without_interrupts(|| {
        let first = super::private_heap::on_kernel_heap(|| FRAMES.lock().alloc(count))?;
        ALLOCATED_FRAMES.fetch_add(count, Ordering::Relaxed);
        let frames = first as u64..(first + count) as u64;
        // All or nothing: a refused frame leaves the run unrecorded, and its drop frees it.
        let recorded = with_table(|table| {
            let claimed = frames.clone().take_while(|&frame| table.claim(frame, owner).is_ok()).count();
            if claimed < count {
                for frame in frames.clone().take(claimed) {
                    let _ = table.free(frame);
                }
            }
            claimed == count
        });
        let run = FrameRun { start: first * PAGE_SIZE, count };
        // Refused: freed here, still with interrupts off.
        recorded.then_some(run)
    })
}

/// Bytes per unrolled step of [`zero_blocks`] and [`copy_blocks`].
const BLOCK: usize = 64;

/// Zeroes `blocks` × 64 bytes at `start`, eight word stores per step. The library's
/// `memset` stores one word per three instructions (1,557 instructions a page, traced);
/// this, ten per eight words (about 640). Volatile stores, so the compiler keeps the
/// unrolled loop instead of turning it back into a `memset` call.
///
/// # Safety
/// `start` is 8-aligned, and `[start, start + 64 × blocks)` is mapped writable memory that
/// nothing else refers to during the call.
unsafe fn zero_blocks(start: *mut u64, blocks: usize) {
    for block in 0..blocks {
        // SAFETY: block `block` lies inside the range the caller vouches for.
        let words = unsafe { start.add(block * BLOCK / 8) };
        for word in 0..BLOCK / 8 {
            // SAFETY: word `word` of that block, 8-aligned.
            unsafe { words.add(word).write_volatile(0) };
        }
    }
}

/// Copies `source` into `target` (the shorter's length): the 64-byte blocks eight words
/// at a time when both start 8-aligned (a page of a program's image, of swap, of a
/// buffer), the rest as `copy_from_slice` does.
pub fn copy_bytes(target: &mut [u8], source: &[u8]) {
    debug_assert_eq!(target.len(), source.len(), "copy_bytes: slices of different lengths");
    let length = target.len().min(source.len());
    let (target, source) = (&mut target[..length], &source[..length]);
    let aligned = (target.as_ptr() as usize | source.as_ptr() as usize).is_multiple_of(8);
    let block_bytes = if aligned { length / BLOCK * BLOCK } else { 0 };
    if block_bytes > 0 {
        // SAFETY: both slices are live for the call and cannot overlap (one is borrowed
        // mutably); both start 8-aligned (tested), and their first `block_bytes` bytes
        // are whole 64-byte blocks inside them.
        unsafe { copy_blocks(source.as_ptr().cast::<u64>(), target.as_mut_ptr().cast::<u64>(), block_bytes / BLOCK) };
    }
    target[block_bytes..].copy_from_slice(&source[block_bytes..]);
}

/// Copies `blocks` × 64 bytes from `source` to `destination`, eight words per step (the
/// library's `memcpy` moves a word per five instructions when both ends are aligned, and
/// about ten when they are not; traced: 5,182 instructions for a page of a program's
/// image). Volatile accesses, as in [`zero_blocks`].
///
/// # Safety
/// Both pointers are 8-aligned; `[source, +64 × blocks)` is readable and
/// `[destination, +64 × blocks)` writable, they do not overlap, and nothing writes either
/// during the call.
unsafe fn copy_blocks(source: *const u64, destination: *mut u64, blocks: usize) {
    for block in 0..blocks {
        let offset = block * BLOCK / 8;
        for word in 0..BLOCK / 8 {
            // SAFETY: word `word` of block `block` of both ranges, as the caller vouches.
            unsafe { destination.add(offset + word).write_volatile(source.add(offset + word).read_volatile()) };
        }
    }
}

/// Frame counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameStats {
    /// Frames managed.
    pub total: usize,
    /// Frames currently allocated.
    pub allocated: usize,
}

/// Current frame counters (used by `mem` and by leak checks).
pub fn stats() -> FrameStats {
    FrameStats { total: TOTAL_FRAMES.load(Ordering::Relaxed), allocated: ALLOCATED_FRAMES.load(Ordering::Relaxed) }
}

/// Hands out frames that are never freed (kernel page-table pages).
pub struct PermanentFrames;

impl FrameSource for PermanentFrames {
    fn allocate_zeroed_frame(&mut self) -> Option<usize> {
        allocate_zeroed(1).map(FrameRun::leak)
    }
}
