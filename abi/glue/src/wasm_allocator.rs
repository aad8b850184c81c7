//! The Wasm glue's global allocator: the extension's heap is its own linear memory.

/// The Wasm glue's global allocator: power-of-two size classes over `memory.grow`.
///
/// Blocks of 16 bytes to 64 KiB are carved, aligned to their size, from pages grown one at
/// a time; larger blocks are whole pages grown for them. A freed block goes on its class's
/// free list and is reused by the next allocation of that class; memory is never returned
/// to the kernel (linear memory cannot shrink), so the quota bounds the peak. Alignments
/// above a page are refused. Simple rather than tight: a handler's working set is small.
#[derive(Clone, Copy, Debug, Default)]
pub struct WasmAllocator;

#[cfg(target_arch = "wasm32")]
mod allocator {
    use core::alloc::{GlobalAlloc, Layout};
    use core::cell::UnsafeCell;

    use super::WasmAllocator;
    use spindle_abi::wasm::WASM_PAGE_SIZE;

    /// Smallest class: 2^4 = 16 bytes (room for the free-list link, and a useful minimum).
    const MIN_CLASS: u32 = 4;
    /// Classes up to this one are carved from shared pages; larger ones are whole pages.
    const PAGE_CLASS: u32 = WASM_PAGE_SIZE.trailing_zeros();
    /// Number of classes (2^4 … 2^31 bytes).
    const CLASSES: usize = 32;

    struct State {
        /// Head of each class's free list (0: empty); a free block's first word links on.
        free: [usize; CLASSES],
        /// Unused part of the page being carved: `[next, end)`.
        next: usize,
        end: usize,
    }

    struct Shared(UnsafeCell<State>);

    // SAFETY: a `wasm32-unknown-unknown` module is single-threaded (no `atomics` target
    // feature), and the kernel runs one call into an instance at a time, so the state is
    // never accessed concurrently.
    unsafe impl Sync for Shared {}

    static STATE: Shared = Shared(UnsafeCell::new(State { free: [0; CLASSES], next: 0, end: 0 }));

    /// The class (log2 of the block size) serving `layout`; `None` if it cannot be served.
    fn class_of(layout: Layout) -> Option<u32> {
        if layout.align() > WASM_PAGE_SIZE {
            return None;
        }
        let size = layout.size().max(layout.align()).max(1 << MIN_CLASS);
        let rounded = size.checked_next_power_of_two()?;
        Some(rounded.trailing_zeros())
    }

    /// Grows linear memory by `pages`; the address of the first new byte.
    fn grow(pages: usize) -> Option<usize> {
        let previous = core::arch::wasm32::memory_grow(0, pages);
        (previous != usize::MAX).then(|| previous * WASM_PAGE_SIZE)
    }

    impl State {
        fn allocate(&mut self, class: u32) -> *mut u8 {
            let size = 1usize << class;
            let head = self.free[class as usize];
            if head != 0 {
                // SAFETY: `head` is a free block of this class handed back by `free`, at
                // least 16 bytes and aligned to its size, inside linear memory; its first
                // word holds the next link written by `free`.
                self.free[class as usize] = unsafe { (head as *const usize).read() };
                return head as *mut u8;
            }
            if class > PAGE_CLASS {
                return grow(size / WASM_PAGE_SIZE).map_or(core::ptr::null_mut(), |address| address as *mut u8);
            }
            let mut start = self.next.next_multiple_of(size);
            if start + size > self.end || self.end == 0 {
                let Some(page) = grow(1) else { return core::ptr::null_mut() };
                if page != self.end {
                    self.next = page;
                }
                self.end = page + WASM_PAGE_SIZE;
                start = self.next.next_multiple_of(size);
            }
            self.next = start + size;
            start as *mut u8
        }

        fn free(&mut self, block: *mut u8, class: u32) {
            // SAFETY: `block` was handed out for this class (the `GlobalAlloc` contract of
            // `dealloc`), so it is at least 16 bytes, aligned to its size and unused now:
            // its first word may hold the link.
            unsafe { (block as *mut usize).write(self.free[class as usize]) };
            self.free[class as usize] = block as usize;
        }
    }

    // SAFETY: `alloc` returns null or a block of `2^class_of(layout)` bytes — at least
    // `layout.size()`, aligned to at least `layout.align()` — inside linear memory, handed
    // out to no one else until `dealloc` returns it with a layout of the same class
    // (`realloc` keeps a block only while the new layout stays in its class).
    unsafe impl GlobalAlloc for WasmAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let Some(class) = class_of(layout) else { return core::ptr::null_mut() };
            // SAFETY: single-threaded, and no reference to the state outlives this call.
            unsafe { (*STATE.0.get()).allocate(class) }
        }

        unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
            if let Some(class) = class_of(layout) {
                // SAFETY: as in `alloc`; `pointer` came from `alloc` with this layout.
                unsafe { (*STATE.0.get()).free(pointer, class) }
            }
        }

        unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else { return core::ptr::null_mut() };
            if class_of(new_layout) == class_of(layout) {
                return pointer;
            }
            // SAFETY: `new_layout` is valid (checked above).
            let new = unsafe { self.alloc(new_layout) };
            if !new.is_null() {
                // SAFETY: both blocks are live and distinct; the old one holds at least
                // `min(old, new)` initialised bytes the caller may read.
                unsafe { core::ptr::copy_nonoverlapping(pointer, new, layout.size().min(new_size)) };
                // SAFETY: `pointer` came from `alloc` with `layout` and is not used again.
                unsafe { self.dealloc(pointer, layout) };
            }
            new
        }
    }
}
