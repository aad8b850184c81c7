//! The kernel's event dispatcher and the glue between it and the machine.
//!
//! One [`Dispatcher`] serves the whole kernel. This module supplies its platform hooks:
//! `rdinstret` for the per-binding instruction counters, a bounded executor that runs a
//! handler under a budget (timer deadline + recovery point, see
//! [`crate::arch::recovery::run_bounded`]), an async executor (a worker strand per async
//! binding), and quiescent-state reports for its
//! read-copy-update (made on every context switch and in the idle loop: raises run with
//! preemption off, so neither point can be inside one).
//!
//! The clock, console, probe and scheduler events register here ([`clock`], [`console`],
//! [`probe`], [`sched`]; the services of `crate::services` register their own) and raise them with
//! [`raise`], which is [`EventTable::raise`] inside a no-preemption section.

#[deny(unsafe_code)]
pub mod console;
#[deny(unsafe_code)]
pub mod probe;

use alloc::string::String;
use alloc::sync::Arc;
use core::fmt::Write;

use spindle_abi::event::EventRecord;
use spindle_dispatch::{AsyncExecutor, BoundedExecutor, Dispatcher, EventTable, HandlerFault, Platform};
use spin::Once;

use crate::arch::hart::{self, MAX_HARTS};
use crate::arch::recovery::{Abort, run_bounded};

static DISPATCHER: Once<Dispatcher> = Once::new();

fn instruction_counter() -> u64 {
    crate::arch::csr::instret() as u64
}

/// Runs bounded bindings with a timer deadline and a recovery point.
struct KernelBoundedExecutor;

impl BoundedExecutor for KernelBoundedExecutor {
    /// A budget in nanoseconds becomes timebase ticks once, at installation.
    fn prepare(&self, budget: u64) -> u64 {
        crate::time::budget_in_ticks(budget)
    }

    fn run_bounded(&self, budget: u64, ticks: u64, body: &mut dyn FnMut() -> Result<(), HandlerFault>) -> Result<(), HandlerFault> {
        run_for_ticks(budget, ticks, body)?
    }

    /// The platform's counter is `rdinstret` ([`instruction_counter`]): read it inline.
    fn run_bounded_counted(
        &self,
        budget: u64,
        ticks: u64,
        _counter: fn() -> u64,
        spent: &mut u64,
        body: &mut dyn FnMut() -> Result<(), HandlerFault>,
    ) -> Result<(), HandlerFault> {
        let start = instruction_counter();
        let outcome = run_for_ticks(budget, ticks, body);
        *spent = spent.wrapping_add(instruction_counter().wrapping_sub(start));
        outcome?
    }

    /// `function(data)` goes to the bounded-call trampoline as it is (no closure), with
    /// `rdinstret` read inline when counting.
    unsafe fn run_bounded_raw(
        &self,
        budget: u64,
        ticks: u64,
        _counter: fn() -> u64,
        spent: Option<&mut u64>,
        function: unsafe extern "C" fn(*mut u8),
        data: *mut u8,
    ) -> Result<(), HandlerFault> {
        let start = if spent.is_some() { instruction_counter() } else { 0 };
        // SAFETY: the dispatcher's contract (`BoundedExecutor::run_bounded_raw`): one call
        // of `function(data)` here is sound.
        let outcome = unsafe { crate::arch::recovery::run_bounded_raw(crate::time::now().saturating_add(ticks), function, data) };
        if let Some(spent) = spent {
            *spent = spent.wrapping_add(instruction_counter().wrapping_sub(start));
        }
        outcome.map_err(|abort| abort_fault(budget, abort))
    }
}

/// Runs `body` with a budget of `budget` nanoseconds of guest time (instructions under
/// `-icount shift=0`; converted to timebase ticks by [`crate::time::budget_in_ticks`],
/// which stretches it on a host clock), turning an overrun, a trap or an extension panic
/// into the matching [`HandlerFault`]. Nests (see [`run_bounded`]).
pub fn run_with_budget<R>(budget: u64, body: impl FnOnce() -> R) -> Result<R, HandlerFault> {
    run_for_ticks(budget, crate::time::budget_in_ticks(budget), body)
}

/// [`run_with_budget`] with the budget already converted to `ticks` of the timebase
/// (`budget` is what an overrun reports).
#[inline(always)]
pub fn run_for_ticks<R>(budget: u64, ticks: u64, body: impl FnOnce() -> R) -> Result<R, HandlerFault> {
    match run_bounded(crate::time::now().saturating_add(ticks), body) {
        Ok(result) => Ok(result),
        Err(abort) => Err(abort_fault(budget, abort)),
    }
}

/// The fault of a bounded call that was aborted (out of line: the common path only
/// returns the result). `run_bounded` has put back what the aborted code did not.
#[cold]
#[inline(never)]
fn abort_fault(budget: u64, abort: Abort) -> HandlerFault {
    match abort {
        Abort::BudgetExceeded => HandlerFault::Overrun { budget },
        Abort::Fault(_) if hart::current().pending_panic.swap(0, core::sync::atomic::Ordering::Relaxed) != 0 => HandlerFault::Panicked,
        Abort::Fault(report) => HandlerFault::Trapped { cause: report.scause as u64 },
    }
}

/// What runs async bindings (worker strands: the scheduler's, registered by [`init`], so
/// that the dispatcher, below the scheduler, does not name it).
static ASYNC_EXECUTOR: spin::Once<Arc<dyn AsyncExecutor>> = spin::Once::new();

/// The kernel's platform hooks (also used by benchmarks that build their own dispatcher).
pub fn platform() -> Platform {
    let platform = Platform::new(instruction_counter, MAX_HARTS)
        .with_counter_unit(crate::time::clock_mode().counter_unit())
        .with_bounded_executor(&KernelBoundedExecutor);
    match ASYNC_EXECUTOR.get() {
        Some(executor) => platform.with_async_executor(executor.clone()),
        None => platform,
    }
}

/// Creates a dispatcher with the kernel's hooks in which only the calling hart is online.
pub fn new_dispatcher() -> Dispatcher {
    let dispatcher = Dispatcher::new(platform());
    let this_hart = hart::id();
    for other in (0..MAX_HARTS).filter(|&other| other != this_hart) {
        // SAFETY: harts other than the boot hart are not started, so none of them is
        // inside a raise; each is brought online before it may raise.
        let _ = unsafe { dispatcher.hart_offline(other) };
    }
    dispatcher
}

/// Creates the kernel dispatcher, whose async bindings run on `async_executor`, and
/// registers this layer's events (`console.Line`, `bench.Probe`). The services above
/// register theirs after this.
pub fn init(async_executor: Arc<dyn AsyncExecutor>) {
    ASYNC_EXECUTOR.call_once(|| async_executor);
    DISPATCHER.call_once(new_dispatcher);
    console::init();
    probe::init();
}

/// The kernel dispatcher. Panics before [`init`] (a kernel bug).
pub fn dispatcher() -> &'static Dispatcher {
    DISPATCHER.get().expect("events::init has not run")
}


/// What `events` prints (and the `events` system call returns): the events whose name is
/// `filter` or starts with `filter.` (`events clock`, `events clock.Tick`), every event for
/// `None`, with their bindings, guards and counters. The first line says what budgets and
/// counters mean in this clock mode.
pub fn listing(filter: Option<&str>) -> String {
    let clock = crate::time::clock_mode();
    let mut text = alloc::format!("clock {}: {}\n", clock.name(), clock.budget_meaning());
    let selected = |name: &str| match filter {
        None => true,
        Some(filter) => name == filter || name.strip_prefix(filter).is_some_and(|rest| rest.starts_with('.')),
    };
    for event in dispatcher().snapshot().into_iter().filter(|event| selected(event.name)) {
        let _ = write!(text, "{event}");
    }
    text
}

/// Raises an event through its table with preemption off on this hart.
#[inline(always)]
pub fn raise<A: EventRecord, R: EventRecord>(table: &EventTable<A, R>, args: &A) -> R {
    let _no_preemption = crate::arch::hart::no_preemption();

    table.raise(args)
}

/// Reports a quiescent state of this hart to the kernel dispatcher (no-op before init).
pub fn quiescent() {
    if let Some(dispatcher) = DISPATCHER.get() {
        // SAFETY: called only where this hart is inside no raise: on a context switch
        // (raises run with preemption off, so no strand is switched out inside one) and in
        // the idle loop.
        let _ = unsafe { dispatcher.quiescent(hart::id()) };
    }
}

/// Frees binding plans retired before every hart's last quiescent state.
pub fn reclaim() {
    if let Some(dispatcher) = DISPATCHER.get() {
        // Not switched out while holding a table's retired list: the idle strand reclaims
        // too, and preempted there it would keep every writer (an unload's uninstall) from
        // the list. Interrupts off rather than a no-preemption section: an interrupt that
        // arrives meanwhile is taken, and preempts, right after.
        crate::arch::csr::without_interrupts(|| dispatcher.reclaim());
    }
}
