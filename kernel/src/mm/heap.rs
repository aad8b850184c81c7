//! The kernel heap: a buddy allocator over a fixed region carved out of RAM at boot.

use buddy_system_allocator::LockedHeap;

/// Largest block order: 2^32 bytes, far above the heap size.
const HEAP_ORDER: usize = 32;

#[global_allocator]
static HEAP: LockedHeap<HEAP_ORDER> = LockedHeap::empty();

/// Hands `[start, start + size)` to the heap. Called once at boot.
pub fn init(start: usize, size: usize) {
    // SAFETY: `mm::init` carves this range out of free RAM (removed from the frame
    // allocator's ranges and from everything else), it is identity-mapped, and this is
    // called exactly once before any allocation.
    unsafe { HEAP.lock().init(start, size) };
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
        let heap = HEAP.lock();
        HeapStats {
            total_bytes: heap.stats_total_bytes(),
            requested_bytes: heap.stats_alloc_user(),
            allocated_bytes: heap.stats_alloc_actual(),
        }
    })
}
