//! Per-extension memory arenas: where a native extension's `alloc` comes from.
//!
//! DESIGN.md §5: "extension memory comes from a per-extension arena with a quota, so a
//! killed extension is reclaimed whole without running its destructors". Each native
//! extension gets one [`ExtensionArena`] when it is loaded: its manifest's
//! `memory_quota_bytes`, rounded up to pages (at most [`MAX_ARENA_SIZE`]), of zeroed frames
//! mapped read-write (never executable) in the extension's slot after its image, with an
//! unmapped guard page between (see [`super::native`]). A buddy heap
//! (`buddy_system_allocator::Heap`) hands out blocks of it through the kernel functions
//! `spindle_extension_alloc`/`spindle_extension_free`, which the native glue's global
//! allocator (`spindle_abi::allocator::ExtensionAllocator`) calls. Unloading the extension
//! forgets the heap, unmaps the pages and frees the frames at once: no destructor of the
//! extension runs, whatever state it died in.
//!
//! The kernel knows which extension is calling by where the call comes from: the entries
//! of `spindle_extension_alloc`/`free` pass on their return address, which lies in the
//! calling extension's image, and each image's slot names its arena
//! (`native::with_arena_of_code`). Nothing is set or restored per call into an
//! extension (the arena is found lazily, when the extension allocates), and a kernel
//! caller or a built-in extension is refused by the same test.
//!
//! Lock discipline: the heap's lock is taken with interrupts off, so the budget timer can
//! never abort an extension while it holds its own arena's lock. Reclaiming an arena never
//! takes that lock (the frames belong to the image, see [`super::native::NativeImage`]), so
//! unloading cannot hang even on an arena abandoned by a trap inside the allocator.
//!
//! Known limits: the buddy heap keeps its free lists inside the free blocks, so an
//! extension that broke Rust's memory safety (a compiler soundness bug; `unsafe` is
//! forbidden) could corrupt them — such code already runs in supervisor mode with the
//! kernel mapped, so this adds no power it lacks. Built-in extensions are linked into the
//! kernel and use the kernel heap (a binary has one global allocator): they have no
//! per-extension quota.

use alloc::string::String;
use core::alloc::Layout;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use buddy_system_allocator::Heap;

use crate::arch::PAGE_SIZE;

/// Largest arena a native extension may have (its slot holds the image, a guard page and
/// the arena; see `native::MAX_IMAGE_SIZE`).
pub const MAX_ARENA_SIZE: usize = 8 * 1024 * 1024;

/// Buddy orders of an arena's heap: blocks of up to 2^(ORDER - 1) = [`MAX_ARENA_SIZE`]
/// bytes.
const ARENA_ORDER: usize = MAX_ARENA_SIZE.trailing_zeros() as usize + 1;

/// Why an arena could not be sized for a manifest's quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaTooLarge {
    /// The manifest's `memory_quota_bytes`.
    pub quota: u64,
    /// [`MAX_ARENA_SIZE`].
    pub maximum: usize,
}

impl fmt::Display for QuotaTooLarge {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "memory quota of {} bytes is above the largest arena ({} bytes)", self.quota, self.maximum)
    }
}

/// Bytes of arena for a manifest's quota: rounded up to whole pages; 0 for no heap.
///
/// Errors: [`QuotaTooLarge`] above [`MAX_ARENA_SIZE`].
pub fn size_for_quota(quota: u64) -> Result<usize, QuotaTooLarge> {
    let too_large = QuotaTooLarge { quota, maximum: MAX_ARENA_SIZE };
    let bytes = usize::try_from(quota).map_err(|_| too_large)?;
    if bytes > MAX_ARENA_SIZE {
        return Err(too_large);
    }
    Ok(bytes.div_ceil(PAGE_SIZE) * PAGE_SIZE)
}

/// Why a free was refused (the kernel ignores the block and prints a warning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeError {
    /// `size` and `align` do not form a valid layout.
    BadLayout,
    /// The block does not lie inside the arena, aligned as the heap hands blocks out.
    NotInArena,
    /// The heap has fewer bytes allocated than the block: it was never allocated.
    NotAllocated,
    /// The arena was already released (its extension unloaded).
    Released,
}

impl fmt::Display for FreeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            FreeError::BadLayout => "size and alignment are not a valid layout",
            FreeError::NotInArena => "the block is not inside the caller's arena",
            FreeError::NotAllocated => "the block was never allocated",
            FreeError::Released => "the arena was already released",
        })
    }
}

/// An arena's usage (shown by `ext list`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaUsage {
    /// Bytes held by live allocations (rounded to the buddy heap's block sizes).
    pub used_bytes: usize,
    /// Bytes the arena has (the quota rounded up to pages).
    pub quota_bytes: usize,
}

/// One native extension's heap: a buddy allocator over its arena pages.
pub struct ExtensionArena {
    /// The extension's name (for warnings).
    name: String,
    /// Virtual address of the first byte (page-aligned, in the extension's slot).
    start: usize,
    /// Bytes (a multiple of the page size; 0 for no heap).
    size: usize,
    /// The buddy heap over `[start, start + size)`; locked with interrupts off.
    heap: spin::Mutex<Heap<ARENA_ORDER>>,
    /// Set once the arena's pages are about to be unmapped: nothing is handed out after.
    released: AtomicBool,
}

impl ExtensionArena {
    /// An arena with no memory: every allocation fails (quota 0, or before mapping).
    pub fn empty(name: &str) -> ExtensionArena {
        ExtensionArena { name: String::from(name), start: 0, size: 0, heap: spin::Mutex::new(Heap::empty()), released: AtomicBool::new(false) }
    }

    /// An arena over `[start, start + size)`.
    ///
    /// # Safety
    /// - `start` and `size` are page-aligned, `size` is at most [`MAX_ARENA_SIZE`];
    /// - the range is mapped read-write in the kernel address space and stays mapped, to
    ///   memory nothing else uses, until [`ExtensionArena::release`] has been called.
    pub unsafe fn new(name: &str, start: usize, size: usize) -> ExtensionArena {
        debug_assert!(start.is_multiple_of(PAGE_SIZE) && size.is_multiple_of(PAGE_SIZE) && size <= MAX_ARENA_SIZE);
        let arena = ExtensionArena::empty(name);
        if size > 0 {
            // SAFETY: by this function's contract the range is mapped read-write, used by
            // nothing else, and stays so until `release`, which empties the heap first.
            unsafe { arena.heap.lock().init(start, size) };
        }
        ExtensionArena { start, size, ..arena }
    }

    /// Virtual address of the arena's first byte (0 for an empty arena).
    pub fn start(&self) -> usize {
        self.start
    }

    /// The arena's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Allocates `size` bytes aligned to `align`; null when the arena has no block large
    /// enough (the quota is exhausted), the layout is invalid, or the arena was released.
    pub fn allocate(&self, size: usize, align: usize) -> *mut u8 {
        let Ok(layout) = Layout::from_size_align(size, align) else { return core::ptr::null_mut() };
        crate::arch::csr::without_interrupts(|| {
            let mut heap = self.heap.lock();
            if self.released.load(Ordering::Acquire) {
                return core::ptr::null_mut();
            }
            heap.alloc(layout).map_or(core::ptr::null_mut(), NonNull::as_ptr)
        })
    }

    /// Returns a block from [`ExtensionArena::allocate`] with the same `size` and `align`.
    ///
    /// Errors: the [`FreeError`] saying why the block was not taken back (nothing is
    /// changed then).
    pub fn free(&self, pointer: *mut u8, size: usize, align: usize) -> Result<(), FreeError> {
        let layout = Layout::from_size_align(size, align).map_err(|_| FreeError::BadLayout)?;
        // The block the heap handed out for this layout (as `Heap::alloc` computes it):
        // buddy blocks are aligned to their own size.
        let block = layout.size().next_power_of_two().max(layout.align()).max(core::mem::size_of::<usize>());
        let address = pointer as usize;
        let inside = block <= self.size
            && address >= self.start
            && address - self.start <= self.size - block
            && address.is_multiple_of(block);
        let pointer = NonNull::new(pointer).filter(|_| inside).ok_or(FreeError::NotInArena)?;
        crate::arch::csr::without_interrupts(|| {
            let mut heap = self.heap.lock();
            if self.released.load(Ordering::Acquire) {
                return Err(FreeError::Released);
            }
            if heap.stats_alloc_actual() < block || heap.stats_alloc_user() < layout.size() {
                return Err(FreeError::NotAllocated);
            }
            // The trusted glue's `GlobalAlloc::dealloc` passes on what Rust gave it.
            // SAFETY: the block is inside this arena, size-aligned (checked above), so the heap's
            // writes for it (free-list node, buddy merges) stay in the arena's mapped pages; it
            // matches an earlier allocation with `layout` by that `dealloc`'s contract.
            unsafe { heap.dealloc(pointer, layout) };
            Ok(())
        })
    }

    /// Bytes in use and the arena's size; `None` if the heap's lock is held (a call in
    /// progress, or one abandoned by a trap inside the allocator).
    pub fn usage(&self) -> Option<ArenaUsage> {
        crate::arch::csr::without_interrupts(|| {
            let heap = self.heap.try_lock()?;
            Some(ArenaUsage { used_bytes: heap.stats_alloc_actual(), quota_bytes: self.size })
        })
    }

    /// Forgets every block, so nothing is handed out from the arena again; called just
    /// before its pages are unmapped and its frames freed. Never waits for the heap's
    /// lock (one abandoned by a trap must not hang the unload).
    pub fn release(&self) {
        self.released.store(true, Ordering::Release);
        crate::arch::csr::without_interrupts(|| {
            if let Some(mut heap) = self.heap.try_lock() {
                *heap = Heap::empty();
            }
        });
    }
}

/// Warns about a refused free on the console (`[ext]`), naming the extension.
pub fn warn_refused_free(arena: &ExtensionArena, pointer: *mut u8, size: usize, align: usize, error: FreeError) {
    crate::println!(
        "[ext] `{}`: free of {size} bytes (align {align}) at {:#x} ignored: {error} ({:#x}..{:#x})",
        arena.name,
        pointer as usize,
        arena.start,
        arena.start + arena.size
    );
}
