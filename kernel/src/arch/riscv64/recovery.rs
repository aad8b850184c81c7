//! Fault recovery points: run a closure so that a fault inside it returns an error to
//! the caller instead of stopping the kernel.
//!
//! [`catch_faults`] saves the callee-saved registers, `ra` and `sp` in a
//! [`RecoveryPoint`] on the stack and links it into the hart's chain. If the closure
//! traps (page fault, illegal instruction, …, or a kernel stack overflow into a guard
//! page), the trap handler rewrites the trap frame so that `sret` lands in
//! `recovery_landing`, which restores the saved registers and makes `recovery_call`
//! return 1 — a longjmp in the trap frame. This is the dispatcher boundary used to
//! contain extensions (DESIGN.md §6) and the mechanism behind fault tests.
//!
//! [`run_bounded`] adds a deadline: the timer interrupt that finds the deadline passed
//! while the bounded closure runs in S-mode redirects to the same kind of recovery
//! point, so an infinite loop in an extension handler ends as `Abort::BudgetExceeded`.
//! Entering a bounded call does not write the timer each time: `bounded_call` stores the
//! deadline and the recovery point in the hart's state, and every timer interrupt checks
//! them (`abort_overrun`), then reprograms the timer for the earliest of the next tick,
//! the running call's deadline and the alarm. A call programs a one-shot itself only when
//! no interrupt is due by its deadline (`HartLocal::timer_armed_at`), so a call is
//! aborted at its deadline, never earlier (docs/budgets.md).
//!
//! Limitations: destructors of values live inside the closure do not run after a
//! fault (their memory is leaked unless it came from a per-extension arena or a private
//! heap), and a lock held by the closure at the time of the fault stays held. Callers
//! must not hold kernel locks across code that may fault. The destructor effects
//! restored are the hart's no-preemption depth (`sched::no_preemption` guards inside the
//! closure), which an abort would otherwise leave raised for good, stopping preemption
//! on the hart, and its heap route (`mm::private_heap`), and — when a migrating call
//! made inside the bounded call marked it ([`mark_migration`]: an upcall into a
//! user-level extension) — the strand's own address space and interrupt state.

use core::sync::atomic::Ordering;

use super::hart::{
    self, HART_BUDGET_DEADLINE_OFFSET, HART_BUDGET_POINT_OFFSET, HART_HEAP_ROUTE_OFFSET,
    HART_PREEMPT_DISABLED_OFFSET, HART_RECOVERY_OFFSET, HART_TIMER_ARMED_AT_OFFSET,
};
use super::csr::SSTATUS_SPP;
use super::trap::{FaultReport, TrapFrame, reg};

/// Saved state of a recovery point: ra, sp, s0..s11 and the previous point in the chain;
/// for a bounded call's point also what its abort must put back: the previous budget point
/// and deadline, and the hart's no-preemption depth and heap route at entry (destructors
/// inside an aborted call do not run, so nothing else would).
#[repr(C)]
pub struct RecoveryPoint {
    saved: [usize; 14],
    previous: usize,
    previous_budget_point: usize,
    outer_deadline: u64,
    preemption_depth: usize,
    heap_route: usize,
    /// Valid only while the hart's `migration_point` names this point (so `bounded_call`
    /// need not clear it): the root a migrating call made inside this bounded call must go
    /// back to ([`mark_migration`]), with [`MIGRATED_INTERRUPTS_ON`] if interrupts were on
    /// before it.
    migrated_from: core::mem::MaybeUninit<usize>,
    /// Valid with `migrated_from`: the hart's `migration_point` before the mark.
    outer_migration_point: core::mem::MaybeUninit<usize>,
}

/// [`RecoveryPoint::migrated_from`]: interrupts were on before the migrating call (roots
/// are page-aligned, so the low bits are free).
const MIGRATED_INTERRUPTS_ON: usize = 1 << 0;

const PREVIOUS_OFFSET: usize = 14 * 8;
const PREVIOUS_BUDGET_POINT_OFFSET: usize = 15 * 8;
const OUTER_DEADLINE_OFFSET: usize = 16 * 8;
const PREEMPTION_DEPTH_OFFSET: usize = 17 * 8;
const HEAP_ROUTE_OFFSET: usize = 18 * 8;

const _: () = {
    assert!(core::mem::offset_of!(RecoveryPoint, previous) == PREVIOUS_OFFSET);
    assert!(core::mem::offset_of!(RecoveryPoint, previous_budget_point) == PREVIOUS_BUDGET_POINT_OFFSET);
    assert!(core::mem::offset_of!(RecoveryPoint, outer_deadline) == OUTER_DEADLINE_OFFSET);
    assert!(core::mem::offset_of!(RecoveryPoint, preemption_depth) == PREEMPTION_DEPTH_OFFSET);
    assert!(core::mem::offset_of!(RecoveryPoint, heap_route) == HEAP_ROUTE_OFFSET);
};

core::arch::global_asm!(
    ".section .text",
    ".balign 4",
    // usize recovery_call(RecoveryPoint *point, void (*f)(void *), void *data)
    ".globl recovery_call",
    "recovery_call:",
    "    sd ra, 0*8(a0)",
    "    sd sp, 1*8(a0)",
    "    sd s0, 2*8(a0)",
    "    sd s1, 3*8(a0)",
    "    sd s2, 4*8(a0)",
    "    sd s3, 5*8(a0)",
    "    sd s4, 6*8(a0)",
    "    sd s5, 7*8(a0)",
    "    sd s6, 8*8(a0)",
    "    sd s7, 9*8(a0)",
    "    sd s8, 10*8(a0)",
    "    sd s9, 11*8(a0)",
    "    sd s10, 12*8(a0)",
    "    sd s11, 13*8(a0)",
    "    ld t0, {recovery}(tp)",
    "    sd t0, {previous}(a0)",
    "    sd a0, {recovery}(tp)",
    "    mv s0, a0",
    "    mv t1, a1",
    "    mv a0, a2",
    "    jalr t1",
    // Normal return: unlink, restore ra and s0, return 0.
    "    ld t0, {previous}(s0)",
    "    sd t0, {recovery}(tp)",
    "    ld ra, 0*8(s0)",
    "    ld s0, 2*8(s0)",
    "    li a0, 0",
    "    ret",
    // Entered by sret from the trap handler with a0 = the recovery point.
    ".globl recovery_landing",
    "recovery_landing:",
    "    ld t0, {previous}(a0)",
    "    sd t0, {recovery}(tp)",
    "    ld ra, 0*8(a0)",
    "    ld sp, 1*8(a0)",
    "    ld s0, 2*8(a0)",
    "    ld s1, 3*8(a0)",
    "    ld s2, 4*8(a0)",
    "    ld s3, 5*8(a0)",
    "    ld s4, 6*8(a0)",
    "    ld s5, 7*8(a0)",
    "    ld s6, 8*8(a0)",
    "    ld s7, 9*8(a0)",
    "    ld s8, 10*8(a0)",
    "    ld s9, 11*8(a0)",
    "    ld s10, 12*8(a0)",
    "    ld s11, 13*8(a0)",
    "    li a0, 1",
    "    ret",
    recovery = const HART_RECOVERY_OFFSET,
    previous = const PREVIOUS_OFFSET,
);

// `recovery_call` for a bounded call. Once the registers are saved, the point also records
// what an abort must put back (the outer budget point and deadline, the no-preemption
// depth and heap route), becomes the hart's budget point, and the
// deadline — the earlier of `deadline` and the outer call's — its budget deadline (in that
// order: a deadline never names another call's point). A one-shot timer is programmed
// only if no interrupt is due by then (`HartLocal::timer_armed_at`). On a normal return
// the deadline is cleared before the outer budget point is put back, so a late timer
// interrupt never aborts to a point that has returned; then the outer deadline is put back
// (an interrupt is due by it: one was due by the earlier, inner deadline), or, if it is
// less than `NESTED_EXIT_GRACE` away, that grace period from now. An abort lands
// at `recovery_landing`, which unlinks only the recovery point; `run_bounded` restores
// the rest from the point (the trap handler has cleared the deadline by then).
core::arch::global_asm!(
    ".section .text",
    ".balign 4",
    // usize bounded_call(RecoveryPoint *point, u64 deadline, void (*f)(void *), void *data)
    ".globl bounded_call",
    "bounded_call:",
    "    sd ra, 0*8(a0)",
    "    sd sp, 1*8(a0)",
    "    sd s0, 2*8(a0)",
    "    sd s1, 3*8(a0)",
    "    sd s2, 4*8(a0)",
    "    sd s3, 5*8(a0)",
    "    sd s4, 6*8(a0)",
    "    sd s5, 7*8(a0)",
    "    sd s6, 8*8(a0)",
    "    sd s7, 9*8(a0)",
    "    sd s8, 10*8(a0)",
    "    sd s9, 11*8(a0)",
    "    sd s10, 12*8(a0)",
    "    sd s11, 13*8(a0)",
    "    ld t0, {recovery}(tp)",
    "    sd t0, {previous}(a0)",
    "    ld t0, {budget_point}(tp)",
    "    sd t0, {previous_budget_point}(a0)",
    "    ld t0, {preempt}(tp)",
    "    sd t0, {depth}(a0)",
    "    ld t0, {route}(tp)",
    "    sd t0, {heap_route}(a0)",
    "    ld t0, {deadline}(tp)",
    "    sd t0, {outer_deadline}(a0)",
    // The effective deadline: the earlier of ours and a nonzero outer one.
    "    beqz t0, 1f",
    "    bgeu t0, a1, 1f",
    "    mv a1, t0",
    "1:",
    "    sd a0, {recovery}(tp)",
    "    sd a0, {budget_point}(tp)",
    "    sd a1, {deadline}(tp)",
    "    mv s0, a0",
    "    mv s1, a2",
    "    mv s2, a3",
    "    ld t0, {armed}(tp)",
    "    bgeu a1, t0, 2f",
    "    call {program_timer}",
    "2:",
    "    mv a0, s2",
    "    jalr s1",
    // Normal return: disarm, unlink, put the outer deadline back, restore, return 0.
    "    sd zero, {deadline}(tp)",
    "    ld t0, {previous_budget_point}(s0)",
    "    sd t0, {budget_point}(tp)",
    "    ld t0, {previous}(s0)",
    "    sd t0, {recovery}(tp)",
    // An enclosing call whose deadline has passed meanwhile (or is about to) gets a short
    // grace period, so the code between the two levels (which may report an inner overrun
    // outwards) runs instead of being aborted at once; the timer is reprogrammed if no
    // interrupt is due by the new deadline.
    "    ld t0, {outer_deadline}(s0)",
    "    beqz t0, 3f",
    "    rdtime t1",
    "    addi t1, t1, {grace}",
    "    bgeu t0, t1, 3f",
    "    sd t1, {deadline}(tp)",
    "    ld t2, {armed}(tp)",
    "    bgeu t1, t2, 4f",
    "    call {program_timer}",
    "    j 4f",
    "3:",
    "    sd t0, {deadline}(tp)",
    "4:",
    "    ld ra, 0*8(s0)",
    "    ld s1, 3*8(s0)",
    "    ld s2, 4*8(s0)",
    "    ld s0, 2*8(s0)",
    "    li a0, 0",
    "    ret",
    recovery = const HART_RECOVERY_OFFSET,
    budget_point = const HART_BUDGET_POINT_OFFSET,
    deadline = const HART_BUDGET_DEADLINE_OFFSET,
    armed = const HART_TIMER_ARMED_AT_OFFSET,
    preempt = const HART_PREEMPT_DISABLED_OFFSET,
    route = const HART_HEAP_ROUTE_OFFSET,
    previous = const PREVIOUS_OFFSET,
    previous_budget_point = const PREVIOUS_BUDGET_POINT_OFFSET,
    outer_deadline = const OUTER_DEADLINE_OFFSET,
    depth = const PREEMPTION_DEPTH_OFFSET,
    heap_route = const HEAP_ROUTE_OFFSET,
    program_timer = sym arm_budget_timer,
    grace = const NESTED_EXIT_GRACE,
);

/// Called by `bounded_call` when no timer interrupt is due by the call's deadline.
extern "C" fn arm_budget_timer() {
    crate::time::program_timer();
}

unsafe extern "C" {
    fn recovery_call(point: *mut RecoveryPoint, f: extern "C" fn(*mut u8), data: *mut u8) -> usize;
    fn bounded_call(point: *mut RecoveryPoint, deadline: u64, f: unsafe extern "C" fn(*mut u8), data: *mut u8) -> usize;
    fn recovery_landing();
}

struct CallState<F, R> {
    function: Option<F>,
    result: Option<R>,
}

/// A bounded call's closure and the place for its result (see [`run_bounded`]).
struct BoundedState<F, R> {
    function: core::mem::ManuallyDrop<F>,
    result: core::mem::MaybeUninit<R>,
}

/// What `bounded_call` calls once it has armed the deadline: runs the closure and stores
/// its result.
extern "C" fn call_bounded_closure<F: FnOnce() -> R, R>(data: *mut u8) {
    // SAFETY: `run_bounded` passes a pointer to its live `BoundedState<F, R>`, exclusively
    // borrowed for the duration of `bounded_call`, which calls this once: the function is
    // taken exactly once and never dropped by `run_bounded`.
    let state = unsafe { &mut *data.cast::<BoundedState<F, R>>() };
    // SAFETY: see above (taken once, `ManuallyDrop` never dropped elsewhere).
    let function = unsafe { core::mem::ManuallyDrop::take(&mut state.function) };
    state.result.write(function());
}

extern "C" fn call_closure<F: FnOnce() -> R, R>(data: *mut u8) {
    // SAFETY: `catch_faults` passes a pointer to its live `CallState<F, R>`, exclusively
    // borrowed for the duration of `recovery_call`, which is the only caller of this.
    let state = unsafe { &mut *data.cast::<CallState<F, R>>() };
    if let Some(function) = state.function.take() {
        state.result = Some(function());
    }
}

/// Runs `f`; if it faults, returns the fault instead of stopping the kernel.
///
/// Returns `Err(report)` with the cause, faulting address and pc when `f` traps with a
/// synchronous exception. See the module documentation for what is not cleaned up.
pub fn catch_faults<F: FnOnce() -> R, R>(f: F) -> Result<R, FaultReport> {
    let mut state = CallState { function: Some(f), result: None };
    // Filled by `recovery_call` before anything reads it: no need to zero it first
    // (that was 15 stores on every bounded handler call).
    let mut point = core::mem::MaybeUninit::<RecoveryPoint>::uninit();
    // An abort skips the destructors inside `f`, among them the guards of no-preemption
    // sections it entered: restore the depth this point was armed with. Likewise the
    // hart's heap route (a private heap entered inside `f` is not the route after it).
    let preemption_depth = hart::current().preempt_disabled.load(Ordering::Relaxed);
    let heap_route = crate::mm::private_heap::current_route();
    // SAFETY: `point` and `state` outlive the call; `call_closure::<F, R>` matches the
    // type of `state`. `recovery_call` saves/restores every callee-saved register, so
    // on both return paths the Rust ABI's register contract holds.
    let faulted = unsafe {
        recovery_call(point.as_mut_ptr(), call_closure::<F, R>, (&raw mut state).cast::<u8>())
    };
    if faulted == 0 {
        // The closure ran to completion, so `result` is set.
        return state.result.ok_or_else(take_last_fault);
    }
    hart::current().preempt_disabled.store(preemption_depth, Ordering::Relaxed);
    crate::mm::private_heap::resume_routing(heap_route);
    Err(take_last_fault())
}

fn take_last_fault() -> FaultReport {
    let local = hart::current();
    let scause = local.last_fault_cause.load(Ordering::Relaxed);
    FaultReport {
        cause: super::trap::TrapCause::from_scause(scause),
        scause,
        stval: local.last_fault_value.load(Ordering::Relaxed),
        pc: local.last_fault_pc.load(Ordering::Relaxed),
        stack_overflow: local.last_fault_was_overflow.load(Ordering::Relaxed) != 0,
    }
}

/// Called by the trap handler for a fault in S-mode: if a recovery point is armed,
/// records the fault and rewrites `frame` so that `sret` resumes at the recovery
/// point; returns false when none is armed.
pub(super) fn redirect_to_recovery_point(frame: &mut TrapFrame, report: &FaultReport) -> bool {
    let local = hart::current();
    let point = local.recovery_point.load(Ordering::Relaxed);
    if point == 0 {
        return false;
    }
    local.last_fault_cause.store(report.scause, Ordering::Relaxed);
    local.last_fault_value.store(report.stval, Ordering::Relaxed);
    local.last_fault_pc.store(report.pc, Ordering::Relaxed);
    local.last_fault_was_overflow.store(usize::from(report.stack_overflow), Ordering::Relaxed);
    local.last_abort_was_overrun.store(0, Ordering::Relaxed);
    if point == local.budget_point.load(Ordering::Relaxed) {
        // The bounded call itself is aborted: its deadline must not fire at its point
        // once it has landed (`run_bounded` restores the outer one).
        local.budget_deadline.store(0, Ordering::Relaxed);
    }
    land_at(frame, point);
    true
}

fn land_at(frame: &mut TrapFrame, point: usize) {
    frame.regs[reg::A0] = point;
    frame.sepc = recovery_landing as *const () as usize;
}

/// Timebase ticks (100 µs at 10 MHz) an enclosing bounded call is given after a nested
/// one ends past the enclosing deadline (an immediate of `bounded_call`: below 2048).
const NESTED_EXIT_GRACE: u64 = 1_000;
const _: () = assert!(NESTED_EXIT_GRACE < 2048);

/// Why a bounded call did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abort {
    /// The closure trapped.
    Fault(FaultReport),
    /// The deadline passed while the closure was running.
    BudgetExceeded,
}

/// Runs `f` until it returns, faults, or is found past `deadline` (a `time` value) by a
/// timer interrupt, which comes at the deadline (module documentation).
///
/// Interrupts must be enabled for the deadline to be enforced (the timer delivers it);
/// a bounded call started with interrupts off can still fault but not overrun. Bounded
/// calls nest: the inner one runs until the earlier of both deadlines, and whichever
/// deadline passes, the innermost call is the one aborted (its caller sees the overrun
/// and reports it outwards); the outer deadline is restored when the inner call ends.
pub fn run_bounded<F: FnOnce() -> R, R>(deadline: u64, f: F) -> Result<R, Abort> {
    // Everything an abort must put back is saved by `bounded_call` in the point.
    let mut state = BoundedState { function: core::mem::ManuallyDrop::new(f), result: core::mem::MaybeUninit::uninit() };
    // SAFETY: `call_bounded_closure::<F, R>` is made for `state`'s type, and `state` is
    // live and used by nothing else until the call returns; the closure is taken once.
    unsafe { run_bounded_raw(deadline, call_bounded_closure::<F, R>, (&raw mut state).cast::<u8>()) }?;
    // After an abort the closure's captures are leaked, as the module documentation says
    // (it may or may not have been taken), and so is a result written just before a
    // deadline aborted the call on its way out.
    // SAFETY: returned normally: `call_bounded_closure` ran to its end, result written.
    Ok(unsafe { state.result.assume_init() })
}

/// [`run_bounded`] of a plain function: calls `function(data)` once until it returns,
/// faults, or is found past `deadline` — the dispatcher's single-bounded-binding raise,
/// whose `function` is made for its handler type, so no closure stands in between.
///
/// # Safety
///
/// Calling `function(data)` once, on this hart, before this returns, must be sound.
#[inline(always)]
pub unsafe fn run_bounded_raw(deadline: u64, function: unsafe extern "C" fn(*mut u8), data: *mut u8) -> Result<(), Abort> {
    // Filled by `bounded_call` before anything reads it.
    let mut point = core::mem::MaybeUninit::<RecoveryPoint>::uninit();
    // SAFETY: `point` outlives the call; the caller vouches for `function(data)`.
    // `bounded_call` saves/restores every callee-saved register, so on both return paths
    // the Rust ABI's register contract holds.
    let aborted = unsafe { bounded_call(point.as_mut_ptr(), deadline, function, data) };
    if aborted == 0 {
        return Ok(());
    }
    // SAFETY: `bounded_call` wrote every field of the point before calling the function
    // (all but the migration fields, which are `MaybeUninit` and read only when marked),
    // and nothing writes it after the landing.
    Err(settle_abort(unsafe { point.assume_init_ref() }))
}

/// The abort path of [`run_bounded`] (out of line): puts back what the landing did not —
/// the outer budget point and deadline, and the no-preemption depth and heap route the
/// call began with, which the aborted code's destructors would have restored — and says why it ended. An enclosing call whose deadline passed meanwhile
/// gets a short grace period, so the code between the two levels (which reports the inner
/// abort outwards) runs instead of being aborted asynchronously a second time.
#[cold]
#[inline(never)]
fn settle_abort(saved: &RecoveryPoint) -> Abort {
    // Off until everything is put back: the outer deadline may be only a grace period away,
    // and an abort landing at the outer point before the migration below is undone would
    // leave the hart in the other space (an overrun lands here with interrupts on).
    let interrupts_were_on = super::csr::disable_interrupts();
    let local = hart::current();
    // A migrating call aborted with the call: back to the strand's own space, and later to
    // the interrupt state it was made with (what `proc::migrate` would have done itself).
    let mut interrupts_on = interrupts_were_on;
    if local.migration_point.load(Ordering::Relaxed) == core::ptr::from_ref(saved) as usize {
        // SAFETY: the hart's migration point names this point only between
        // `mark_migration`, which wrote both fields, and `unmark_migration`.
        let (migrated_from, outer) = unsafe { (saved.migrated_from.assume_init(), saved.outer_migration_point.assume_init()) };
        local.migration_point.store(outer, Ordering::Relaxed);
        // What `sched::replace_address_space` does, at this layer: the running strand's
        // space is the hart's copy.
        let root = migrated_from & !MIGRATED_INTERRUPTS_ON;
        local.address_space.store(root, Ordering::Relaxed);
        crate::mm::kernel_space::activate(root);
        interrupts_on = migrated_from & MIGRATED_INTERRUPTS_ON != 0;
    }
    local.budget_point.store(saved.previous_budget_point, Ordering::Relaxed);
    local.preempt_disabled.store(saved.preemption_depth, Ordering::Relaxed);
    crate::mm::private_heap::resume_routing(saved.heap_route);
    if saved.outer_deadline != 0 {
        let restored = saved.outer_deadline.max(super::csr::time() as u64 + NESTED_EXIT_GRACE);
        local.budget_deadline.store(restored, Ordering::Relaxed);
        if restored < local.timer_armed_at.load(Ordering::Relaxed) {
            crate::time::program_timer();
        }
    }
    let abort = if local.last_abort_was_overrun.swap(0, Ordering::Relaxed) != 0 { Abort::BudgetExceeded } else { Abort::Fault(take_last_fault()) };
    if interrupts_on {
        super::csr::enable_interrupts();
    }
    abort
}

/// A migration marked in a bounded call's recovery point ([`mark_migration`]): the hart's
/// `migration_point` to put back.
#[must_use = "the mark must be cleared with `unmark_migration` when the call returns"]
pub struct MigrationMark {
    outer: usize,
}

/// Marks, in the innermost bounded call's recovery point, that this strand is about to run
/// a migrating call in another address space, coming back to `previous_root` (interrupts
/// `interrupts_were_on` before): if the bounded call is aborted (an overrun, or a fault
/// on the call's behalf) before [`unmark_migration`], its abort path switches back to
/// `previous_root` and restores the interrupt state — what the migrating call would do
/// on its way out — so the call needs no recovery point of its own
/// (`proc::migrate::call`). `None` when no bounded call is armed or a fault would land
/// elsewhere (a recovery point inside the bounded call): the caller then needs its own.
///
/// Call it with interrupts off, right after the switch, so no abort falls between them.
#[inline]
pub fn mark_migration(previous_root: usize, interrupts_were_on: bool) -> Option<MigrationMark> {
    let local = hart::current();
    let point = local.budget_point.load(Ordering::Relaxed);
    if point == 0 || point != local.recovery_point.load(Ordering::Relaxed) {
        return None;
    }
    let outer = local.migration_point.load(Ordering::Relaxed);
    let saved = point as *mut RecoveryPoint;
    // The budget point is the live recovery point of the bounded call enclosing this code
    // (`bounded_call` unlinks it before its frame ends), on this strand's stack.
    // SAFETY: only this hart touches that point, and no Rust reference to it exists while
    // the call runs (`run_bounded_raw` reads it only after `bounded_call` returns).
    unsafe {
        (&raw mut (*saved).migrated_from).write(core::mem::MaybeUninit::new(previous_root | if interrupts_were_on { MIGRATED_INTERRUPTS_ON } else { 0 }));
        (&raw mut (*saved).outer_migration_point).write(core::mem::MaybeUninit::new(outer));
    }
    // Only now does the point's abort path read the fields above.
    local.migration_point.store(point, Ordering::Relaxed);
    Some(MigrationMark { outer })
}

/// Clears a [`mark_migration`] once the migrating call has switched back: the bounded
/// call's abort path no longer undoes it (an enclosing migration's mark is in force again).
#[inline]
pub fn unmark_migration(mark: MigrationMark) {
    hart::current().migration_point.store(mark.outer, Ordering::Relaxed);
}

/// Runs `f` with interrupts off — kernel work done on behalf of a bounded call that has
/// already ended, such as containing the extension whose handler overran — without
/// charging its time to an enclosing bounded call: the hart's deadline, if one is armed,
/// moves later by the time `f` took, before interrupts are on again (a deadline that
/// passed meanwhile would otherwise abort the caller the moment they are). Without this,
/// killing an extension nested in another's bounded call (its message printed, its
/// bindings removed) could use up the caller's budget and abort the caller for the
/// callee's fault.
pub fn uncharged<R>(f: impl FnOnce() -> R) -> R {
    super::csr::without_interrupts(|| {
        let start = super::csr::time() as u64;
        let result = f();
        let local = hart::current();
        let deadline = local.budget_deadline.load(Ordering::Relaxed);
        if deadline != 0 {
            let spent = (super::csr::time() as u64).saturating_sub(start);
            local.budget_deadline.store(deadline.saturating_add(spent), Ordering::Relaxed);
            crate::time::program_timer();
        }
        result
    })
}

/// Called on a timer interrupt: if a bounded call on this hart is past its deadline and
/// the interrupted code runs in S-mode, redirects `frame` to the call's recovery point.
pub(super) fn abort_overrun(frame: &mut TrapFrame, now: u64) -> bool {
    let local = hart::current();
    let deadline = local.budget_deadline.load(Ordering::Relaxed);
    if deadline == 0 || now < deadline || frame.sstatus & SSTATUS_SPP == 0 {
        return false;
    }
    let point = local.budget_point.load(Ordering::Relaxed);
    if point == 0 {
        return false;
    }
    local.budget_deadline.store(0, Ordering::Relaxed);
    local.last_abort_was_overrun.store(1, Ordering::Relaxed);
    land_at(frame, point);
    true
}
