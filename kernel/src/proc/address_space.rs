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
//! `protect` changes the protection of a whole anonymous region (every one is a `vm_map`
//! region of the translation service): `protN` over its pages, the present leaves
//! rewritten in place, then one TLB flush (`sfence.vma`), so no stale writable translation
//! survives.
//!
//! Frames: a page gets its frame when it is first touched — a `vm_map` page demand-zero
//! (or from a pager, or back from swap), an image page filled from the program's bytes
//! (the boot bundle's copy, or its ELF file read through the buffer cache) — with 4 KiB
//! leaves only; page-table pages come one by one. Every page's frame is the space's: under
//! its memory limit, on its clock queue. Everything is freed when the address space is
//! dropped, which its process does on its own strand after switching back to the kernel's
//! table.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use spindle_abi::syscall::Error;
use spindle_process::layout::{PAGE_SIZE, STACK_BOTTOM, STACK_SIZE, USER_ROOT_SLOTS};
use spindle_process::range::pages;
use spindle_process::{Executable, PageAccess, Protection, Region, RegionKind, Regions, SegmentPermissions};
use spindle_service_frames::Owner;
use spindle_service_vm::{AccessKind, FaultClass, KillCause, Outcome, ProtChange, Pte, RegionKind as VmKind, RegionTable, Slot, Trap};

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

/// The translation service's part of an address space: the `vm_map` regions, the frame
/// behind each of their present pages, and the page-table pages mapping them needed.
/// Shared (`Arc`) with the space's [`SpaceView`]s and behind a lock, so that kernel copies
/// (`&self`) and code running in the space on another strand (migrating calls, upcalls)
/// can fault a demand-zero page in.
struct Translation {
    regions: RegionTable,
    /// The frame of each page that has one, by page address (a page whose protection is
    /// none keeps its frame without a leaf).
    pages: spindle_service_vm::PageMap<FrameRun>,
    /// Page-table pages allocated while mapping those pages.
    tables: Vec<FrameRun>,
    /// Pages paged out to swap (no frame, no leaf), by page address: their slot.
    swapped: BTreeMap<u64, Slot>,
    /// Resident pages read back from swap whose slot still holds their contents (they were
    /// not written since): paging one out again writes nothing.
    copies: BTreeMap<u64, Slot>,
    /// Pages written before they were last paged out (their contents went to swap): still
    /// dirty for Appel & Li's `dirty` after they come back, whose fresh leaf is clean.
    written_before_page_out: BTreeSet<u64>,
    /// Pages named in hot-list slots (`vm_hot`): page → slot. When such a page gets another
    /// frame, `mm.HotListSet` is raised again for its slot.
    hot: BTreeMap<u64, u64>,
    /// Pages being written to swap or read back from it (no frame in `pages`, no leaf), by
    /// page address: the slot the writer or reader holds. A fault on one waits until the
    /// transfer is done. Removing an entry cancels it (the region went, or the space): the
    /// writer or reader then frees the slot.
    in_transit: BTreeMap<u64, Slot>,
    /// The space is gone ([`AddressSpace`]'s drop): its page tables may be freed, so a
    /// strand holding this translation from [`SPACES`] must not touch them.
    dead: bool,
    /// The program's image: where its bytes are and its load segments, which fill an image
    /// page (a page of a file-backed region) on its first touch ([`fill_image`]). Its
    /// filled pages are in `pages`, as every other page.
    image: Option<ImageBacking>,
}

impl Translation {
    /// Whether the program's image is read from a file (its pages can be filled again only
    /// where the strand may block on the disk).
    fn image_from_file(&self) -> bool {
        self.image.as_ref().is_some_and(|image| matches!(image.source, ImageSource::File(_)))
    }

    /// Whether `page` lies in the program's image (a file-backed region).
    fn is_image_page(&self, page: u64) -> bool {
        self.regions.containing(page).is_some_and(|region| region.kind == VmKind::FileBacked)
    }
}

/// Where a program's bytes come from; an image page is filled from there on its first
/// touch, and again after memory pressure dropped it clean.
#[derive(Clone)]
pub enum ImageSource {
    /// A program of the boot bundle (in memory for good).
    Bundle(&'static [u8]),
    /// An ELF file of the file system, open as a running program's image (it cannot be
    /// written or removed while the space holds it): its pages are read through the
    /// buffer cache, on the faulting process's strand.
    File(Arc<crate::services::fs::OpenFile>),
}

/// A program's image as its address space keeps it: the load segments (checked by the
/// executable's parser: inside the file, W^X, no two on one page) and where their bytes
/// are.
struct ImageBacking {
    source: ImageSource,
    segments: Vec<spindle_process::LoadSegment>,
}

impl ImageBacking {
    /// The segment whose pages hold `page`.
    fn segment_of(&self, page: usize) -> Option<&spindle_process::LoadSegment> {
        self.segments.iter().find(|segment| segment.pages().contains(&page))
    }

    /// Writes page `page` of `segment` into `frame` from `source`: the file's bytes where
    /// the segment has them, zero elsewhere (the frame is zeroed already). Errors: the file
    /// could not be read, or ended early (a program's file cannot be written while it runs).
    fn fill(source: &ImageSource, segment: &spindle_process::LoadSegment, page: usize, frame: &mut [u8; PAGE_SIZE]) -> Result<(), alloc::string::String> {
        let file_end = segment.address + segment.file_size;
        let (start, end) = (page.max(segment.address), (page + PAGE_SIZE).min(file_end));
        if start >= end {
            return Ok(());
        }
        let from = segment.file_offset + (start - segment.address);
        let target = &mut frame[start - page..end - page];
        match source {
            // The parser checked `file_offset + file_size` lies inside the file.
            ImageSource::Bundle(bytes) => match bytes.get(from..from + target.len()) {
                Some(bytes) => crate::mm::frame::copy_bytes(target, bytes),
                None => return Err(alloc::format!("bytes {from:#x}.. are past the program's end")),
            },
            ImageSource::File(file) => {
                let read = crate::services::fs::read_at(file, from as u64, target).map_err(|error| alloc::format!("{error}"))?;
                if read < target.len() {
                    return Err(alloc::format!("the file ends at byte {:#x}, inside the page", from + read));
                }
            }
        }
        Ok(())
    }
}

/// The translation service's protection for a segment's permissions (write implies read:
/// RISC-V reserves write-only leaves).
fn image_protection(permissions: SegmentPermissions) -> spindle_service_vm::Protection {
    let bits = u64::from(permissions.read || permissions.write) | (u64::from(permissions.write) << 1) | (u64::from(permissions.execute) << 2);
    spindle_service_vm::Protection::from_bits(bits).unwrap_or(spindle_service_vm::Protection::NONE)
}

/// Every live address space's page table and translation, by id: memory pressure pages
/// out pages of any space ([`reclaim_globally`]). Entries are added by
/// [`AddressSpace::new`] and removed by its drop (which also marks the translation dead,
/// under its lock, before the tables go).
static SPACES: spin::Mutex<BTreeMap<u64, LiveSpace>> = spin::Mutex::new(BTreeMap::new());

/// A live space as [`SPACES`] holds it: its root table and its translation.
type LiveSpace = (PageTableRoot, Arc<spin::Mutex<Translation>>);

/// Why a user page fault ends the process ([`AddressSpace::handle_fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKill {
    /// The translation service's cause.
    Vm(KillCause),
    /// No frame for a demand-zero page, or for a page table.
    OutOfMemory,
    /// Over its memory limit, the space had no page it could give up (all pinned).
    NothingToPageOut,
    /// A page could not go to swap or come back (no swap area, full, a disk error; the
    /// console has the details).
    Swap,
    /// An `mm.Allocate` handler refused the page its frame.
    AllocationRefused,
    /// An image page could not be read from the program's file (a disk error; the console
    /// has the details).
    Image,
}

impl From<crate::services::vm::NoFrame> for FaultKill {
    fn from(reason: crate::services::vm::NoFrame) -> FaultKill {
        match reason {
            crate::services::vm::NoFrame::OutOfMemory => FaultKill::OutOfMemory,
            crate::services::vm::NoFrame::Refused => FaultKill::AllocationRefused,
        }
    }
}

impl fmt::Display for FaultKill {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKill::Vm(cause) => write!(formatter, "{cause}"),
            FaultKill::OutOfMemory => formatter.write_str("no frame for the page"),
            FaultKill::NothingToPageOut => formatter.write_str("over its memory limit with no page it may give up"),
            FaultKill::Swap => formatter.write_str("paging to or from swap failed"),
            FaultKill::AllocationRefused => formatter.write_str("mm.Allocate refused the page a frame"),
            FaultKill::Image => formatter.write_str("a page of its program could not be read"),
        }
    }
}

/// A process's address space.
pub struct AddressSpace {
    root: PageTableRoot,
    /// The root table and every lower-level table of the user slots.
    table_frames: Vec<FrameRun>,
    regions: Regions,
    /// The address space's id in records and the frame table (its process id).
    id: u64,
    translation: Arc<spin::Mutex<Translation>>,
}

impl AddressSpace {
    /// An address space with id `id` (its process's id) that maps what the kernel maps and
    /// nothing in user space yet.
    pub fn new(id: u64) -> Result<AddressSpace, SpaceError> {
        let mut table_frames = Vec::new();
        let root = PageTableRoot::new(&mut TableFrames(&mut table_frames)).map_err(|_| SpaceError::OutOfMemory)?;
        crate::mm::kernel_space::share_with(root, USER_ROOT_SLOTS).map_err(SpaceError::KernelUsesUserSlot)?;
        let translation = Translation {
            regions: RegionTable::with_unique_ids(id),
            pages: spindle_service_vm::PageMap::new(),
            tables: Vec::new(),
            swapped: BTreeMap::new(),
            copies: BTreeMap::new(),
            written_before_page_out: BTreeSet::new(),
            hot: BTreeMap::new(),
            in_transit: BTreeMap::new(),
            dead: false,
            image: None,
        };
        let translation = Arc::new(spin::Mutex::new(translation));
        crate::arch::csr::without_interrupts(|| SPACES.lock().insert(id, (root, translation.clone())));
        Ok(AddressSpace { root, table_frames, regions: Regions::new(), id, translation })
    }

    /// Its id (the process id).
    pub fn id(&self) -> u64 {
        self.id
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
        let translation = self.translation.lock();
        self.table_frames.len() + translation.pages.len() + translation.tables.len()
    }

    /// Pages that have a frame (image, stack, `vm_map` regions).
    pub fn resident_pages(&self) -> usize {
        self.translation.lock().pages.len()
    }

    /// Pages paged out to swap.
    pub fn swapped_pages(&self) -> usize {
        self.translation.lock().swapped.len()
    }

    /// `vm_hot(address, slot)`: names the page at `address` in hot-list slot `slot` (64:
    /// clears the list) and raises `mm.HotListSet`; returns its frame number (0 for a
    /// clear). Errors as documented for the system call.
    pub fn hot(&mut self, address: usize, slot: usize) -> Result<u64, Error> {
        let clear = spindle_abi::event::HotListEntry::CLEAR as usize;
        if slot > clear {
            return Err(Error::BadArgument);
        }
        if slot == clear {
            self.translation.lock().hot.clear();
            crate::services::frames::announce_hot(slot as u64, 0);
            return Ok(0);
        }
        self.require_vm_map_region(address)?;
        let page = address - address % PAGE_SIZE;
        let mut frame = 0;
        with_page_in(self.root, self.id, &self.translation, page, 1, PageAccess::Read, |physical| frame = (physical / PAGE_SIZE) as u64)?;
        {
            let mut translation = self.translation.lock();
            translation.hot.retain(|_, &mut listed| listed != slot as u64);
            translation.hot.insert(page as u64, slot as u64);
        }
        crate::services::frames::announce_hot(slot as u64, frame);
        Ok(frame)
    }

    /// `vm_limit(pages)`: at most `pages` frames for this space's pages — image, stack and
    /// `vm_map` regions; not its page tables (0: no limit). Errors: `BadArgument` below [`crate::services::vm::MIN_LIMIT_PAGES`].
    pub fn set_limit(&mut self, pages: usize) -> Result<(), Error> {
        crate::services::vm::set_limit(self.id, (pages != 0).then_some(pages as u64))
    }

    /// Loads a validated executable whose bytes are at `source`: one file-backed region of
    /// the translation service per `PT_LOAD` segment, with the segment's permissions (W^X
    /// checked by the parser). A page gets its frame when it is first touched — by the
    /// program, a kernel copy or a migrating call ([`fill_image`]).
    pub fn load(&mut self, executable: &Executable<'_>, source: ImageSource) -> Result<(), SpaceError> {
        let mut translation = self.translation.lock();
        for segment in executable.segments() {
            let pages = segment.pages();
            let region = Region { start: pages.start, length: pages.len(), kind: RegionKind::Image };
            self.regions.insert(region).map_err(|_| SpaceError::Overlap)?;
            let protection = image_protection(segment.permissions);
            translation.regions.add(pages.start as u64, pages.len() as u64, protection, VmKind::FileBacked).map_err(|_| SpaceError::Overlap)?;
        }
        translation.image = Some(ImageBacking { source, segments: executable.segments().to_vec() });
        Ok(())
    }

    /// Makes every image page of a program from a file resident — filled from the file, or
    /// back from swap — for a process that serves migrating calls (wired: memory pressure
    /// leaves its pages alone), whose strand may not block on the disk there; its own limit
    /// then never gives up an image page ([`page_out`]). Nothing to do for a bundle program
    /// (its pages are filled from memory). Errors: `NoMemory` (no frame, or over its limit
    /// with nothing else to page out), `Io` (the file or swap could not be read).
    pub fn fill_whole_image(&self) -> Result<(), Error> {
        let pages: Vec<(u64, spindle_service_vm::Protection)> = {
            let translation = self.translation.lock();
            let Some(image) = translation.image.as_ref().filter(|_| translation.image_from_file()) else { return Ok(()) };
            image.segments.iter().flat_map(|segment| pages(&segment.pages()).map(|page| (page as u64, image_protection(segment.permissions)))).collect()
        };
        let failed = |kill: FaultKill| match kill {
            FaultKill::Image | FaultKill::Swap => Error::Io,
            _ => Error::NoMemory,
        };
        for (page, protection) in pages {
            if self.root.translate(page as usize).is_some() {
                continue;
            }
            if page_in(self.root, self.id, &self.translation, page, AccessKind::Read).map_err(failed)? {
                continue;
            }
            make_room(self.root, self.id, &self.translation).map_err(failed)?;
            fill_image(self.root, self.id, &self.translation, page, protection, false).map_err(failed)?;
        }
        Ok(())
    }

    /// Sets up the user stack as demand-zero memory: a read-write anonymous region of the
    /// translation service (a page gets its frame when first touched, counted as a stack
    /// page; it can be paged out like any other) that the program cannot unmap, protect or
    /// manage (it is recorded as the stack). Its guard page below stays unmapped.
    pub fn map_stack(&mut self) -> Result<(), SpaceError> {
        let region = Region { start: STACK_BOTTOM, length: STACK_SIZE, kind: RegionKind::Stack };
        let mut translation = self.translation.lock();
        let id = translation
            .regions
            .add(STACK_BOTTOM as u64, STACK_SIZE as u64, spindle_service_vm::Protection::READ_WRITE, VmKind::Anonymous)
            .map_err(|_| SpaceError::Overlap)?;
        if self.regions.insert(region).is_err() {
            let _ = translation.regions.remove(id);
            return Err(SpaceError::Overlap);
        }
        Ok(())
    }
    /// `map_anonymous(length)`: zeroed read-write memory; returns its address. Errors as
    /// documented for the system call.
    pub fn map_anonymous(&mut self, length: usize) -> Result<usize, Error> {
        // A demand-zero read-write `vm_map` region (the same limits, no frame until touched).
        self.vm_map(length, spindle_service_vm::Protection::READ_WRITE.bits() as usize)
    }

    /// `vm_map(length, protection)`: a demand-zero region (no frame until a page is
    /// touched); returns its address. Errors as documented for the system call.
    pub fn vm_map(&mut self, length: usize, protection: usize) -> Result<usize, Error> {
        let region = self.regions.place_anonymous(length)?;
        let protection = spindle_service_vm::Protection::from_bits(protection as u64).map_err(|_| Error::BadArgument)?;
        if protection == spindle_service_vm::Protection::NONE || (protection.writable() && protection.executable()) {
            return Err(Error::BadArgument);
        }
        let mut translation = self.translation.lock();
        translation.regions.add(region.start as u64, region.length as u64, protection, VmKind::Anonymous).map_err(|_| Error::NoMemory)?;
        if self.regions.insert(region).is_err() {
            let id = translation.regions.containing(region.start as u64).map(|region| region.id);
            if let Some(id) = id {
                let _ = translation.regions.remove(id);
            }
            return Err(Error::NoMemory);
        }
        Ok(region.start)
    }

    /// `vm_manage(address, name)`: marks the `vm_map` region starting at `address`
    /// managed, its faults trapped for this space's handlers; assigns it to extension
    /// `name` if given. Returns the region's id. Errors as documented for the system call
    /// (the name's are the caller's).
    pub fn vm_manage(&mut self, address: usize, name: Option<&str>) -> Result<u64, Error> {
        let id = self.id;
        self.require_vm_map_region(address)?;
        let mut translation = self.translation.lock();
        let region = *translation.regions.containing(address as u64).filter(|region| region.start == address as u64).ok_or(Error::BadAddress)?;
        if region.kind == VmKind::Managed {
            return Err(Error::Exists);
        }
        if let Some(name) = name {
            crate::services::vm::assign_for_space(name, id, region.id)?;
        }
        translation.regions.set_kind(region.id, VmKind::Managed).map_err(|_| Error::BadAddress)?;
        translation.regions.trap(region.id, Trap { owner: Owner::AddressSpace(id), handler: 0 }).map_err(|_| Error::Exists)?;
        Ok(region.id)
    }

    /// `unmap(address, length)`: removes a whole anonymous region and frees its frames.
    /// Errors as documented for the system call.
    pub fn unmap(&mut self, address: usize, length: usize) -> Result<(), Error> {
        let region = self.regions.check_unmap(address, length)?;
        let mut translation = self.translation.lock();
        // Every anonymous region is a `vm_map` region of the translation service.
        let id = translation.regions.containing(region.start as u64).map(|region| region.id).ok_or(Error::BadAddress)?;
        {
            // Unmap and give back the pages that have a frame.
            let pages: Vec<u64> = translation.pages.range(region.start as u64..region.end() as u64).map(|(page, _)| page).collect();
            for page in pages {
                if self.root.translate(page as usize).is_some() {
                    let _ = self.root.unmap_range(page as usize, PAGE_SIZE);
                }
                if let Some(run) = translation.pages.remove(&page) {
                    crate::services::vm::release(run);
                }
            }
            crate::arch::csr::flush_tlb();
            let range = region.start as u64..region.end() as u64;
            free_slots(&mut translation.swapped, range.clone());
            free_slots(&mut translation.copies, range.clone());
            translation.written_before_page_out.retain(|page| !range.contains(page));
            // Pages being written to swap: cancelled (their writers free the slots).
            translation.in_transit.retain(|page, _| !range.contains(page));
            let _ = translation.regions.remove(id);
            self.regions.remove(region.start);
        }
        Ok(())
    }

    /// `protect(address, length, access)`: gives a whole anonymous region the access
    /// `access` (`ACCESS_READ | ACCESS_WRITE`, 0 for none), rewriting its leaves and
    /// flushing the TLB. Errors as documented for the system call; a failed call changes
    /// nothing.
    pub fn protect(&mut self, address: usize, length: usize, access: usize) -> Result<(), Error> {
        let (region, protection) = self.regions.check_protect(address, length, access)?;
        let mut translation = self.translation.lock();
        // Every anonymous region is a `vm_map` region: `protN` over all its pages.
        if translation.regions.containing(region.start as u64).is_none() {
            return Err(Error::BadAddress);
        }
        let wanted = match protection {
            Protection::None => spindle_service_vm::Protection::NONE,
            Protection::Read => spindle_service_vm::Protection::READ,
            Protection::ReadWrite => spindle_service_vm::Protection::READ_WRITE,
        };
        let change = translation.regions.prot_n(region.start as u64, (region.length / PAGE_SIZE) as u64, wanted).map_err(Self::vm_error)?;
        self.apply_protection(&mut translation, &change).map_err(|_| Error::NoMemory)?;
        drop(translation);
        self.regions.set_protection(region.start, protection);
        Ok(())
    }

    /// Checks that every page of `address..address + length` is mapped for `access` on
    /// the user's behalf (see `spindle_process::PageAccess`); the range must have passed
    /// `spindle_process::user_range`. Errors: [`Error::BadAddress`].
    ///
    /// A page of a `vm_map` region that has no frame yet is faulted in first (demand-zero,
    /// no event: a managed region's missing page is refused here).
    pub fn check(&self, address: usize, length: usize, access: PageAccess) -> Result<(), Error> {
        check_pages(self.root, self.id, &self.translation, address, length, access)
    }

    /// Maps `run` at `page` (see [`map_vm_page`]).
    fn map_vm_page(&self, translation: &mut Translation, page: u64, run: FrameRun, protection: spindle_service_vm::Protection, written: bool) -> Result<(), FaultKill> {
        map_vm_page(self.root, translation, page, run, protection, written)
    }

    /// Rewrites the leaves of a protection change already recorded in the region table:
    /// a page with a leaf gets the new permissions in place (keeping its accessed and
    /// dirty bits), a page with a frame but no leaf (it was protected to none) is mapped
    /// again, and protecting to none removes the leaf but keeps the frame. Pages without a
    /// frame are left alone (a touch faults them in with the new protection). Then one TLB
    /// flush.
    fn apply_protection(&self, translation: &mut Translation, change: &ProtChange) -> Result<(), FaultKill> {
        let outcome = self.rewrite_leaves(translation, change);
        crate::arch::csr::flush_tlb();
        outcome
    }

    /// [`Self::apply_protection`] without the TLB flush: the caller flushes before the
    /// space runs again.
    fn rewrite_leaves(&self, translation: &mut Translation, change: &ProtChange) -> Result<(), FaultKill> {
        // One page that has a leaf (`prot1`, a fault's answer): one walk, in a small frame.
        if change.count == 1
            && change.protection != spindle_service_vm::Protection::NONE
            && self.root.set_leaf_permissions(change.start as usize, vm_flags(change.protection)).is_some()
        {
            return Ok(());
        }
        self.rewrite_leaf_range(translation, change)
    }

    /// [`Self::rewrite_leaves`] for any change: out of line, since walking a range keeps
    /// more registers live than one page needs.
    #[inline(never)]
    fn rewrite_leaf_range(&self, translation: &mut Translation, change: &ProtChange) -> Result<(), FaultKill> {
        let (start, count) = (change.start as usize, change.count as usize);
        let root = self.root;
        if change.protection == spindle_service_vm::Protection::NONE {
            // Every leaf of a `vm_map` region has its frame in `translation.pages` (see
            // `map_vm_page`), which keeps it. The leaf's dirty bit goes with the leaf: kept in
            // the frame table, so paging out does not take a written page for a clean one.
            root.clear_leaves_in(start, count, |physical, flags| {
                if flags.contains(PteFlags::DIRTY) {
                    crate::services::vm::note_dirty((physical / PAGE_SIZE) as u64);
                }
            });
            return Ok(());
        }
        let wanted = vm_flags(change.protection);
        let mut outcome = Ok(());
        root.set_leaf_permissions_in(start, count, wanted, |page| {
            // No leaf: a page protected to none before gets its leaf back; a page without
            // a frame (never touched, or on swap) is left alone.
            let Some(physical) = translation.pages.get(&(page as u64)).map(FrameRun::address) else { return };
            if root.map_range(page, physical, PAGE_SIZE, wanted, &mut TableFrames(&mut translation.tables)).is_err() {
                outcome = Err(FaultKill::OutOfMemory);
            } else if !crate::services::vm::was_dirty((physical / PAGE_SIZE) as u64) {
                // A new leaf has its dirty bit set: the page keeps the bit it had before it
                // was protected to none (kept in the frame table), not a fresh one.
                let _ = root.update_leaf(page, PteFlags::empty(), PteFlags::DIRTY);
            }
        });
        outcome
    }

    /// The system-call error for a refused primitive.
    fn vm_error(error: spindle_service_vm::PrimitiveError) -> Error {
        use spindle_service_vm::PrimitiveError;
        match error {
            PrimitiveError::BadCount(_) => Error::BadLength,
            PrimitiveError::AboveRegion(_) | PrimitiveError::Image(_) => Error::NotPermitted,
            PrimitiveError::AlreadyTrapped(_) => Error::Exists,
            PrimitiveError::Misaligned(_)
            | PrimitiveError::NotUserAddress(_)
            | PrimitiveError::NoRegion(_)
            | PrimitiveError::CrossesRegion { .. }
            | PrimitiveError::NoSuchRegion(_)
            | PrimitiveError::NotTrapped(_) => Error::BadAddress,
        }
    }

    /// `prot_n(address, count, protection)` (`prot1` is `count` 1), or `unprot_n` for
    /// `protection` `None`: records the pages' protection in the region table and rewrites
    /// their leaves. Errors as documented for the system calls.
    pub fn protect_pages(&mut self, address: usize, count: usize, protection: Option<usize>) -> Result<(), Error> {
        self.require_vm_map_region(address)?;
        let protection = match protection {
            Some(bits) => Some(spindle_service_vm::Protection::from_bits(bits as u64).map_err(|_| Error::BadArgument)?),
            None => None,
        };
        let mut translation = self.translation.lock();
        let change = match protection {
            Some(protection) => translation.regions.prot_n(address as u64, count as u64, protection),
            None => translation.regions.unprot_n(address as u64, count as u64),
        }
        .map_err(Self::vm_error)?;
        self.apply_protection(&mut translation, &change).map_err(|_| Error::NoMemory)
    }

    /// `dirty(address)`: whether the page of a `vm_map` region was written since it was
    /// first given a frame. Paging it out and back in does not clean it (its contents went
    /// to swap, and the fresh leaf's bit is clear), nor does protecting it to none (the
    /// leaf's bit is kept in the frame table); a page never written is clean. Errors:
    /// `BadAddress` (not page-aligned, or in no `vm_map` region).
    pub fn dirty(&self, address: usize) -> Result<bool, Error> {
        // Only page addresses are looked up below (the translation's maps are keyed by them).
        if !address.is_multiple_of(PAGE_SIZE) {
            return Err(Error::BadAddress);
        }
        self.require_vm_map_region(address)?;
        let mut pte = self.pte(address);
        let translation = self.translation.lock();
        let page = address as u64;
        let frame_was_dirty = || !pte.present && translation.pages.get(&page).is_some_and(|run| crate::services::vm::was_dirty(frame_of(run)));
        if translation.written_before_page_out.contains(&page) || frame_was_dirty() {
            // What the page-table bit would say had the page kept its leaf.
            pte = Pte { present: true, dirty: true, ..pte };
        }
        translation.regions.dirty(page, pte).map_err(Self::vm_error)
    }

    /// `vm_trap(address, name)`: the faults of the `vm_map` region starting at `address`
    /// raise the `vm.*` events (for this space's handlers; assigned to extension `name` if
    /// given) while its pages stay anonymous (demand-zero by default). Returns the
    /// region's id. Errors: `BadAddress` (no `vm_map` region starts there).
    pub fn vm_trap(&mut self, address: usize, name: Option<&str>) -> Result<u64, Error> {
        let id = self.id;
        self.require_vm_map_region(address)?;
        let mut translation = self.translation.lock();
        let region = *translation.regions.containing(address as u64).filter(|region| region.start == address as u64).ok_or(Error::BadAddress)?;
        if let Some(name) = name {
            crate::services::vm::assign_for_space(name, id, region.id)?;
        }
        translation.regions.trap(region.id, Trap { owner: Owner::AddressSpace(id), handler: 0 }).map_err(Self::vm_error)?;
        Ok(region.id)
    }

    /// `BadAddress` unless `address` lies in an anonymous (`vm_map` or `map_anonymous`)
    /// region (the image and the stack are not the program's to manage or protect).
    fn require_vm_map_region(&self, address: usize) -> Result<(), Error> {
        match self.regions.containing(address) {
            Some(region) if region.kind == RegionKind::Anonymous => Ok(()),
            _ => Err(Error::BadAddress),
        }
    }

    /// The leaf of `address` as the translation service sees it.
    fn pte(&self, address: usize) -> Pte {
        match self.root.translate(address) {
            Some((_, flags)) if flags.contains(PteFlags::USER) => Pte {
                present: true,
                readable: flags.contains(PteFlags::READ),
                writable: flags.contains(PteFlags::WRITE),
                executable: flags.contains(PteFlags::EXECUTE),
                accessed: flags.contains(PteFlags::ACCESSED),
                dirty: flags.contains(PteFlags::DIRTY),
            },
            _ => Pte::ABSENT,
        }
    }

    /// A user page fault at `address` by an `access`: classified against the `vm_map`
    /// regions, decided by the translation service (events for managed regions), applied.
    /// `Ok`: resume the faulting instruction; `Err`: kill the process with that cause.
    pub fn handle_fault(&mut self, address: usize, access: AccessKind) -> Result<(), FaultKill> {
        let id = self.id;
        // Leaves change only under the translation lock, so one look under it holds.
        let mut translation = self.translation.lock();
        let pte = self.pte(address);
        if !pte.present {
            drop(translation);
            // A page on swap comes back without an event (it is the process's, only moved).
            let page = address as u64 - address as u64 % PAGE_SIZE as u64;
            if page_in(self.root, id, &self.translation, page, access)? {
                return Ok(());
            }
            // Any frame this fault may take must fit under the space's limit.
            make_room(self.root, id, &self.translation)?;
            translation = self.translation.lock();
            if self.pte(address).present {
                // The page came back while the lock was not held (a failed swap write
                // put it back): run the access again.
                return Ok(());
            }
        }
        let fault = spindle_service_vm::classify(&translation.regions, address as u64, access, pte);
        let decision = crate::services::vm::decide(&translation.regions, &fault, self.root);
        let protects = decision.protects;
        // Whether leaves were rewritten by a protection change (flushed once, at the end,
        // also when a rewrite failed).
        let mut rewritten = false;
        let mut outcome = Ok(());
        match decision.outcome {
            Outcome::Retry => {
                // The leaf allows the access: a stale TLB entry, or an accessed or dirty bit
                // the hardware wants set in software.
                let _ = self.root.update_leaf(address, touched_bits(access), PteFlags::empty());
                crate::arch::csr::flush_tlb();
            }
            Outcome::Kill(cause) => return Err(FaultKill::Vm(cause)),
            Outcome::DemandZero { page, protection } => {
                let run = crate::services::vm::allocate(id, page).map_err(FaultKill::from)?;
                self.map_vm_page(&mut translation, page, run, protection, access == AccessKind::Write)?;
                let hot = translation.hot.get(&page).copied();
                if let Some(slot) = hot {
                    // A hot page dropped clean and faulted in again: its new frame.
                    drop(translation);
                    announce_frame(self.root, slot, page);
                    translation = self.translation.lock();
                }
            }
            Outcome::Map { page, protection, .. } => {
                let run = decision.frame.ok_or(FaultKill::Vm(KillCause::NoPager))?;
                self.map_vm_page(&mut translation, page, run, protection, access == AccessKind::Write)?;
            }
            Outcome::Fill { page, protection } => {
                // An image page (no handler traps one, so nothing was queued): filled with
                // no lock held (a file's page is read from the disk).
                drop(translation);
                crate::services::vm::recycle_protects(protects);
                return fill_image(self.root, id, &self.translation, page, protection, access == AccessKind::Write);
            }
            Outcome::Protect(checked) => {
                translation.regions.apply_checked(&checked).map_err(|_| FaultKill::Vm(KillCause::ProtectionViolation))?;
                rewritten = true;
                outcome = self.rewrite_leaves(&mut translation, checked.change());
            }
        }
        // Then the handlers' queued protection changes (in-kernel Appel & Li), each
        // checked as `prot_n`/`unprot_n`; a refused one is counted and skipped. (If one
        // takes the faulting page's access away again, the access faults again.)
        // One TLB flush for the answer's change and the queued ones.
        for &queued in &protects {
            if outcome.is_err() {
                break;
            }
            let change = match queued.protection {
                Some(protection) => translation.regions.prot_n(queued.page, queued.count, protection),
                None => translation.regions.unprot_n(queued.page, queued.count),
            };
            match change {
                Ok(change) => {
                    rewritten = true;
                    outcome = self.rewrite_leaves(&mut translation, &change);
                }
                Err(_) => crate::services::vm::refused(),
            }
        }
        crate::services::vm::recycle_protects(protects);
        if rewritten {
            crate::arch::csr::flush_tlb();
        }
        outcome
    }

    /// Copies user memory at `address` into `buffer` after [`Self::check`]ing it for reading.
    pub fn read(&self, address: usize, buffer: &mut [u8]) -> Result<(), Error> {
        // SAFETY: this space's root is live while `self` is borrowed, and the process's
        // only strand is running this, so nothing writes its frames meanwhile.
        unsafe { read_in(self.root, self.id, &self.translation, address, buffer) }
    }

    /// Copies `bytes` into user memory at `address` after [`Self::check`]ing it for writing.
    pub fn write(&self, address: usize, bytes: &[u8]) -> Result<(), Error> {
        // SAFETY: this space's root is live while `self` is borrowed; user memory holds no
        // kernel data and no kernel reference points into it.
        unsafe { write_in(self.root, self.id, &self.translation, address, bytes) }
    }

    /// A view for reading this space from another strand while the process is pinned
    /// (serving upcalls or service calls from inside a system call); see [`SpaceView`].
    pub fn view(&self) -> SpaceView {
        SpaceView { root: self.root, id: self.id, translation: self.translation.clone() }
    }
}

/// A copyable handle to a process's page table, for code that runs in the process's
/// address space on another strand (upcalls, cross-address-space calls) while the
/// process's own strand is blocked inside a system call that keeps the space alive and
/// unchanged (it cannot map or unmap while blocked there).
#[derive(Clone)]
pub struct SpaceView {
    root: PageTableRoot,
    id: u64,
    translation: Arc<spin::Mutex<Translation>>,
}

impl fmt::Debug for SpaceView {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("SpaceView").field("root", &self.root).field("id", &self.id).finish_non_exhaustive()
    }
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
        unsafe { read_in(self.root, self.id, &self.translation, address, buffer) }
    }

    /// Faults the page at `address` in for `access` if it is a missing page of an
    /// anonymous `vm_map` region (demand-zero, no event) or of the image (filled, without
    /// blocking: a file program's page is there already, [`AddressSpace::fill_whole_image`]):
    /// code running in the space on another strand (a migrating call, an upcall) touched it. True if the page is now
    /// mapped and its leaf allows the access (the instruction can run again).
    ///
    /// # Safety
    /// As for [`SpaceView::read`].
    pub unsafe fn fault_in(&self, address: usize, access: AccessKind) -> bool {
        fault_in(self.root, self.id, &self.translation, address, 1, access);
        let allowed = self.root.translate(address).is_some_and(|(_, flags)| {
            flags.contains(PteFlags::USER)
                && match access {
                    AccessKind::Read => flags.contains(PteFlags::READ),
                    AccessKind::Write => flags.contains(PteFlags::WRITE),
                    AccessKind::Execute => flags.contains(PteFlags::EXECUTE),
                }
        });
        if allowed {
            // The leaf's accessed (and for a store, dirty) bit, for a hart that faults
            // rather than set them itself: the access runs again and finds them set.
            let _ = self.root.update_leaf(address - address % PAGE_SIZE, touched_bits(access), PteFlags::empty());
            crate::arch::csr::flush_tlb();
        }
        allowed
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
        // SAFETY: forwarded from the caller.
        unsafe { write_in(self.root, self.id, &self.translation, address, bytes) }
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

/// The page-sized pieces of `address..address + length`: (virtual address, offset in
/// the range, bytes). Errors: [`Error::BadLength`] if the range overflows.
fn pieces(address: usize, length: usize) -> Result<impl Iterator<Item = (usize, usize, usize)>, Error> {
    address.checked_add(length).ok_or(Error::BadLength)?;
    let mut offset = 0;
    Ok(core::iter::from_fn(move || {
        (offset < length).then(|| {
            let virtual_address = address + offset;
            let count = (PAGE_SIZE - virtual_address % PAGE_SIZE).min(length - offset);
            let piece = (virtual_address, offset, count);
            offset += count;
            piece
        })
    }))
}

/// [`AddressSpace::check`]: page by page, fault the page in (demand-zero, or back from
/// swap), then check its leaf. Page by page, so a range larger than the space's memory
/// limit is checked too (an earlier page may be paged out again meanwhile; it stays valid).
fn check_pages(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, address: usize, length: usize, access: PageAccess) -> Result<(), Error> {
    for (virtual_address, _, count) in pieces(address, length)? {
        with_page_in(root, id, translation, virtual_address, count, access, |_| {})?;
    }
    Ok(())
}

/// Checks and copies user memory of the page table at `root` (space `id`) into `buffer`,
/// a page at a time: each page is faulted in (demand-zero, or back from swap) and
/// checked just before its bytes are copied. On an error the bytes before the bad page
/// have been copied.
///
/// # Safety
/// `root` is a live process page table whose user frames nothing writes meanwhile.
unsafe fn read_in(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, address: usize, buffer: &mut [u8]) -> Result<(), Error> {
    for (virtual_address, offset, count) in pieces(address, buffer.len())? {
        let target = &mut buffer[offset..offset + count];
        with_page_in(root, id, translation, virtual_address, count, PageAccess::Read, |physical| {
            // `physical` is in a frame of that space (a valid user leaf, checked just
            // before, with no preemption since: user leaves map only the space's region
            // frames, and no strand can page it out meanwhile); `count` bytes fit the page.
            // SAFETY: the frame is identity-mapped for the kernel, and by the caller's
            // contract nothing writes it meanwhile.
            unsafe { core::ptr::copy_nonoverlapping(physical as *const u8, target.as_mut_ptr(), count) };
        })?;
    }
    Ok(())
}

/// Copies `bytes` into user memory of the page table at `root` (space `id`) a page at a
/// time, as [`read_in`]; each page written gets its dirty bit (the copy goes through the
/// kernel's identity map, which the hardware does not mark), so paging it out keeps it.
///
/// # Safety
/// `root` is a live process page table; no kernel reference points into the range.
unsafe fn write_in(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, address: usize, bytes: &[u8]) -> Result<(), Error> {
    for (virtual_address, offset, count) in pieces(address, bytes.len())? {
        let source = &bytes[offset..offset + count];
        with_page_in(root, id, translation, virtual_address, count, PageAccess::Write, |physical| {
            mark_written(root, virtual_address);
            // The page is a valid user leaf of this space (checked just before, with no
            // preemption since, so no strand paged it out: user leaves map only the
            // space's region frames), writable by the user, so it holds no kernel data;
            // `count` bytes fit the page.
            // SAFETY: as just said; the frame is identity-mapped for the kernel.
            unsafe { core::ptr::copy_nonoverlapping(source.as_ptr(), physical as *mut u8, count) };
        })?;
    }
    Ok(())
}

/// Faults the `count` bytes at `virtual_address` (inside one page) in for `access`, then
/// checks them and calls `copy` with the physical address — the check, the translation
/// and the copy with interrupts off, so memory pressure (another strand paging this
/// space's pages out) cannot take the frame between them. A page taken between the fault
/// and the check is faulted in again ([`KERNEL_COPY_TRIES`] times at most; then the
/// check's error).
/// Times [`with_page_in`] faults a page in again after memory pressure took it before the
/// check (several processes paging under global pressure do that now and then).
const KERNEL_COPY_TRIES: usize = 8;

fn with_page_in(
    root: PageTableRoot,
    id: u64,
    translation: &spin::Mutex<Translation>,
    virtual_address: usize,
    count: usize,
    access: PageAccess,
    mut copy: impl FnMut(usize),
) -> Result<(), Error> {
    let mut tries = 0;
    loop {
        fault_in(root, id, translation, virtual_address, count, access_kind(access));
        let checked = crate::arch::csr::without_interrupts(|| {
            check_in(root, virtual_address, count, access)?;
            let Some((physical, _)) = root.translate(virtual_address) else { return Err(Error::BadAddress) };
            copy(physical);
            Ok(())
        });
        match checked {
            Err(_) if tries < KERNEL_COPY_TRIES => tries += 1,
            result => return result,
        }
    }
}

/// Copies user page `from` to user page `to` of the page table at `root` (distinct,
/// page-aligned; `from` a readable user leaf, `to` a writable one) and marks `to` written.
/// False (nothing copied) if a page does not qualify. For a handler of a fault of that
/// space (`spindle_vm_copy_page`): the space's only thread is stopped in the fault.
pub fn copy_user_page(root: PageTableRoot, from: usize, to: usize) -> bool {
    if from == to || !from.is_multiple_of(PAGE_SIZE) || !to.is_multiple_of(PAGE_SIZE) {
        return false;
    }
    // Interrupts off from the look to the copy: memory pressure on another strand cannot
    // page either page out in between.
    crate::arch::csr::without_interrupts(|| {
        let user = |flags: PteFlags| flags.contains(PteFlags::USER);
        let source = root.translate(from).filter(|(_, flags)| user(*flags) && flags.contains(PteFlags::READ));
        let target = root.translate(to).filter(|(_, flags)| user(*flags) && flags.contains(PteFlags::WRITE));
        let (Some((source, _)), Some((target, _))) = (source, target) else { return false };
        // Both are user leaves of one space (user leaves map only that space's own frames),
        // of distinct pages and so distinct frames (a frame is mapped once); the space's
        // thread is stopped and no strand runs until the copy is done, so nothing else
        // reads or writes them; user memory holds no kernel data.
        // SAFETY: as just said; both frames are identity-mapped for the kernel, a page each.
        unsafe { core::ptr::copy_nonoverlapping(source as *const u8, target as *mut u8, PAGE_SIZE) };
        // Written through the identity map: mark the leaf, so paging out keeps the copy.
        mark_written(root, to);
        true
    })
}

/// Sets the accessed and dirty bits of the leaf of `address` (a write the kernel made for
/// the user through its identity map).
fn mark_written(root: PageTableRoot, address: usize) {
    let _ = root.update_leaf(address - address % PAGE_SIZE, PteFlags::ACCESSED | PteFlags::DIRTY, PteFlags::empty());
}

/// The access kind a kernel copy's `access` is.
fn access_kind(access: PageAccess) -> AccessKind {
    match access {
        PageAccess::Write => AccessKind::Write,
        PageAccess::Read => AccessKind::Read,
    }
}

/// Faults in, on the table at `root` of space `id`, every missing page in the range that
/// `kind` may touch, of an anonymous `vm_map` region or of the image: back from swap, else
/// demand-zero or filled from the image (no event; a managed region's missing page is left
/// absent, and so is a file program's page where the strand may not block). Kernel copies
/// from and to user memory, and code running in the space on another strand. On any
/// failure the page stays absent and the caller's check refuses it.
fn fault_in(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, address: usize, length: usize, kind: AccessKind) {
    let Some(end) = address.checked_add(length) else { return };
    for page in pages(&(address..end)) {
        if root.translate(page).is_some() {
            continue;
        }
        match page_in(root, id, translation, page as u64, kind) {
            Ok(true) => continue,
            Ok(false) => {}
            Err(_) => continue,
        }
        if make_room(root, id, translation).is_err() {
            continue;
        }
        let mut guard = translation.lock();
        let fault = spindle_service_vm::classify(&guard.regions, page as u64, kind, Pte::ABSENT);
        if fault.class != FaultClass::PageNotPresent {
            continue;
        }
        match spindle_service_vm::default_outcome(&fault) {
            Outcome::DemandZero { page, protection } => {
                if let Ok(run) = crate::services::vm::allocate(id, page) {
                    let _ = map_vm_page(root, &mut guard, page, run, protection, kind == AccessKind::Write);
                }
            }
            Outcome::Fill { page, protection } => {
                let from_file = guard.image_from_file();
                drop(guard);
                if !from_file || crate::sched::can_block() {
                    let _ = fill_image(root, id, translation, page, protection, kind == AccessKind::Write);
                }
            }
            _ => {}
        }
    }
}

/// Fills image page `page` of space `id` (a page of a file-backed region, with the
/// region's `protection`) into a fresh frame of the space from the program's bytes — the
/// bundle's, or its file's through the buffer cache, with no lock held (the disk may be
/// read) — and maps it, its leaf dirty if `written` (the access that faulted is a store).
/// The caller made room under the space's limit. Nothing to do for a page that got a frame,
/// went to swap or is in transit meanwhile (another strand), or a space that is gone.
/// Errors: no frame (for the page or a page table), `mm.Allocate` refused, the file could
/// not be read ([`FaultKill::Image`]; the console says why).
fn fill_image(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, page: u64, protection: spindle_service_vm::Protection, written: bool) -> Result<(), FaultKill> {
    let (source, segment) = {
        let translation = translation.lock();
        let Some(image) = translation.image.as_ref().filter(|_| !translation.dead) else { return Ok(()) };
        let Some(segment) = image.segment_of(page as usize).copied() else { return Ok(()) };
        (image.source.clone(), segment)
    };
    let mut run = crate::services::vm::allocate_page(id, page, crate::services::vm::PageSource::Image).map_err(FaultKill::from)?;
    if let Err(why) = ImageBacking::fill(&source, &segment, page as usize, run.first_page_mut()) {
        crate::println!("[vm] space {id}: image page {page:#x} cannot be filled: {why}");
        crate::services::vm::release(run);
        return Err(FaultKill::Image);
    }
    let mut guard = translation.lock();
    let taken = guard.pages.contains_key(&page) || guard.swapped.contains_key(&page) || guard.in_transit.contains_key(&page);
    if guard.dead || taken {
        // Gone meanwhile, or filled (and perhaps paged out) by another strand: the frame
        // goes back and the access runs again.
        drop(guard);
        crate::services::vm::release(run);
        return Ok(());
    }
    map_vm_page(root, &mut guard, page, run, protection, written)?;
    drop(guard);
    // New code must be visible to instruction fetch.
    if protection.executable() {
        crate::arch::csr::fence_instructions();
    }
    Ok(())
}

/// Maps `run` at `page` of the table at `root` with `protection` (plus the U bit) and
/// records it as the page's frame, dirty only if `written` (Appel & Li's `dirty` reads the
/// bit); on failure gives the frame back.
fn map_vm_page(root: PageTableRoot, translation: &mut Translation, page: u64, run: FrameRun, protection: spindle_service_vm::Protection, written: bool) -> Result<(), FaultKill> {
    let flags = vm_flags(protection);
    let mapped = root.map_range(page as usize, run.address(), PAGE_SIZE, flags, &mut TableFrames(&mut translation.tables));
    if mapped.is_err() {
        crate::services::vm::release(run);
        return Err(FaultKill::OutOfMemory);
    }
    if !written {
        // The hardware sets the bit on the first store (or faults, and the retry sets it).
        let _ = root.update_leaf(page as usize, PteFlags::empty(), PteFlags::DIRTY);
    }
    translation.pages.insert(page, run);
    // Conservative: the privileged spec lets a hart cache invalid entries too.
    crate::arch::csr::flush_tlb();
    Ok(())
}

/// Puts a page that could not be paged out back: its frame, and a leaf with its
/// protection (dirty) unless that is none.
fn restore(root: PageTableRoot, translation: &mut Translation, page: u64, run: FrameRun) {
    match translation.regions.protection_of(page).filter(|&protection| protection != spindle_service_vm::Protection::NONE) {
        Some(protection) => {
            let _ = map_vm_page(root, translation, page, run, protection, true);
        }
        None => {
            crate::services::vm::note_dirty((run.address() / PAGE_SIZE) as u64);
            translation.pages.insert(page, run);
        }
    }
}

/// Frees the swap slots of `slots`' pages in `range` and forgets them.
fn free_slots(slots: &mut BTreeMap<u64, Slot>, range: core::ops::Range<u64>) {
    let pages: Vec<u64> = slots.range(range).map(|(&page, _)| page).collect();
    for page in pages {
        if let Some(slot) = slots.remove(&page) {
            crate::services::vm::swap_free(slot);
        }
    }
}

/// Whether `protection` lets `access` through.
fn permits(protection: spindle_service_vm::Protection, access: AccessKind) -> bool {
    match access {
        AccessKind::Read => protection.readable(),
        AccessKind::Write => protection.writable(),
        AccessKind::Execute => protection.executable(),
    }
}

/// Brings `page` of space `id` back from swap if it is there and its protection allows
/// `access`: makes room under the limit, reads the slot into a fresh frame and maps it
/// (clean, the slot kept as its copy). `Ok(false)`: not a page on swap (or one the access
/// may not touch: the fault is the translation service's to decide). Blocks on the disk
/// with no lock held.
fn page_in(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, page: u64, access: AccessKind) -> Result<bool, FaultKill> {
    let mut waited = false;
    let protection = loop {
        {
            let translation = translation.lock();
            if !translation.in_transit.contains_key(&page) {
                if waited && translation.pages.contains_key(&page) {
                    // The write failed and the page was put back: run the access again.
                    return Ok(true);
                }
                if !translation.swapped.contains_key(&page) {
                    return Ok(false);
                }
                match translation.regions.protection_of(page) {
                    Some(protection) if permits(protection, access) => break protection,
                    _ => return Ok(false),
                }
            }
        }
        // Memory pressure is writing the page to swap on another strand: wait for it (a
        // strand that may not block — an upcall, a service call — fails the access).
        if !crate::sched::can_block() {
            return Err(FaultKill::Swap);
        }
        crate::services::vm::counted_transit_wait();
        crate::sched::sleep_ticks(1);
        waited = true;
    };
    make_room(root, id, translation)?;
    let mut run = crate::services::vm::allocate_page(id, page, crate::services::vm::PageSource::Swap).map_err(FaultKill::from)?;
    // The page is in transit while its slot is read (with no lock held): a fault on it on
    // another strand waits rather than filling it from the image or with zeros, and an
    // unmap or the space's end cancels it (then the slot is freed here). Another strand
    // faulting the same page in may have taken the slot already.
    let taken = {
        let mut guard = translation.lock();
        let slot = guard.swapped.remove(&page);
        if let Some(slot) = slot {
            guard.in_transit.insert(page, slot);
        }
        slot
    };
    let Some(slot) = taken else {
        crate::services::vm::release(run);
        return Ok(true);
    };
    let read = crate::services::vm::swap_read(slot, &mut run);
    let mut translation = translation.lock();
    if translation.in_transit.get(&page) != Some(&slot) {
        // Cancelled meanwhile: the page or the space is gone.
        drop(translation);
        crate::services::vm::swap_free(slot);
        crate::services::vm::release(run);
        return Ok(true);
    }
    translation.in_transit.remove(&page);
    if let Err(failure) = read {
        crate::println!("[vm] space {id}: page {page:#x} cannot come back from swap slot {slot}: {failure}");
        translation.swapped.insert(page, slot);
        drop(translation);
        crate::services::vm::release(run);
        return Err(FaultKill::Swap);
    }
    if let Err(kill) = map_vm_page(root, &mut translation, page, run, protection, access == AccessKind::Write) {
        translation.swapped.insert(page, slot);
        return Err(kill);
    }
    translation.copies.insert(page, slot);
    let hot = translation.hot.get(&page).copied();
    drop(translation);
    if let Some(slot) = hot {
        announce_frame(root, slot, page);
    }
    Ok(true)
}

/// Raises `mm.HotListSet` for hot-list `slot` with the frame `page` is mapped to now.
fn announce_frame(root: PageTableRoot, slot: u64, page: u64) {
    if let Some((physical, _)) = root.translate(page as usize) {
        crate::services::frames::announce_hot(slot, (physical / PAGE_SIZE) as u64);
    }
}

/// Buffers the cache gives back at a time under memory pressure (a batch, so the file
/// system's lock is taken once per batch, not per page).
const CACHE_GIVE_BACK_BATCH: usize = 16;

/// Image pages dropped at a time under memory pressure ([`drop_image_pages`]).
const IMAGE_DROP_BATCH: usize = 8;

/// Under memory pressure, after the buffer cache and before any page goes to swap: drops up
/// to `wanted` image pages of read-only segments (code and constants: never written, so
/// the program's bytes still hold them) of live spaces other than `requester` and the
/// wired ones. A page whose leaf was accessed since the last look keeps its frame this time
/// (its accessed bit is cleared: a second chance). A dropped page is filled again on its
/// next touch ([`fill_image`]). Returns how many went.
fn drop_image_pages(requester: u64, wanted: usize) -> usize {
    let spaces: Vec<(PageTableRoot, Arc<spin::Mutex<Translation>>)> = crate::arch::csr::without_interrupts(|| {
        SPACES
            .lock()
            .iter()
            .filter(|(id, _)| **id != requester && !crate::services::vm::is_wired(**id))
            .map(|(_, (root, translation))| (*root, translation.clone()))
            .collect()
    });
    let mut dropped = 0;
    for (root, translation) in spaces {
        if dropped >= wanted {
            break;
        }
        // Interrupts off, the translation locked (never waited for): neither the program
        // nor a kernel copy touches a page between the look at its leaf and its unmap.
        crate::arch::csr::without_interrupts(|| {
            let Some(mut guard) = translation.try_lock().filter(|translation| !translation.dead) else { return };
            let translation = &mut *guard;
            let read_only: Vec<u64> = translation
                .pages
                .keys()
                .filter(|&page| translation.is_image_page(page) && translation.regions.protection_of(page).is_some_and(|protection| !protection.writable()))
                .collect();
            for page in read_only {
                if dropped >= wanted {
                    break;
                }
                match root.translate(page as usize) {
                    Some((_, flags)) if flags.contains(PteFlags::ACCESSED) => {
                        let _ = root.update_leaf(page as usize, PteFlags::empty(), PteFlags::ACCESSED);
                    }
                    Some(_) => {
                        let _ = root.unmap_range(page as usize, PAGE_SIZE);
                        if let Some(run) = translation.pages.remove(&page) {
                            crate::services::vm::release(run);
                        }
                        crate::services::vm::counted_image_drop();
                        dropped += 1;
                    }
                    None => {}
                }
            }
        });
    }
    crate::arch::csr::flush_tlb();
    dropped
}

/// While space `id` holds as many frames as its memory limit allows (or more), pages one
/// of its pages out, so the next frame it takes fits; and under global memory pressure
/// (free frames below the low-water mark) [`relieve_pressure`] frees frames elsewhere.
///
/// Other strands may hold frames of this space that are not among its resident pages:
/// a page one of them writes to swap (in transit), or gives back clean, or fills — the
/// frame counts against the limit until that strand is done with it (the clock passes it,
/// [`crate::services::vm::choose_victim`]); and one of them may take the page chosen here
/// before it is evicted. So when nothing could be paged out, a space that has given a
/// frame back meanwhile tries again (at most [`IN_FLIGHT_WAIT_TICKS`] times), and one
/// that holds more frames than it has resident pages — every page that may go is in
/// flight — waits a tick for those strands (at most [`IN_FLIGHT_WAIT_TICKS`] in all) and
/// tries again. Errors: over its limit with every held frame resident and none that may
/// go — pinned, or a wired program's file pages — or still after the waits
/// ([`FaultKill::NothingToPageOut`]; at once where the strand may not block), or swap
/// failed ([`FaultKill::Swap`]).
fn make_room(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>) -> Result<(), FaultKill> {
    let mut waited = 0;
    let mut looked_again = 0;
    while crate::services::vm::at_limit(id) {
        let held = crate::services::vm::held_by(id);
        match page_out(root, id, translation) {
            Err(FaultKill::NothingToPageOut) => {
                let (now, resident) = {
                    let translation = translation.lock();
                    (crate::services::vm::held_by(id), translation.pages.len() as u64)
                };
                if now < held && looked_again < IN_FLIGHT_WAIT_TICKS {
                    // Another strand gave a frame of the space back meanwhile (perhaps the
                    // page chosen here): look again.
                    looked_again += 1;
                    continue;
                }
                if now <= resident || waited == IN_FLIGHT_WAIT_TICKS || !crate::sched::can_block() {
                    return Err(FaultKill::NothingToPageOut);
                }
                crate::services::vm::counted_transit_wait();
                crate::sched::sleep_ticks(1);
                waited += 1;
            }
            outcome => outcome?,
        }
    }
    relieve_pressure(id);
    Ok(())
}

/// Ticks [`make_room`] waits at most for frames of the space that other strands hold
/// outside its resident pages (a second at 100 Hz; a disk write takes milliseconds).
const IN_FLIGHT_WAIT_TICKS: usize = 100;

/// The global part of [`make_room`]: under global memory pressure the buffer
/// cache gives back up to [`CACHE_GIVE_BACK_BATCH`] clean buffers, else other processes'
/// read-only image pages are dropped ([`drop_image_pages`]), else one page goes — the one
/// the global clock chooses, of this space or any other ([`reclaim_globally`]).
fn relieve_pressure(id: u64) {
    // Under global pressure the buffer cache's clean buffers go first (dropping one costs
    // no write; the cache keeps a floor). Then a page of some process is paged out; one
    // that cannot go (all pinned or wired, a swap failure) leaves the allocation to
    // proceed, and so does a strand that may not block (an upcall or a service call
    // faulting a page of its server in).
    if crate::services::vm::under_pressure() && crate::sched::can_block() {
        if crate::services::fs::give_back_buffers(CACHE_GIVE_BACK_BATCH) > 0 || drop_image_pages(id, IMAGE_DROP_BATCH) > 0 {
            return;
        }
        let _ = reclaim_globally(id);
    }
}

/// The frame number of a run of one frame.
fn frame_of(run: &FrameRun) -> u64 {
    (run.address() / PAGE_SIZE) as u64
}

/// The samples of every resident page of `translation` (read from the leaves of `root`).
fn samples_of(root: PageTableRoot, translation: &Translation) -> impl Iterator<Item = (u64, crate::services::vm::PageSample)> + '_ {
    translation.pages.iter().map(move |(page, run)| {
        let frame = frame_of(run);
        let flags = root.translate(page as usize).map(|(_, flags)| flags);
        let accessed = flags.is_some_and(|flags| flags.contains(PteFlags::ACCESSED));
        let dirty = flags.is_some_and(|flags| flags.contains(PteFlags::DIRTY));
        (page, crate::services::vm::PageSample { frame, accessed, dirty })
    })
}

/// Pages one page of space `id` out (over its limit): samples every resident page's
/// accessed and dirty bits, lets the clock hand over the space's own queue (and
/// `mm.Reclaim`'s handlers) choose, clears the accessed bits the hand consumed, then
/// [`evict`]s the victim.
fn page_out(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>) -> Result<(), FaultKill> {
    // (frame, page) of every resident page that may go, and the samples. A wired space of
    // a program from a file keeps its image pages: its strand serves migrating calls,
    // where a page of the file cannot be read again ([`AddressSpace::fill_whole_image`]).
    let keeps_image = crate::services::vm::is_wired(id);
    let (mut frames, samples): (Vec<(u64, u64)>, Vec<crate::services::vm::PageSample>) = {
        let guard = translation.lock();
        let file_image = keeps_image && guard.image_from_file();
        samples_of(root, &guard).filter(|&(page, _)| !(file_image && guard.is_image_page(page))).map(|(page, sample)| ((sample.frame, page), sample)).unzip()
    };
    frames.sort_unstable();
    let page_of = |frame: u64| frames.binary_search_by_key(&frame, |&(frame, _)| frame).ok().map(|index| frames[index].1);
    let victim = crate::services::vm::choose_victim(id, &samples);
    {
        let _guard = translation.lock();
        for &frame in &victim.clear_accessed {
            if let Some(page) = page_of(frame) {
                let _ = root.update_leaf(page as usize, PteFlags::empty(), PteFlags::ACCESSED);
            }
        }
    }
    let Some((frame, page)) = victim.frame.and_then(|frame| page_of(frame).map(|page| (frame, page))) else {
        crate::arch::csr::flush_tlb();
        return Err(FaultKill::NothingToPageOut);
    };
    evict(root, id, translation, translation.lock(), page, frame)
}

/// Under memory pressure, for space `requester`: samples the resident pages of every live
/// space, lets the global clock hand (and `mm.Reclaim`'s handlers for the chosen page's
/// owner) choose a page of any space, clears the accessed bits the hand consumed and
/// [`evict`]s the page. `Ok(false)`: no page may go.
fn reclaim_globally(requester: u64) -> Result<bool, FaultKill> {
    // Wired spaces are left alone (never locked here); a space whose translation another
    // strand holds is skipped this time (never waited for: that strand may be this one,
    // further up, or preempted).
    let spaces: Vec<(u64, PageTableRoot, Arc<spin::Mutex<Translation>>)> = crate::arch::csr::without_interrupts(|| {
        SPACES.lock().iter().filter(|(id, _)| !crate::services::vm::is_wired(**id)).map(|(&id, (root, translation))| (id, *root, translation.clone())).collect()
    });
    let mut samples = Vec::new();
    for (_, root, translation) in &spaces {
        crate::arch::csr::without_interrupts(|| {
            if let Some(translation) = translation.try_lock().filter(|translation| !translation.dead) {
                samples.extend(samples_of(*root, &translation).map(|(_, sample)| sample));
            }
        });
    }
    let victim = crate::services::vm::choose_global_victim(requester, &samples);
    let space_of = |space: u64| spaces.iter().find(|(id, ..)| *id == space);
    for &(space, page) in &victim.clear_accessed {
        if let Some((_, root, translation)) = space_of(space) {
            crate::arch::csr::without_interrupts(|| {
                if let Some(_translation) = translation.try_lock().filter(|translation| !translation.dead) {
                    let _ = root.update_leaf(page as usize, PteFlags::empty(), PteFlags::ACCESSED);
                }
            });
        }
    }
    crate::arch::csr::flush_tlb();
    let Some((space, page, frame)) = victim.page else { return Ok(false) };
    let Some((_, root, translation)) = space_of(space) else { return Ok(false) };
    let Some(guard) = translation.try_lock() else { return Ok(false) };
    evict(*root, space, translation, guard, page, frame)?;
    crate::services::vm::counted_pressure(space != requester);
    Ok(true)
}

/// Takes resident `page` (with frame `frame`) of space `id` away, `guard` being the
/// space's translation locked by the caller: its leaf goes and its frame is given back —
/// after writing it to a swap slot if it was written since it came from swap, from
/// demand-zero or from the image (a clean page needs no write: its slot still holds it, it
/// is zero, or the image holds it). Any
/// strand may evict any live space's page: the look at the leaf's dirty bit, the unmap
/// and the page's change of state happen under the lock with interrupts off (so neither
/// the space's program nor a kernel copy writes the page between the look and the
/// unmap), and the disk write happens with no lock held while the page is in transit (a
/// fault on it waits; an unmap or the space's end cancels it and the slot is freed here).
/// A failed write maps the page back. `Err(NothingToPageOut)` if the page is no longer
/// resident with that frame (or the space is gone).
fn evict(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, mut guard: spin::MutexGuard<'_, Translation>, page: u64, frame: u64) -> Result<(), FaultKill> {
    if guard.dead || guard.pages.get(&page).map(frame_of) != Some(frame) {
        return Err(FaultKill::NothingToPageOut);
    }
    let taken = crate::arch::csr::without_interrupts(|| {
        // Written since it got this frame? The leaf's bit, or the frame table's (a leaf
        // taken away by protecting the page to none leaves its bit there); no leaf at all:
        // assume so.
        let leaf = root.translate(page as usize).map(|(_, flags)| flags);
        let written = leaf.is_some_and(|flags| flags.contains(PteFlags::DIRTY)) || crate::services::vm::was_dirty(frame);
        let dirty = written || leaf.is_none();
        if leaf.is_some() {
            let _ = root.unmap_range(page as usize, PAGE_SIZE);
        }
        crate::arch::csr::flush_tlb();
        guard.pages.remove(&page).map(|run| (run, dirty, written))
    });
    let Some((run, dirty, written)) = taken else { return Err(FaultKill::NothingToPageOut) };
    if !dirty {
        // Clean: its slot (if it came from swap) still holds it; else it is still zero, or
        // (an image page) still what the program's bytes say.
        if let Some(slot) = guard.copies.remove(&page) {
            guard.swapped.insert(page, slot);
        }
        drop(guard);
        crate::services::vm::release(run);
        crate::services::vm::counted_page_out(false);
        return Ok(());
    }
    let slot = match guard.copies.remove(&page).map(Ok).unwrap_or_else(crate::services::vm::swap_allocate) {
        Ok(slot) => slot,
        Err(failure) => {
            crate::println!("[vm] space {id}: page {page:#x} cannot go to swap: {failure}");
            restore(root, &mut guard, page, run);
            return Err(FaultKill::Swap);
        }
    };
    guard.in_transit.insert(page, slot);
    if written {
        // Appel & Li's `dirty` (a page written out cautiously without its leaf is not).
        guard.written_before_page_out.insert(page);
    }
    drop(guard);
    let written = crate::services::vm::swap_write(slot, &run);
    let mut guard = translation.lock();
    // Still wanted unless an unmap or the space's end cancelled it meanwhile (an entry
    // with another slot is a later eviction of a page mapped there since).
    let wanted = guard.in_transit.get(&page) == Some(&slot);
    if wanted {
        guard.in_transit.remove(&page);
    }
    match written {
        Ok(()) => {
            if wanted {
                guard.swapped.insert(page, slot);
            } else {
                crate::services::vm::swap_free(slot);
            }
            drop(guard);
            crate::services::vm::release(run);
            crate::services::vm::counted_page_out(true);
            Ok(())
        }
        Err(failure) => {
            crate::println!("[vm] space {id}: page {page:#x} cannot go to swap slot {slot}: {failure}");
            crate::services::vm::swap_free(slot);
            if wanted {
                restore(root, &mut guard, page, run);
            } else {
                drop(guard);
                crate::services::vm::release(run);
            }
            Err(FaultKill::Swap)
        }
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
        // No new strand finds the space for memory pressure; one that has it already sees
        // it dead (under the lock) and leaves its tables alone.
        crate::arch::csr::without_interrupts(|| {
            let mut spaces = SPACES.lock();
            if spaces.get(&self.id).is_some_and(|(_, translation)| Arc::ptr_eq(translation, &self.translation)) {
                spaces.remove(&self.id);
            }
        });
        // The `vm_map` pages go back through the translation service (frame table and
        // counters); their leaves are no longer reachable by any hart.
        let mut translation = self.translation.lock();
        translation.dead = true;
        // Pages being written to swap: cancelled (their writers free the slots).
        translation.in_transit.clear();
        for run in core::mem::take(&mut translation.pages).into_values() {
            crate::services::vm::release(run);
        }
        free_slots(&mut translation.swapped, 0..u64::MAX);
        free_slots(&mut translation.copies, 0..u64::MAX);
        translation.written_before_page_out.clear();
        // A view may outlive the space (kept by a withdrawn registration): its page tables
        // go now, with the space, and so does its hold on the program's file.
        drop(core::mem::take(&mut translation.tables));
        translation.image = None;
        drop(translation);
        crate::services::vm::forget_space(self.id);
        // The other frames (regions, then tables) are freed by their own drops.
    }
}

/// The leaf bits an `access` sets: accessed, and dirty for a store (set in software for
/// a hart that faults rather than set them itself).
fn touched_bits(access: AccessKind) -> PteFlags {
    if access == AccessKind::Write { PteFlags::ACCESSED | PteFlags::DIRTY } else { PteFlags::ACCESSED }
}

/// Leaf flags for a `vm_map` page's protection, plus the U bit.
fn vm_flags(protection: spindle_service_vm::Protection) -> PteFlags {
    let mut flags = PteFlags::USER;
    for (wanted, flag) in [(protection.readable(), PteFlags::READ), (protection.writable(), PteFlags::WRITE), (protection.executable(), PteFlags::EXECUTE)] {
        if wanted {
            flags = flags | flag;
        }
    }
    flags
}

/// Kernel tests: live space `id`'s root table and translation, as [`SPACES`] holds them.
#[cfg(feature = "tests")]
fn live_space(id: u64) -> Option<LiveSpace> {
    crate::arch::csr::without_interrupts(|| SPACES.lock().get(&id).map(|(root, translation)| (*root, translation.clone())))
}

/// Kernel tests: the resident pages of live space `id`'s `vm_map` regions (not its image,
/// not its stack), in address order.
#[cfg(feature = "tests")]
pub fn resident_vm_map_pages(id: u64) -> Vec<u64> {
    let Some((_, translation)) = live_space(id) else { return Vec::new() };
    let translation = translation.lock();
    let in_vm_map = |page: u64| page < STACK_BOTTOM as u64 && translation.regions.containing(page).is_some() && !translation.is_image_page(page);
    translation.pages.keys().filter(|&page| in_vm_map(page)).collect()
}

/// Kernel tests: the lowest resident page of live space `id`'s `vm_map` regions (its
/// first `vm_map` page), if any.
#[cfg(feature = "tests")]
pub fn lowest_resident_page(id: u64) -> Option<u64> {
    resident_vm_map_pages(id).first().copied()
}

/// Kernel tests: pages out resident `page` of live space `id` as memory pressure does
/// ([`evict`]: the disk write blocks this strand with the page in transit).
#[cfg(feature = "tests")]
pub fn page_out_page(id: u64, page: u64) -> Result<(), alloc::string::String> {
    let (root, translation) = live_space(id).ok_or_else(|| alloc::format!("no live space {id}"))?;
    let guard = translation.lock();
    let frame = guard.pages.get(&page).map(frame_of).ok_or_else(|| alloc::format!("page {page:#x} of space {id} is not resident"))?;
    evict(root, id, &translation, guard, page, frame).map_err(|kill| alloc::format!("{kill:?}"))
}

/// Kernel tests: the word at `address` of live space `id`, read as a kernel copy reads it
/// (faulting the page in from swap, waiting while it is in transit).
#[cfg(feature = "tests")]
pub fn read_word(id: u64, address: u64) -> Result<u64, alloc::string::String> {
    let (root, translation) = live_space(id).ok_or_else(|| alloc::format!("no live space {id}"))?;
    if translation.lock().dead {
        return Err(alloc::format!("space {id} is gone"));
    }
    let mut value = 0u64;
    with_page_in(root, id, &translation, address as usize, 8, PageAccess::Read, |physical| {
        // SAFETY: `with_page_in` passes the physical address of the checked, resident,
        // readable word (identity-mapped for the kernel), with interrupts off so the frame
        // stays the page's for this read; 8-byte aligned as `address` is.
        value = unsafe { core::ptr::read_volatile(physical as *const u64) };
    })
    .map_err(|error| alloc::format!("{error:?}"))?;
    Ok(value)
}

/// Kernel tests: whether `page` of live space `id` is on its way to swap.
#[cfg(feature = "tests")]
pub fn in_transit(id: u64, page: u64) -> bool {
    live_space(id).is_some_and(|(_, translation)| translation.lock().in_transit.contains_key(&page))
}
