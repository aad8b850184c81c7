//! The user regions of one address space: where they lie, their protection, what backs
//! them, and who handles their faults — plus per-page protection set by the Appel & Li
//! primitives ([`crate::primitives`]).
//!
//! A region's [`Region::protection`] is its ceiling: the protection it was created with,
//! which `unprotN` restores; `prot1`/`protN` and a handler's answer may set a page's
//! protection to anything within it. The effective protection of a page is its own if
//! one was set, else the region's ([`RegionTable::protection_of`]).

use alloc::vec::Vec;

use crate::runs::ProtectionRuns;
use core::fmt;

use spindle_service_frames::Owner;

/// Bytes in a page.
pub const PAGE_SIZE: u64 = 4096;

/// First user address (the process layout's `USER_REGION_START`).
pub const USER_START: u64 = 0x10_0000_0000;

/// One past the last user address (the process layout's `USER_REGION_END`).
pub const USER_END: u64 = 0x20_0000_0000;

/// Most regions one address space may have.
pub const MAX_REGIONS: usize = 256;

/// A region's id: unique within its table, never 0 (0 is "no region" in records).
pub type RegionId = u64;

/// Whether `address` is a user address.
pub fn is_user_address(address: u64) -> bool {
    (USER_START..USER_END).contains(&address)
}

/// A page's or a region's protection: read, write, execute. Write without read is not a
/// protection (RISC-V reserves it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Protection(u8);

impl Protection {
    /// No access: the page's mapping is removed, its frame kept.
    pub const NONE: Protection = Protection(0);
    /// Read only.
    pub const READ: Protection = Protection(Protection::R);
    /// Read and write.
    pub const READ_WRITE: Protection = Protection(Protection::R | Protection::W);
    /// Read and execute.
    pub const READ_EXECUTE: Protection = Protection(Protection::R | Protection::X);
    /// Execute only.
    pub const EXECUTE: Protection = Protection(Protection::X);

    const R: u8 = 1;
    const W: u8 = 2;
    const X: u8 = 4;

    /// Decodes bits (1 read, 2 write, 4 execute).
    ///
    /// Errors: [`RegionError::BadProtection`] for unknown bits or write without read.
    pub fn from_bits(bits: u64) -> Result<Protection, RegionError> {
        let r = u64::from(Protection::R);
        let w = u64::from(Protection::W);
        let x = u64::from(Protection::X);
        if bits & !(r | w | x) != 0 || (bits & w != 0 && bits & r == 0) {
            return Err(RegionError::BadProtection(bits));
        }
        Ok(Protection(bits as u8))
    }

    /// The bits ([`Protection::from_bits`]'s input).
    pub fn bits(self) -> u64 {
        u64::from(self.0)
    }

    /// Whether reading is allowed.
    pub fn readable(self) -> bool {
        self.0 & Protection::R != 0
    }

    /// Whether writing is allowed.
    pub fn writable(self) -> bool {
        self.0 & Protection::W != 0
    }

    /// Whether executing is allowed.
    pub fn executable(self) -> bool {
        self.0 & Protection::X != 0
    }

    /// Whether every access `self` allows is allowed by `ceiling`.
    pub fn within(self, ceiling: Protection) -> bool {
        self.0 & !ceiling.0 == 0
    }

    /// The accesses both `self` and `ceiling` allow (write never without read: both
    /// allow read wherever both allow write).
    pub fn capped_at(self, ceiling: Protection) -> Protection {
        Protection(self.0 & ceiling.0)
    }
}

/// What backs a region, which decides the default outcome of its faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// Anonymous memory: a missing page is a zero-filled frame (demand-zero).
    Anonymous,
    /// Managed by an extension or a user-level pager: faults go to its trap handler;
    /// without an answer the process is killed.
    Managed,
    /// Backed by a program's image (the boot bundle's copy or its ELF file): a missing page
    /// is filled from it ([`crate::Outcome::Fill`]). A page written since is the process's
    /// own from then on: paged out to swap like anonymous memory (a clean one is dropped
    /// and filled again). Not the program's to protect or trap.
    FileBacked,
}

/// Who receives a region's faults (set by `trap`, [`RegionTable::trap`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trap {
    /// The handler's owner: the frames it may map are the frames this owner holds.
    pub owner: Owner,
    /// The handler's id (the kernel's: a binding, an upcall port).
    pub handler: u64,
}

/// One user region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Its id.
    pub id: RegionId,
    /// First address (page-aligned).
    pub start: u64,
    /// Length in bytes (a positive multiple of [`PAGE_SIZE`]).
    pub length: u64,
    /// Its protection, the ceiling of its pages'.
    pub protection: Protection,
    /// What backs it.
    pub kind: RegionKind,
    /// Who handles its faults, if anyone.
    pub trap: Option<Trap>,
}

impl Region {
    /// One past its last address (regions of a table lie inside the user window; a
    /// hand-made one saturates rather than overflows).
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.length)
    }

    /// Whether `address` lies inside it.
    pub fn contains(&self, address: u64) -> bool {
        (self.start..self.end()).contains(&address)
    }

    /// Pages in it.
    pub fn pages(&self) -> u64 {
        self.length / PAGE_SIZE
    }
}

/// Why a region operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// An address or a length is not page-aligned.
    Misaligned(u64),
    /// A region of length 0.
    Empty,
    /// Some byte lies outside the user window (or the range wraps around).
    NotUserAddress(u64),
    /// The new region overlaps region `0`.
    Overlaps(RegionId),
    /// [`MAX_REGIONS`] regions already.
    TooManyRegions,
    /// No region has this id.
    NoSuchRegion(RegionId),
    /// Unknown protection bits, or write without read.
    BadProtection(u64),
}

impl fmt::Display for RegionError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionError::Misaligned(value) => write!(formatter, "{value:#x} is not page-aligned"),
            RegionError::Empty => formatter.write_str("a region cannot be empty"),
            RegionError::NotUserAddress(address) => write!(formatter, "{address:#x} is outside the user address range"),
            RegionError::Overlaps(id) => write!(formatter, "the region overlaps region {id}"),
            RegionError::TooManyRegions => write!(formatter, "an address space has at most {MAX_REGIONS} regions"),
            RegionError::NoSuchRegion(id) => write!(formatter, "no region {id}"),
            RegionError::BadProtection(bits) => write!(formatter, "protection bits {bits:#x} are not a protection"),
        }
    }
}

impl core::error::Error for RegionError {}

/// Where [`RegionTable`]s draw their generations from: every table, and every change of
/// one, gets a number no other has had.
static GENERATIONS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// A generation no table has had ([`GENERATIONS`]; 2^64 changes do not happen).
fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}

/// Where [`RegionTable::with_unique_ids`] tables draw region ids from (never 0: a record's
/// `region` 0 means none).
static REGION_IDS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// The regions of one address space.
#[derive(Debug)]
pub struct RegionTable {
    space: u64,
    /// The regions, sorted by start (they never overlap). A sorted vector rather than a
    /// tree: at most [`MAX_REGIONS`], and the fault path looks a region up several times
    /// per fault (a binary search here is a few instructions per level).
    by_start: Vec<Region>,
    /// The next region's id; 0: drawn from [`REGION_IDS`] instead
    /// ([`RegionTable::with_unique_ids`]).
    next_id: RegionId,
    /// Pages whose protection differs from their region's.
    pub(crate) page_protection: ProtectionRuns,
    /// Names the table's regions as they are now: a fresh number whenever one is added or
    /// removed, or its kind or trap changes, drawn from [`GENERATIONS`] so that no two
    /// tables (and no two states of one) share it. A protection change checked at one
    /// number holds as long as the number stays ([`crate::CheckedChange`]).
    pub(crate) generation: u64,
}

impl RegionTable {
    /// No regions, for address space `space`; region ids count from 1 in this table.
    pub fn new(space: u64) -> RegionTable {
        RegionTable { space, by_start: Vec::new(), next_id: 1, page_protection: ProtectionRuns::new(), generation: next_generation() }
    }

    /// No regions, for address space `space`; region ids are unique among every table made
    /// so (drawn from one counter). The kernel's: a translation event's handlers are
    /// indexed on the region, and two spaces' regions with one id would share an index
    /// entry (the space guard then decides, on the dispatcher's general path).
    pub fn with_unique_ids(space: u64) -> RegionTable {
        RegionTable { next_id: 0, ..RegionTable::new(space) }
    }

    /// The address space's id.
    pub fn space(&self) -> u64 {
        self.space
    }

    /// Every region, in address order.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.by_start.iter()
    }

    /// Where the regions lie in memory: a `&Region` pointing inside is one of this table's.
    pub(crate) fn regions_in_place(&self) -> core::ops::Range<*const Region> {
        self.by_start.as_ptr_range()
    }

    /// The region with id `id`.
    pub fn region(&self, id: RegionId) -> Option<&Region> {
        self.by_start.iter().find(|region| region.id == id)
    }

    /// The region containing `address`.
    pub fn containing(&self, address: u64) -> Option<&Region> {
        // The last region starting at or below `address`.
        let after = self.by_start.partition_point(|region| region.start <= address);
        after.checked_sub(1).map(|index| &self.by_start[index]).filter(|region| region.contains(address))
    }

    /// Adds a region of `length` bytes at `start`; returns its id.
    ///
    /// Errors: [`RegionError::Misaligned`], [`RegionError::Empty`],
    /// [`RegionError::NotUserAddress`], [`RegionError::Overlaps`],
    /// [`RegionError::TooManyRegions`].
    pub fn add(&mut self, start: u64, length: u64, protection: Protection, kind: RegionKind) -> Result<RegionId, RegionError> {
        for value in [start, length] {
            if !value.is_multiple_of(PAGE_SIZE) {
                return Err(RegionError::Misaligned(value));
            }
        }
        if length == 0 {
            return Err(RegionError::Empty);
        }
        if !is_user_address(start) {
            return Err(RegionError::NotUserAddress(start));
        }
        let end = start.checked_add(length).filter(|&end| end <= USER_END).ok_or(RegionError::NotUserAddress(start.saturating_add(length)))?;
        // Where it goes: after every region starting below `end`; the one before that is
        // the only one that may overlap it.
        let position = self.by_start.partition_point(|region| region.start < end);
        if let Some(other) = position.checked_sub(1).map(|index| &self.by_start[index]).filter(|region| region.end() > start) {
            return Err(RegionError::Overlaps(other.id));
        }
        if self.by_start.len() >= MAX_REGIONS {
            return Err(RegionError::TooManyRegions);
        }
        let id = match self.next_id {
            0 => REGION_IDS.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
            next => {
                self.next_id = next + 1;
                next
            }
        };
        self.generation = next_generation();
        self.by_start.insert(position, Region { id, start, length, protection, kind, trap: None });
        Ok(id)
    }

    /// Removes region `id` (and its pages' protections); returns it.
    ///
    /// Errors: [`RegionError::NoSuchRegion`].
    pub fn remove(&mut self, id: RegionId) -> Result<Region, RegionError> {
        let index = self.by_start.iter().position(|region| region.id == id).ok_or(RegionError::NoSuchRegion(id))?;
        let region = self.by_start.remove(index);
        self.generation = next_generation();
        self.page_protection.clear(region.start, region.end());
        Ok(region)
    }

    /// Changes what backs region `id` (a process marks its anonymous region managed);
    /// returns the kind it had.
    ///
    /// Errors: [`RegionError::NoSuchRegion`].
    pub fn set_kind(&mut self, id: RegionId, kind: RegionKind) -> Result<RegionKind, RegionError> {
        let region = self.region_mut(id).ok_or(RegionError::NoSuchRegion(id))?;
        Ok(core::mem::replace(&mut region.kind, kind))
    }

    /// Region `id` to change: counted as a change of the regions.
    pub(crate) fn region_mut(&mut self, id: RegionId) -> Option<&mut Region> {
        self.generation = next_generation();
        self.by_start.iter_mut().find(|region| region.id == id)
    }

    /// The effective protection of the page containing `address`: its own, else its
    /// region's; `None` outside every region.
    pub fn protection_of(&self, address: u64) -> Option<Protection> {
        let region = self.containing(address)?;
        let page = address - address % PAGE_SIZE;
        Some(self.page_protection.get(page).unwrap_or(region.protection))
    }

    /// Pages whose protection differs from their region's.
    pub fn protected_pages(&self) -> usize {
        self.page_protection.pages() as usize
    }
}
