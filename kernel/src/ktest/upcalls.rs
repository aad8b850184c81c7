//! Tests of the user-level technology: an extension built as a user program serves its
//! events by upcalls — it answers like its native build, its misbehaviour (panic,
//! endless loop, U-mode fault) is contained exactly like the other technologies' (the
//! event falls back to its default, the extension is killed with the reason, the serving
//! process ends), and unloading or killing the process leaves no frame behind.


use super::extensions::check_contained;
use super::text;
use super::{KernelTest, TestResult};
use crate::ensure;
use crate::ext::{self, ExtensionState};
use crate::proc::{self, Parent};

/// The user-level tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "upcall::load_raise_unload", run: load_raise_unload },
    KernelTest { name: "upcall::user_level_and_native_builds_agree", run: builds_agree },
    KernelTest { name: "upcall::panic_kills_extension", run: || user_contained(faulty::KEY_PANIC, "panicked") },
    KernelTest { name: "upcall::endless_loop_is_timed_out", run: || user_contained(faulty::KEY_LOOP, "overran budget") },
    KernelTest { name: "upcall::stack_overflow_kills_extension", run: || user_contained(faulty::KEY_RECURSE, "trapped") },
    KernelTest { name: "upcall::killing_the_process_withdraws_the_extension", run: killing_the_process_withdraws },
    KernelTest { name: "upcall::missing_build_is_refused", run: missing_build_is_refused },
];

/// The serving process of the loaded user-level extension `name`.
fn serving_pid(name: &str) -> Option<u64> {
    ext::user::serving_pid(name)
}

/// Waits (at most 2 s) until process `pid` has ended and been reaped (serving processes
/// are detached).
fn wait_until_gone(pid: u64) -> TestResult {
    if proc::wait_until_reaped(pid, 200) {
        return Ok(());
    }
    let process = proc::find(pid).ok_or("vanished")?;
    Err(alloc::format!(
        "serving process {pid} still exists 2 s after serving ended (status {:?}, {} system calls, parent {})",
        process.exit_status(),
        process.system_calls(),
        process.parent()
    ))
}

/// Loads and unloads `name`'s user-level build once: the first load grows tables that
/// keep their capacity (the process table, the dispatcher's), which is not a leak.
fn warm_up(name: &str) -> TestResult {
    ext::load(name, ext::Preference::User).map_err(text)?;
    let pid = serving_pid(name).ok_or("no serving process")?;
    ext::unload(name).map_err(text)?;
    wait_until_gone(pid)
}

fn load_raise_unload() -> TestResult {
    warm_up("hello")?;
    let frames_before = crate::mm::frame::stats();
    let extension = ext::load("hello", ext::Preference::User).map_err(text)?;
    let technology = extension.technology;
    drop(extension);
    let pid = serving_pid("hello").ok_or("no serving process")?;
    let running = proc::find(pid).is_some_and(|process| process.exit_status().is_none());
    let claimed = crate::events::console::offer_line("hello");
    let state = ext::find("hello").map(|extension| extension.state.lock().clone());
    ext::unload("hello").map_err(text)?;
    ensure!(technology == ext::Technology::UserLevel, "loaded as {technology}");
    ensure!(running, "serving process {pid} is not running");
    ensure!(claimed, "the user-level `hello` did not claim its command (state {state:?})");
    ensure!(!crate::events::console::offer_line("hello"), "still claimed after unload");
    wait_until_gone(pid)?;
    ensure!(crate::mm::frame::stats() == frames_before, "frames changed: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

fn builds_agree() -> TestResult {
    // The Wasm tests' probe sequence (answers, heap allocations, a key nobody binds).
    let native = super::wasm::answers_of(ext::Preference::Default)?;
    let user = super::wasm::answers_of(ext::Preference::User)?;
    ensure!(user == native, "user-level {user:?} vs native {native:?}");
    ensure!(user[2] == 42 && user[8] == 5050 && user[10] == 0, "answers {user:?}");
    Ok(())
}

fn user_contained(key: u64, reason: &str) -> TestResult {
    warm_up("faulty")?;
    let frames_before = crate::mm::frame::stats();
    ext::load("faulty", ext::Preference::User).map_err(text)?;
    let pid = serving_pid("faulty").ok_or("no serving process")?;
    let (satp, interrupts) = (crate::arch::csr::satp(), crate::arch::csr::interrupts_enabled());
    let outcome = check_contained(key, reason);
    // An overrun aborts the dispatcher's bounded call in the middle of the upcall; its
    // abort path must have switched back to this strand's space and interrupt state.
    let after = (crate::arch::csr::satp(), crate::arch::csr::interrupts_enabled());
    let unloaded = ext::unload("faulty");
    outcome?;
    ensure!(after == (satp, interrupts), "after the contained upcall: satp {:#x}, interrupts {} (before: {satp:#x}, {interrupts})", after.0, after.1);
    unloaded.map_err(text)?;
    // Containment ended the serving: the process exits by itself.
    wait_until_gone(pid)?;
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

fn killing_the_process_withdraws() -> TestResult {
    ext::load("faulty", ext::Preference::User).map_err(text)?;
    let pid = serving_pid("faulty").ok_or("no serving process")?;
    let before = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
    proc::kill(pid, Parent::Kernel).map_err(text)?;
    let gone = wait_until_gone(pid);
    let after = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
    let state = ext::find("faulty").map(|extension| extension.state.lock().clone());
    ext::unload("faulty").map_err(text)?;
    gone?;
    ensure!(before == 42, "answered {before} before the kill");
    ensure!(after == 0, "answered {after} after its process was killed (expected the default 0)");
    ensure!(matches!(&state, Some(ExtensionState::Killed(reason)) if reason.contains("process")), "state {state:?}");
    Ok(())
}

fn missing_build_is_refused() -> TestResult {
    let refusal = ext::load("no-such-extension", ext::Preference::User).map(drop).map_err(text);
    ensure!(matches!(&refusal, Err(message) if message.contains("bin/ext-no-such-extension")), "{refusal:?}");
    Ok(())
}
