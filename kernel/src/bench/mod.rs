//! In-kernel benchmarks: instruction counts per operation, measured with `rdinstret`.
//!
//! Booted with `spindle.mode=bench` (by `cargo xtask bench`, under QEMU
//! `-icount shift=0,align=off,sleep=off`, where the count is exact and identical run to
//! run), the kernel runs every benchmark with interrupts off and prints one line each:
//!
//! ```text
//! bench begin
//! bench row <group> <name> <iterations> <instructions-per-op ×1000>
//! bench end
//! ```
//!
//! Each measurement runs the operation `iterations` times in a loop and subtracts the
//! same loop with an empty body (the *empty-loop baseline*), so a row is the cost of
//! the operation alone. Blind spots: instruction counts ignore caches, TLBs, branch
//! prediction and memory latency; QEMU executes misaligned accesses for free.

mod calls;
mod dispatch;
mod extensions;
pub mod grafts;
mod scheduling;

use crate::arch::csr;

/// Default repetitions for per-call costs (≥ 1,000 as the method requires).
pub const DEFAULT_ITERATIONS: u64 = 10_000;

/// Measures `operation(i)` for i in 0..iterations; returns instructions per operation
/// ×1000 (fixed-point, so fractional costs survive), the empty-loop baseline removed.
pub fn measure(iterations: u64, mut operation: impl FnMut(u64)) -> u64 {
    csr::without_interrupts(|| {
        let baseline = {
            let start = csr::instret();
            for index in 0..iterations {
                core::hint::black_box(index);
            }
            csr::instret() - start
        };
        let measured = {
            let start = csr::instret();
            for index in 0..iterations {
                operation(core::hint::black_box(index));
            }
            csr::instret() - start
        };
        (measured.saturating_sub(baseline) as u64) * 1000 / iterations
    })
}

/// Prints one result row in the format `xtask bench` parses.
pub fn report(group: &str, name: &str, iterations: u64, per_operation_milli: u64) {
    crate::println!("bench row {group} {name} {iterations} {per_operation_milli}");
}

/// Runs every benchmark and exits.
pub fn run() -> ! {
    crate::println!("bench begin");
    calls::run();
    dispatch::run();
    scheduling::run();
    extensions::run();
    let grafts_clean = grafts::run();
    if !grafts_clean {
        // No `bench end`: xtask reports the run as failed.
        crate::println!("bench FAILED: a graft answered wrongly");
        crate::power::exit(crate::power::ExitStatus::Failure)
    }
    crate::println!("bench end");
    crate::power::exit(crate::power::ExitStatus::Success)
}
