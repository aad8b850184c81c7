//! `Publisher<T>`: a value that readers pin without locks and writers replace atomically.
//!
//! This is the dispatcher's RCU-style snapshot cell, and the only `unsafe` code in the crate.
//!
//! Design ("tenure counting"): the value lives in one of [`SLOT_COUNT`] slots. One atomic
//! word, `state`, holds the index of the current slot in its low [`INDEX_BITS`] bits and,
//! above them, how many readers have pinned the current slot since it became current.
//! A reader pins with a single `fetch_add` on `state`: the same atomic read-modify-write
//! both tells it which slot is current and registers it with that slot, so no writer can
//! miss it. Unpinning adds one to the slot's own `released` counter. A writer fills a free
//! slot and `swap`s `state` to point at it with a zero count; the old word's count is the
//! number of readers the old slot ever had, so the old slot is free again once `released`
//! reaches that number. Writers never wait for readers and readers never wait at all.
//!
//! Cost on the read path: one atomic add to pin, one to unpin, no loads of shared
//! pointers. Counts wrap: the state count has 60 bits and is compared modulo 2^60, which is
//! exact while fewer than 2^60 readers are pinned at once.
//!
//! Limitations: at most `SLOT_COUNT - 1` older values can be pinned at the same time;
//! a write that finds no free slot fails with [`Busy`] instead of waiting (waiting could
//! deadlock when the writer is itself a pinned reader). Retired values are dropped by the
//! next write or by [`Publisher::reclaim`], never by a reader, so that raising an event
//! never frees memory.

use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ops::Deref;
use core::sync::atomic::{AtomicU64, Ordering};

/// Number of slots; a power of two so that the index fits [`INDEX_BITS`] bits.
pub const SLOT_COUNT: usize = 16;
/// Bits of `state` that hold the current slot's index.
const INDEX_BITS: u32 = 4;
/// Mask selecting the slot index from `state`.
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// What one reader adds to `state` when it pins.
const ONE_READER: u64 = 1 << INDEX_BITS;
/// Reader counts are compared modulo 2^(64 - INDEX_BITS), the width of the count in `state`.
const COUNT_MASK: u64 = u64::MAX >> INDEX_BITS;

const _: () = assert!(SLOT_COUNT == 1 << INDEX_BITS);

/// A write found every non-current slot still pinned by readers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy;

/// One slot: a value and the number of readers of its current tenure that have unpinned.
struct Slot<T> {
    value: UnsafeCell<T>,
    released: AtomicU64,
}

/// Writer-side bookkeeping, guarded by `Publisher::writer`.
struct Book {
    /// The slot `state` points at.
    current: usize,
    /// For each retired slot, the number of readers it had in its tenure.
    retired: [Option<u64>; SLOT_COUNT],
    /// Readers of all past tenures (plus the current count gives all pins ever).
    retired_pins: u64,
}

/// A value readers pin lock-free and writers replace atomically; see the module docs.
pub struct Publisher<T> {
    state: AtomicU64,
    slots: [Slot<T>; SLOT_COUNT],
    writer: spin::Mutex<Book>,
}

// SAFETY: `Publisher` hands out `&T` to many threads at once (needs `T: Sync`) and drops or
// replaces `T` on whichever thread writes (needs `T: Send`). Every access to a slot's
// `UnsafeCell` follows the protocol documented on `read` and `write_slot`: shared reads
// only while pinned, exclusive writes only under `writer` to a slot with no pinned reader.
unsafe impl<T: Send + Sync> Sync for Publisher<T> {}

/// A pinned value: dereferences to the value that was current when it was pinned.
pub struct Pinned<'publisher, T> {
    publisher: &'publisher Publisher<T>,
    index: usize,
}

impl<T: Default> Publisher<T> {
    /// A publisher whose current value is `initial`.
    pub fn new(initial: T) -> Self {
        let slots = core::array::from_fn(|_| Slot {
            value: UnsafeCell::new(T::default()),
            released: AtomicU64::new(0),
        });
        let publisher = Publisher {
            state: AtomicU64::new(0),
            slots,
            writer: spin::Mutex::new(Book { current: 0, retired: [None; SLOT_COUNT], retired_pins: 0 }),
        };
        // No reader can exist yet, so this cannot fail; the initial value goes to slot 1.
        let _ = publisher.publish(initial);
        publisher
    }

    /// Pins the current value. Lock-free: one atomic add now, one when the pin drops.
    #[inline]
    pub fn read(&self) -> Pinned<'_, T> {
        // Acquire pairs with the Release half of the writer's swap: the slot's contents
        // (written before the swap) are visible once we have seen its index.
        let state = self.state.fetch_add(ONE_READER, Ordering::Acquire);
        Pinned { publisher: self, index: (state & INDEX_MASK) as usize }
    }

    /// Makes `value` current. Readers already pinned keep the old value; readers pinning
    /// after this returns see `value`. Returns the values this call retired and found no
    /// longer pinned, for the caller to drop (outside any lock of its own, preferably).
    ///
    /// Errors: [`Busy`] if every other slot is still pinned; `value` is then dropped.
    pub fn publish(&self, value: T) -> Result<Vec<T>, Busy> {
        let mut book = self.writer.lock();
        let mut garbage = self.collect(&mut book);
        let Some(free) = (0..SLOT_COUNT)
            .find(|&index| index != book.current && book.retired[index].is_none())
        else {
            return Err(Busy);
        };
        self.write_slot(&book, free, value);
        self.slots[free].released.store(0, Ordering::Relaxed);
        // AcqRel: Release publishes the slot written above; Acquire orders our later reads
        // of `released` counters after the old tenure's pins.
        let old = self.state.swap(free as u64, Ordering::AcqRel);
        let old_index = (old & INDEX_MASK) as usize;
        let old_pins = old >> INDEX_BITS;
        book.retired[old_index] = Some(old_pins);
        book.retired_pins = book.retired_pins.wrapping_add(old_pins);
        book.current = free;
        garbage.extend(self.collect(&mut book));
        Ok(garbage)
    }

    /// Returns the retired values that are no longer pinned, for the caller to drop.
    pub fn reclaim(&self) -> Vec<T> {
        let mut book = self.writer.lock();
        self.collect(&mut book)
    }

    /// How many times the value has been pinned since the publisher was made.
    pub fn total_pins(&self) -> u64 {
        let book = self.writer.lock();
        let current = self.state.load(Ordering::Relaxed) >> INDEX_BITS;
        book.retired_pins.wrapping_add(current)
    }

    /// How many retired values are still waiting for their readers.
    pub fn retired_count(&self) -> usize {
        self.writer.lock().retired.iter().filter(|slot| slot.is_some()).count()
    }

    /// Moves the values of retired slots whose readers have all unpinned out of the slots.
    fn collect(&self, book: &mut Book) -> Vec<T> {
        let mut garbage = Vec::new();
        for index in 0..SLOT_COUNT {
            let Some(pins) = book.retired[index] else { continue };
            // Acquire pairs with each reader's Release in `Pinned::drop`: once we see
            // every unpin, everything those readers did with the value happened before.
            let released = self.slots[index].released.load(Ordering::Acquire);
            if released.wrapping_sub(pins) & COUNT_MASK == 0 {
                book.retired[index] = None;
                garbage.push(self.take_slot(book, index));
            }
        }
        garbage
    }

    /// Replaces the value of slot `index`, which must be free (checked by the callers).
    fn write_slot(&self, book: &Book, index: usize, value: T) {
        debug_assert!(index != book.current && book.retired[index].is_none());
        // SAFETY: exclusive access to the slot's value. (1) We hold `writer` (witnessed by
        // `book`), so no other writer touches any slot. (2) The slot is not current
        // (`index != book.current`), so no reader can newly pin it: readers pin only the
        // slot named by `state`, and `state` names `book.current`. (3) It is not retired,
        // meaning `collect` saw every reader of its last tenure unpin (Acquire) or it was
        // never published; so no `&T` into it exists.
        unsafe { *self.slots[index].value.get() = value };
    }

    /// Takes the value out of a slot `collect` has just found unpinned, leaving a default.
    fn take_slot(&self, book: &Book, index: usize) -> T {
        debug_assert!(index != book.current && book.retired[index].is_none());
        // SAFETY: same three conditions as in `write_slot`: we hold `writer`, the slot is
        // not current, and `collect` observed (Acquire) that all its readers unpinned.
        unsafe { core::mem::take(&mut *self.slots[index].value.get()) }
    }
}

impl<T> Deref for Pinned<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: shared access only. This pin was registered by the `fetch_add` in `read`
        // on the tenure that made `index` current, so the writer counts it in that
        // tenure's pins and will not overwrite the slot (`write_slot`, `take_slot`) until
        // `released` has reached that count, which happens only after `drop` below. The
        // writer's Release swap and our Acquire add make the written value visible.
        unsafe { &*self.publisher.slots[self.index].value.get() }
    }
}

impl<T> Drop for Pinned<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: our reads of the value happen before the writer reuses the slot.
        self.publisher.slots[self.index].released.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn readers_see_latest_value_and_old_pins_keep_theirs() {
        let publisher = Publisher::new(1u64);
        let first = publisher.read();
        assert_eq!(*first, 1);
        publisher.publish(2).unwrap();
        let second = publisher.read();
        assert_eq!((*first, *second), (1, 2));
        assert_eq!(publisher.retired_count(), 1, "the pinned value must not be reclaimed");
        drop(first);
        assert_eq!(publisher.reclaim().len(), 1);
        assert_eq!(publisher.retired_count(), 0);
        drop(second);
        assert_eq!(publisher.total_pins(), 2);
    }

    #[test]
    fn retired_values_are_dropped_when_unpinned() {
        let marker = Arc::new(());
        let publisher = Publisher::new(Some(marker.clone()));
        assert_eq!(Arc::strong_count(&marker), 2);
        let garbage = publisher.publish(None).unwrap();
        drop(garbage);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn full_publisher_reports_busy() {
        let publisher = Publisher::new(0usize);
        let mut pins = Vec::new();
        for value in 1..SLOT_COUNT {
            pins.push(publisher.read());
            publisher.publish(value).unwrap();
        }
        pins.push(publisher.read());
        assert_eq!(publisher.publish(99).unwrap_err(), Busy);
        pins.remove(0);
        assert!(publisher.publish(100).is_ok(), "an unpinned slot is reusable");
        assert_eq!(*publisher.read(), 100);
    }

    #[test]
    fn concurrent_readers_never_see_a_torn_or_freed_value() {
        // Each value is a boxed pair that must stay equal; a use-after-free or a torn
        // write would break the pair (and Miri/ASan would flag it).
        let publisher = Arc::new(Publisher::new(Box::new((0u64, 0u64))));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (publisher, stop) = (publisher.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let pinned = publisher.read();
                        assert_eq!(pinned.0, pinned.1);
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for value in 1..20_000u64 {
            while publisher.publish(Box::new((value, value))).is_err() {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let reads: u64 = readers.into_iter().map(|reader| reader.join().unwrap()).sum();
        drop(publisher.reclaim());
        assert_eq!(publisher.retired_count(), 0);
        assert_eq!(publisher.total_pins(), reads);
    }
}
