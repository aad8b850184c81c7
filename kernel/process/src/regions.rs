//! A process's mapped regions: its image segments, its stack and its anonymous
//! mappings, with the placement of new anonymous mappings and the rules of `unmap`.
//!
//! The kernel keeps one [`Regions`] per address space next to the page table and the
//! frames; every decision about *where* and *whether* is made here, so it can be tested
//! on the host. Anonymous mappings are placed first-fit inside
//! [`ANONYMOUS_REGION`](crate::layout::ANONYMOUS_REGION), each followed by one unmapped
//! guard page, so running off the end of one faults instead of reaching the next.
//! An anonymous region's access can be changed as a whole ([`Regions::check_protect`],
//! [`Protection`]); the kernel then rewrites its leaves and flushes the TLB.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use spindle_abi::syscall::{ACCESS_READ, ACCESS_WRITE, Error, MAX_ANONYMOUS_BYTES, MAX_ANONYMOUS_REGIONS, MAX_MAP_LENGTH};

use crate::layout::{ANONYMOUS_REGION, PAGE_SIZE, page_ceil};

/// What a region holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// A `PT_LOAD` segment of the program image.
    Image,
    /// The user stack.
    Stack,
    /// Memory from `map_anonymous`.
    Anonymous,
}

/// One mapped region: page-aligned start and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First address (page-aligned).
    pub start: usize,
    /// Length in bytes (a positive multiple of the page size).
    pub length: usize,
    /// What it holds.
    pub kind: RegionKind,
}

impl Region {
    /// One past its last address.
    pub fn end(&self) -> usize {
        self.start + self.length
    }
}

/// The access of an anonymous region (`protect`'s `access` argument, decoded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protection {
    /// Not accessible at all: its pages are unmapped, its frames kept.
    None,
    /// Readable only.
    Read,
    /// Readable and writable (what `map_anonymous` gives).
    #[default]
    ReadWrite,
}

impl Protection {
    /// Decodes `ACCESS_READ | ACCESS_WRITE` bits (write implies read); `None` for unknown
    /// bits.
    pub fn from_access(access: usize) -> Option<Protection> {
        if access & !(ACCESS_READ | ACCESS_WRITE) != 0 {
            return None;
        }
        Some(if access & ACCESS_WRITE != 0 {
            Protection::ReadWrite
        } else if access & ACCESS_READ != 0 {
            Protection::Read
        } else {
            Protection::None
        })
    }

    /// Whether the pages are mapped at all.
    pub fn is_mapped(self) -> bool {
        self != Protection::None
    }

    /// Whether the pages are writable.
    pub fn is_writable(self) -> bool {
        self == Protection::ReadWrite
    }
}

/// Why [`Regions::insert`] refused a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertRefusal {
    /// The region is empty or not page-aligned.
    Misaligned,
    /// It overlaps a region that is already there.
    Overlaps,
}

/// The regions of one address space, by start address.
#[derive(Debug, Default)]
pub struct Regions {
    /// Sorted by start; regions never overlap. A sorted vector rather than a tree: few
    /// regions, and every `vm_map` system call and user fault looks one up (a binary
    /// search is a few instructions per level).
    by_start: Vec<Region>,
    anonymous_bytes: usize,
    anonymous_count: usize,
    /// Anonymous regions whose access `protect` changed from read-write, by start.
    protections: BTreeMap<usize, Protection>,
}

impl Regions {
    /// No regions.
    pub fn new() -> Regions {
        Regions::default()
    }

    /// Every region, in address order.
    pub fn iter(&self) -> impl Iterator<Item = &Region> {
        self.by_start.iter()
    }

    /// Bytes of anonymous memory held.
    pub fn anonymous_bytes(&self) -> usize {
        self.anonymous_bytes
    }

    /// The region containing `address`, if any.
    pub fn containing(&self, address: usize) -> Option<&Region> {
        let after = self.by_start.partition_point(|region| region.start <= address);
        after.checked_sub(1).map(|index| &self.by_start[index]).filter(|region| address < region.end())
    }

    /// Records a region (for the image and the stack, and after [`Self::place_anonymous`]).
    pub fn insert(&mut self, region: Region) -> Result<(), InsertRefusal> {
        if region.length == 0 || !region.start.is_multiple_of(PAGE_SIZE) || !region.length.is_multiple_of(PAGE_SIZE) {
            return Err(InsertRefusal::Misaligned);
        }
        let end = region.start.checked_add(region.length).ok_or(InsertRefusal::Misaligned)?;
        // After every region starting below `end`; only the one before may overlap it.
        let position = self.by_start.partition_point(|other| other.start < end);
        let before = position.checked_sub(1).map(|index| self.by_start[index]);
        if before.is_some_and(|other| other.end() > region.start) {
            return Err(InsertRefusal::Overlaps);
        }
        if region.kind == RegionKind::Anonymous {
            self.anonymous_bytes += region.length;
            self.anonymous_count += 1;
        }
        self.by_start.insert(position, region);
        Ok(())
    }

    /// Chooses where a new anonymous mapping of `length` bytes goes, enforcing the
    /// per-process limits; returns the region to map (not yet recorded).
    ///
    /// Errors: [`Error::BadLength`] (0 or above `MAX_MAP_LENGTH`), [`Error::TooMany`] (the
    /// process holds `MAX_ANONYMOUS_REGIONS`), [`Error::NoMemory`] (the quota
    /// `MAX_ANONYMOUS_BYTES` would be exceeded, or no gap is large enough).
    pub fn place_anonymous(&self, length: usize) -> Result<Region, Error> {
        if length == 0 || length > MAX_MAP_LENGTH {
            return Err(Error::BadLength);
        }
        let length = page_ceil(length).ok_or(Error::BadLength)?;
        if self.anonymous_count >= MAX_ANONYMOUS_REGIONS {
            return Err(Error::TooMany);
        }
        if self.anonymous_bytes + length > MAX_ANONYMOUS_BYTES {
            return Err(Error::NoMemory);
        }
        // Each mapping is followed by a guard page, so a candidate needs length + one page.
        let needed = length + PAGE_SIZE;
        let mut candidate = ANONYMOUS_REGION.start;
        for region in self.by_start.iter().filter(|region| ANONYMOUS_REGION.contains(&region.start)) {
            if candidate + needed <= region.start {
                break;
            }
            candidate = region.end() + PAGE_SIZE;
        }
        if candidate + needed > ANONYMOUS_REGION.end {
            return Err(Error::NoMemory);
        }
        Ok(Region { start: candidate, length, kind: RegionKind::Anonymous })
    }

    /// Checks an `unmap(address, length)` request and returns the region it names.
    ///
    /// Errors: [`Error::BadAddress`] (not page-aligned, or no region starts at `address`),
    /// [`Error::NotPermitted`] (the address is in the image or the stack),
    /// [`Error::BadLength`] (0, or not the region's length once rounded up to pages).
    pub fn check_unmap(&self, address: usize, length: usize) -> Result<Region, Error> {
        if !address.is_multiple_of(PAGE_SIZE) {
            return Err(Error::BadAddress);
        }
        if length == 0 {
            return Err(Error::BadLength);
        }
        let region = *self.containing(address).ok_or(Error::BadAddress)?;
        if region.kind != RegionKind::Anonymous {
            return Err(Error::NotPermitted);
        }
        if region.start != address {
            return Err(Error::BadAddress);
        }
        if page_ceil(length) != Some(region.length) {
            return Err(Error::BadLength);
        }
        Ok(region)
    }

    /// Checks a `protect(address, length, access)` request and returns the region it
    /// names and the new protection. The region rules are those of `unmap`
    /// ([`Self::check_unmap`]); the access bits are checked last.
    ///
    /// Errors: [`Error::BadAddress`], [`Error::NotPermitted`], [`Error::BadLength`] (as for
    /// `unmap`), [`Error::BadArgument`] (unknown access bits).
    pub fn check_protect(&self, address: usize, length: usize, access: usize) -> Result<(Region, Protection), Error> {
        let region = self.check_unmap(address, length)?;
        let protection = Protection::from_access(access).ok_or(Error::BadArgument)?;
        Ok((region, protection))
    }

    /// The current access of the anonymous region starting at `start` (read-write unless
    /// [`Self::set_protection`] changed it).
    pub fn protection(&self, start: usize) -> Protection {
        self.protections.get(&start).copied().unwrap_or_default()
    }

    /// Records the access of the anonymous region starting at `start` (after the kernel
    /// changed its leaves).
    pub fn set_protection(&mut self, start: usize, protection: Protection) {
        if protection == Protection::ReadWrite {
            self.protections.remove(&start);
        } else {
            self.protections.insert(start, protection);
        }
    }

    /// Forgets the region starting at `start`; returns it.
    pub fn remove(&mut self, start: usize) -> Option<Region> {
        self.protections.remove(&start);
        let index = self.by_start.binary_search_by_key(&start, |region| region.start).ok()?;
        let region = self.by_start.remove(index);
        if region.kind == RegionKind::Anonymous {
            self.anonymous_bytes -= region.length;
            self.anonymous_count -= 1;
        }
        Some(region)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{IMAGE_BASE, STACK_BOTTOM, STACK_SIZE};

    fn with_image_and_stack() -> Regions {
        let mut regions = Regions::new();
        regions.insert(Region { start: IMAGE_BASE, length: 3 * PAGE_SIZE, kind: RegionKind::Image }).unwrap();
        regions.insert(Region { start: STACK_BOTTOM, length: STACK_SIZE, kind: RegionKind::Stack }).unwrap();
        regions
    }

    fn map(regions: &mut Regions, length: usize) -> Region {
        let region = regions.place_anonymous(length).unwrap();
        regions.insert(region).unwrap();
        region
    }

    #[test]
    fn anonymous_mappings_are_placed_first_fit_with_guard_pages() {
        let mut regions = with_image_and_stack();
        let first = map(&mut regions, 1);
        assert_eq!(first, Region { start: ANONYMOUS_REGION.start, length: PAGE_SIZE, kind: RegionKind::Anonymous });
        let second = map(&mut regions, PAGE_SIZE + 1);
        assert_eq!(second.start, first.end() + PAGE_SIZE, "one guard page between mappings");
        assert_eq!(second.length, 2 * PAGE_SIZE);
        regions.remove(first.start).unwrap();
        let third = map(&mut regions, PAGE_SIZE);
        assert_eq!(third.start, first.start, "the freed gap is reused");
        let fourth = map(&mut regions, 2 * PAGE_SIZE);
        assert_eq!(fourth.start, second.end() + PAGE_SIZE, "a gap too small is skipped");
    }

    #[test]
    fn limits_are_enforced() {
        let mut regions = Regions::new();
        assert_eq!(regions.place_anonymous(0), Err(Error::BadLength));
        assert_eq!(regions.place_anonymous(MAX_MAP_LENGTH + 1), Err(Error::BadLength));
        assert_eq!(regions.place_anonymous(usize::MAX), Err(Error::BadLength));
        map(&mut regions, MAX_MAP_LENGTH);
        map(&mut regions, MAX_MAP_LENGTH);
        assert_eq!(regions.anonymous_bytes(), MAX_ANONYMOUS_BYTES);
        assert_eq!(regions.place_anonymous(1), Err(Error::NoMemory), "quota used up");
        let mut regions = Regions::new();
        for _ in 0..MAX_ANONYMOUS_REGIONS {
            map(&mut regions, 1);
        }
        assert_eq!(regions.place_anonymous(1), Err(Error::TooMany));
    }

    #[test]
    fn unmap_accepts_only_whole_anonymous_regions() {
        let mut regions = with_image_and_stack();
        let region = map(&mut regions, 2 * PAGE_SIZE);
        assert_eq!(regions.check_unmap(region.start + 1, region.length), Err(Error::BadAddress), "misaligned");
        assert_eq!(regions.check_unmap(region.start, 0), Err(Error::BadLength));
        assert_eq!(regions.check_unmap(region.start, PAGE_SIZE), Err(Error::BadLength), "part of a region");
        assert_eq!(regions.check_unmap(region.start + PAGE_SIZE, PAGE_SIZE), Err(Error::BadAddress), "inside a region");
        assert_eq!(regions.check_unmap(region.end(), PAGE_SIZE), Err(Error::BadAddress), "its guard page");
        assert_eq!(regions.check_unmap(IMAGE_BASE, 3 * PAGE_SIZE), Err(Error::NotPermitted));
        assert_eq!(regions.check_unmap(STACK_BOTTOM + PAGE_SIZE, PAGE_SIZE), Err(Error::NotPermitted));
        assert_eq!(regions.check_unmap(region.start, region.length - 1), Ok(region), "rounded up to pages");
        assert_eq!(regions.remove(region.start), Some(region));
        assert_eq!(regions.check_unmap(region.start, region.length), Err(Error::BadAddress), "already unmapped");
        assert_eq!(regions.anonymous_bytes(), 0);
    }

    #[test]
    fn protect_takes_whole_anonymous_regions_and_known_access_bits() {
        use spindle_abi::syscall::{ACCESS_READ, ACCESS_WRITE};
        let mut regions = with_image_and_stack();
        let region = map(&mut regions, 2 * PAGE_SIZE);
        assert_eq!(regions.protection(region.start), Protection::ReadWrite, "fresh mappings are read-write");
        assert_eq!(regions.check_protect(region.start + 1, region.length, ACCESS_READ), Err(Error::BadAddress));
        assert_eq!(regions.check_protect(region.start, PAGE_SIZE, ACCESS_READ), Err(Error::BadLength));
        assert_eq!(regions.check_protect(IMAGE_BASE, 3 * PAGE_SIZE, ACCESS_READ), Err(Error::NotPermitted));
        assert_eq!(regions.check_protect(region.start, region.length, 4), Err(Error::BadArgument));
        assert_eq!(regions.check_protect(region.start + 1, region.length, 4), Err(Error::BadAddress), "region errors come first");
        assert_eq!(regions.check_protect(region.start, region.length, 0), Ok((region, Protection::None)));
        assert_eq!(regions.check_protect(region.start, region.length, ACCESS_READ), Ok((region, Protection::Read)));
        assert_eq!(regions.check_protect(region.start, region.length, ACCESS_WRITE), Ok((region, Protection::ReadWrite)));
        regions.set_protection(region.start, Protection::None);
        assert_eq!(regions.protection(region.start), Protection::None);
        regions.remove(region.start);
        let again = map(&mut regions, 2 * PAGE_SIZE);
        assert_eq!(again.start, region.start);
        assert_eq!(regions.protection(again.start), Protection::ReadWrite, "a new region at the same place starts read-write");
    }

    #[test]
    fn access_bits_decode() {
        assert_eq!(Protection::from_access(0), Some(Protection::None));
        assert_eq!(Protection::from_access(1), Some(Protection::Read));
        assert_eq!(Protection::from_access(2), Some(Protection::ReadWrite));
        assert_eq!(Protection::from_access(3), Some(Protection::ReadWrite));
        assert_eq!(Protection::from_access(4), None);
        assert_eq!(Protection::from_access(usize::MAX), None);
        assert!(!Protection::None.is_mapped() && Protection::Read.is_mapped() && !Protection::Read.is_writable());
    }

    #[test]
    fn overlapping_or_misaligned_inserts_are_refused() {
        let mut regions = with_image_and_stack();
        let overlapping = Region { start: IMAGE_BASE + PAGE_SIZE, length: PAGE_SIZE, kind: RegionKind::Image };
        assert_eq!(regions.insert(overlapping), Err(InsertRefusal::Overlaps));
        let misaligned = Region { start: IMAGE_BASE + 10 * PAGE_SIZE + 1, length: PAGE_SIZE, kind: RegionKind::Image };
        assert_eq!(regions.insert(misaligned), Err(InsertRefusal::Misaligned));
        let empty = Region { start: IMAGE_BASE + 10 * PAGE_SIZE, length: 0, kind: RegionKind::Image };
        assert_eq!(regions.insert(empty), Err(InsertRefusal::Misaligned));
        assert_eq!(regions.containing(IMAGE_BASE + 3 * PAGE_SIZE), None);
        assert_eq!(regions.containing(IMAGE_BASE + 3 * PAGE_SIZE - 1).map(|region| region.kind), Some(RegionKind::Image));
    }
}
