//! Read-copy-update with quiescent-state-based reclamation (QSBR): the dispatcher's
//! snapshot cell, and most of the crate's `unsafe` code (the rest: the single bounded
//! binding's frame handed to the bounded executor, `binding::run_bounded_frame`).
//!
//! Design: an [`Rcu<T>`] holds a pointer to the current value. Readers load it (one
//! acquire load, no atomic read-modify-write, nothing to undo afterwards — which is what
//! lets the raise fast path end in a tail call). Writers, serialised by a lock, swap in a
//! new value and *retire* the old one, tagged with a new *generation*. A retired value is
//! freed once every hart has passed a *quiescent state* after it was retired: a point
//! where that hart holds no reference obtained from any `Rcu` of the dispatcher. The kernel
//! reports quiescent states through [`Harts::quiescent`] (an `unsafe fn`: the contract is
//! the kernel's), e.g. from its idle or console loop; a hart that will not raise for a
//! while can go [`offline`](Harts::offline) so that it does not hold reclamation back.
//!
//! Cost: reading is free; retiring is one atomic add; reclaiming scans one counter per
//! hart. Memory of retired values is held until every online hart reports.
//!
//! Limitations: if a hart never reports (and is not offline), retired values are never
//! freed — a leak, never a use-after-free. Values are freed by writers and by
//! [`Rcu::reclaim`], never by readers, so reading never calls the allocator.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// `seen` value of a hart that does not raise (see [`Harts::offline`]).
const OFFLINE: u64 = u64::MAX;

/// A hart number that is not below the dispatcher's hart count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownHart(pub usize);

/// One hart's last reported generation, alone on its cache line (harts write their own).
#[repr(align(64))]
struct Seen(AtomicU64);

/// The grace-period state shared by every `Rcu` of one dispatcher.
pub(crate) struct Harts {
    /// Bumped by every retirement; retired values are tagged with the bumped value.
    generation: AtomicU64,
    /// Per hart: the generation it saw at its last quiescent state, or `OFFLINE`.
    seen: Box<[Seen]>,
}

impl Harts {
    /// State for harts `0..count`, all online and not yet quiescent.
    pub(crate) fn new(count: usize) -> Self {
        Harts { generation: AtomicU64::new(0), seen: (0..count).map(|_| Seen(AtomicU64::new(0))).collect() }
    }

    /// Records that `hart` is in a quiescent state.
    ///
    /// # Safety
    ///
    /// The caller must be running on `hart` (or `hart` must be stopped), and `hart` must
    /// hold no reference obtained from an `Rcu` of this dispatcher: in particular it must
    /// not be inside [`EventTable::raise`](crate::EventTable::raise) at any depth
    /// (including a raise interrupted by the trap that is reporting, or a raise waiting
    /// for a user-level upcall).
    pub(crate) unsafe fn quiescent(&self, hart: usize) -> Result<(), UnknownHart> {
        let seen = self.seen.get(hart).ok_or(UnknownHart(hart))?;
        // SeqCst: everything this hart did with old values happens before a reclaimer's
        // load of `seen` that observes this store; and the generation we load is ordered
        // after the pointer swaps it counts, so later reads on this hart see new values.
        seen.0.store(self.generation.load(Ordering::SeqCst), Ordering::SeqCst);
        Ok(())
    }

    /// Takes `hart` out of grace-period tracking until [`online`](Self::online).
    ///
    /// # Safety
    ///
    /// As for [`quiescent`](Self::quiescent), and `hart` must not raise events until it is
    /// online again.
    pub(crate) unsafe fn offline(&self, hart: usize) -> Result<(), UnknownHart> {
        let seen = self.seen.get(hart).ok_or(UnknownHart(hart))?;
        seen.0.store(OFFLINE, Ordering::SeqCst);
        Ok(())
    }

    /// Brings an offline `hart` back (a no-op for an online one); call it on `hart`
    /// before it raises. Safe: an offline hart holds no references by contract, and an
    /// online hart's state is left alone.
    pub(crate) fn online(&self, hart: usize) -> Result<(), UnknownHart> {
        let seen = self.seen.get(hart).ok_or(UnknownHart(hart))?;
        let generation = self.generation.load(Ordering::SeqCst);
        let _ = seen.0.compare_exchange(OFFLINE, generation, Ordering::SeqCst, Ordering::SeqCst);
        Ok(())
    }

    /// Starts a grace period: returns the tag for a value retired just now.
    fn retire_generation(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Values retired with a tag `<=` this are no longer referenced by any hart.
    fn horizon(&self) -> u64 {
        self.seen.iter().map(|seen| seen.0.load(Ordering::SeqCst)).min().unwrap_or(OFFLINE)
    }
}

/// Retired values whose grace period has ended, to be dropped by the caller (outside its
/// own locks: dropping them may run handlers' destructors).
#[must_use = "dropping the garbage is what frees it; do it outside locks"]
pub(crate) struct Garbage<T>(#[allow(dead_code, reason = "held only to be dropped")] Vec<Box<T>>);

#[cfg(test)]
impl<T> Garbage<T> {
    /// How many values there are.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A value read without locks and replaced by writers; see the module docs.
pub(crate) struct Rcu<T> {
    current: AtomicPtr<T>,
    /// Retired values and their generation tags; also the writers' lock.
    retired: spin::Mutex<Vec<(NonNull<T>, u64)>>,
    /// The dispatcher's grace-period state.
    harts: alloc::sync::Arc<Harts>,
    /// `Rcu<T>` owns `T`s (for drop checking and auto traits).
    _owns: PhantomData<Box<T>>,
}

// SAFETY: readers on any hart get `&T` (needs `T: Sync`); writers and reclaimers on any
// hart move and drop `T` (needs `T: Send`). The raw pointers are owned boxes.
unsafe impl<T: Send + Sync> Sync for Rcu<T> {}
// SAFETY: moving the `Rcu` to another hart moves ownership of the boxes of `T` it holds
// (needs `T: Send`), and the moved `Rcu` still hands out `&T` to readers (needs `T: Sync`).
unsafe impl<T: Send + Sync> Send for Rcu<T> {}

impl<T> Rcu<T> {
    /// A cell holding `initial`, reclaiming according to `harts`.
    pub(crate) fn new(initial: T, harts: alloc::sync::Arc<Harts>) -> Self {
        Rcu {
            current: AtomicPtr::new(Box::into_raw(Box::new(initial))),
            retired: spin::Mutex::new(Vec::new()),
            harts,
            _owns: PhantomData,
        }
    }

    /// The current value. Free: one acquire load.
    ///
    /// The reference must not be held across a quiescent state of the calling hart; the
    /// crate only reads inside a raise, and `Harts::quiescent` forbids reporting there.
    #[inline(always)]
    pub(crate) fn read(&self) -> &T {
        // Acquire pairs with the Release half of the writer's swap: the value's contents
        // are visible once we see its pointer.
        let current = self.current.load(Ordering::Acquire);
        // `current` came from `Box::into_raw` (`new`/`publish`); `self` owns it until replaced.
        // SAFETY: only `collect` (or `drop`: `&mut self`) frees it, once swapped out and every online
        // hart reported a quiescent state tagged at/after its retirement; this hart is online (offline
        // harts must not raise) and reports none while this reference lives (`Harts::quiescent`).
        unsafe { &*current }
    }

    /// Makes `value` current and retires the previous value. Returns the values that
    /// became free, for the caller to drop outside its own locks.
    pub(crate) fn publish(&self, value: T) -> Garbage<T> {
        let mut retired = self.retired.lock();
        let new = Box::into_raw(Box::new(value));
        // AcqRel: Release publishes the new value's contents to readers.
        let old = self.current.swap(new, Ordering::AcqRel);
        let tag = self.harts.retire_generation();
        if let Some(old) = NonNull::new(old) {
            retired.push((old, tag));
        }
        self.collect(&mut retired)
    }

    /// Returns the retired values that became free, for the caller to drop. Nothing when
    /// a writer holds the list right now: reclaiming is opportunistic (the next call, or
    /// the writer's own `publish`, collects), and waiting here could wait for a writer that
    /// the waiting caller keeps from running (a strand switched out while it publishes).
    pub(crate) fn reclaim(&self) -> Garbage<T> {
        match self.retired.try_lock() {
            Some(mut retired) => self.collect(&mut retired),
            None => Garbage(Vec::new()),
        }
    }

    /// How many retired values are still waiting for a grace period.
    pub(crate) fn retired_count(&self) -> usize {
        self.retired.lock().len()
    }

    /// Takes the retired values whose grace period has ended out of the list.
    fn collect(&self, retired: &mut Vec<(NonNull<T>, u64)>) -> Garbage<T> {
        if retired.is_empty() {
            return Garbage(Vec::new());
        }
        let horizon = self.harts.horizon();
        let mut free = Vec::new();
        retired.retain(|&(value, tag)| {
            if tag > horizon {
                return true;
            }
            // `value` is from `Box::into_raw`; `horizon`'s SeqCst load follows the harts' SeqCst stores.
            // SAFETY: `value` left `current` before `tag` was taken, so no reader can load it; every
            // online hart reported a quiescent state >= `tag` and offline harts hold no reference
            // (contract), so none remains; it is listed once and removed here, so it is freed once.
            free.push(unsafe { Box::from_raw(value.as_ptr()) });
            false
        });
        Garbage(free)
    }
}

impl<T> Drop for Rcu<T> {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        // SAFETY: `&mut self` means no reader holds a reference from `read` (they borrow
        // `self`), so the current value and every retired one can be freed; each came
        // from `Box::into_raw` and is owned by this cell alone.
        unsafe {
            drop(Box::from_raw(current));
            for (value, _) in self.retired.get_mut().drain(..) {
                drop(Box::from_raw(value.as_ptr()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::sync::Arc;
    use std::sync::atomic::AtomicBool;

    fn harts(count: usize) -> Arc<Harts> {
        Arc::new(Harts::new(count))
    }

    #[test]
    fn reclaim_while_a_writer_holds_the_list_returns_at_once() {
        let rcu = Rcu::new(1u64, harts(1));
        drop(rcu.publish(2));
        let held = rcu.retired.lock();
        // A writer switched out here must not make a reclaimer wait for it.
        assert!(rcu.reclaim().is_empty());
        drop(held);
        assert_eq!(*rcu.read(), 2);
    }

    #[test]
    fn readers_see_the_latest_value() {
        let rcu = Rcu::new(1u64, harts(1));
        assert_eq!(*rcu.read(), 1);
        drop(rcu.publish(2));
        assert_eq!(*rcu.read(), 2);
    }

    #[test]
    fn retired_values_wait_for_every_online_hart() {
        let marker = Arc::new(());
        let harts = harts(2);
        let rcu = Rcu::new(Some(marker.clone()), harts.clone());
        assert!(rcu.publish(None).is_empty(), "no hart has reported yet");
        // SAFETY: this test holds no reference from `read`.
        unsafe { harts.quiescent(0) }.unwrap();
        assert!(rcu.reclaim().is_empty(), "hart 1 has not reported");
        assert_eq!(Arc::strong_count(&marker), 2);
        // SAFETY: this test holds no reference from `read`.
        unsafe { harts.quiescent(1) }.unwrap();
        assert_eq!(rcu.reclaim().len(), 1);
        assert_eq!(Arc::strong_count(&marker), 1);
        assert_eq!(rcu.retired_count(), 0);
    }

    #[test]
    fn a_report_before_the_retirement_does_not_count() {
        let harts = harts(1);
        let rcu = Rcu::new(0u64, harts.clone());
        // SAFETY: no reference held.
        unsafe { harts.quiescent(0) }.unwrap();
        assert!(rcu.publish(1).is_empty(), "the report predates the retirement");
        assert_eq!(rcu.retired_count(), 1);
    }

    #[test]
    fn offline_harts_do_not_hold_reclamation_back() {
        let harts = harts(2);
        let rcu = Rcu::new(0u64, harts.clone());
        // SAFETY: hart 1 is not running anything in this test.
        unsafe { harts.offline(1) }.unwrap();
        drop(rcu.publish(1));
        // SAFETY: no reference held.
        unsafe { harts.quiescent(0) }.unwrap();
        assert_eq!(rcu.reclaim().len(), 1);
        harts.online(1).unwrap();
        drop(rcu.publish(2));
        // SAFETY: no reference held.
        unsafe { harts.quiescent(0) }.unwrap();
        assert!(rcu.reclaim().is_empty(), "hart 1 is online again and must report");
        assert_eq!(harts.online(5), Err(UnknownHart(5)));
    }

    #[test]
    fn concurrent_readers_never_see_a_torn_or_freed_value() {
        // Each value is a boxed pair that must stay equal; a use-after-free or a torn
        // write would break the pair. Reader `i` is hart `i + 1` and reports a quiescent
        // state between reads; the writer is hart 0.
        const READERS: usize = 4;
        let harts = harts(READERS + 1);
        let rcu = Arc::new(Rcu::new(Box::new((0u64, 0u64)), harts.clone()));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..READERS)
            .map(|reader| {
                let (rcu, stop, harts) = (rcu.clone(), stop.clone(), harts.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10 {
                            let value = rcu.read();
                            assert_eq!(value.0, value.1);
                        }
                        // SAFETY: the reference above is dead; this thread is hart reader + 1.
                        unsafe { harts.quiescent(reader + 1) }.unwrap();
                    }
                })
            })
            .collect();
        let mut freed = 0;
        for value in 1..20_000u64 {
            freed += rcu.publish(Box::new((value, value))).len();
            // SAFETY: the writer thread holds no reference.
            unsafe { harts.quiescent(0) }.unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().unwrap();
        }
        for hart in 0..=READERS {
            // SAFETY: every reader thread has finished.
            unsafe { harts.quiescent(hart) }.unwrap();
        }
        freed += rcu.reclaim().len();
        assert_eq!(freed, 19_999, "every retired value is freed exactly once");
        assert_eq!(rcu.retired_count(), 0);
    }
}
