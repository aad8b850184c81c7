//! One file's locks: the locks held and the requests waiting.
//!
//! # Same-owner semantics (POSIX)
//!
//! An owner's locks on a file never overlap each other and are kept merged: when an owner
//! is granted a lock of kind K on range R, every part of its own locks inside R is
//! replaced (so a read lock inside a write lock splits the write lock into up to two
//! pieces around a read piece, and a write lock over a read lock upgrades that part), and
//! the new lock is merged with the owner's locks of kind K that overlap or adjoin it
//! (`[0, 5)` and `[5, 9)` become `[0, 9)`). Unlocking R removes every part of the owner's
//! locks inside R, splitting a lock that sticks out on both sides into two. This is what
//! `fcntl(F_SETLK)` does on Linux and the BSDs. A re-lock by an owner only has to be
//! compatible with *other* owners' locks.
//!
//! The held locks are kept sorted by (start, end, owner) so that exported state reads in
//! file order.

use alloc::vec::Vec;

use crate::policy::{Candidate, RequestId};
use crate::range::{LockKind, OwnerId, Range, conflicts};

/// A lock held on a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldLock {
    /// Who holds it.
    pub owner: OwnerId,
    /// Read or write.
    pub kind: LockKind,
    /// The bytes.
    pub range: Range,
}

/// A request waiting on a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitingRequest {
    /// Its id (unique in the table, never 0).
    pub id: RequestId,
    /// Who asked.
    pub owner: OwnerId,
    /// Read or write.
    pub kind: LockKind,
    /// The bytes.
    pub range: Range,
    /// Arrival order on the table: lower arrived earlier.
    pub sequence: u64,
    /// When it arrived, ns.
    pub arrival_ns: u64,
}

/// One file's locks and waiting requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileLocks {
    held: Vec<HeldLock>,
    waiting: Vec<WaitingRequest>,
}

impl FileLocks {
    /// No locks, nobody waiting.
    pub const fn new() -> FileLocks {
        FileLocks { held: Vec::new(), waiting: Vec::new() }
    }

    /// The locks held, in (start, end, owner) order.
    pub fn holders(&self) -> &[HeldLock] {
        &self.held
    }

    /// The waiting requests, oldest first.
    pub fn waiting(&self) -> &[WaitingRequest] {
        &self.waiting
    }

    /// Whether nothing is held and nobody waits.
    pub fn is_idle(&self) -> bool {
        self.held.is_empty() && self.waiting.is_empty()
    }

    /// The first held lock (in file order) that a lock (`owner`, `kind`, `range`) would
    /// conflict with, if any (`F_GETLK`).
    pub fn blocker(&self, owner: OwnerId, kind: LockKind, range: Range) -> Option<HeldLock> {
        self.held.iter().copied().find(|held| conflicts(owner, kind, range, held.owner, held.kind, held.range))
    }

    /// Whether a lock (`owner`, `kind`, `range`) is compatible with every lock held.
    pub fn grantable(&self, owner: OwnerId, kind: LockKind, range: Range) -> bool {
        self.blocker(owner, kind, range).is_none()
    }

    /// The locks held if `owner`'s locks inside `range` were replaced by a lock of `kind`
    /// (`Some`) or removed (`None`), with the owner's locks merged (see the module's note).
    pub fn after(&self, owner: OwnerId, range: Range, kind: Option<LockKind>) -> Vec<HeldLock> {
        let mut held = Vec::with_capacity(self.held.len() + 2);
        for lock in &self.held {
            if lock.owner != owner || !lock.range.overlaps(range) {
                held.push(*lock);
                continue;
            }
            let (before, after) = lock.range.minus(range);
            held.extend(before.map(|piece| HeldLock { range: piece, ..*lock }));
            held.extend(after.map(|piece| HeldLock { range: piece, ..*lock }));
        }
        if let Some(kind) = kind {
            // The owner's same-kind locks touching the new one merge into it: after the cut
            // above at most one on each side, since the owner's locks never overlap and were
            // merged already.
            let mut merged = range;
            while let Some(index) = held.iter().position(|lock| lock.owner == owner && lock.kind == kind && lock.range.touches(merged)) {
                merged = merged.union(held.swap_remove(index).range);
            }
            held.push(HeldLock { owner, kind, range: merged });
        }
        held.sort_unstable_by_key(|lock| (lock.range.start(), lock.range.end(), lock.owner));
        held
    }

    /// Installs a held-lock list computed by [`FileLocks::after`].
    pub(crate) fn set_held(&mut self, held: Vec<HeldLock>) {
        self.held = held;
    }

    /// Appends a waiting request.
    pub(crate) fn push_waiting(&mut self, request: WaitingRequest) {
        self.waiting.push(request);
    }

    /// Removes and returns the waiting request `id`.
    pub(crate) fn remove_waiting(&mut self, id: RequestId) -> Option<WaitingRequest> {
        let index = self.waiting.iter().position(|request| request.id == id)?;
        Some(self.waiting.remove(index))
    }

    /// Removes `owner`'s waiting requests, returning their ids oldest first.
    pub(crate) fn remove_waiting_of(&mut self, owner: OwnerId) -> Vec<RequestId> {
        let ids = self.waiting.iter().filter(|request| request.owner == owner).map(|request| request.id).collect();
        self.waiting.retain(|request| request.owner != owner);
        ids
    }

    /// Removes all of `owner`'s locks, returning how many there were.
    pub(crate) fn remove_held_of(&mut self, owner: OwnerId) -> usize {
        let before = self.held.len();
        self.held.retain(|lock| lock.owner != owner);
        before - self.held.len()
    }

    /// The waiting requests that could be granted now, as the policy sees them.
    /// `fits(request)` says whether granting it stays within the table's lock limit.
    pub fn candidates(&self, now_ns: u64, mut fits: impl FnMut(&WaitingRequest) -> bool) -> Vec<Candidate> {
        let mut candidates = Vec::new();
        for (position, request) in self.waiting.iter().enumerate() {
            if !self.grantable(request.owner, request.kind, request.range) || !fits(request) {
                continue;
            }
            let overtakes = self.waiting[..position]
                .iter()
                .any(|earlier| conflicts(request.owner, request.kind, request.range, earlier.owner, earlier.kind, earlier.range));
            candidates.push(Candidate {
                request: request.id,
                owner: request.owner,
                kind: request.kind,
                start: request.range.start(),
                end: request.range.end(),
                sequence: request.sequence,
                position: position as u32,
                waited_ns: now_ns.saturating_sub(request.arrival_ns),
                overtakes,
            });
        }
        candidates
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use super::*;
    use LockKind::{Read, Write};

    fn range(start: u64, end: u64) -> Range {
        Range::new(start, end).unwrap()
    }

    fn lock(owner: OwnerId, kind: LockKind, start: u64, end: u64) -> HeldLock {
        HeldLock { owner, kind, range: range(start, end) }
    }

    /// Applies a lock (`Some(kind)`) or unlock (`None`) for `owner`.
    fn apply(file: &mut FileLocks, owner: OwnerId, kind: Option<LockKind>, start: u64, end: u64) {
        let held = file.after(owner, range(start, end), kind);
        file.set_held(held);
    }

    #[test]
    fn relocking_inside_splits_and_merges_back() {
        let mut file = FileLocks::new();
        apply(&mut file, 1, Some(Write), 0, 10);
        apply(&mut file, 1, Some(Read), 3, 5);
        assert_eq!(file.holders(), [lock(1, Write, 0, 3), lock(1, Read, 3, 5), lock(1, Write, 5, 10)]);
        // Write again over the read piece: the three pieces merge back into one.
        apply(&mut file, 1, Some(Write), 3, 5);
        assert_eq!(file.holders(), [lock(1, Write, 0, 10)]);
    }

    #[test]
    fn adjacent_and_overlapping_locks_of_one_kind_merge() {
        let mut file = FileLocks::new();
        apply(&mut file, 1, Some(Read), 0, 5);
        apply(&mut file, 1, Some(Read), 10, 15);
        apply(&mut file, 1, Some(Read), 5, 10);
        assert_eq!(file.holders(), [lock(1, Read, 0, 15)], "adjoining on both sides");
        apply(&mut file, 1, Some(Read), 12, 20);
        assert_eq!(file.holders(), [lock(1, Read, 0, 20)], "overlapping");
        // A different kind does not merge; it replaces the overlap.
        apply(&mut file, 1, Some(Write), 18, 30);
        assert_eq!(file.holders(), [lock(1, Read, 0, 18), lock(1, Write, 18, 30)]);
        // Another owner's locks are never merged with or cut.
        apply(&mut file, 2, Some(Read), 0, 18);
        assert_eq!(file.holders(), [lock(1, Read, 0, 18), lock(2, Read, 0, 18), lock(1, Write, 18, 30)]);
    }

    #[test]
    fn a_lock_covering_several_pieces_replaces_them() {
        let mut file = FileLocks::new();
        apply(&mut file, 1, Some(Read), 0, 4);
        apply(&mut file, 1, Some(Write), 6, 8);
        apply(&mut file, 1, Some(Read), 10, 12);
        apply(&mut file, 1, Some(Write), 2, 11);
        assert_eq!(file.holders(), [lock(1, Read, 0, 2), lock(1, Write, 2, 11), lock(1, Read, 11, 12)]);
        apply(&mut file, 1, Some(Read), 0, u64::MAX);
        assert_eq!(file.holders(), [HeldLock { owner: 1, kind: Read, range: Range::WHOLE }]);
    }

    #[test]
    fn unlocking_splits_and_trims() {
        let mut file = FileLocks::new();
        apply(&mut file, 1, Some(Write), 0, 100);
        apply(&mut file, 2, Some(Read), 200, 300);
        apply(&mut file, 1, None, 40, 60);
        assert_eq!(file.holders(), [lock(1, Write, 0, 40), lock(1, Write, 60, 100), lock(2, Read, 200, 300)]);
        apply(&mut file, 1, None, 30, 70);
        assert_eq!(file.holders(), [lock(1, Write, 0, 30), lock(1, Write, 70, 100), lock(2, Read, 200, 300)]);
        apply(&mut file, 1, None, 0, u64::MAX);
        assert_eq!(file.holders(), [lock(2, Read, 200, 300)], "another owner's lock is untouched");
        apply(&mut file, 1, None, 0, 10);
        assert_eq!(file.holders(), [lock(2, Read, 200, 300)], "unlocking nothing is not an error");
    }

    #[test]
    fn conflicts_are_found_with_other_owners_only() {
        let mut file = FileLocks::new();
        apply(&mut file, 1, Some(Read), 0, 10);
        apply(&mut file, 2, Some(Read), 5, 15);
        assert!(file.grantable(3, Read, range(0, 20)));
        assert_eq!(file.blocker(3, Write, range(12, 13)), Some(lock(2, Read, 5, 15)));
        assert_eq!(file.blocker(1, Write, range(0, 5)), None, "upgrade where nobody else holds");
        assert_eq!(file.blocker(1, Write, range(0, 6)), Some(lock(2, Read, 5, 15)), "upgrade over another reader");
        assert!(file.grantable(3, Write, range(15, 16)));
    }

    #[test]
    fn candidates_describe_the_grantable_waiters() {
        let mut file = FileLocks::new();
        apply(&mut file, 1, Some(Read), 0, 1);
        let waiting = |id, owner, kind| WaitingRequest { id, owner, kind, range: range(0, 1), sequence: id, arrival_ns: 10 * id };
        file.push_waiting(waiting(1, 2, Write));
        file.push_waiting(waiting(2, 3, Read));
        file.push_waiting(waiting(3, 4, Read));
        let candidates = file.candidates(100, |_| true);
        assert_eq!(candidates.iter().map(|candidate| candidate.request).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!((candidates[0].position, candidates[0].waited_ns, candidates[0].overtakes), (1, 80, true));
        assert_eq!(file.candidates(100, |request| request.id != 2).len(), 1, "a request over the lock limit is no candidate");
        assert_eq!(file.remove_waiting_of(3), vec![2]);
        assert_eq!(file.remove_waiting(1).map(|request| request.owner), Some(2));
        assert_eq!(file.remove_waiting(1), None);
    }
}
