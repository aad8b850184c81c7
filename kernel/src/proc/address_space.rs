//! One process's address space: a Sv39 root table that shares the kernel's root entries
//! (global, not user-accessible) and maps the process's regions in the user slots with
//! the U bit; the frames behind those regions and behind its own page-table pages; and
//! the region bookkeeping of `spindle_process::Regions`.
//!
//! User memory is reached by the kernel only through [`AddressSpace::read`] and
//! [`AddressSpace::write`]: they translate every page of the range through this table,
//! require the U bit and read or write permission (so a pointer into kernel memory or
//! read-only user memory is refused even though the kernel could reach it), and copy
//! through the kernel's identity map of the frame. `sstatus.SUM` is never set: the kernel
//! never dereferences a user virtual address, so a bad pointer is an error code, never a
//! kernel fault.
//!
//! `protect` changes the leaves of a whole anonymous region: it removes them and maps the
//! same frames again with the new permissions (or leaves them unmapped for no access,
//! keeping the frames), then flushes the TLB (`sfence.vma`), so no stale writable
//! translation survives.
//!
//! Frames: each region gets one contiguous run of zeroed frames, mapped page by page
//! (4 KiB leaves only, so unmapping never meets a larger page); page-table pages come one
//! by one. Everything is freed when the address space is dropped, which its process does
//! on its own strand after switching back to the kernel's table.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use spindle_abi::syscall::Error;
use spindle_process::layout::{PAGE_SIZE, STACK_BOTTOM, STACK_SIZE, USER_ROOT_SLOTS};
use spindle_process::range::pages;
use spindle_process::{Executable, PageAccess, Protection, Region, RegionKind, Regions, SegmentPermissions};

use crate::arch::sv39::{FrameSource, MapError, PageTableRoot, PteFlags};
use crate::mm::frame::{self, FrameRun};

/// Why an address space could not be built or a program loaded into it.
#[derive(Debug)]
pub enum SpaceError {
    /// Out of frames (for memory or page tables).
    OutOfMemory,
    /// The kernel uses a root slot reserved for user space (a kernel layout bug).
    KernelUsesUserSlot(usize),
    /// The page table refused a mapping.
    Map(MapError),
    /// Two regions of the program overlap (the executable checks should prevent this).
    Overlap,
}

impl fmt::Display for SpaceError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpaceError::OutOfMemory => formatter.write_str("out of memory"),
            SpaceError::KernelUsesUserSlot(slot) => write!(formatter, "the kernel maps root slot {slot}, which is reserved for user space"),
            SpaceError::Map(error) => write!(formatter, "mapping: {error}"),
            SpaceError::Overlap => formatter.write_str("regions overlap"),
        }
    }
}

/// Page-table pages of one address space, owned by it.
struct TableFrames<'a>(&'a mut Vec<FrameRun>);

impl FrameSource for TableFrames<'_> {
    fn allocate_zeroed_frame(&mut self) -> Option<usize> {
        let run = frame::allocate_zeroed(1)?;
        let address = run.address();
        self.0.push(run);
        Some(address)
    }
}

/// A process's address space.
pub struct AddressSpace {
    root: PageTableRoot,
    /// The root table and every lower-level table of the user slots.
    table_frames: Vec<FrameRun>,
    regions: Regions,
    /// The frames behind each region, by region start.
    region_frames: BTreeMap<usize, FrameRun>,
}

impl AddressSpace {
    /// An address space that maps what the kernel maps and nothing in user space yet.
    pub fn new() -> Result<AddressSpace, SpaceError> {
        let mut table_frames = Vec::new();
        let root = PageTableRoot::new(&mut TableFrames(&mut table_frames)).map_err(|_| SpaceError::OutOfMemory)?;
        crate::mm::kernel_space::share_with(root, USER_ROOT_SLOTS).map_err(SpaceError::KernelUsesUserSlot)?;
        Ok(AddressSpace { root, table_frames, regions: Regions::new(), region_frames: BTreeMap::new() })
    }

    /// Physical address of the root table (what `sched::set_address_space` takes).
    pub fn root_address(&self) -> usize {
        self.root.physical_address()
    }

    /// Bytes of user memory mapped (image, stack, anonymous mappings).
    pub fn mapped_bytes(&self) -> usize {
        self.regions.iter().map(|region| region.length).sum()
    }

    /// Frames held, page tables included.
    pub fn frame_count(&self) -> usize {
        self.table_frames.len() + self.region_frames.values().map(FrameRun::count).sum::<usize>()
    }

    /// Leaf flags for `permissions`, plus the U bit.
    fn user_flags(permissions: SegmentPermissions) -> PteFlags {
        let mut flags = PteFlags::USER;
        for (wanted, flag) in [(permissions.read, PteFlags::READ), (permissions.write, PteFlags::WRITE), (permissions.execute, PteFlags::EXECUTE)] {
            if wanted {
                flags = flags | flag;
            }
        }
        flags
    }

    /// Maps `length` bytes at `start` to the frames at `physical` with 4 KiB leaves; on
    /// failure unmaps what it mapped and returns the error.
    fn map_pages(&mut self, start: usize, physical: usize, length: usize, flags: PteFlags) -> Result<(), MapError> {
        let mut mapped = 0;
        while mapped < length {
            // Page by page, so every leaf is 4 KiB (map_range would use megapages).
            let mapping = self.root.map_range(start + mapped, physical + mapped, PAGE_SIZE, flags, &mut TableFrames(&mut self.table_frames));
            if let Err(error) = mapping {
                // Undo the pages mapped so far; they were mapped just above, so this succeeds.
                let _ = self.root.unmap_range(start, mapped);
                crate::arch::csr::flush_tlb();
                return Err(error);
            }
            mapped += PAGE_SIZE;
        }
        Ok(())
    }

    /// Maps `region` to fresh zeroed frames with `permissions` (plus the U bit) and
    /// records it; returns the frames.
    fn map_region(&mut self, region: Region, permissions: SegmentPermissions) -> Result<&FrameRun, SpaceError> {
        let frames = frame::allocate_zeroed(region.length / PAGE_SIZE).ok_or(SpaceError::OutOfMemory)?;
        if let Err(error) = self.map_pages(region.start, frames.address(), region.length, Self::user_flags(permissions)) {
            return Err(match error {
                MapError::OutOfFrames => SpaceError::OutOfMemory,
                other => SpaceError::Map(other),
            });
        }
        if self.regions.insert(region).is_err() {
            let _ = self.root.unmap_range(region.start, region.length);
            crate::arch::csr::flush_tlb();
            return Err(SpaceError::Overlap);
        }
        // Conservative: the privileged spec lets a hart cache invalid entries too.
        crate::arch::csr::flush_tlb();
        Ok(self.region_frames.entry(region.start).or_insert(frames))
    }

    /// Loads a validated executable: one region per `PT_LOAD` segment, file bytes copied,
    /// the rest zero, mapped with the segment's permissions (W^X checked by the parser).
    pub fn load(&mut self, executable: &Executable<'_>) -> Result<(), SpaceError> {
        for segment in executable.segments() {
            let pages = segment.pages();
            let region = Region { start: pages.start, length: pages.len(), kind: RegionKind::Image };
            let frames = self.map_region(region, segment.permissions)?;
            let bytes = executable.file_bytes(segment);
            let destination = frames.address() + segment.offset_in_first_page();
            // `bytes` fits: file_size <= memory_size and the region covers the segment's
            // pages from its first page's start.
            // SAFETY: the frames were just allocated for this region (nothing else refers
            // to them) and are identity-mapped read-write for the kernel.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), destination as *mut u8, bytes.len()) };
        }
        // The new code must be visible to instruction fetch.
        crate::arch::csr::fence_instructions();
        Ok(())
    }

    /// Maps the user stack (its guard page below stays unmapped).
    pub fn map_stack(&mut self) -> Result<(), SpaceError> {
        let region = Region { start: STACK_BOTTOM, length: STACK_SIZE, kind: RegionKind::Stack };
        self.map_region(region, SegmentPermissions { read: true, write: true, execute: false }).map(|_| ())
    }

    /// `map_anonymous(length)`: zeroed read-write memory; returns its address. Errors as
    /// documented for the system call.
    pub fn map_anonymous(&mut self, length: usize) -> Result<usize, Error> {
        let region = self.regions.place_anonymous(length)?;
        self.map_region(region, SegmentPermissions { read: true, write: true, execute: false }).map_err(|_| Error::NoMemory)?;
        Ok(region.start)
    }

    /// `unmap(address, length)`: removes a whole anonymous region and frees its frames.
    /// Errors as documented for the system call.
    pub fn unmap(&mut self, address: usize, length: usize) -> Result<(), Error> {
        let region = self.regions.check_unmap(address, length)?;
        // Mapped page by page in `map_region`, so every page has a 4 KiB leaf (none if
        // `protect` made the region inaccessible).
        if self.regions.protection(region.start).is_mapped() {
            self.root.unmap_range(region.start, region.length).map_err(|_| Error::BadAddress)?;
        }
        crate::arch::csr::flush_tlb();
        self.regions.remove(region.start);
        drop(self.region_frames.remove(&region.start));
        Ok(())
    }

    /// `protect(address, length, access)`: gives a whole anonymous region the access
    /// `access` (`ACCESS_READ | ACCESS_WRITE`, 0 for none), rewriting its leaves and
    /// flushing the TLB. Errors as documented for the system call; a failed call changes
    /// nothing.
    pub fn protect(&mut self, address: usize, length: usize, access: usize) -> Result<(), Error> {
        let (region, protection) = self.regions.check_protect(address, length, access)?;
        let physical = self.region_frames.get(&region.start).map(FrameRun::address).ok_or(Error::BadAddress)?;
        let old = self.regions.protection(region.start);
        let flags_of = |protection: Protection| Self::user_flags(SegmentPermissions { read: true, write: protection.is_writable(), execute: false });
        if old.is_mapped() {
            self.root.unmap_range(region.start, region.length).map_err(|_| Error::BadAddress)?;
        }
        if protection.is_mapped() {
            // The leaf tables of the region still exist (unmapping only clears leaves), so
            // this allocates nothing; should it fail anyway, put the old leaves back.
            if self.map_pages(region.start, physical, region.length, flags_of(protection)).is_err() {
                if old.is_mapped() {
                    let _ = self.map_pages(region.start, physical, region.length, flags_of(old));
                }
                crate::arch::csr::flush_tlb();
                return Err(Error::NoMemory);
            }
        }
        // No stale (writable) translation may survive the change.
        crate::arch::csr::flush_tlb();
        self.regions.set_protection(region.start, protection);
        Ok(())
    }

    /// Checks that every page of `address..address + length` is mapped for `access` on
    /// the user's behalf (see `spindle_process::PageAccess`); the range must have passed
    /// `spindle_process::user_range`. Errors: [`Error::BadAddress`].
    pub fn check(&self, address: usize, length: usize, access: PageAccess) -> Result<(), Error> {
        check_in(self.root, address, length, access)
    }

    /// Copies user memory at `address` into `buffer` after [`Self::check`]ing it for reading.
    pub fn read(&self, address: usize, buffer: &mut [u8]) -> Result<(), Error> {
        // SAFETY: this space's root is live while `self` is borrowed, and the process's
        // only strand is running this, so nothing writes its frames meanwhile.
        unsafe { read_in(self.root, address, buffer) }
    }

    /// Copies `bytes` into user memory at `address` after [`Self::check`]ing it for writing.
    pub fn write(&self, address: usize, bytes: &[u8]) -> Result<(), Error> {
        self.check(address, bytes.len(), PageAccess::Write)?;
        copy_in_pages(self.root, address, bytes.len(), |physical, offset, count| {
            // The page is a valid user leaf of this space (checked above: user leaves map
            // only this space's region frames), writable by the user, so it holds no
            // kernel data; the process's only strand is running this.
            // SAFETY: as just said; the frame is identity-mapped for the kernel.
            unsafe { core::ptr::copy_nonoverlapping(bytes[offset..].as_ptr(), physical as *mut u8, count) };
        });
        Ok(())
    }

    /// A view for reading this space from another strand while the process is pinned
    /// (serving upcalls or service calls from inside a system call); see [`SpaceView`].
    pub fn view(&self) -> SpaceView {
        SpaceView { root: self.root }
    }
}

/// A copyable handle to a process's page table, for code that runs in the process's
/// address space on another strand (upcalls, cross-address-space calls) while the
/// process's own strand is blocked inside a system call that keeps the space alive and
/// unchanged (it cannot map or unmap while blocked there).
#[derive(Clone, Copy, Debug)]
pub struct SpaceView {
    root: PageTableRoot,
}

impl SpaceView {
    /// Physical address of the root table (for `sched::set_address_space`).
    pub fn root_address(&self) -> usize {
        self.root.physical_address()
    }

    /// Copies user memory at `address` into `buffer` after checking it is mapped readable
    /// for the user. Errors: [`Error::BadAddress`].
    ///
    /// # Safety
    /// The space this view came from is still alive and not being changed (its process
    /// is pinned, see the type's documentation).
    pub unsafe fn read(&self, address: usize, buffer: &mut [u8]) -> Result<(), Error> {
        // SAFETY: forwarded from the caller.
        unsafe { read_in(self.root, address, buffer) }
    }
}

impl SpaceView {
    /// Copies `bytes` into user memory at `address` after checking it is mapped writable
    /// for the user. Errors: [`Error::BadAddress`].
    ///
    /// # Safety
    /// As for [`SpaceView::read`]; also, no reference of the kernel's points into the
    /// range (it is user memory, which the kernel never borrows).
    pub unsafe fn write(&self, address: usize, bytes: &[u8]) -> Result<(), Error> {
        check_in(self.root, address, bytes.len(), PageAccess::Write)?;
        copy_in_pages(self.root, address, bytes.len(), |physical, offset, count| {
            // The page is a valid user leaf of the pinned space, writable by the user, so it
            // holds no kernel data (user leaves map only that space's region frames).
            // SAFETY: as just said; the frame is identity-mapped for the kernel.
            unsafe { core::ptr::copy_nonoverlapping(bytes[offset..].as_ptr(), physical as *mut u8, count) };
        });
        Ok(())
    }
}

/// [`AddressSpace::check`] on the page table at `root`.
fn check_in(root: PageTableRoot, address: usize, length: usize, access: PageAccess) -> Result<(), Error> {
    let Some(end) = address.checked_add(length) else { return Err(Error::BadLength) };
    for page in pages(&(address..end)) {
        let (_, flags) = root.translate(page).ok_or(Error::BadAddress)?;
        let allowed = access.permits(
            flags.contains(PteFlags::VALID),
            flags.contains(PteFlags::USER),
            flags.contains(PteFlags::READ),
            flags.contains(PteFlags::WRITE),
        );
        if !allowed {
            return Err(Error::BadAddress);
        }
    }
    Ok(())
}

/// Checks and copies user memory of the page table at `root` into `buffer`.
///
/// # Safety
/// `root` is a live process page table whose user frames nothing writes meanwhile.
unsafe fn read_in(root: PageTableRoot, address: usize, buffer: &mut [u8]) -> Result<(), Error> {
    check_in(root, address, buffer.len(), PageAccess::Read)?;
    copy_in_pages(root, address, buffer.len(), |physical, offset, count| {
        // `physical` is in a frame of that space (a valid user leaf, checked above: user
        // leaves map only the space's region frames); `offset + count <= buffer.len()`.
        // SAFETY: the frame is identity-mapped for the kernel, and by the caller's
        // contract nothing writes it meanwhile.
        unsafe { core::ptr::copy_nonoverlapping(physical as *const u8, buffer[offset..].as_mut_ptr(), count) };
    });
    Ok(())
}

/// Calls `step(physical address, offset in the range, byte count)` for each page-sized
/// piece of the checked range `address..address + length` of the table at `root`.
fn copy_in_pages(root: PageTableRoot, address: usize, length: usize, mut step: impl FnMut(usize, usize, usize)) {
    let mut offset = 0;
    while offset < length {
        let virtual_address = address + offset;
        let count = (PAGE_SIZE - virtual_address % PAGE_SIZE).min(length - offset);
        if let Some((physical, _)) = root.translate(virtual_address) {
            step(physical, offset, count);
        }
        offset += count;
    }
}

impl Drop for AddressSpace {
    fn drop(&mut self) {
        // Never free a table the hart still uses: its process switches to the kernel's
        // table before dropping the space; this is the backstop.
        if crate::arch::csr::satp() & crate::arch::csr::SATP_PPN_MASK == self.root.physical_address() / PAGE_SIZE {
            crate::sched::set_address_space(0);
        }
        crate::arch::csr::flush_tlb();
        // The frames (regions, then tables) are freed by their own drops.
    }
}
