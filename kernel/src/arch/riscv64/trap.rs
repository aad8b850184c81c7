//! The trap vector, trap frames and trap decoding.
//!
//! Every trap enters `trap_vector`, which first swaps `t0` with `sscratch`: `sscratch`
//! is 0 while the kernel runs and holds the running process's
//! [`UserContext`](super::user::UserContext) while U-mode runs.
//!
//! - **From S-mode** (`sscratch` was 0): the vector saves all 31 general registers plus
//!   `sepc`, `sstatus`, `scause` and `stval` into a [`TrapFrame`] on the current kernel
//!   stack, sets `sscratch` back to 0 and calls [`trap_handler`]. Before pushing, it checks
//!   the stack pointer against the hart's `stack_bottom`; a trap that would write below it
//!   (a kernel stack overflow into the guard page) is moved to the hart's emergency stack
//!   so that it can still be reported. Registers are restored from the (possibly
//!   modified) frame on return, which is how fault recovery redirects execution.
//! - **From U-mode**: the vector saves every user integer register, `sepc`, `sstatus`,
//!   `scause` and `stval` into the user context, clears `sscratch`, turns the kernel's
//!   floating-point unit back on, saves the user's floating-point registers if the context
//!   uses the unit (lazy switching, see `super::user`), restores the kernel registers
//!   (`sp`, `tp`, …) that
//!   [`UserContext::run`](super::user::UserContext::run) saved there and returns from
//!   `run`: the process's strand handles the trap in Rust (see `super::user`).
//!
//! Limitations: floating-point registers are not saved for traps from S-mode because
//! trap handlers do not use them.

use core::fmt;
use core::sync::atomic::Ordering;

use super::hart::{self, HART_EMERGENCY_STACK_OFFSET, HART_STACK_BOTTOM_OFFSET};
use super::user::{
    FCSR_OFFSET, FLOAT_OFFSET, FLOAT_USED_OFFSET, KERNEL_FLOAT_OFFSET, KERNEL_FS_OFFSET, KERNEL_OFFSET, PC_OFFSET, REGISTERS_OFFSET, SCAUSE_OFFSET,
    SSTATUS_OFFSET, STVAL_OFFSET,
};

/// Registers saved on trap entry. `regs[n]` holds `x<n>`; `regs[0]` is unused.
#[repr(C)]
#[derive(Clone)]
pub struct TrapFrame {
    /// General registers x0..x31 (x2 = sp at the time of the trap).
    pub regs: [usize; 32],
    /// Program counter of the trapping instruction (or the next one, for interrupts).
    pub sepc: usize,
    /// `sstatus` at the time of the trap.
    pub sstatus: usize,
    /// Trap cause.
    pub scause: usize,
    /// Trap value (faulting address or instruction bits).
    pub stval: usize,
}

/// Size of a trap frame on the stack (a multiple of 16, as the ABI requires for sp).
pub const TRAP_FRAME_SIZE: usize = core::mem::size_of::<TrapFrame>();
const _: () = assert!(TRAP_FRAME_SIZE.is_multiple_of(16));

/// Register numbers used by the rest of the kernel.
pub mod reg {
    /// Return address.
    pub const RA: usize = 1;
    /// Stack pointer.
    pub const SP: usize = 2;
    /// First argument / return value.
    pub const A0: usize = 10;
    /// Second argument.
    pub const A1: usize = 11;
}

core::arch::global_asm!(
    ".section .text",
    ".balign 4",
    ".globl trap_vector",
    "trap_vector:",
    // t0 <-> sscratch: t0 = 0 for a trap from the kernel, else the user context.
    "    csrrw t0, sscratch, t0",
    "    bnez t0, 3f",
    // From S-mode; sscratch holds the interrupted t0.
    "    addi sp, sp, -{frame}",
    "    ld t0, {stack_bottom}(tp)",
    "    bltu sp, t0, 1f",
    // Normal case: t0 = sp before the trap.
    "    addi t0, sp, {frame}",
    "    j 2f",
    // Kernel stack overflow: move to the emergency stack, remembering the bad sp.
    "1:  addi t0, sp, {frame}",
    "    ld sp, {emergency}(tp)",
    "    addi sp, sp, -{frame}",
    "2:  sd t0, 2*8(sp)",
    // t0 = the interrupted t0, and sscratch = 0 again ('in the kernel').
    "    csrrw t0, sscratch, zero",
    "    sd x1, 1*8(sp)",
    "    sd x3, 3*8(sp)",
    "    sd x4, 4*8(sp)",
    "    sd x5, 5*8(sp)",
    "    sd x6, 6*8(sp)",
    "    sd x7, 7*8(sp)",
    "    sd x8, 8*8(sp)",
    "    sd x9, 9*8(sp)",
    "    sd x10, 10*8(sp)",
    "    sd x11, 11*8(sp)",
    "    sd x12, 12*8(sp)",
    "    sd x13, 13*8(sp)",
    "    sd x14, 14*8(sp)",
    "    sd x15, 15*8(sp)",
    "    sd x16, 16*8(sp)",
    "    sd x17, 17*8(sp)",
    "    sd x18, 18*8(sp)",
    "    sd x19, 19*8(sp)",
    "    sd x20, 20*8(sp)",
    "    sd x21, 21*8(sp)",
    "    sd x22, 22*8(sp)",
    "    sd x23, 23*8(sp)",
    "    sd x24, 24*8(sp)",
    "    sd x25, 25*8(sp)",
    "    sd x26, 26*8(sp)",
    "    sd x27, 27*8(sp)",
    "    sd x28, 28*8(sp)",
    "    sd x29, 29*8(sp)",
    "    sd x30, 30*8(sp)",
    "    sd x31, 31*8(sp)",
    "    csrr t0, sepc",
    "    sd t0, 32*8(sp)",
    "    csrr t0, sstatus",
    "    sd t0, 33*8(sp)",
    "    csrr t0, scause",
    "    sd t0, 34*8(sp)",
    "    csrr t0, stval",
    "    sd t0, 35*8(sp)",
    "    mv a0, sp",
    "    call {handler}",
    // Restore from the frame (the handler may have changed sepc, sstatus or registers).
    "    ld t0, 32*8(sp)",
    "    csrw sepc, t0",
    "    ld t0, 33*8(sp)",
    "    csrw sstatus, t0",
    "    ld x1, 1*8(sp)",
    "    ld x3, 3*8(sp)",
    "    ld x4, 4*8(sp)",
    "    ld x5, 5*8(sp)",
    "    ld x6, 6*8(sp)",
    "    ld x7, 7*8(sp)",
    "    ld x8, 8*8(sp)",
    "    ld x9, 9*8(sp)",
    "    ld x10, 10*8(sp)",
    "    ld x11, 11*8(sp)",
    "    ld x12, 12*8(sp)",
    "    ld x13, 13*8(sp)",
    "    ld x14, 14*8(sp)",
    "    ld x15, 15*8(sp)",
    "    ld x16, 16*8(sp)",
    "    ld x17, 17*8(sp)",
    "    ld x18, 18*8(sp)",
    "    ld x19, 19*8(sp)",
    "    ld x20, 20*8(sp)",
    "    ld x21, 21*8(sp)",
    "    ld x22, 22*8(sp)",
    "    ld x23, 23*8(sp)",
    "    ld x24, 24*8(sp)",
    "    ld x25, 25*8(sp)",
    "    ld x26, 26*8(sp)",
    "    ld x27, 27*8(sp)",
    "    ld x28, 28*8(sp)",
    "    ld x29, 29*8(sp)",
    "    ld x30, 30*8(sp)",
    "    ld x31, 31*8(sp)",
    "    ld sp, 2*8(sp)",
    "    sret",
    // From U-mode: t0 = the user context, sscratch = the user's t0.
    ".option push",
    ".option arch, +d",
    "3:  sd x1, {registers}+1*8(t0)",
    "    sd x2, {registers}+2*8(t0)",
    "    sd x3, {registers}+3*8(t0)",
    "    sd x4, {registers}+4*8(t0)",
    "    sd x6, {registers}+6*8(t0)",
    "    sd x7, {registers}+7*8(t0)",
    "    sd x8, {registers}+8*8(t0)",
    "    sd x9, {registers}+9*8(t0)",
    "    sd x10, {registers}+10*8(t0)",
    "    sd x11, {registers}+11*8(t0)",
    "    sd x12, {registers}+12*8(t0)",
    "    sd x13, {registers}+13*8(t0)",
    "    sd x14, {registers}+14*8(t0)",
    "    sd x15, {registers}+15*8(t0)",
    "    sd x16, {registers}+16*8(t0)",
    "    sd x17, {registers}+17*8(t0)",
    "    sd x18, {registers}+18*8(t0)",
    "    sd x19, {registers}+19*8(t0)",
    "    sd x20, {registers}+20*8(t0)",
    "    sd x21, {registers}+21*8(t0)",
    "    sd x22, {registers}+22*8(t0)",
    "    sd x23, {registers}+23*8(t0)",
    "    sd x24, {registers}+24*8(t0)",
    "    sd x25, {registers}+25*8(t0)",
    "    sd x26, {registers}+26*8(t0)",
    "    sd x27, {registers}+27*8(t0)",
    "    sd x28, {registers}+28*8(t0)",
    "    sd x29, {registers}+29*8(t0)",
    "    sd x30, {registers}+30*8(t0)",
    "    sd x31, {registers}+31*8(t0)",
    // t1 = the user's t0, and sscratch = 0: from here on a trap is the kernel's.
    "    csrrw t1, sscratch, zero",
    "    sd t1, {registers}+5*8(t0)",
    "    csrr t1, sepc",
    "    sd t1, {pc}(t0)",
    "    csrr t1, sstatus",
    "    sd t1, {sstatus}(t0)",
    "    csrr t1, scause",
    "    sd t1, {scause}(t0)",
    "    csrr t1, stval",
    "    sd t1, {stval}(t0)",
    // The kernel's floating-point bits back on (U-mode ran with the unit off unless the
    // context uses it), then the unit's registers only for a context that uses it.
    "    ld t1, {kernel_fs}(t0)",
    "    csrs sstatus, t1",
    "    ld t2, {float_used}(t0)",
    "    beqz t2, 5f",
    "    fsd f0, {float}+0*8(t0)",
    "    fsd f1, {float}+1*8(t0)",
    "    fsd f2, {float}+2*8(t0)",
    "    fsd f3, {float}+3*8(t0)",
    "    fsd f4, {float}+4*8(t0)",
    "    fsd f5, {float}+5*8(t0)",
    "    fsd f6, {float}+6*8(t0)",
    "    fsd f7, {float}+7*8(t0)",
    "    fsd f8, {float}+8*8(t0)",
    "    fsd f9, {float}+9*8(t0)",
    "    fsd f10, {float}+10*8(t0)",
    "    fsd f11, {float}+11*8(t0)",
    "    fsd f12, {float}+12*8(t0)",
    "    fsd f13, {float}+13*8(t0)",
    "    fsd f14, {float}+14*8(t0)",
    "    fsd f15, {float}+15*8(t0)",
    "    fsd f16, {float}+16*8(t0)",
    "    fsd f17, {float}+17*8(t0)",
    "    fsd f18, {float}+18*8(t0)",
    "    fsd f19, {float}+19*8(t0)",
    "    fsd f20, {float}+20*8(t0)",
    "    fsd f21, {float}+21*8(t0)",
    "    fsd f22, {float}+22*8(t0)",
    "    fsd f23, {float}+23*8(t0)",
    "    fsd f24, {float}+24*8(t0)",
    "    fsd f25, {float}+25*8(t0)",
    "    fsd f26, {float}+26*8(t0)",
    "    fsd f27, {float}+27*8(t0)",
    "    fsd f28, {float}+28*8(t0)",
    "    fsd f29, {float}+29*8(t0)",
    "    fsd f30, {float}+30*8(t0)",
    "    fsd f31, {float}+31*8(t0)",
    "    frcsr t1",
    "    sd t1, {fcsr}(t0)",
    "5:",
    // Back to the kernel side of UserContext::run, which returns to its caller.
    "    ld ra, {kernel}+0*8(t0)",
    "    ld sp, {kernel}+1*8(t0)",
    "    ld gp, {kernel}+2*8(t0)",
    "    ld tp, {kernel}+3*8(t0)",
    "    ld s0, {kernel}+4*8(t0)",
    "    ld s1, {kernel}+5*8(t0)",
    "    ld s2, {kernel}+6*8(t0)",
    "    ld s3, {kernel}+7*8(t0)",
    "    ld s4, {kernel}+8*8(t0)",
    "    ld s5, {kernel}+9*8(t0)",
    "    ld s6, {kernel}+10*8(t0)",
    "    ld s7, {kernel}+11*8(t0)",
    "    ld s8, {kernel}+12*8(t0)",
    "    ld s9, {kernel}+13*8(t0)",
    "    ld s10, {kernel}+14*8(t0)",
    "    ld s11, {kernel}+15*8(t0)",
    "    beqz t2, 6f",
    "    fld fs0, {kernel_float}+0*8(t0)",
    "    fld fs1, {kernel_float}+1*8(t0)",
    "    fld fs2, {kernel_float}+2*8(t0)",
    "    fld fs3, {kernel_float}+3*8(t0)",
    "    fld fs4, {kernel_float}+4*8(t0)",
    "    fld fs5, {kernel_float}+5*8(t0)",
    "    fld fs6, {kernel_float}+6*8(t0)",
    "    fld fs7, {kernel_float}+7*8(t0)",
    "    fld fs8, {kernel_float}+8*8(t0)",
    "    fld fs9, {kernel_float}+9*8(t0)",
    "    fld fs10, {kernel_float}+10*8(t0)",
    "    fld fs11, {kernel_float}+11*8(t0)",
    "6:",
    "    ret",
    ".option pop",
    frame = const TRAP_FRAME_SIZE,
    stack_bottom = const HART_STACK_BOTTOM_OFFSET,
    emergency = const HART_EMERGENCY_STACK_OFFSET,
    handler = sym trap_handler,
    registers = const REGISTERS_OFFSET,
    pc = const PC_OFFSET,
    sstatus = const SSTATUS_OFFSET,
    scause = const SCAUSE_OFFSET,
    stval = const STVAL_OFFSET,
    float = const FLOAT_OFFSET,
    fcsr = const FCSR_OFFSET,
    kernel = const KERNEL_OFFSET,
    kernel_float = const KERNEL_FLOAT_OFFSET,
    float_used = const FLOAT_USED_OFFSET,
    kernel_fs = const KERNEL_FS_OFFSET,
);

/// A decoded trap cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrapCause {
    /// Supervisor software interrupt (inter-processor).
    SoftwareInterrupt,
    /// Supervisor timer interrupt.
    TimerInterrupt,
    /// Supervisor external interrupt (PLIC).
    ExternalInterrupt,
    /// A synchronous exception.
    Exception(Exception),
    /// A cause this kernel does not know.
    Unknown(usize),
}

/// Synchronous exceptions (RISC-V privileged spec, Table 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exception {
    /// 0
    InstructionMisaligned,
    /// 1
    InstructionAccessFault,
    /// 2
    IllegalInstruction,
    /// 3
    Breakpoint,
    /// 4
    LoadMisaligned,
    /// 5
    LoadAccessFault,
    /// 6
    StoreMisaligned,
    /// 7
    StoreAccessFault,
    /// 8
    UserEnvironmentCall,
    /// 9
    SupervisorEnvironmentCall,
    /// 12
    InstructionPageFault,
    /// 13
    LoadPageFault,
    /// 15
    StorePageFault,
}

const INTERRUPT_BIT: usize = 1 << 63;

impl TrapCause {
    /// Decodes an `scause` value.
    pub fn from_scause(scause: usize) -> TrapCause {
        let code = scause & !INTERRUPT_BIT;
        if scause & INTERRUPT_BIT != 0 {
            return match code {
                1 => TrapCause::SoftwareInterrupt,
                5 => TrapCause::TimerInterrupt,
                9 => TrapCause::ExternalInterrupt,
                _ => TrapCause::Unknown(scause),
            };
        }
        let exception = match code {
            0 => Exception::InstructionMisaligned,
            1 => Exception::InstructionAccessFault,
            2 => Exception::IllegalInstruction,
            3 => Exception::Breakpoint,
            4 => Exception::LoadMisaligned,
            5 => Exception::LoadAccessFault,
            6 => Exception::StoreMisaligned,
            7 => Exception::StoreAccessFault,
            8 => Exception::UserEnvironmentCall,
            9 => Exception::SupervisorEnvironmentCall,
            12 => Exception::InstructionPageFault,
            13 => Exception::LoadPageFault,
            15 => Exception::StorePageFault,
            _ => return TrapCause::Unknown(scause),
        };
        TrapCause::Exception(exception)
    }
}

impl Exception {
    /// What `stval` means for this exception, for messages.
    pub fn stval_meaning(self) -> &'static str {
        match self {
            Exception::IllegalInstruction => "instruction bits",
            Exception::Breakpoint | Exception::UserEnvironmentCall | Exception::SupervisorEnvironmentCall => "value",
            _ => "address",
        }
    }
}

impl fmt::Display for Exception {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Exception::InstructionMisaligned => "instruction address misaligned",
            Exception::InstructionAccessFault => "instruction access fault",
            Exception::IllegalInstruction => "illegal instruction",
            Exception::Breakpoint => "breakpoint",
            Exception::LoadMisaligned => "load address misaligned",
            Exception::LoadAccessFault => "load access fault",
            Exception::StoreMisaligned => "store/AMO address misaligned",
            Exception::StoreAccessFault => "store/AMO access fault",
            Exception::UserEnvironmentCall => "environment call from U-mode",
            Exception::SupervisorEnvironmentCall => "environment call from S-mode",
            Exception::InstructionPageFault => "instruction page fault",
            Exception::LoadPageFault => "load page fault",
            Exception::StorePageFault => "store/AMO page fault",
        };
        f.write_str(text)
    }
}

impl fmt::Display for TrapCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrapCause::SoftwareInterrupt => f.write_str("supervisor software interrupt"),
            TrapCause::TimerInterrupt => f.write_str("supervisor timer interrupt"),
            TrapCause::ExternalInterrupt => f.write_str("supervisor external interrupt"),
            TrapCause::Exception(exception) => exception.fmt(f),
            TrapCause::Unknown(scause) => write!(f, "unknown trap (scause={scause:#x})"),
        }
    }
}

/// A fault described for humans: cause, value, pc, and whether the stack overflowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultReport {
    /// Decoded cause.
    pub cause: TrapCause,
    /// Raw `scause`.
    pub scause: usize,
    /// `stval` (address or instruction bits, see [`Exception::stval_meaning`]).
    pub stval: usize,
    /// Program counter of the faulting instruction.
    pub pc: usize,
    /// True when the trap hit the guard page below the kernel stack.
    pub stack_overflow: bool,
}

impl fmt::Display for FaultReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meaning = match self.cause {
            TrapCause::Exception(exception) => exception.stval_meaning(),
            _ => "value",
        };
        write!(f, "{} (scause={:#x}) at pc={:#x}, stval={:#x} ({meaning})", self.cause, self.scause, self.pc, self.stval)?;
        if self.stack_overflow {
            f.write_str(" [kernel stack overflow]")?;
        }
        Ok(())
    }
}

/// The handler of supervisor external interrupts, installed by the interrupt controller's
/// driver (`drivers::plic`): the machine layer names no driver.
static EXTERNAL_INTERRUPT_HANDLER: spin::Once<fn()> = spin::Once::new();

/// Makes `handler` the handler of supervisor external interrupts (interrupt context,
/// interrupts off). The first installation wins; later calls change nothing.
pub fn set_external_interrupt_handler(handler: fn()) {
    EXTERNAL_INTERRUPT_HANDLER.call_once(|| handler);
}

/// Rust side of the trap vector. Interrupts are routed to the kernel's handlers;
/// exceptions in S-mode go to an armed recovery point if there is one, otherwise they
/// are fatal and reported with cause and address.
extern "C" fn trap_handler(frame: &mut TrapFrame) {
    let local = hart::current();
    local.trap_count.fetch_add(1, Ordering::Relaxed);
    // What the kernel allocates while handling a trap is its own, even if the interrupted
    // code was filling a private heap.
    let route = crate::mm::private_heap::suspend_routing();
    handle_trap(frame, local);
    crate::mm::private_heap::resume_routing(route);
}

fn handle_trap(frame: &mut TrapFrame, local: &hart::HartLocal) {
    let cause = TrapCause::from_scause(frame.scause);
    match cause {
        TrapCause::TimerInterrupt => {
            super::recovery::abort_overrun(frame, super::csr::time() as u64);
            crate::sched::on_timer_interrupt();
        }
        TrapCause::ExternalInterrupt => match EXTERNAL_INTERRUPT_HANDLER.get() {
            Some(handler) => handler(),
            None => crate::println!("[trap] spurious {cause}"),
        },
        TrapCause::SoftwareInterrupt => {
            crate::println!("[trap] spurious {cause}");
        }
        TrapCause::Exception(_) | TrapCause::Unknown(_) => {
            let stack_bottom = local.stack_bottom.load(Ordering::Relaxed);
            let report = FaultReport {
                cause,
                scause: frame.scause,
                stval: frame.stval,
                pc: frame.sepc,
                stack_overflow: frame.regs[reg::SP] - TRAP_FRAME_SIZE < stack_bottom,
            };
            if super::recovery::redirect_to_recovery_point(frame, &report) {
                return;
            }
            crate::fault::fatal_kernel_fault(&report, frame);
        }
    }
}

/// Prints the general registers of a frame, four per line.
pub fn dump_registers(frame: &TrapFrame, out: &mut dyn fmt::Write) -> fmt::Result {
    const NAMES: [&str; 32] = [
        "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7",
        "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6",
    ];
    for (names, values) in NAMES.chunks(4).zip(frame.regs.chunks(4)) {
        for (name, value) in names.iter().zip(values) {
            write!(out, "{name:>4}={value:#018x} ")?;
        }
        writeln!(out)?;
    }
    writeln!(out, "sepc={:#018x} sstatus={:#018x}", frame.sepc, frame.sstatus)
}

/// Traps with a breakpoint on purpose: used to abort an extension handler at its
/// recovery point (the trap handler redirects there). Without a recovery point this is a
/// fatal kernel fault, reported as such.
pub fn raise_breakpoint() -> ! {
    // SAFETY: `ebreak` only traps; the trap handler either resumes at a recovery point
    // (never here) or stops the kernel.
    unsafe { core::arch::asm!("ebreak", options(nomem, nostack)) };
    loop {
        core::hint::spin_loop();
    }
}
