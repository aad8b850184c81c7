//! Sv39 page tables: three levels of 512 eight-byte entries, 4 KiB / 2 MiB / 1 GiB pages.
//!
//! The kernel maps physical memory at the same virtual address (identity), so a page
//! table's physical address is also the address used to edit it. Table pages come from
//! a caller-supplied frame source, which keeps this module free of allocator policy.

use core::fmt;

use super::PAGE_SIZE;

/// Number of entries in one table.
const ENTRIES: usize = 512;
/// Bits of virtual address translated per level.
const BITS_PER_LEVEL: usize = 9;
/// Page offset bits.
const PAGE_SHIFT: usize = 12;
/// Size of a level-1 leaf (megapage).
pub const MEGAPAGE_SIZE: usize = 2 * 1024 * 1024;
/// Size of a level-2 leaf (gigapage).
pub const GIGAPAGE_SIZE: usize = 1024 * 1024 * 1024;
/// Highest virtual address + 1 in the lower half of Sv39.
pub const LOWER_HALF_END: usize = 1 << 38;

/// Permission and attribute bits of a leaf entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PteFlags(u64);

impl PteFlags {
    /// Valid.
    pub const VALID: PteFlags = PteFlags(1 << 0);
    /// Readable.
    pub const READ: PteFlags = PteFlags(1 << 1);
    /// Writable.
    pub const WRITE: PteFlags = PteFlags(1 << 2);
    /// Executable.
    pub const EXECUTE: PteFlags = PteFlags(1 << 3);
    /// Accessible from U-mode.
    pub const USER: PteFlags = PteFlags(1 << 4);
    /// Global (present in every address space).
    pub const GLOBAL: PteFlags = PteFlags(1 << 5);
    /// Accessed (set up front so hardware never needs to trap to set it).
    pub const ACCESSED: PteFlags = PteFlags(1 << 6);
    /// Dirty (likewise).
    pub const DIRTY: PteFlags = PteFlags(1 << 7);

    /// No bits.
    pub const fn empty() -> PteFlags {
        PteFlags(0)
    }
    /// Union of two sets.
    pub const fn union(self, other: PteFlags) -> PteFlags {
        PteFlags(self.0 | other.0)
    }
    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: PteFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// The raw bits.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// The flags of the low eight bits of `bits` (the others are not flags).
    pub const fn from_bits(bits: u64) -> PteFlags {
        PteFlags(bits & 0xff)
    }
}

impl core::ops::BitOr for PteFlags {
    type Output = PteFlags;
    fn bitor(self, other: PteFlags) -> PteFlags {
        self.union(other)
    }
}

impl fmt::Display for PteFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (flag, letter) in [(Self::READ, "r"), (Self::WRITE, "w"), (Self::EXECUTE, "x"), (Self::USER, "u"), (Self::GLOBAL, "g")] {
            f.write_str(if self.contains(flag) { letter } else { "-" })?;
        }
        Ok(())
    }
}

/// Why a mapping could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// An address or length is not page-aligned.
    Misaligned,
    /// The virtual address is outside the Sv39 range the kernel uses.
    OutOfRange,
    /// Part of the range is already mapped.
    AlreadyMapped(usize),
    /// No frame was available for a page-table page.
    OutOfFrames,
    /// A leaf must be readable or executable (write-only is reserved by the spec).
    InvalidPermissions,
    /// The page to unmap is not mapped.
    NotMapped(usize),
    /// The page to unmap is part of a larger page that reaches outside the range.
    SplitsLargePage(usize),
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::Misaligned => f.write_str("address or length not page-aligned"),
            MapError::OutOfRange => f.write_str("virtual address outside the Sv39 lower half"),
            MapError::AlreadyMapped(va) => write!(f, "virtual address {va:#x} is already mapped"),
            MapError::OutOfFrames => f.write_str("out of frames for page tables"),
            MapError::InvalidPermissions => f.write_str("invalid permission combination"),
            MapError::NotMapped(va) => write!(f, "virtual address {va:#x} is not mapped"),
            MapError::SplitsLargePage(va) => write!(f, "virtual address {va:#x} is part of a larger page that reaches outside the range"),
        }
    }
}

/// A source of zeroed 4 KiB frames for page-table pages; returns a physical address.
pub trait FrameSource {
    /// Allocates one zeroed frame, or `None` when memory is exhausted.
    fn allocate_zeroed_frame(&mut self) -> Option<usize>;
}

/// Handle to a root page table (its physical address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageTableRoot(usize);

fn table_at(physical: usize) -> *mut u64 {
    physical as *mut u64
}

fn read_entry(table: usize, index: usize) -> u64 {
    // SAFETY: `table` is a page-table page (allocated from a FrameSource or the root),
    // identity-mapped, and `index < ENTRIES` (callers mask the index with 511).
    unsafe { table_at(table).add(index).read_volatile() }
}

fn write_entry(table: usize, index: usize, value: u64) {
    // SAFETY: `table` is an identity-mapped page-table page (from a FrameSource or the root),
    // `index < ENTRIES` (callers mask it with 511); the kernel owns its page tables exclusively
    // and edits them with the table's lock held (by the caller's &mut borrow).
    unsafe { table_at(table).add(index).write_volatile(value) }
}

fn entry_address(entry: u64) -> usize {
    ((entry >> 10) << PAGE_SHIFT) as usize
}

fn is_leaf(entry: u64) -> bool {
    entry & (PteFlags::READ.0 | PteFlags::WRITE.0 | PteFlags::EXECUTE.0) != 0
}

/// Leaf `entry` with exactly the read, write and execute bits of `permissions` (its other
/// bits kept).
fn with_permissions(entry: u64, permissions: PteFlags) -> u64 {
    let rwx = PteFlags::READ.0 | PteFlags::WRITE.0 | PteFlags::EXECUTE.0;
    (entry & !rwx) | (permissions.0 & rwx)
}

fn index_at(virtual_address: usize, level: usize) -> usize {
    (virtual_address >> (PAGE_SHIFT + level * BITS_PER_LEVEL)) & (ENTRIES - 1)
}

impl PageTableRoot {
    /// Allocates an empty root table.
    pub fn new(frames: &mut dyn FrameSource) -> Result<PageTableRoot, MapError> {
        frames.allocate_zeroed_frame().map(PageTableRoot).ok_or(MapError::OutOfFrames)
    }

    /// Physical address of the root table.
    pub fn physical_address(self) -> usize {
        self.0
    }

    /// Maps `[virtual_address, virtual_address + length)` to physical memory starting at
    /// `physical_address`, using the largest page size alignment allows.
    pub fn map_range(
        self,
        virtual_address: usize,
        physical_address: usize,
        length: usize,
        flags: PteFlags,
        frames: &mut dyn FrameSource,
    ) -> Result<(), MapError> {
        if !virtual_address.is_multiple_of(PAGE_SIZE) || !physical_address.is_multiple_of(PAGE_SIZE) || !length.is_multiple_of(PAGE_SIZE) {
            return Err(MapError::Misaligned);
        }
        if virtual_address.checked_add(length).is_none_or(|end| end > LOWER_HALF_END) {
            return Err(MapError::OutOfRange);
        }
        if !flags.contains(PteFlags::READ) && !flags.contains(PteFlags::EXECUTE) {
            return Err(MapError::InvalidPermissions);
        }
        let mut offset = 0;
        while offset < length {
            let va = virtual_address + offset;
            let pa = physical_address + offset;
            let remaining = length - offset;
            // A large page where both addresses allow it and no page table already covers
            // that span (one left by earlier 4 KiB mappings, possibly empty now).
            let page_size = [(GIGAPAGE_SIZE, 2), (MEGAPAGE_SIZE, 1)]
                .into_iter()
                .find(|&(size, level)| va.is_multiple_of(size) && pa.is_multiple_of(size) && remaining >= size && self.free_at(va, level))
                .map_or(PAGE_SIZE, |(size, _)| size);
            self.map_page(va, pa, page_size, flags, frames)?;
            offset += page_size;
        }
        Ok(())
    }

    fn map_page(self, va: usize, pa: usize, page_size: usize, flags: PteFlags, frames: &mut dyn FrameSource) -> Result<(), MapError> {
        let leaf_level = match page_size {
            GIGAPAGE_SIZE => 2,
            MEGAPAGE_SIZE => 1,
            _ => 0,
        };
        let mut table = self.0;
        for level in (leaf_level + 1..=2).rev() {
            let index = index_at(va, level);
            let entry = read_entry(table, index);
            if entry & PteFlags::VALID.0 == 0 {
                let next = frames.allocate_zeroed_frame().ok_or(MapError::OutOfFrames)?;
                write_entry(table, index, ((next >> PAGE_SHIFT) << 10) as u64 | PteFlags::VALID.0);
                table = next;
            } else if is_leaf(entry) {
                return Err(MapError::AlreadyMapped(va));
            } else {
                table = entry_address(entry);
            }
        }
        let index = index_at(va, leaf_level);
        if read_entry(table, index) & PteFlags::VALID.0 != 0 {
            return Err(MapError::AlreadyMapped(va));
        }
        let leaf = ((pa >> PAGE_SHIFT) << 10) as u64 | (flags | PteFlags::VALID | PteFlags::ACCESSED | PteFlags::DIRTY).0;
        write_entry(table, index, leaf);
        Ok(())
    }

    /// Whether nothing maps the span of `va` at `level` (2: its 1 GiB, 1: its 2 MiB): no
    /// leaf and no table on the way down, and an empty entry there.
    fn free_at(self, va: usize, level: usize) -> bool {
        let mut table = self.0;
        for upper in (level + 1..=2).rev() {
            let entry = read_entry(table, index_at(va, upper));
            if entry & PteFlags::VALID.0 == 0 {
                return true;
            }
            if is_leaf(entry) {
                return false;
            }
            table = entry_address(entry);
        }
        read_entry(table, index_at(va, level)) & PteFlags::VALID.0 == 0
    }

    /// Removes the mappings of `[virtual_address, virtual_address + length)`, whatever
    /// page sizes [`PageTableRoot::map_range`] chose; fails without changing anything if a
    /// page is unmapped or part of a larger page reaching outside the range. Page-table
    /// pages stay (a later mapping reuses them). The caller flushes the TLB.
    pub fn unmap_range(self, virtual_address: usize, length: usize) -> Result<(), MapError> {
        if !virtual_address.is_multiple_of(PAGE_SIZE) || !length.is_multiple_of(PAGE_SIZE) {
            return Err(MapError::Misaligned);
        }
        let end = virtual_address.checked_add(length).ok_or(MapError::OutOfRange)?;
        let mut page = virtual_address;
        while page < end {
            let (_, _, size) = self.leaf(page).ok_or(MapError::NotMapped(page))?;
            let start = page & !(size - 1);
            if start < virtual_address || start + size > end {
                return Err(MapError::SplitsLargePage(page));
            }
            page = start + size;
        }
        let mut page = virtual_address;
        while page < end {
            let Some((table, index, size)) = self.leaf(page) else { break };
            write_entry(table, index, 0);
            page += size;
        }
        Ok(())
    }

    /// The table, index and page size of the leaf mapping `va`, at any level.
    fn leaf(self, va: usize) -> Option<(usize, usize, usize)> {
        if va >= LOWER_HALF_END {
            return None;
        }
        let mut table = self.0;
        for (level, size) in [(2, GIGAPAGE_SIZE), (1, MEGAPAGE_SIZE), (0, PAGE_SIZE)] {
            let index = index_at(va, level);
            let entry = read_entry(table, index);
            if entry & PteFlags::VALID.0 == 0 {
                return None;
            }
            if is_leaf(entry) {
                return Some((table, index, size));
            }
            if level == 0 {
                return None;
            }
            table = entry_address(entry);
        }
        None
    }

    /// Sets the bits `set` and clears the bits `clear` of the leaf mapping
    /// `virtual_address` (the valid bit is never changed); returns the leaf's new flags.
    /// `None`, changing nothing, if no leaf maps it or the change would leave it neither
    /// readable nor executable (such an entry would point at a table). The caller flushes
    /// the TLB.
    pub fn update_leaf(self, virtual_address: usize, set: PteFlags, clear: PteFlags) -> Option<PteFlags> {
        let (table, index, _) = self.leaf(virtual_address)?;
        let entry = (read_entry(table, index) & !(clear.0 & !PteFlags::VALID.0)) | (set.0 & !PteFlags::VALID.0);
        if entry & (PteFlags::READ.0 | PteFlags::EXECUTE.0) == 0 {
            return None;
        }
        write_entry(table, index, entry);
        Some(PteFlags(entry & 0xff))
    }

    /// Gives the leaf mapping `virtual_address` exactly the permissions of `permissions`
    /// among read, write and execute (its other bits kept) in one walk; returns the leaf's
    /// physical address and its flags before. `None`, changing nothing, if no leaf maps it
    /// or `permissions` is neither readable nor executable. The caller flushes the TLB.
    pub fn set_leaf_permissions(self, virtual_address: usize, permissions: PteFlags) -> Option<(usize, PteFlags)> {
        if permissions.0 & (PteFlags::READ.0 | PteFlags::EXECUTE.0) == 0 {
            return None;
        }
        let (table, index, _) = self.leaf(virtual_address)?;
        let entry = read_entry(table, index);
        write_entry(table, index, with_permissions(entry, permissions));
        Some((entry_address(entry), PteFlags(entry & 0xff)))
    }

    /// [`Self::set_leaf_permissions`] for the `count` pages from `start` (page-aligned),
    /// walking the tables once per 2 MiB rather than once per page: each page's 4 KiB leaf
    /// gets exactly `permissions` among read, write and execute (a larger leaf is rewritten
    /// as `set_leaf_permissions` does), and `unmapped(page)` is called for each page that
    /// no leaf maps. Nothing happens if `permissions` is neither readable nor executable.
    /// The caller flushes the TLB.
    pub fn set_leaf_permissions_in(self, start: usize, count: usize, permissions: PteFlags, mut unmapped: impl FnMut(usize)) {
        if permissions.0 & (PteFlags::READ.0 | PteFlags::EXECUTE.0) == 0 {
            return;
        }
        self.each_entry(start, count, |page, entry| match entry {
            Some((table, index)) => {
                let value = read_entry(table, index);
                if value & PteFlags::VALID.0 != 0 && is_leaf(value) {
                    write_entry(table, index, with_permissions(value, permissions));
                } else {
                    unmapped(page);
                }
            }
            None => {
                if self.set_leaf_permissions(page, permissions).is_none() {
                    unmapped(page);
                }
            }
        });
    }

    /// Removes the 4 KiB leaves of the `count` pages from `start` (page-aligned), walking
    /// the tables once per 2 MiB; `removed(physical, flags)` is called for each leaf before
    /// it goes. A page without a leaf is skipped, and one inside a larger leaf stays mapped
    /// (as [`Self::unmap_range`] refuses to split one). The caller flushes the TLB.
    pub fn clear_leaves_in(self, start: usize, count: usize, mut removed: impl FnMut(usize, PteFlags)) {
        self.each_entry(start, count, |_, entry| {
            if let Some((table, index)) = entry {
                let value = read_entry(table, index);
                if value & PteFlags::VALID.0 != 0 && is_leaf(value) {
                    removed(entry_address(value), PteFlags(value & 0xff));
                    write_entry(table, index, 0);
                }
            }
        });
    }

    /// Calls `each(page, entry)` for the `count` pages from `start`, in order, with the
    /// level-0 table and index holding the page's entry, or `None` where no level-0 table
    /// covers it (an invalid entry on the way, or a larger leaf). The walk to the level-0
    /// table is made once per 2 MiB. `each` may map pages (a table it adds for a window
    /// already found without one is not seen: its later pages get `None` too) but must not
    /// free tables. Pages past the end of the lower half get `None`.
    fn each_entry(self, start: usize, count: usize, mut each: impl FnMut(usize, Option<(usize, usize)>)) {
        let mut window = usize::MAX;
        let mut table = None;
        for index in 0..count {
            let Some(page) = index.checked_mul(PAGE_SIZE).and_then(|offset| start.checked_add(offset)) else { return };
            if page / MEGAPAGE_SIZE != window {
                window = page / MEGAPAGE_SIZE;
                table = self.leaf_table(page);
            }
            each(page, table.map(|table| (table, index_at(page, 0))));
        }
    }

    /// The level-0 table covering `virtual_address`: `None` if an entry on the way is
    /// invalid or a leaf (a gigapage or megapage maps the address).
    fn leaf_table(self, virtual_address: usize) -> Option<usize> {
        if virtual_address >= LOWER_HALF_END {
            return None;
        }
        let mut table = self.0;
        for level in [2, 1] {
            let entry = read_entry(table, index_at(virtual_address, level));
            if entry & PteFlags::VALID.0 == 0 || is_leaf(entry) {
                return None;
            }
            table = entry_address(entry);
        }
        Some(table)
    }

    /// Translates a virtual address: the physical address and leaf flags, if mapped.
    pub fn translate(self, virtual_address: usize) -> Option<(usize, PteFlags)> {
        if virtual_address >= LOWER_HALF_END {
            return None;
        }
        let mut table = self.0;
        for level in (0..=2).rev() {
            let entry = read_entry(table, index_at(virtual_address, level));
            if entry & PteFlags::VALID.0 == 0 {
                return None;
            }
            if is_leaf(entry) {
                let page_size = PAGE_SIZE << (level * BITS_PER_LEVEL);
                let physical = entry_address(entry) + virtual_address % page_size;
                return Some((physical, PteFlags(entry & 0xff)));
            }
            table = entry_address(entry);
        }
        None
    }

    /// Makes sure the root entry covering `virtual_address` (one 1 GiB slot) points at a
    /// level-1 table, allocating an empty one if needed. Every later mapping in that slot
    /// then lands in a table that copies of this root's entries share
    /// ([`Self::share_root_entries`]).
    pub fn prepare_root_slot(self, virtual_address: usize, frames: &mut dyn FrameSource) -> Result<(), MapError> {
        if virtual_address >= LOWER_HALF_END {
            return Err(MapError::OutOfRange);
        }
        let index = index_at(virtual_address, 2);
        let entry = read_entry(self.0, index);
        if entry & PteFlags::VALID.0 == 0 {
            let next = frames.allocate_zeroed_frame().ok_or(MapError::OutOfFrames)?;
            write_entry(self.0, index, ((next >> PAGE_SHIFT) << 10) as u64 | PteFlags::VALID.0);
        } else if is_leaf(entry) {
            return Err(MapError::AlreadyMapped(virtual_address));
        }
        Ok(())
    }

    /// Copies every valid root entry of `source` into this root, except in the root slots
    /// `reserved` (1 GiB each, by index), which `source` must not use: this root then maps
    /// everything `source` maps (and will map, below the shared tables), with the same
    /// permissions, and keeps `reserved` for itself. Fails with the first reserved slot
    /// `source` uses, copying nothing.
    pub fn share_root_entries(self, source: PageTableRoot, reserved: core::ops::Range<usize>) -> Result<(), usize> {
        if let Some(slot) = reserved.clone().find(|&slot| slot < ENTRIES && read_entry(source.0, slot) & PteFlags::VALID.0 != 0) {
            return Err(slot);
        }
        for index in (0..ENTRIES).filter(|index| !reserved.contains(index)) {
            let entry = read_entry(source.0, index);
            if entry & PteFlags::VALID.0 != 0 {
                write_entry(self.0, index, entry);
            }
        }
        Ok(())
    }

    /// Makes this table the active one on the calling hart.
    ///
    /// # Safety
    /// The table must map the running code, its stacks, and all memory the kernel uses
    /// afterwards, with suitable permissions.
    pub unsafe fn activate(self) {
        // SAFETY: forwarded from the caller.
        unsafe { super::csr::write_satp_sv39(self.0 >> PAGE_SHIFT) };
    }
}
