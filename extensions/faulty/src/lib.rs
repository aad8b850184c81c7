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
//! | 6 | hoards 4 KiB chunks until allocation fails (past its quota: killed) |
//! | 7 | collects `1..=value` into a `Vec<u64>` and answers its sum (within its quota) |
//!
//! Memory: as a native extension its `alloc` comes from its own arena of
//! [`MEMORY_QUOTA_BYTES`], so key 6 exhausts the quota and the failed allocation kills it.
//! Built in, it shares the kernel heap (no per-extension quota): key 6 then stops at
//! [`HOARD_LIMIT_BYTES`] and answers the number of chunks it held.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;

use spindle_abi::event::{BENCH_PROBE, Probe, ProbeResult};

spindle_abi::extension! {
    name: "faulty",
    version: "0.1.0",
    budget_microseconds: 10_000,
    memory_quota_bytes: MEMORY_QUOTA_BYTES,
    domains: ["console", "clock"],
    bindings: [
        BENCH_PROBE when [key == (KEY_ANSWER)] => answer,
        BENCH_PROBE when [key == (KEY_PANIC)] => panic_out_of_bounds,
        BENCH_PROBE when [key == (KEY_LOOP)] => loop_forever,
        BENCH_PROBE when [key == (KEY_DIVIDE)] => divide_by_zero,
        BENCH_PROBE when [key == (KEY_RECURSE)] => recurse_forever,
        BENCH_PROBE when [key == (KEY_HOARD)] => hoard,
        BENCH_PROBE when [key == (KEY_ALLOCATE)] => allocate,
        BENCH_PROBE when [key == (KEY_UPTIME)] => uptime,
        BENCH_PROBE when [key == (KEY_UNDECLARED)] => call_undeclared_domain,
    ],
}

/// The extension's memory quota (its native arena's size).
pub const MEMORY_QUOTA_BYTES: u64 = 64 * 1024;
/// Size of each chunk [`hoard`] allocates.
pub const HOARD_CHUNK_BYTES: usize = 4096;
/// Most bytes [`hoard`] holds before it gives up: twice the quota, so in a native arena an
/// allocation always fails first, and built in it takes a bounded share of the kernel heap.
pub const HOARD_LIMIT_BYTES: usize = 2 * MEMORY_QUOTA_BYTES as usize;

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
/// Key that makes the extension allocate past its quota.
pub const KEY_HOARD: u64 = 6;
/// Key that makes the extension allocate `value` u64s (within its quota for small values).
pub const KEY_ALLOCATE: u64 = 7;

/// Key that answers the kernel's uptime in microseconds (`spindle_clock_uptime_microseconds`,
/// domain `clock`).
pub const KEY_UPTIME: u64 = 9;
/// Key that calls a kernel function of domain `mm`, which the manifest does not name.
pub const KEY_UNDECLARED: u64 = 10;

fn uptime(_: &Probe) -> ProbeResult {
    ProbeResult { value: spindle_abi::host::clock_uptime_microseconds() }
}

fn call_undeclared_domain(_: &Probe) -> ProbeResult {
    ProbeResult { value: spindle_abi::host::mm_lru_length() }
}

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
    // Zero for this binding's key, but not a constant the compiler can see.
    let divisor = core::hint::black_box(probe.key - KEY_DIVIDE);
    ProbeResult { value: probe.value.checked_div(divisor).unwrap() }
}

fn recurse_forever(probe: &Probe) -> ProbeResult {
    ProbeResult { value: depth(probe.value, u64::MAX) }
}

/// Allocates [`HOARD_CHUNK_BYTES`] chunks until an allocation fails (Rust's allocation-error
/// handler then panics) or [`HOARD_LIMIT_BYTES`] are held; answers the number of chunks.
fn hoard(_probe: &Probe) -> ProbeResult {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    while chunks.len() * HOARD_CHUNK_BYTES < HOARD_LIMIT_BYTES {
        // `black_box`: the chunks are never read, and unused allocations may be removed.
        chunks.push(core::hint::black_box(alloc::vec![0xa5; HOARD_CHUNK_BYTES]));
    }
    ProbeResult { value: core::hint::black_box(chunks).len() as u64 }
}

/// Collects `1..=value` into a vector and answers its sum.
fn allocate(probe: &Probe) -> ProbeResult {
    let values: Vec<u64> = (1..=probe.value).collect();
    ProbeResult { value: core::hint::black_box(values).iter().fold(0, |sum, value| sum.wrapping_add(*value)) }
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
    fn answers_and_declares_every_binding() {
        assert_eq!(answer(&Probe { key: KEY_ANSWER, value: 21 }).value, 42);
        assert_eq!(spindle_extension().bindings.len(), 9);
        // On the host nothing is installed: kernel functions answer 0.
        assert_eq!(uptime(&Probe { key: KEY_UPTIME, value: 0 }).value, 0);
        assert_eq!(call_undeclared_domain(&Probe { key: KEY_UNDECLARED, value: 0 }).value, 0);
        assert_eq!(spindle_extension().memory_quota_bytes, MEMORY_QUOTA_BYTES);
    }

    #[test]
    fn allocates_and_sums() {
        assert_eq!(allocate(&Probe { key: KEY_ALLOCATE, value: 1000 }).value, 500_500);
        assert_eq!(allocate(&Probe { key: KEY_ALLOCATE, value: 0 }).value, 0);
    }

    #[test]
    fn hoard_stops_at_its_limit_without_a_quota() {
        // On the host (like built in) nothing enforces the quota: the hoard stops itself.
        let chunks = hoard(&Probe { key: KEY_HOARD, value: 0 }).value as usize;
        assert_eq!(chunks * HOARD_CHUNK_BYTES, HOARD_LIMIT_BYTES);
    }

    #[test]
    #[should_panic]
    fn panics_on_request() {
        panic_out_of_bounds(&Probe { key: KEY_PANIC, value: 0 });
    }
}
