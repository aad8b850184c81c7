//! `spin [ROUNDS] [WORK]`: prints its pid once per round, with WORK iterations of busy
//! work between rounds and never yielding, so only timer preemption lets other processes
//! run. ROUNDS 0 spins until killed; defaults: 5 rounds of 2,000,000 iterations.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use spindle_runtime::{Arguments, arch, println};

spindle_runtime::entry!(main);

/// Rounds when none are given.
const DEFAULT_ROUNDS: u64 = 5;
/// Busy-loop iterations per round when none are given (a few milliseconds under QEMU).
const DEFAULT_WORK: u64 = 2_000_000;

fn main(arguments: &Arguments) -> i32 {
    let rounds = arguments.number_or(0, DEFAULT_ROUNDS);
    let work = arguments.number_or(1, DEFAULT_WORK);
    let pid = arch::getpid();
    let mut round = 0u64;
    while rounds == 0 || round < rounds {
        round += 1;
        let mut accumulator = 0u64;
        for iteration in 0..work {
            accumulator = core::hint::black_box(accumulator.wrapping_add(iteration));
        }
        println!("spin: pid {pid} round {round}");
    }
    0
}
