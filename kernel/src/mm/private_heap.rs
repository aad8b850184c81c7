//! Private heaps: memory owned by one extension's runtime and reclaimed whole.
//!
//! A Wasm extension's interpreter (`wasmi`'s engine, compiled code, store, linear memory
//! and the stacks its calls take) is ordinary Rust code that allocates through the global
//! allocator. When the timer backstop aborts it in the middle of a call, the destructors
//! of that call's locals never run, so whatever they owned would stay allocated for good
//! — on the kernel heap, a leak. A [`PrivateHeap`] gives that code memory of its own:
//! while [`PrivateHeap::enter`] runs a closure, every allocation this hart makes goes to
//! the private heap instead of the kernel heap, and when the owner is done (the extension
//! is unloaded) the private heap's frames are freed at once, whatever is still allocated
//! in them — no destructor has to run.
//!
//! How allocations find their heap:
//! - **allocation** follows this hart's `HartLocal::heap_route`, set by
//!   [`PrivateHeap::enter`] (with preemption off, so no other strand runs on the hart
//!   meanwhile) and restored after it; the trap handler clears it while it runs (an
//!   interrupt's allocations are the kernel's), an abort to a recovery point restores the
//!   value the point was armed with, and [`on_kernel_heap`] clears it around kernel work
//!   done on the runtime's behalf (a kernel function called by the module);
//! - **freeing** goes by address: a block inside the kernel heap's range goes back there,
//!   one inside a chunk of a registered private heap goes back to that heap — so a block
//!   may be freed anywhere, routed or not.
//!
//! A private heap is a buddy heap over chunks of contiguous frames (identity-mapped RAM),
//! starting with one chunk and adding a chunk at least as large as all before it when an
//! allocation does not fit, up to its limit; past the limit the kernel heap serves the
//! allocation instead (counted in [`PrivateHeapUsage::overflow_allocations`]: such blocks
//! are freed normally, but not reclaimed with the private heap).
//!
//! Rules for code run inside [`PrivateHeap::enter`]: whatever it allocates must not
//! outlive the private heap — values that escape into kernel structures (a message kept
//! for later, a table that grows) must be made inside [`on_kernel_heap`]. The frame
//! allocator does that itself.

use alloc::boxed::Box;
use alloc::string::String;
use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

use buddy_system_allocator::Heap;

use super::frame::{self, FrameRun};
use crate::arch::PAGE_SIZE;
use crate::arch::csr::without_interrupts;
use crate::arch::hart;

/// Buddy orders of a private heap: blocks of up to 2^31 bytes.
const ORDER: usize = 32;
/// Most chunks one private heap has (each at least as large as all before it together).
const MAX_CHUNKS: usize = 24;
/// Most private heaps at once.
pub const MAX_PRIVATE_HEAPS: usize = 64;
/// Smallest chunk of frames a private heap adds.
pub const MIN_CHUNK_BYTES: usize = 64 * 1024;

/// Addresses of the live private heaps (0: free slot), for freeing by address. Locked with
/// interrupts off; taken before a heap's own lock, never after.
static REGISTRY: spin::Mutex<[usize; MAX_PRIVATE_HEAPS]> = spin::Mutex::new([0; MAX_PRIVATE_HEAPS]);

/// A private heap's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrivateHeapUsage {
    /// Bytes held by live allocations (rounded to buddy block sizes).
    pub used_bytes: usize,
    /// Bytes of frames the heap holds.
    pub reserved_bytes: usize,
    /// Allocations the kernel heap served because this heap was at its limit.
    pub overflow_allocations: usize,
}

/// The buddy heap and the frames under it.
struct State {
    heap: Heap<ORDER>,
    chunks: [Option<FrameRun>; MAX_CHUNKS],
    reserved: usize,
}

impl State {
    fn contains(&self, address: usize) -> bool {
        self.chunks.iter().flatten().any(|chunk| address >= chunk.address() && address < chunk.address() + chunk.size())
    }
}

/// Memory owned by one runtime (see the module documentation); its frames are freed when
/// it is dropped, with everything still allocated in it.
pub struct PrivateHeap {
    name: String,
    limit: usize,
    state: spin::Mutex<State>,
    overflow: AtomicUsize,
}

/// Bytes of the buddy block `layout` takes (as `Heap::alloc` computes it).
fn block_size(layout: Layout) -> usize {
    layout.size().next_power_of_two().max(layout.align()).max(core::mem::size_of::<usize>())
}

impl PrivateHeap {
    /// A private heap named `name` (for warnings) with a first chunk of at least
    /// `initial_bytes`, growing to at most `limit_bytes` of frames; `None` when there are
    /// no frames for the first chunk or [`MAX_PRIVATE_HEAPS`] exist.
    pub fn new(name: &str, initial_bytes: usize, limit_bytes: usize) -> Option<Box<PrivateHeap>> {
        let heap = Box::new(PrivateHeap {
            name: String::from(name),
            limit: limit_bytes.max(MIN_CHUNK_BYTES),
            state: spin::Mutex::new(State { heap: Heap::empty(), chunks: [const { None }; MAX_CHUNKS], reserved: 0 }),
            overflow: AtomicUsize::new(0),
        });
        heap.grow(initial_bytes)?;
        let address = &*heap as *const PrivateHeap as usize;
        let registered = without_interrupts(|| {
            let mut registry = REGISTRY.lock();
            let slot = registry.iter_mut().find(|slot| **slot == 0)?;
            *slot = address;
            Some(())
        });
        registered.map(|()| heap)
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Counters for `ext list` and tests.
    pub fn usage(&self) -> PrivateHeapUsage {
        without_interrupts(|| {
            let state = self.state.lock();
            PrivateHeapUsage {
                used_bytes: state.heap.stats_alloc_actual(),
                reserved_bytes: state.reserved,
                overflow_allocations: self.overflow.load(Ordering::Relaxed),
            }
        })
    }

    /// Runs `body` with preemption off and every allocation this hart makes going to this
    /// heap; restores the previous routing after it.
    ///
    /// A recovery point armed inside `body` returns into `body`; one armed outside restores
    /// the routing it was armed with (`recovery::catch_faults`), so an abort never leaves
    /// this heap as the hart's route.
    pub fn enter<R>(&self, body: impl FnOnce() -> R) -> R {
        let _no_preemption = crate::sched::no_preemption();
        let route = &hart::current().heap_route;
        let previous = route.swap(self as *const PrivateHeap as usize, Ordering::Relaxed);
        let result = body();
        route.store(previous, Ordering::Relaxed);
        result
    }

    /// Adds a chunk of frames that holds a block of `bytes` and at least doubles the heap.
    /// Called with interrupts off or on; takes the lock only to add the chunk.
    fn grow(&self, bytes: usize) -> Option<()> {
        let reserved = without_interrupts(|| self.state.lock().reserved);
        let chunk_bytes = bytes.max(reserved).max(MIN_CHUNK_BYTES).next_power_of_two();
        if reserved.checked_add(chunk_bytes)? > self.limit {
            return None;
        }
        // Frames in a power-of-two count come aligned to their size, so the chunk is one
        // buddy block.
        let run = frame::allocate_zeroed(chunk_bytes / PAGE_SIZE)?;
        without_interrupts(|| {
            let mut state = self.state.lock();
            let slot = state.chunks.iter().position(Option::is_none)?;
            let (start, end) = (run.address(), run.address() + run.size());
            // SAFETY: the frames were just taken from the frame allocator (no other allocator
            // manages them; disjoint from earlier chunks), identity-mapped read-write RAM, kept in
            // `chunks` until this heap's drop, which forgets the buddy heap before freeing them.
            unsafe { state.heap.add_to_heap(start, end) };
            state.reserved += run.size();
            state.chunks[slot] = Some(run);
            Some(())
        })
    }

    /// A block for `layout`, adding a chunk if none fits; `None` past the limit.
    fn allocate(&self, layout: Layout) -> Option<NonNull<u8>> {
        if let Ok(block) = without_interrupts(|| self.state.lock().heap.alloc(layout)) {
            return Some(block);
        }
        self.grow(block_size(layout))?;
        without_interrupts(|| self.state.lock().heap.alloc(layout).ok())
    }
}

impl Drop for PrivateHeap {
    fn drop(&mut self) {
        let address = self as *const PrivateHeap as usize;
        without_interrupts(|| {
            for slot in REGISTRY.lock().iter_mut().filter(|slot| **slot == address) {
                *slot = 0;
            }
        });
        let state = self.state.get_mut();
        state.heap = Heap::empty();
        // Dropping the runs gives their frames back (whatever is still allocated in them).
        for chunk in &mut state.chunks {
            drop(chunk.take());
        }
        state.reserved = 0;
    }
}

/// Runs `body` with this hart's allocations going to the kernel heap (kernel work done on
/// a runtime's behalf inside [`PrivateHeap::enter`]: what it allocates may outlive the
/// private heap).
pub fn on_kernel_heap<R>(body: impl FnOnce() -> R) -> R {
    let route = &hart::current().heap_route;
    let previous = route.swap(0, Ordering::Relaxed);
    let result = body();
    route.store(previous, Ordering::Relaxed);
    result
}

/// Clears this hart's route and returns it (trap entry; see [`resume_routing`]).
pub fn suspend_routing() -> usize {
    hart::current().heap_route.swap(0, Ordering::Relaxed)
}

/// Puts back a route returned by [`suspend_routing`] or saved with a recovery point.
pub fn resume_routing(route: usize) {
    hart::current().heap_route.store(route, Ordering::Relaxed);
}

/// This hart's route (saved by a recovery point when it is armed).
pub fn current_route() -> usize {
    hart::current().heap_route.load(Ordering::Relaxed)
}

/// Allocates `layout` from the private heap this hart routes to; `None` when it routes to
/// the kernel heap, or the private heap is at its limit (then counted as an overflow).
/// Called by the global allocator, with interrupts off.
pub(super) fn allocate_routed(layout: Layout) -> Option<*mut u8> {
    let address = current_route();
    if address == 0 {
        return None;
    }
    // SAFETY: `PrivateHeap::enter` routes to a heap it borrows for the whole call, restoring the
    // old route on return; a trap clears it while handled, an abort restores the recovery point's
    // (0 or an outer, longer-lived heap); only this hart touches it, preemption is off: it is alive.
    let heap = unsafe { &*(address as *const PrivateHeap) };
    // The growth path takes frames: their allocator's own bookkeeping must not land here.
    let block = on_kernel_heap(|| heap.allocate(layout));
    if block.is_none() {
        heap.overflow.fetch_add(1, Ordering::Relaxed);
    }
    block.map(NonNull::as_ptr)
}

/// Gives `pointer` back to the private heap whose chunk holds it; false if none does.
/// Called by the global allocator for blocks outside the kernel heap, with interrupts off.
///
/// # Safety
/// `pointer` and `layout` come from a `GlobalAlloc::dealloc` call (a block allocated with
/// this layout and not freed since).
pub(super) unsafe fn free(pointer: *mut u8, layout: Layout) -> bool {
    let Some(block) = NonNull::new(pointer) else { return false };
    let registry = REGISTRY.lock();
    for &address in registry.iter().filter(|address| **address != 0) {
        // SAFETY: registered addresses belong to live heaps: a heap unregisters itself
        // (under this lock, held here) before it is freed.
        let heap = unsafe { &*(address as *const PrivateHeap) };
        let mut state = heap.state.lock();
        if state.contains(pointer as usize) {
            // SAFETY: the block lies in one of this heap's chunks, whose blocks only this heap
            // hands out, and by this function's contract it is a live allocation with `layout`.
            unsafe { state.heap.dealloc(block, layout) };
            return true;
        }
    }
    false
}

/// Warns about a free of a block that no heap holds (ignored: leaking it is safe,
/// guessing an owner is not). Never allocates.
pub(super) fn warn_stray_free(pointer: *mut u8, layout: Layout) {
    // Unlocked: the free may come from code that holds the console's lock.
    crate::console::print_fmt_unlocked(format_args!("[mm] free of {} bytes at {:#x} ignored: no heap holds it\n", layout.size(), pointer as usize));
}
