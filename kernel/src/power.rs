//! Leaving the machine: the `sifive_test` finisher reports pass/fail to QEMU.
//!
//! Writing `0x5555` exits QEMU with status 0; `(code << 16) | 0x3333` exits with status
//! `code` when QEMU runs with `-action panic=exit-failure` (xtask always passes it).

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::memlayout::{DEFAULT_TEST_DEVICE_BASE, SMALL_DEVICE_WINDOW};
use crate::mmio::MmioRegion;

const FINISHER_PASS: u32 = 0x5555;
const FINISHER_FAIL: u32 = 0x3333;

static TEST_DEVICE_BASE: AtomicUsize = AtomicUsize::new(DEFAULT_TEST_DEVICE_BASE);

/// Exit statuses the kernel reports to the host (one definition with `xtask`'s, in the ABI).
pub use spindle_abi::machine::MachineExit as ExitStatus;

/// Uses the finisher device at `base` (from the device tree).
pub fn init(base: usize) {
    TEST_DEVICE_BASE.store(base, Ordering::Relaxed);
}

/// Stops the machine with `status`.
pub fn exit(status: ExitStatus) -> ! {
    let code = status.code() as u32;
    let value = if code == 0 { FINISHER_PASS } else { (code << 16) | FINISHER_FAIL };
    // SAFETY: the base is the device tree's sifive_test node (or the virt default), a
    // device window mapped by the kernel page table.
    let device = unsafe { MmioRegion::new(TEST_DEVICE_BASE.load(Ordering::Relaxed), SMALL_DEVICE_WINDOW) };
    device.write_u32(0, value);
    // Only reached without a finisher device.
    crate::arch::sbi::shutdown()
}
