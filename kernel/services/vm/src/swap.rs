//! The swap area: a run of 4 KiB slots on the disk, one per paged-out page, allocated
//! from a bitmap.
//!
//! Slot `s` lies at sector `first_sector + s * SECTORS_PER_SLOT` ([`SwapArea::sector`]);
//! the kernel writes a victim page there through the disk service, records the slot in
//! place of the page's frame, and frees the slot when the page is read back or its region
//! goes away. Freeing a free slot is an error ([`SwapError::DoubleFree`]), never silent:
//! it would mean two pages share a slot.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Bytes in a slot (one page).
pub const SLOT_BYTES: u64 = 4096;

/// 512-byte sectors in a slot.
pub const SECTORS_PER_SLOT: u64 = SLOT_BYTES / 512;

/// Most slots one area may have (64 GiB of swap).
pub const MAX_SLOTS: u64 = 1 << 24;

/// A slot's index in its area.
pub type Slot = u64;

/// Why a swap operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapError {
    /// An area of 0 or more than [`MAX_SLOTS`] slots.
    BadSize(u64),
    /// The area's last sector overflows.
    BadPlacement(u64),
    /// Every slot is in use.
    Full,
    /// The slot is outside the area.
    OutOfRange(Slot),
    /// The slot is already free.
    DoubleFree(Slot),
}

impl fmt::Display for SwapError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwapError::BadSize(slots) => write!(formatter, "a swap area has 1 to {MAX_SLOTS} slots, not {slots}"),
            SwapError::BadPlacement(sector) => write!(formatter, "a swap area at sector {sector} runs past the last sector"),
            SwapError::Full => formatter.write_str("the swap area is full"),
            SwapError::OutOfRange(slot) => write!(formatter, "swap slot {slot} is outside the area"),
            SwapError::DoubleFree(slot) => write!(formatter, "swap slot {slot} is already free"),
        }
    }
}

impl core::error::Error for SwapError {}

/// A swap area and its slot bitmap.
#[derive(Debug)]
pub struct SwapArea {
    first_sector: u64,
    slots: u64,
    /// One bit per slot: set = in use.
    used_bits: Vec<u64>,
    used: u64,
    /// The word where the next search starts.
    hint: usize,
}

impl SwapArea {
    /// An area of `slots` slots from `first_sector`, all free.
    ///
    /// Errors: [`SwapError::BadSize`], [`SwapError::BadPlacement`].
    pub fn new(first_sector: u64, slots: u64) -> Result<SwapArea, SwapError> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(SwapError::BadSize(slots));
        }
        if slots.checked_mul(SECTORS_PER_SLOT).and_then(|sectors| first_sector.checked_add(sectors)).is_none() {
            return Err(SwapError::BadPlacement(first_sector));
        }
        Ok(SwapArea { first_sector, slots, used_bits: vec![0; slots.div_ceil(64) as usize], used: 0, hint: 0 })
    }

    /// Slots in the area.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    /// Slots in use.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Slots free.
    pub fn free_slots(&self) -> u64 {
        self.slots - self.used
    }

    /// Takes a free slot (the lowest at or after the last one taken, wrapping).
    ///
    /// Errors: [`SwapError::Full`].
    pub fn allocate(&mut self) -> Result<Slot, SwapError> {
        if self.used == self.slots {
            return Err(SwapError::Full);
        }
        let words = self.used_bits.len();
        for step in 0..words {
            let word = (self.hint + step) % words;
            let free = !self.used_bits[word];
            if free == 0 {
                continue;
            }
            let slot = (word * 64) as u64 + u64::from(free.trailing_zeros());
            if slot >= self.slots {
                continue; // the spare bits past the last slot
            }
            self.used_bits[word] |= 1 << (slot % 64);
            self.used += 1;
            self.hint = word;
            return Ok(slot);
        }
        Err(SwapError::Full)
    }

    /// Gives `slot` back.
    ///
    /// Errors: [`SwapError::OutOfRange`], [`SwapError::DoubleFree`].
    pub fn free(&mut self, slot: Slot) -> Result<(), SwapError> {
        if !self.is_allocated(slot)? {
            return Err(SwapError::DoubleFree(slot));
        }
        self.used_bits[(slot / 64) as usize] &= !(1 << (slot % 64));
        self.used -= 1;
        Ok(())
    }

    /// Whether `slot` is in use.
    ///
    /// Errors: [`SwapError::OutOfRange`].
    pub fn is_allocated(&self, slot: Slot) -> Result<bool, SwapError> {
        if slot >= self.slots {
            return Err(SwapError::OutOfRange(slot));
        }
        Ok(self.used_bits[(slot / 64) as usize] & (1 << (slot % 64)) != 0)
    }

    /// The first sector of `slot` on the disk.
    ///
    /// Errors: [`SwapError::OutOfRange`].
    pub fn sector(&self, slot: Slot) -> Result<u64, SwapError> {
        if slot >= self.slots {
            return Err(SwapError::OutOfRange(slot));
        }
        // Cannot overflow: `new` checked the area's last sector.
        Ok(self.first_sector + slot * SECTORS_PER_SLOT)
    }
}
