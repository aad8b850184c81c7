//! `faulty`: misbehaves on request, to test containment in every technology.
//!
//! Bound to `bench.Probe`, it chooses by the probe's key (each binding guarded on its
//! key, so the dispatcher routes):
//!
//! | key | behaviour |
//! |---|---|
//! | 1 | answers `value * 2` |
//! | 2 | panics (index out of bounds) |
//! | 3 | loops forever (overruns its budget) |
//! | 4 | divides by zero through `checked_div(...).unwrap()` (a panic) |
//! | 5 | recurses without bound (a stack overflow into the guard page) |

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{BENCH_PROBE, Probe, ProbeResult};

spindle_abi::extension! {
    name: "faulty",
    version: "0.1.0",
    budget_microseconds: 10_000,
    memory_quota_bytes: 64 * 1024,
    domains: ["console"],
    bindings: [
        BENCH_PROBE when [key == (KEY_ANSWER)] => answer,
        BENCH_PROBE when [key == (KEY_PANIC)] => panic_out_of_bounds,
        BENCH_PROBE when [key == (KEY_LOOP)] => loop_forever,
        BENCH_PROBE when [key == (KEY_DIVIDE)] => divide_by_zero,
        BENCH_PROBE when [key == (KEY_RECURSE)] => recurse_forever,
    ],
}

/// Key that gets an answer.
pub const KEY_ANSWER: u64 = 1;
/// Key that makes the extension panic.
pub const KEY_PANIC: u64 = 2;
/// Key that makes the extension loop forever.
pub const KEY_LOOP: u64 = 3;
/// Key that makes the extension divide by zero.
pub const KEY_DIVIDE: u64 = 4;
/// Key that makes the extension overflow its stack.
pub const KEY_RECURSE: u64 = 5;

fn answer(probe: &Probe) -> ProbeResult {
    ProbeResult { value: probe.value * 2 }
}

fn panic_out_of_bounds(probe: &Probe) -> ProbeResult {
    let table = [1u64, 2, 3];
    ProbeResult { value: table[probe.value as usize + 3] }
}

fn loop_forever(probe: &Probe) -> ProbeResult {
    let mut value = probe.value;
    loop {
        value = core::hint::black_box(value.wrapping_add(1));
        if value == probe.value.wrapping_sub(1) && core::hint::black_box(false) {
            return ProbeResult { value };
        }
    }
}

fn divide_by_zero(probe: &Probe) -> ProbeResult {
    let divisor = core::hint::black_box(probe.value - probe.value);
    ProbeResult { value: probe.value.checked_div(divisor).unwrap() }
}

fn recurse_forever(probe: &Probe) -> ProbeResult {
    ProbeResult { value: depth(probe.value, u64::MAX) }
}

/// Recurses until `limit` (never reached: the stack runs out first).
fn depth(level: u64, limit: u64) -> u64 {
    if level >= limit {
        return level;
    }
    let frame = core::hint::black_box([level; 64]);
    depth(core::hint::black_box(level + 1), limit).wrapping_add(frame[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_declares_four_bindings() {
        assert_eq!(answer(&Probe { key: KEY_ANSWER, value: 21 }).value, 42);
        assert_eq!(spindle_extension().bindings.len(), 5);
    }

    #[test]
    #[should_panic]
    fn panics_on_request() {
        panic_out_of_bounds(&Probe { key: KEY_PANIC, value: 0 });
    }
}
