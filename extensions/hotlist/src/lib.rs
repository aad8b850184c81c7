//! `hotlist`: the prioritization graft of Small & Seltzer '96 (§5.1, VM page eviction).
//!
//! The application keeps a *hot list* of up to [`SLOTS`] frames it wants resident, as a
//! singly linked list (an array of nodes with `next` indices; no allocation), filled
//! through `mm.HotListSet` (slot [`HotListEntry::CLEAR`] empties it). On `mm.Reclaim` the
//! handler walks the list linearly, as in the paper: a candidate that is not hot is
//! taken as it is; a hot one is replaced by the first frame of the owner's LRU queue (read
//! through the `mm` kernel functions, head first) that is not hot.
//!
//! The search is [`HotList::choose`], parameterised by the queue so host tests can drive
//! it with a closure (the kernel functions answer 0 on the host).

#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use spindle_abi::event::{HotListEntry, MM_HOT_LIST_SET, MM_RECLAIM, ReclaimCandidate, Volunteer};

spindle_abi::extension! {
    name: "hotlist",
    version: "0.1.0",
    budget_microseconds: 10_000,
    memory_quota_bytes: 64 * 1024,
    domains: ["mm"],
    bindings: [
        MM_RECLAIM => reclaim,
        MM_HOT_LIST_SET => set_entry,
    ],
}

/// Entries in the hot list.
pub const SLOTS: usize = HotListEntry::SLOTS as usize;
/// The `next` index that ends the list.
const END: u8 = u8::MAX;

/// A hot list of [`SLOTS`] frames as a singly linked list. Atomics (relaxed) give the
/// interior mutability a `static` needs without `unsafe`; handlers of one extension do not
/// run concurrently on this list in practice, and a torn update only changes which frames
/// are hot (a walk that never ended would be stopped by the binding's budget).
pub struct HotList {
    frames: [AtomicU64; SLOTS],
    next: [AtomicU8; SLOTS],
    head: AtomicU8,
    /// Bit `slot` set: the node is linked into the list.
    linked: AtomicU64,
}

impl Default for HotList {
    fn default() -> Self {
        Self::new()
    }
}

impl HotList {
    /// An empty list.
    pub const fn new() -> Self {
        HotList { frames: [const { AtomicU64::new(0) }; SLOTS], next: [const { AtomicU8::new(END) }; SLOTS], head: AtomicU8::new(END), linked: AtomicU64::new(0) }
    }

    /// Empties the list.
    pub fn clear(&self) {
        self.head.store(END, Ordering::Relaxed);
        self.linked.store(0, Ordering::Relaxed);
    }

    /// Sets `slot` to `frame`, linking the node at the head if it was not in the list; a
    /// slot out of range is ignored.
    pub fn set(&self, slot: usize, frame: u64) {
        if slot >= SLOTS {
            return;
        }
        self.frames[slot].store(frame, Ordering::Relaxed);
        let bit = 1u64 << slot;
        if self.linked.load(Ordering::Relaxed) & bit == 0 {
            self.next[slot].store(self.head.load(Ordering::Relaxed), Ordering::Relaxed);
            self.head.store(slot as u8, Ordering::Relaxed);
            self.linked.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Whether `frame` is on the list: a linear walk from the head. [`END`] is out of the
    /// nodes' range, so the bounds check ends the walk; the list cannot form a cycle (a
    /// node is linked once per [`clear`](Self::clear), at the head).
    pub fn contains(&self, frame: u64) -> bool {
        let mut node = self.head.load(Ordering::Relaxed) as usize;
        while let Some(entry) = self.frames.get(node) {
            if entry.load(Ordering::Relaxed) == frame {
                return true;
            }
            node = self.next[node % SLOTS].load(Ordering::Relaxed) as usize;
        }
        false
    }

    /// The frame to give up for `candidate`: the candidate if it is not hot, else the first
    /// of `length` LRU positions (`lru(position)`, head first) that is not hot; the candidate
    /// when every queued frame is hot.
    pub fn choose(&self, candidate: u64, length: impl FnOnce() -> u64, lru: impl Fn(u64) -> u64) -> u64 {
        if !self.contains(candidate) {
            return candidate;
        }
        (0..length()).map(lru).find(|&frame| !self.contains(frame)).unwrap_or(candidate)
    }
}

/// This extension instance's hot list.
static LIST: HotList = HotList::new();

/// `mm.Reclaim`: volunteer the candidate or the first cold frame of the LRU queue.
pub fn reclaim(args: &ReclaimCandidate) -> Volunteer {
    Volunteer { frame: LIST.choose(args.candidate_frame, spindle_abi::host::mm_lru_length, spindle_abi::host::mm_lru_frame) }
}

/// `mm.HotListSet`: set one entry, or clear the list.
pub fn set_entry(entry: &HotListEntry) {
    if entry.slot == HotListEntry::CLEAR {
        LIST.clear();
    } else if entry.slot < HotListEntry::SLOTS {
        LIST.set(entry.slot as usize, entry.frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(position: u64) -> u64 {
        100 + position
    }

    #[test]
    fn cold_candidate_is_taken() {
        let list = HotList::new();
        list.set(0, 105);
        assert_eq!(list.choose(107, || 10, queue), 107);
    }

    #[test]
    fn hot_candidate_is_replaced_by_first_cold_lru_frame() {
        let list = HotList::new();
        for (slot, frame) in [100u64, 101, 103].into_iter().enumerate() {
            list.set(slot, frame);
        }
        assert!(list.contains(103) && !list.contains(102));
        assert_eq!(list.choose(101, || 10, queue), 102);
    }

    #[test]
    fn all_hot_keeps_candidate_and_clear_empties() {
        let list = HotList::new();
        for slot in 0..SLOTS {
            list.set(slot, 100 + slot as u64);
        }
        assert_eq!(list.choose(100, || SLOTS as u64, queue), 100);
        list.set(3, 500);
        assert!(!list.contains(103) && list.contains(500), "resetting a slot replaces its frame");
        list.clear();
        assert!(!list.contains(500));
        assert_eq!(list.choose(100, || 10, queue), 100);
    }

    #[test]
    fn out_of_range_slot_is_ignored_and_host_queue_is_empty() {
        let list = HotList::new();
        list.set(SLOTS, 7);
        assert!(!list.contains(7));
        // On the host the kernel functions answer 0: a hot candidate stays.
        set_entry(&HotListEntry { slot: 0, frame: 9 });
        assert_eq!(reclaim(&ReclaimCandidate { candidate_frame: 9, owner: 0 }).frame, 9);
        set_entry(&HotListEntry { slot: HotListEntry::CLEAR, frame: 0 });
        assert_eq!(spindle_extension().bindings.len(), 2);
    }
}
