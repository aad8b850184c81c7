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
}
