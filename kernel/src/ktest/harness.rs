//! Harness self-tests: each must be reported as a failure by `cargo xtask test`, which
//! proves that a failing, panicking, faulting or hanging test cannot pass.

use super::{KernelTest, TestResult};

/// An address in the never-mapped first page (not null, so no debug null check fires).
const UNMAPPED_ADDRESS: usize = 0x8;

/// The harness self-tests (run only by name).
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "harness::fails", run: fails },
    KernelTest { name: "harness::panics", run: panics },
    KernelTest { name: "harness::faults", run: faults },
    KernelTest { name: "harness::hangs", run: hangs },
    KernelTest { name: "harness::hangs_with_interrupts_off", run: hangs_with_interrupts_off },
];

fn fails() -> TestResult {
    crate::ensure!(1 + 1 == 3, "arithmetic is not broken, so this must fail");
    Ok(())
}

fn panics() -> TestResult {
    let values: alloc::vec::Vec<u32> = alloc::vec![1, 2, 3];
    let index = values.len() + core::hint::black_box(2);
    // Index out of bounds: a real panic, not a call to `panic!`.
    let _ = values[index];
    Ok(())
}

fn faults() -> TestResult {
    // An unmapped load with no recovery point: a fatal kernel fault.
    // SAFETY: the first page is never mapped; the load traps and the kernel stops.
    let value = unsafe { core::ptr::read_volatile(core::hint::black_box(UNMAPPED_ADDRESS) as *const u64) };
    Err(alloc::format!("load from {UNMAPPED_ADDRESS:#x} returned {value}"))
}

fn hangs() -> TestResult {
    loop {
        core::hint::spin_loop();
    }
}

fn hangs_with_interrupts_off() -> TestResult {
    crate::arch::csr::disable_interrupts();
    loop {
        core::hint::spin_loop();
    }
}
