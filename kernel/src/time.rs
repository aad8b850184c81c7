//! Time: the periodic timer tick (SBI timer) and uptime.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::{csr, sbi};
use crate::param::TICKS_PER_SECOND;

/// QEMU virt's timebase, used if the device tree does not say.
const DEFAULT_TIMEBASE_HZ: u64 = 10_000_000;

static SSTC: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Whether the timer is programmed through `stimecmp` (Sstc) rather than SBI calls.
pub fn uses_sstc() -> bool {
    SSTC.load(Ordering::Relaxed)
}

static TIMEBASE_HZ: AtomicU64 = AtomicU64::new(DEFAULT_TIMEBASE_HZ);
static TICKS: AtomicU64 = AtomicU64::new(0);
static BOOT_TIME: AtomicU64 = AtomicU64::new(0);
/// `time` value of the next periodic tick.
static NEXT_TICK: AtomicU64 = AtomicU64::new(0);

/// Timer ticks per timer interrupt period.
fn tick_interval() -> u64 {
    TIMEBASE_HZ.load(Ordering::Relaxed) / TICKS_PER_SECOND
}

/// Starts the periodic tick on this hart with the given timebase frequency.
pub fn init(timebase_hz: u64) {
    if timebase_hz > 0 {
        TIMEBASE_HZ.store(timebase_hz, Ordering::Relaxed);
    }
    SSTC.store(sbi::enable_sstc(crate::devicetree::isa()), Ordering::Relaxed);
    let now = csr::time() as u64;
    BOOT_TIME.store(now, Ordering::Relaxed);
    NEXT_TICK.store(now + tick_interval(), Ordering::Relaxed);
    program_timer();
    csr::enable_interrupt_sources(csr::SIE_STIE);
}

/// Programs the timer for the earlier of the next tick and this hart's budget deadline.
pub fn program_timer() {
    let next_tick = NEXT_TICK.load(Ordering::Relaxed);
    let deadline = crate::arch::hart::current().budget_deadline.load(Ordering::Relaxed);
    let next = if deadline != 0 { next_tick.min(deadline) } else { next_tick };
    sbi::set_timer(next);
}

/// Called from the trap handler on each timer interrupt (tick or budget deadline).
pub fn on_timer_interrupt() {
    if tick() {
        crate::sched::on_tick();
    }
}

/// Called by a process's strand after a timer interrupt stopped its U-mode code: the same
/// tick as [`on_timer_interrupt`], but the scheduler only says whether it wants the hart
/// back, so that the strand gives it up in thread context — where `sched.Checkpoint` can
/// be raised ([`crate::sched::preempt_for_time_slice`]).
pub fn on_user_timer_interrupt() -> bool {
    tick() && crate::sched::on_tick_deferring_preemption()
}

/// The tick's own work; true if a periodic tick was due (false: a budget deadline only).
fn tick() -> bool {
    let now = csr::time() as u64;
    let next_tick = NEXT_TICK.load(Ordering::Relaxed);
    if now >= next_tick {
        // Skip ticks that were missed (e.g. with interrupts off) instead of bursting.
        let interval = tick_interval();
        let missed = (now - next_tick) / interval;
        NEXT_TICK.store(next_tick + (missed + 1) * interval, Ordering::Relaxed);
        let tick = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
        crate::ktest::on_tick(tick);
        crate::events::clock::on_tick();
        program_timer();
        return true;
    }
    program_timer();
    false
}

/// Converts microseconds to `time` CSR units.
pub fn micros_to_timebase(micros: u64) -> u64 {
    micros.saturating_mul(timebase_hz()) / 1_000_000
}

/// The current `time` CSR value.
pub fn now() -> u64 {
    csr::time() as u64
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
