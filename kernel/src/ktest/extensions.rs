//! Tests of extensions in the kernel: load → raise → unload, refusals, and containment
//! of a misbehaving extension (panic, overrun, arithmetic fault) — the kernel runs on,
//! the event falls back to its default, the reason is kept.

use super::{KernelTest, TestResult};
use crate::ensure;
use crate::ext::{self, ExtensionError, ExtensionState};

/// The extension tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "ext::builtin_load_raise_unload", run: builtin_load_raise_unload },
    KernelTest { name: "ext::load_errors_are_specific", run: load_errors_are_specific },
    KernelTest { name: "ext::panic_kills_extension", run: || contained(faulty::KEY_PANIC, "panicked") },
    KernelTest { name: "ext::overrun_kills_extension", run: || contained(faulty::KEY_LOOP, "overran budget") },
    KernelTest { name: "ext::divide_by_zero_kills_extension", run: || contained(faulty::KEY_DIVIDE, "panicked") },
];

fn builtin_load_raise_unload() -> TestResult {
    ensure!(!crate::events::console::offer_line("hello"), "`hello` claimed before loading");
    let extension = ext::load("hello", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    ensure!(extension.bindings.lock().len() == 1, "bindings {}", extension.bindings.lock().len());
    ensure!(crate::events::console::offer_line("hello"), "`hello` not claimed after loading");
    ensure!(ext::list().iter().any(|loaded| loaded.name == "hello"), "not listed");
    ext::unload("hello").map_err(|error| alloc::format!("{error}"))?;
    ensure!(!crate::events::console::offer_line("hello"), "`hello` still claimed after unloading");
    ensure!(ext::find("hello").is_none(), "still listed after unloading");
    Ok(())
}

fn load_errors_are_specific() -> TestResult {
    ensure!(matches!(ext::load("no-such-extension", ext::Preference::Native), Err(ExtensionError::Unknown(_))), "unknown name");
    ensure!(matches!(ext::unload("hello"), Err(ExtensionError::NotLoaded(_))), "unload of a not-loaded extension");
    ext::load("hello", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    let twice = ext::load("hello", ext::Preference::BuiltIn);
    let _ = ext::unload("hello");
    ensure!(matches!(twice, Err(ExtensionError::AlreadyLoaded(_))), "loaded twice");
    Ok(())
}

fn contained(key: u64, reason: &str) -> TestResult {
    let heap_before = crate::mm::heap::stats();
    ext::load("faulty", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    let outcome = check_contained(key, reason);
    // Unload whatever happened, so one failure does not cascade into the next test.
    let unloaded = ext::unload("faulty");
    outcome?;
    unloaded.map_err(|error| alloc::format!("{error}"))?;
    crate::events::quiescent();
    crate::events::reclaim();
    let heap_after = crate::mm::heap::stats();
    ensure!(
        heap_after.allocated_bytes <= heap_before.allocated_bytes + 512,
        "heap grew from {} to {} bytes",
        heap_before.allocated_bytes,
        heap_after.allocated_bytes
    );
    Ok(())
}

fn check_contained(key: u64, reason: &str) -> TestResult {
    let answer = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
    ensure!(answer == 42, "healthy binding answered {answer}");
    let result = crate::events::probe::raise(key, 7);
    ensure!(result == 0, "a misbehaving handler's result {result} was used instead of the default 0");
    let extension = ext::find("faulty").ok_or("killed extension vanished from the list")?;
    let state = extension.state.lock().clone();
    let bindings = extension.bindings.lock().len();
    drop(extension);
    ensure!(matches!(&state, ExtensionState::Killed(text) if text.contains(reason)), "state {state:?}, expected a kill for {reason:?}");
    ensure!(bindings == 0, "{bindings} bindings left after the kill");
    // The healthy binding went with the extension: the event is back to its default.
    ensure!(crate::events::probe::raise(faulty::KEY_ANSWER, 21) == 0, "a killed extension still answers");
    Ok(())
}
