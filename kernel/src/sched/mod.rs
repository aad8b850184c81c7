//! Strands and the global scheduler (DESIGN.md §7).
//!
//! A *strand* is SPIN's schedulable context: a kernel stack (with a guard page below it,
//! see [`crate::mm::stack`]), saved registers and a priority. The global scheduler is
//! round-robin within a priority and preemptive: the timer tick takes the hart from a
//! strand whose time slice is over when another strand of at least its priority is ready.
//!
//! Per-strand state that the hardware keeps per hart — the stack bottom used by the trap
//! vector's overflow check, the chain of recovery points and the budget deadline — is
//! saved and restored on every switch, so a bounded handler's budget and recovery points
//! follow it across preemption.
//!
//! Locking: the ready queues are behind one lock taken with interrupts off; it is never
//! held across a context switch. A strand's `running` flag stays set until its registers
//! are saved, so another hart never resumes a half-saved strand (SMP-ready; one hart runs
//! today).
//!
//! A strand also carries its address space (the root page table it runs with, see
//! [`set_address_space`]): the process strands of `proc` run with their process's, every
//! other strand with the kernel's. [`sleep_ticks`] blocks a strand until a timer tick.
//!
//! Scheduler events (SPIN's strand interface; `docs/scheduling.md`): the scheduler raises
//! `sched.Block` when a strand is about to wait, `sched.Unblock` before a blocked strand is
//! queued (the answer picks its priority level and whether it takes the hart at once),
//! `sched.Checkpoint` when a strand gives up the hart (the answer picks the level a
//! yielding strand is queued at) and `sched.Resume` when it has the hart again. The
//! scheduler is their primary module (`events`); its defaults are the
//! behaviour without extensions. Raises happen only in thread context — with interrupts
//! on at the call site, before any scheduler lock is taken (Block, Unblock, Checkpoint) or
//! after the switch back with interrupts restored (Resume) — so handlers run bounded by
//! their budget timer and may call back into the scheduler (such nested operations use
//! the defaults). Switches made by the timer tick, and wake-ups made with interrupts off,
//! raise nothing and use the defaults.
//!
//! Limitations: a strand's own priority is static (a policy changes the level it runs at
//! until it next gives up the hart); tick preemption and interrupt-context wake-ups are
//! invisible to policies.

/// The scheduler's events and its primary module for them.
#[deny(unsafe_code)]
pub mod async_workers;
pub mod events;
mod lent;
mod sleeplock;
mod strand;

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use core::sync::atomic::AtomicU64;

use spindle_abi::event::{StrandBlock, StrandCheckpoint, StrandResume, StrandUnblock};

use crate::arch::csr;
use crate::arch::hart::{self, MAX_HARTS};
use self::events as sched_events;
pub use lent::Lent;
pub use sleeplock::{SleepGuard, SleepLock};
pub use strand::{Priority, Strand, StrandState};

/// Number of priority levels; higher numbers run first.
pub const PRIORITY_LEVELS: usize = 8;

struct ReadyQueues {
    queues: [VecDeque<Arc<Strand>>; PRIORITY_LEVELS],
}

impl ReadyQueues {
    fn pop_at_least(&mut self, minimum: usize) -> Option<Arc<Strand>> {
        (minimum..PRIORITY_LEVELS).rev().find_map(|level| self.queues[level].pop_front())
    }
    fn has_at_least(&self, minimum: usize) -> bool {
        (minimum..PRIORITY_LEVELS).any(|level| !self.queues[level].is_empty())
    }
    fn push(&mut self, strand: Arc<Strand>) {
        let level = strand.running_priority().level();
        self.queues[level].push_back(strand);
    }
}

static READY: spin::Mutex<ReadyQueues> = spin::Mutex::new(ReadyQueues { queues: [const { VecDeque::new() }; PRIORITY_LEVELS] });
static CURRENT: [spin::Mutex<Option<Arc<Strand>>>; MAX_HARTS] = [const { spin::Mutex::new(None) }; MAX_HARTS];
static IDLE: [spin::Once<Arc<Strand>>; MAX_HARTS] = [const { spin::Once::new() }; MAX_HARTS];
/// Exited strands whose stacks are freed once they are fully switched out.
static ZOMBIES: spin::Mutex<Vec<Arc<Strand>>> = spin::Mutex::new(Vec::new());
/// Id of the strand that last gave up each hart (`sched.Resume`'s `previous`).
static PREVIOUS: [AtomicU64; MAX_HARTS] = [const { AtomicU64::new(0) }; MAX_HARTS];
/// Strands in [`sleep_ticks`], with the tick at which each is woken.
static SLEEPERS: spin::Mutex<Vec<(u64, Arc<Strand>)>> = spin::Mutex::new(Vec::new());

/// Makes the boot context strand 0 of this hart and creates the hart's idle strand.
pub fn init() -> Result<(), crate::mm::stack::StackError> {
    let hart_id = hart::id();
    let boot = Strand::adopt_boot("boot", hart::current().stack_bottom.load(Ordering::Relaxed));
    *CURRENT[hart_id].lock() = Some(boot);
    let idle = Strand::new("idle", Priority::IDLE, idle_loop)?;
    IDLE[hart_id].call_once(|| idle);
    Ok(())
}

/// Asked by the idle loop before it waits for an interrupt: while it answers true the hart
/// polls instead (see [`set_idle_poll_hook`]).
static IDLE_POLL_HOOK: spin::Once<fn() -> bool> = spin::Once::new();

/// Registers the idle-poll hook (first call wins): while it returns true, an idle hart
/// spins instead of executing `wfi`. The block service uses it while a request is on the
/// device and not yet done: under `-icount … sleep=off` an idle `wfi` lets QEMU jump guest
/// time to the next timer (the modelled finish), so a device still working on the host
/// would finish at a guest time that varies from run to run; spinning keeps guest time
/// moving until the device's interrupt arrives, before the finish.
pub fn set_idle_poll_hook(hook: fn() -> bool) {
    IDLE_POLL_HOOK.call_once(|| hook);
}

/// What a strand with nothing to do calls instead of `wfi` (the idle loop, and the service
/// strands that poll a device and would otherwise `wfi`): waits for the next interrupt,
/// unless the idle-poll hook says to keep polling ([`set_idle_poll_hook`]).
pub fn wait_idle() {
    if IDLE_POLL_HOOK.get().is_some_and(|hook| hook()) {
        core::hint::spin_loop();
    } else {
        csr::wait_for_interrupt();
    }
}

fn idle_loop() {
    loop {
        crate::events::quiescent();
        crate::events::reclaim();
        csr::enable_interrupts();
        wait_idle();
        yield_now();
    }
}

/// The strand running on this hart.
pub fn current() -> Arc<Strand> {
    csr::without_interrupts(|| CURRENT[hart::id()].lock().clone().expect("scheduler not initialised"))
}

/// Creates a strand running `body` at `priority` and makes it ready.
pub fn spawn(name: &str, priority: Priority, body: impl FnOnce() + Send + 'static) -> Result<Arc<Strand>, crate::mm::stack::StackError> {
    let strand = Strand::new(name, priority, body)?;
    make_ready(strand.clone());
    Ok(strand)
}

fn make_ready(strand: Arc<Strand>) {
    strand.set_state(StrandState::Ready);
    csr::without_interrupts(|| READY.lock().push(strand));
}

/// What happens to the current strand when it gives up the hart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leaving {
    /// Stays ready (yield, preemption); with the `StrandCheckpoint` reason, or 0 for the
    /// timer tick's preemption (which raises nothing).
    Ready(u32),
    /// Waits for `unblock`, for a `StrandBlock` reason.
    Blocked(u32),
    /// Has finished.
    Exited,
}

impl Leaving {
    fn checkpoint_reason(self) -> u32 {
        match self {
            Leaving::Ready(reason) => reason,
            Leaving::Blocked(_) => StrandCheckpoint::BLOCK,
            Leaving::Exited => StrandCheckpoint::EXIT,
        }
    }
}

pub use crate::arch::hart::{PreemptionGuard, no_preemption};

fn preemption_disabled() -> bool {
    hart::current().preempt_disabled.load(Ordering::Relaxed) != 0
}

/// Whether the current strand may block here: preemption is on and so are interrupts
/// (not inside a [`no_preemption`] section — an event handler, an upcall or a service
/// call — nor a `without_interrupts` one).
pub fn can_block() -> bool {
    !preemption_disabled() && crate::arch::csr::interrupts_enabled()
}

/// Gives the hart to another ready strand of the same or higher priority, if any.
/// Does nothing inside a [`no_preemption`] section.
pub fn yield_now() {
    if !preemption_disabled() {
        switch_away(Leaving::Ready(StrandCheckpoint::YIELD));
    }
}

/// Blocks the current strand until [`unblock`] is called for it (returns at once if an
/// unblock arrived since the strand last blocked).
///
/// Panics inside a [`no_preemption`] section (an event handler must not block: that is
/// what `async` bindings are for).
pub fn block_current() {
    block_for(StrandBlock::WAIT);
}

/// [`block_current`] for a `StrandBlock` reason (what `sched.Block` and `sched.Unblock`
/// tell policies).
pub(crate) fn block_for(reason: u32) {
    assert!(!preemption_disabled(), "a strand blocked inside a no-preemption section (an event handler?)");
    switch_away(Leaving::Blocked(reason));
}

/// Makes a blocked strand ready; if it is not blocked yet, its next block returns at once.
///
/// For a blocked strand, raises `sched.Unblock` first (in thread context, see the module
/// docs); the answer is the level the strand is queued at and whether it takes the hart at
/// once (if it outranks the running strand and the caller may be switched out).
pub fn unblock(strand: &Arc<Strand>) {
    let interrupts_on = csr::interrupts_enabled();
    let own = strand.priority();
    let (mut level, mut preempt) = (own, false);
    // Decided before the lock (a handler may call into the scheduler); if the strand is
    // no longer blocked when the lock is taken, the decision is dropped.
    if strand.state() == StrandState::Blocked {
        let decision = sched_events::unblock(
            interrupts_on,
            || StrandUnblock {
                strand: strand.id(),
                blocked_ticks: crate::time::ticks().saturating_sub(strand.blocked_at_tick.load(Ordering::Relaxed)),
                priority: own.level() as u32,
                reason: u32::from(strand.block_reason.load(Ordering::Relaxed)),
                running_priority: current().running_priority().level() as u32,
            },
            own.level() as u32,
        );
        // The scheduler validated the answer (1..=7, preempt 0/1); `Priority::new` clamps
        // anyway.
        level = Priority::new(decision.priority as u8);
        preempt = decision.preempt == 1;
    }
    let take_hart = csr::without_interrupts(|| {
        let mut ready = READY.lock();
        if strand.state() == StrandState::Blocked {
            strand.set_state(StrandState::Ready);
            strand.set_running_priority(level);
            ready.push(strand.clone());
            preempt
                && CURRENT[hart::id()].lock().as_ref().is_some_and(|running| level > running.running_priority())
        } else {
            strand.wakeup_pending.store(true, Ordering::Release);
            false
        }
    });
    if take_hart && interrupts_on && !preemption_disabled() {
        switch_away(Leaving::Ready(StrandCheckpoint::PREEMPTED));
    }
}

/// Blocks the current strand until `ticks` timer ticks have passed or it is unblocked,
/// whichever comes first; returns whether the time is up. Returns at once for 0 ticks.
///
/// Panics inside a [`no_preemption`] section, like [`block_current`].
pub fn sleep_ticks(ticks: u64) -> bool {
    let wake_at = crate::time::ticks().saturating_add(ticks);
    if crate::time::ticks() >= wake_at {
        return true;
    }
    let me = current();
    csr::without_interrupts(|| SLEEPERS.lock().push((wake_at, me.clone())));
    block_for(StrandBlock::SLEEP);
    // Woken early (unblocked) or by the tick: either way, leave the list.
    csr::without_interrupts(|| SLEEPERS.lock().retain(|(_, sleeper)| !Arc::ptr_eq(sleeper, &me)));
    crate::time::ticks() >= wake_at
}

/// Makes `root_address` (the physical address of a root page table that shares the
/// kernel's mappings, see `mm::kernel_space::share_with`; 0 for the kernel's own) the
/// current strand's address space and activates it. A process's strand sets its
/// process's before entering U-mode and 0 before the address space is freed.
pub fn set_address_space(root_address: usize) {
    // The hart's copy is the running strand's (the scheduler saves it in the strand when
    // it switches away).
    csr::without_interrupts(|| {
        hart::current().address_space.store(root_address, Ordering::Relaxed);
        crate::mm::kernel_space::activate(root_address);
    });
}

/// Records that the current strand works for process `pid` (0: the kernel) from now on:
/// what [`current_process`] answers on it. A process's strand sets it first thing.
pub fn set_current_process(pid: u64) {
    csr::without_interrupts(|| {
        current().set_process(pid);
        hart::current().process.store(pid, Ordering::Relaxed);
    });
}

/// The process the running strand works for (0: a kernel strand) — for services that
/// attribute work to processes (the buffer cache's per-process policies). A few loads: the
/// scheduler keeps the running strand's value in the hart's state.
#[inline]
pub fn current_process() -> u64 {
    hart::current().process.load(Ordering::Relaxed)
}

/// [`set_address_space`] that also returns the current strand's previous address space
/// (for code that runs briefly in another process's space on this strand: upcalls and
/// cross-address-space calls, which put the previous one back the same way).
///
/// A few instructions and the `satp` write: the running strand's space is the hart's
/// copy (`HartLocal::address_space`), which the scheduler saves in the strand when it
/// switches away.
pub fn replace_address_space(root_address: usize) -> usize {
    csr::without_interrupts(|| replace_address_space_interrupts_off(root_address))
}

/// [`replace_address_space`] for a caller that has interrupts off already (a migrating
/// call, which keeps them off around its switches): no save and restore of the interrupt
/// state around it.
#[inline]
pub fn replace_address_space_interrupts_off(root_address: usize) -> usize {
    debug_assert!(!csr::interrupts_enabled(), "replace_address_space_interrupts_off with interrupts on");
    let previous = hart::current().address_space.swap(root_address, Ordering::Relaxed);
    crate::mm::kernel_space::activate(root_address);
    previous
}

/// Ends the current strand.
pub fn exit_current() -> ! {
    switch_away(Leaving::Exited);
    unreachable!("an exited strand was resumed");
}

/// Called from the trap handler on each timer interrupt (tick or budget deadline): the
/// clock's tick ([`crate::time::tick`]), then, on a periodic tick, [`on_tick`].
pub fn on_timer_interrupt() {
    if crate::time::tick() {
        on_tick();
    }
}

/// Called by a process's strand after a timer interrupt stopped its U-mode code: the same
/// tick as [`on_timer_interrupt`], but the scheduler only says whether it wants the hart
/// back, so that the strand gives it up in thread context — where `sched.Checkpoint` can
/// be raised ([`preempt_for_time_slice`]).
pub fn on_user_timer_interrupt() -> bool {
    crate::time::tick() && on_tick_deferring_preemption()
}

/// Timer-tick work (interrupt context): preempts the current strand for a ready strand
/// of higher priority at once, or of equal priority when its time slice is over.
pub fn on_tick() {
    if tick_wants_the_hart() {
        switch_away(Leaving::Ready(0));
    }
}

/// Device-interrupt hook (interrupt context, after the interrupt controller has been
/// told the interrupt is done): if the interrupt made a strand of higher priority than
/// the running one ready, switches to it now instead of at the next tick. Like the
/// tick's preemption it raises nothing, and it does nothing inside a [`no_preemption`]
/// section.
pub fn preempt_if_outranked() {
    if preemption_disabled() {
        return;
    }
    let hart_id = hart::id();
    let Some(current) = CURRENT[hart_id].try_lock().and_then(|slot| slot.clone()) else { return };
    let level = if is_idle(&current) { 0 } else { current.running_priority().level() };
    let outranked = READY.try_lock().is_some_and(|ready| ready.has_at_least(level + 1));
    drop(current);
    if outranked {
        switch_away(Leaving::Ready(0));
    }
}

/// [`on_tick`] for a process's strand stopped in U-mode: the same bookkeeping, but the
/// switch is left to the caller, which makes it in thread context with
/// [`preempt_for_time_slice`] (so `sched.Checkpoint` is raised). Returns whether the
/// scheduler wants the hart.
pub fn on_tick_deferring_preemption() -> bool {
    tick_wants_the_hart()
}

/// Gives up the hart because the time slice is over (or a higher priority is ready),
/// raising `sched.Checkpoint` with reason `TIME_SLICE`: for a process's strand after
/// [`on_tick_deferring_preemption`] said so. Thread context, interrupts on.
pub fn preempt_for_time_slice() {
    if !preemption_disabled() {
        switch_away(Leaving::Ready(StrandCheckpoint::TIME_SLICE));
    }
}

/// The tick's scheduling work (sleepers, time slice); true if the running strand should
/// give up the hart.
fn tick_wants_the_hart() -> bool {
    wake_sleepers();
    let hart_id = hart::id();
    let Some(current) = CURRENT[hart_id].try_lock().and_then(|slot| slot.clone()) else { return false };
    let used = current.slice_ticks.fetch_add(1, Ordering::Relaxed) + 1;
    if preemption_disabled() {
        return false;
    }
    let is_idle = IDLE[hart_id].get().is_some_and(|idle| Arc::ptr_eq(idle, &current));
    let level = if is_idle { 0 } else { current.running_priority().level() };
    let (higher, equal) = match READY.try_lock() {
        Some(ready) => (ready.has_at_least(level + 1), ready.has_at_least(level)),
        None => return false,
    };
    // A higher priority preempts at once; an equal one when the time slice is over.
    higher || (is_idle && equal) || (equal && used >= crate::param::TIME_SLICE_TICKS)
}

/// Unblocks the sleepers whose tick has come (interrupt context; never allocates).
fn wake_sleepers() {
    let now = crate::time::ticks();
    // Strands lock SLEEPERS only with interrupts off, so on this hart it is free here;
    // try_lock keeps another hart's brief hold from stalling the tick.
    if let Some(mut sleepers) = SLEEPERS.try_lock() {
        sleepers.retain(|(wake_at, strand)| {
            let due = *wake_at <= now;
            if due {
                unblock(strand);
            }
            !due
        });
    }
}

/// Raises `sched.Block` (for a block) and `sched.Checkpoint` for the running strand, which
/// is about to give up the hart; returns the level it is queued at if it stays ready
/// (`None`: the idle strand, or a block that will return at once). Thread context only:
/// interrupts on, no scheduler lock held.
fn announce_leaving(leaving: Leaving) -> Option<Priority> {
    let current = current();
    if is_idle(&current) {
        return None;
    }
    let own = current.priority().level() as u32;
    if let Leaving::Blocked(reason) = leaving {
        if current.wakeup_pending.load(Ordering::Acquire) {
            return None; // the block returns at once: nothing to announce
        }
        sched_events::block(true, || StrandBlock { strand: current.id(), priority: own, reason });
    }
    let requeue = sched_events::checkpoint(
        true,
        || StrandCheckpoint {
            strand: current.id(),
            slice_ticks: current.slice_ticks.load(Ordering::Relaxed),
            priority: own,
            running_priority: current.running_priority().level() as u32,
            reason: leaving.checkpoint_reason(),
        },
        own,
    );
    Some(Priority::new(requeue.priority as u8))
}

fn is_idle(strand: &Arc<Strand>) -> bool {
    IDLE[hart::id()].get().is_some_and(|idle| Arc::ptr_eq(idle, strand))
}

fn switch_away(leaving: Leaving) {
    // Events first, in thread context (interrupts on, no lock held); the timer tick's
    // preemption and callers with interrupts off skip them (the defaults apply).
    let announced = if leaving != Leaving::Ready(0) && csr::interrupts_enabled() && sched_events::leaving_bound() {
        announce_leaving(leaving)
    } else {
        None
    };
    let were_enabled = csr::disable_interrupts();
    let hart_id = hart::id();
    let current = CURRENT[hart_id].lock().clone().expect("scheduler not initialised");
    let idle = IDLE[hart_id].get().cloned();
    let is_idle = idle.as_ref().is_some_and(|idle| Arc::ptr_eq(idle, &current));
    // The level a strand that stays ready is queued at: the Checkpoint answer, else its own.
    let requeue_level = announced.unwrap_or(current.priority());
    let next = {
        let mut ready = READY.lock();
        if matches!(leaving, Leaving::Blocked(_)) && current.wakeup_pending.swap(false, Ordering::Acquire) {
            None // an unblock already arrived: keep running
        } else {
            let staying = matches!(leaving, Leaving::Ready(_)) && !is_idle;
            let minimum = if staying { requeue_level.level() } else { 0 };
            match ready.pop_at_least(minimum) {
                Some(next) => {
                    if staying {
                        current.set_running_priority(requeue_level);
                        ready.push(current.clone());
                    }
                    Some(next)
                }
                None if matches!(leaving, Leaving::Ready(_)) => None,
                None => idle.clone(),
            }
        }
    };
    let Some(next) = next else {
        if matches!(leaving, Leaving::Ready(_)) && !is_idle {
            current.set_running_priority(requeue_level);
        }
        current.slice_ticks.store(0, Ordering::Relaxed);
        PREVIOUS[hart_id].store(current.id(), Ordering::Relaxed);
        if were_enabled {
            csr::enable_interrupts();
            announce_resume(&current, is_idle);
        }
        return;
    };
    match leaving {
        Leaving::Ready(_) => current.set_state(StrandState::Ready),
        Leaving::Blocked(reason) => {
            current.set_running_priority(current.priority());
            current.block_reason.store(reason as u8, Ordering::Relaxed);
            current.blocked_at_tick.store(crate::time::ticks(), Ordering::Relaxed);
            current.set_state(StrandState::Blocked);
        }
        Leaving::Exited => {
            current.set_state(StrandState::Exited);
            ZOMBIES.lock().push(current.clone());
        }
    }
    next.set_state(StrandState::Running);
    next.slice_ticks.store(0, Ordering::Relaxed);
    *CURRENT[hart_id].lock() = Some(next.clone());
    PREVIOUS[hart_id].store(current.id(), Ordering::Relaxed);
    current.save_hart_state();
    next.restore_hart_state();
    // `current` is not inside a raise (raises are never switched out): a quiescent state.
    crate::events::quiescent();
    drop(idle);
    if leaving == Leaving::Exited {
        exit_to(current, next);
    }
    // SAFETY: interrupts are off; `next` runs nowhere (claimed in `switch`), has a context from a
    // switch or `Strand::new` and a mapped stack (only exited, never-ready strands lose theirs);
    // `current` lives in CURRENT/queues/ZOMBIES until it is resumed or reaped.
    unsafe { Strand::switch(&current, &next) };
    // Back on `current` (never reached for an exited strand).
    drop(next);
    after_switch();
    crate::time::program_timer();
    if were_enabled {
        csr::enable_interrupts();
        announce_resume(&current, is_idle);
    }
}

/// The last switch of the exited strand `current`, to `next`. It never returns, so
/// nothing on this stack is dropped after it: the two `Arc`s are dropped first (or every
/// exit would leak its strand, and a reference to the next one). ZOMBIES keeps `current`
/// and CURRENT keeps `next` alive meanwhile.
fn exit_to(current: Arc<Strand>, next: Arc<Strand>) -> ! {
    let (from, to) = (Arc::as_ptr(&current), Arc::as_ptr(&next));
    drop(current);
    drop(next);
    // Interrupts are off (nothing runs here until the switch); `to` is not exited.
    // SAFETY: ZOMBIES holds `from` (this strand) until the switch marks it off the hart, after
    // saving its registers; CURRENT[this hart] holds `to` until a switch away from it. `to` runs
    // nowhere (claimed in `switch`), has a switch- or `Strand::new`-made context and a mapped stack.
    unsafe { Strand::switch(&*from, &*to) };
    unreachable!("an exited strand was resumed");
}

/// Raises `sched.Resume` for `strand`, which has the hart again (thread context,
/// interrupts on); not for the idle strand.
fn announce_resume(strand: &Arc<Strand>, is_idle: bool) {
    if is_idle || !sched_events::resume_bound() {
        return;
    }
    sched_events::resume(true, || StrandResume {
        strand: strand.id(),
        previous: PREVIOUS[hart::id()].load(Ordering::Relaxed),
        priority: strand.priority().level() as u32,
        running_priority: strand.running_priority().level() as u32,
    });
}

/// Work every strand does right after it gains the hart: free exited strands' stacks.
fn after_switch() {
    let reaped: Vec<Arc<Strand>> = {
        let mut zombies = ZOMBIES.lock();
        let (done, waiting): (Vec<_>, Vec<_>) = zombies.drain(..).partition(|strand| !strand.is_on_hart());
        *zombies = waiting;
        done
    };
    for strand in reaped {
        strand.release_stack();
    }
}

/// Entry of every new strand (from `strand_start`, interrupts off).
extern "C" fn strand_entry(strand_pointer: usize) -> ! {
    after_switch();
    crate::time::program_timer();
    csr::enable_interrupts();
    let body = {
        let current = current();
        debug_assert_eq!(Arc::as_ptr(&current) as usize, strand_pointer);
        let is_idle = is_idle(&current);
        announce_resume(&current, is_idle);
        current.take_body()
    };
    if let Some(body) = body {
        body();
    }
    current().finish();
    exit_current()
}

/// Number of strands in each state, for the console.
pub fn ready_count() -> usize {
    csr::without_interrupts(|| READY.lock().queues.iter().map(VecDeque::len).sum())
}
