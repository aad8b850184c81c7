//! Tests of the scheduler's events (`sched.Block`, `Unblock`, `Checkpoint`, `Resume`): they
//! are raised where documented, a policy's answer changes scheduling order (the `boost`
//! extension), bad answers are rejected, and a handler that calls the scheduler does not
//! recurse.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spindle_abi::event::{
    EventRecord, Requeue, SCHED_BLOCK, SCHED_CHECKPOINT, SCHED_RESUME, SCHED_UNBLOCK, StrandBlock, StrandCheckpoint, StrandResume,
    StrandUnblock, UnblockDecision, field_index,
};
use spindle_dispatch::{BindingId, DeclarativeGuard, handler_fn};

use super::{KernelTest, TestResult};
use crate::ensure;
use crate::events;
use crate::sched::{self, Priority, Strand, StrandState};

/// The scheduler-event tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "sched_events::block_checkpoint_resume_are_raised", run: block_checkpoint_resume_are_raised },
    KernelTest { name: "sched_events::unblock_answer_sets_running_priority", run: unblock_answer_sets_running_priority },
    KernelTest { name: "sched_events::bad_unblock_answer_is_rejected", run: bad_unblock_answer_is_rejected },
    KernelTest { name: "sched_events::handler_calling_scheduler_does_not_recurse", run: handler_calling_scheduler_does_not_recurse },
    KernelTest { name: "sched_events::boost_extension_changes_order", run: boost_extension_changes_order },
    KernelTest { name: "sched_events::process_time_slice_raises_checkpoint", run: process_time_slice_raises_checkpoint },
];

/// Two user processes that never yield share the hart by the timer alone: each
/// preemption of one of them is raised as `sched.Checkpoint` with reason `TIME_SLICE`, on
/// the preempted process's strand, and the policy's answer is used (here: its own level).
fn process_time_slice_raises_checkpoint() -> TestResult {
    use crate::proc::{self, Grants, Parent};
    static SLICES: AtomicU64 = AtomicU64::new(0);
    static STRANDS: AtomicU64 = AtomicU64::new(0);
    SLICES.store(0, Ordering::SeqCst);
    STRANDS.store(0, Ordering::SeqCst);
    let on_checkpoint = handler_fn("test.time-slice", |args: &StrandCheckpoint| {
        SLICES.fetch_add(1, Ordering::SeqCst);
        STRANDS.fetch_or(1 << (args.strand % 64), Ordering::SeqCst);
        Ok(Requeue { priority: args.priority })
    });
    let reason = field_index(StrandCheckpoint::FIELDS, "reason").unwrap_or(usize::MAX);
    let id = events::dispatcher()
        .install(
            &SCHED_CHECKPOINT,
            spindle_dispatch::BindingSpec::new("ktest", on_checkpoint).when(DeclarativeGuard::equals(reason, u64::from(StrandCheckpoint::TIME_SLICE))),
        )
        .map_err(|error| alloc::format!("install: {error}"))?;
    let spawned: Vec<_> = (0..2).map(|_| proc::spawn("spin 0 3000000", Parent::Kernel, Grants::NONE)).collect();
    let window_end = crate::time::ticks() + 30;
    while !sched::sleep_ticks(window_end.saturating_sub(crate::time::ticks())) {}
    let (slices, strands) = (SLICES.load(Ordering::SeqCst), STRANDS.load(Ordering::SeqCst));
    for process in spawned.iter().flatten() {
        let _ = proc::kill(process.pid(), Parent::Kernel);
        let _ = proc::wait(process.pid(), Parent::Kernel, &|| false);
    }
    uninstall(&[id]);
    for process in spawned {
        process.map_err(|error| alloc::format!("spawn spin: {error}"))?;
    }
    ensure!(slices >= 2, "sched.Checkpoint(TIME_SLICE) raised {slices} times in 30 ticks of two spinning processes");
    ensure!(strands.count_ones() == 2, "raised for {} strand(s), expected both spinners", strands.count_ones());
    Ok(())
}

/// Index of the `strand` field, the first of every scheduler argument record.
fn strand_field<A: EventRecord>() -> usize {
    field_index(A::FIELDS, "strand").unwrap_or(usize::MAX)
}

fn uninstall(ids: &[BindingId]) {
    for id in ids {
        let _ = events::dispatcher().uninstall(*id);
    }
}

fn spawn(name: &str, priority: Priority, body: impl FnOnce() + Send + 'static) -> Result<Arc<Strand>, alloc::string::String> {
    sched::spawn(name, priority, body).map_err(|error| alloc::format!("spawn: {error}"))
}

/// Sleeps tick by tick until `strand` is blocked (it runs meanwhile).
fn wait_until_blocked(strand: &Arc<Strand>) -> TestResult {
    for _ in 0..200 {
        if strand.state() == StrandState::Blocked {
            return Ok(());
        }
        sched::sleep_ticks(1);
    }
    Err(alloc::format!("strand {} never blocked", strand.name()))
}

fn block_checkpoint_resume_are_raised() -> TestResult {
    static BLOCKS: AtomicU64 = AtomicU64::new(0);
    static RESUMES: AtomicU64 = AtomicU64::new(0);
    static CHECKPOINTS: AtomicU64 = AtomicU64::new(0);
    /// Checkpoint reasons, one per byte, in order.
    static REASONS: AtomicU64 = AtomicU64::new(0);
    static BLOCK_REASON: AtomicU32 = AtomicU32::new(0);
    for counter in [&BLOCKS, &RESUMES, &CHECKPOINTS, &REASONS] {
        counter.store(0, Ordering::SeqCst);
    }
    // Spawned first, so its id is known to the guards; it waits for a first unblock
    // before doing the sequence (a join of a strand that has not started would race).
    let subject = spawn("sched-subject", Priority::NORMAL, || {
        sched::block_current();
        sched::yield_now();
        sched::block_current();
    })?;
    wait_until_blocked(&subject)?;
    let id = subject.id();
    let dispatcher = events::dispatcher();
    let on_block = handler_fn("test.block", |args: &StrandBlock| {
        BLOCKS.fetch_add(1, Ordering::SeqCst);
        BLOCK_REASON.store(args.reason, Ordering::SeqCst);
        Ok(())
    });
    let on_checkpoint = handler_fn("test.checkpoint", |args: &StrandCheckpoint| {
        let count = CHECKPOINTS.fetch_add(1, Ordering::SeqCst);
        REASONS.fetch_or(u64::from(args.reason) << (8 * count.min(7)), Ordering::SeqCst);
        Ok(Requeue { priority: args.priority })
    });
    let on_resume = handler_fn("test.resume", |_: &StrandResume| {
        RESUMES.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let install = |result: Result<BindingId, spindle_dispatch::InstallError>| result.map_err(|error| alloc::format!("install: {error}"));
    let ids = [
        install(dispatcher.install(
            &SCHED_BLOCK,
            spindle_dispatch::BindingSpec::new("ktest", on_block).when(DeclarativeGuard::equals(strand_field::<StrandBlock>(), id)),
        ))?,
        install(dispatcher.install(
            &SCHED_CHECKPOINT,
            spindle_dispatch::BindingSpec::new("ktest", on_checkpoint)
                .when(DeclarativeGuard::equals(strand_field::<StrandCheckpoint>(), id)),
        ))?,
        install(dispatcher.install(
            &SCHED_RESUME,
            spindle_dispatch::BindingSpec::new("ktest", on_resume).when(DeclarativeGuard::equals(strand_field::<StrandResume>(), id)),
        ))?,
    ];
    // Resume (after the first block), yield: Checkpoint + Resume, block: Block +
    // Checkpoint, then after the second unblock Resume, and the exit's Checkpoint.
    sched::unblock(&subject);
    let blocked = wait_until_blocked(&subject);
    sched::unblock(&subject);
    subject.join();
    uninstall(&ids);
    blocked?;
    let (blocks, checkpoints, resumes) = (BLOCKS.load(Ordering::SeqCst), CHECKPOINTS.load(Ordering::SeqCst), RESUMES.load(Ordering::SeqCst));
    ensure!(blocks == 1, "sched.Block raised {blocks} times, expected 1");
    ensure!(BLOCK_REASON.load(Ordering::SeqCst) == StrandBlock::WAIT, "block reason {}", BLOCK_REASON.load(Ordering::SeqCst));
    ensure!(checkpoints == 3, "sched.Checkpoint raised {checkpoints} times, expected 3 (yield, block, exit)");
    let reasons = REASONS.load(Ordering::SeqCst);
    let expected = u64::from(StrandCheckpoint::YIELD) | u64::from(StrandCheckpoint::BLOCK) << 8 | u64::from(StrandCheckpoint::EXIT) << 16;
    ensure!(reasons == expected, "checkpoint reasons {reasons:#x}, expected {expected:#x}");
    ensure!(resumes == 3, "sched.Resume raised {resumes} times, expected 3");
    Ok(())
}

/// Runs a waiter at `priority` that blocks, installs `answer` on its `sched.Unblock`,
/// unblocks it and returns the running priority it saw when it ran, and the binding's
/// fault count.
fn unblock_with_answer(priority: Priority, answer: UnblockDecision) -> Result<(u8, u64), alloc::string::String> {
    let seen = Arc::new(AtomicU32::new(u32::MAX));
    let seen_by_waiter = seen.clone();
    let waiter = spawn("sched-waiter", priority, move || {
        sched::block_current();
        seen_by_waiter.store(sched::current().running_priority().level() as u32, Ordering::SeqCst);
    })?;
    wait_until_blocked(&waiter)?;
    let handler = handler_fn("test.unblock-answer", move |_: &StrandUnblock| Ok(answer));
    let id = events::dispatcher()
        .install(
            &SCHED_UNBLOCK,
            spindle_dispatch::BindingSpec::new("ktest", handler).when(DeclarativeGuard::equals(strand_field::<StrandUnblock>(), waiter.id())),
        )
        .map_err(|error| alloc::format!("install: {error}"))?;
    sched::unblock(&waiter);
    waiter.join();
    let faults = events::dispatcher()
        .snapshot()
        .iter()
        .find_map(|event| event.binding(id).map(|binding| binding.counters.faults))
        .unwrap_or(u64::MAX);
    uninstall(&[id]);
    Ok((seen.load(Ordering::SeqCst) as u8, faults))
}

fn unblock_answer_sets_running_priority() -> TestResult {
    let (level, faults) = unblock_with_answer(Priority::new(2), UnblockDecision { priority: 6, preempt: 0 })?;
    ensure!(level == 6, "the woken strand ran at level {level}, the answer said 6");
    ensure!(faults == 0, "a valid answer counted {faults} faults");
    Ok(())
}

fn bad_unblock_answer_is_rejected() -> TestResult {
    for bad in [UnblockDecision { priority: 0, preempt: 0 }, UnblockDecision { priority: 9, preempt: 0 }, UnblockDecision { priority: 5, preempt: 2 }] {
        let rejected_before = crate::sched::events::statistics().rejected;
        let (level, faults) = unblock_with_answer(Priority::new(2), bad)?;
        let rejected = crate::sched::events::statistics().rejected - rejected_before;
        ensure!(level == 2, "answer {bad:?}: the woken strand ran at level {level}, not its own 2");
        ensure!(faults == 1 && rejected == 1, "answer {bad:?}: faults {faults}, rejections {rejected} (expected 1 and 1)");
    }
    Ok(())
}

fn handler_calling_scheduler_does_not_recurse() -> TestResult {
    let other = spawn("sched-other", Priority::new(2), sched::block_current)?;
    let waiter = spawn("sched-waiter", Priority::new(2), sched::block_current)?;
    wait_until_blocked(&other)?;
    wait_until_blocked(&waiter)?;
    let to_wake = other.clone();
    let handler = handler_fn("test.unblock-other", move |args: &StrandUnblock| {
        // A scheduler operation inside a scheduler event: must take the default at once.
        sched::unblock(&to_wake);
        Ok(UnblockDecision { priority: args.priority, preempt: 0 })
    });
    let nested_before = crate::sched::events::statistics().nested;
    let id = events::dispatcher()
        .install(
            &SCHED_UNBLOCK,
            spindle_dispatch::BindingSpec::new("ktest", handler).when(DeclarativeGuard::equals(strand_field::<StrandUnblock>(), waiter.id())),
        )
        .map_err(|error| alloc::format!("install: {error}"))?;
    sched::unblock(&waiter);
    let other_state = other.state();
    uninstall(&[id]);
    waiter.join();
    if other_state == StrandState::Blocked {
        sched::unblock(&other);
    }
    other.join();
    let nested = crate::sched::events::statistics().nested - nested_before;
    ensure!(other_state != StrandState::Blocked, "the handler's unblock did not wake the other strand");
    ensure!(nested == 1, "{nested} nested scheduler operations counted, expected 1");
    Ok(())
}

/// A strand at priority 2 waits; this strand (priority 3) wakes it and logs; the woken
/// strand logs when it runs. Returns the log.
fn wake_order() -> Result<Vec<&'static str>, alloc::string::String> {
    let log = Arc::new(spin::Mutex::new(Vec::new()));
    let waiter_log = log.clone();
    let waiter = spawn("boost-waiter", Priority::new(2), move || {
        sched::block_current();
        crate::arch::csr::without_interrupts(|| waiter_log.lock().push("woken"));
    })?;
    wait_until_blocked(&waiter)?;
    ensure!(sched::current().running_priority() == Priority::NORMAL, "the test strand runs at {:?}", sched::current().running_priority());
    sched::unblock(&waiter);
    crate::arch::csr::without_interrupts(|| log.lock().push("waker"));
    waiter.join();
    let entries = log.lock().clone();
    Ok(entries)
}

fn boost_extension_changes_order() -> TestResult {
    let without = wake_order()?;
    ensure!(without == ["waker", "woken"], "without a policy: {without:?}");
    crate::ext::load("boost", crate::ext::Preference::BuiltIn).map_err(|error| alloc::format!("load boost: {error}"))?;
    let with = wake_order();
    let _ = crate::ext::unload("boost");
    let with = with?;
    ensure!(with == ["woken", "waker"], "with boost: {with:?} (the woken strand should preempt its waker)");
    let again = wake_order()?;
    ensure!(again == ["waker", "woken"], "after unloading boost: {again:?}");
    Ok(())
}
