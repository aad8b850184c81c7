//! Tests of the Wasm technology: load → raise → unload, bad modules refused with specific
//! errors and nothing leaked, the containment tests of the native technology run against
//! the Wasm build of `faulty`, memory growth past the limit, and one extension built both
//! ways answering an event sequence identically.
//!
//! The Wasm runtime lives in the extension's private heap (frames it owns, see
//! `mm::private_heap`); each test checks the kernel heap's allocated bytes after
//! unloading against a measurement taken after one warm-up load (the dispatcher's tables
//! keep the capacity their first bindings grew).

use alloc::string::String;
use alloc::vec::Vec;

use super::extensions::{bundled, check_contained, refused};
use super::text;
use super::{KernelTest, TestResult};
use crate::ensure;
use crate::ext::{self, ExtensionState};

/// Probe key of the `test-wasm-grows-memory` module (`xtask/src/testkexts.rs`).
const GROW_KEY: u64 = 9;

/// The Wasm tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "wasm::load_raise_unload", run: load_raise_unload },
    KernelTest { name: "wasm::bad_modules_are_refused_without_leaks", run: bad_modules_are_refused_without_leaks },
    KernelTest { name: "wasm::memory_growth_past_the_limit_is_contained", run: memory_growth_past_the_limit_is_contained },
    KernelTest { name: "wasm::panic_kills_extension", run: || wasm_contained(faulty::KEY_PANIC, "panicked") },
    KernelTest { name: "wasm::out_of_fuel_kills_extension", run: || wasm_contained(faulty::KEY_LOOP, "overran budget") },
    KernelTest { name: "wasm::divide_by_zero_kills_extension", run: || wasm_contained(faulty::KEY_DIVIDE, "panicked") },
    KernelTest { name: "wasm::stack_overflow_kills_extension", run: || wasm_contained(faulty::KEY_RECURSE, "trapped") },
    KernelTest { name: "wasm::quota_exhaustion_kills_extension", run: || wasm_contained(faulty::KEY_HOARD, "growth operation limited") },
    KernelTest { name: "wasm::allocation_within_quota", run: allocation_within_quota },
    KernelTest { name: "wasm::native_and_wasm_builds_agree", run: native_and_wasm_builds_agree },
    KernelTest { name: "wasm::replace_native_by_wasm_and_back", run: replace_native_by_wasm_and_back },
    KernelTest { name: "wasm::c_extension_loads_and_answers", run: c_extension_loads_and_answers },
    KernelTest { name: "wasm::fuel_follows_a_capped_timer_budget", run: fuel_follows_a_capped_timer_budget },
];

/// The fuel of a binding whose timer budget a primary module capped runs out before the
/// timer: at most one unit per `TIMER_BUDGET_FACTOR` instructions of what is left after
/// the call's own cost; an uncapped binding keeps the manifest's fuel.
fn fuel_follows_a_capped_timer_budget() -> TestResult {
    use ext::wasm::{CALL_ALLOWANCE, TIMER_BUDGET_FACTOR, fuel_for};
    let manifest_fuel = 10_000_000;
    ensure!(fuel_for(manifest_fuel, manifest_fuel * TIMER_BUDGET_FACTOR) == manifest_fuel, "uncapped: {}", fuel_for(manifest_fuel, manifest_fuel * TIMER_BUDGET_FACTOR));
    let tick_cap = crate::time::clock::TICK_HANDLER_BUDGET;
    let capped = fuel_for(manifest_fuel, tick_cap);
    ensure!(capped == (tick_cap - CALL_ALLOWANCE) / TIMER_BUDGET_FACTOR, "clock.Tick's cap of {tick_cap} instructions gives {capped} units");
    ensure!(CALL_ALLOWANCE + capped * TIMER_BUDGET_FACTOR <= tick_cap, "{capped} units may outlast the timer");
    ensure!(fuel_for(manifest_fuel, 100) == 1, "a budget below the allowance still gets one unit: {}", fuel_for(manifest_fuel, 100));
    ensure!(fuel_for(1000, 500_000) == 1000, "a cap above the fuel's time keeps the manifest's fuel: {}", fuel_for(1000, 500_000));
    Ok(())
}

fn settle() {
    crate::events::quiescent();
    crate::events::reclaim();
}

/// Loads and unloads `name`'s Wasm build once (see the module documentation).
fn warm_up(name: &str) -> TestResult {
    ext::load(name, ext::Preference::Wasm).map_err(text)?;
    ext::unload(name).map_err(text)?;
    settle();
    Ok(())
}

fn heap_bytes() -> usize {
    crate::mm::heap::stats().allocated_bytes
}

fn load_raise_unload() -> TestResult {
    warm_up("hello")?;
    let heap_before = heap_bytes();
    let frames_before = crate::mm::frame::stats();
    let extension = ext::load("hello", ext::Preference::Wasm).map_err(text)?;
    let technology = extension.technology;
    let usage = extension.memory_usage();
    drop(extension);
    let claimed = crate::events::console::offer_line("hello");
    let state = ext::find("hello").map(|extension| extension.state.lock().clone());
    ext::unload("hello").map_err(text)?;
    settle();
    ensure!(technology == ext::Technology::Wasm, "loaded as {technology}");
    ensure!(claimed, "the Wasm `hello` did not claim its command (state {state:?})");
    ensure!(usage.is_some_and(|usage| usage.used_bytes > 0 && usage.used_bytes <= usage.quota_bytes), "memory usage {usage:?}");
    ensure!(!crate::events::console::offer_line("hello"), "still claimed after unload");
    ensure!(crate::mm::frame::stats() == frames_before, "frames changed: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    ensure!(heap_bytes() == heap_before, "heap {} -> {} bytes", heap_before, heap_bytes());
    Ok(())
}

fn bad_modules_are_refused_without_leaks() -> TestResult {
    warm_up("hello")?;
    let hello = bundled("hello.wasm")?;
    refused("truncated Wasm container", &hello[..hello.len() / 2], "truncated")?;
    let mut tampered = hello.to_vec();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    refused("tampered signed Wasm module", &tampered, "signature")?;
    refused("invalid module", bundled("test-wasm-invalid")?, "invalid module")?;
    refused("ungranted import", bundled("test-wasm-ungranted-import")?, "spindle_clock_ticks")?;
    refused("unknown import", bundled("test-wasm-unknown-import")?, "spindle_no_such_function")?;
    refused("import from another module", bundled("test-wasm-foreign-import")?, "env.abort")?;
    refused("start function loops forever", bundled("test-wasm-start-loops")?, "ran out of fuel")?;
    refused("initial memory above the quota", bundled("test-wasm-initial-memory")?, "initial memory")?;
    Ok(())
}

fn memory_growth_past_the_limit_is_contained() -> TestResult {
    let bytes = bundled("test-wasm-grows-memory")?;
    // Warm up with the whole sequence once: the first kill on a new guard key grows
    // dispatcher capacity that is kept (see the module documentation).
    let first = ext::load_kext_bytes(bytes).map_err(text)?;
    let name = first.name.clone();
    drop(first);
    crate::events::probe::raise(GROW_KEY, 5);
    ext::unload(&name).map_err(text)?;
    settle();
    let heap_before = heap_bytes();
    let extension = ext::load_kext_bytes(bytes).map_err(text)?;
    let answer = crate::events::probe::raise(GROW_KEY, 5);
    let state = extension.state.lock().clone();
    let usage = extension.memory_usage();
    drop(extension);
    ext::unload(&name).map_err(text)?;
    ensure!(answer == 0, "the growing module's raise answered {answer}, not the default");
    ensure!(matches!(&state, ExtensionState::Killed(reason) if reason.contains("growth operation limited")), "state {state:?}");
    // The reason's copy was allocated after the first measurement.
    drop(state);
    settle();
    // One page of initial memory plus the 64 KiB quota: the grow to a third page trapped.
    ensure!(usage.is_some_and(|usage| usage.used_bytes == usage.quota_bytes && usage.quota_bytes == 2 * 65536), "memory {usage:?}");
    ensure!(heap_bytes() == heap_before, "heap {} -> {} bytes", heap_before, heap_bytes());
    Ok(())
}

fn wasm_contained(key: u64, reason: &str) -> TestResult {
    warm_up("faulty")?;
    let heap_before = heap_bytes();
    ext::load("faulty", ext::Preference::Wasm).map_err(text)?;
    let technology = ext::find("faulty").map(|extension| extension.technology);
    let outcome = check_contained(key, reason);
    let unloaded = ext::unload("faulty");
    outcome?;
    unloaded.map_err(text)?;
    settle();
    ensure!(technology == Some(ext::Technology::Wasm), "loaded as {technology:?}");
    ensure!(heap_bytes() == heap_before, "heap {} -> {} bytes after the kill and unload", heap_before, heap_bytes());
    Ok(())
}

fn allocation_within_quota() -> TestResult {
    let extension = ext::load("faulty", ext::Preference::Wasm).map_err(text)?;
    let sums: Vec<u64> = [1000u64, 10, 1000, 2000].iter().map(|&count| crate::events::probe::raise(faulty::KEY_ALLOCATE, count)).collect();
    // 32 vectors of 8 KiB, 256 KiB in all, through a 64 KiB quota: freed blocks are reused.
    let repeated = (0..32).all(|_| crate::events::probe::raise(faulty::KEY_ALLOCATE, 1000) == 500_500);
    let state = extension.state.lock().clone();
    let usage = extension.memory_usage();
    drop(extension);
    ext::unload("faulty").map_err(text)?;
    ensure!(sums == [500_500, 55, 500_500, 2_001_000], "sums {sums:?} (state {state:?})");
    ensure!(repeated && state == ExtensionState::Running, "repeated allocations failed: state {state:?}");
    ensure!(usage.is_some_and(|usage| usage.used_bytes <= usage.quota_bytes), "memory {usage:?}");
    Ok(())
}

/// The event sequence both builds answer: `KEY_ANSWER` and `KEY_ALLOCATE` over several
/// values (and keys no binding has).
fn sequence() -> Vec<u64> {
    let mut answers = Vec::new();
    for value in [0u64, 1, 21, 1 << 40, u64::MAX / 2] {
        answers.push(crate::events::probe::raise(faulty::KEY_ANSWER, value));
    }
    for value in [0u64, 1, 7, 100, 1000] {
        answers.push(crate::events::probe::raise(faulty::KEY_ALLOCATE, value));
    }
    answers.push(crate::events::probe::raise(42, 42));
    answers
}

/// `faulty`'s answers to [`sequence`] as `preference` (also used by the user-level tests;
/// a user-level build's serving process is waited for after the unload).
pub(super) fn answers_of(preference: ext::Preference) -> Result<Vec<u64>, String> {
    let extension = ext::load("faulty", preference).map_err(text)?;
    let technology = extension.technology;
    drop(extension);
    let answers = sequence();
    let state = ext::find("faulty").map(|extension| extension.state.lock().clone());
    let server = ext::user::serving_pid("faulty");
    ext::unload("faulty").map_err(text)?;
    if let Some(pid) = server {
        ensure!(crate::proc::wait_until_reaped(pid, 200), "serving process {pid} did not end after the unload");
    }
    ensure!(state == Some(ExtensionState::Running), "{technology}: state {state:?}");
    Ok(answers)
}

fn native_and_wasm_builds_agree() -> TestResult {
    let native = answers_of(ext::Preference::Default)?;
    let wasm = answers_of(ext::Preference::Wasm)?;
    let builtin = answers_of(ext::Preference::BuiltIn)?;
    ensure!(native == wasm, "native {native:?} vs Wasm {wasm:?}");
    ensure!(native == builtin, "native {native:?} vs built-in {builtin:?}");
    ensure!(native[2] == 42 && native[8] == 5050 && native[10] == 0, "answers {native:?}");
    Ok(())
}

fn replace_native_by_wasm_and_back() -> TestResult {
    ext::load("hello", ext::Preference::Default).map_err(text)?;
    let outcome = (|| -> TestResult {
        let wasm = ext::replace("hello", ext::Preference::Wasm).map_err(text)?;
        ensure!(wasm.technology == ext::Technology::Wasm, "replacement is {}", wasm.technology);
        ensure!(wasm.bindings.lock().len() == 1, "bindings {}", wasm.bindings.lock().len());
        drop(wasm);
        ensure!(crate::events::console::offer_line("hello"), "the Wasm replacement does not claim `hello`");
        let native = ext::replace("hello", ext::Preference::Default).map_err(text)?;
        ensure!(native.technology == ext::Technology::Native, "second replacement is {}", native.technology);
        drop(native);
        ensure!(crate::events::console::offer_line("hello"), "the native replacement does not claim `hello`");
        Ok(())
    })();
    let unloaded = ext::unload("hello");
    outcome?;
    unloaded.map_err(text)
}

/// `extensions/hello-c`: a C extension compiled with clang against the generated header.
fn c_extension_loads_and_answers() -> TestResult {
    let extension = ext::load("hello-c", ext::Preference::Wasm).map_err(text)?;
    let technology = extension.technology;
    drop(extension);
    let tripled = crate::events::probe::raise(hello_c::PROBE_KEY, 14);
    let claimed = crate::events::console::offer_line("hello-c");
    let state = ext::find("hello-c").map(|extension| extension.state.lock().clone());
    ext::unload("hello-c").map_err(text)?;
    ensure!(technology == ext::Technology::Wasm, "loaded as {technology}");
    ensure!(tripled == 42, "probe {} 14 answered {tripled} (state {state:?})", hello_c::PROBE_KEY);
    ensure!(claimed, "`hello-c` did not claim its console command (state {state:?})");
    Ok(())
}

/// What the C extension's source fixes (`extensions/hello-c/hello.c`).
mod hello_c {
    /// The probe key its `bench.Probe` binding answers (`value * 3`).
    pub const PROBE_KEY: u64 = 8;
}
