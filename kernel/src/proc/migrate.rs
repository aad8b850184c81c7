//! Migrating calls: running user code of another process on the *calling* strand.
//!
//! Upcalls into user-level extensions (`ext::user`) and cross-address-space service
//! calls (`proc::service`) do not queue work for the target process's own strand and
//! wait for it: the calling strand itself switches `satp` to the target's page table,
//! enters U-mode at the target's entry point on the target's stack, and runs until the
//! target makes its "return" system call — the thread migrates, as in LRPC and SPIN's
//! cross-domain calls, with no scheduler decision on the way. [`call`] is that loop,
//! shared by both.
//!
//! While the target runs, the kernel answers its `write` to the console inline (through
//! a [`SpaceView`] of the target's table) and whatever the caller's `answer` adds; any
//! other system call gets `WrongState`. Interrupts that stop U-mode are delivered to the
//! kernel at once (briefly enabled in S-mode), so the timer tick runs and a deadline set
//! by [`run_bounded`] aborts an endless loop; the satp switch is undone on every path.
//!
//! The caller must keep the target's address space alive and unchanged for the call —
//! both users pin it: the target's own strand is blocked inside a serving system call
//! that ends only after the target is withdrawn — and must run the call with preemption
//! off, so the target's strand cannot run meanwhile.

use spindle_abi::syscall::{CONSOLE, Error, Syscall};
use spindle_process::user_range;
use spindle_service_vm::AccessKind;

use super::SpaceView;
use crate::arch::csr;
use crate::arch::recovery::{Abort, mark_migration, run_bounded, unmark_migration};
use crate::arch::trap::{Exception, TrapCause};
use crate::arch::user::{UserContext, reg};
use crate::sched;

/// Longest text the target may write to the console in one call.
pub const WRITE_MAX: usize = 4096;

/// Checks a migrating call's target as a process registers it: `entry` is user memory the
/// process can read (its text is r-x), and `stack_top` is 16-byte aligned with the 16
/// bytes below it writable, as the calling convention needs. Errors: `BadArgument`.
pub fn check_target(space: &super::AddressSpace, entry: usize, stack_top: usize) -> Result<(), Error> {
    use spindle_process::PageAccess;
    let entry_readable = user_range(entry, 4, 4).is_ok() && space.check(entry, 4, PageAccess::Read).is_ok();
    let stack_usable = stack_top.is_multiple_of(16) && stack_top >= 16 && space.check(stack_top - 16, 16, PageAccess::Write).is_ok();
    if entry_readable && stack_usable { Ok(()) } else { Err(Error::BadArgument) }
}

/// Why a migrating call did not return normally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallFault {
    /// The deadline passed.
    Overrun,
    /// The target took a U-mode exception (`scause`), or the kernel faulted on its behalf.
    Trapped(usize),
    /// The target called `exit` (the runtime's panic path) instead of returning.
    Exited,
}

/// Runs `context` (prepared with `UserContext::prepare_call`) in the space of `view` on
/// this strand until the target makes system call `return_call`; returns that call's
/// `a0`..`a4`. `deadline` is a `time` value (`u64::MAX`: only an enclosing bounded call's
/// deadline applies). `answer` handles the target's other system calls (number,
/// arguments) → `Some(result)`, or `None` for `WrongState`.
///
/// With `deadline == u64::MAX` inside a bounded call (an upcall from the dispatcher), the
/// call arms no recovery point of its own: it marks the enclosing call's
/// (`recovery::mark_migration`), whose abort path then switches back and restores the
/// interrupt state, and an overrun or a fault on the target's behalf is that call's abort
/// (the dispatcher reports it for the binding). Otherwise it runs under its own
/// `run_bounded` and reports them as [`CallFault`]s.
pub fn call(
    view: &SpaceView,
    context: &mut UserContext,
    deadline: u64,
    return_call: Syscall,
    answer: &mut dyn FnMut(Syscall, [usize; 6]) -> Option<Result<usize, Error>>,
) -> Result<[usize; 5], CallFault> {
    // Off from the switch to the mark, so no abort can fall between them (`run` keeps them
    // off except where it lets an interrupt in).
    let interrupts_were_on = csr::disable_interrupts();
    let previous = sched::replace_address_space_interrupts_off(view.root_address());
    if deadline == u64::MAX
        && let Some(mark) = mark_migration(previous, interrupts_were_on)
    {
        // The result goes straight back: no recovery point, no `Abort` to map. `run`
        // returns with interrupts off (U-mode traps with them off; it lets one in only
        // between two entries).
        let result = run(view, context, return_call, answer);
        sched::replace_address_space_interrupts_off(previous);
        unmark_migration(mark);
        restore_interrupts(interrupts_were_on);
        return result;
    }
    call_bounded(view, context, deadline, return_call, answer, (previous, interrupts_were_on))
}

/// [`call`] under a recovery point of its own (a real deadline, or no enclosing bounded
/// call to mark): an overrun or a fault on the target's behalf lands here, is switched back
/// from (`previous` space, interrupt state) and reported as a [`CallFault`]. Out of line,
/// so that the marked path keeps a small frame.
#[inline(never)]
fn call_bounded(
    view: &SpaceView,
    context: &mut UserContext,
    deadline: u64,
    return_call: Syscall,
    answer: &mut dyn FnMut(Syscall, [usize; 6]) -> Option<Result<usize, Error>>,
    (previous, interrupts_were_on): (usize, bool),
) -> Result<[usize; 5], CallFault> {
    let outcome = run_bounded(deadline, || run(view, context, return_call, answer));
    sched::replace_address_space(previous);
    restore_interrupts(interrupts_were_on);
    match outcome {
        Ok(result) => result,
        Err(Abort::BudgetExceeded) => Err(CallFault::Overrun),
        Err(Abort::Fault(report)) => Err(CallFault::Trapped(report.scause)),
    }
}

/// U-mode returns to the kernel with interrupts off (`UserContext::run`): gives the caller
/// back the state it called with, or its later budgets could not be enforced.
#[inline(always)]
fn restore_interrupts(were_on: bool) {
    if were_on {
        csr::enable_interrupts();
    }
}

/// Enters the target and, in the common case — it makes the return call at once, as an
/// upcall's handler does — returns that call's results with nothing else decoded; any
/// other trap goes to [`serve`]. Small, so that the call's one trap costs few register
/// saves.
#[inline(always)]
fn run(
    view: &SpaceView,
    context: &mut UserContext,
    return_call: Syscall,
    answer: &mut dyn FnMut(Syscall, [usize; 6]) -> Option<Result<usize, Error>>,
) -> Result<[usize; 5], CallFault> {
    if enter(context, return_call) {
        return Ok(context.arguments());
    }
    serve(view, context, return_call, answer)
}

/// Runs the target until it traps (counted as the hart's trap); true if the trap is the
/// return call. That is checked first, before the trap is decoded: its results are
/// `a0`..`a4` (the context is prepared afresh for the next call, so its pc stays).
#[inline(always)]
fn enter(context: &mut UserContext, return_call: Syscall) -> bool {
    context.run();
    crate::arch::hart::current().trap_count.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    context.made_system_call(return_call.number())
}

/// The rest of [`run`]'s loop: handles the trap the target just took — an interrupt, a
/// system call other than the return, a page fault — and enters it again, until it makes
/// the return call (its results) or the call ends in a [`CallFault`].
#[inline(never)]
fn serve(
    view: &SpaceView,
    context: &mut UserContext,
    return_call: Syscall,
    answer: &mut dyn FnMut(Syscall, [usize; 6]) -> Option<Result<usize, Error>>,
) -> Result<[usize; 5], CallFault> {
    loop {
        match context.cause() {
            TrapCause::TimerInterrupt | TrapCause::SoftwareInterrupt | TrapCause::ExternalInterrupt => {
                // Taken again at once in S-mode: the tick runs (no preemption: the caller
                // disabled it) and an expired deadline aborts to `run_bounded`; a device
                // interrupt (still pending at the PLIC) is claimed and handled by its driver.
                csr::enable_interrupts();
                csr::disable_interrupts();
            }
            TrapCause::Exception(Exception::UserEnvironmentCall) => {
                context.skip_ecall();
                let arguments: [usize; 6] = core::array::from_fn(|index| context.register(reg::A0 + index));
                let result = match Syscall::from_number(context.register(reg::A7)) {
                    Some(Syscall::Exit) => return Err(CallFault::Exited),
                    Some(Syscall::Write) => write(view, arguments),
                    Some(other) => answer(other, arguments).unwrap_or(Err(Error::WrongState)),
                    None => Err(Error::NoSuchCall),
                };
                let (code, value) = match result {
                    Ok(value) => (0, value),
                    Err(error) => (error.code(), 0),
                };
                context.set_register(reg::A0, code);
                context.set_register(reg::A1, value);
            }
            // A page fault on a missing page of an anonymous `vm_map` region of the target
            // (its stack, its heap): demand-zero, and the instruction runs again. Any other
            // fault ends the call.
            TrapCause::Exception(exception @ (Exception::LoadPageFault | Exception::StorePageFault | Exception::InstructionPageFault)) => {
                let access = match exception {
                    Exception::StorePageFault => AccessKind::Write,
                    Exception::InstructionPageFault => AccessKind::Execute,
                    _ => AccessKind::Read,
                };
                // SAFETY: as in `write` below: the target's space is pinned and this call
                // runs with preemption off.
                if !unsafe { view.fault_in(context.fault_report().stval, access) } {
                    return Err(CallFault::Trapped(context.fault_report().scause));
                }
            }
            _ => return Err(CallFault::Trapped(context.fault_report().scause)),
        }
        if enter(context, return_call) {
            return Ok(context.arguments());
        }
    }
}

/// `write(handle, pointer, length)` from the target: the console only.
fn write(view: &SpaceView, [handle, pointer, length, ..]: [usize; 6]) -> Result<usize, Error> {
    if handle != CONSOLE {
        return Err(Error::BadHandle);
    }
    let range = user_range(pointer, length, WRITE_MAX)?;
    let mut bytes = alloc::vec![0u8; range.len()];
    // SAFETY: by this module's contract the target's space is pinned (its strand is
    // blocked in a serving call that withdraws the target before returning) and this
    // call runs with preemption off, so nothing changes the space meanwhile.
    unsafe { view.read(range.start, &mut bytes)? };
    crate::print!("{}", alloc::string::String::from_utf8_lossy(&bytes));
    Ok(length)
}
