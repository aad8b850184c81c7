//! A lock whose waiters sleep: for state held across blocking work (a file-system call
//! that waits for the disk), where a spin lock would make every other strand spin for
//! milliseconds.
//!
//! [`SleepLock::lock`] takes the lock or queues the calling strand and blocks it; the
//! holder's guard, when dropped, frees the lock and wakes the oldest waiter, which tries
//! again (a strand that arrives meanwhile may take it first: no hand-over, so no strand
//! holds the lock without running). The data sits in a spin lock that is only ever taken
//! by the sleep lock's holder, so it is never contended and needs no `unsafe`.
//!
//! Thread context only (it blocks); never inside a no-preemption section or an event
//! handler.

use alloc::collections::VecDeque;
use alloc::sync::Arc;

use super::Strand;
use crate::arch::csr::without_interrupts;

/// Whether the lock is held, and who waits for it.
struct Gate {
    held: bool,
    waiters: VecDeque<Arc<Strand>>,
}

/// A mutual-exclusion lock for thread context whose waiters block instead of spinning.
pub struct SleepLock<T> {
    gate: spin::Mutex<Gate>,
    data: spin::Mutex<T>,
}

/// Access to a [`SleepLock`]'s data; frees the lock when dropped.
pub struct SleepGuard<'a, T> {
    lock: &'a SleepLock<T>,
    data: Option<spin::MutexGuard<'a, T>>,
}

impl<T> SleepLock<T> {
    /// A free lock holding `value`.
    pub const fn new(value: T) -> SleepLock<T> {
        SleepLock { gate: spin::Mutex::new(Gate { held: false, waiters: VecDeque::new() }), data: spin::Mutex::new(value) }
    }

    /// Takes the lock, blocking the calling strand while another holds it.
    ///
    /// A waiter is queued once: a strand woken for another reason while it waits (a
    /// pending unblock: a lock grant, a disk completion or a tick meant for an earlier
    /// wait) tries again and keeps its place instead of queueing a second time, and takes
    /// its entry out when it gets the lock. A stale entry would otherwise be the one a
    /// release wakes, and the strand really waiting behind it would sleep for ever (the
    /// `policies` benchmark's lock runs stalled so, twice in about 180 runs).
    pub fn lock(&self) -> SleepGuard<'_, T> {
        let me = super::current();
        loop {
            let taken = without_interrupts(|| {
                let mut gate = self.gate.lock();
                let queued = gate.waiters.iter().position(|waiter| Arc::ptr_eq(waiter, &me));
                if gate.held {
                    if queued.is_none() {
                        gate.waiters.push_back(me.clone());
                    }
                    false
                } else {
                    gate.held = true;
                    if let Some(index) = queued {
                        gate.waiters.remove(index);
                    }
                    true
                }
            });
            if taken {
                break;
            }
            super::block_current();
        }
        SleepGuard { lock: self, data: Some(self.data.lock()) }
    }

    /// Takes the lock if it is free (`None`: another strand holds it). Never blocks, so
    /// it may be called where [`SleepLock::lock`] may not (an event handler).
    pub fn try_lock(&self) -> Option<SleepGuard<'_, T>> {
        let taken = without_interrupts(|| {
            let mut gate = self.gate.lock();
            !core::mem::replace(&mut gate.held, true)
        });
        taken.then(|| SleepGuard { lock: self, data: Some(self.data.lock()) })
    }

    /// Whether a strand holds the lock now (introspection; may change at once).
    pub fn is_locked(&self) -> bool {
        without_interrupts(|| self.gate.lock().held)
    }
}

impl<T> core::ops::Deref for SleepGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.data.as_ref().expect("a guard holds its data until dropped")
    }
}

impl<T> core::ops::DerefMut for SleepGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.data.as_mut().expect("a guard holds its data until dropped")
    }
}

impl<T> Drop for SleepGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.data.take());
        let next = without_interrupts(|| {
            let mut gate = self.lock.gate.lock();
            gate.held = false;
            gate.waiters.pop_front()
        });
        if let Some(strand) = next {
            super::unblock(&strand);
        }
    }
}
