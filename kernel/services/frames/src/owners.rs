//! The frame table: who owns every physical frame, where it is mapped, its accessed and
//! dirty bits as last sampled, whether it is pinned — and the per-owner counts, the
//! per-owner memory limits and the global low-water mark.
//!
//! The table covers a run of `len` frames from frame number `base` (the frames the kernel
//! hands to the service). A frame is either [`Owner::Free`] or owned; every owned frame
//! except the kernel's sits on its owner's reclaim queue and on the global one (see
//! [`crate::clock`]). Every operation checks its arguments and answers a [`FrameError`]
//! instead of panicking: frame numbers, owners and counts come from callers the kernel
//! does not trust (system calls, extensions' answers).

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::clock::Lists;

/// Bytes in a frame (and in a page).
pub const PAGE_SIZE: u64 = 4096;

/// Most frames one table may cover (64 GiB of 4 KiB frames); queue links are 32-bit.
pub const MAX_FRAMES: u64 = 1 << 24;

/// Largest id an [`Owner`] may carry and still be encoded into an event record.
pub const MAX_OWNER_ID: u64 = (1 << 56) - 1;

/// Who holds a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// The kernel itself (page tables, heap, stacks): never reclaimed, never limited.
    Kernel,
    /// A user address space (a process), by id.
    AddressSpace(u64),
    /// An extension's arena, by an id the kernel chooses (its native slot).
    ExtensionArena(u64),
    /// The buffer cache.
    BufferCache,
    /// Nobody: the frame is free.
    Free,
}

impl Owner {
    const TAG_SHIFT: u32 = 56;

    /// The owner as one `u64` for an event record or a kernel-function result: the kind in
    /// the top byte, the id below. [`Owner::Kernel`] is 0 (as `mm.Reclaim`'s `owner` field
    /// has always said). `None` if the id is above [`MAX_OWNER_ID`].
    pub fn encode(self) -> Option<u64> {
        let (tag, id) = match self {
            Owner::Kernel => (0, 0),
            Owner::AddressSpace(id) => (1, id),
            Owner::ExtensionArena(id) => (2, id),
            Owner::BufferCache => (3, 0),
            Owner::Free => (4, 0),
        };
        if id > MAX_OWNER_ID {
            return None;
        }
        Some((tag << Self::TAG_SHIFT) | id)
    }

    /// The inverse of [`Owner::encode`]; `None` for a value no owner encodes to.
    pub fn decode(raw: u64) -> Option<Owner> {
        let id = raw & MAX_OWNER_ID;
        match (raw >> Self::TAG_SHIFT, id) {
            (0, 0) => Some(Owner::Kernel),
            (1, id) => Some(Owner::AddressSpace(id)),
            (2, id) => Some(Owner::ExtensionArena(id)),
            (3, 0) => Some(Owner::BufferCache),
            (4, 0) => Some(Owner::Free),
            _ => None,
        }
    }

    /// Whether frames of this owner sit on reclaim queues (everyone but the kernel and
    /// [`Owner::Free`]).
    pub fn is_reclaimable(self) -> bool {
        !matches!(self, Owner::Kernel | Owner::Free)
    }

    /// Whether a memory limit may be set for this owner (everyone but the kernel and
    /// [`Owner::Free`]).
    pub fn is_limitable(self) -> bool {
        self.is_reclaimable()
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Kernel => formatter.write_str("kernel"),
            Owner::AddressSpace(id) => write!(formatter, "address space {id}"),
            Owner::ExtensionArena(id) => write!(formatter, "extension arena {id}"),
            Owner::BufferCache => formatter.write_str("buffer cache"),
            Owner::Free => formatter.write_str("free"),
        }
    }
}

/// Where a frame is mapped: an address space and the (page-aligned) virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// The address space's id.
    pub space: u64,
    /// The virtual address of the page (a multiple of [`PAGE_SIZE`]).
    pub page: u64,
}

/// What the table knows about one frame (a copy; the table is changed only through its
/// methods).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// Who holds it.
    pub owner: Owner,
    /// Where it is mapped, if anywhere.
    pub mapped: Option<Mapping>,
    /// The accessed bit as sampled from the page table (and not yet consumed by the clock
    /// hand).
    pub accessed: bool,
    /// The dirty bit as sampled: set by a sample, cleared by [`FrameTable::mark_clean`].
    pub dirty: bool,
    /// Pinned: never a reclaim candidate, never volunteered, never freed.
    pub pinned: bool,
}

impl FrameInfo {
    const FREE: FrameInfo = FrameInfo { owner: Owner::Free, mapped: None, accessed: false, dirty: false, pinned: false };
}

/// What [`FrameTable::free`] took away: the kernel unmaps, and writes back a dirty page
/// before the frame is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freed {
    /// The frame.
    pub frame: u64,
    /// Its owner until now.
    pub owner: Owner,
    /// Where it was mapped.
    pub mapped: Option<Mapping>,
    /// Whether it was dirty as last sampled.
    pub dirty: bool,
}

/// An invalid table configuration ([`FrameTable::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// No frames, or more than [`MAX_FRAMES`].
    BadLength(u64),
    /// `base + len` overflows, or frame 0 is included (0 stands for "no frame" in records).
    BadBase(u64),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::BadLength(length) => write!(formatter, "a frame table covers 1 to {MAX_FRAMES} frames, not {length}"),
            ConfigError::BadBase(base) => write!(formatter, "frame table base {base:#x} is 0 or its range overflows"),
        }
    }
}

impl core::error::Error for ConfigError {}

/// Why a frame-table operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The frame number is outside the table.
    NotAFrame(u64),
    /// The operation needs an owned frame and this one is free.
    FrameIsFree(u64),
    /// The frame is already owned (a claim of a specific frame).
    FrameNotFree(u64),
    /// [`Owner::Free`] was given where an owner is needed.
    NoOwner,
    /// The owner's id cannot be encoded ([`MAX_OWNER_ID`]).
    OwnerIdTooLarge(u64),
    /// The allocation would take the owner above its memory limit.
    OverLimit {
        /// The owner.
        owner: Owner,
        /// Its limit in frames.
        limit: u64,
        /// Frames it holds now.
        held: u64,
        /// Frames asked for.
        asked: u64,
    },
    /// Not enough free frames.
    OutOfFrames {
        /// Frames asked for.
        asked: u64,
        /// Frames free.
        free: u64,
    },
    /// The frame is pinned.
    Pinned(u64),
    /// The frame is not pinned (an unpin).
    NotPinned(u64),
    /// Limits apply only to reclaimable owners, not to the kernel or "free".
    NotLimitable(Owner),
    /// The frame is already mapped somewhere.
    AlreadyMapped(u64),
    /// The virtual address is not page-aligned.
    Misaligned(u64),
    /// The low-water mark is above the number of frames in the table.
    LowWaterTooHigh {
        /// The mark asked for.
        mark: u64,
        /// Frames in the table.
        frames: u64,
    },
    /// An allocation of 0 frames or more than [`crate::decision::MAX_ALLOCATE`].
    BadCount(u64),
}

impl fmt::Display for FrameError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::NotAFrame(frame) => write!(formatter, "frame {frame:#x} is not in the frame table"),
            FrameError::FrameIsFree(frame) => write!(formatter, "frame {frame:#x} is free"),
            FrameError::FrameNotFree(frame) => write!(formatter, "frame {frame:#x} is already owned"),
            FrameError::NoOwner => formatter.write_str("\"free\" is not an owner"),
            FrameError::OwnerIdTooLarge(id) => write!(formatter, "owner id {id:#x} is above {MAX_OWNER_ID:#x}"),
            FrameError::OverLimit { owner, limit, held, asked } => {
                write!(formatter, "{owner} holds {held} of its limit of {limit} frames and asked for {asked} more")
            }
            FrameError::OutOfFrames { asked, free } => write!(formatter, "{asked} frames asked for, {free} free"),
            FrameError::Pinned(frame) => write!(formatter, "frame {frame:#x} is pinned"),
            FrameError::NotPinned(frame) => write!(formatter, "frame {frame:#x} is not pinned"),
            FrameError::NotLimitable(owner) => write!(formatter, "no memory limit applies to {owner}"),
            FrameError::AlreadyMapped(frame) => write!(formatter, "frame {frame:#x} is already mapped"),
            FrameError::Misaligned(address) => write!(formatter, "virtual address {address:#x} is not page-aligned"),
            FrameError::LowWaterTooHigh { mark, frames } => write!(formatter, "low-water mark {mark} is above the table's {frames} frames"),
            FrameError::BadCount(count) => write!(formatter, "an allocation is of 1 to {} frames, not {count}", crate::decision::MAX_ALLOCATE),
        }
    }
}

impl core::error::Error for FrameError {}

/// Checks that `owner` can hold frames: not [`Owner::Free`], id encodable.
pub(crate) fn check_owner(owner: Owner) -> Result<(), FrameError> {
    match owner {
        Owner::Free => Err(FrameError::NoOwner),
        Owner::AddressSpace(id) | Owner::ExtensionArena(id) if id > MAX_OWNER_ID => Err(FrameError::OwnerIdTooLarge(id)),
        _ => Ok(()),
    }
}

/// The frame table (see the module documentation).
pub struct FrameTable {
    base: u64,
    pub(crate) frames: Vec<FrameInfo>,
    /// One bit per frame: set = free.
    free_bits: Vec<u64>,
    free: u64,
    /// Where the next search for a free frame starts (a word index).
    hint: usize,
    held: BTreeMap<Owner, u64>,
    limits: BTreeMap<Owner, u64>,
    low_water: u64,
    pub(crate) lists: Lists,
}

impl FrameTable {
    /// A table of `len` frames from frame number `base`, all free, no limits, low-water
    /// mark 0.
    ///
    /// Errors: [`ConfigError::BadLength`] for 0 or more than [`MAX_FRAMES`] frames;
    /// [`ConfigError::BadBase`] if `base` is 0 or `base + len` overflows.
    pub fn new(base: u64, len: u64) -> Result<FrameTable, ConfigError> {
        if len == 0 || len > MAX_FRAMES {
            return Err(ConfigError::BadLength(len));
        }
        if base == 0 || base.checked_add(len).is_none() {
            return Err(ConfigError::BadBase(base));
        }
        let count = len as usize;
        let words = count.div_ceil(64);
        let mut free_bits = vec![u64::MAX; words];
        let spare = words * 64 - count;
        if spare > 0 {
            free_bits[words - 1] = u64::MAX >> spare;
        }
        Ok(FrameTable {
            base,
            frames: vec![FrameInfo::FREE; count],
            free_bits,
            free: len,
            hint: 0,
            held: BTreeMap::new(),
            limits: BTreeMap::new(),
            low_water: 0,
            lists: Lists::new(count),
        })
    }

    /// The first frame number covered.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Frames covered.
    pub fn len(&self) -> u64 {
        self.frames.len() as u64
    }

    /// Whether the table covers no frame (never: [`FrameTable::new`] refuses that).
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Whether `frame` is in the table.
    pub fn contains(&self, frame: u64) -> bool {
        self.index(frame).is_ok()
    }

    /// The table index of `frame`.
    pub(crate) fn index(&self, frame: u64) -> Result<usize, FrameError> {
        frame
            .checked_sub(self.base)
            .filter(|&offset| offset < self.len())
            .map(|offset| offset as usize)
            .ok_or(FrameError::NotAFrame(frame))
    }

    /// The frame number at table index `index`.
    pub(crate) fn frame_at(&self, index: usize) -> u64 {
        self.base + index as u64
    }

    /// What the table knows about `frame`.
    ///
    /// Errors: [`FrameError::NotAFrame`].
    pub fn info(&self, frame: u64) -> Result<FrameInfo, FrameError> {
        Ok(self.frames[self.index(frame)?])
    }

    /// The owner of `frame` ([`Owner::Free`] if free); `None` outside the table.
    pub fn owner(&self, frame: u64) -> Option<Owner> {
        self.info(frame).ok().map(|info| info.owner)
    }

    /// Free frames.
    pub fn free_frames(&self) -> u64 {
        self.free
    }

    /// Frames `owner` holds ([`Owner::Free`]: the free frames).
    pub fn held(&self, owner: Owner) -> u64 {
        if owner == Owner::Free { self.free } else { self.held.get(&owner).copied().unwrap_or(0) }
    }

    /// Every owner that holds at least one frame, with its count, in owner order.
    pub fn owners(&self) -> impl Iterator<Item = (Owner, u64)> + '_ {
        self.held.iter().map(|(&owner, &count)| (owner, count))
    }

    /// `owner`'s memory limit in frames, if one is set.
    pub fn limit(&self, owner: Owner) -> Option<u64> {
        self.limits.get(&owner).copied()
    }

    /// Sets (`Some`) or removes (`None`) `owner`'s memory limit. A limit below what the
    /// owner holds now is allowed: further allocations are refused and reclaim should
    /// bring it down ([`FrameTable::over_limit`]).
    ///
    /// Errors: [`FrameError::NotLimitable`] for the kernel and [`Owner::Free`];
    /// [`FrameError::OwnerIdTooLarge`].
    pub fn set_limit(&mut self, owner: Owner, limit: Option<u64>) -> Result<(), FrameError> {
        if !owner.is_limitable() {
            return Err(FrameError::NotLimitable(owner));
        }
        check_owner(owner)?;
        match limit {
            Some(limit) => self.limits.insert(owner, limit),
            None => self.limits.remove(&owner),
        };
        Ok(())
    }

    /// Frames `owner` holds above its limit (0 without a limit).
    pub fn over_limit(&self, owner: Owner) -> u64 {
        self.limit(owner).map_or(0, |limit| self.held(owner).saturating_sub(limit))
    }

    /// The global low-water mark: below this many free frames, reclaim must run.
    pub fn low_water(&self) -> u64 {
        self.low_water
    }

    /// Sets the low-water mark.
    ///
    /// Errors: [`FrameError::LowWaterTooHigh`] above the number of frames.
    pub fn set_low_water(&mut self, mark: u64) -> Result<(), FrameError> {
        if mark > self.len() {
            return Err(FrameError::LowWaterTooHigh { mark, frames: self.len() });
        }
        self.low_water = mark;
        Ok(())
    }

    /// Whether free frames are below the low-water mark (reclaim must run).
    pub fn below_low_water(&self) -> bool {
        self.free < self.low_water
    }

    /// Frames reclaim must free to be back at the low-water mark.
    pub fn reclaim_target(&self) -> u64 {
        self.low_water.saturating_sub(self.free)
    }

    /// Whether `owner` may take `count` more frames: within its limit and within the free
    /// frames. Does not change anything.
    ///
    /// Errors: [`FrameError::NoOwner`], [`FrameError::OwnerIdTooLarge`],
    /// [`FrameError::OverLimit`], [`FrameError::OutOfFrames`].
    pub fn check_allocation(&self, owner: Owner, count: u64) -> Result<(), FrameError> {
        check_owner(owner)?;
        if let Some(limit) = self.limit(owner) {
            let held = self.held(owner);
            if held.checked_add(count).is_none_or(|total| total > limit) {
                return Err(FrameError::OverLimit { owner, limit, held, asked: count });
            }
        }
        if count > self.free {
            return Err(FrameError::OutOfFrames { asked: count, free: self.free });
        }
        Ok(())
    }

    /// Gives a free frame to `owner` (the lowest free frame at or after the last one
    /// given, wrapping) and returns its number. The frame joins the tail of its owner's
    /// reclaim queue and of the global one (unless the owner is the kernel).
    ///
    /// Errors: as [`FrameTable::check_allocation`] for one frame.
    pub fn allocate(&mut self, owner: Owner) -> Result<u64, FrameError> {
        self.check_allocation(owner, 1)?;
        let words = self.free_bits.len();
        let index = (0..words)
            .map(|step| (self.hint + step) % words)
            .find_map(|word| {
                let bits = self.free_bits[word];
                (bits != 0).then(|| word * 64 + bits.trailing_zeros() as usize)
            })
            .ok_or(FrameError::OutOfFrames { asked: 1, free: 0 })?;
        self.hint = index / 64;
        self.take(index, owner);
        Ok(self.frame_at(index))
    }

    /// Gives the specific free `frame` to `owner` (a frame the kernel chose itself, e.g.
    /// at boot).
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameNotFree`], and as
    /// [`FrameTable::check_allocation`] for one frame.
    pub fn claim(&mut self, frame: u64, owner: Owner) -> Result<(), FrameError> {
        let index = self.index(frame)?;
        if self.frames[index].owner != Owner::Free {
            return Err(FrameError::FrameNotFree(frame));
        }
        self.check_allocation(owner, 1)?;
        self.take(index, owner);
        Ok(())
    }

    fn take(&mut self, index: usize, owner: Owner) {
        self.free_bits[index / 64] &= !(1 << (index % 64));
        self.free -= 1;
        *self.held.entry(owner).or_insert(0) += 1;
        self.frames[index] = FrameInfo { owner, ..FrameInfo::FREE };
        if owner.is_reclaimable() {
            self.lists.push_back(index as u32, owner);
        }
    }

    /// Takes `frame` from its owner and makes it free; returns what it was, so the kernel
    /// can unmap it and write it back if dirty.
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`],
    /// [`FrameError::Pinned`].
    pub fn free(&mut self, frame: u64) -> Result<Freed, FrameError> {
        let index = self.index(frame)?;
        let info = self.frames[index];
        if info.owner == Owner::Free {
            return Err(FrameError::FrameIsFree(frame));
        }
        if info.pinned {
            return Err(FrameError::Pinned(frame));
        }
        Ok(self.release(index))
    }

    fn release(&mut self, index: usize) -> Freed {
        let info = self.frames[index];
        if info.owner.is_reclaimable() {
            self.lists.unlink(index as u32, info.owner);
        }
        if let Some(count) = self.held.get_mut(&info.owner) {
            *count -= 1;
            if *count == 0 {
                self.held.remove(&info.owner);
            }
        }
        self.frames[index] = FrameInfo::FREE;
        self.free_bits[index / 64] |= 1 << (index % 64);
        self.free += 1;
        Freed { frame: self.frame_at(index), owner: info.owner, mapped: info.mapped, dirty: info.dirty }
    }

    /// Frees every frame `owner` holds, pinned or not (an address space or an arena going
    /// away), in reclaim-queue order; returns them.
    ///
    /// Errors: [`FrameError::NotLimitable`] for the kernel and [`Owner::Free`] (their
    /// frames are not queued and never released wholesale).
    pub fn release_owner(&mut self, owner: Owner) -> Result<Vec<Freed>, FrameError> {
        if !owner.is_reclaimable() {
            return Err(FrameError::NotLimitable(owner));
        }
        let indices: Vec<u32> = self.lists.owner_iter(owner).collect();
        Ok(indices.into_iter().map(|index| self.release(index as usize)).collect())
    }

    /// Moves `frame` to `owner` (a pager extension's frame mapped into the faulting
    /// address space, which is then charged for it). The frame keeps its mapping and bits
    /// and goes to the tail of the new owner's queue (and of the global one).
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`],
    /// [`FrameError::Pinned`], [`FrameError::NoOwner`], [`FrameError::NotLimitable`] (to or
    /// from the kernel: kernel frames never change hands), and
    /// [`FrameError::OverLimit`] for the new owner.
    pub fn transfer(&mut self, frame: u64, owner: Owner) -> Result<(), FrameError> {
        let index = self.owned_index(frame)?;
        let info = self.frames[index];
        if info.pinned {
            return Err(FrameError::Pinned(frame));
        }
        check_owner(owner)?;
        if !info.owner.is_reclaimable() || !owner.is_reclaimable() {
            return Err(FrameError::NotLimitable(Owner::Kernel));
        }
        if owner == info.owner {
            return Ok(());
        }
        if let Some(limit) = self.limit(owner) {
            let held = self.held(owner);
            if held >= limit {
                return Err(FrameError::OverLimit { owner, limit, held, asked: 1 });
            }
        }
        self.lists.unlink(index as u32, info.owner);
        if let Some(count) = self.held.get_mut(&info.owner) {
            *count -= 1;
            if *count == 0 {
                self.held.remove(&info.owner);
            }
        }
        *self.held.entry(owner).or_insert(0) += 1;
        self.frames[index].owner = owner;
        self.lists.push_back(index as u32, owner);
        Ok(())
    }

    /// Records that `frame` is mapped at `page` of address space `space`.
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`],
    /// [`FrameError::Misaligned`], [`FrameError::AlreadyMapped`].
    pub fn map(&mut self, frame: u64, space: u64, page: u64) -> Result<(), FrameError> {
        let index = self.owned_index(frame)?;
        if !page.is_multiple_of(PAGE_SIZE) {
            return Err(FrameError::Misaligned(page));
        }
        if self.frames[index].mapped.is_some() {
            return Err(FrameError::AlreadyMapped(frame));
        }
        self.frames[index].mapped = Some(Mapping { space, page });
        Ok(())
    }

    /// Records that `frame` is no longer mapped; returns where it was.
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`].
    pub fn unmap(&mut self, frame: u64) -> Result<Option<Mapping>, FrameError> {
        let index = self.owned_index(frame)?;
        Ok(self.frames[index].mapped.take())
    }

    /// Pins `frame`: it stays resident (no reclaim, no volunteering, no free).
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`],
    /// [`FrameError::Pinned`] if it already is.
    pub fn pin(&mut self, frame: u64) -> Result<(), FrameError> {
        let index = self.owned_index(frame)?;
        if self.frames[index].pinned {
            return Err(FrameError::Pinned(frame));
        }
        self.frames[index].pinned = true;
        Ok(())
    }

    /// Unpins `frame`.
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`],
    /// [`FrameError::NotPinned`].
    pub fn unpin(&mut self, frame: u64) -> Result<(), FrameError> {
        let index = self.owned_index(frame)?;
        if !self.frames[index].pinned {
            return Err(FrameError::NotPinned(frame));
        }
        self.frames[index].pinned = false;
        Ok(())
    }

    /// Records that `frame`'s contents are safe on disk (written to swap): its dirty bit
    /// is cleared. The kernel clears the page-table bit at the same time.
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`].
    pub fn mark_clean(&mut self, frame: u64) -> Result<(), FrameError> {
        let index = self.owned_index(frame)?;
        self.frames[index].dirty = false;
        Ok(())
    }

    /// The index of an owned `frame`.
    pub(crate) fn owned_index(&self, frame: u64) -> Result<usize, FrameError> {
        let index = self.index(frame)?;
        if self.frames[index].owner == Owner::Free {
            return Err(FrameError::FrameIsFree(frame));
        }
        Ok(index)
    }

    /// Checks the table's own consistency: the counts agree with the frames, the free
    /// bitmap with the owners, and every reclaimable frame is on exactly its owner's queue
    /// and the global one. For tests and for the kernel's frame accounting checks.
    ///
    /// Errors: a description of the first inconsistency found.
    pub fn audit(&self) -> Result<(), AuditError> {
        let mut counts: BTreeMap<Owner, u64> = BTreeMap::new();
        let mut free = 0;
        let mut queued = 0u64;
        for (index, info) in self.frames.iter().enumerate() {
            let bit = self.free_bits[index / 64] & (1 << (index % 64)) != 0;
            if bit != (info.owner == Owner::Free) {
                return Err(AuditError::FreeBitmap(self.frame_at(index)));
            }
            if info.owner == Owner::Free {
                free += 1;
                if info.mapped.is_some() || info.pinned || info.accessed || info.dirty {
                    return Err(AuditError::FreeFrameHasState(self.frame_at(index)));
                }
            } else {
                *counts.entry(info.owner).or_insert(0) += 1;
            }
            if info.owner.is_reclaimable() {
                queued += 1;
            }
        }
        if free != self.free {
            return Err(AuditError::FreeCount { counted: free, recorded: self.free });
        }
        if counts != self.held {
            return Err(AuditError::OwnerCounts);
        }
        self.lists.audit(self, queued)
    }
}

/// An inconsistency [`FrameTable::audit`] found (a bug in this crate, never the caller's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditError {
    /// The free bitmap disagrees with the frame's owner.
    FreeBitmap(u64),
    /// A free frame is mapped, pinned or has sampled bits.
    FreeFrameHasState(u64),
    /// The free count disagrees with the frames.
    FreeCount {
        /// Free frames counted.
        counted: u64,
        /// The recorded count.
        recorded: u64,
    },
    /// The per-owner counts disagree with the frames.
    OwnerCounts,
    /// A queue's links are broken (not a list, wrong length, a frame on the wrong queue).
    Queue(&'static str),
}

impl fmt::Display for AuditError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditError::FreeBitmap(frame) => write!(formatter, "free bitmap disagrees with the owner of frame {frame:#x}"),
            AuditError::FreeFrameHasState(frame) => write!(formatter, "free frame {frame:#x} is mapped, pinned or has sampled bits"),
            AuditError::FreeCount { counted, recorded } => write!(formatter, "{counted} frames are free but {recorded} are recorded"),
            AuditError::OwnerCounts => formatter.write_str("per-owner counts disagree with the frames"),
            AuditError::Queue(what) => write!(formatter, "reclaim queue broken: {what}"),
        }
    }
}

impl core::error::Error for AuditError {}
