//! The kernel heap: a buddy allocator over a fixed region carved out of RAM at boot.
//!
//! The heap lock is taken with interrupts off on this hart, so a handler aborted by
//! the timer (budget overrun, DESIGN.md §6) can never be stopped inside the allocator
//! with the lock held.

use core::alloc::{GlobalAlloc, Layout};

use buddy_system_allocator::LockedHeap;

/// Largest block order: 2^32 bytes, far above the heap size.
const HEAP_ORDER: usize = 32;

/// The buddy heap behind an interrupt-disabling lock discipline.
struct KernelHeap(LockedHeap<HEAP_ORDER>);

// SAFETY: delegates to `LockedHeap`'s `GlobalAlloc` (a correct allocator); disabling
// interrupts around each call changes only when the hart can be interrupted.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller's `GlobalAlloc::alloc` contract.
        crate::arch::csr::without_interrupts(|| unsafe { self.0.alloc(layout) })
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller's `GlobalAlloc::dealloc` contract.
        crate::arch::csr::without_interrupts(|| unsafe { self.0.dealloc(pointer, layout) })
    }
}

#[global_allocator]
static HEAP: KernelHeap = KernelHeap(LockedHeap::empty());

/// Hands `[start, start + size)` to the heap. Called once at boot.
pub fn init(start: usize, size: usize) {
    // SAFETY: `mm::init` carves this range out of free RAM (removed from the frame
    // allocator's ranges and from everything else), it is identity-mapped, and this is
    // called exactly once before any allocation.
    unsafe { HEAP.0.lock().init(start, size) };
}

/// Heap usage counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes the heap manages.
    pub total_bytes: usize,
    /// Bytes requested by live allocations.
    pub requested_bytes: usize,
    /// Bytes actually reserved for live allocations (rounded to buddy sizes).
    pub allocated_bytes: usize,
}

/// Current heap counters (used by `mem` and by leak checks in tests).
pub fn stats() -> HeapStats {
    crate::arch::csr::without_interrupts(|| {
        let heap = HEAP.0.lock();
        HeapStats {
            total_bytes: heap.stats_total_bytes(),
            requested_bytes: heap.stats_alloc_user(),
            allocated_bytes: heap.stats_alloc_actual(),
        }
    })
}
