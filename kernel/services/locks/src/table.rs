//! The lock table: every file's locks and waiting requests, the grant loop that asks the
//! policy, the bounded deadlock check, and the counters.
//!
//! # A request's life
//!
//! [`LockTable::request`] (`F_SETLK` with `wait == false`, `F_SETLKW` with `wait == true`):
//!
//! 1. if nobody waits on the file and the request is compatible with every lock held, it
//!    is granted at once without asking the policy ([`Decision::Immediate`]);
//! 2. otherwise it joins the file's waiting queue and the **grant loop** runs
//!    ([`Trigger::Arrival`]): the table lists the waiting requests compatible with the
//!    locks held (the candidates — the arrival among them if compatible), asks the policy,
//!    checks the answer ([`validate`]), grants the chosen request, and repeats until the
//!    policy declines or nothing is grantable. So whether a compatible arrival overtakes
//!    waiting writers is the policy's decision: FRP grants it at once, FIFO leaves it
//!    behind the earlier waiter;
//! 3. if the arrival is still waiting after the loop it is refused and leaves the queue
//!    when: its grant would exceed the table's lock limit ([`RequestError::TooManyLocks`]),
//!    the caller would not wait ([`RequestError::WouldBlock`]), the file's queue is over
//!    its capacity ([`RequestError::QueueFull`]), or waiting would close a wait-for cycle
//!    ([`RequestError::Deadlock`]). Else it is [`Requested::Queued`].
//!
//! Releasing locks ([`LockTable::unlock`], [`LockTable::release_owner`]) and withdrawing a
//! waiting request ([`LockTable::cancel`]) run the grant loop on the file too. Every call
//! that can grant waiting requests returns them ([`Grant`]): the kernel wakes their owners.
//! A grant hands the lock over directly; nobody can slip in between the release and the
//! waiter taking it.
//!
//! A rejected answer is counted ([`LockCounters::rejections`], [`LockTable::last_rejection`])
//! and the configured default policy answers instead ([`Decision::Default`]).
//!
//! # Deadlock check
//!
//! Before a request is left waiting, the table follows wait-for edges between owners: a
//! waiting request waits for the owners of the held locks it conflicts with (on its file).
//! If the owners the new request waits for lead, through other owners' waiting requests on
//! any file, back to its own owner, it is refused. The search visits at most
//! [`LockConfig::deadlock_search`] owners; a longer search gives up, reports no deadlock,
//! and is counted. Limitation: a request that conflicts with no held lock but waits only
//! because of the grant order (FIFO behind an earlier waiter) has no edge, so a cycle
//! through the grant order is not detected (POSIX systems check held locks only too).
//!
//! # Bounds
//!
//! Each file's queue holds at most [`LockConfig::queue_capacity`] requests, the table at
//! most [`LockConfig::max_locks`] held locks (after merging; a grant or an unlock that
//! would split past the limit is refused — a waiting request waits until it fits). A file
//! with nothing held and nobody waiting is forgotten. After every call, a file with
//! waiting requests has at least one lock held (the policy may not decline on an idle
//! file, [`Rejection::DeclinedWhileIdle`]) unless the lock limit keeps its candidates
//! out, so memory is bounded by the lock limit times the queue capacity.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use crate::file::{FileLocks, HeldLock, WaitingRequest};
use crate::policy::{Candidate, FileId, GrantPolicy, GrantQuery, Policy, Rejection, RequestId, Trigger, choose, validate};
use crate::range::{LockKind, OwnerId, Range, conflicts};

/// The largest per-file queue capacity.
pub const MAX_QUEUE_CAPACITY: usize = 1024;

/// The largest lock limit.
pub const MAX_LOCKS: usize = 1 << 20;

/// The largest deadlock search (owners visited).
pub const MAX_DEADLOCK_SEARCH: usize = 4096;

/// How a [`LockTable`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockConfig {
    /// Most requests waiting on one file, 1 to [`MAX_QUEUE_CAPACITY`].
    pub queue_capacity: usize,
    /// Most locks held in the table (after merging), 1 to [`MAX_LOCKS`].
    pub max_locks: usize,
    /// The policy that answers when the policy's answer is rejected.
    pub default_policy: Policy,
    /// Most owners the deadlock check visits, 0 (no check) to [`MAX_DEADLOCK_SEARCH`].
    pub deadlock_search: usize,
}

impl LockConfig {
    /// 64 waiters per file, 4096 locks, FRP, a deadlock search of 64 owners.
    pub const DEFAULT: LockConfig = LockConfig { queue_capacity: 64, max_locks: 4096, default_policy: Policy::Frp, deadlock_search: 64 };
}

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig::DEFAULT
    }
}

/// A [`LockConfig`] out of bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The queue capacity is 0 or above [`MAX_QUEUE_CAPACITY`].
    QueueCapacity {
        /// The capacity asked for.
        capacity: usize,
    },
    /// The lock limit is 0 or above [`MAX_LOCKS`].
    MaxLocks {
        /// The limit asked for.
        limit: usize,
    },
    /// The deadlock search is above [`MAX_DEADLOCK_SEARCH`].
    DeadlockSearch {
        /// The search asked for.
        owners: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::QueueCapacity { capacity } => {
                write!(formatter, "lock queue capacity {capacity} is not between 1 and {MAX_QUEUE_CAPACITY}")
            }
            ConfigError::MaxLocks { limit } => write!(formatter, "lock limit {limit} is not between 1 and {MAX_LOCKS}"),
            ConfigError::DeadlockSearch { owners } => {
                write!(formatter, "deadlock search of {owners} owners is above {MAX_DEADLOCK_SEARCH}")
            }
        }
    }
}

impl core::error::Error for ConfigError {}

/// Why a request was granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// On arrival, with nobody waiting on the file: the policy was not asked.
    Immediate,
    /// The policy's (valid) answer.
    Answer,
    /// The policy's answer was rejected and the default policy chose.
    Default {
        /// Why the answer was rejected.
        rejection: Rejection,
    },
}

/// A request granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The file.
    pub file: FileId,
    /// The request.
    pub request: RequestId,
    /// Its owner (to wake).
    pub owner: OwnerId,
    /// Read or write.
    pub kind: LockKind,
    /// The bytes.
    pub range: Range,
    /// How long it waited, ns (0 when granted on arrival).
    pub waited_ns: u64,
    /// Why it was granted.
    pub decision: Decision,
}

/// What became of a request that was not refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requested {
    /// The lock is held.
    Granted(Grant),
    /// The request waits; a later call returns its [`Grant`].
    Queued {
        /// Its id (for [`LockTable::cancel`]).
        request: RequestId,
    },
}

/// Why a request was refused (it holds nothing and waits for nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The caller would not wait and the lock cannot be granted now (`EAGAIN`).
    WouldBlock,
    /// Waiting would close a wait-for cycle (`EDEADLK`).
    Deadlock {
        /// The owner holding a conflicting lock through whom the cycle runs.
        blocker: OwnerId,
    },
    /// The file's queue is full.
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// Granting it would exceed the table's lock limit (`ENOLCK`).
    TooManyLocks {
        /// The limit.
        limit: usize,
    },
}

impl RequestError {
    /// The reason in words.
    pub fn reason(self) -> &'static str {
        match self {
            RequestError::WouldBlock => "the lock is not available now",
            RequestError::Deadlock { .. } => "waiting would deadlock",
            RequestError::QueueFull { .. } => "the file's lock queue is full",
            RequestError::TooManyLocks { .. } => "the lock table is full",
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::WouldBlock => formatter.write_str(self.reason()),
            RequestError::Deadlock { blocker } => write!(formatter, "waiting would deadlock (through owner {blocker})"),
            RequestError::QueueFull { capacity } => write!(formatter, "the file's lock queue is full ({capacity} requests)"),
            RequestError::TooManyLocks { limit } => {
                write!(formatter, "the lock table is full ({limit} locks)")
            }
        }
    }
}

impl core::error::Error for RequestError {}

/// What [`LockTable::request`] did: the request's fate, and the waiting requests the same
/// grant loop granted (their owners must be woken).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestOutcome {
    /// The request's fate.
    pub result: Result<Requested, RequestError>,
    /// Other requests granted.
    pub granted: Vec<Grant>,
}

/// Why an unlock was refused (nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnlockError {
    /// Splitting a lock would exceed the table's lock limit (`ENOLCK`).
    TooManyLocks {
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for UnlockError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnlockError::TooManyLocks { limit } => write!(formatter, "unlocking would split a lock past the table's limit ({limit} locks)"),
        }
    }
}

impl core::error::Error for UnlockError {}

/// Why a cancellation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelError {
    /// The id names no waiting request.
    NotWaiting {
        /// The id given.
        request: RequestId,
    },
}

impl fmt::Display for CancelError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CancelError::NotWaiting { request } => {
                write!(formatter, "request {request} is not waiting")
            }
        }
    }
}

impl core::error::Error for CancelError {}

/// What [`LockTable::release_owner`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// Locks dropped.
    pub locks: usize,
    /// The owner's waiting requests withdrawn.
    pub cancelled: Vec<RequestId>,
    /// Other owners' requests granted as a result.
    pub granted: Vec<Grant>,
}

/// Counters for one lock kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCounters {
    /// Requests made.
    pub requests: u64,
    /// Requests granted (at once or after waiting).
    pub grants: u64,
    /// Requests that had to wait (queued).
    pub waits: u64,
    /// Sum of the waits of granted requests, ns (saturating).
    pub total_wait_ns: u64,
    /// The longest wait of a granted request, ns.
    pub max_wait_ns: u64,
    /// Requests refused with [`RequestError::WouldBlock`].
    pub would_block: u64,
}

impl KindCounters {
    /// The mean wait of granted requests (those granted at once count 0), ns.
    pub fn mean_wait_ns(&self) -> Option<u64> {
        self.total_wait_ns.checked_div(self.grants)
    }
}

/// What a [`LockTable`] has done since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockCounters {
    /// Read requests.
    pub read: KindCounters,
    /// Write requests.
    pub write: KindCounters,
    /// Times the policy was asked.
    pub policy_calls: u64,
    /// Valid answers naming a request.
    pub answers: u64,
    /// Valid declines.
    pub declines: u64,
    /// Answers rejected ([`Rejection`]); the default policy answered.
    pub rejections: u64,
    /// Requests refused with [`RequestError::Deadlock`].
    pub deadlocks: u64,
    /// Deadlock searches that gave up at the limit.
    pub deadlock_searches_truncated: u64,
    /// Requests refused with [`RequestError::QueueFull`].
    pub queue_full: u64,
    /// Requests and unlocks refused for the lock limit.
    pub too_many_locks: u64,
    /// Waiting requests withdrawn ([`LockTable::cancel`], [`LockTable::release_owner`]).
    pub cancelled: u64,
}

impl LockCounters {
    /// The counters of `kind`.
    pub fn kind(&self, kind: LockKind) -> &KindCounters {
        match kind {
            LockKind::Read => &self.read,
            LockKind::Write => &self.write,
        }
    }

    fn kind_mut(&mut self, kind: LockKind) -> &mut KindCounters {
        match kind {
            LockKind::Read => &mut self.read,
            LockKind::Write => &mut self.write,
        }
    }

    /// Requests granted, both kinds.
    pub fn grants(&self) -> u64 {
        self.read.grants.saturating_add(self.write.grants)
    }
}

/// Every file's byte-range locks.
#[derive(Clone, Debug)]
pub struct LockTable {
    config: LockConfig,
    files: BTreeMap<FileId, FileLocks>,
    /// Locks held over all files.
    held: usize,
    next_id: RequestId,
    counters: LockCounters,
    last_rejection: Option<Rejection>,
}

impl LockTable {
    /// An empty table. Errors: [`ConfigError`] for a configuration out of bounds.
    pub fn new(config: LockConfig) -> Result<LockTable, ConfigError> {
        if config.queue_capacity == 0 || config.queue_capacity > MAX_QUEUE_CAPACITY {
            return Err(ConfigError::QueueCapacity { capacity: config.queue_capacity });
        }
        if config.max_locks == 0 || config.max_locks > MAX_LOCKS {
            return Err(ConfigError::MaxLocks { limit: config.max_locks });
        }
        if config.deadlock_search > MAX_DEADLOCK_SEARCH {
            return Err(ConfigError::DeadlockSearch { owners: config.deadlock_search });
        }
        Ok(LockTable { config, files: BTreeMap::new(), held: 0, next_id: 1, counters: LockCounters::default(), last_rejection: None })
    }

    /// The configuration.
    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &LockCounters {
        &self.counters
    }

    /// The last answer rejected, if any.
    pub fn last_rejection(&self) -> Option<Rejection> {
        self.last_rejection
    }

    /// Locks held over all files.
    pub fn held_locks(&self) -> usize {
        self.held
    }

    /// A file's locks, if anything is held or waiting on it.
    pub fn file(&self, file: FileId) -> Option<&FileLocks> {
        self.files.get(&file)
    }

    /// The files with something held or waiting, in id order.
    pub fn files(&self) -> impl Iterator<Item = (FileId, &FileLocks)> {
        self.files.iter().map(|(id, locks)| (*id, locks))
    }

    /// The locks held on `file`, in (start, end, owner) order.
    pub fn holders(&self, file: FileId) -> &[HeldLock] {
        self.files.get(&file).map_or(&[], FileLocks::holders)
    }

    /// The requests waiting on `file`, oldest first.
    pub fn waiting(&self, file: FileId) -> &[WaitingRequest] {
        self.files.get(&file).map_or(&[], FileLocks::waiting)
    }

    /// The first lock held on `file` that a lock (`owner`, `kind`, `range`) would conflict
    /// with (`F_GETLK`); `None` when it is compatible with every lock held (waiting requests
    /// are not considered).
    pub fn test(&self, file: FileId, owner: OwnerId, kind: LockKind, range: Range) -> Option<HeldLock> {
        self.files.get(&file)?.blocker(owner, kind, range)
    }

    /// Asks for a lock of `kind` on `range` of `file` for `owner` at `now_ns`, waiting if
    /// `wait` (see the module's note for what happens). `policy` answers the grant loop.
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &mut self,
        file: FileId,
        owner: OwnerId,
        kind: LockKind,
        range: Range,
        wait: bool,
        now_ns: u64,
        policy: &mut dyn GrantPolicy,
    ) -> RequestOutcome {
        self.counters.kind_mut(kind).requests += 1;
        let id = self.next_id;
        // 2^64 requests are never made; should the counter wrap, 0 is still never an id.
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let mut locks = self.files.remove(&file).unwrap_or_default();
        let mut granted = Vec::new();
        if locks.waiting().is_empty() && locks.grantable(owner, kind, range) {
            let held = locks.after(owner, range, Some(kind));
            let result = if self.fits(locks.holders().len(), held.len()) {
                self.install(&mut locks, held);
                let counters = self.counters.kind_mut(kind);
                counters.grants += 1;
                Ok(Requested::Granted(Grant { file, request: id, owner, kind, range, waited_ns: 0, decision: Decision::Immediate }))
            } else {
                self.counters.too_many_locks += 1;
                Err(RequestError::TooManyLocks { limit: self.config.max_locks })
            };
            self.put_back(file, locks);
            return RequestOutcome { result, granted };
        }
        locks.push_waiting(WaitingRequest { id, owner, kind, range, sequence: id, arrival_ns: now_ns });
        self.grant_loop(file, &mut locks, Trigger::Arrival, id, now_ns, policy, &mut granted);
        if let Some(index) = granted.iter().position(|grant| grant.request == id) {
            let grant = granted.remove(index);
            self.put_back(file, locks);
            return RequestOutcome { result: Ok(Requested::Granted(grant)), granted };
        }
        // Still waiting: refuse it, or leave it queued.
        let refusal = if locks.grantable(owner, kind, range) && !self.grant_fits(&locks, owner, kind, range) {
            self.counters.too_many_locks += 1;
            Some(RequestError::TooManyLocks { limit: self.config.max_locks })
        } else if !wait {
            self.counters.kind_mut(kind).would_block += 1;
            Some(RequestError::WouldBlock)
        } else if locks.waiting().len() > self.config.queue_capacity {
            self.counters.queue_full += 1;
            Some(RequestError::QueueFull { capacity: self.config.queue_capacity })
        } else {
            None
        };
        if let Some(error) = refusal {
            locks.remove_waiting(id);
            self.put_back(file, locks);
            return RequestOutcome { result: Err(error), granted };
        }
        self.put_back(file, locks);
        if let Some(blocker) = self.deadlock(file, owner, kind, range) {
            self.counters.deadlocks += 1;
            if let Some(locks) = self.files.get_mut(&file) {
                locks.remove_waiting(id);
            }
            return RequestOutcome { result: Err(RequestError::Deadlock { blocker }), granted };
        }
        self.counters.kind_mut(kind).waits += 1;
        RequestOutcome { result: Ok(Requested::Queued { request: id }), granted }
    }

    /// Releases `owner`'s locks on `file` inside `range` (splitting a lock that sticks out
    /// on both sides) at `now_ns`, and runs the grant loop. Unlocking what is not held is
    /// not an error. Returns the waiting requests granted.
    ///
    /// Errors: [`UnlockError::TooManyLocks`] when a split would exceed the lock limit.
    pub fn unlock(
        &mut self,
        file: FileId,
        owner: OwnerId,
        range: Range,
        now_ns: u64,
        policy: &mut dyn GrantPolicy,
    ) -> Result<Vec<Grant>, UnlockError> {
        let Some(mut locks) = self.files.remove(&file) else {
            return Ok(Vec::new());
        };
        let held = locks.after(owner, range, None);
        if held == locks.holders() {
            self.put_back(file, locks);
            return Ok(Vec::new());
        }
        if !self.fits(locks.holders().len(), held.len()) {
            self.put_back(file, locks);
            self.counters.too_many_locks += 1;
            return Err(UnlockError::TooManyLocks { limit: self.config.max_locks });
        }
        self.install(&mut locks, held);
        let mut granted = Vec::new();
        self.grant_loop(file, &mut locks, Trigger::Release, 0, now_ns, policy, &mut granted);
        self.put_back(file, locks);
        Ok(granted)
    }

    /// Drops every lock and waiting request of `owner` (its exit) at `now_ns`, and runs the
    /// grant loop on each file touched.
    pub fn release_owner(&mut self, owner: OwnerId, now_ns: u64, policy: &mut dyn GrantPolicy) -> Released {
        let mut released = Released::default();
        let files: Vec<FileId> = self.files.keys().copied().collect();
        for file in files {
            let Some(mut locks) = self.files.remove(&file) else {
                continue;
            };
            let cancelled = locks.remove_waiting_of(owner);
            let dropped = locks.remove_held_of(owner);
            self.held = self.held.saturating_sub(dropped);
            if dropped > 0 || !cancelled.is_empty() {
                self.counters.cancelled += cancelled.len() as u64;
                let trigger = if dropped > 0 { Trigger::Release } else { Trigger::Cancel };
                self.grant_loop(file, &mut locks, trigger, 0, now_ns, policy, &mut released.granted);
            }
            released.locks += dropped;
            released.cancelled.extend(cancelled);
            self.put_back(file, locks);
        }
        released
    }

    /// Withdraws the waiting request `request` (its owner was interrupted) at `now_ns` and
    /// runs the grant loop on its file: under FIFO, the requests behind it may go.
    ///
    /// Errors: [`CancelError::NotWaiting`].
    pub fn cancel(&mut self, request: RequestId, now_ns: u64, policy: &mut dyn GrantPolicy) -> Result<Vec<Grant>, CancelError> {
        let file = self
            .files
            .iter()
            .find(|(_, locks)| locks.waiting().iter().any(|waiting| waiting.id == request))
            .map(|(file, _)| *file)
            .ok_or(CancelError::NotWaiting { request })?;
        let mut locks = self.files.remove(&file).unwrap_or_default();
        locks.remove_waiting(request);
        self.counters.cancelled += 1;
        let mut granted = Vec::new();
        self.grant_loop(file, &mut locks, Trigger::Cancel, 0, now_ns, policy, &mut granted);
        self.put_back(file, locks);
        Ok(granted)
    }

    /// Whether replacing `old` held locks by `new` stays within the lock limit.
    fn fits(&self, old: usize, new: usize) -> bool {
        self.held.saturating_sub(old).saturating_add(new) <= self.config.max_locks
    }

    /// Whether granting (`owner`, `kind`, `range`) on `locks` stays within the lock limit.
    fn grant_fits(&self, locks: &FileLocks, owner: OwnerId, kind: LockKind, range: Range) -> bool {
        // A grant adds at most two locks (one split into two around the new one).
        self.held.saturating_add(2) <= self.config.max_locks
            || self.fits(locks.holders().len(), locks.after(owner, range, Some(kind)).len())
    }

    /// Installs a new held-lock list on `locks`, keeping the table's count.
    fn install(&mut self, locks: &mut FileLocks, held: Vec<HeldLock>) {
        self.held = self.held.saturating_sub(locks.holders().len()).saturating_add(held.len());
        locks.set_held(held);
    }

    /// Puts a file's locks back in the table, or forgets the file when idle.
    fn put_back(&mut self, file: FileId, locks: FileLocks) {
        if !locks.is_idle() {
            self.files.insert(file, locks);
        }
    }

    /// The grant loop: asks `policy` which candidate to grant until it declines or none is
    /// left, granting each choice (or the default policy's when the answer is rejected).
    #[allow(clippy::too_many_arguments)]
    fn grant_loop(
        &mut self,
        file: FileId,
        locks: &mut FileLocks,
        trigger: Trigger,
        arriving: RequestId,
        now_ns: u64,
        policy: &mut dyn GrantPolicy,
        granted: &mut Vec<Grant>,
    ) {
        // Each round grants one request, so the loop ends within the queue's length.
        loop {
            let candidates: Vec<Candidate> =
                locks.candidates(now_ns, |request| self.grant_fits(locks, request.owner, request.kind, request.range));
            if candidates.is_empty() {
                return;
            }
            let query = GrantQuery {
                file,
                now_ns,
                trigger,
                arriving: if granted.iter().any(|grant| grant.request == arriving) { 0 } else { arriving },
                waiting: locks.waiting().len() as u32,
                holders: locks.holders().len() as u32,
            };
            self.counters.policy_calls += 1;
            let choice = policy.choose(&query, &candidates);
            let waiting: Vec<RequestId> = locks.waiting().iter().map(|request| request.id).collect();
            let (index, decision) = match validate(choice, &query, &waiting, &candidates) {
                Ok(Some(index)) => {
                    self.counters.answers += 1;
                    (index, Decision::Answer)
                }
                Ok(None) => {
                    self.counters.declines += 1;
                    return;
                }
                Err(rejection) => {
                    self.counters.rejections += 1;
                    self.last_rejection = Some(rejection);
                    match validate(choose(self.config.default_policy, &candidates), &query, &waiting, &candidates) {
                        Ok(Some(index)) => (index, Decision::Default { rejection }),
                        _ => return,
                    }
                }
            };
            let Some(request) = locks.remove_waiting(candidates[index].request) else {
                return;
            };
            let held = locks.after(request.owner, request.range, Some(request.kind));
            self.install(locks, held);
            let waited_ns = now_ns.saturating_sub(request.arrival_ns);
            let counters = self.counters.kind_mut(request.kind);
            counters.grants += 1;
            counters.total_wait_ns = counters.total_wait_ns.saturating_add(waited_ns);
            counters.max_wait_ns = counters.max_wait_ns.max(waited_ns);
            granted.push(Grant {
                file,
                request: request.id,
                owner: request.owner,
                kind: request.kind,
                range: request.range,
                waited_ns,
                decision,
            });
        }
    }

    /// If a new request (`owner`, `kind`, `range`) waiting on `file` would close a wait-for
    /// cycle, the owner holding a conflicting lock through whom it runs.
    fn deadlock(&mut self, file: FileId, owner: OwnerId, kind: LockKind, range: Range) -> Option<OwnerId> {
        if self.config.deadlock_search == 0 {
            return None;
        }
        let blockers_of = |file: &FileLocks, owner, kind, range| -> Vec<OwnerId> {
            let mut owners: Vec<OwnerId> = file
                .holders()
                .iter()
                .filter(|held| conflicts(owner, kind, range, held.owner, held.kind, held.range))
                .map(|held| held.owner)
                .collect();
            owners.dedup();
            owners
        };
        // (owner to visit, the direct blocker it was reached through)
        let mut stack: Vec<(OwnerId, OwnerId)> = self
            .files
            .get(&file)
            .map(|locks| blockers_of(locks, owner, kind, range))
            .unwrap_or_default()
            .into_iter()
            .map(|blocker| (blocker, blocker))
            .collect();
        let mut visited: Vec<OwnerId> = Vec::new();
        while let Some((next, via)) = stack.pop() {
            if next == owner {
                return Some(via);
            }
            if visited.contains(&next) {
                continue;
            }
            if visited.len() >= self.config.deadlock_search {
                self.counters.deadlock_searches_truncated += 1;
                return None;
            }
            visited.push(next);
            for locks in self.files.values() {
                for waiting in locks.waiting().iter().filter(|waiting| waiting.owner == next) {
                    stack.extend(blockers_of(locks, waiting.owner, waiting.kind, waiting.range).into_iter().map(|blocker| (blocker, via)));
                }
            }
        }
        None
    }
}
