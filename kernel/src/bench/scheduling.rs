//! Scheduler microbenchmarks (SPIN §5's thread rows): a context switch, a block/unblock
//! pair, strand fork-join and ping-pong, next to the call baselines of the same run.
//!
//! Every strand taking part runs with interrupts off (the measuring loop is already in
//! [`measure`]'s interrupt-free section; partners turn them off as their first act), so
//! no timer tick, clock strand or preemption lands inside a measurement. The partners run
//! at the measuring strand's priority, so a yield always finds one of them ready.
//!
//! Rows (instructions per operation, the empty loop subtracted):
//! - `yield-switch`: one `yield_now` that switches to the other of two yielding strands
//!   (a round trip is two of these);
//! - `block-unblock`: `unblock(partner)` then `yield_now`, the partner blocking again at
//!   once: one unblock, one block and the two switches between the strands;
//! - `strand-fork-join`: create a strand with an empty body (stack allocation included)
//!   and join it;
//! - `strand-ping-pong`: one round trip of a token between two strands that each
//!   `unblock` the other and `block_current` (two unblocks, two blocks, two switches).

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{measure, report};
use crate::arch::csr;
use crate::sched::{self, Strand};

/// Repetitions for the switch rows.
const SWITCH_ITERATIONS: u64 = 10_000;
/// Repetitions for fork-join (each allocates and frees a strand stack).
const FORK_ITERATIONS: u64 = 1_000;

/// Spawns a partner at the current strand's priority running `body` with interrupts
/// off, and lets it start (so its first run is not measured).
fn partner(name: &str, body: impl FnOnce() + Send + 'static) -> Arc<Strand> {
    let priority = sched::current().priority();
    let strand = sched::spawn(name, priority, move || {
        csr::disable_interrupts();
        body();
    })
    .expect("bench: no stack for a partner strand");
    sched::yield_now();
    strand
}

fn yield_switch() {
    let stop = Arc::new(AtomicBool::new(false));
    let partner_stop = stop.clone();
    let yielder = partner("bench-yield", move || {
        while !partner_stop.load(Ordering::Relaxed) {
            sched::yield_now();
        }
    });
    let per_round_trip = measure(SWITCH_ITERATIONS, |_| sched::yield_now());
    stop.store(true, Ordering::Relaxed);
    yielder.join();
    report("sched", "yield-switch", SWITCH_ITERATIONS, per_round_trip / 2);
}

fn block_unblock() {
    let stop = Arc::new(AtomicBool::new(false));
    let partner_stop = stop.clone();
    let blocker = partner("bench-block", move || {
        while !partner_stop.load(Ordering::Relaxed) {
            sched::block_current();
        }
    });
    let cost = measure(SWITCH_ITERATIONS, |_| {
        sched::unblock(&blocker);
        sched::yield_now();
    });
    stop.store(true, Ordering::Relaxed);
    sched::unblock(&blocker);
    blocker.join();
    report("sched", "block-unblock", SWITCH_ITERATIONS, cost);
}

fn fork_join() {
    let cost = measure(FORK_ITERATIONS, |_| {
        let child = sched::spawn("bench-child", sched::current().priority(), || {
            csr::disable_interrupts();
        })
        .expect("bench: no stack for a child strand");
        child.join();
    });
    report("sched", "strand-fork-join", FORK_ITERATIONS, cost);
}

fn ping_pong() {
    static TOKEN: AtomicU64 = AtomicU64::new(0);
    TOKEN.store(0, Ordering::Relaxed);
    let main = sched::current();
    let stop = Arc::new(AtomicBool::new(false));
    let partner_stop = stop.clone();
    let ponger = partner("bench-pong", move || {
        loop {
            sched::block_current();
            if partner_stop.load(Ordering::Relaxed) {
                return;
            }
            TOKEN.fetch_add(1, Ordering::Relaxed);
            sched::unblock(&main);
        }
    });
    let cost = measure(SWITCH_ITERATIONS, |_| {
        sched::unblock(&ponger);
        sched::block_current();
    });
    stop.store(true, Ordering::Relaxed);
    sched::unblock(&ponger);
    ponger.join();
    let token = TOKEN.load(Ordering::Relaxed);
    assert!(token >= SWITCH_ITERATIONS, "bench: the token came back {token} times");
    report("sched", "strand-ping-pong", SWITCH_ITERATIONS, cost);
}

/// Runs the scheduler rows.
pub fn run() {
    yield_switch();
    block_unblock();
    fork_join();
    ping_pong();
}
