//! `spindle-service-frames`: the policy half of the physical-memory service.
//!
//! A core service is split in two (docs/architecture.md): this crate holds the decisions —
//! plain data and rules, `no_std`, no `unsafe`, tested on the host with fakes — and one
//! kernel file (`kernel/src/services/frames.rs`) wires it to the dispatcher and the kernel
//! functions of the `mm` domain.
//!
//! The service has two halves that live side by side until the kernel is wired to the
//! second:
//!
//! - the **synthetic reclaim queue** ([`ReclaimQueue`], what `kernel/src/services/frames.rs`
//!   raises `mm.Reclaim` over today), described below;
//! - the **real physical-memory policy**, ready for the virtual-memory issue:
//!   [`owners`] (the [`FrameTable`]: every frame's [`Owner`], mapping, sampled
//!   accessed/dirty bits, pin; per-owner counts, per-owner limits, the low-water mark),
//!   [`clock`] (per-owner and global reclaim queues maintained as clock / second chance
//!   from sampled accessed bits) and [`decision`] (the `mm.Allocate` and `mm.Reclaim`
//!   decisions: checks of every answer, the defaults, and the exported [`OwnerState`]).
//!
//! ```
//! use spindle_service_frames::{FrameTable, Owner};
//!
//! let mut table = FrameTable::new(0x8_0000, 8).unwrap();
//! let process = Owner::AddressSpace(7);
//! table.set_limit(process, Some(2)).unwrap();
//! let a = table.allocate(process).unwrap();
//! let b = table.allocate(process).unwrap();
//! assert!(table.allocate(process).is_err(), "above the limit");
//! table.sample(a, true, false).unwrap(); // the kernel read `a`'s accessed bit
//! let sweep = table.next_victims(1);
//! assert_eq!(sweep.clear_accessed, [a]); // second chance: clear the bit in the page table
//! assert_eq!(sweep.candidates, [b]);
//! assert_eq!(table.queue(process), [b, a]);
//! ```
//!
//! The synthetic queue: one owner's **reclaim queue** ([`ReclaimQueue`]): a run of frames
//! in least-recently-used order (the queue the `mm` kernel functions expose to the owner's
//! extension), and the owner's **hot list** as the kernel mirrors it (slot → frame, plus a
//! bitmap of hot queue positions for constant-time checks). `mm.Reclaim` offers a
//! candidate; an extension may volunteer another frame *of the same queue* that is not
//! hot. [`ReclaimQueue::validate`] is that rule. Real frames, owners and accessed bits come
//! with the virtual-memory issue; the queue is synthetic until then.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod clock;
pub mod decision;
pub mod owners;

#[cfg(test)]
mod tests;

pub use clock::{MAX_SWEEP, Sweep};
pub use decision::{
    AllocateAnswer, AllocateDecision, AllocateRefusal, AllocateRequest, MAX_ALLOCATE, OwnerState, Purpose, ReclaimDecision, ReclaimQuestion,
    check_allocate_answer, check_reclaim_answer, check_request, decide_allocate, decide_reclaim, default_allocate, default_reclaim,
    owner_state, reclaim_question,
};
pub use owners::{AuditError, ConfigError, FrameError, FrameInfo, FrameTable, Freed, MAX_FRAMES, MAX_OWNER_ID, Mapping, Owner, PAGE_SIZE};

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::HotListEntry;

/// Hot-list slots an owner has (the `mm.HotListSet` record's).
pub const SLOTS: usize = HotListEntry::SLOTS as usize;

/// Most frames a queue may hold (the bitmap is sized for it).
pub const MAX_QUEUE_FRAMES: u64 = 1024;

/// Why an answer to an `mm` event was refused (the synthetic queue's
/// [`ReclaimQueue::validate`] and the real-frame checks of [`decision`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The frame is not in the owner's queue (synthetic queue).
    NotQueued,
    /// The frame is on the owner's hot list (synthetic queue).
    Hot,
    /// `mm.Reclaim`: the volunteered frame is not in the frame table.
    NotAFrame,
    /// `mm.Reclaim`: the volunteered frame is free (not resident).
    NotResident,
    /// `mm.Reclaim`: the volunteered frame is the kernel's.
    KernelFrame,
    /// `mm.Reclaim`: the volunteered frame belongs to another owner.
    OtherOwner,
    /// `mm.Reclaim`: the volunteered frame is pinned.
    Pinned,
    /// `mm.Allocate`: a handler refused the kernel's own allocation.
    RefusedKernel,
    /// `mm.Allocate`: a handler granted above the owner's limit.
    GrantOverLimit,
    /// `mm.Allocate`: a handler granted more frames than are free (or a bad request).
    GrantWithoutFrames,
}

impl Rejection {
    /// The reason as the dispatcher records it.
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::NotQueued => "volunteered frame is not in the owner's LRU queue",
            Rejection::Hot => "volunteered frame is on the owner's hot list",
            Rejection::NotAFrame => "volunteered frame is not a frame the service manages",
            Rejection::NotResident => "volunteered frame is free, not resident",
            Rejection::KernelFrame => "volunteered frame belongs to the kernel",
            Rejection::OtherOwner => "volunteered frame belongs to another owner",
            Rejection::Pinned => "volunteered frame is pinned",
            Rejection::RefusedKernel => "the kernel's own allocation cannot be refused",
            Rejection::GrantOverLimit => "grant exceeds the owner's memory limit",
            Rejection::GrantWithoutFrames => "grant exceeds the free frames",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.reason())
    }
}

impl core::error::Error for Rejection {}

/// One owner's reclaim queue and hot-list mirror. Safe to share: every field is atomic,
/// so raises (which read) and the console (which sets the hot list) need no lock; a
/// reader racing a hot-list change sees the old or the new list, either of which is valid.
pub struct ReclaimQueue {
    base: u64,
    length: u64,
    slots: [AtomicU64; SLOTS],
    hot_positions: [AtomicU64; (MAX_QUEUE_FRAMES / 64) as usize],
    rejections: AtomicU64,
}

impl ReclaimQueue {
    /// A queue of `length` frames starting at frame `base` (head = least recently used),
    /// with an empty hot list. `length` is clamped to [`MAX_QUEUE_FRAMES`].
    pub const fn new(base: u64, length: u64) -> ReclaimQueue {
        ReclaimQueue {
            base,
            length: if length > MAX_QUEUE_FRAMES { MAX_QUEUE_FRAMES } else { length },
            slots: [const { AtomicU64::new(0) }; SLOTS],
            hot_positions: [const { AtomicU64::new(0) }; (MAX_QUEUE_FRAMES / 64) as usize],
            rejections: AtomicU64::new(0),
        }
    }

    /// Frames in the queue.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The frame at `position` (0 = least recently used); 0 past the end.
    pub fn frame(&self, position: u64) -> u64 {
        if position < self.length { self.base + position } else { 0 }
    }

    /// The queue position of `frame`, if it is queued.
    fn position(&self, frame: u64) -> Option<u64> {
        frame.checked_sub(self.base).filter(|&position| position < self.length)
    }

    /// Whether `frame` is on the hot list (frames outside the queue never are).
    pub fn is_hot(&self, frame: u64) -> bool {
        let Some(position) = self.position(frame) else { return false };
        self.hot_positions[(position / 64) as usize].load(Ordering::Relaxed) & (1 << (position % 64)) != 0
    }

    /// Sets hot-list `slot` to `frame` (0 empties it); false for a slot past [`SLOTS`].
    pub fn set_hot(&self, slot: usize, frame: u64) -> bool {
        let Some(entry) = self.slots.get(slot) else { return false };
        entry.store(frame, Ordering::Relaxed);
        self.rebuild();
        true
    }

    /// Empties the hot list.
    pub fn clear_hot(&self) {
        for slot in &self.slots {
            slot.store(0, Ordering::Relaxed);
        }
        self.rebuild();
    }

    fn rebuild(&self) {
        for word in &self.hot_positions {
            word.store(0, Ordering::Relaxed);
        }
        for slot in &self.slots {
            if let Some(position) = self.position(slot.load(Ordering::Relaxed)) {
                self.hot_positions[(position / 64) as usize].fetch_or(1 << (position % 64), Ordering::Relaxed);
            }
        }
    }

    /// Checks an extension's answer to `mm.Reclaim(candidate)`: the candidate itself, or
    /// a frame of the queue that is not hot. A refusal is counted in
    /// [`ReclaimQueue::rejections`].
    ///
    /// Errors: [`Rejection::NotQueued`], [`Rejection::Hot`].
    #[inline]
    pub fn validate(&self, candidate: u64, volunteered: u64) -> Result<(), Rejection> {
        if volunteered == candidate {
            return Ok(());
        }
        self.validate_other(candidate, volunteered)
    }

    /// [`ReclaimQueue::validate`] of a frame other than the candidate (out of line: the
    /// common answer, the candidate itself, is one comparison in the caller).
    #[inline(never)]
    fn validate_other(&self, candidate: u64, volunteered: u64) -> Result<(), Rejection> {
        debug_assert_ne!(candidate, volunteered);
        let rejection = if self.position(volunteered).is_none() {
            Rejection::NotQueued
        } else if self.is_hot(volunteered) {
            Rejection::Hot
        } else {
            return Ok(());
        };
        self.rejections.fetch_add(1, Ordering::Relaxed);
        Err(rejection)
    }

    /// Answers refused by [`ReclaimQueue::validate`] so far.
    pub fn rejections(&self) -> u64 {
        self.rejections.load(Ordering::Relaxed)
    }

    /// The reference answer for `candidate` (what benchmarks and tests compare extensions
    /// with): the candidate if it is cold, else the first cold frame of the queue.
    pub fn reference_choice(&self, candidate: u64) -> u64 {
        if !self.is_hot(candidate) {
            return candidate;
        }
        (0..self.length).map(|position| self.frame(position)).find(|&frame| !self.is_hot(frame)).unwrap_or(candidate)
    }
}

#[cfg(test)]
mod queue_tests {
    use super::*;

    const BASE: u64 = 0x8_0400;

    #[test]
    fn frames_are_queued_in_order_and_bounded() {
        let queue = ReclaimQueue::new(BASE, 1024);
        assert_eq!(queue.len(), 1024);
        assert_eq!(queue.frame(0), BASE);
        assert_eq!(queue.frame(1023), BASE + 1023);
        assert_eq!(queue.frame(1024), 0);
        assert_eq!(ReclaimQueue::new(BASE, 5000).len(), MAX_QUEUE_FRAMES);
    }

    #[test]
    fn hot_list_marks_only_queued_frames() {
        let queue = ReclaimQueue::new(BASE, 1024);
        assert!(queue.set_hot(0, BASE + 3));
        assert!(queue.set_hot(1, 0x1234)); // outside the queue: remembered, never hot
        assert!(!queue.set_hot(SLOTS, BASE));
        assert!(queue.is_hot(BASE + 3));
        assert!(!queue.is_hot(BASE + 4));
        assert!(!queue.is_hot(0x1234));
        assert!(queue.set_hot(0, BASE + 64));
        assert!(!queue.is_hot(BASE + 3), "replacing a slot clears the old frame");
        assert!(queue.is_hot(BASE + 64));
        queue.clear_hot();
        assert!(!queue.is_hot(BASE + 64));
    }

    #[test]
    fn answers_are_validated_and_refusals_counted() {
        let queue = ReclaimQueue::new(BASE, 1024);
        queue.set_hot(0, BASE + 1);
        assert_eq!(queue.validate(BASE, BASE), Ok(()));
        assert_eq!(queue.validate(BASE + 1, BASE + 1), Ok(()), "the candidate itself is always allowed");
        assert_eq!(queue.validate(BASE, BASE + 2), Ok(()));
        assert_eq!(queue.validate(BASE, BASE + 1), Err(Rejection::Hot));
        assert_eq!(queue.validate(BASE, BASE + 1024), Err(Rejection::NotQueued));
        assert_eq!(queue.validate(BASE, 0), Err(Rejection::NotQueued));
        assert_eq!(queue.rejections(), 3);
        assert!(Rejection::Hot.reason().contains("hot list"));
    }

    #[test]
    fn reference_choice_skips_hot_frames() {
        let queue = ReclaimQueue::new(BASE, 4);
        assert_eq!(queue.reference_choice(BASE + 2), BASE + 2);
        queue.set_hot(0, BASE);
        queue.set_hot(1, BASE + 1);
        assert_eq!(queue.reference_choice(BASE), BASE + 2);
        assert_eq!(queue.reference_choice(BASE + 3), BASE + 3);
        queue.set_hot(2, BASE + 2);
        queue.set_hot(3, BASE + 3);
        assert_eq!(queue.reference_choice(BASE + 1), BASE + 1, "all hot: the candidate");
    }
}
