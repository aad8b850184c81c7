//! Tests of the lock table: grant orders under FRP and FIFO, same-owner semantics through
//! the table, exits, cancellation, bounds, rejected answers, deadlocks, and invariants under
//! random operations.

extern crate std;

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::LockKind::{Read, Write};
use crate::*;

const FILE: FileId = 7;

fn byte0() -> Range {
    Range::with_length(0, 1).unwrap()
}

fn range(start: u64, end: u64) -> Range {
    Range::new(start, end).unwrap()
}

fn table() -> LockTable {
    LockTable::new(LockConfig::DEFAULT).unwrap()
}

/// Requests and expects an immediate or in-loop grant.
fn granted(table: &mut LockTable, owner: OwnerId, kind: LockKind, range: Range, now: u64, policy: &mut dyn GrantPolicy) -> Grant {
    match table.request(FILE, owner, kind, range, true, now, policy).result {
        Ok(Requested::Granted(grant)) => grant,
        other => panic!("owner {owner} {kind} {range}: expected a grant, got {other:?}"),
    }
}

/// Requests and expects to wait; the request's id.
fn queued(table: &mut LockTable, owner: OwnerId, kind: LockKind, range: Range, now: u64, policy: &mut dyn GrantPolicy) -> RequestId {
    let outcome = table.request(FILE, owner, kind, range, true, now, policy);
    assert_eq!(outcome.granted, [], "a waiting arrival grants nobody else here");
    match outcome.result {
        Ok(Requested::Queued { request }) => request,
        other => panic!("owner {owner} {kind} {range}: expected to wait, got {other:?}"),
    }
}

fn owners(grants: &[Grant]) -> Vec<OwnerId> {
    grants.iter().map(|grant| grant.owner).collect()
}

fn holder_owners(table: &LockTable) -> Vec<(OwnerId, LockKind)> {
    table.holders(FILE).iter().map(|held| (held.owner, held.kind)).collect()
}

#[test]
fn frp_lets_an_arriving_reader_pass_a_waiting_writer() {
    let mut frp = Policy::Frp;
    let mut table = table();
    let first = granted(&mut table, 1, Read, byte0(), 0, &mut frp);
    assert_eq!(first.decision, Decision::Immediate);
    let writer = queued(&mut table, 2, Write, byte0(), 10, &mut frp);
    // R3 is compatible with the holder: reader's priority grants it at once, past W2.
    let third = granted(&mut table, 3, Read, byte0(), 20, &mut frp);
    assert_eq!((third.decision, third.waited_ns), (Decision::Answer, 0));
    assert_eq!(holder_owners(&table), [(1, Read), (3, Read)]);
    assert_eq!(table.unlock(FILE, 1, byte0(), 30, &mut frp).unwrap(), [], "R3 still holds");
    let grants = table.unlock(FILE, 3, byte0(), 40, &mut frp).unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!((grants[0].request, grants[0].owner, grants[0].waited_ns, grants[0].decision), (writer, 2, 30, Decision::Answer));
    assert_eq!(holder_owners(&table), [(2, Write)]);
}

#[test]
fn fifo_queues_an_arriving_reader_behind_a_waiting_writer() {
    let mut fifo = Policy::Fifo;
    let mut table = table();
    granted(&mut table, 1, Read, byte0(), 0, &mut fifo);
    let writer = queued(&mut table, 2, Write, byte0(), 10, &mut fifo);
    let third = queued(&mut table, 3, Read, byte0(), 20, &mut fifo);
    let fourth = queued(&mut table, 4, Read, byte0(), 25, &mut fifo);
    assert_eq!(table.waiting(FILE).iter().map(|request| request.id).collect::<Vec<_>>(), [writer, third, fourth]);
    // Unlock R1: W2 (the head) goes; the readers stay behind it.
    let grants = table.unlock(FILE, 1, byte0(), 30, &mut fifo).unwrap();
    assert_eq!((owners(&grants), grants[0].waited_ns), (vec![2], 20));
    assert_eq!(holder_owners(&table), [(2, Write)]);
    // Unlock W2: both readers at the head go, oldest first.
    let grants = table.unlock(FILE, 2, byte0(), 50, &mut fifo).unwrap();
    assert_eq!(owners(&grants), [3, 4]);
    assert_eq!(grants.iter().map(|grant| grant.waited_ns).collect::<Vec<_>>(), [30, 25]);
    assert!(table.waiting(FILE).is_empty());
    let counters = table.counters();
    assert_eq!((counters.read.grants, counters.read.waits, counters.write.grants, counters.write.waits), (3, 2, 1, 1));
    assert_eq!((counters.read.total_wait_ns, counters.read.max_wait_ns, counters.write.max_wait_ns), (55, 30, 20));
    assert_eq!(counters.read.mean_wait_ns(), Some(18));
}

#[test]
fn fifo_stops_at_a_writer_behind_readers() {
    // W1 holds; R2, R3, W4, R5 wait. Unlock: R2 and R3 go, W4 is not grantable, so R5
    // waits behind it even though it is compatible with R2 and R3.
    let mut fifo = Policy::Fifo;
    let mut table = table();
    granted(&mut table, 1, Write, byte0(), 0, &mut fifo);
    for (owner, kind) in [(2, Read), (3, Read), (4, Write), (5, Read)] {
        queued(&mut table, owner, kind, byte0(), u64::from(owner), &mut fifo);
    }
    assert_eq!(owners(&table.unlock(FILE, 1, byte0(), 10, &mut fifo).unwrap()), [2, 3]);
    assert_eq!(table.waiting(FILE).iter().map(|request| request.owner).collect::<Vec<_>>(), [4, 5]);
    table.unlock(FILE, 2, byte0(), 11, &mut fifo).unwrap();
    assert_eq!(owners(&table.unlock(FILE, 3, byte0(), 12, &mut fifo).unwrap()), [4]);
    assert_eq!(owners(&table.unlock(FILE, 4, byte0(), 13, &mut fifo).unwrap()), [5]);
}

#[test]
fn frp_grants_readers_first_and_writers_in_arrival_order() {
    let mut frp = Policy::Frp;
    let mut table = table();
    granted(&mut table, 1, Write, byte0(), 0, &mut frp);
    queued(&mut table, 2, Write, byte0(), 1, &mut frp);
    queued(&mut table, 3, Write, byte0(), 2, &mut frp);
    queued(&mut table, 4, Read, byte0(), 3, &mut frp);
    queued(&mut table, 5, Read, byte0(), 4, &mut frp);
    // Released: both waiting readers go before the older writers.
    assert_eq!(owners(&table.unlock(FILE, 1, byte0(), 10, &mut frp).unwrap()), [4, 5]);
    table.unlock(FILE, 4, byte0(), 11, &mut frp).unwrap();
    assert_eq!(owners(&table.unlock(FILE, 5, byte0(), 12, &mut frp).unwrap()), [2], "then writers, oldest first");
    assert_eq!(owners(&table.unlock(FILE, 2, byte0(), 13, &mut frp).unwrap()), [3]);
}

#[test]
fn frp_grants_a_later_writer_on_a_free_range_before_an_older_blocked_one() {
    let mut frp = Policy::Frp;
    let mut fifo = Policy::Fifo;
    // FRP: owner 4 gets [12, 15) as soon as owner 2 releases.
    let mut table = self::table();
    granted(&mut table, 1, Write, range(0, 10), 0, &mut frp);
    granted(&mut table, 2, Write, range(10, 20), 0, &mut frp);
    queued(&mut table, 3, Write, range(0, 5), 1, &mut frp);
    queued(&mut table, 4, Write, range(12, 15), 2, &mut frp);
    assert_eq!(owners(&table.unlock(FILE, 2, range(10, 20), 3, &mut frp).unwrap()), [4]);
    // Strict FIFO: owner 4 waits behind owner 3's blocked request.
    let mut table = self::table();
    granted(&mut table, 1, Write, range(0, 10), 0, &mut fifo);
    granted(&mut table, 2, Write, range(10, 20), 0, &mut fifo);
    queued(&mut table, 3, Write, range(0, 5), 1, &mut fifo);
    queued(&mut table, 4, Write, range(12, 15), 2, &mut fifo);
    assert_eq!(table.unlock(FILE, 2, range(10, 20), 3, &mut fifo).unwrap(), []);
    assert_eq!(owners(&table.unlock(FILE, 1, range(0, 10), 4, &mut fifo).unwrap()), [3, 4]);
}

#[test]
fn a_caller_that_will_not_wait_is_told_it_would_block() {
    let mut frp = Policy::Frp;
    let mut fifo = Policy::Fifo;
    let mut table = table();
    granted(&mut table, 1, Read, byte0(), 0, &mut frp);
    assert_eq!(table.request(FILE, 2, Write, byte0(), false, 1, &mut frp).result, Err(RequestError::WouldBlock));
    assert!(table.waiting(FILE).is_empty(), "a refused request does not stay queued");
    queued(&mut table, 2, Write, byte0(), 2, &mut frp);
    // A compatible reader that will not wait: FRP lets it in, FIFO would make it wait.
    assert_eq!(table.request(FILE, 3, Read, byte0(), false, 3, &mut fifo).result, Err(RequestError::WouldBlock));
    assert!(matches!(table.request(FILE, 3, Read, byte0(), false, 4, &mut frp).result, Ok(Requested::Granted(_))));
    let counters = table.counters();
    assert_eq!((counters.read.would_block, counters.write.would_block), (1, 1));
    assert_eq!(table.waiting(FILE).len(), 1);
    assert_eq!(format!("{}", RequestError::WouldBlock), "the lock is not available now");
}

#[test]
fn same_owner_relocks_through_the_table() {
    let mut frp = Policy::Frp;
    let mut table = table();
    // Upgrade with nobody else holding: at once, and merged with the owner's other lock.
    granted(&mut table, 1, Read, range(0, 10), 0, &mut frp);
    granted(&mut table, 1, Write, range(10, 20), 0, &mut frp);
    granted(&mut table, 1, Write, range(0, 10), 0, &mut frp);
    assert_eq!(table.holders(FILE), [HeldLock { owner: 1, kind: Write, range: range(0, 20) }]);
    // Downgrade a middle part: the write lock splits around it.
    granted(&mut table, 1, Read, range(5, 8), 0, &mut frp);
    assert_eq!(holder_owners(&table), [(1, Write), (1, Read), (1, Write)]);
    assert_eq!(table.held_locks(), 3);
    // Another reader shares the read part only.
    granted(&mut table, 2, Read, range(6, 7), 0, &mut frp);
    assert_eq!(table.test(FILE, 3, Write, range(6, 7)).map(|held| held.owner), Some(1));
    // Owner 1 upgrades the read part back: it waits for owner 2, keeping its read lock.
    let upgrade = queued(&mut table, 1, Write, range(5, 8), 1, &mut frp);
    assert_eq!(table.holders(FILE).len(), 4);
    let grants = table.unlock(FILE, 2, Range::WHOLE, 5, &mut frp).unwrap();
    assert_eq!((grants[0].request, grants[0].waited_ns), (upgrade, 4));
    assert_eq!(table.holders(FILE), [HeldLock { owner: 1, kind: Write, range: range(0, 20) }]);
    // Unlock the middle, then everything: the file is forgotten.
    table.unlock(FILE, 1, range(9, 11), 6, &mut frp).unwrap();
    assert_eq!(table.holders(FILE).iter().map(|held| held.range).collect::<Vec<_>>(), [range(0, 9), range(11, 20)]);
    table.unlock(FILE, 1, Range::WHOLE, 7, &mut frp).unwrap();
    assert!(table.file(FILE).is_none() && table.held_locks() == 0);
}

#[test]
fn an_owner_exit_drops_its_locks_and_requests_and_wakes_others() {
    let mut fifo = Policy::Fifo;
    let mut table = table();
    granted(&mut table, 1, Write, byte0(), 0, &mut fifo);
    let other_file = table.request(FILE + 1, 1, Read, Range::WHOLE, true, 0, &mut fifo);
    assert!(matches!(other_file.result, Ok(Requested::Granted(_))));
    let second = queued(&mut table, 2, Read, byte0(), 1, &mut fifo);
    // (Under FIFO this would wait behind owner 2's own request; FRP grants it.)
    granted(&mut table, 2, Write, range(5, 6), 1, &mut Policy::Frp);
    queued(&mut table, 3, Read, byte0(), 2, &mut fifo);
    let mine = queued(&mut table, 2, Read, range(0, 3), 3, &mut fifo);
    // Owner 2 exits: its lock on [5, 6) and both its waiting requests go; nothing is woken
    // (owner 1 still holds).
    let released = table.release_owner(2, 4, &mut fifo);
    assert_eq!((released.locks, released.cancelled, released.granted), (1, vec![second, mine], vec![]));
    // Owner 1 exits: owner 3 is woken, and the other file is forgotten.
    let released = table.release_owner(1, 5, &mut fifo);
    assert_eq!((released.locks, owners(&released.granted)), (2, vec![3]));
    assert!(table.file(FILE + 1).is_none());
    assert_eq!(table.held_locks(), 1);
    assert_eq!(table.counters().cancelled, 2);
    assert_eq!(table.release_owner(99, 6, &mut fifo), Released::default());
}

#[test]
fn cancelling_the_head_lets_the_requests_behind_it_go() {
    let mut fifo = Policy::Fifo;
    let mut table = table();
    granted(&mut table, 1, Read, byte0(), 0, &mut fifo);
    let writer = queued(&mut table, 2, Write, byte0(), 1, &mut fifo);
    queued(&mut table, 3, Read, byte0(), 2, &mut fifo);
    let grants = table.cancel(writer, 3, &mut fifo).unwrap();
    assert_eq!((owners(&grants), grants[0].waited_ns), (vec![3], 1));
    assert_eq!(table.cancel(writer, 4, &mut fifo), Err(CancelError::NotWaiting { request: writer }));
    assert_eq!(format!("{}", CancelError::NotWaiting { request: 9 }), "request 9 is not waiting");
}

#[test]
fn the_queue_is_bounded() {
    let mut frp = Policy::Frp;
    let config = LockConfig { queue_capacity: 2, ..LockConfig::DEFAULT };
    let mut table = LockTable::new(config).unwrap();
    granted(&mut table, 1, Write, byte0(), 0, &mut frp);
    queued(&mut table, 2, Read, byte0(), 1, &mut frp);
    queued(&mut table, 3, Read, byte0(), 1, &mut frp);
    assert_eq!(table.request(FILE, 4, Read, byte0(), true, 1, &mut frp).result, Err(RequestError::QueueFull { capacity: 2 }));
    assert_eq!(table.waiting(FILE).len(), 2);
    assert_eq!(table.counters().queue_full, 1);
    // A full queue does not stop a request that FRP grants on arrival.
    assert!(matches!(table.request(FILE, 4, Write, range(1, 2), true, 1, &mut frp).result, Ok(Requested::Granted(_))));
    assert_eq!(format!("{}", RequestError::QueueFull { capacity: 2 }), "the file's lock queue is full (2 requests)");
}

#[test]
fn the_lock_limit_refuses_grants_and_splits() {
    let mut frp = Policy::Frp;
    let config = LockConfig { max_locks: 2, ..LockConfig::DEFAULT };
    let mut table = LockTable::new(config).unwrap();
    granted(&mut table, 1, Write, range(0, 10), 0, &mut frp);
    table.unlock(FILE, 1, range(3, 5), 0, &mut frp).unwrap();
    assert_eq!(table.held_locks(), 2);
    // A third piece is refused, and nothing changes.
    assert_eq!(table.unlock(FILE, 1, range(7, 8), 0, &mut frp), Err(UnlockError::TooManyLocks { limit: 2 }));
    assert_eq!(table.held_locks(), 2);
    assert_eq!(table.request(FILE, 2, Read, range(20, 21), true, 0, &mut frp).result, Err(RequestError::TooManyLocks { limit: 2 }));
    // Merging needs no room: re-locking the gap joins the pieces.
    granted(&mut table, 1, Write, range(3, 5), 0, &mut frp);
    assert_eq!(table.held_locks(), 1);
    // A waiting request whose grant would not fit waits until it fits.
    granted(&mut table, 2, Read, range(20, 21), 0, &mut frp);
    queued(&mut table, 3, Read, range(0, 1), 1, &mut frp);
    assert_eq!(table.unlock(FILE, 1, range(5, 10), 2, &mut frp).unwrap(), [], "owner 3's lock would be the third");
    assert_eq!(owners(&table.unlock(FILE, 2, Range::WHOLE, 3, &mut frp).unwrap()), [], "owner 1 still holds [0, 5)");
    assert_eq!(owners(&table.unlock(FILE, 1, Range::WHOLE, 4, &mut frp).unwrap()), [3]);
    assert_eq!(table.counters().too_many_locks, 2);
    assert_eq!(format!("{}", UnlockError::TooManyLocks { limit: 2 }), "unlocking would split a lock past the table's limit (2 locks)");
}

#[test]
fn configurations_are_checked() {
    let bad = |config: LockConfig| LockTable::new(config).unwrap_err();
    assert_eq!(bad(LockConfig { queue_capacity: 0, ..LockConfig::DEFAULT }), ConfigError::QueueCapacity { capacity: 0 });
    assert_eq!(
        bad(LockConfig { queue_capacity: MAX_QUEUE_CAPACITY + 1, ..LockConfig::DEFAULT }),
        ConfigError::QueueCapacity { capacity: MAX_QUEUE_CAPACITY + 1 }
    );
    assert_eq!(bad(LockConfig { max_locks: 0, ..LockConfig::DEFAULT }), ConfigError::MaxLocks { limit: 0 });
    assert_eq!(
        bad(LockConfig { deadlock_search: MAX_DEADLOCK_SEARCH + 1, ..LockConfig::DEFAULT }),
        ConfigError::DeadlockSearch { owners: MAX_DEADLOCK_SEARCH + 1 }
    );
    assert_eq!(format!("{}", ConfigError::MaxLocks { limit: 0 }), "lock limit 0 is not between 1 and 1048576");
}

/// A policy that answers from a script, then declines; it records what it was asked.
struct Scripted {
    answers: Vec<GrantChoice>,
    asked: Vec<(GrantQuery, Vec<RequestId>)>,
}

impl GrantPolicy for Scripted {
    fn choose(&mut self, query: &GrantQuery, candidates: &[Candidate]) -> GrantChoice {
        self.asked.push((*query, candidates.iter().map(|candidate| candidate.request).collect()));
        if self.answers.is_empty() { GrantChoice::decline() } else { self.answers.remove(0) }
    }
}

fn scripted(answers: &[GrantChoice]) -> Scripted {
    Scripted { answers: answers.to_vec(), asked: Vec::new() }
}

#[test]
fn the_policy_is_asked_with_the_file_and_its_candidates() {
    let mut frp = Policy::Frp;
    let mut table = table();
    granted(&mut table, 1, Read, byte0(), 0, &mut frp);
    let writer = queued(&mut table, 2, Write, byte0(), 1, &mut frp);
    let mut policy = scripted(&[]);
    // An arriving compatible reader: the policy sees it as the only candidate, and declines.
    let outcome = table.request(FILE, 3, Read, byte0(), true, 5, &mut policy);
    let Ok(Requested::Queued { request: reader }) = outcome.result else { panic!("{outcome:?}") };
    let expected = GrantQuery { file: FILE, now_ns: 5, trigger: Trigger::Arrival, arriving: reader, waiting: 2, holders: 1 };
    assert_eq!(policy.asked, [(expected, vec![reader])]);
    // Release: both are candidates; the policy picks the writer, then sees nothing grantable.
    let mut policy = scripted(&[GrantChoice::grant(writer)]);
    let grants = table.unlock(FILE, 1, byte0(), 9, &mut policy).unwrap();
    assert_eq!(owners(&grants), [2]);
    let expected = GrantQuery { file: FILE, now_ns: 9, trigger: Trigger::Release, arriving: 0, waiting: 2, holders: 0 };
    assert_eq!(policy.asked, [(expected, vec![writer, reader])]);
    let counters = table.counters();
    // Asked twice: the arrival (declined) and the release (answered); after the writer's
    // grant nothing was grantable, so the policy was not asked again.
    assert_eq!((counters.policy_calls, counters.answers, counters.declines, counters.rejections), (2, 1, 1, 0));
}

#[test]
fn an_answer_naming_a_blocked_request_is_rejected() {
    let mut frp = Policy::Frp;
    let mut table = table();
    granted(&mut table, 1, Write, range(0, 10), 0, &mut frp);
    granted(&mut table, 4, Write, range(20, 30), 0, &mut frp);
    let blocked = queued(&mut table, 2, Write, range(0, 1), 1, &mut frp);
    let reader = queued(&mut table, 3, Read, range(20, 21), 2, &mut frp);
    // Owner 4 releases: owner 3's read is grantable, owner 2's write is not.
    let mut policy = scripted(&[GrantChoice::grant(blocked)]);
    let grants = table.unlock(FILE, 4, Range::WHOLE, 3, &mut policy).unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(
        (grants[0].request, grants[0].decision),
        (reader, Decision::Default { rejection: Rejection::NotGrantable { request: blocked } })
    );
    assert_eq!(table.last_rejection(), Some(Rejection::NotGrantable { request: blocked }));
    assert_eq!(table.counters().rejections, 1);
    assert_eq!(policy.asked.len(), 1);
}

#[test]
fn every_kind_of_bad_answer_falls_back_to_the_default() {
    let mut frp = Policy::Frp;
    for (answer, expected) in [
        (GrantChoice::grant(12_345), Rejection::NotWaiting { request: 12_345 }),
        (GrantChoice::grant(u64::MAX), Rejection::NotWaiting { request: u64::MAX }),
        (GrantChoice::decline(), Rejection::DeclinedWhileIdle),
    ] {
        let mut table = table();
        granted(&mut table, 1, Write, byte0(), 0, &mut frp);
        let writer = queued(&mut table, 2, Write, byte0(), 1, &mut frp);
        let reader = queued(&mut table, 3, Read, byte0(), 2, &mut frp);
        // Nothing is held once owner 1 unlocks: a decline would strand both waiters.
        let mut policy = scripted(&[answer]);
        let grants = table.unlock(FILE, 1, byte0(), 3, &mut policy).unwrap();
        // The default (FRP) grants the reader; then the writer is not grantable, the policy
        // is not asked again, and the writer waits.
        assert_eq!(
            grants.iter().map(|grant| (grant.request, grant.decision)).collect::<Vec<_>>(),
            [(reader, Decision::Default { rejection: expected })]
        );
        assert_eq!(table.waiting(FILE).iter().map(|request| request.id).collect::<Vec<_>>(), [writer]);
        assert_eq!((table.counters().rejections, table.counters().policy_calls, table.last_rejection()), (1, 1, Some(expected)));
    }
    // A granted request's id is no longer waiting.
    let mut table = table();
    granted(&mut table, 1, Write, byte0(), 0, &mut frp);
    let first = queued(&mut table, 2, Read, byte0(), 1, &mut frp);
    queued(&mut table, 3, Read, byte0(), 1, &mut frp);
    let mut policy = scripted(&[GrantChoice::grant(first), GrantChoice::grant(first)]);
    let grants = table.unlock(FILE, 1, byte0(), 3, &mut policy).unwrap();
    assert_eq!(grants[1].decision, Decision::Default { rejection: Rejection::NotWaiting { request: first } });
}

#[test]
fn a_default_fifo_table_falls_back_to_fifo() {
    let mut frp = Policy::Frp;
    let mut table = LockTable::new(LockConfig { default_policy: Policy::Fifo, ..LockConfig::DEFAULT }).unwrap();
    granted(&mut table, 1, Write, byte0(), 0, &mut frp);
    let writer = queued(&mut table, 2, Write, byte0(), 1, &mut frp);
    queued(&mut table, 3, Read, byte0(), 2, &mut frp);
    let mut policy = scripted(&[GrantChoice::grant(0xdead)]);
    let grants = table.unlock(FILE, 1, byte0(), 3, &mut policy).unwrap();
    assert_eq!(grants.iter().map(|grant| grant.request).collect::<Vec<_>>(), [writer]);
}

#[test]
fn an_upgrade_deadlock_is_refused() {
    let mut frp = Policy::Frp;
    let mut table = table();
    granted(&mut table, 1, Read, byte0(), 0, &mut frp);
    granted(&mut table, 2, Read, byte0(), 0, &mut frp);
    // Both upgrade: the first waits for owner 2, the second would wait for owner 1.
    let first = queued(&mut table, 1, Write, byte0(), 1, &mut frp);
    assert_eq!(table.request(FILE, 2, Write, byte0(), true, 2, &mut frp).result, Err(RequestError::Deadlock { blocker: 1 }));
    assert_eq!(table.waiting(FILE).len(), 1);
    assert_eq!(table.counters().deadlocks, 1);
    // Owner 2 gives up its read lock instead: owner 1's upgrade goes.
    let grants = table.unlock(FILE, 2, byte0(), 3, &mut frp).unwrap();
    assert_eq!(grants[0].request, first);
    assert_eq!(format!("{}", RequestError::Deadlock { blocker: 1 }), "waiting would deadlock (through owner 1)");
}

#[test]
fn a_deadlock_across_files_and_owners_is_refused() {
    let mut frp = Policy::Frp;
    let mut table = table();
    // Owner n holds file n and waits for file n + 1 (n = 1, 2, 3); owner 4 holds file 4 and
    // asks for file 1: a cycle of four owners over four files.
    for owner in 1..=4 {
        assert!(matches!(table.request(owner, owner, Write, byte0(), true, 0, &mut frp).result, Ok(Requested::Granted(_))));
    }
    for owner in 1..=3 {
        assert!(matches!(table.request(owner + 1, owner, Write, byte0(), true, 1, &mut frp).result, Ok(Requested::Queued { .. })));
    }
    assert_eq!(table.request(1, 4, Write, byte0(), true, 2, &mut frp).result, Err(RequestError::Deadlock { blocker: 1 }));
    // Reading a different byte of file 1 does not conflict: no cycle.
    assert!(matches!(table.request(1, 4, Read, range(1, 2), true, 2, &mut frp).result, Ok(Requested::Granted(_))));
    // With a search limit below the cycle's length the check gives up (and says so).
    let mut short = LockTable::new(LockConfig { deadlock_search: 2, ..LockConfig::DEFAULT }).unwrap();
    for owner in 1..=4 {
        short.request(owner, owner, Write, byte0(), true, 0, &mut frp);
    }
    for owner in 1..=3 {
        short.request(owner + 1, owner, Write, byte0(), true, 1, &mut frp);
    }
    assert!(matches!(short.request(1, 4, Write, byte0(), true, 2, &mut frp).result, Ok(Requested::Queued { .. })));
    assert_eq!(short.counters().deadlock_searches_truncated, 1);
    // With no check at all, nothing is refused.
    let mut none = LockTable::new(LockConfig { deadlock_search: 0, ..LockConfig::DEFAULT }).unwrap();
    none.request(FILE, 1, Read, byte0(), true, 0, &mut frp);
    none.request(FILE, 2, Read, byte0(), true, 0, &mut frp);
    none.request(FILE, 1, Write, byte0(), true, 0, &mut frp);
    assert!(matches!(none.request(FILE, 2, Write, byte0(), true, 0, &mut frp).result, Ok(Requested::Queued { .. })));
}

/// A deterministic pseudo-random sequence (a 64-bit LCG, high bits).
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

/// A policy answering at random: often a candidate, sometimes garbage or a decline.
struct RandomPolicy(Random);

impl GrantPolicy for RandomPolicy {
    fn choose(&mut self, _: &GrantQuery, candidates: &[Candidate]) -> GrantChoice {
        match self.0.below(6) {
            0 => GrantChoice::decline(),
            1 => GrantChoice::grant(self.0.below(200)),
            _ => GrantChoice::grant(candidates[self.0.below(candidates.len() as u64) as usize].request),
        }
    }
}

/// The table's invariants.
fn check(table: &LockTable, config: &LockConfig) {
    let mut total = 0;
    for (_, file) in table.files() {
        let held = file.holders();
        total += held.len();
        for (index, a) in held.iter().enumerate() {
            for b in &held[index + 1..] {
                assert!(!conflicts(a.owner, a.kind, a.range, b.owner, b.kind, b.range), "{a:?} and {b:?} conflict");
                if a.owner == b.owner {
                    assert!(!a.range.overlaps(b.range), "one owner's locks overlap: {a:?} {b:?}");
                    assert!(a.kind != b.kind || !a.range.touches(b.range), "unmerged: {a:?} {b:?}");
                }
            }
        }
        assert!(held.windows(2).all(|pair| (pair[0].range.start(), pair[0].range.end()) <= (pair[1].range.start(), pair[1].range.end())));
        assert!(file.waiting().len() <= config.queue_capacity);
        assert!(!file.is_idle(), "idle files are forgotten");
        assert!(file.waiting().is_empty() || !held.is_empty(), "waiters on a file with nothing held");
    }
    assert_eq!(table.held_locks(), total);
    assert!(total <= config.max_locks);
}

#[test]
fn invariants_hold_under_random_operations_and_answers() {
    let mut random = Random(0x10c5);
    for (config, policy_kind) in [
        (LockConfig::DEFAULT, 0),
        (LockConfig { queue_capacity: 3, ..LockConfig::DEFAULT }, 1),
        (LockConfig { queue_capacity: 8, default_policy: Policy::Fifo, ..LockConfig::DEFAULT }, 2),
    ] {
        let mut table = LockTable::new(config).unwrap();
        let mut policies: (Policy, Policy, RandomPolicy) = (Policy::Frp, Policy::Fifo, RandomPolicy(Random(policy_kind + 1)));
        // request id -> owner, for every request waiting.
        let mut waiting: BTreeMap<RequestId, OwnerId> = BTreeMap::new();
        let mut finished: BTreeSet<RequestId> = BTreeSet::new();
        let mut now = 0;
        let (mut grants, mut refusals) = (0_u64, 0_u64);
        for _ in 0..5_000 {
            now += random.below(1_000);
            let policy: &mut dyn GrantPolicy = match policy_kind {
                0 => &mut policies.0,
                1 => &mut policies.1,
                _ => &mut policies.2,
            };
            let owner = random.below(6) as OwnerId + 1;
            let file = random.below(2) as FileId;
            let start = random.below(40);
            let range =
                if random.below(8) == 0 { Range::to_end(start).unwrap() } else { Range::with_length(start, random.below(12) + 1).unwrap() };
            let mut woken = Vec::new();
            match random.below(10) {
                0..=4 => {
                    let kind = if random.below(3) == 0 { Write } else { Read };
                    let outcome = table.request(file, owner, kind, range, random.below(4) != 0, now, policy);
                    woken = outcome.granted;
                    match outcome.result {
                        Ok(Requested::Granted(grant)) => assert!(finished.insert(grant.request)),
                        Ok(Requested::Queued { request }) => assert!(waiting.insert(request, owner).is_none()),
                        Err(_) => refusals += 1,
                    }
                }
                5..=7 => woken = table.unlock(file, owner, range, now, policy).unwrap(),
                8 => {
                    let released = table.release_owner(owner, now, policy);
                    for request in released.cancelled {
                        assert_eq!(waiting.remove(&request), Some(owner));
                        assert!(finished.insert(request));
                    }
                    woken = released.granted;
                }
                _ => {
                    let candidate = waiting.keys().nth(random.below(waiting.len() as u64 + 1) as usize).copied();
                    match candidate {
                        Some(request) => {
                            woken = table.cancel(request, now, policy).unwrap();
                            waiting.remove(&request);
                            assert!(finished.insert(request));
                        }
                        None => assert!(table.cancel(0, now, policy).is_err()),
                    }
                }
            }
            for grant in woken {
                assert!(waiting.remove(&grant.request).is_some(), "granted {grant:?}, which was not waiting");
                assert!(finished.insert(grant.request), "granted twice");
                assert!(grant.waited_ns <= now);
                grants += 1;
            }
            check(&table, &config);
            let in_table: usize = table.files().map(|(_, file)| file.waiting().len()).sum();
            assert_eq!(in_table, waiting.len());
        }
        let counters = table.counters();
        assert!(grants > 50 && refusals > 100, "every path exercised: {grants} {refusals} {counters:?}");
        if policy_kind == 2 {
            assert!(counters.rejections > 50, "{counters:?}");
        }
    }
}
