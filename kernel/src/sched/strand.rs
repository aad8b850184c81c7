//! One strand: stack, saved registers, priority, state, and the per-hart state it carries.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};

use crate::arch::context::{self, Context};
use crate::arch::hart;
use crate::mm::stack::{KernelStack, StackError};

/// A scheduling priority, 0 (idle) to 7 (highest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Priority(u8);

impl Priority {
    /// The idle strand's priority (runs only when nothing else is ready).
    pub const IDLE: Priority = Priority(0);
    /// Default for kernel strands.
    pub const NORMAL: Priority = Priority(3);
    /// The highest priority.
    pub const HIGHEST: Priority = Priority((super::PRIORITY_LEVELS - 1) as u8);

    /// A priority, clamped to the valid range.
    pub fn new(level: u8) -> Priority {
        Priority(level.min(Self::HIGHEST.0))
    }
    /// The level as a queue index.
    pub fn level(self) -> usize {
        self.0 as usize
    }
}

/// Lifecycle of a strand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StrandState {
    /// In a ready queue.
    Ready = 0,
    /// On a hart.
    Running = 1,
    /// Waiting for `unblock`.
    Blocked = 2,
    /// Finished.
    Exited = 3,
}

/// Per-hart registers a strand carries across switches.
#[derive(Default)]
struct CarriedHartState {
    recovery_point: AtomicUsize,
    budget_deadline: AtomicU64,
    budget_point: AtomicUsize,
    /// Physical address of the root page table the strand runs with (0: the kernel's);
    /// a process's strand runs with its process's address space. While the strand runs,
    /// the hart's copy (`HartLocal::address_space`) is the one kept up to date.
    address_space: AtomicUsize,
    /// The hart's `migration_point` (`arch::recovery::mark_migration`) while switched away.
    migration_point: AtomicUsize,
    /// Id of the process the strand works for (0: the kernel).
    process: AtomicU64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A schedulable context.
pub struct Strand {
    id: u64,
    name: String,
    priority: Priority,
    /// The level it is queued at and runs at: its priority, or what a `sched.Unblock` or
    /// `sched.Checkpoint` answer chose until it next gives up the hart.
    running_level: AtomicU8,
    /// Why it last blocked (a `StrandBlock` reason) and the tick at which it did.
    pub(super) block_reason: AtomicU8,
    pub(super) blocked_at_tick: AtomicU64,
    state: AtomicU8,
    /// Ticks used in the current time slice.
    pub(super) slice_ticks: AtomicU64,
    /// An `unblock` arrived while the strand was not blocked.
    pub(super) wakeup_pending: AtomicBool,
    /// Nonzero while on a hart or until its registers are saved.
    running: UnsafeCell<usize>,
    context: UnsafeCell<Context>,
    stack: spin::Mutex<Option<KernelStack>>,
    stack_bottom: usize,
    carried: CarriedHartState,
    body: spin::Mutex<Option<Box<dyn FnOnce() + Send>>>,
    finished: AtomicBool,
    joiners: spin::Mutex<Vec<Arc<Strand>>>,
}

// SAFETY: `context` and `running` are written only by the hart that switches the strand
// out (in `switch_context`) and read only by the hart that resumes it, after it observed
// `running == 0` (Acquire) — the scheduler's protocol serialises these accesses. Every
// other field is atomic or behind a lock.
unsafe impl Sync for Strand {}
// SAFETY: a `Strand` may move between harts: `context`/`running` are accessed only under the
// scheduler's switch-out/resume protocol (as for `Sync`), every other field is atomic or behind a
// lock, and the boxed body is `Send`.
unsafe impl Send for Strand {}

impl Strand {
    /// A new strand (not yet ready) that will run `body`.
    pub fn new(name: &str, priority: Priority, body: impl FnOnce() + Send + 'static) -> Result<Arc<Strand>, StackError> {
        let stack = KernelStack::new()?;
        let strand = Arc::new(Strand {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            priority,
            running_level: AtomicU8::new(priority.0),
            block_reason: AtomicU8::new(0),
            blocked_at_tick: AtomicU64::new(0),
            state: AtomicU8::new(StrandState::Ready as u8),
            slice_ticks: AtomicU64::new(0),
            wakeup_pending: AtomicBool::new(false),
            running: UnsafeCell::new(0),
            context: UnsafeCell::new(Context::default()),
            stack_bottom: stack.bottom(),
            stack: spin::Mutex::new(None),
            carried: CarriedHartState::default(),
            body: spin::Mutex::new(Some(Box::new(body))),
            finished: AtomicBool::new(false),
            joiners: spin::Mutex::new(Vec::new()),
        });
        let start = Context::new_start(stack.top(), super::strand_entry, Arc::as_ptr(&strand) as usize);
        // SAFETY: the strand was just created and is not shared with any hart yet.
        unsafe { *strand.context.get() = start };
        *strand.stack.lock() = Some(stack);
        Ok(strand)
    }

    /// Wraps the boot context (already running on the boot stack).
    pub(super) fn adopt_boot(name: &str, stack_bottom: usize) -> Arc<Strand> {
        Arc::new(Strand {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            priority: Priority::NORMAL,
            running_level: AtomicU8::new(Priority::NORMAL.0),
            block_reason: AtomicU8::new(0),
            blocked_at_tick: AtomicU64::new(0),
            state: AtomicU8::new(StrandState::Running as u8),
            slice_ticks: AtomicU64::new(0),
            wakeup_pending: AtomicBool::new(false),
            running: UnsafeCell::new(1),
            context: UnsafeCell::new(Context::default()),
            stack: spin::Mutex::new(None),
            stack_bottom,
            carried: CarriedHartState::default(),
            body: spin::Mutex::new(None),
            finished: AtomicBool::new(false),
            joiners: spin::Mutex::new(Vec::new()),
        })
    }

    /// Unique id.
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Scheduling priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }
    /// The priority it is queued at or runs at now: [`priority`](Self::priority) unless a
    /// scheduling policy (a `sched.Unblock` or `sched.Checkpoint` answer) chose another
    /// level until the strand next gives up the hart.
    pub fn running_priority(&self) -> Priority {
        Priority(self.running_level.load(Ordering::Relaxed))
    }
    pub(super) fn set_running_priority(&self, priority: Priority) {
        self.running_level.store(priority.0, Ordering::Relaxed);
    }
    /// Current state.
    pub fn state(&self) -> StrandState {
        match self.state.load(Ordering::Acquire) {
            0 => StrandState::Ready,
            1 => StrandState::Running,
            2 => StrandState::Blocked,
            _ => StrandState::Exited,
        }
    }
    pub(super) fn set_state(&self, state: StrandState) {
        self.state.store(state as u8, Ordering::Release);
    }
    /// Lowest usable address of the strand's stack.
    pub fn stack_bottom(&self) -> usize {
        self.stack_bottom
    }

    pub(super) fn is_on_hart(&self) -> bool {
        // SAFETY: a volatile read of a word the switching hart writes with a plain store
        // after a fence; reading a stale 1 only delays reaping.
        unsafe { self.running.get().read_volatile() != 0 }
    }

    pub(super) fn take_body(&self) -> Option<Box<dyn FnOnce() + Send>> {
        self.body.lock().take()
    }

    pub(super) fn release_stack(&self) {
        drop(self.stack.lock().take());
    }

    /// Whether the strand's body has returned.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Marks the strand finished and wakes every joiner.
    pub(super) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        let waiting: Vec<Arc<Strand>> = crate::arch::csr::without_interrupts(|| core::mem::take(&mut *self.joiners.lock()));
        for joiner in waiting {
            super::unblock(&joiner);
        }
    }

    /// Waits until this strand has finished.
    pub fn join(self: &Arc<Self>) {
        loop {
            let registered = crate::arch::csr::without_interrupts(|| {
                let mut joiners = self.joiners.lock();
                if self.is_finished() {
                    return false;
                }
                joiners.push(super::current());
                true
            });
            if !registered {
                return;
            }
            super::block_for(spindle_abi::event::StrandBlock::JOIN);
        }
    }

    pub(super) fn save_hart_state(&self) {
        let local = hart::current();
        self.carried.recovery_point.store(local.recovery_point.load(Ordering::Relaxed), Ordering::Relaxed);
        self.carried.budget_deadline.store(local.budget_deadline.load(Ordering::Relaxed), Ordering::Relaxed);
        self.carried.budget_point.store(local.budget_point.load(Ordering::Relaxed), Ordering::Relaxed);
        self.carried.migration_point.store(local.migration_point.load(Ordering::Relaxed), Ordering::Relaxed);
        self.carried.address_space.store(local.address_space.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub(super) fn restore_hart_state(&self) {
        let local = hart::current();
        local.recovery_point.store(self.carried.recovery_point.load(Ordering::Relaxed), Ordering::Relaxed);
        local.budget_deadline.store(self.carried.budget_deadline.load(Ordering::Relaxed), Ordering::Relaxed);
        local.budget_point.store(self.carried.budget_point.load(Ordering::Relaxed), Ordering::Relaxed);
        local.stack_bottom.store(self.stack_bottom, Ordering::Relaxed);
        local.process.store(self.carried.process.load(Ordering::Relaxed), Ordering::Relaxed);
        local.migration_point.store(self.carried.migration_point.load(Ordering::Relaxed), Ordering::Relaxed);
        let address_space = self.carried.address_space.load(Ordering::Relaxed);
        local.address_space.store(address_space, Ordering::Relaxed);
        crate::mm::kernel_space::activate(address_space);
    }

    /// Records the process this strand works for (0: the kernel); the caller updates the
    /// hart's copy if the strand is running.
    pub(super) fn set_process(&self, pid: u64) {
        self.carried.process.store(pid, Ordering::Relaxed);
    }

    /// Switches from `from` (the running strand) to `to`.
    ///
    /// # Safety
    /// Interrupts off; `from` runs on this hart; `to` is not running anywhere and its
    /// context is valid (see [`context::switch`]); both strands stay alive until `to`
    /// runs (the scheduler's queues, CURRENT or ZOMBIES hold them).
    pub(super) unsafe fn switch(from: &Strand, to: &Strand) {
        // Wait until `to` is fully saved by whichever hart last ran it.
        // SAFETY: volatile reads of `to.running`, see `is_on_hart`.
        while unsafe { to.running.get().read_volatile() } != 0 {
            core::hint::spin_loop();
        }
        core::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: `to` is not on any hart, so this hart may claim it.
        unsafe { to.running.get().write_volatile(1) };
        // SAFETY: forwarded from the caller, who guarantees that both strands (and so
        // both contexts) outlive the switch.
        unsafe { context::switch(from.context.get(), to.context.get(), from.running.get()) };
    }
}
