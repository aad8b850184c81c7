//! Time: the periodic timer tick (SBI timer) and uptime.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::{csr, sbi};
use crate::param::TICKS_PER_SECOND;

/// QEMU virt's timebase, used if the device tree does not say.
const DEFAULT_TIMEBASE_HZ: u64 = 10_000_000;

static TIMEBASE_HZ: AtomicU64 = AtomicU64::new(DEFAULT_TIMEBASE_HZ);
static TICKS: AtomicU64 = AtomicU64::new(0);
static BOOT_TIME: AtomicU64 = AtomicU64::new(0);

/// Timer ticks per timer interrupt period.
fn tick_interval() -> u64 {
    TIMEBASE_HZ.load(Ordering::Relaxed) / TICKS_PER_SECOND
}

/// Starts the periodic tick on this hart with the given timebase frequency.
pub fn init(timebase_hz: u64) {
    if timebase_hz > 0 {
        TIMEBASE_HZ.store(timebase_hz, Ordering::Relaxed);
    }
    BOOT_TIME.store(csr::time() as u64, Ordering::Relaxed);
    sbi::set_timer(csr::time() as u64 + tick_interval());
    csr::enable_interrupt_sources(csr::SIE_STIE);
}

/// Called from the trap handler on each timer interrupt.
pub fn on_timer_interrupt() {
    sbi::set_timer(csr::time() as u64 + tick_interval());
    let tick = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
    crate::ktest::on_tick(tick);
}

/// Timer interrupts taken since boot.
pub fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

/// The timebase frequency in Hz.
pub fn timebase_hz() -> u64 {
    TIMEBASE_HZ.load(Ordering::Relaxed)
}

/// Time since boot in microseconds (from the `time` CSR).
pub fn uptime_micros() -> u64 {
    let elapsed = csr::time() as u64 - BOOT_TIME.load(Ordering::Relaxed);
    elapsed * 1_000_000 / timebase_hz()
}
