//! Appel & Li's virtual-memory primitives for user programs, as pure operations on the
//! region table: `dirty`, `prot1`, `protN`, `unprotN` and `trap`.
//!
//! | primitive | here | the kernel then |
//! |---|---|---|
//! | `dirty(page)` | [`RegionTable::dirty`]: checks the page, answers from the PTE bits the kernel read | returns the answer |
//! | `prot1(page, prot)` | [`RegionTable::prot1`] | rewrites the page's PTE, flushes its TLB entry |
//! | `protN(start, n, prot)` | [`RegionTable::prot_n`] | rewrites the present PTEs of the [`ProtChange`] |
//! | `unprotN(start, n)` | [`RegionTable::unprot_n`]: back to the region's protection | the same |
//! | `trap(region, handler)` | [`RegionTable::trap`] / [`RegionTable::untrap`] | raises the region's faults to the handler |
//!
//! Argument checks: every address page-aligned and a user address; a range of 1 to
//! [`MAX_PROT_PAGES`] pages lying inside one region; a protection within the region's; a
//! region that is not a program's image ([`RegionKind::FileBacked`]).
//! A [`ProtChange`] is what the kernel applies to the page table; the table has already
//! recorded it when the call returns `Ok`.

use core::fmt;

use crate::fault::Pte;
use crate::region::{PAGE_SIZE, Protection, RegionId, RegionKind, RegionTable, Trap, is_user_address};

/// Most pages one `protN` / `unprotN` may change.
pub const MAX_PROT_PAGES: u64 = 1 << 16;

/// A protection change for the kernel to apply: `count` pages from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtChange {
    /// The region the pages lie in.
    pub region: RegionId,
    /// First page (page-aligned).
    pub start: u64,
    /// Pages.
    pub count: u64,
    /// Their new protection.
    pub protection: Protection,
}

/// A range of 1 to [`MAX_PROT_PAGES`] pages, or [`PrimitiveError::BadCount`].
fn check_count(count: u64) -> Result<(), PrimitiveError> {
    if count == 0 || count > MAX_PROT_PAGES { Err(PrimitiveError::BadCount(count)) } else { Ok(()) }
}

/// A [`ProtChange`] as [`RegionTable::check_change`] or [`RegionTable::check_change_in`]
/// passed it: with its region's protection and the table's generation then (a number no
/// other table or state of this one has), so that [`RegionTable::apply_checked`] need not
/// check it again while the generation stays. Made only by those checks (its fields are
/// private).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedChange {
    change: ProtChange,
    ceiling: Protection,
    generation: u64,
}

impl CheckedChange {
    /// The change.
    pub fn change(&self) -> &ProtChange {
        &self.change
    }
}

/// Why a primitive was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrimitiveError {
    /// The address is not page-aligned.
    Misaligned(u64),
    /// The address is not a user address.
    NotUserAddress(u64),
    /// No region contains the address.
    NoRegion(u64),
    /// The range runs past the end of its region (or wraps around).
    CrossesRegion {
        /// The range's first page.
        start: u64,
        /// Pages asked for.
        count: u64,
    },
    /// A count of 0 or above [`MAX_PROT_PAGES`].
    BadCount(u64),
    /// The protection allows more than the region's.
    AboveRegion(Protection),
    /// No region has this id.
    NoSuchRegion(RegionId),
    /// Another owner's handler already traps the region.
    AlreadyTrapped(Trap),
    /// The region is not trapped by this owner (an untrap).
    NotTrapped(RegionId),
    /// The region is a program's image (file-backed): not the program's to protect or trap.
    Image(RegionId),
}

impl fmt::Display for PrimitiveError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrimitiveError::Misaligned(address) => write!(formatter, "{address:#x} is not page-aligned"),
            PrimitiveError::NotUserAddress(address) => write!(formatter, "{address:#x} is not a user address"),
            PrimitiveError::NoRegion(address) => write!(formatter, "no region contains {address:#x}"),
            PrimitiveError::CrossesRegion { start, count } => write!(formatter, "{count} pages from {start:#x} run past the end of the region"),
            PrimitiveError::BadCount(count) => write!(formatter, "a range is 1 to {MAX_PROT_PAGES} pages, not {count}"),
            PrimitiveError::AboveRegion(protection) => {
                write!(formatter, "protection {:#x} allows more than the region's", protection.bits())
            }
            PrimitiveError::NoSuchRegion(id) => write!(formatter, "no region {id}"),
            PrimitiveError::AlreadyTrapped(trap) => write!(formatter, "the region is already trapped by {} (handler {})", trap.owner, trap.handler),
            PrimitiveError::NotTrapped(id) => write!(formatter, "region {id} is not trapped by this owner"),
            PrimitiveError::Image(id) => write!(formatter, "region {id} is the program's image"),
        }
    }
}

impl core::error::Error for PrimitiveError {}

impl RegionTable {
    /// Checks a page address: aligned, a user address, inside a region; returns the
    /// region's id.
    fn check_page(&self, page: u64) -> Result<RegionId, PrimitiveError> {
        if !page.is_multiple_of(PAGE_SIZE) {
            return Err(PrimitiveError::Misaligned(page));
        }
        self.check_page_region(page).map(|region| region.id)
    }

    /// [`RegionTable::check_page`], answering the region itself.
    fn check_page_region(&self, page: u64) -> Result<&crate::region::Region, PrimitiveError> {
        if !page.is_multiple_of(PAGE_SIZE) {
            return Err(PrimitiveError::Misaligned(page));
        }
        if !is_user_address(page) {
            return Err(PrimitiveError::NotUserAddress(page));
        }
        self.containing(page).ok_or(PrimitiveError::NoRegion(page))
    }

    /// Checks a protection change of `count` pages from `start` to `protection` without
    /// recording it (also the check of a handler's "change protection" answer).
    ///
    /// Errors: [`PrimitiveError::BadCount`], [`PrimitiveError::Misaligned`],
    /// [`PrimitiveError::NotUserAddress`], [`PrimitiveError::NoRegion`],
    /// [`PrimitiveError::CrossesRegion`], [`PrimitiveError::AboveRegion`].
    pub fn check_protect(&self, start: u64, count: u64, protection: Protection) -> Result<ProtChange, PrimitiveError> {
        self.check_protect_in(start, count, protection).map(|(change, _)| change)
    }

    /// [`RegionTable::check_protect`], also answering the region's own protection.
    fn check_protect_in(&self, start: u64, count: u64, protection: Protection) -> Result<(ProtChange, Protection), PrimitiveError> {
        check_count(count)?;
        let region = self.check_page_region(start)?;
        Self::check_protect_of(region, start, count, protection)
    }

    /// [`RegionTable::check_protect_in`] once `region` is known to contain `start` (a
    /// page-aligned user address) and `count` has passed [`check_count`].
    fn check_protect_of(region: &crate::region::Region, start: u64, count: u64, protection: Protection) -> Result<(ProtChange, Protection), PrimitiveError> {
        if region.kind == RegionKind::FileBacked {
            return Err(PrimitiveError::Image(region.id));
        }
        let end = count.checked_mul(PAGE_SIZE).and_then(|bytes| start.checked_add(bytes));
        if end.is_none_or(|end| end > region.end()) {
            return Err(PrimitiveError::CrossesRegion { start, count });
        }
        if !protection.within(region.protection) {
            return Err(PrimitiveError::AboveRegion(protection));
        }
        Ok((ProtChange { region: region.id, start, count, protection }, region.protection))
    }

    /// [`RegionTable::check_protect`], answering a change that
    /// [`RegionTable::apply_checked`] records without checking it again while no region
    /// changes (a fault's answer is checked, then applied under the same lock).
    pub fn check_change(&self, start: u64, count: u64, protection: Protection) -> Result<CheckedChange, PrimitiveError> {
        let (change, ceiling) = self.check_protect_in(start, count, protection)?;
        Ok(CheckedChange { change, ceiling, generation: self.generation })
    }

    /// [`RegionTable::check_change`] when the region is known already (a fault's answer,
    /// checked against the faulting region first): `region` must be one of this table's
    /// (a reference into it, not a copy) and contain `start`, a page-aligned address.
    /// Errors: as `check_change`; [`PrimitiveError::NoRegion`] if `region` is not this
    /// table's or does not contain `start`.
    pub fn check_change_in(&self, region: &crate::region::Region, start: u64, count: u64, protection: Protection) -> Result<CheckedChange, PrimitiveError> {
        let ours = self.regions_in_place().contains(&core::ptr::from_ref(region));
        if !ours || !region.contains(start) || !start.is_multiple_of(PAGE_SIZE) {
            return Err(PrimitiveError::NoRegion(start));
        }
        check_count(count)?;
        let (change, ceiling) = Self::check_protect_of(region, start, count, protection)?;
        Ok(CheckedChange { change, ceiling, generation: self.generation })
    }

    /// Records a change [`RegionTable::check_protect_in`] passed (with its region's
    /// protection): one run, however many pages.
    fn record(&mut self, change: &ProtChange, ceiling: Protection) {
        // Cannot overflow: the check found the range ending inside the region.
        self.page_protection.set(change.start, change.start + change.count * PAGE_SIZE, change.protection, ceiling);
    }

    /// Records a change (from [`RegionTable::check_protect`]); the change is checked again,
    /// so a stale or hand-made one is refused rather than recorded.
    ///
    /// Errors: as [`RegionTable::check_protect`]; [`PrimitiveError::NoSuchRegion`] if the
    /// pages are no longer in `change.region`.
    pub fn apply(&mut self, change: &ProtChange) -> Result<(), PrimitiveError> {
        let (checked, ceiling) = self.check_protect_in(change.start, change.count, change.protection)?;
        if checked.region != change.region {
            return Err(PrimitiveError::NoSuchRegion(change.region));
        }
        self.record(&checked, ceiling);
        Ok(())
    }

    /// Records a change [`RegionTable::check_change`] or [`RegionTable::check_change_in`]
    /// passed: as it is if it was checked by this table and no region changed since (the
    /// generation is the same: the check holds), else checked again as
    /// [`RegionTable::apply`] does.
    ///
    /// Errors: as [`RegionTable::apply`].
    pub fn apply_checked(&mut self, checked: &CheckedChange) -> Result<(), PrimitiveError> {
        if checked.generation != self.generation {
            return self.apply(&checked.change);
        }
        self.record(&checked.change, checked.ceiling);
        Ok(())
    }

    /// `dirty(page)`: whether the page was written since it was last cleaned, from the
    /// PTE bits the kernel read (a page not present is clean).
    ///
    /// Errors: [`PrimitiveError::Misaligned`], [`PrimitiveError::NotUserAddress`],
    /// [`PrimitiveError::NoRegion`].
    pub fn dirty(&self, page: u64, pte: Pte) -> Result<bool, PrimitiveError> {
        self.check_page(page)?;
        Ok(pte.present && pte.dirty)
    }

    /// `prot1(page, protection)`: sets one page's protection.
    ///
    /// Errors: as [`RegionTable::check_protect`].
    pub fn prot1(&mut self, page: u64, protection: Protection) -> Result<ProtChange, PrimitiveError> {
        self.prot_n(page, 1, protection)
    }

    /// `protN(start, count, protection)`: sets `count` pages' protection.
    ///
    /// Errors: as [`RegionTable::check_protect`].
    pub fn prot_n(&mut self, start: u64, count: u64, protection: Protection) -> Result<ProtChange, PrimitiveError> {
        let (change, ceiling) = self.check_protect_in(start, count, protection)?;
        self.record(&change, ceiling);
        Ok(change)
    }

    /// `unprotN(start, count)`: gives `count` pages back their region's protection.
    ///
    /// Errors: as [`RegionTable::check_protect`].
    pub fn unprot_n(&mut self, start: u64, count: u64) -> Result<ProtChange, PrimitiveError> {
        let ceiling = self.check_page_region(start)?.protection;
        self.prot_n(start, count, ceiling)
    }

    /// `trap(region, handler)`: `trap` receives the region's faults from now on. The same
    /// owner may replace its own handler; returns the one replaced.
    ///
    /// Errors: [`PrimitiveError::NoSuchRegion`]; [`PrimitiveError::AlreadyTrapped`] if
    /// another owner's handler has it.
    pub fn trap(&mut self, region: RegionId, trap: Trap) -> Result<Option<Trap>, PrimitiveError> {
        let entry = self.region_mut(region).ok_or(PrimitiveError::NoSuchRegion(region))?;
        if entry.kind == RegionKind::FileBacked {
            return Err(PrimitiveError::Image(region));
        }
        match entry.trap {
            Some(existing) if existing.owner != trap.owner => Err(PrimitiveError::AlreadyTrapped(existing)),
            previous => {
                entry.trap = Some(trap);
                Ok(previous)
            }
        }
    }

    /// Removes `owner`'s handler from `region`; returns it.
    ///
    /// Errors: [`PrimitiveError::NoSuchRegion`], [`PrimitiveError::NotTrapped`].
    pub fn untrap(&mut self, region: RegionId, owner: spindle_service_frames::Owner) -> Result<Trap, PrimitiveError> {
        let entry = self.region_mut(region).ok_or(PrimitiveError::NoSuchRegion(region))?;
        match entry.trap {
            Some(trap) if trap.owner == owner => {
                entry.trap = None;
                Ok(trap)
            }
            _ => Err(PrimitiveError::NotTrapped(region)),
        }
    }
}
