//! A shared borrow lent to other strands for the length of a call: the owner of some
//! state that is mid-operation (`&mut` up its stack) hands out a `&T` while it waits for
//! code that wants to read that state — an event's handlers reading the buffer cache
//! through a kernel function, on this strand or a user-level server's.
//!
//! [`Lent::lend`] publishes the reference, runs the body, and withdraws it; [`Lent::read`]
//! runs a reader on the reference if one is lent now. The reference is only ever used
//! under the lender's spin lock (interrupts off), and `lend` withdraws it under that lock,
//! so no reader still holds it when the borrow ends. Readers should be short: they keep
//! the lender (and every other reader) waiting.

use core::ptr::NonNull;

use crate::arch::csr::without_interrupts;

/// The reference lent now, if any.
struct Slot<T>(Option<NonNull<T>>);

// SAFETY: a `Slot` only carries a pointer made from a `&T` of a `T: Sync`, and it is
// dereferenced only as `&T` (in `Lent::read`, under the lock, while `Lent::lend` still holds
// that borrow): handing such a pointer to another strand is handing it a `&T`, which `Sync`
// allows.
unsafe impl<T: Sync> Send for Slot<T> {}

/// A place where one `&T` at a time can be lent (see the module documentation).
pub struct Lent<T> {
    slot: spin::Mutex<Slot<T>>,
}

impl<T: Sync> Lent<T> {
    /// Nothing lent.
    pub const fn new() -> Lent<T> {
        Lent { slot: spin::Mutex::new(Slot(None)) }
    }

    /// Lends `value` while `body` runs, if nothing is lent now; otherwise runs `body`
    /// without lending (readers keep seeing the other lender's reference). Lends do not
    /// nest or overlap: a caller that wants its readers to see its own value serialises
    /// its lends (the cache events' gate does).
    pub fn lend<R>(&self, value: &T, body: impl FnOnce() -> R) -> R {
        let lent = without_interrupts(|| {
            let mut slot = self.slot.lock();
            let free = slot.0.is_none();
            if free {
                slot.0 = Some(NonNull::from(value));
            }
            free
        });
        if !lent {
            return body();
        }
        /// Withdraws the reference, also if `body` unwinds.
        struct Withdraw<'a, T>(&'a spin::Mutex<Slot<T>>);
        impl<T> Drop for Withdraw<'_, T> {
            fn drop(&mut self) {
                without_interrupts(|| self.0.lock().0 = None);
            }
        }
        let _withdraw = Withdraw(&self.slot);
        body()
    }

    /// Runs `reader` on the reference lent now (`None`: nothing is lent), holding the lock
    /// that [`Lent::lend`] needs to withdraw it, with interrupts off.
    pub fn read<R>(&self, reader: impl FnOnce(Option<&T>) -> R) -> R {
        without_interrupts(|| {
            let slot = self.slot.lock();
            let value = slot.0.map(|pointer| {
                // SAFETY: made from a `&T` by `lend`, which withdraws it under this lock before
                // that borrow ends (alive, no `&mut` meanwhile); we hold the lock until `reader`
                // returns, and the `&T` cannot outlive that call (its lifetime is the guard's).
                unsafe { pointer.as_ref() }
            });
            reader(value)
        })
    }
}

impl<T: Sync> Default for Lent<T> {
    fn default() -> Lent<T> {
        Lent::new()
    }
}
