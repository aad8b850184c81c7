//! Physical memory: the frame allocator, the kernel heap (and the private heaps it routes
//! a Wasm extension's interpreter to, see [`private_heap`]) and the kernel's address space.
//!
//! At boot, RAM from the device tree minus the firmware, the kernel image, the device
//! tree blob and reserved regions becomes free memory. The first [`KERNEL_HEAP_SIZE`]
//! bytes of it back the kernel heap; the rest is handed to the frame allocator. Then the
//! kernel page table is built (W^X for the image) and switched on.
//!
//! [`KERNEL_HEAP_SIZE`]: crate::param::KERNEL_HEAP_SIZE

pub mod frame;
pub mod heap;
pub mod kernel_space;
pub mod private_heap;
#[deny(unsafe_code)]
pub mod ranges;
#[deny(unsafe_code)]
pub mod stack;

use crate::arch::PAGE_SIZE;
use crate::param::KERNEL_HEAP_SIZE;
use ranges::RangeSet;

unsafe extern "C" {
    static __kernel_end: u8;
}

/// End of the kernel image (page-aligned by the linker script).
pub fn kernel_end() -> usize {
    (&raw const __kernel_end) as usize
}

/// Errors that stop memory initialisation.
#[derive(Debug)]
pub enum MemoryInitError {
    /// No free RAM range can hold the kernel heap.
    NoRoomForHeap,
    /// Building the kernel page table failed.
    Map(crate::arch::sv39::MapError),
}

impl core::fmt::Display for MemoryInitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MemoryInitError::NoRoomForHeap => write!(f, "no free RAM range holds the {KERNEL_HEAP_SIZE}-byte kernel heap"),
            MemoryInitError::Map(error) => write!(f, "kernel page table: {error}"),
        }
    }
}

/// Free RAM as found at boot (for the `mem` command).
static BOOT_FREE_RANGES: spin::Once<RangeSet> = spin::Once::new();

/// Sets up the heap, the frame allocator and kernel paging.
pub fn init() -> Result<(), MemoryInitError> {
    let mut free = RangeSet::new();
    for (start, size) in crate::devicetree::memory_regions() {
        free.insert(start, start + size);
    }
    // Firmware and kernel image: everything from the start of RAM to the kernel's end.
    free.remove(crate::memlayout::RAM_BASE, kernel_end());
    let (blob_start, blob_end) = crate::devicetree::blob_range();
    free.remove(align_down(blob_start), align_up(blob_end));
    for (start, size) in crate::devicetree::reserved_regions() {
        free.remove(align_down(start), align_up(start + size));
    }
    if let Some((start, end)) = crate::devicetree::initrd_range() {
        free.remove(align_down(start), align_up(end));
    }
    let free = free.page_aligned(PAGE_SIZE);
    BOOT_FREE_RANGES.call_once(|| free.clone());

    let mut rest = free;
    let heap_start = rest.take_first_fit(KERNEL_HEAP_SIZE, PAGE_SIZE).ok_or(MemoryInitError::NoRoomForHeap)?;
    heap::init(heap_start, KERNEL_HEAP_SIZE);
    for (start, end) in rest.iter() {
        frame::add_range(start, end);
    }
    kernel_space::init().map_err(MemoryInitError::Map)?;
    Ok(())
}

/// The free RAM ranges found at boot, before the heap was carved out.
pub fn boot_free_ranges() -> Option<&'static RangeSet> {
    BOOT_FREE_RANGES.get()
}

/// Rounds down to a page boundary.
pub const fn align_down(address: usize) -> usize {
    address & !(PAGE_SIZE - 1)
}

/// Rounds up to a page boundary.
pub const fn align_up(address: usize) -> usize {
    (address + PAGE_SIZE - 1) & !(PAGE_SIZE - 1)
}
