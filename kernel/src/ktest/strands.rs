//! Tests of strands and the scheduler: spawn/join, yielding, preemption, priorities,
//! guard pages on strand stacks, and stack reclamation.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{KernelTest, TestResult};
use crate::ensure;
use crate::sched::{self, Priority};

/// The strand tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "sched::spawn_join_frees_stack", run: spawn_join_frees_stack },
    KernelTest { name: "sched::yield_interleaves", run: yield_interleaves },
    KernelTest { name: "sched::timer_preempts_spinning_strand", run: timer_preempts_spinning_strand },
    KernelTest { name: "sched::higher_priority_runs_first", run: higher_priority_runs_first },
    KernelTest { name: "sched::strand_stack_overflow_hits_guard", run: strand_stack_overflow_hits_guard },
    KernelTest { name: "sched::sleep_lock_waiter_woken_early_keeps_one_place", run: sleep_lock_waiter_woken_early_keeps_one_place },
];

/// A waiter woken for another reason while it waits for a [`sched::SleepLock`] must not
/// leave a second entry behind: the release after its own would wake that stale entry
/// instead of the strand queued behind it, which would then sleep for ever.
fn sleep_lock_waiter_woken_early_keeps_one_place() -> TestResult {
    static LOCK: sched::SleepLock<u32> = sched::SleepLock::new(0);
    let guard = LOCK.lock();
    let taker = || {
        move || {
            let mut value = LOCK.lock();
            *value += 1;
        }
    };
    let first = sched::spawn("test-lock-first", Priority::NORMAL, taker()).map_err(|error| alloc::format!("{error}"))?;
    sched::sleep_ticks(2);
    // Woken early: it finds the lock held and waits again.
    sched::unblock(&first);
    sched::sleep_ticks(2);
    let second = sched::spawn("test-lock-second", Priority::NORMAL, taker()).map_err(|error| alloc::format!("{error}"))?;
    sched::sleep_ticks(2);
    drop(guard);
    for _ in 0..50 {
        if first.is_finished() && second.is_finished() {
            break;
        }
        sched::sleep_ticks(1);
    }
    let finished = (first.is_finished(), second.is_finished());
    if !finished.1 {
        // Free it so the machine goes on; the test has failed already.
        sched::unblock(&second);
    }
    first.join();
    second.join();
    ensure!(finished == (true, true), "after the release: first finished {}, second finished {} (a stale waiter entry was woken instead)", finished.0, finished.1);
    ensure!(*LOCK.lock() == 2, "the lock was taken {} times, expected 2", *LOCK.lock());
    Ok(())
}

fn spawn_join_frees_stack() -> TestResult {
    let before = crate::mm::frame::stats();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let strand = sched::spawn("test-body", Priority::NORMAL, move || flag.store(true, Ordering::SeqCst))
        .map_err(|error| alloc::format!("{error}"))?;
    strand.join();
    ensure!(ran.load(Ordering::SeqCst), "the strand's body did not run");
    ensure!(strand.is_finished(), "not finished after join");
    drop(strand);
    ensure!(crate::mm::frame::stats() == before, "stack frames leaked: {:?} -> {:?}", before, crate::mm::frame::stats());
    Ok(())
}

fn yield_interleaves() -> TestResult {
    let log = Arc::new(spin::Mutex::new(Vec::new()));
    let mut strands = Vec::new();
    for tag in *b"ab" {
        let log = log.clone();
        strands.push(
            sched::spawn("yielder", Priority::NORMAL, move || {
                for _ in 0..3 {
                    crate::arch::csr::without_interrupts(|| log.lock().push(tag));
                    sched::yield_now();
                }
            })
            .map_err(|error| alloc::format!("{error}"))?,
        );
    }
    for strand in &strands {
        strand.join();
    }
    let log = log.lock().clone();
    // Timer preemption (and the clock strand) may add switches, so the exact order is
    // not fixed; yielding must still interleave the two strands.
    let text = core::str::from_utf8(&log).unwrap_or("?");
    ensure!(log.iter().filter(|&&tag| tag == b'a').count() == 3 && log.len() == 6, "log {text:?}");
    let last_a = log.iter().rposition(|&tag| tag == b'a').unwrap_or(0);
    let first_b = log.iter().position(|&tag| tag == b'b').unwrap_or(log.len());
    ensure!(first_b < last_a, "no interleaving: {text:?}");
    Ok(())
}

fn timer_preempts_spinning_strand() -> TestResult {
    static SECOND_RAN: AtomicBool = AtomicBool::new(false);
    static FIRST_SAW_SECOND: AtomicBool = AtomicBool::new(false);
    SECOND_RAN.store(false, Ordering::SeqCst);
    FIRST_SAW_SECOND.store(false, Ordering::SeqCst);
    let give_up = crate::time::ticks() + 200;
    let first = sched::spawn("spinner", Priority::NORMAL, move || {
        // Never yields: only preemption lets the second strand run.
        while !SECOND_RAN.load(Ordering::SeqCst) && crate::time::ticks() < give_up {
            core::hint::spin_loop();
        }
        FIRST_SAW_SECOND.store(SECOND_RAN.load(Ordering::SeqCst), Ordering::SeqCst);
    })
    .map_err(|error| alloc::format!("{error}"))?;
    let second = sched::spawn("marker", Priority::NORMAL, || SECOND_RAN.store(true, Ordering::SeqCst))
        .map_err(|error| alloc::format!("{error}"))?;
    first.join();
    second.join();
    ensure!(FIRST_SAW_SECOND.load(Ordering::SeqCst), "the spinning strand was never preempted");
    Ok(())
}

fn higher_priority_runs_first() -> TestResult {
    let order = Arc::new(spin::Mutex::new(Vec::new()));
    let (low_order, high_order) = (order.clone(), order.clone());
    let low = sched::spawn("low", Priority::new(2), move || crate::arch::csr::without_interrupts(|| low_order.lock().push("low")))
        .map_err(|error| alloc::format!("{error}"))?;
    let high = sched::spawn("high", Priority::new(6), move || crate::arch::csr::without_interrupts(|| high_order.lock().push("high")))
        .map_err(|error| alloc::format!("{error}"))?;
    low.join();
    high.join();
    let order = order.lock().clone();
    ensure!(order == ["high", "low"], "ran in order {order:?}");
    Ok(())
}

/// Recurses until the stack runs out (the limit is never reached).
#[inline(never)]
fn recurse(depth: u64, limit: u64) -> u64 {
    if depth >= limit {
        return depth;
    }
    let frame = core::hint::black_box([depth as u8; 512]);
    frame[0] as u64 + recurse(core::hint::black_box(depth + 1), limit)
}

fn strand_stack_overflow_hits_guard() -> TestResult {
    static OUTCOME: AtomicU64 = AtomicU64::new(0);
    const OVERFLOW_CAUGHT: u64 = 1;
    const OTHER_FAULT: u64 = 2;
    const RETURNED: u64 = 3;
    OUTCOME.store(0, Ordering::SeqCst);
    let strand = sched::spawn("overflow", Priority::NORMAL, || {
        let guard_expected = sched::current().stack_bottom() - crate::arch::PAGE_SIZE;
        let outcome = match crate::arch::recovery::catch_faults(|| recurse(0, u64::MAX)) {
            Err(report) if report.stack_overflow && report.stval >= guard_expected && report.stval < guard_expected + crate::arch::PAGE_SIZE => OVERFLOW_CAUGHT,
            Err(_) => OTHER_FAULT,
            Ok(_) => RETURNED,
        };
        OUTCOME.store(outcome, Ordering::SeqCst);
    })
    .map_err(|error| alloc::format!("{error}"))?;
    strand.join();
    let outcome = OUTCOME.load(Ordering::SeqCst);
    ensure!(outcome == OVERFLOW_CAUGHT, "outcome {outcome} (1 = overflow into this strand's guard page)");
    Ok(())
}
