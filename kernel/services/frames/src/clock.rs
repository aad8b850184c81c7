//! Reclaim queues maintained as **clock / second chance** from accessed bits.
//!
//! Every frame of a reclaimable owner (not the kernel) is on two queues at once: its
//! owner's and the global one, each ordered from the head (the hand: looked at first) to
//! the tail. A new frame joins both tails. The kernel samples the page tables' accessed
//! and dirty bits into the table ([`FrameTable::sample`]); the bits accumulate (a sample
//! sets, never clears) until the hand consumes them.
//!
//! The hand ([`FrameTable::next_victims`], or [`FrameTable::next_victims_of`] for one
//! owner's queue) walks from the head:
//!
//! - a **pinned** frame is passed over and stays where it is;
//! - a frame whose accessed bit is **set** gets its second chance: the bit is cleared in
//!   the table, the frame moves to the tail of both its queues, and it is reported in
//!   [`Sweep::clear_accessed`] — the kernel must clear the bit in the page table too, or
//!   the next sample would set it again;
//! - a frame whose bit is **clear** is a candidate ([`Sweep::candidates`]) and stays at
//!   its place (the kernel frees the one it reclaims, which takes it off the queues).
//!
//! The walk stops after `n` candidates or at the end of the queue (frames moved to the
//! tail during the walk are met again, with their bit now clear: a queue whose every frame
//! was accessed still yields candidates, in the old order). Each frame is visited at most
//! twice, so a sweep costs at most twice the queue's length.
//!
//! The queues are intrusive doubly-linked lists over table indices, so joining, leaving
//! and moving to the tail are constant time.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use crate::owners::{AuditError, FrameError, FrameTable, Owner};

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Links {
    prev: u32,
    next: u32,
}

const UNLINKED: Links = Links { prev: NIL, next: NIL };

#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
    len: u64,
}

const EMPTY: List = List { head: NIL, tail: NIL, len: 0 };

fn push_back(links: &mut [Links], list: &mut List, index: u32) {
    links[index as usize] = Links { prev: list.tail, next: NIL };
    if list.tail == NIL {
        list.head = index;
    } else {
        links[list.tail as usize].next = index;
    }
    list.tail = index;
    list.len += 1;
}

fn unlink(links: &mut [Links], list: &mut List, index: u32) {
    let Links { prev, next } = links[index as usize];
    if prev == NIL {
        list.head = next;
    } else {
        links[prev as usize].next = next;
    }
    if next == NIL {
        list.tail = prev;
    } else {
        links[next as usize].prev = prev;
    }
    links[index as usize] = UNLINKED;
    list.len -= 1;
}

/// The global queue and the per-owner queues (crate-internal; see the module docs).
pub(crate) struct Lists {
    global_links: Vec<Links>,
    owner_links: Vec<Links>,
    global: List,
    owners: BTreeMap<Owner, List>,
}

impl Lists {
    pub(crate) fn new(count: usize) -> Lists {
        Lists { global_links: vec![UNLINKED; count], owner_links: vec![UNLINKED; count], global: EMPTY, owners: BTreeMap::new() }
    }

    pub(crate) fn push_back(&mut self, index: u32, owner: Owner) {
        push_back(&mut self.global_links, &mut self.global, index);
        push_back(&mut self.owner_links, self.owners.entry(owner).or_insert(EMPTY), index);
    }

    pub(crate) fn unlink(&mut self, index: u32, owner: Owner) {
        unlink(&mut self.global_links, &mut self.global, index);
        if let Some(list) = self.owners.get_mut(&owner) {
            unlink(&mut self.owner_links, list, index);
            if list.len == 0 {
                self.owners.remove(&owner);
            }
        }
    }

    fn move_to_tail(&mut self, index: u32, owner: Owner) {
        self.unlink(index, owner);
        self.push_back(index, owner);
    }

    fn iter<'a>(links: &'a [Links], list: List) -> impl Iterator<Item = u32> + 'a {
        let mut cursor = list.head;
        core::iter::from_fn(move || {
            (cursor != NIL).then(|| {
                let index = cursor;
                cursor = links[index as usize].next;
                index
            })
        })
    }

    pub(crate) fn owner_iter(&self, owner: Owner) -> impl Iterator<Item = u32> + '_ {
        Self::iter(&self.owner_links, self.owners.get(&owner).copied().unwrap_or(EMPTY))
    }

    fn global_iter(&self) -> impl Iterator<Item = u32> + '_ {
        Self::iter(&self.global_links, self.global)
    }

    fn owner_len(&self, owner: Owner) -> u64 {
        self.owners.get(&owner).map_or(0, |list| list.len)
    }

    pub(crate) fn audit(&self, table: &FrameTable, queued: u64) -> Result<(), AuditError> {
        if self.global.len != queued {
            return Err(AuditError::Queue("global length differs from the reclaimable frames"));
        }
        let mut seen = vec![false; table.frames.len()];
        let mut walked = 0u64;
        let mut previous = NIL;
        for index in self.global_iter() {
            if walked >= queued || seen[index as usize] {
                return Err(AuditError::Queue("global queue has a cycle or a duplicate"));
            }
            if self.global_links[index as usize].prev != previous {
                return Err(AuditError::Queue("global back link"));
            }
            if !table.frames[index as usize].owner.is_reclaimable() {
                return Err(AuditError::Queue("a kernel or free frame is queued"));
            }
            seen[index as usize] = true;
            walked += 1;
            previous = index;
        }
        if walked != queued || self.global.tail != previous {
            return Err(AuditError::Queue("global queue length or tail"));
        }
        let mut total = 0u64;
        for (&owner, list) in &self.owners {
            if list.len == 0 || list.len != table.held(owner) {
                return Err(AuditError::Queue("an owner's queue length differs from its count"));
            }
            let mut previous = NIL;
            let mut walked = 0u64;
            for index in Self::iter(&self.owner_links, *list) {
                if walked >= list.len || table.frames[index as usize].owner != owner || !seen[index as usize] {
                    return Err(AuditError::Queue("a frame is on another owner's queue or not on the global one"));
                }
                if self.owner_links[index as usize].prev != previous {
                    return Err(AuditError::Queue("owner back link"));
                }
                walked += 1;
                previous = index;
            }
            if walked != list.len || list.tail != previous {
                return Err(AuditError::Queue("owner queue length or tail"));
            }
            total += walked;
        }
        if total != queued {
            return Err(AuditError::Queue("owner queues do not add up to the global one"));
        }
        Ok(())
    }
}

/// Most candidates one sweep may ask for.
pub const MAX_SWEEP: usize = 1024;

/// What one sweep of the hand found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Reclaim candidates in the order the hand met them (the default policy's choice is
    /// the first).
    pub candidates: Vec<u64>,
    /// Frames that got a second chance: the kernel must clear their accessed bits in the
    /// page table.
    pub clear_accessed: Vec<u64>,
}

/// Where a sweep walks.
#[derive(Clone, Copy)]
enum Scope {
    Global,
    Owner(Owner),
}

impl FrameTable {
    /// Records the page-table bits the kernel read for `frame`: the accessed and dirty
    /// bits are set if the sample has them (a sample never clears a bit: the hand
    /// consumes accessed bits, [`FrameTable::mark_clean`] dirty ones).
    ///
    /// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`].
    pub fn sample(&mut self, frame: u64, accessed: bool, dirty: bool) -> Result<(), FrameError> {
        let index = self.owned_index(frame)?;
        let info = &mut self.frames[index];
        info.accessed |= accessed;
        info.dirty |= dirty;
        Ok(())
    }

    /// Runs the hand over the global queue until `n` candidates (at most [`MAX_SWEEP`])
    /// are found or the queue ends (see the module documentation).
    pub fn next_victims(&mut self, n: usize) -> Sweep {
        self.sweep(Scope::Global, n)
    }

    /// Runs the hand over `owner`'s queue only (reclaim from an owner above its limit).
    /// Frames given a second chance move to the tail of the global queue as well.
    pub fn next_victims_of(&mut self, owner: Owner, n: usize) -> Sweep {
        self.sweep(Scope::Owner(owner), n)
    }

    fn sweep(&mut self, scope: Scope, n: usize) -> Sweep {
        let n = n.min(MAX_SWEEP);
        let mut sweep = Sweep::default();
        let (mut cursor, length) = match scope {
            Scope::Global => (self.lists.global.head, self.lists.global.len),
            Scope::Owner(owner) => match self.lists.owners.get(&owner) {
                Some(list) => (list.head, list.len),
                None => return sweep,
            },
        };
        // Every frame is visited at most twice; the bound makes that a guarantee.
        let mut budget = length.saturating_mul(2);
        while cursor != NIL && sweep.candidates.len() < n && budget > 0 {
            budget -= 1;
            let index = cursor;
            cursor = match scope {
                Scope::Global => self.lists.global_links[index as usize].next,
                Scope::Owner(_) => self.lists.owner_links[index as usize].next,
            };
            let info = self.frames[index as usize];
            if info.pinned {
                continue;
            }
            let frame = self.frame_at(index as usize);
            if info.accessed {
                self.frames[index as usize].accessed = false;
                self.lists.move_to_tail(index, info.owner);
                sweep.clear_accessed.push(frame);
                if cursor == NIL {
                    // It was the last one: it is met again at the tail.
                    cursor = index;
                }
            } else {
                sweep.candidates.push(frame);
            }
        }
        sweep
    }

    /// `owner`'s reclaim queue in clock order (head first: what the hand looks at first)
    /// — the exported state of the `mm` domain.
    pub fn queue(&self, owner: Owner) -> Vec<u64> {
        self.lists.owner_iter(owner).map(|index| self.frame_at(index as usize)).collect()
    }

    /// Frames on `owner`'s reclaim queue.
    pub fn queue_len(&self, owner: Owner) -> u64 {
        self.lists.owner_len(owner)
    }

    /// The frame at `position` of `owner`'s queue (0 = head), walking the queue.
    pub fn queue_frame(&self, owner: Owner, position: u64) -> Option<u64> {
        let position = usize::try_from(position).ok()?;
        self.lists.owner_iter(owner).nth(position).map(|index| self.frame_at(index as usize))
    }

    /// The global reclaim queue in clock order.
    pub fn global_queue(&self) -> Vec<u64> {
        self.lists.global_iter().map(|index| self.frame_at(index as usize)).collect()
    }
}
