//! `hello`: the smallest useful Spindle extension.
//!
//! It claims the console command `hello` (an indexed equality guard on the command's
//! fingerprint, so it never sees other lines) and answers with a greeting and how many
//! times it has greeted. The same source builds as every technology: built into the
//! kernel, as a signed native `.kext` (`cargo xtask ext build hello`), and later as Wasm
//! and as a user-level server.

#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{CONSOLE_LINE, ConsoleLine, ConsoleVerdict};
use spindle_abi::{ext_println, fingerprint_of};

spindle_abi::extension! {
    name: "hello",
    version: "0.1.0",
    budget_microseconds: 20_000,
    memory_quota_bytes: 64 * 1024,
    domains: ["console", "clock"],
    bindings: [
        CONSOLE_LINE when [command_fingerprint == (fingerprint_of("hello").0)] => greet,
    ],
}

/// The verdict tag `hello` returns when it claims a line.
pub const HELLO_TAG: u64 = 0x4e110;

static GREETINGS: AtomicU64 = AtomicU64::new(0);

/// Greets, counting greetings, and claims the line.
fn greet(line: &ConsoleLine) -> ConsoleVerdict {
    let count = GREETINGS.fetch_add(1, Ordering::Relaxed) + 1;
    ext_println!(
        "hello from the `hello` extension: greeting #{count}, console line #{} ({} bytes), tick {}",
        line.sequence,
        line.length,
        spindle_abi::host::clock_ticks()
    );
    ConsoleVerdict { claimed: HELLO_TAG }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_hello_lines_and_counts() {
        let declaration = spindle_extension();
        assert_eq!(declaration.name, "hello");
        assert_eq!(declaration.bindings.len(), 1);
        let line = ConsoleLine { length: 5, first_byte: b'h' as u64, command_fingerprint: fingerprint_of("hello").0, sequence: 1 };
        assert_eq!(greet(&line).claimed, HELLO_TAG);
        assert_eq!(greet(&line).claimed, HELLO_TAG);
        assert!(GREETINGS.load(Ordering::Relaxed) >= 2);
    }
}
