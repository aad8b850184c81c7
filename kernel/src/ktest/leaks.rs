//! Leak tests: every way an extension or a process can end — killed by containment,
//! unloaded, exited, faulted, killed on request, withdrawn — run over and over must give
//! back every byte of the kernel heap and every frame.
//!
//! Each test runs its path once to warm up (tables that grow on first use and keep their
//! capacity — the process table, the dispatcher's, the frame allocator's free lists — are
//! not leaks), measures, runs the path [`ROUNDS`] more times, and requires the heap's
//! allocated bytes and the free-frame count to be exactly what they were. A leak of a few
//! bytes per round shows as `ROUNDS` times that.
//!
//! Budgets: a runaway handler is stopped quickly, either by a small budget
//! (`test-wasm-loop` has 50 µs of fuel) or by running the raise inside a bounded call of
//! [`QUICK_BUDGET`] instructions, whose deadline also bounds every call nested in it —
//! for a Wasm extension, that deadline is also what makes the interpreter's timer
//! backstop (not its fuel) stop the handler.

use alloc::string::String;

use super::extensions::bundled;
use super::text;
use super::{KernelTest, TestResult};
use crate::ensure;
use crate::ext::{self, ExtensionState, Preference};
use crate::mm::private_heap::{MIN_CHUNK_BYTES, PrivateHeap};
use crate::proc::{self, Grants, Parent};

/// Rounds measured after the warm-up round.
const ROUNDS: usize = 50;
/// Instructions a runaway handler gets when a test bounds its raise (0.2 ms at 1 GHz).
const QUICK_BUDGET: u64 = 200_000;
/// Probe key of the endless loop in `test-wasm-loop` (`xtask/src/testkexts.rs`).
const WASM_LOOP_KEY: u64 = 10;

/// The leak tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "leaks::private_heap_is_reclaimed_whole", run: private_heap_is_reclaimed_whole },
    KernelTest { name: "leaks::abort_leaves_no_private_heap_route", run: abort_leaves_no_private_heap_route },
    KernelTest { name: "leaks::wasm_timer_backstop_kill_and_unload", run: wasm_timer_backstop_kill },
    KernelTest { name: "leaks::wasm_tick_loop_runs_out_of_fuel_before_the_timer", run: wasm_tick_loop },
    KernelTest { name: "leaks::wasm_fuel_kill_and_unload", run: wasm_fuel_kill },
    KernelTest { name: "leaks::wasm_panic_kill_and_unload", run: || wasm_faulty_kill(faulty::KEY_PANIC, "panicked") },
    KernelTest { name: "leaks::wasm_trap_kill_and_unload", run: || wasm_faulty_kill(faulty::KEY_RECURSE, "trapped") },
    KernelTest { name: "leaks::wasm_memory_limit_kill_and_unload", run: || wasm_faulty_kill(faulty::KEY_HOARD, "growth operation limited") },
    KernelTest { name: "leaks::wasm_load_raise_unload", run: wasm_load_raise_unload },
    KernelTest { name: "leaks::native_panic_kill_and_unload", run: || native_kill(faulty::KEY_PANIC, "panicked", false) },
    KernelTest { name: "leaks::native_overrun_kill_and_unload", run: || native_kill(faulty::KEY_LOOP, "overran budget", true) },
    KernelTest { name: "leaks::native_trap_kill_and_unload", run: || native_kill(faulty::KEY_RECURSE, "trapped", false) },
    KernelTest { name: "leaks::native_quota_kill_and_unload", run: || native_kill(faulty::KEY_HOARD, "memory allocation", false) },
    KernelTest { name: "leaks::process_run_and_exit", run: || process_ends("hello 0", None, "exited with status 0") },
    KernelTest { name: "leaks::process_fault_exit", run: || process_ends("fault", None, "killed (fault)") },
    KernelTest { name: "leaks::process_panic_exit", run: || process_ends("fault panic", None, "exited with status 101") },
    KernelTest { name: "leaks::process_kill", run: || process_ends("spin 0", Some(()), "killed") },
    KernelTest { name: "leaks::process_spawned_by_a_process", run: process_spawned_by_a_process },
    KernelTest { name: "leaks::user_extension_load_raise_unload", run: user_load_raise_unload },
    KernelTest { name: "leaks::user_extension_loop_kill_and_unload", run: || user_kill(faulty::KEY_LOOP, "overran budget", true) },
    KernelTest { name: "leaks::user_extension_panic_kill_and_unload", run: || user_kill(faulty::KEY_PANIC, "panicked", false) },
    KernelTest { name: "leaks::user_extension_fault_kill_and_unload", run: || user_kill(faulty::KEY_RECURSE, "trapped", false) },
    KernelTest { name: "leaks::user_extension_process_killed", run: user_process_killed },
    KernelTest { name: "leaks::service_fault_withdrawal", run: || service_withdrawal("fault", false) },
    KernelTest { name: "leaks::service_loop_withdrawal", run: || service_withdrawal("loop", true) },
    KernelTest { name: "leaks::service_exit_withdrawal", run: || service_withdrawal("exit", false) },
    KernelTest { name: "leaks::service_server_killed", run: service_server_killed },
];

/// Heap bytes allocated and frames free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Usage {
    heap_bytes: usize,
    free_frames: usize,
}

/// Lets deferred frees happen, then measures: binding plans retired by an unload are
/// freed after a quiescent state, an exited strand's stack after the next switch.
fn usage() -> Usage {
    crate::sched::sleep_ticks(1);
    crate::events::quiescent();
    crate::events::reclaim();
    let frames = crate::mm::frame::stats();
    Usage { heap_bytes: crate::mm::heap::stats().allocated_bytes, free_frames: frames.total - frames.allocated }
}

/// Runs `round` once to warm up, then [`ROUNDS`] times, and requires the heap and the
/// free frames to be exactly where they were after the warm-up, and the frame table to
/// name an owner for exactly the allocated frames.
pub(super) fn repeat(path: &str, round: impl FnMut() -> TestResult) -> TestResult {
    repeat_rounds(path, ROUNDS, round)
}

/// [`repeat`] with `rounds` rounds after the warm-up.
pub(super) fn repeat_rounds(path: &str, rounds: usize, mut round: impl FnMut() -> TestResult) -> TestResult {
    round().map_err(|error| alloc::format!("{path} (warm-up round): {error}"))?;
    let before = usage();
    for index in 0..rounds {
        round().map_err(|error| alloc::format!("{path} (round {index}): {error}"))?;
    }
    let after = usage();
    let heap_change = after.heap_bytes as i64 - before.heap_bytes as i64;
    let frame_change = after.free_frames as i64 - before.free_frames as i64;
    ensure!(
        after == before,
        "{path}: after {rounds} rounds the heap has {} bytes allocated (was {}: {heap_change:+}, {:+.1} per round) and {} frames are free (was {}: {frame_change:+})",
        after.heap_bytes,
        before.heap_bytes,
        heap_change as f64 / rounds as f64,
        after.free_frames,
        before.free_frames
    );
    // Every allocated frame has an owner in the frame table, and none is owned after its
    // free, on every path the rounds took.
    crate::mm::frame::audit().map_err(|why| alloc::format!("{path}: after {rounds} rounds: {why}"))
}

/// `name`'s state, if it is loaded.
fn state_of(name: &str) -> Option<ExtensionState> {
    ext::find(name).map(|extension| extension.state.lock().clone())
}

/// Requires `name` to have been killed with a reason containing `reason`.
fn ensure_killed(name: &str, reason: &str) -> TestResult {
    let state = state_of(name);
    ensure!(matches!(&state, Some(ExtensionState::Killed(text)) if text.contains(reason)), "`{name}`: state {state:?}, expected a kill for {reason:?}");
    Ok(())
}

/// Raises `bench.Probe` (`key`, 0); with `quick`, inside a bounded call of
/// [`QUICK_BUDGET`] instructions (the handler is stopped by that deadline, which needs
/// interrupts on).
fn probe(key: u64, quick: bool) -> Result<u64, String> {
    if !quick {
        return Ok(crate::events::probe::raise(key, 0));
    }
    ensure!(crate::arch::csr::interrupts_enabled(), "interrupts are off: no deadline could stop the raise");
    crate::events::run_with_budget(QUICK_BUDGET, || crate::events::probe::raise(key, 0)).map_err(text)
}

/// Requires interrupts on after `what` (a migrating call returns from U-mode with them
/// off and must give the caller back its state).
fn ensure_interrupts_on(what: &str) -> TestResult {
    ensure!(crate::arch::csr::interrupts_enabled(), "interrupts are off after {what}");
    Ok(())
}

/// Blocks allocated inside a private heap stay out of the kernel heap, go back to the
/// private heap wherever they are freed, and are reclaimed with it when it is dropped
/// with some still allocated (and grown past its first chunk).
fn private_heap_is_reclaimed_whole() -> TestResult {
    repeat("a private heap dropped with blocks still allocated", || {
        let heap = PrivateHeap::new("test", MIN_CHUNK_BYTES, 4 << 20).ok_or("no private heap")?;
        let kernel_before = crate::mm::heap::stats().allocated_bytes;
        let first = heap.usage();
        let freed_outside = heap.enter(|| core::hint::black_box(alloc::vec![1u8; 1000]));
        let holding = heap.usage();
        let kernel_after = crate::mm::heap::stats().allocated_bytes;
        drop(freed_outside);
        let after_free = heap.usage();
        heap.enter(|| {
            // Larger than the first chunk: the heap grows. Neither is ever freed.
            core::mem::forget(core::hint::black_box(alloc::vec![2u8; 3 * MIN_CHUNK_BYTES]));
            core::mem::forget(core::hint::black_box(alloc::boxed::Box::new([3u64; 16])));
        });
        let grown = heap.usage();
        drop(heap);
        ensure!(kernel_after == kernel_before, "the kernel heap went from {kernel_before} to {kernel_after} bytes");
        ensure!(first.used_bytes == 0 && first.reserved_bytes == MIN_CHUNK_BYTES, "a new heap: {first:?}");
        ensure!(holding.used_bytes == 1024 && after_free == first, "1000 bytes: {holding:?}, freed outside: {after_free:?}");
        ensure!(grown.reserved_bytes > 3 * MIN_CHUNK_BYTES && grown.used_bytes >= 3 * MIN_CHUNK_BYTES && grown.overflow_allocations == 0, "grown: {grown:?}");
        Ok(())
    })
}

/// A deadline that aborts code inside `PrivateHeap::enter`, with its recovery point armed
/// outside, sends the hart's allocations back to the kernel heap (and preemption back on).
fn abort_leaves_no_private_heap_route() -> TestResult {
    let heap = PrivateHeap::new("test", MIN_CHUNK_BYTES, MIN_CHUNK_BYTES).ok_or("no private heap")?;
    let depth = crate::arch::hart::current().preempt_disabled.load(core::sync::atomic::Ordering::Relaxed);
    ensure!(crate::arch::csr::interrupts_enabled(), "interrupts are off: no deadline could stop the loop");
    let outcome = crate::events::run_with_budget(QUICK_BUDGET, || {
        heap.enter(|| loop {
            core::hint::spin_loop();
        })
    });
    let route = crate::mm::private_heap::current_route();
    let kernel_before = crate::mm::heap::stats().allocated_bytes;
    // `black_box`: an allocation nobody reads may be removed.
    let block = core::hint::black_box(alloc::boxed::Box::new([0u64; 8]));
    let kernel_after = crate::mm::heap::stats().allocated_bytes;
    drop(block);
    let depth_after = crate::arch::hart::current().preempt_disabled.load(core::sync::atomic::Ordering::Relaxed);
    ensure!(matches!(outcome, Err(spindle_dispatch::HandlerFault::Overrun { .. })), "the loop ended with {outcome:?}");
    ensure!(route == 0, "the hart still routes to {route:#x}");
    ensure!(kernel_after == kernel_before + 64 && heap.usage().used_bytes == 0, "a 64-byte block after the abort: kernel heap {kernel_before} -> {kernel_after}, private {:?}", heap.usage());
    ensure!(depth_after == depth, "preemption depth {depth} -> {depth_after}");
    Ok(())
}

/// Loads the bundled unsigned Wasm module `name` (a `test-wasm-*` entry).
fn load_test_module(name: &str) -> TestResult {
    ext::load_kext_bytes(bundled(name)?).map(drop).map_err(text)
}

fn wasm_timer_backstop_kill() -> TestResult {
    repeat("Wasm endless loop stopped by the timer backstop, unloaded", || {
        load_test_module("test-wasm-loop")?;
        let answer = probe(WASM_LOOP_KEY, true)?;
        let killed = ensure_killed("test-wasm-loop", "timer backstop");
        ext::unload("test-wasm-loop").map_err(text)?;
        ensure!(answer == 0, "the looping handler's raise answered {answer}");
        killed
    })
}

/// A `clock.Tick` handler that loops: the clock's primary module caps its budget at
/// 100,000 instructions, far below the manifest's 10 ms, and the fuel follows the cap.
fn wasm_tick_loop() -> TestResult {
    repeat("Wasm clock.Tick handler looping, unloaded", || {
        load_test_module("test-wasm-tick-loop")?;
        let deadline = crate::time::ticks() + 100;
        while state_of("test-wasm-tick-loop") == Some(ExtensionState::Running) && crate::time::ticks() < deadline {
            crate::sched::sleep_ticks(1);
        }
        let killed = ensure_killed("test-wasm-tick-loop", "out of fuel");
        ext::unload("test-wasm-tick-loop").map_err(text)?;
        killed
    })
}

fn wasm_fuel_kill() -> TestResult {
    repeat("Wasm endless loop out of fuel, unloaded", || {
        load_test_module("test-wasm-loop")?;
        let answer = probe(WASM_LOOP_KEY, false)?;
        let killed = ensure_killed("test-wasm-loop", "out of fuel");
        ext::unload("test-wasm-loop").map_err(text)?;
        ensure!(answer == 0, "the looping handler's raise answered {answer}");
        killed
    })
}

fn wasm_faulty_kill(key: u64, reason: &str) -> TestResult {
    repeat(&alloc::format!("Wasm `faulty` key {key} killed ({reason}), unloaded"), || {
        ext::load("faulty", Preference::Wasm).map_err(text)?;
        let healthy = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
        let answer = probe(key, false)?;
        let killed = ensure_killed("faulty", reason);
        ext::unload("faulty").map_err(text)?;
        ensure!(healthy == 42 && answer == 0, "answers {healthy} (healthy), {answer} (misbehaving)");
        killed
    })
}

fn wasm_load_raise_unload() -> TestResult {
    repeat("Wasm `faulty` loaded, answering, unloaded", || {
        let extension = ext::load("faulty", Preference::Wasm).map_err(text)?;
        let runtime = match extension.image.lock().as_ref() {
            Some(ext::ExtensionImage::Wasm(image)) => Some(image.runtime_usage()),
            _ => None,
        };
        drop(extension);
        let answer = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
        let sum = crate::events::probe::raise(faulty::KEY_ALLOCATE, 100);
        ext::unload("faulty").map_err(text)?;
        ensure!(answer == 42 && sum == 5050, "answers {answer}, {sum}");
        // The interpreter's memory is the extension's private heap, which needed no help
        // from the kernel heap.
        ensure!(runtime.is_some_and(|usage| usage.used_bytes > 0 && usage.overflow_allocations == 0), "private heap {runtime:?}");
        Ok(())
    })
}

fn native_kill(key: u64, reason: &str, quick: bool) -> TestResult {
    repeat(&alloc::format!("native `faulty` key {key} killed ({reason}), unloaded"), || {
        ext::load("faulty", Preference::Default).map_err(text)?;
        let answer = probe(key, quick)?;
        let killed = ensure_killed("faulty", reason);
        ext::unload("faulty").map_err(text)?;
        ensure!(answer == 0, "the misbehaving handler's raise answered {answer}");
        killed
    })
}

/// Spawns `command_line` from the kernel (killing it at once with `kill`), waits, and
/// checks the status's words.
fn process_ends(command_line: &str, kill: Option<()>, status: &str) -> TestResult {
    repeat(&alloc::format!("process `{command_line}`"), || {
        let process = proc::spawn(command_line, Parent::Kernel, Grants::NONE).map_err(text)?;
        if kill.is_some() {
            // Let it run first, so the kill stops a running process.
            crate::sched::sleep_ticks(1);
            proc::kill(process.pid(), Parent::Kernel).map_err(text)?;
        }
        let ended = proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}"))?;
        let words = alloc::format!("{ended}");
        ensure!(words.contains(status), "`{command_line}` {words}, expected {status:?}");
        Ok(())
    })
}

/// A process spawning a child, waiting for it and exiting (what spsh's `run` does):
/// `spsh -s` running `run hello 0` from script input.
fn process_spawned_by_a_process() -> TestResult {
    repeat("spsh running `run hello 0`", || {
        crate::console::set_script_input("run hello 0\n");
        let shell = proc::spawn(crate::shell::USER_SHELL_SCRIPT, Parent::Kernel, Grants::NONE).map_err(text);
        let ended = shell.and_then(|shell| proc::wait(shell.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}")));
        crate::console::clear_script_input();
        let ended = ended?;
        ensure!(ended == spindle_abi::syscall::ExitStatus::Exited(0), "spsh {ended}");
        Ok(())
    })
}

/// Waits (at most 2 s) until the serving process `pid` is gone.
fn gone(pid: u64) -> TestResult {
    ensure!(proc::wait_until_reaped(pid, 200), "serving process {pid} still exists 2 s after serving ended");
    Ok(())
}

fn user_load_raise_unload() -> TestResult {
    repeat("user-level `faulty` loaded, answering, unloaded", || {
        ext::load("faulty", Preference::User).map_err(text)?;
        let pid = ext::user::serving_pid("faulty").ok_or("no serving process")?;
        let answer = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
        ensure_interrupts_on("an upcall")?;
        ext::unload("faulty").map_err(text)?;
        gone(pid)?;
        ensure!(answer == 42, "answered {answer}");
        Ok(())
    })
}

fn user_kill(key: u64, reason: &str, quick: bool) -> TestResult {
    repeat(&alloc::format!("user-level `faulty` key {key} killed ({reason}), unloaded"), || {
        ext::load("faulty", Preference::User).map_err(text)?;
        let pid = ext::user::serving_pid("faulty").ok_or("no serving process")?;
        let answer = probe(key, quick)?;
        let killed = ensure_killed("faulty", reason);
        ext::unload("faulty").map_err(text)?;
        gone(pid)?;
        ensure!(answer == 0, "the misbehaving handler's raise answered {answer}");
        killed
    })
}

fn user_process_killed() -> TestResult {
    repeat("user-level `faulty` whose serving process is killed", || {
        ext::load("faulty", Preference::User).map_err(text)?;
        let pid = ext::user::serving_pid("faulty").ok_or("no serving process")?;
        proc::kill(pid, Parent::Kernel).map_err(text)?;
        let ended = gone(pid);
        let killed = ensure_killed("faulty", "process");
        ext::unload("faulty").map_err(text)?;
        ended?;
        killed
    })
}

/// Starts `ubench serve NAME MODE` and waits (at most 2 s) until the service is offered.
fn offered(name: &str, mode: &str) -> Result<(u64, alloc::sync::Arc<proc::service::Service>), String> {
    let server = proc::spawn(&alloc::format!("ubench serve {name} {mode}"), Parent::Kernel, Grants::NONE).map_err(text)?;
    let deadline = crate::time::ticks() + 200;
    loop {
        if let Some(service) = proc::service::find(name) {
            return Ok((server.pid(), service));
        }
        ensure!(crate::time::ticks() < deadline, "service {name} not offered 2 s after its server started");
        crate::sched::sleep_ticks(1);
    }
}

fn service_withdrawal(mode: &str, quick: bool) -> TestResult {
    let name = alloc::format!("leak-{mode}");
    repeat(&alloc::format!("service `{mode}` withdrawn after a call"), || {
        let (pid, service) = offered(&name, mode)?;
        let answer = if quick {
            ensure_interrupts_on("the previous rounds")?;
            crate::events::run_with_budget(QUICK_BUDGET, || proc::service::call_service(&service, 1)).map_err(text)?
        } else {
            proc::service::call_service(&service, 1)
        };
        drop(service);
        ensure_interrupts_on("a service call")?;
        let ended = proc::wait(pid, Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}"))?;
        ensure!(answer == Err(spindle_abi::syscall::Error::Contained), "call answered {answer:?}");
        ensure!(proc::service::find(&name).is_none(), "still offered");
        ensure!(ended == spindle_abi::syscall::ExitStatus::Exited(1), "server {ended}");
        Ok(())
    })
}

fn service_server_killed() -> TestResult {
    repeat("echo service whose server is killed", || {
        let (pid, service) = offered("leak-echo", "echo")?;
        let answer = proc::service::call_service(&service, 41);
        drop(service);
        ensure_interrupts_on("a service call")?;
        proc::kill(pid, Parent::Kernel).map_err(text)?;
        proc::wait(pid, Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}"))?;
        ensure!(answer == Ok(42), "echo answered {answer:?}");
        ensure!(proc::service::find("leak-echo").is_none(), "the service outlived its server");
        Ok(())
    })
}
