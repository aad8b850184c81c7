//! Byte-range locks (POSIX-style, Seltzer '95 §4.4) on files of the file system:
//! `spindle-service-locks`'s table, its granting order decided by `lock.Grant`
//! ([`super::lock_events::EventGrantPolicy`]: an extension such as `lockgrant_fifo`, or the
//! default FRP — readers first, writers FIFO among themselves, as the paper describes
//! BSD/OS).
//!
//! A request that cannot be granted waits (if the caller asked to): its strand sleeps until
//! a later unlock, exit or cancel grants it — the call that grants wakes it at once — or
//! until its process is killed (the request is then withdrawn). Owners are process ids; a
//! process's locks and waiting requests go when it ends ([`release_owner`]).
//!
//! The table sits behind a [`SleepLock`]: the grant loop raises `lock.Grant`, whose
//! handlers may run at user level, so it runs in thread context without spin locks held.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_service_locks::{Grant, LockConfig, LockKind, LockTable, Range, RequestError, RequestId, Requested};

use super::lock_events::EventGrantPolicy;
use crate::arch::csr::without_interrupts;
use crate::sched::{SleepLock, Strand};

/// The table (created at first use).
static TABLE: SleepLock<Option<LockTable>> = SleepLock::new(None);

/// Waiting requests: their strand, and whether they have been granted.
static WAITERS: spin::Mutex<BTreeMap<RequestId, (Arc<Strand>, bool)>> = spin::Mutex::new(BTreeMap::new());

/// Why a lock call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockError {
    /// The range is empty or overflows.
    BadRange,
    /// It cannot be granted now and the caller would not wait.
    WouldBlock,
    /// Waiting would deadlock (a wait-for cycle between owners).
    Deadlock,
    /// The file's queue or the table is full.
    TooMany,
    /// The caller was killed while it waited (the request is withdrawn).
    Interrupted,
}

impl LockError {
    /// The system-call error for it (`None` for [`LockError::Interrupted`]: the process
    /// ends).
    pub fn code(self) -> Option<spindle_abi::syscall::Error> {
        use spindle_abi::syscall::Error;
        match self {
            LockError::BadRange => Some(Error::BadArgument),
            LockError::WouldBlock => Some(Error::WouldBlock),
            LockError::Deadlock => Some(Error::Deadlock),
            LockError::TooMany => Some(Error::TooMany),
            LockError::Interrupted => None,
        }
    }
}

/// The byte range `[start, start + length)`, or to the end of the file for length 0.
pub fn range(start: u64, length: u64) -> Result<Range, LockError> {
    if length == 0 { Range::to_end(start) } else { Range::with_length(start, length) }.map_err(|_| LockError::BadRange)
}

fn with_table<T>(body: impl FnOnce(&mut LockTable, &mut EventGrantPolicy) -> T) -> T {
    TABLE_USED.store(1, core::sync::atomic::Ordering::Relaxed);
    let mut table = TABLE.lock();
    let table = table.get_or_insert_with(|| LockTable::new(LockConfig::default()).expect("the default lock configuration is valid"));
    let mut policy = EventGrantPolicy::new();
    body(table, &mut policy)
}

/// Marks each granted request and wakes its strand.
fn wake(granted: &[Grant]) {
    for grant in granted {
        let strand = without_interrupts(|| {
            let mut waiters = WAITERS.lock();
            let entry = waiters.get_mut(&grant.request)?;
            entry.1 = true;
            Some(entry.0.clone())
        });
        if let Some(strand) = strand {
            crate::sched::unblock(&strand);
        }
    }
}

/// Locks `range` of `file` for `owner` (a process id), as `kind`; waits if `wait` and it
/// cannot be granted at once, until granted or `killed()` says the caller is being killed.
pub fn lock(file: u32, owner: u32, kind: LockKind, range: Range, wait: bool, killed: &dyn Fn() -> bool) -> Result<(), LockError> {
    let me = crate::sched::current();
    // Registered as a waiter under the table's lock, so a grant made by another strand
    // between the table call and the wait below is not lost.
    let outcome = with_table(|table, policy| {
        let outcome = table.request(file, owner, kind, range, wait, crate::time::now_ns(), policy);
        if let Ok(Requested::Queued { request }) = outcome.result {
            without_interrupts(|| WAITERS.lock().insert(request, (me.clone(), false)));
        }
        outcome
    });
    wake(&outcome.granted);
    let request = match outcome.result {
        Ok(Requested::Granted(_)) => return Ok(()),
        Ok(Requested::Queued { request }) => request,
        Err(RequestError::WouldBlock) => return Err(LockError::WouldBlock),
        Err(RequestError::Deadlock { .. }) => return Err(LockError::Deadlock),
        Err(RequestError::QueueFull { .. } | RequestError::TooManyLocks { .. }) => return Err(LockError::TooMany),
    };
    loop {
        let granted = without_interrupts(|| WAITERS.lock().get(&request).is_some_and(|entry| entry.1));
        if granted {
            without_interrupts(|| WAITERS.lock().remove(&request));
            return Ok(());
        }
        if killed() {
            let cancelled = with_table(|table, policy| table.cancel(request, crate::time::now_ns(), policy));
            let was_granted = without_interrupts(|| WAITERS.lock().remove(&request)).is_some_and(|entry| entry.1);
            if let Ok(granted) = cancelled {
                wake(&granted);
            }
            if was_granted {
                // Granted just before the kill: the process's exit releases it.
                return Ok(());
            }
            return Err(LockError::Interrupted);
        }
        // Woken by the grant at once; the tick bounds how long a kill goes unnoticed.
        crate::sched::sleep_ticks(1);
    }
}

/// Unlocks `range` of `file` for `owner` (what is not held is not an error); grants and
/// wakes what it can.
pub fn unlock(file: u32, owner: u32, range: Range) -> Result<(), LockError> {
    let result = with_table(|table, policy| table.unlock(file, owner, range, crate::time::now_ns(), policy));
    match result {
        Ok(granted) => {
            wake(&granted);
            Ok(())
        }
        Err(_) => Err(LockError::TooMany),
    }
}

/// Drops every lock and waiting request of `owner` (its process ended).
pub fn release_owner(owner: u32) {
    if TABLE_USED.load(core::sync::atomic::Ordering::Relaxed) == 0 {
        return;
    }
    let released = with_table(|table, policy| table.release_owner(owner, crate::time::now_ns(), policy));
    without_interrupts(|| {
        let mut waiters = WAITERS.lock();
        for request in &released.cancelled {
            waiters.remove(request);
        }
    });
    wake(&released.granted);
}

/// Whether any lock call was made since boot (a process exit then need not take the
/// table's lock).
static TABLE_USED: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Held locks and waiting requests of `file`, as text lines (`held OWNER KIND START END`,
/// `waiting REQUEST OWNER KIND START END`), for introspection.
pub fn describe(file: u32) -> Vec<alloc::string::String> {
    with_table(|table, _| {
        let mut lines: Vec<alloc::string::String> = table
            .holders(file)
            .iter()
            .map(|held| alloc::format!("held {} {} {} {}", held.owner, held.kind.name(), held.range.start(), held.range.end()))
            .collect();
        lines.extend(table.waiting(file).iter().map(|waiting| {
            alloc::format!("waiting {} {} {} {} {}", waiting.id, waiting.owner, waiting.kind.name(), waiting.range.start(), waiting.range.end())
        }));
        lines
    })
}
