//! Per-hart state reached through the `tp` register.
//!
//! Every hart's `tp` points at its [`HartLocal`] from boot on; the trap vector reads the
//! first fields from assembly (offsets fixed by `#[repr(C)]` and checked below), so the
//! layout of the first fields is part of the trap ABI.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The most harts the kernel supports (boot stacks and per-hart state are sized by this).
pub const MAX_HARTS: usize = 8;

/// State private to one hart. The first three fields are read by assembly.
#[repr(C)]
pub struct HartLocal {
    /// Lowest usable address of the stack the hart currently runs on; the trap vector
    /// switches to the emergency stack when a trap would push below it.
    pub stack_bottom: AtomicUsize,
    /// Top of this hart's emergency stack (used for traps on kernel stack overflow).
    pub emergency_stack_top: AtomicUsize,
    /// Address of the innermost armed recovery point, or 0 (see [`super::recovery`]).
    pub recovery_point: AtomicUsize,
    /// This hart's id, as given by the firmware.
    pub hart_id: AtomicUsize,
    /// Cause of the last fault recovered on this hart (scause).
    pub last_fault_cause: AtomicUsize,
    /// Faulting address or instruction bits of the last recovered fault (stval).
    pub last_fault_value: AtomicUsize,
    /// Program counter of the last recovered fault (sepc).
    pub last_fault_pc: AtomicUsize,
    /// Whether the last recovered fault was a kernel stack overflow.
    pub last_fault_was_overflow: AtomicUsize,
    /// Number of traps taken by this hart.
    pub trap_count: AtomicUsize,
    /// `time` value at which the running bounded call is aborted, or 0 (none armed).
    pub budget_deadline: AtomicU64,
    /// Recovery point the bounded call returns to when its budget expires.
    pub budget_point: AtomicUsize,
    /// When this hart's timer interrupt is programmed to come (`time` value; `u64::MAX`:
    /// not programmed): written with every timer write (`sbi::set_timer`), read by a
    /// bounded call to program a one-shot only when no interrupt comes by its deadline.
    pub timer_armed_at: AtomicU64,
    /// Whether the last abort of a recovery point was a budget overrun (not a fault).
    pub last_abort_was_overrun: AtomicUsize,
    /// Nesting depth of sections that must not be preempted (event raises); only this
    /// hart writes it.
    pub preempt_disabled: AtomicUsize,
    /// Set by an extension's panic report just before it traps, so the bounded executor
    /// reports a panic rather than a breakpoint.
    pub pending_panic: AtomicUsize,
    /// Address of the private heap (`mm::private_heap::PrivateHeap`) that this hart's
    /// allocations go to, or 0 for the kernel heap. Set by `PrivateHeap::enter` around
    /// the interpreter's work for one Wasm extension; cleared while a trap is handled and
    /// restored by an abort to the value its recovery point was armed with.
    pub heap_route: AtomicUsize,
    /// Physical address of the root page table the running strand runs with (0: the
    /// kernel's): the scheduler copies it from the strand when it switches to it and back
    /// when it switches away, so a migrating call's switch there and back
    /// (`sched::replace_address_space`) touches only this hart's state.
    pub address_space: AtomicUsize,
    /// The bounded call's recovery point whose abort must undo a migrating call made
    /// inside it (switch back the address space), or 0 (`recovery::mark_migration`).
    pub migration_point: AtomicUsize,
    /// `satp` writes on this hart (each with a full `sfence.vma`): the address-space
    /// switches the benchmark's modelled-cycles column prices.
    pub satp_writes: AtomicUsize,
    /// Other `sfence.vma` instructions on this hart (TLB flushes after mapping changes).
    pub tlb_flushes: AtomicUsize,
    /// Id of the process the running strand works for (0: the kernel); the scheduler
    /// sets it from the strand at each switch (`sched::current_process`).
    pub process: AtomicU64,
}

/// Byte offsets of [`HartLocal`] fields used by assembly.
pub const HART_STACK_BOTTOM_OFFSET: usize = 0;
/// See [`HartLocal::emergency_stack_top`].
pub const HART_EMERGENCY_STACK_OFFSET: usize = 8;
/// See [`HartLocal::recovery_point`].
pub const HART_RECOVERY_OFFSET: usize = 16;

/// See [`HartLocal::budget_deadline`] (written by `recovery`'s bounded-call trampoline).
pub const HART_BUDGET_DEADLINE_OFFSET: usize = core::mem::offset_of!(HartLocal, budget_deadline);
/// See [`HartLocal::budget_point`] (written by `recovery`'s bounded-call trampoline).
pub const HART_BUDGET_POINT_OFFSET: usize = core::mem::offset_of!(HartLocal, budget_point);
/// See [`HartLocal::timer_armed_at`] (read by the bounded-call trampoline).
pub const HART_TIMER_ARMED_AT_OFFSET: usize = core::mem::offset_of!(HartLocal, timer_armed_at);
/// See [`HartLocal::preempt_disabled`] (saved by the bounded-call trampoline).
pub const HART_PREEMPT_DISABLED_OFFSET: usize = core::mem::offset_of!(HartLocal, preempt_disabled);
/// See [`HartLocal::heap_route`] (saved by the bounded-call trampoline).
pub const HART_HEAP_ROUTE_OFFSET: usize = core::mem::offset_of!(HartLocal, heap_route);

const _: () = {
    assert!(core::mem::offset_of!(HartLocal, stack_bottom) == HART_STACK_BOTTOM_OFFSET);
    assert!(core::mem::offset_of!(HartLocal, emergency_stack_top) == HART_EMERGENCY_STACK_OFFSET);
    assert!(core::mem::offset_of!(HartLocal, recovery_point) == HART_RECOVERY_OFFSET);
};

impl HartLocal {
    const fn new() -> Self {
        HartLocal {
            stack_bottom: AtomicUsize::new(0),
            emergency_stack_top: AtomicUsize::new(0),
            recovery_point: AtomicUsize::new(0),
            hart_id: AtomicUsize::new(0),
            last_fault_cause: AtomicUsize::new(0),
            last_fault_value: AtomicUsize::new(0),
            last_fault_pc: AtomicUsize::new(0),
            last_fault_was_overflow: AtomicUsize::new(0),
            trap_count: AtomicUsize::new(0),
            budget_deadline: AtomicU64::new(0),
            budget_point: AtomicUsize::new(0),
            timer_armed_at: AtomicU64::new(u64::MAX),
            last_abort_was_overrun: AtomicUsize::new(0),
            preempt_disabled: AtomicUsize::new(0),
            satp_writes: AtomicUsize::new(0),
            tlb_flushes: AtomicUsize::new(0),
            pending_panic: AtomicUsize::new(0),
            heap_route: AtomicUsize::new(0),
            address_space: AtomicUsize::new(0),
            migration_point: AtomicUsize::new(0),
            process: AtomicU64::new(0),
        }
    }

    /// What the cost model prices, as counted so far: traps taken, `satp` writes, and
    /// `sfence.vma`s (those of the `satp` writes included).
    pub fn hardware_events(&self) -> spindle_abi::syscall::HwCounters {
        let read = |counter: &AtomicUsize| counter.load(Ordering::Relaxed) as u64;
        let satp_writes = read(&self.satp_writes);
        spindle_abi::syscall::HwCounters { traps: read(&self.trap_count), satp_writes, sfences: satp_writes + read(&self.tlb_flushes) }
    }
}

/// Size of one emergency stack (traps taken after a kernel stack overflow run here).
pub const EMERGENCY_STACK_SIZE: usize = 16 * 1024;

/// The per-hart state array; entry `i` belongs to hart id `i`. Boot code sets `tp` to it.
#[unsafe(no_mangle)]
pub static HART_LOCALS: [HartLocal; MAX_HARTS] = [const { HartLocal::new() }; MAX_HARTS];

#[repr(C, align(16))]
struct EmergencyStacks([[u8; EMERGENCY_STACK_SIZE]; MAX_HARTS]);

/// Emergency stacks; only their addresses are taken (for the trap vector), never references.
static mut EMERGENCY_STACKS: EmergencyStacks = EmergencyStacks([[0; EMERGENCY_STACK_SIZE]; MAX_HARTS]);

/// The calling hart's [`HartLocal`].
pub fn current() -> &'static HartLocal {
    let tp: usize;
    // SAFETY: reading `tp` has no side effects; boot code points it at HART_LOCALS[hart]
    // before any Rust code runs and nothing else writes it in the kernel.
    unsafe { core::arch::asm!("mv {}, tp", out(reg) tp, options(nomem, nostack, preserves_flags)) };
    // SAFETY: `tp` always holds the address of this hart's element of the static
    // HART_LOCALS array (set by the boot code, never changed in the kernel), so it is a
    // valid, aligned, 'static HartLocal that is only accessed through atomics.
    unsafe { &*(tp as *const HartLocal) }
}

/// Initialises the calling hart's state once its boot stack is known.
pub fn init_current(hart_id: usize, stack_bottom: usize) {
    let local = current();
    local.hart_id.store(hart_id, Ordering::Relaxed);
    let stacks = (&raw const EMERGENCY_STACKS) as usize;
    let top = stacks + (hart_id + 1) * EMERGENCY_STACK_SIZE;
    local.emergency_stack_top.store(top, Ordering::Relaxed);
    local.stack_bottom.store(stack_bottom, Ordering::Relaxed);
}

/// The calling hart's id.
pub fn id() -> usize {
    current().hart_id.load(Ordering::Relaxed)
}

/// A section in which this hart's strand is not preempted (see [`no_preemption`]).
pub struct PreemptionGuard {
    _not_send: core::marker::PhantomData<*const ()>,
}

/// Disables preemption on this hart until the guard is dropped: the scheduler does not
/// switch this hart's strand out while the count is non-zero. Event raises run like this
/// (`events::raise`): a strand is never switched out inside a raise, so a context switch
/// (and the idle loop) is a quiescent state for the dispatcher's read-copy-update.
/// Interrupts stay on, so budgets are still enforced. A per-hart counter, below both the
/// dispatcher and the scheduler, so that neither names the other for it.
#[inline(always)]
pub fn no_preemption() -> PreemptionGuard {
    add_to_preemption_depth::<1>();
    PreemptionGuard { _not_send: core::marker::PhantomData }
}

impl Drop for PreemptionGuard {
    #[inline(always)]
    fn drop(&mut self) {
        add_to_preemption_depth::<-1>();
    }
}

/// Adds `DELTA` to this hart's [`HartLocal::preempt_disabled`]: three instructions
/// addressed from `tp` (through [`current`] the compiler first copies `tp`, a fourth).
/// Only this hart writes its counter, and a load/store pair is atomic with respect to its
/// own interrupts (an interrupt handler leaves the depth as it found it), so no
/// read-modify-write atomic is needed. Not `nomem`: the compiler moves no memory access of
/// the section across it.
#[inline(always)]
fn add_to_preemption_depth<const DELTA: i32>() {
    // SAFETY: `tp` points at this hart's `HartLocal` (see `current`), whose
    // `preempt_disabled` word is at `HART_PREEMPT_DISABLED_OFFSET` (its `offset_of!`);
    // only this hart writes it (see above). The asm touches nothing else.
    unsafe {
        core::arch::asm!(
            "ld {depth}, {offset}(tp)",
            "addi {depth}, {depth}, {delta}",
            "sd {depth}, {offset}(tp)",
            depth = out(reg) _,
            offset = const HART_PREEMPT_DISABLED_OFFSET,
            delta = const DELTA,
            options(nostack, preserves_flags),
        );
    }
}
