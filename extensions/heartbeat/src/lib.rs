//! `heartbeat`: an extension that handles every clock tick.
//!
//! Its tick handler is as small as a handler can be (one atomic add), so it is the
//! reference for "a healthy extension is never killed": it runs 100 times a second under
//! the clock's budget cap (100 us, below the 1 ms it asks for; the load reports the cap)
//! in every technology, and `heartbeat` on the console reports how
//! many ticks it has seen. The kernel's tests load it without `-icount` on a busy host and
//! require zero kills.

#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{CLOCK_TICK, CONSOLE_LINE, ClockTick, ConsoleLine, ConsoleVerdict};
use spindle_abi::{ext_println, fingerprint_of};

spindle_abi::extension! {
    name: "heartbeat",
    version: "0.1.0",
    budget_microseconds: 1_000,
    memory_quota_bytes: 64 * 1024,
    domains: ["console", "clock"],
    bindings: [
        CLOCK_TICK => beat,
        CONSOLE_LINE when [command_fingerprint == (fingerprint_of("heartbeat").0)] => report,
    ],
}

/// The verdict tag `heartbeat` returns when it claims a line.
pub const HEARTBEAT_TAG: u64 = 0x4ea7;

static BEATS: AtomicU64 = AtomicU64::new(0);
static LAST_TICK: AtomicU64 = AtomicU64::new(0);

/// Counts one tick.
fn beat(tick: &ClockTick) {
    BEATS.fetch_add(1, Ordering::Relaxed);
    LAST_TICK.store(tick.tick, Ordering::Relaxed);
}

/// Reports the ticks seen and claims the line.
fn report(_: &ConsoleLine) -> ConsoleVerdict {
    ext_println!("heartbeat: {} ticks seen, last tick {}", BEATS.load(Ordering::Relaxed), LAST_TICK.load(Ordering::Relaxed));
    ConsoleVerdict { claimed: HEARTBEAT_TAG }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_ticks_and_claims_its_command() {
        let declaration = spindle_extension();
        assert_eq!(declaration.name, "heartbeat");
        assert_eq!(declaration.bindings.len(), 2);
        let before = BEATS.load(Ordering::Relaxed);
        beat(&ClockTick { tick: 7, hart: 0 });
        beat(&ClockTick { tick: 8, hart: 0 });
        assert_eq!(BEATS.load(Ordering::Relaxed) - before, 2);
        assert_eq!(LAST_TICK.load(Ordering::Relaxed), 8);
        let line = ConsoleLine { length: 9, first_byte: b'h' as u64, command_fingerprint: fingerprint_of("heartbeat").0, sequence: 1 };
        assert_eq!(report(&line).claimed, HEARTBEAT_TAG);
    }
}
