//! Tests of the kernel dispatcher in place: the console and clock events, guards,
//! primary-module authorisation, async bindings on their worker strands, bounded handlers
//! stopped by the real timer, faults and
//! the circuit breaker, replacement, and the `ticker` extension loaded at boot.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{BENCH_PROBE, CLOCK_TICK, CONSOLE_LINE, ClockTick, ConsoleLine, ConsoleVerdict, Probe, ProbeResult};
use spindle_abi::fingerprint_of;
use spindle_dispatch::{BindingId, BindingSpec, DeclarativeGuard, InstallError, Mode, Refusal, handler_fn};

use super::{KernelTest, TestResult};
use crate::ensure;
use crate::events::{self, console::COMMAND_FIELD};

/// The event tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "events::console_claim_install_raise_uninstall", run: console_claim_install_raise_uninstall },
    KernelTest { name: "events::console_refuses_unguarded_handler", run: console_refuses_unguarded_handler },
    KernelTest { name: "events::async_binding_runs_on_its_own_strand", run: async_binding_runs_on_its_own_strand },
    KernelTest { name: "events::async_overrun_is_contained", run: async_overrun_is_contained },
    KernelTest { name: "events::looping_handler_is_stopped_by_budget", run: looping_handler_is_stopped_by_budget },
    KernelTest { name: "events::faulting_handler_trips_breaker", run: faulting_handler_trips_breaker },
    KernelTest { name: "events::replace_switches_handlers", run: replace_switches_handlers },
    KernelTest { name: "events::clock_ticks_reach_handler", run: clock_ticks_reach_handler },
    KernelTest { name: "events::boot_ticker_claims_its_command", run: boot_ticker_claims_its_command },
];

fn claim_guard(command: &str) -> DeclarativeGuard {
    DeclarativeGuard::equals(COMMAND_FIELD, fingerprint_of(command).0)
}

fn counters(id: BindingId) -> Result<spindle_dispatch::Counters, alloc::string::String> {
    let snapshot = events::console::table().snapshot();
    Ok(snapshot.binding(id).ok_or("binding missing from the snapshot")?.counters)
}

fn install_console(spec: BindingSpec<ConsoleLine, ConsoleVerdict>) -> Result<BindingId, alloc::string::String> {
    events::dispatcher().install(&CONSOLE_LINE, spec).map_err(|error| alloc::format!("install: {error}"))
}

fn console_claim_install_raise_uninstall() -> TestResult {
    let handler = handler_fn("test.claim", |line: &ConsoleLine| Ok(ConsoleVerdict { claimed: line.length }));
    let id = install_console(BindingSpec::new("ktest", handler).when(claim_guard("ktest-claim")))?;
    ensure!(events::console::offer_line("ktest-claim with words"), "guarded handler did not claim its command");
    ensure!(!events::console::offer_line("something-else"), "a line for another command was claimed");
    let seen = counters(id)?;
    ensure!(seen.invocations == 1, "invocations {}", seen.invocations);
    events::dispatcher().uninstall(id).map_err(|error| alloc::format!("uninstall: {error}"))?;
    ensure!(!events::console::offer_line("ktest-claim again"), "claimed after uninstall");
    ensure!(events::console::table().snapshot().binding(id).is_none(), "binding still listed");
    Ok(())
}

fn console_refuses_unguarded_handler() -> TestResult {
    let handler = handler_fn("test.greedy", |_: &ConsoleLine| Ok(ConsoleVerdict { claimed: 1 }));
    match events::dispatcher().install(&CONSOLE_LINE, BindingSpec::new("ktest", handler)) {
        Err(InstallError::Refused(Refusal::GuardRequired)) => Ok(()),
        Err(other) => Err(alloc::format!("refused for the wrong reason: {other}")),
        Ok(id) => {
            let _ = events::dispatcher().uninstall(id);
            Err("an unguarded console handler was accepted".into())
        }
    }
}

/// Uninstalls an async binding and waits until its worker strand has ended and been
/// reaped (so later tests that count frames see no stray stack being freed).
fn retire_async(id: BindingId) {
    let _ = events::dispatcher().uninstall(id);
    // No raise is in progress on this strand and one hart runs: the retired plan (and so
    // the binding, whose lane stops the worker) can be freed now.
    events::quiescent();
    events::reclaim();
    crate::sched::sleep_ticks(3);
}

/// The snapshot of binding `id` of `bench.Probe`.
fn probe_binding(id: BindingId) -> Option<spindle_dispatch::BindingSnapshot> {
    events::dispatcher().snapshot().into_iter().find_map(|event| event.binding(id).cloned())
}

fn async_binding_runs_on_its_own_strand() -> TestResult {
    static RAN_ON: AtomicU64 = AtomicU64::new(u64::MAX);
    static SEEN_VALUE: AtomicU64 = AtomicU64::new(0);
    RAN_ON.store(u64::MAX, Ordering::SeqCst);
    let handler = handler_fn("test.async", |probe: &Probe| {
        SEEN_VALUE.store(probe.value, Ordering::SeqCst);
        RAN_ON.store(crate::sched::current().id(), Ordering::SeqCst);
        Ok(ProbeResult { value: 99 })
    });
    let id = events::dispatcher()
        .install(&BENCH_PROBE, BindingSpec::new("ktest", handler).mode(Mode::Async).when(DeclarativeGuard::equals(0, 0xa5)))
        .map_err(|error| alloc::format!("install: {error}"))?;
    let answer = events::probe::raise(0xa5, 41);
    let ran_before_return = RAN_ON.load(Ordering::SeqCst) != u64::MAX;
    for _ in 0..100 {
        if RAN_ON.load(Ordering::SeqCst) != u64::MAX {
            break;
        }
        crate::sched::sleep_ticks(1);
    }
    let binding = probe_binding(id);
    let listing = crate::events::listing(None);
    retire_async(id);
    let binding = binding.ok_or("binding missing")?;
    let lane = binding.asynchronous.ok_or("no async lane in the snapshot")?;
    let ran_on = RAN_ON.load(Ordering::SeqCst);
    ensure!(answer == 0, "the raise returned {answer}: an async handler must not contribute a result");
    ensure!(!ran_before_return, "the handler ran before the raise returned");
    ensure!(ran_on != u64::MAX, "the handler never ran");
    ensure!(ran_on != crate::sched::current().id(), "the handler ran on the raising strand");
    ensure!(ran_on == lane.worker, "ran on strand {ran_on}, the binding's worker is {}", lane.worker);
    ensure!(SEEN_VALUE.load(Ordering::SeqCst) == 41, "the handler saw value {}", SEEN_VALUE.load(Ordering::SeqCst));
    ensure!(lane.queued == 1 && lane.dropped == 0 && binding.counters.invocations == 1, "lane {lane:?}, invocations {}", binding.counters.invocations);
    ensure!(listing.contains("queued=1 dropped=0"), "the events listing does not show the async counters");
    Ok(())
}

fn async_overrun_is_contained() -> TestResult {
    let handler = handler_fn("test.async-spin", |_: &Probe| loop {
        core::hint::spin_loop();
    });
    let budget = 200_000; // 2 ms at the nominal 1 GHz
    let id = events::dispatcher()
        .install(
            &BENCH_PROBE,
            BindingSpec::new("ktest", handler).mode(Mode::Async).async_budget(budget).when(DeclarativeGuard::equals(0, 0x5a)),
        )
        .map_err(|error| alloc::format!("install: {error}"))?;
    let start = crate::time::ticks();
    events::probe::raise(0x5a, 0);
    let raise_ticks = crate::time::ticks() - start;
    let mut overruns = 0;
    for _ in 0..100 {
        overruns = probe_binding(id).map_or(0, |binding| binding.counters.overruns);
        if overruns != 0 {
            break;
        }
        crate::sched::sleep_ticks(1);
    }
    retire_async(id);
    ensure!(raise_ticks <= 1, "the raise took {raise_ticks} ticks");
    ensure!(overruns == 1, "overruns {overruns}, expected the worker's run to be aborted once");
    Ok(())
}

fn looping_handler_is_stopped_by_budget() -> TestResult {
    let handler = handler_fn("test.spin", |_: &ConsoleLine| loop {
        core::hint::spin_loop();
    });
    let budget = 200_000; // 2 ms at the nominal 1 GHz
    let id = install_console(BindingSpec::new("ktest", handler).when(claim_guard("ktest-spin")).mode(Mode::Bounded { budget }))?;
    let start = crate::time::now();
    let claimed = events::console::offer_line("ktest-spin");
    let elapsed = crate::time::now() - start;
    let seen = counters(id)?;
    let _ = events::dispatcher().uninstall(id);
    ensure!(!claimed, "an overrun handler's verdict was used");
    ensure!(seen.overruns == 1 && seen.faults == 1, "overruns {} faults {}", seen.overruns, seen.faults);
    ensure!(elapsed < crate::time::micros_to_timebase(50_000), "took {elapsed} timebase ticks");
    Ok(())
}

fn faulting_handler_trips_breaker() -> TestResult {
    let handler = handler_fn("test.fault", |_: &ConsoleLine| {
        // SAFETY: the first page is never mapped: the load traps inside the bounded
        // executor's recovery point and becomes a handler fault.
        let value = unsafe { (core::hint::black_box(0x8usize) as *const u64).read_volatile() };
        Ok(ConsoleVerdict { claimed: value })
    });
    let id = install_console(BindingSpec::new("ktest", handler).when(claim_guard("ktest-fault")))?;
    for _ in 0..5 {
        ensure!(!events::console::offer_line("ktest-fault"), "a faulting handler claimed the line");
    }
    let snapshot = events::console::table().snapshot();
    let binding = snapshot.binding(id).ok_or("binding missing")?;
    let (faults, disabled) = (binding.counters.faults, binding.disabled.is_some());
    drop(snapshot);
    let _ = events::dispatcher().uninstall(id);
    // The default threshold is 3 consecutive faults; later raises skip the binding.
    ensure!(faults == 3, "faults {faults} (breaker should stop it at 3)");
    ensure!(disabled, "circuit breaker did not disable the binding");
    Ok(())
}

fn replace_switches_handlers() -> TestResult {
    let old = handler_fn("test.old", |_: &ConsoleLine| Ok(ConsoleVerdict { claimed: 1 }));
    let new = handler_fn("test.new", |_: &ConsoleLine| Ok(ConsoleVerdict { claimed: 2 }));
    let old_id = install_console(BindingSpec::new("ktest", old).when(claim_guard("ktest-replace")))?;
    let line = events::console::describe_line("ktest-replace");
    ensure!(events::raise(events::console::table(), &line).claimed == 1, "old handler not used");
    let new_id = events::dispatcher()
        .replace(&CONSOLE_LINE, old_id, BindingSpec::new("ktest", new).when(claim_guard("ktest-replace")))
        .map_err(|error| alloc::format!("replace: {error}"))?;
    let verdict = events::raise(events::console::table(), &line).claimed;
    let _ = events::dispatcher().uninstall(new_id);
    ensure!(verdict == 2, "after replace the verdict was {verdict}");
    ensure!(events::console::table().snapshot().binding(old_id).is_none(), "old binding still installed");
    Ok(())
}

fn clock_ticks_reach_handler() -> TestResult {
    let seen = Arc::new(AtomicU64::new(0));
    let counter = seen.clone();
    let handler = handler_fn("test.tick", move |_: &ClockTick| {
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    let id = events::dispatcher()
        .install(&CLOCK_TICK, BindingSpec::new("ktest", handler))
        .map_err(|error| alloc::format!("install: {error}"))?;
    let start = crate::time::ticks();
    while crate::time::ticks() < start + 5 {
        crate::arch::csr::wait_for_interrupt();
    }
    crate::sched::yield_now();
    let _ = events::dispatcher().uninstall(id);
    let count = seen.load(Ordering::Relaxed);
    ensure!(count >= 3, "handler saw {count} of 5 ticks");
    Ok(())
}

fn boot_ticker_claims_its_command() -> TestResult {
    // `ticker` is on image.toml's boot list.
    ensure!(crate::ext::find("ticker").is_some(), "`ticker` was not loaded at boot");
    ensure!(events::console::offer_line("ticker"), "the boot extension did not claim `ticker`");
    let snapshot = events::dispatcher().snapshot();
    let owners = snapshot.iter().flat_map(|event| event.bindings.iter()).filter(|binding| binding.owner == "ticker").count();
    ensure!(owners == 2, "ticker has {owners} bindings, expected 2");
    Ok(())
}
