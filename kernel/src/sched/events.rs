//! The scheduler's events in the kernel dispatcher: `sched.Block`, `sched.Unblock`,
//! `sched.Checkpoint`, `sched.Resume` (SPIN's strand interface, DESIGN.md §7).
//!
//! The global scheduler ([`crate::sched`]) is the primary module of all four: its defaults
//! are today's behaviour (a woken strand is queued at its own priority and waits for the
//! next tick; a yielding strand is queued again at its own priority), and it validates
//! every answer an extension gives (a priority outside `1..=7`, a `preempt` other than
//! 0/1): a rejected answer counts as a fault of the binding, is counted in
//! [`Statistics::rejected`], and the default is used. Every handler runs bounded by
//! [`SCHED_HANDLER_BUDGET`] at most.
//!
//! Where the raises happen (see `docs/scheduling.md`): only in thread context, with
//! interrupts on at the call site and no scheduler lock held, inside the usual
//! no-preemption section of [`crate::events::raise`] — so a bounded handler's budget timer works
//! and a handler may itself block-free call into the scheduler (`unblock`). A scheduler
//! operation made with interrupts off (the timer tick's preemption and wake-ups, code
//! holding a lock taken with interrupts off) takes the default without raising, and is
//! counted in [`Statistics::interrupts_off`]. A scheduler operation made *by a handler of
//! a scheduler event* (an `Unblock` handler that unblocks another strand) also takes the
//! default without raising ([`Statistics::nested`]): no recursion through the scheduler.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use spindle_abi::event::{
    Requeue, SCHED_BLOCK, SCHED_CHECKPOINT, SCHED_RESUME, SCHED_UNBLOCK, StrandBlock, StrandCheckpoint, StrandResume, StrandUnblock,
    UnblockDecision,
};
use spindle_dispatch::{Authorization, Combiner, EventTable, InstallRequest, PrimaryModule, Refusal, ResultRejection};
use spin::Once;

use crate::arch::hart::{self, MAX_HARTS};

/// Budget imposed on every scheduler-event handler: 20,000 instructions (20 µs at 1 GHz).
/// A policy decides in far less; the cap keeps a looping policy from stalling switches.
pub const SCHED_HANDLER_BUDGET: u64 = 20_000;

/// The scheduler as primary module of one of its events (`R` is the result record).
struct SchedulerService;

fn authorize_bounded<A>() -> Result<Authorization<A>, Refusal> {
    Ok(Authorization::allow().cap_budget(SCHED_HANDLER_BUDGET))
}

fn priority_valid(priority: u32) -> bool {
    (StrandUnblock::LOWEST..=StrandUnblock::HIGHEST).contains(&priority)
}

fn reject(reason: &'static str) -> Result<(), ResultRejection> {
    REJECTED.fetch_add(1, Ordering::Relaxed);
    Err(ResultRejection { reason })
}

impl PrimaryModule<StrandBlock, ()> for SchedulerService {
    fn name(&self) -> &str {
        "sched"
    }
    fn default_result(&self, _: &StrandBlock) {}
    fn authorize(&self, _: &InstallRequest<'_, StrandBlock>) -> Result<Authorization<StrandBlock>, Refusal> {
        authorize_bounded()
    }
}

impl PrimaryModule<StrandUnblock, UnblockDecision> for SchedulerService {
    fn name(&self) -> &str {
        "sched"
    }
    /// Today's behaviour: the strand's own priority, no preemption.
    fn default_result(&self, args: &StrandUnblock) -> UnblockDecision {
        UnblockDecision { priority: args.priority, preempt: 0 }
    }
    fn combiner(&self) -> Combiner<UnblockDecision> {
        Combiner::Last
    }
    fn authorize(&self, _: &InstallRequest<'_, StrandUnblock>) -> Result<Authorization<StrandUnblock>, Refusal> {
        authorize_bounded()
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, _: &StrandUnblock, result: &UnblockDecision) -> Result<(), ResultRejection> {
        if !priority_valid(result.priority) {
            return reject("priority outside 1..=7");
        }
        if result.preempt > 1 {
            return reject("preempt is neither 0 nor 1");
        }
        Ok(())
    }
}

impl PrimaryModule<StrandCheckpoint, Requeue> for SchedulerService {
    fn name(&self) -> &str {
        "sched"
    }
    /// Today's behaviour: queued again at its own priority.
    fn default_result(&self, args: &StrandCheckpoint) -> Requeue {
        Requeue { priority: args.priority }
    }
    fn authorize(&self, _: &InstallRequest<'_, StrandCheckpoint>) -> Result<Authorization<StrandCheckpoint>, Refusal> {
        authorize_bounded()
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, _: &StrandCheckpoint, result: &Requeue) -> Result<(), ResultRejection> {
        if !priority_valid(result.priority) {
            return reject("priority outside 1..=7");
        }
        Ok(())
    }
}

impl PrimaryModule<StrandResume, ()> for SchedulerService {
    fn name(&self) -> &str {
        "sched"
    }
    fn default_result(&self, _: &StrandResume) {}
    fn authorize(&self, _: &InstallRequest<'_, StrandResume>) -> Result<Authorization<StrandResume>, Refusal> {
        authorize_bounded()
    }
}

static BLOCK: Once<Arc<EventTable<StrandBlock, ()>>> = Once::new();
static UNBLOCK: Once<Arc<EventTable<StrandUnblock, UnblockDecision>>> = Once::new();
static CHECKPOINT: Once<Arc<EventTable<StrandCheckpoint, Requeue>>> = Once::new();
static RESUME: Once<Arc<EventTable<StrandResume, ()>>> = Once::new();

/// Set while this hart runs a scheduler-event raise (the recursion guard).
static RAISING: [AtomicBool; MAX_HARTS] = [const { AtomicBool::new(false) }; MAX_HARTS];
static REJECTED: AtomicU64 = AtomicU64::new(0);
static NESTED: AtomicU64 = AtomicU64::new(0);
static INTERRUPTS_OFF: AtomicU64 = AtomicU64::new(0);

/// Registers the four events (after the dispatcher exists; before that, and for any
/// event nobody has bound, the scheduler uses its defaults without raising).
pub fn init() {
    let dispatcher = crate::events::dispatcher();
    let service = Arc::new(SchedulerService);
    let block = dispatcher.register(&SCHED_BLOCK, service.clone()).expect("sched.Block registered twice");
    BLOCK.call_once(|| block);
    let unblock = dispatcher.register(&SCHED_UNBLOCK, service.clone()).expect("sched.Unblock registered twice");
    UNBLOCK.call_once(|| unblock);
    let checkpoint = dispatcher.register(&SCHED_CHECKPOINT, service.clone()).expect("sched.Checkpoint registered twice");
    CHECKPOINT.call_once(|| checkpoint);
    let resume = dispatcher.register(&SCHED_RESUME, service).expect("sched.Resume registered twice");
    RESUME.call_once(|| resume);
}

/// Scheduler decisions taken without raising although a binding was installed, and
/// answers refused. (Operations on an event nobody has bound are not counted: the raise
/// is skipped to keep the switch path cheap.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Answers the scheduler rejected (the default was used instead).
    pub rejected: u64,
    /// Operations made by a handler of a scheduler event (default, no raise).
    pub nested: u64,
    /// Operations made with interrupts off (default, no raise).
    pub interrupts_off: u64,
}

/// The counters so far.
pub fn statistics() -> Statistics {
    Statistics {
        rejected: REJECTED.load(Ordering::Relaxed),
        nested: NESTED.load(Ordering::Relaxed),
        interrupts_off: INTERRUPTS_OFF.load(Ordering::Relaxed),
    }
}

/// Raises `table` with `args` if the scheduler may (see the module docs), else returns
/// `default()`. `interrupts_on` is whether the scheduler operation was entered with
/// interrupts enabled.
#[inline(always)]
fn raise_or_default<A, R>(
    table: &Once<Arc<EventTable<A, R>>>,
    interrupts_on: bool,
    args: impl FnOnce() -> A,
    default: impl FnOnce() -> R,
) -> R
where
    A: spindle_abi::event::EventRecord,
    R: spindle_abi::event::EventRecord,
{
    let Some(table) = table.get() else { return default() };
    // HOT PATH: with nothing bound the raise is skipped (a plan load and a length test
    // instead of a raise through the dispatcher): without this every block, unblock and
    // switch paid four default-only raises (see docs/scheduling.md for the numbers).
    if !table.has_bindings() {
        return default();
    }
    if !interrupts_on {
        INTERRUPTS_OFF.fetch_add(1, Ordering::Relaxed);
        return default();
    }
    let _no_preemption = crate::sched::no_preemption();
    let raising = &RAISING[hart::id()];
    if raising.swap(true, Ordering::Acquire) {
        NESTED.fetch_add(1, Ordering::Relaxed);
        return default();
    }
    let result = crate::events::raise(table, &args());
    raising.store(false, Ordering::Release);
    result
}

/// Whether `sched.Block` or `sched.Checkpoint` has a binding (else a strand giving up the
/// hart skips gathering their arguments).
#[inline]
pub fn leaving_bound() -> bool {
    BLOCK.get().is_some_and(|table| table.has_bindings()) || CHECKPOINT.get().is_some_and(|table| table.has_bindings())
}

/// Whether `sched.Resume` has a binding.
#[inline]
pub fn resume_bound() -> bool {
    RESUME.get().is_some_and(|table| table.has_bindings())
}

/// `sched.Block` for the running strand.
#[inline]
pub fn block(interrupts_on: bool, args: impl FnOnce() -> StrandBlock) {
    raise_or_default(&BLOCK, interrupts_on, args, || ())
}

/// `sched.Unblock`: the decision for a strand about to be made ready.
#[inline]
pub fn unblock(interrupts_on: bool, args: impl FnOnce() -> StrandUnblock, own_priority: u32) -> UnblockDecision {
    raise_or_default(&UNBLOCK, interrupts_on, args, || UnblockDecision { priority: own_priority, preempt: 0 })
}

/// `sched.Checkpoint`: the priority a strand that stays ready is queued again at.
#[inline]
pub fn checkpoint(interrupts_on: bool, args: impl FnOnce() -> StrandCheckpoint, own_priority: u32) -> Requeue {
    raise_or_default(&CHECKPOINT, interrupts_on, args, || Requeue { priority: own_priority })
}

/// `sched.Resume` for the running strand.
#[inline]
pub fn resume(interrupts_on: bool, args: impl FnOnce() -> StrandResume) {
    raise_or_default(&RESUME, interrupts_on, args, || ())
}
