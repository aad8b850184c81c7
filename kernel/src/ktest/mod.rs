//! The in-kernel test harness.
//!
//! Booted with `spindle.mode=test`, the kernel runs every test in [`TESTS`] in order and
//! prints one machine-readable line per event, which `cargo xtask test` parses:
//!
//! ```text
//! ktest begin <count>
//! ktest run <index> <name>
//! ktest pass <index> <name>
//! ktest fail <index> <name>: <reason>
//! ktest end <passed> <failed>
//! ```
//!
//! A test that panics or takes a fatal fault stops the kernel (there is no unwinding);
//! the panic handler prints the `fail` line first, and the host restarts the kernel at the
//! next index. A test that hangs with interrupts on is failed by the tick watchdog; one
//! that hangs with interrupts off is caught by the host's timeout. Harness self-tests
//! (tests that must fail) live in [`HARNESS_TESTS`] and run only when named.

mod blockdev;
mod blockio;
mod cache_events;
mod disk;
mod fs;
#[allow(unsafe_code)]
mod events;
#[allow(unsafe_code)]
mod extensions;
#[allow(unsafe_code)]
mod harness;
mod hotload;
mod introspection;
#[allow(unsafe_code)]
mod kernel_basics;
mod leaks;
mod processes;
mod services;
mod sched_events;
mod strands;
mod upcalls;
mod vm;
mod wasm;

use alloc::string::String;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::power::{ExitStatus, exit};

/// Result of one test: `Err` carries the reason it failed.
pub type TestResult = Result<(), String>;

/// A named in-kernel test.
pub struct KernelTest {
    /// Unique name, `module::test`.
    pub name: &'static str,
    /// The test body.
    pub run: fn() -> TestResult,
}

/// Fails the current test with a formatted reason unless `condition` holds.
#[macro_export]
macro_rules! ensure {
    ($condition:expr, $($reason:tt)*) => {
        if !$condition {
            return Err(alloc::format!("{} (at {}:{})", format_args!($($reason)*), file!(), line!()));
        }
    };
}

/// Every regular test, in run order.
pub static TESTS: &[&[KernelTest]] = &[kernel_basics::TESTS, strands::TESTS, sched_events::TESTS, events::TESTS, extensions::TESTS, wasm::TESTS, hotload::TESTS, processes::TESTS, upcalls::TESTS, services::TESTS, blockdev::TESTS, disk::TESTS, fs::TESTS, cache_events::TESTS, blockio::TESTS, introspection::TESTS, vm::TESTS, leaks::TESTS];

/// Tests of the harness itself; each must be reported as a failure.
pub static HARNESS_TESTS: &[KernelTest] = harness::TESTS;

static IN_TEST_MODE: AtomicBool = AtomicBool::new(false);
static CURRENT_INDEX: AtomicUsize = AtomicUsize::new(usize::MAX);
static CURRENT_START_TICK: AtomicU64 = AtomicU64::new(0);
static WATCHDOG_SECONDS: AtomicU64 = AtomicU64::new(crate::param::TEST_WATCHDOG_SECONDS);

fn all_tests() -> impl Iterator<Item = &'static KernelTest> {
    TESTS.iter().flat_map(|group| group.iter())
}

fn test_name(index: usize) -> &'static str {
    all_tests().chain(HARNESS_TESTS.iter()).nth(index).map_or("?", |test| test.name)
}

/// Runs the tests from index `from` (only those matching `only`, if given) and exits with
/// their status.
pub fn run(from: usize, only: Option<&str>, watchdog_seconds: Option<u64>) -> ! {
    IN_TEST_MODE.store(true, Ordering::Relaxed);
    if let Err(error) = crate::time::add_tick_hook(on_tick) {
        crate::println!("ktest: no watchdog: {error}");
    }
    crate::fault::set_fatal_hook(note_fatal_event);
    WATCHDOG_SECONDS.store(watchdog_seconds.unwrap_or(crate::param::TEST_WATCHDOG_SECONDS), Ordering::Relaxed);
    let regular = all_tests().count();
    crate::println!("ktest begin {regular}");
    let mut passed = 0;
    let mut failed = 0;
    for (index, test) in all_tests().chain(HARNESS_TESTS.iter()).enumerate() {
        // `only`: a harness test by its exact name, or every regular test whose name
        // contains it (from index `from` on, so the host can resume after a crash).
        let selected = match only {
            Some(pattern) if index >= regular => pattern == test.name,
            Some(pattern) => index >= from && test.name.contains(pattern),
            None => index >= from && index < regular,
        };
        if !selected {
            continue;
        }
        crate::println!("ktest run {index} {}", test.name);
        CURRENT_START_TICK.store(crate::time::ticks(), Ordering::Relaxed);
        CURRENT_INDEX.store(index, Ordering::Relaxed);
        let result = (test.run)();
        CURRENT_INDEX.store(usize::MAX, Ordering::Relaxed);
        match result {
            Ok(()) => {
                passed += 1;
                crate::println!("ktest pass {index} {}", test.name);
            }
            Err(reason) => {
                failed += 1;
                crate::println!("ktest fail {index} {}: {reason}", test.name);
            }
        }
    }
    if only.is_some() && passed + failed == 0 {
        crate::println!("ktest fail {} {}: no such test", usize::MAX, only.unwrap_or(""));
        failed += 1;
    }
    crate::println!("ktest end {passed} {failed}");
    exit(if failed == 0 { ExitStatus::Success } else { ExitStatus::Failure })
}

/// Called by the panic and fatal-fault paths: fails the running test, if any.
pub fn note_fatal_event(what: &str) {
    let index = CURRENT_INDEX.load(Ordering::Relaxed);
    if IN_TEST_MODE.load(Ordering::Relaxed) && index != usize::MAX {
        crate::console::print_fmt_unlocked(format_args!("ktest fail {index} {}: {what}\n", test_name(index)));
    }
}

/// An error as text (what a failed [`TestResult`] carries).
pub(super) fn text(error: impl core::fmt::Display) -> alloc::string::String {
    alloc::format!("{error}")
}

/// Tells the watchdog the running test is making progress: its time starts again. For
/// tests whose work is long but measured in steps (the whole logical-disk workload on the
/// device); each step must still finish within the watchdog's time.
pub fn progress() {
    CURRENT_START_TICK.store(crate::time::ticks(), Ordering::Relaxed);
}

/// Timer-tick hook: the watchdog that fails a test running too long.
pub fn on_tick(tick: u64) {
    let index = CURRENT_INDEX.load(Ordering::Relaxed);
    if index == usize::MAX {
        return;
    }
    let seconds = WATCHDOG_SECONDS.load(Ordering::Relaxed);
    if tick.saturating_sub(CURRENT_START_TICK.load(Ordering::Relaxed)) > seconds * crate::param::TICKS_PER_SECOND {
        crate::console::print_fmt_unlocked(format_args!(
            "ktest fail {index} {}: hung (watchdog: over {seconds} s)\n",
            test_name(index)
        ));
        exit(ExitStatus::Failure);
    }
}
