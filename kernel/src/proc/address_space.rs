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
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use spindle_abi::syscall::Error;
use spindle_process::layout::{PAGE_SIZE, STACK_BOTTOM, STACK_SIZE, USER_ROOT_SLOTS};
use spindle_process::range::pages;
use spindle_process::{Executable, PageAccess, Protection, Region, RegionKind, Regions, SegmentPermissions};
use spindle_service_frames::Owner;
use spindle_service_vm::{AccessKind, FaultClass, KillCause, Outcome, ProtChange, Pte, RegionKind as VmKind, RegionTable, Trap};

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
    pages: BTreeMap<u64, FrameRun>,
    /// Page-table pages allocated while mapping those pages.
    tables: Vec<FrameRun>,
}

/// Why a user page fault ends the process ([`AddressSpace::handle_fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKill {
    /// The translation service's cause.
    Vm(KillCause),
    /// No frame for a demand-zero page, or for a page table.
    OutOfMemory,
}

impl fmt::Display for FaultKill {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKill::Vm(cause) => write!(formatter, "{cause}"),
            FaultKill::OutOfMemory => formatter.write_str("no frame for the page"),
        }
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
        let translation = Translation { regions: RegionTable::new(id), pages: BTreeMap::new(), tables: Vec::new() };
        Ok(AddressSpace { root, table_frames, regions: Regions::new(), region_frames: BTreeMap::new(), id, translation: Arc::new(spin::Mutex::new(translation)) })
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
        self.table_frames.len() + self.region_frames.values().map(FrameRun::count).sum::<usize>() + translation.pages.len() + translation.tables.len()
    }

    /// Pages of `vm_map` regions that have a frame.
    pub fn resident_pages(&self) -> usize {
        self.translation.lock().pages.len()
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
        if let Some(id) = translation.regions.containing(region.start as u64).map(|region| region.id) {
            // A `vm_map` region: unmap and give back the pages that have a frame.
            let pages: Vec<u64> = translation.pages.range(region.start as u64..region.end() as u64).map(|(&page, _)| page).collect();
            for page in pages {
                if self.root.translate(page as usize).is_some() {
                    let _ = self.root.unmap_range(page as usize, PAGE_SIZE);
                }
                if let Some(run) = translation.pages.remove(&page) {
                    crate::services::vm::release(run);
                }
            }
            crate::arch::csr::flush_tlb();
            let _ = translation.regions.remove(id);
            self.regions.remove(region.start);
            return Ok(());
        }
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
        let mut translation = self.translation.lock();
        if translation.regions.containing(region.start as u64).is_some() {
            // A `vm_map` region (every anonymous region is one): `protN` over all its pages.
            let wanted = match protection {
                Protection::None => spindle_service_vm::Protection::NONE,
                Protection::Read => spindle_service_vm::Protection::READ,
                Protection::ReadWrite => spindle_service_vm::Protection::READ_WRITE,
            };
            let change = translation.regions.prot_n(region.start as u64, (region.length / PAGE_SIZE) as u64, wanted).map_err(Self::vm_error)?;
            self.apply_protection(&mut translation, &change).map_err(|_| Error::NoMemory)?;
            drop(translation);
            self.regions.set_protection(region.start, protection);
            return Ok(());
        }
        drop(translation);
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
    ///
    /// A page of a `vm_map` region that has no frame yet is faulted in first (demand-zero,
    /// no event: a managed region's missing page is refused here).
    pub fn check(&self, address: usize, length: usize, access: PageAccess) -> Result<(), Error> {
        self.fault_in(address, length, access);
        check_in(self.root, address, length, access)
    }

    /// Gives every page of `address..address + length` of a `vm_map` region that the
    /// access may touch but that has no frame yet its demand-zero frame (kernel copies
    /// from and to user memory). Pages it cannot fault in are left for the check to refuse.
    fn fault_in(&self, address: usize, length: usize, access: PageAccess) {
        fault_in(self.root, self.id, &self.translation, address, length, access);
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
        let permissions = PteFlags::READ | PteFlags::WRITE | PteFlags::EXECUTE;
        let mut outcome = Ok(());
        for index in 0..change.count {
            let page = change.start + index * PAGE_SIZE as u64;
            let Some(physical) = translation.pages.get(&page).map(FrameRun::address) else { continue };
            let present = self.root.translate(page as usize).is_some();
            if change.protection == spindle_service_vm::Protection::NONE {
                if present {
                    let _ = self.root.unmap_range(page as usize, PAGE_SIZE);
                }
            } else if present {
                // Clearing every permission first would leave no leaf: set the new ones,
                // then clear the others.
                let wanted = vm_flags(change.protection);
                let _ = self.root.update_leaf(page as usize, wanted, PteFlags::empty());
                let unwanted = PteFlags::from_bits(permissions.bits() & !wanted.bits());
                let _ = self.root.update_leaf(page as usize, PteFlags::empty(), unwanted);
            } else if self
                .root
                .map_range(page as usize, physical, PAGE_SIZE, vm_flags(change.protection), &mut TableFrames(&mut translation.tables))
                .is_err()
            {
                outcome = Err(FaultKill::OutOfMemory);
            }
        }
        crate::arch::csr::flush_tlb();
        outcome
    }

    /// The system-call error for a refused primitive.
    fn vm_error(error: spindle_service_vm::PrimitiveError) -> Error {
        use spindle_service_vm::PrimitiveError;
        match error {
            PrimitiveError::BadCount(_) => Error::BadLength,
            PrimitiveError::AboveRegion(_) => Error::NotPermitted,
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

    /// `dirty(address)`: whether the page of a `vm_map` region was written since it got
    /// its frame (a page without a frame, or protected to none, is clean). Errors:
    /// `BadAddress` (not page-aligned, or in no `vm_map` region).
    pub fn dirty(&self, address: usize) -> Result<bool, Error> {
        self.require_vm_map_region(address)?;
        let pte = self.pte(address);
        self.translation.lock().regions.dirty(address as u64, pte).map_err(Self::vm_error)
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
        let in_legacy_region = self.regions.containing(address).is_some();
        let pte = self.pte(address);
        let mut translation = self.translation.lock();
        let fault = spindle_service_vm::classify(&translation.regions, address as u64, access, pte);
        if fault.class == FaultClass::BadAddress && in_legacy_region {
            // The image, the stack or a `map_anonymous` region: eagerly mapped, so the
            // access is one its permissions forbid.
            return Err(FaultKill::Vm(KillCause::ProtectionViolation));
        }
        let decision = crate::services::vm::decide(&translation.regions, &fault);
        let protects = decision.protects;
        match decision.outcome {
            Outcome::Retry => {
                // The leaf allows the access: a stale TLB entry, or an accessed or dirty bit
                // the hardware wants set in software.
                let bits = if access == AccessKind::Write { PteFlags::ACCESSED | PteFlags::DIRTY } else { PteFlags::ACCESSED };
                let _ = self.root.update_leaf(address, bits, PteFlags::empty());
                crate::arch::csr::flush_tlb();
            }
            Outcome::Kill(cause) => return Err(FaultKill::Vm(cause)),
            Outcome::DemandZero { page, protection } => {
                let run = crate::services::vm::allocate(id, page).ok_or(FaultKill::OutOfMemory)?;
                self.map_vm_page(&mut translation, page, run, protection, access == AccessKind::Write)?;
            }
            Outcome::Map { page, protection, .. } => {
                let run = decision.frame.ok_or(FaultKill::Vm(KillCause::NoPager))?;
                self.map_vm_page(&mut translation, page, run, protection, access == AccessKind::Write)?;
            }
            Outcome::Protect(change) => {
                translation.regions.apply(&change).map_err(|_| FaultKill::Vm(KillCause::ProtectionViolation))?;
                self.apply_protection(&mut translation, &change)?;
            }
        }
        // Then the handlers' queued protection changes (in-kernel Appel & Li), each
        // checked as `prot_n`/`unprot_n`; a refused one is counted and skipped. (If one
        // takes the faulting page's access away again, the access faults again.)
        for queued in protects {
            let change = match queued.protection {
                Some(protection) => translation.regions.prot_n(queued.page, queued.count, protection),
                None => translation.regions.unprot_n(queued.page, queued.count),
            };
            match change {
                Ok(change) => self.apply_protection(&mut translation, &change)?,
                Err(_) => crate::services::vm::refused(),
            }
        }
        Ok(())
    }

    /// Copies user memory at `address` into `buffer` after [`Self::check`]ing it for reading.
    pub fn read(&self, address: usize, buffer: &mut [u8]) -> Result<(), Error> {
        self.fault_in(address, buffer.len(), PageAccess::Read);
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
        fault_in(self.root, self.id, &self.translation, address, buffer.len(), PageAccess::Read);
        // SAFETY: forwarded from the caller.
        unsafe { read_in(self.root, address, buffer) }
    }

    /// Faults the page at `address` in for `access` if it is a missing page of an
    /// anonymous `vm_map` region (demand-zero, no event): code running in the space on
    /// another strand (a migrating call, an upcall) touched it. True if the page is now
    /// mapped and its leaf allows the access (the instruction can run again).
    ///
    /// # Safety
    /// As for [`SpaceView::read`].
    pub unsafe fn fault_in(&self, address: usize, access: AccessKind) -> bool {
        let page_access = if access == AccessKind::Write { PageAccess::Write } else { PageAccess::Read };
        fault_in(self.root, self.id, &self.translation, address, 1, page_access);
        let allowed = self.root.translate(address).is_some_and(|(_, flags)| {
            flags.contains(PteFlags::USER)
                && match access {
                    AccessKind::Read => flags.contains(PteFlags::READ),
                    AccessKind::Write => flags.contains(PteFlags::WRITE),
                    AccessKind::Execute => flags.contains(PteFlags::EXECUTE),
                }
        });
        if allowed {
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
        fault_in(self.root, self.id, &self.translation, address, bytes.len(), PageAccess::Write);
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

/// [`AddressSpace::fault_in`] on the table at `root` of space `id`: demand-zero for every
/// missing page of an anonymous `vm_map` region in the range that `access` may touch (no
/// event; a managed region's missing page is left absent).
fn fault_in(root: PageTableRoot, id: u64, translation: &spin::Mutex<Translation>, address: usize, length: usize, access: PageAccess) {
    let Some(end) = address.checked_add(length) else { return };
    let kind = match access {
        PageAccess::Write => AccessKind::Write,
        PageAccess::Read => AccessKind::Read,
    };
    for page in pages(&(address..end)) {
        if root.translate(page).is_some() {
            continue;
        }
        let mut translation = translation.lock();
        let fault = spindle_service_vm::classify(&translation.regions, page as u64, kind, Pte::ABSENT);
        if fault.class != FaultClass::PageNotPresent || fault.kind != Some(VmKind::Anonymous) {
            continue;
        }
        if let Outcome::DemandZero { page, protection } = spindle_service_vm::default_outcome(&translation.regions, &fault)
            && let Some(run) = crate::services::vm::allocate(id, page)
        {
            // On failure the page stays absent and the check refuses it.
            let _ = map_vm_page(root, &mut translation, page, run, protection, kind == AccessKind::Write);
        }
    }
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

impl Drop for AddressSpace {
    fn drop(&mut self) {
        // Never free a table the hart still uses: its process switches to the kernel's
        // table before dropping the space; this is the backstop.
        if crate::arch::csr::satp() & crate::arch::csr::SATP_PPN_MASK == self.root.physical_address() / PAGE_SIZE {
            crate::sched::set_address_space(0);
        }
        crate::arch::csr::flush_tlb();
        // The `vm_map` pages go back through the translation service (frame table and
        // counters); their leaves are no longer reachable by any hart.
        let mut translation = self.translation.lock();
        for (_, run) in core::mem::take(&mut translation.pages) {
            crate::services::vm::release(run);
        }
        // A view may outlive the space (kept by a withdrawn registration): its page tables
        // go now, with the space.
        drop(core::mem::take(&mut translation.tables));
        drop(translation);
        crate::services::vm::forget_space(self.id);
        // The other frames (regions, then tables) are freed by their own drops.
    }
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
