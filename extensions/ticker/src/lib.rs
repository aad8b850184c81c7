//! `ticker`: the first real client of the dispatcher, loaded at boot (`image.toml`).
//!
//! It watches `clock.Tick` through a declarative mask guard (`tick & 63 == 0`: one tick
//! in 64) and claims the console command `ticker` through an indexed equality guard on the
//! command's fingerprint, printing what it has seen.

#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{CLOCK_TICK, CONSOLE_LINE, ClockTick, ConsoleLine, ConsoleVerdict};
use spindle_abi::{ext_println, fingerprint_of};

/// Every how many ticks the extension samples the clock (a power of two: a mask guard).
pub const SAMPLE_PERIOD: u64 = 64;
/// The verdict tag the extension returns when it claims a console line.
pub const CLAIM_TAG: u64 = 0x71c;

spindle_abi::extension! {
    name: "ticker",
    version: "0.1.0",
    budget_microseconds: 100,
    memory_quota_bytes: 64 * 1024,
    domains: ["console"],
    bindings: [
        CLOCK_TICK when [tick & (SAMPLE_PERIOD - 1) == (0)] => sample,
        CONSOLE_LINE when [command_fingerprint == (fingerprint_of("ticker").0)] => report,
    ],
}

static SAMPLES: AtomicU64 = AtomicU64::new(0);
static LAST_TICK: AtomicU64 = AtomicU64::new(0);

/// Counts a sampled tick.
fn sample(tick: &ClockTick) {
    SAMPLES.fetch_add(1, Ordering::Relaxed);
    LAST_TICK.store(tick.tick, Ordering::Relaxed);
}

/// Prints what was sampled and claims the line.
fn report(_: &ConsoleLine) -> ConsoleVerdict {
    ext_println!(
        "ticker: sampled {} ticks (one in {SAMPLE_PERIOD}), last at tick {}",
        SAMPLES.load(Ordering::Relaxed),
        LAST_TICK.load(Ordering::Relaxed)
    );
    ConsoleVerdict { claimed: CLAIM_TAG }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_abi::extension::GuardDecl;

    #[test]
    fn samples_one_tick_in_sixty_four() {
        let declaration = spindle_extension();
        assert_eq!(declaration.bindings.len(), 2);
        assert_eq!(declaration.bindings[0].guards(), &[GuardDecl::Mask { field: 0, mask: SAMPLE_PERIOD - 1, value: 0 }]);
        sample(&ClockTick { tick: 128, hart: 0 });
        assert_eq!(LAST_TICK.load(Ordering::Relaxed), 128);
        assert!(SAMPLES.load(Ordering::Relaxed) >= 1);
        let line = ConsoleLine { length: 6, first_byte: b't' as u64, command_fingerprint: fingerprint_of("ticker").0, sequence: 1 };
        assert_eq!(report(&line).claimed, CLAIM_TAG);
    }
}
