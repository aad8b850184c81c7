//! Platform hooks: what the dispatcher needs from the machine, supplied at construction.
//!
//! The dispatcher has no globals and touches no hardware. The kernel passes an instruction
//! counter (`rdinstret`) for the per-binding "instructions spent" counters, an executor
//! for bounded bindings (it arms a budget deadline and a recovery point around the handler)
//! and an executor for async bindings (it starts a worker strand per binding). Host tests
//! pass a fake counter and fake executors.
//!
//! No hart-id hook is needed on the raise path: the kernel names the hart when it reports
//! a quiescent state (see `rcu` and `Dispatcher::quiescent`). It says how many harts there
//! are, so that the dispatcher knows whom to wait for before freeing a retired plan.

use alloc::sync::Arc;

use crate::asynchronous::AsyncExecutor;
use crate::handler::HandlerFault;

/// Runs a handler under a budget. The kernel's implementation arms a deadline for `budget`
/// nanoseconds of guest time (instructions under an exact clock) and a recovery point; if a timer interrupt finds it past inside `body`, it abandons `body`
/// and reports [`HandlerFault::Overrun`].
pub trait BoundedExecutor: Send + Sync {
    /// Converts `budget` (nanoseconds of guest time) into the executor's own units, once
    /// per binding when it is installed, so that a raise does no arithmetic on it (the
    /// kernel: timebase ticks in this boot's clock mode). The default keeps it unchanged.
    fn prepare(&self, budget: u64) -> u64 {
        budget
    }

    /// Runs `body` once under `budget` (nanoseconds of guest time), which `prepare` turned
    /// into `prepared`. Returns `body`'s own result if it finished in time,
    /// `Err(HandlerFault::Overrun { budget })` if it was aborted, or another fault if it
    /// trapped.
    fn run_bounded(
        &self,
        budget: u64,
        prepared: u64,
        body: &mut dyn FnMut() -> Result<(), HandlerFault>,
    ) -> Result<(), HandlerFault>;

    /// [`run_bounded`](Self::run_bounded), also adding to `*spent` what `counter` (the
    /// platform's instruction counter) advanced by during the call, aborted or not: how a
    /// table with instruction accounting on runs a bounded binding. The default reads
    /// `counter` around the call; an executor that can read the same counter inline (the
    /// kernel: `rdinstret`) overrides it to save the two indirect calls.
    fn run_bounded_counted(
        &self,
        budget: u64,
        prepared: u64,
        counter: fn() -> u64,
        spent: &mut u64,
        body: &mut dyn FnMut() -> Result<(), HandlerFault>,
    ) -> Result<(), HandlerFault> {
        let start = counter();
        let outcome = self.run_bounded(budget, prepared, body);
        *spent = spent.wrapping_add(counter().wrapping_sub(start));
        outcome
    }

    /// [`run_bounded`](Self::run_bounded) (or, with `spent`, the counted form) of a plain
    /// function: calls `function(data)` once under the budget. The single bounded binding's
    /// raise uses it with a function monomorphised for its handler type, so that no closure
    /// object and no second indirect call stand between the executor and the handler. The
    /// default wraps the call in a closure for [`run_bounded`](Self::run_bounded); the
    /// kernel's executor passes `function` to its bounded-call trampoline as it is.
    ///
    /// # Safety
    ///
    /// Calling `function(data)` once, on this hart, before this call returns, must be sound
    /// (the dispatcher passes a pointer to its own live frame and the function made for it).
    unsafe fn run_bounded_raw(
        &self,
        budget: u64,
        prepared: u64,
        counter: fn() -> u64,
        spent: Option<&mut u64>,
        function: unsafe extern "C" fn(*mut u8),
        data: *mut u8,
    ) -> Result<(), HandlerFault> {
        // SAFETY: forwarded from the caller.
        unsafe { run_function_bounded(self, budget, prepared, counter, spent, function, data) }
    }
}

/// What [`BoundedExecutor::run_bounded_raw`] does unless an executor overrides it:
/// `function(data)` once, in a closure, under [`BoundedExecutor::run_bounded`] (or the
/// counted form with `spent`). Public for executors that wrap the default (a test's
/// executor that counts the calls).
///
/// # Safety
///
/// As for [`BoundedExecutor::run_bounded_raw`].
pub unsafe fn run_function_bounded<E: BoundedExecutor + ?Sized>(
    executor: &E,
    budget: u64,
    prepared: u64,
    counter: fn() -> u64,
    spent: Option<&mut u64>,
    function: unsafe extern "C" fn(*mut u8),
    data: *mut u8,
) -> Result<(), HandlerFault> {
    // At most one call, whatever `run_bounded` does with the body.
    let mut called = false;
    let mut body = || {
        if !called {
            called = true;
            // SAFETY: the caller's contract: one call, here, while `data` is live (the
            // flag keeps it to one).
            unsafe { function(data) };
        }
        Ok(())
    };
    match spent {
        Some(spent) => executor.run_bounded_counted(budget, prepared, counter, spent, &mut body),
        None => executor.run_bounded(budget, prepared, &mut body),
    }
}

/// The hooks one dispatcher uses.
#[derive(Clone)]
pub struct Platform {
    /// Reads a monotonically increasing instruction count (kernel: `rdinstret`).
    pub instruction_counter: fn() -> u64,
    /// Runs bounded bindings; `None` makes installing a bounded binding fail with
    /// `InstallError::BoundedUnsupported`.
    pub bounded_executor: Option<&'static dyn BoundedExecutor>,
    /// Starts the workers of async bindings; `None` makes installing an async binding
    /// fail with `InstallError::AsyncUnsupported`.
    pub async_executor: Option<Arc<dyn AsyncExecutor>>,
    /// Harts that may raise events, numbered `0..hart_count` (kernel: the hart ids).
    pub hart_count: usize,
    /// What `instruction_counter` counts, for listings (`instructions` when exact; the
    /// kernel says `host-ticks` when it reads a host cycle counter instead).
    pub counter_unit: &'static str,
}

impl Platform {
    /// Hooks for `hart_count` harts with an instruction counter and no bounded executor.
    pub fn new(instruction_counter: fn() -> u64, hart_count: usize) -> Self {
        Platform { instruction_counter, bounded_executor: None, async_executor: None, hart_count, counter_unit: "instructions" }
    }

    /// Names what the instruction counter counts (see [`Platform::counter_unit`]).
    pub fn with_counter_unit(mut self, unit: &'static str) -> Self {
        self.counter_unit = unit;
        self
    }

    /// Adds an async executor (the workers of async bindings).
    pub fn with_async_executor(mut self, executor: Arc<dyn AsyncExecutor>) -> Self {
        self.async_executor = Some(executor);
        self
    }

    /// Adds a bounded executor.
    pub fn with_bounded_executor(mut self, executor: &'static dyn BoundedExecutor) -> Self {
        self.bounded_executor = Some(executor);
        self
    }
}
