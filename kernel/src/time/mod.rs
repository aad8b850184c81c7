//! Time: the periodic timer tick (SBI timer), uptime, and what a budget means.
//!
//! **Budgets.** Every handler budget in the kernel is a span of guest time in nanoseconds
//! (a manifest's `budget_microseconds` × 1,000), enforced by a deadline that the timer
//! interrupt checks, armed lazily ([`budget_deadline`], the one place the unit is
//! converted; `arch::recovery` and docs/budgets.md say how). How that span relates to
//! the work a handler does depends on the guest clock ([`ClockMode`]):
//! - **exact** (`-icount shift=0`, what `cargo xtask qemu`, `test` and `bench` use): QEMU
//!   advances guest time by one nanosecond per instruction executed, so a budget is an
//!   exact instruction count and `rdinstret` counts instructions; nothing on the host can
//!   make a handler overrun.
//! - **host** (QEMU without `-icount`, `cargo xtask qemu --host-clock`): guest time is the
//!   host's time, which also runs while QEMU translates code or the host deschedules it,
//!   and `rdinstret` reads the host's cycle counter. A deadline of the declared budget
//!   would kill healthy handlers, so the kill deadline is stretched to
//!   [`HOST_CLOCK_SLACK`] × the budget, and never less than [`HOST_CLOCK_FLOOR_MICROS`]:
//!   a runaway handler is still stopped, a healthy one is never killed by host noise.
//!   Counters are then labelled `host-ticks`, not instructions.

/// The clock service's event, `clock.Tick`, and its primary module.
#[deny(unsafe_code)]
pub mod clock;

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::{csr, sbi};
use crate::param::TICKS_PER_SECOND;

/// QEMU virt's timebase, used if the device tree does not say.
const DEFAULT_TIMEBASE_HZ: u64 = 10_000_000;

/// How guest time relates to executed instructions (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockMode {
    /// One nanosecond of guest time per instruction (`-icount shift=0`): budgets are
    /// instruction counts and `rdinstret` is exact.
    Exact,
    /// Guest time is host time and `rdinstret` counts host cycles: budgets are stretched
    /// time limits and counters are not instructions.
    Host,
}

impl ClockMode {
    /// The word for the clock in listings (`exact` or `host`).
    pub fn name(self) -> &'static str {
        match self {
            ClockMode::Exact => "exact",
            ClockMode::Host => "host",
        }
    }

    /// One line saying what a budget and the counters mean in this mode (boot log,
    /// `events`, `ext show`).
    pub fn budget_meaning(self) -> alloc::string::String {
        match self {
            ClockMode::Exact => alloc::string::String::from(
                "budgets are guest time, 1 us = 1,000 instructions exactly (-icount); counters in instructions",
            ),
            ClockMode::Host => alloc::format!(
                "guest time is host time (no -icount): a handler is killed only past {HOST_CLOCK_SLACK} x its budget and at least {} ms; counters in host-ticks, not instructions",
                HOST_CLOCK_FLOOR_MICROS / 1_000
            ),
        }
    }

    /// The unit of the per-binding counter read with `rdinstret` (`instructions` or
    /// `host-ticks`): an inexact count is never called instructions.
    pub fn counter_unit(self) -> &'static str {
        match self {
            ClockMode::Exact => "instructions",
            ClockMode::Host => "host-ticks",
        }
    }
}

/// Host clock: the kill deadline is this many times the declared budget …
pub const HOST_CLOCK_SLACK: u64 = 20;
/// … and never less than this many microseconds (QEMU's translation of a large handler
/// such as the Wasm interpreter, or the host descheduling QEMU, takes milliseconds).
pub const HOST_CLOCK_FLOOR_MICROS: u64 = 250_000;

/// Guest-time nanoseconds per instruction under `-icount shift=0`: the nominal 1 GHz
/// clock budgets are stated in.
pub const NANOSECONDS_PER_INSTRUCTION: u64 = 1;

/// Whether [`CLOCK_MODE`] is [`ClockMode::Host`] (false: exact, the default until
/// [`init`] has measured).
static HOST_CLOCK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The guest clock found at boot (or forced with `spindle.clock=exact|host`).
pub fn clock_mode() -> ClockMode {
    if HOST_CLOCK.load(Ordering::Relaxed) { ClockMode::Host } else { ClockMode::Exact }
}

/// Forces the clock mode (tests of both modes' arithmetic, and the boot argument).
pub fn set_clock_mode(mode: ClockMode) {
    HOST_CLOCK.store(mode == ClockMode::Host, Ordering::Relaxed);
}

/// A manifest's `budget_microseconds` as the dispatcher's budget: nanoseconds of guest
/// time (at least 1). The one place the manifest's unit is converted.
pub const fn budget_from_micros(micros: u64) -> u64 {
    let nanoseconds = micros.saturating_mul(1_000);
    if nanoseconds == 0 { 1 } else { nanoseconds }
}

/// The timer deadline (a `time` value) for a handler call that starts now with a budget
/// of `budget_nanoseconds` of guest time, in the current [`ClockMode`]. The one place a
/// budget is turned into time.
///
/// On every bounded call's path: one load of the mode, one division by the timebase period
/// computed at boot.
#[inline]
pub fn budget_deadline(budget_nanoseconds: u64) -> u64 {
    now().saturating_add(budget_in_ticks(budget_nanoseconds))
}

/// Timebase ticks a budget of `budget_nanoseconds` allows in this boot's clock mode (at
/// least one): what [`budget_deadline`] adds to the time. The dispatcher converts each
/// bounded binding's budget once, at installation, so a raise only adds.
pub fn budget_in_ticks(budget_nanoseconds: u64) -> u64 {
    budget_ticks(budget_nanoseconds, clock_mode(), NANOSECONDS_PER_TIMEBASE_TICK.load(Ordering::Relaxed))
}

/// Nanoseconds per tick of the timebase (100 at QEMU virt's 10 MHz), set by [`init`].
static NANOSECONDS_PER_TIMEBASE_TICK: AtomicU64 = AtomicU64::new(1_000_000_000 / DEFAULT_TIMEBASE_HZ);

/// Timebase ticks a budget of `budget_nanoseconds` allows in `mode` at `timebase_hz`
/// (at least one tick).
pub fn budget_timebase_ticks(budget_nanoseconds: u64, mode: ClockMode, timebase_hz: u64) -> u64 {
    budget_ticks(budget_nanoseconds, mode, (1_000_000_000 / timebase_hz.max(1)).max(1))
}

#[inline]
fn budget_ticks(budget_nanoseconds: u64, mode: ClockMode, nanoseconds_per_tick: u64) -> u64 {
    let nanoseconds = match mode {
        ClockMode::Exact => budget_nanoseconds,
        ClockMode::Host => budget_nanoseconds.saturating_mul(HOST_CLOCK_SLACK).max(HOST_CLOCK_FLOOR_MICROS * 1_000),
    };
    (nanoseconds / nanoseconds_per_tick.max(1)).max(1)
}

/// Measures which clock QEMU gives the guest: under `-icount shift=0` the instruction
/// counter advances exactly 10^9 / timebase_hz per timebase tick; without it, it reads the
/// host's cycle counter, which runs at an unrelated rate. Spins for about 100 µs.
fn measure_clock_mode(timebase_hz: u64) -> ClockMode {
    let span = (timebase_hz / 10_000).max(1); // 100 µs of timebase ticks
    let start_time = csr::time() as u64;
    // Start on a tick edge so both counters cover the same interval.
    while csr::time() as u64 == start_time {}
    let (time_0, instructions_0) = (csr::time() as u64, csr::instret() as u64);
    while (csr::time() as u64) < time_0 + span {}
    let (time_1, instructions_1) = (csr::time() as u64, csr::instret() as u64);
    let expected = (time_1 - time_0) * 1_000_000_000 / timebase_hz / NANOSECONDS_PER_INSTRUCTION;
    let measured = instructions_1.wrapping_sub(instructions_0);
    // Two timebase ticks of slack for where in a tick each read fell.
    let slack = 2 * 1_000_000_000 / timebase_hz;
    if measured.abs_diff(expected) <= slack { ClockMode::Exact } else { ClockMode::Host }
}

/// Applies `spindle.clock=exact|host` from the command line, or measures the clock.
fn choose_clock_mode(timebase_hz: u64) {
    let forced = match crate::bootargs::value(crate::devicetree::bootargs(), "spindle.clock") {
        Some("exact") => Some(ClockMode::Exact),
        Some("host") => Some(ClockMode::Host),
        _ => None,
    };
    let mode = forced.unwrap_or_else(|| measure_clock_mode(timebase_hz));
    set_clock_mode(mode);
}

/// Most tick hooks that can be registered.
pub const MAX_TICK_HOOKS: usize = 4;

/// Called on every periodic tick in interrupt context, in registration order (the clock
/// service, the test harness's watchdog): layers above register them, so this module
/// calls nothing above itself.
static TICK_HOOKS: [spin::Once<fn(u64)>; MAX_TICK_HOOKS] = [const { spin::Once::new() }; MAX_TICK_HOOKS];
/// Hooks registered so far.
static TICK_HOOK_COUNT: AtomicU64 = AtomicU64::new(0);

/// Adds a tick hook, called with the tick number on every tick. It runs in interrupt
/// context: it must not block or allocate. Errors (a kernel bug): all
/// [`MAX_TICK_HOOKS`] are taken.
pub fn add_tick_hook(hook: fn(u64)) -> Result<(), &'static str> {
    let slot = TICK_HOOK_COUNT.fetch_add(1, Ordering::Relaxed) as usize;
    let Some(once) = TICK_HOOKS.get(slot) else { return Err("every tick hook is taken (time::MAX_TICK_HOOKS)") };
    once.call_once(|| hook);
    Ok(())
}

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
    NANOSECONDS_PER_TIMEBASE_TICK.store((1_000_000_000 / TIMEBASE_HZ.load(Ordering::Relaxed).max(1)).max(1), Ordering::Relaxed);
    choose_clock_mode(TIMEBASE_HZ.load(Ordering::Relaxed));
    let now = csr::time() as u64;
    BOOT_TIME.store(now, Ordering::Relaxed);
    NEXT_TICK.store(now + tick_interval(), Ordering::Relaxed);
    program_timer();
    csr::enable_interrupt_sources(csr::SIE_STIE);
}

/// Programs the timer for the earliest of the next tick, this hart's budget deadline and
/// the alarm.
pub fn program_timer() {
    let next_tick = NEXT_TICK.load(Ordering::Relaxed);
    let deadline = crate::arch::hart::current().budget_deadline.load(Ordering::Relaxed);
    let alarm = ALARM_AT.load(Ordering::Relaxed);
    let next = [deadline, alarm].into_iter().filter(|&at| at != 0).fold(next_tick, u64::min);
    sbi::set_timer(next);
}

/// When the alarm goes off (`time` CSR units; 0: not set).
static ALARM_AT: AtomicU64 = AtomicU64::new(0);
/// What runs when it does (interrupt context), registered by the layer above that owns
/// the alarm (the block service, which delivers a disk completion at its modelled time).
static ALARM_HOOK: spin::Once<fn()> = spin::Once::new();

/// Registers the alarm's hook (first call wins). It runs in interrupt context: it must not
/// block or allocate.
pub fn set_alarm_hook(hook: fn()) {
    ALARM_HOOK.call_once(|| hook);
}

/// Sets the one alarm to go off at guest time `at_ns` (nanoseconds since boot; at once if
/// that has passed), replacing any earlier setting; the hook then runs from the timer
/// interrupt. Without `-icount`'s sleep, an idle machine jumps straight to it.
pub fn set_alarm(at_ns: u64) {
    let hz = timebase_hz().max(1);
    let at = ((at_ns as u128 * hz as u128).div_ceil(1_000_000_000) as u64).max(1);
    ALARM_AT.store(at, Ordering::Relaxed);
    crate::arch::csr::without_interrupts(program_timer);
}

/// Guest time since boot in nanoseconds (the `time` CSR scaled by the timebase).
pub fn now_ns() -> u64 {
    let hz = timebase_hz().max(1);
    (csr::time() as u128 * 1_000_000_000 / hz as u128) as u64
}

/// Runs the alarm's hook if it is due (every timer interrupt checks).
fn ring_alarm(now: u64) {
    let at = ALARM_AT.load(Ordering::Relaxed);
    if at != 0
        && now >= at
        && ALARM_AT.compare_exchange(at, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        && let Some(hook) = ALARM_HOOK.get()
    {
        hook();
    }
}

/// The clock's part of a timer interrupt (tick or budget deadline): counts a periodic tick
/// if one was due, runs the tick hooks, and programs the next interrupt. True if a periodic
/// tick was due (false: a budget deadline only). The scheduler's timer-interrupt entry
/// (`sched::on_timer_interrupt`) calls it, so this module names nothing above itself.
pub fn tick() -> bool {
    let now = csr::time() as u64;
    ring_alarm(now);
    let next_tick = NEXT_TICK.load(Ordering::Relaxed);
    if now >= next_tick {
        // Skip ticks that were missed (e.g. with interrupts off) instead of bursting.
        let interval = tick_interval();
        let missed = (now - next_tick) / interval;
        NEXT_TICK.store(next_tick + (missed + 1) * interval, Ordering::Relaxed);
        let tick = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
        for hook in TICK_HOOKS.iter().map_while(spin::Once::get) {
            hook(tick);
        }
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
