//! `spindle-service-locks`: the policy half of the byte-range lock service — POSIX-style
//! lock tables per file, the waiting queue, the lock-granting policy point (`lock.Grant`)
//! with its reference policies and the checks on an answer, and the counters.
//!
//! A core service is split in two (docs/architecture.md): this crate holds the decisions —
//! plain data and rules, `no_std`, no `unsafe`, tested on the host — and the kernel wires
//! it to processes and to the `lock.Grant` event, through which an extension chooses the
//! order in which waiting requests are granted. The parts:
//!
//! - [`range`]: byte ranges `[start, end)` (checked when made: empty or overflowing ranges
//!   are errors), lock kinds, and the conflict rule;
//! - [`file`]: one file's held locks and waiting requests, with the POSIX same-owner
//!   semantics (a re-lock replaces, splits and merges the owner's own locks);
//! - [`policy`]: the policy point — the question ([`GrantQuery`], [`Candidate`]s), the
//!   answer ([`GrantChoice`]), the [`GrantPolicy`] trait, the check of an answer
//!   ([`validate`]) and the reference policies FRP (reader's priority, the default) and
//!   FIFO ([`choose`]);
//! - [`table`]: [`LockTable`], all files' locks keyed by [`FileId`], the grant loop, the
//!   bounded deadlock check and the counters.
//!
//! The policy matters under contention: Seltzer et al. (1995, §4.4) measured that BSD/OS's
//! reader's priority lets a steady stream of readers starve writers, while strict FIFO
//! makes reads and writes take about as long. The simulation among the tests reproduces
//! their experiment (`cargo test -p spindle-service-locks -- --nocapture simulation`):
//! 4 processes lock byte 0, read a record (12 ms on one disk), compute 15 ms (one CPU) and
//! unlock. At 5 % writes FRP's mean read takes 31.7 ms and its mean write 629 ms (the paper:
//! 105 and 667 ms); FIFO's take 64 and 75 ms; at every mix from 5 to 50 % FIFO's writes take
//! 1.07–1.18× its reads, and both policies complete the same operations per second.
//!
//! Known limitations: the deadlock check follows held locks only (a cycle through FIFO's
//! grant order is not detected, see [`table`]); a grant hands the lock over at once, so
//! the wake-up race of BSD/OS (the releasing process re-locking before the woken writer
//! runs) is not modelled.
//!
//! ```
//! use spindle_service_locks::{LockConfig, LockKind, LockTable, Policy, Range, Requested};
//!
//! let mut table = LockTable::new(LockConfig::DEFAULT).unwrap();
//! let byte0 = Range::with_length(0, 1).unwrap();
//! let mut fifo = Policy::Fifo;
//! // Owner 1 reads; owner 2's write waits; owner 3's read queues behind it under FIFO.
//! assert!(matches!(table.request(7, 1, LockKind::Read, byte0, true, 0, &mut fifo).result, Ok(Requested::Granted(_))));
//! assert!(matches!(table.request(7, 2, LockKind::Write, byte0, true, 1, &mut fifo).result, Ok(Requested::Queued { .. })));
//! assert!(matches!(table.request(7, 3, LockKind::Read, byte0, true, 2, &mut fifo).result, Ok(Requested::Queued { .. })));
//! // Owner 1 unlocks: the writer gets the lock, the reader still waits.
//! let granted = table.unlock(7, 1, byte0, 10, &mut fifo).unwrap();
//! assert_eq!((granted.len(), granted[0].owner, granted[0].waited_ns), (1, 2, 9));
//! ```

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod file;
pub mod policy;
pub mod range;
pub mod table;

#[cfg(test)]
mod simulation;
#[cfg(test)]
mod tests;

pub use file::{FileLocks, HeldLock, WaitingRequest};
pub use policy::{
    Candidate, FileId, GrantChoice, GrantPolicy, GrantQuery, Policy, Rejection, RequestId, Trigger, UnknownPolicy, choose, validate,
};
pub use range::{LockKind, OwnerId, Range, RangeError, conflicts};
pub use table::{
    CancelError, ConfigError, Decision, Grant, KindCounters, LockConfig, LockCounters, LockTable, MAX_DEADLOCK_SEARCH, MAX_LOCKS,
    MAX_QUEUE_CAPACITY, Released, RequestError, RequestOutcome, Requested, UnlockError,
};
