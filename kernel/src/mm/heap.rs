//! The kernel heap: a buddy allocator over a fixed region carved out of RAM at boot.
//!
//! The heap lock is taken with interrupts off on this hart, so a handler aborted by
//! the timer (budget overrun, DESIGN.md §6) can never be stopped inside the allocator
//! with the lock held.
//!
//! The global allocator also serves [private heaps](super::private_heap): while a hart
//! routes its allocations to one, they are taken from it (the kernel heap serves them
//! only past its limit), and every block is freed where its address lies.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use buddy_system_allocator::LockedHeap;

use super::private_heap;

/// Largest block order: 2^32 bytes, far above the heap size.
const HEAP_ORDER: usize = 32;

/// The buddy heap behind an interrupt-disabling lock discipline.
struct KernelHeap(LockedHeap<HEAP_ORDER>);

/// The kernel heap's range `[start, end)` (set once at boot).
static HEAP_START: AtomicUsize = AtomicUsize::new(0);
static HEAP_END: AtomicUsize = AtomicUsize::new(0);
/// Allocations made since boot (kernel and private heaps), for [`HeapStats::allocations`].
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

fn in_kernel_heap(pointer: *mut u8) -> bool {
    let address = pointer as usize;
    address >= HEAP_START.load(Ordering::Relaxed) && address < HEAP_END.load(Ordering::Relaxed)
}

// SAFETY: delegates to `LockedHeap`'s `GlobalAlloc` (a correct allocator) or to the
// private heap the hart routes to (a buddy heap over frames it owns); each block is freed
// by the allocator whose memory holds it. Disabling interrupts around each call changes
// only when the hart can be interrupted.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        crate::arch::csr::without_interrupts(|| {
            if let Some(block) = private_heap::allocate_routed(layout) {
                return block;
            }
            // SAFETY: forwarded from the caller's `GlobalAlloc::alloc` contract.
            unsafe { self.0.alloc(layout) }
        })
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        crate::arch::csr::without_interrupts(|| {
            if in_kernel_heap(pointer) {
                // SAFETY: forwarded from the caller's `GlobalAlloc::dealloc` contract; the
                // block lies in the kernel heap, so the kernel heap allocated it.
                unsafe { self.0.dealloc(pointer, layout) };
                return;
            }
            // SAFETY: forwarded from the caller's `GlobalAlloc::dealloc` contract.
            let freed = unsafe { private_heap::free(pointer, layout) };
            if !freed {
                private_heap::warn_stray_free(pointer, layout);
            }
        })
    }
}

#[global_allocator]
static HEAP: KernelHeap = KernelHeap(LockedHeap::empty());

/// Allocations made since boot, on every heap: a path that must not allocate is checked by
/// the difference (not part of [`HeapStats`], whose equality means "nothing leaked").
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Hands `[start, start + size)` to the heap. Called once at boot.
pub fn init(start: usize, size: usize) {
    HEAP_START.store(start, Ordering::Relaxed);
    HEAP_END.store(start + size, Ordering::Relaxed);
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
