//! Baselines: a direct procedure call and an indirect call through a function pointer
//! (what SPIN compares a raised event against).

use super::{DEFAULT_ITERATIONS, measure, report};

#[inline(never)]
fn add_one(value: u64) -> u64 {
    core::hint::black_box(value) + 1
}

/// Runs the call baselines.
pub fn run() {
    let iterations = DEFAULT_ITERATIONS;
    let direct = measure(iterations, |index| {
        core::hint::black_box(add_one(index));
    });
    report("calls", "direct-call", iterations, direct);
    let function: fn(u64) -> u64 = core::hint::black_box(add_one);
    let indirect = measure(iterations, |index| {
        core::hint::black_box(function(index));
    });
    report("calls", "indirect-call", iterations, indirect);
    // What the budget machinery pays per bounded call, piece by piece.
    let read_time = measure(iterations, |_| {
        core::hint::black_box(crate::arch::csr::time());
    });
    report("calls", "read-time-csr", iterations, read_time);
    let recovery_point = measure(iterations, |index| {
        core::hint::black_box(crate::arch::recovery::catch_faults(|| core::hint::black_box(index)).is_ok());
    });
    report("calls", "recovery-point-empty", iterations, recovery_point);
    // The budget converted once, as the dispatcher does at installation.
    let ticks = crate::time::budget_in_ticks(1_000_000);
    let bounded = measure(iterations, |index| {
        core::hint::black_box(crate::events::run_for_ticks(1_000_000, ticks, || core::hint::black_box(index)).is_ok());
    });
    report("calls", "bounded-call-empty", iterations, bounded);
}
