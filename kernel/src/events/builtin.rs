//! `ticker`, a built-in extension: the first real client of the dispatcher.
//!
//! It watches `clock.Tick` through an indexed declarative guard (`tick & 63 == 0`: one
//! tick in 64) and claims the console command `ticker` through an equality guard on the
//! command's fingerprint, printing what it has seen. Installed at boot; visible in
//! `events`.

use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{CLOCK_TICK, CONSOLE_LINE, ClockTick, ConsoleLine, ConsoleVerdict, EventRecord, field_index};
use spindle_abi::fingerprint_of;
use spindle_dispatch::{BindingId, BindingSpec, DeclarativeGuard, InstallError, handler_fn};

/// The extension's name (the owner of its bindings).
pub const NAME: &str = "ticker";
/// Every how many ticks the extension samples the clock (a power of two: a mask guard).
pub const SAMPLE_PERIOD: u64 = 64;
/// The verdict tag the extension returns when it claims a console line.
pub const CLAIM_TAG: u64 = 0x71c;

const TICK_FIELD: usize = match field_index(ClockTick::FIELDS, "tick") {
    Some(index) => index,
    None => panic!("ClockTick has no tick field"),
};

static SAMPLES: AtomicU64 = AtomicU64::new(0);
static LAST_TICK: AtomicU64 = AtomicU64::new(0);

/// Ticks sampled so far.
pub fn samples() -> u64 {
    SAMPLES.load(Ordering::Relaxed)
}

/// Installs the extension's two bindings.
pub fn install() -> Result<(BindingId, BindingId), InstallError> {
    let dispatcher = super::dispatcher();
    let on_tick = handler_fn("ticker.sample", |tick: &ClockTick| {
        SAMPLES.fetch_add(1, Ordering::Relaxed);
        LAST_TICK.store(tick.tick, Ordering::Relaxed);
        Ok(())
    });
    let tick_binding = dispatcher.install(
        &CLOCK_TICK,
        BindingSpec::new(NAME, on_tick).when(DeclarativeGuard::mask(TICK_FIELD, SAMPLE_PERIOD - 1, 0)),
    )?;
    let on_line = handler_fn("ticker.report", |_: &ConsoleLine| {
        crate::println!(
            "ticker: sampled {} ticks (one in {SAMPLE_PERIOD}), last at tick {}",
            SAMPLES.load(Ordering::Relaxed),
            LAST_TICK.load(Ordering::Relaxed)
        );
        Ok(ConsoleVerdict { claimed: CLAIM_TAG })
    });
    let line_binding = dispatcher.install(
        &CONSOLE_LINE,
        BindingSpec::new(NAME, on_line).when(DeclarativeGuard::equals(super::console::COMMAND_FIELD, fingerprint_of(NAME).0)),
    )?;
    Ok((tick_binding, line_binding))
}
