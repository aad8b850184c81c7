//! `spindle-service-blockpath`: the policy half of the block path.
//!
//! The kernel file `kernel/src/services/blockpath.rs` raises the `block.*` events; this
//! crate holds what decides — `no_std`, no `unsafe`, host-tested:
//!
//! - [`ShadowMap`]: the forward map logical → physical and the reverse map physical →
//!   logical of every accepted write. A logical disk's answer to `block.Write` is valid
//!   only if the physical block is inside the disk and holds no other logical block's live
//!   data ([`ShadowMap::check_placement`]); after a run the logical disk's own map is checked
//!   against it ([`ShadowMap::check_lookup`]).
//! - [`ReadRequests`]: the one active read request and the extent it covers; the `block`
//!   domain's `spindle_block_read` copies only inside it ([`ReadRequests::range`]).
//! - [`check_filter`] and [`check_digest`]: the rules for `block.ReadFilter` and
//!   `block.ReadDone` answers.
//! - [`WriteRun`]: the write-behind run that gathers writes to consecutive physical
//!   blocks into one device request (how a logical disk's segment reaches the disk whole).
//!
//! What is read comes from whoever starts the read (a memory buffer or the disk); the
//! service does not own data.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spindle_abi::event::{Digest, Placement};

/// Why an answer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// A filter consumed more bytes than the block has.
    OverConsumed,
    /// The digest names another request.
    WrongRequest,
    /// The digest does not cover exactly the request's bytes.
    WrongLength,
    /// The physical block is outside the disk.
    OutsideDisk,
    /// The physical block holds another logical block's live data.
    Occupied,
}

impl Rejection {
    /// The reason as the dispatcher records it.
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::OverConsumed => "a filter consumed more bytes than the block has",
            Rejection::WrongRequest => "the digest names another request",
            Rejection::WrongLength => "the digest does not cover exactly the request's bytes",
            Rejection::OutsideDisk => "the physical block is outside the disk",
            Rejection::Occupied => "the physical block holds another logical block's live data",
        }
    }
}

/// Checks a `block.ReadFilter` answer: at most the block's `length` consumed.
///
/// Errors: [`Rejection::OverConsumed`].
pub fn check_filter(length: u64, consumed: u64) -> Result<(), Rejection> {
    if consumed <= length { Ok(()) } else { Err(Rejection::OverConsumed) }
}

/// Checks a `block.ReadDone` answer for `request` of `length` bytes: no digest, or one
/// naming the request and covering exactly its bytes.
///
/// Errors: [`Rejection::WrongRequest`], [`Rejection::WrongLength`].
pub fn check_digest(request: u64, length: u64, digest: &Digest) -> Result<(), Rejection> {
    if *digest == Digest::default() {
        Ok(())
    } else if digest.request != request {
        Err(Rejection::WrongRequest)
    } else if digest.bytes != length {
        Err(Rejection::WrongLength)
    } else {
        Ok(())
    }
}

/// The record of accepted writes on a disk of `blocks` blocks: `physical + 1` per logical
/// block and `logical + 1` per physical block (0: none).
pub struct ShadowMap {
    forward: Box<[AtomicU32]>,
    reverse: Box<[AtomicU32]>,
}

/// A difference between a logical disk's map and the shadow map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapMismatch {
    /// The logical block.
    pub logical: u64,
    /// Where its latest write is (shadow map).
    pub expected: Option<u64>,
    /// What the logical disk answered.
    pub answered: Option<u64>,
}

impl ShadowMap {
    /// An empty map of a disk of `blocks` blocks (at most `u32::MAX - 1`).
    pub fn new(blocks: u64) -> ShadowMap {
        let blocks = blocks.min(u64::from(u32::MAX - 1)) as usize;
        let entries = || (0..blocks).map(|_| AtomicU32::new(0)).collect::<Vec<_>>().into_boxed_slice();
        ShadowMap { forward: entries(), reverse: entries() }
    }

    /// Blocks on the disk.
    pub fn blocks(&self) -> u64 {
        self.forward.len() as u64
    }

    /// Forgets every write (a format).
    pub fn clear(&self) {
        for entry in self.forward.iter().chain(self.reverse.iter()) {
            entry.store(0, Ordering::Relaxed);
        }
    }

    /// Where `logical` lives, if it was written.
    pub fn placed(&self, logical: u64) -> Option<u64> {
        match self.forward.get(usize::try_from(logical).ok()?)?.load(Ordering::Relaxed) {
            0 => None,
            stored => Some(u64::from(stored) - 1),
        }
    }

    /// Whether `physical` holds the live data of a logical block other than `logical`.
    pub fn live_for_other(&self, physical: u64, logical: u64) -> bool {
        let Some(entry) = usize::try_from(physical).ok().and_then(|index| self.reverse.get(index)) else { return false };
        match entry.load(Ordering::Relaxed) {
            0 => false,
            stored => {
                let holder = u64::from(stored) - 1;
                holder != logical && self.placed(holder) == Some(physical)
            }
        }
    }

    /// Checks a placement of `logical` at `physical` (`Placement::NONE`: no space — valid).
    ///
    /// Errors: [`Rejection::OutsideDisk`], [`Rejection::Occupied`].
    pub fn check_placement(&self, logical: u64, physical: u64) -> Result<(), Rejection> {
        if physical == Placement::NONE {
            Ok(())
        } else if physical >= self.blocks() {
            Err(Rejection::OutsideDisk)
        } else if self.live_for_other(physical, logical) {
            Err(Rejection::Occupied)
        } else {
            Ok(())
        }
    }

    /// The default placement: in place if the block's home is free, else no space.
    pub fn default_placement(&self, logical: u64) -> u64 {
        if logical < self.blocks() && !self.live_for_other(logical, logical) { logical } else { Placement::NONE }
    }

    /// Records an accepted write; false (nothing recorded) unless both blocks are on the
    /// disk and the placement is valid.
    pub fn record(&self, logical: u64, physical: u64) -> bool {
        if logical >= self.blocks() || physical == Placement::NONE || self.check_placement(logical, physical).is_err() {
            return false;
        }
        self.forward[logical as usize].store(physical as u32 + 1, Ordering::Relaxed);
        self.reverse[physical as usize].store(logical as u32 + 1, Ordering::Relaxed);
        true
    }

    /// Checks what a logical disk answered (`answered`, from `block.MapLookup`) for
    /// `logical`: it must name the physical block holding the block's latest write, whose
    /// reverse entry names the block back, and nothing for a block never written. Returns
    /// whether the block is mapped.
    ///
    /// Errors: the [`MapMismatch`].
    pub fn check_lookup(&self, logical: u64, answered: Option<u64>) -> Result<bool, MapMismatch> {
        let expected = self.placed(logical);
        let holds_latest = expected.is_none_or(|physical| self.reverse[physical as usize].load(Ordering::Relaxed) == logical as u32 + 1);
        if answered != expected || !holds_latest {
            return Err(MapMismatch { logical, expected, answered });
        }
        Ok(expected.is_some())
    }
}

/// The one active read request and its extent (offset and length in the source read).
pub struct ReadRequests {
    active: AtomicU64,
    start: AtomicU64,
    length: AtomicU64,
    next: AtomicU64,
}

impl Default for ReadRequests {
    fn default() -> Self {
        ReadRequests::new()
    }
}

impl ReadRequests {
    /// No request active; ids start at 1.
    pub const fn new() -> ReadRequests {
        ReadRequests { active: AtomicU64::new(0), start: AtomicU64::new(0), length: AtomicU64::new(0), next: AtomicU64::new(1) }
    }

    /// Makes `start..start + length` of a source of `size` bytes the active request
    /// (clamped to the source) and returns its new id (never 0).
    pub fn begin(&self, size: u64, start: u64, length: u64) -> u64 {
        let start = start.min(size);
        let request = self.next.fetch_add(1, Ordering::Relaxed);
        self.active.store(0, Ordering::Relaxed);
        self.start.store(start, Ordering::Relaxed);
        self.length.store(length.min(size - start), Ordering::Relaxed);
        self.active.store(request, Ordering::Relaxed);
        request
    }

    /// The active request's length in bytes.
    pub fn active_length(&self) -> u64 {
        self.length.load(Ordering::Relaxed)
    }

    /// Ends `request` (no effect if another request is active).
    pub fn end(&self, request: u64) {
        let _ = self.active.compare_exchange(request, 0, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The source range `(start, end)` holding `length` bytes at `offset` of `request`, if
    /// `request` is the active one and the range lies inside it.
    pub fn range(&self, request: u64, offset: u64, length: u64) -> Option<(usize, usize)> {
        if request == 0 || request != self.active.load(Ordering::Relaxed) {
            return None;
        }
        let end = offset.checked_add(length).filter(|&end| end <= self.length.load(Ordering::Relaxed))?;
        let base = self.start.load(Ordering::Relaxed);
        Some((usize::try_from(base + offset).ok()?, usize::try_from(base + end).ok()?))
    }
}

/// Writes accepted but not yet on the disk: consecutive physical blocks, gathered so that
/// they reach the device as one request (a logical disk's segment written whole, as de
/// Jonge et al. and Small & Seltzer assume). At most `limit` blocks of `block_bytes` each.
///
/// [`WriteRun::push`] says which run must be written out first; a write that does not
/// extend the run (not the next block, or the run is full) starts a new one.
pub struct WriteRun {
    start: u64,
    blocks: u64,
    limit: u64,
    block_bytes: usize,
    data: Vec<u8>,
}

/// A run of consecutive blocks to write: first block and the bytes of all of them.
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    /// First physical block.
    pub start: u64,
    /// The blocks' bytes, in order (a whole number of blocks).
    pub data: Vec<u8>,
}

impl WriteRun {
    /// An empty run of at most `limit` (at least 1) blocks of `block_bytes` bytes.
    pub fn new(limit: u64, block_bytes: usize) -> WriteRun {
        WriteRun { start: 0, blocks: 0, limit: limit.max(1), block_bytes, data: Vec::new() }
    }

    /// Blocks held.
    pub fn len(&self) -> u64 {
        self.blocks
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.blocks == 0
    }

    /// Adds the write of `data` (exactly one block) at `physical`. Returns the runs to
    /// write out now, in order: the held run when `physical` does not extend it, and the
    /// run itself once it is full. A block of the wrong length is refused (`Err`, nothing
    /// changes).
    pub fn push(&mut self, physical: u64, data: &[u8]) -> Result<Vec<Run>, usize> {
        if data.len() != self.block_bytes {
            return Err(data.len());
        }
        let mut out = Vec::new();
        let extends = self.blocks > 0 && self.start.checked_add(self.blocks) == Some(physical) && self.blocks < self.limit;
        if !extends {
            out.extend(self.take());
            self.start = physical;
        }
        self.data.extend_from_slice(data);
        self.blocks += 1;
        if self.blocks == self.limit {
            out.extend(self.take());
        }
        Ok(out)
    }

    /// The held run (emptying it), if any: what a sync writes out.
    pub fn take(&mut self) -> Option<Run> {
        if self.blocks == 0 {
            return None;
        }
        self.blocks = 0;
        Some(Run { start: self.start, data: core::mem::take(&mut self.data) })
    }

    /// The held bytes of `physical`, if the run holds it (a read must see its latest write).
    pub fn get(&self, physical: u64) -> Option<&[u8]> {
        let index = physical.checked_sub(self.start).filter(|&index| index < self.blocks)?;
        let offset = usize::try_from(index).ok()? * self.block_bytes;
        self.data.get(offset..offset + self.block_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn filters_and_digests_are_checked() {
        assert_eq!(check_filter(4096, 4096), Ok(()));
        assert_eq!(check_filter(4096, 4097), Err(Rejection::OverConsumed));
        let digest = Digest { request: 7, bytes: 100, ..Digest::default() };
        assert_eq!(check_digest(7, 100, &digest), Ok(()));
        assert_eq!(check_digest(8, 100, &digest), Err(Rejection::WrongRequest));
        assert_eq!(check_digest(7, 99, &digest), Err(Rejection::WrongLength));
        assert_eq!(check_digest(1, 1, &Digest::default()), Ok(()), "no digest is always allowed");
    }

    #[test]
    fn placements_never_overwrite_live_data() {
        let map = ShadowMap::new(16);
        assert_eq!(map.default_placement(3), 3);
        assert!(map.record(3, 10));
        assert_eq!(map.placed(3), Some(10));
        assert_eq!(map.check_placement(4, 10), Err(Rejection::Occupied));
        assert_eq!(map.check_placement(3, 10), Ok(()), "rewriting a block in place is fine");
        assert_eq!(map.check_placement(4, 16), Err(Rejection::OutsideDisk));
        assert_eq!(map.check_placement(4, Placement::NONE), Ok(()));
        assert!(!map.record(4, 10));
        assert_eq!(map.default_placement(10), Placement::NONE, "home of 10 holds 3's data");
        // Once 3 moves on, its old block is free again.
        assert!(map.record(3, 11));
        assert_eq!(map.check_placement(4, 10), Ok(()));
        map.clear();
        assert_eq!(map.placed(3), None);
    }

    #[test]
    fn lookups_are_checked_against_latest_writes() {
        let map = ShadowMap::new(8);
        assert!(map.record(1, 5));
        assert_eq!(map.check_lookup(1, Some(5)), Ok(true));
        assert_eq!(map.check_lookup(2, None), Ok(false));
        assert_eq!(map.check_lookup(1, Some(4)), Err(MapMismatch { logical: 1, expected: Some(5), answered: Some(4) }));
        assert_eq!(map.check_lookup(2, Some(3)), Err(MapMismatch { logical: 2, expected: None, answered: Some(3) }));
    }

    #[test]
    fn reads_copy_only_inside_the_active_request() {
        let requests = ReadRequests::new();
        let first = requests.begin(1000, 100, 50);
        assert_eq!(requests.active_length(), 50);
        assert_eq!(requests.range(first, 0, 50), Some((100, 150)));
        assert_eq!(requests.range(first, 40, 11), None, "past the request's end");
        assert_eq!(requests.range(first, u64::MAX, 2), None, "no overflow");
        assert_eq!(requests.range(0, 0, 1), None);
        let second = requests.begin(1000, 990, 50);
        assert_eq!(requests.active_length(), 10, "clamped to the source");
        assert_eq!(requests.range(first, 0, 1), None, "a new request replaces the old");
        requests.end(first);
        assert_eq!(requests.range(second, 0, 10), Some((990, 1000)));
        requests.end(second);
        assert_eq!(requests.range(second, 0, 1), None);
    }
    #[test]
    fn write_runs_gather_consecutive_blocks() {
        let mut run = WriteRun::new(4, 2);
        assert_eq!(run.push(10, &[1, 1]), Ok(Vec::new()));
        assert_eq!(run.push(11, &[2, 2]), Ok(Vec::new()));
        assert_eq!(run.get(11), Some(&[2u8, 2][..]));
        assert_eq!(run.get(12), None);
        assert_eq!(run.get(9), None);
        // Not the next block: the held run goes out first.
        assert_eq!(run.push(20, &[3, 3]), Ok(vec![Run { start: 10, data: vec![1, 1, 2, 2] }]));
        assert_eq!(run.len(), 1);
        // The same block again is not an extension either (the older write must land first).
        assert_eq!(run.push(20, &[4, 4]), Ok(vec![Run { start: 20, data: vec![3, 3] }]));
        assert_eq!(run.push(21, &[5, 5]), Ok(Vec::new()));
        assert_eq!(run.push(22, &[6, 6]), Ok(Vec::new()));
        // The fourth block fills it: written out at once.
        assert_eq!(run.push(23, &[7, 7]), Ok(vec![Run { start: 20, data: vec![4, 4, 5, 5, 6, 6, 7, 7] }]));
        assert!(run.is_empty());
        assert_eq!(run.push(24, &[8]), Err(1), "a short block is refused");
        assert!(run.is_empty());
        assert_eq!(run.push(24, &[8, 8]), Ok(Vec::new()));
        assert_eq!(run.take(), Some(Run { start: 24, data: vec![8, 8] }));
        assert_eq!(run.take(), None);
    }

    #[test]
    fn a_write_run_of_one_block_writes_every_block_at_once() {
        let mut run = WriteRun::new(0, 1);
        assert_eq!(run.push(5, &[9]), Ok(vec![Run { start: 5, data: vec![9] }]));
        assert_eq!(run.push(6, &[8]), Ok(vec![Run { start: 6, data: vec![8] }]));
    }
}
