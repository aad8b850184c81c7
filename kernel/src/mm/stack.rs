//! Kernel stacks for strands: each in its own slot of a reserved virtual region, with
//! an unmapped guard page below it, so an overflow faults instead of corrupting memory.

use alloc::vec::Vec;

use crate::arch::PAGE_SIZE;
use crate::arch::sv39::{MapError, PteFlags};
use crate::mm::frame::{self, FrameRun, PermanentFrames};
use crate::param::STRAND_STACK_SIZE;

use crate::memlayout::{STACK_REGION_BASE, STACK_REGION_SIZE};
/// Bytes per slot: one guard page, then the stack.
const SLOT_SIZE: usize = PAGE_SIZE + STRAND_STACK_SIZE;
/// Most strand stacks that can exist at once.
const MAX_STACKS: usize = 4096;
const _: () = assert!(MAX_STACKS * SLOT_SIZE <= STACK_REGION_SIZE, "strand stacks overflow their region");

/// Free slot numbers (and the next never-used one).
struct Slots {
    free: Vec<usize>,
    next_unused: usize,
}

static SLOTS: spin::Mutex<Slots> = spin::Mutex::new(Slots { free: Vec::new(), next_unused: 0 });

/// Why a stack could not be made.
#[derive(Debug)]
pub enum StackError {
    /// No physical frames left.
    OutOfFrames,
    /// All slots of the stack region are in use.
    TooManyStacks,
    /// The page table could not be updated.
    Map(MapError),
}

impl core::fmt::Display for StackError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StackError::OutOfFrames => f.write_str("out of frames for a strand stack"),
            StackError::TooManyStacks => write!(f, "all {MAX_STACKS} strand stack slots are in use"),
            StackError::Map(error) => write!(f, "mapping a strand stack: {error}"),
        }
    }
}

/// A mapped kernel stack; unmapped and freed on drop.
pub struct KernelStack {
    slot: usize,
    frames: Option<FrameRun>,
}

impl KernelStack {
    /// Allocates and maps a stack of `STRAND_STACK_SIZE` bytes with a guard page below.
    pub fn new() -> Result<KernelStack, StackError> {
        let root = super::kernel_space::root().ok_or(StackError::Map(MapError::OutOfFrames))?;
        // Not zeroed: a kernel stack is read only by the kernel's compiled code (and the
        // safe Rust of native extensions), which writes a slot before it reads it.
        let frames = frame::allocate_for(STRAND_STACK_SIZE / PAGE_SIZE, spindle_service_frames::Owner::Kernel).ok_or(StackError::OutOfFrames)?;
        let slot = crate::arch::csr::without_interrupts(|| {
            let mut slots = SLOTS.lock();
            slots.free.pop().or_else(|| {
                (slots.next_unused < MAX_STACKS).then(|| {
                    slots.next_unused += 1;
                    slots.next_unused - 1
                })
            })
        })
        .ok_or(StackError::TooManyStacks)?;
        let stack = KernelStack { slot, frames: Some(frames) };
        let flags = PteFlags::READ | PteFlags::WRITE | PteFlags::GLOBAL;
        let physical = stack.frames.as_ref().map_or(0, FrameRun::address);
        crate::arch::csr::without_interrupts(|| {
            root.map_range(stack.bottom(), physical, STRAND_STACK_SIZE, flags, &mut PermanentFrames)
        })
        .map_err(StackError::Map)?;
        Ok(stack)
    }

    /// Lowest usable address (just above the guard page).
    pub fn bottom(&self) -> usize {
        STACK_REGION_BASE + self.slot * SLOT_SIZE + PAGE_SIZE
    }

    /// One past the highest address: the initial stack pointer.
    pub fn top(&self) -> usize {
        self.bottom() + STRAND_STACK_SIZE
    }

    /// The guard page's address.
    pub fn guard(&self) -> usize {
        self.bottom() - PAGE_SIZE
    }
}

impl Drop for KernelStack {
    fn drop(&mut self) {
        if let Some(root) = super::kernel_space::root() {
            // Mapped in `new`, so unmapping cannot fail; if it did, the slot is leaked
            // (never reused) rather than handed out while still mapped.
            if root.unmap_range(self.bottom(), STRAND_STACK_SIZE).is_ok() {
                crate::arch::csr::flush_tlb();
                crate::arch::csr::without_interrupts(|| SLOTS.lock().free.push(self.slot));
            }
        }
        drop(self.frames.take());
    }
}
