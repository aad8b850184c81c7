//! Running user code: a process's saved U-mode registers ([`UserContext`]) and the
//! switch into U-mode and back, shaped as a function call.
//!
//! [`UserContext::run`] saves the kernel's callee-saved registers (`ra`, `sp`, `gp`, `tp`,
//! `s0`–`s11`, `fs0`–`fs11`) in the context, puts the context's address in `sscratch`,
//! loads every user register (integer and floating point) and `sret`s to U-mode. When the
//! user code traps, the trap vector (`trap.rs`) finds the context through `sscratch`
//! (non-zero only while U-mode runs), saves every user register, `sepc`, `sstatus`,
//! `scause` and `stval` into it, clears `sscratch`, restores the kernel registers and
//! returns from `run` — on the strand that called it, on that strand's kernel stack,
//! with interrupts off. The caller (the process's strand, `proc`) then handles the trap
//! in ordinary Rust: a system call, a timer tick (which may preempt the strand), or a
//! fault that ends the process.
//!
//! `run` computes the `sstatus` it enters U-mode with (previous privilege User, interrupts
//! on after `sret`, `SUM` off), so no context contents can make `sret` land in S-mode.
//! User code can reach only pages with the U bit of the active page table: running
//! arbitrary user registers is safe for the kernel.
//!
//! **Floating point is switched lazily.** A context starts with the unit off in U-mode
//! (`sstatus.FS = Off`), and while it is off `run` neither saves the kernel's `fs0`–`fs11`
//! nor loads the user's `f0`–`f31`, and the trap vector saves none of them: U-mode cannot
//! touch a floating-point register then, so the kernel's stay intact and nothing of the
//! kernel's or another context's state can be read. The context's first floating-point
//! instruction traps as illegal; `run` then marks the context as using the unit and runs
//! the instruction again, now with every register (zero at first) switched on every entry
//! and trap, as before. Most user code (upcall handlers, the test programs) never uses the
//! unit and so never pays for moving its 33 registers and the kernel's 12 in and out.
//!
//! Limitations: a context that has used the unit once switches all of it on every trap
//! (no saving only when `sstatus.FS` says dirty); one context per process
//! (single-threaded processes).

use core::fmt;

use super::csr::{self, SSTATUS_FS_DIRTY, SSTATUS_FS_MASK, SSTATUS_SIE, SSTATUS_SPIE, SSTATUS_SPP, SSTATUS_SUM};
use super::trap::{FaultReport, TrapCause};

/// Words of [`UserContext`] before each part (the assembly's offsets, checked below).
const REGISTERS_WORD: usize = 0;
const PC_WORD: usize = 32;
const SSTATUS_WORD: usize = 33;
const SCAUSE_WORD: usize = 34;
const STVAL_WORD: usize = 35;
const FLOAT_WORD: usize = 36;
const FCSR_WORD: usize = 68;
const KERNEL_WORD: usize = 69;
const KERNEL_FLOAT_WORD: usize = 85;
const FLOAT_USED_WORD: usize = 97;
const KERNEL_FS_WORD: usize = 98;

/// Byte offset of the user's `x0`..`x31` in a [`UserContext`].
pub(super) const REGISTERS_OFFSET: usize = REGISTERS_WORD * 8;
/// Byte offset of the saved user `pc` (`sepc`).
pub(super) const PC_OFFSET: usize = PC_WORD * 8;
/// Byte offset of `sstatus` (entered with / found at the trap).
pub(super) const SSTATUS_OFFSET: usize = SSTATUS_WORD * 8;
/// Byte offset of `scause` of the last trap.
pub(super) const SCAUSE_OFFSET: usize = SCAUSE_WORD * 8;
/// Byte offset of `stval` of the last trap.
pub(super) const STVAL_OFFSET: usize = STVAL_WORD * 8;
/// Byte offset of the user's `f0`..`f31`.
pub(super) const FLOAT_OFFSET: usize = FLOAT_WORD * 8;
/// Byte offset of the user's `fcsr`.
pub(super) const FCSR_OFFSET: usize = FCSR_WORD * 8;
/// Byte offset of the kernel's `ra`, `sp`, `gp`, `tp`, `s0`..`s11` (saved by `run`).
pub(super) const KERNEL_OFFSET: usize = KERNEL_WORD * 8;
/// Byte offset of the kernel's `fs0`..`fs11`.
pub(super) const KERNEL_FLOAT_OFFSET: usize = KERNEL_FLOAT_WORD * 8;
/// Byte offset of the flag "this context uses the floating-point unit" (nonzero: yes).
pub(super) const FLOAT_USED_OFFSET: usize = FLOAT_USED_WORD * 8;
/// Byte offset of the kernel's `sstatus.FS` bits, which the trap vector puts back.
pub(super) const KERNEL_FS_OFFSET: usize = KERNEL_FS_WORD * 8;

/// The U-mode state of one process while the kernel runs, and the kernel state of its
/// strand while U-mode runs.
#[repr(C)]
pub struct UserContext {
    /// `x0`..`x31` (`x0` unused).
    registers: [usize; 32],
    /// Where U-mode resumes (`sepc`).
    pc: usize,
    /// `sstatus` at the last trap (and the value `run` entered with).
    sstatus: usize,
    /// `scause` of the last trap.
    scause: usize,
    /// `stval` of the last trap.
    stval: usize,
    /// `f0`..`f31`.
    float_registers: [u64; 32],
    /// `fcsr`.
    fcsr: usize,
    /// Kernel `ra`, `sp`, `gp`, `tp`, `s0`..`s11`, saved by `run`.
    kernel: [usize; 16],
    /// Kernel `fs0`..`fs11`, saved by `run` (only when `float_used`).
    kernel_float: [u64; 12],
    /// Nonzero once U-mode has used the floating-point unit: from then on `f0`..`f31` and
    /// `fcsr` are switched on every entry and trap; until then the unit is off in U-mode.
    float_used: usize,
    /// The kernel's `sstatus.FS` bits when `run` entered U-mode (put back at the trap).
    kernel_fs: usize,
}

const _: () = {
    assert!(core::mem::offset_of!(UserContext, registers) == REGISTERS_OFFSET);
    assert!(core::mem::offset_of!(UserContext, pc) == PC_OFFSET);
    assert!(core::mem::offset_of!(UserContext, sstatus) == SSTATUS_OFFSET);
    assert!(core::mem::offset_of!(UserContext, scause) == SCAUSE_OFFSET);
    assert!(core::mem::offset_of!(UserContext, stval) == STVAL_OFFSET);
    assert!(core::mem::offset_of!(UserContext, float_registers) == FLOAT_OFFSET);
    assert!(core::mem::offset_of!(UserContext, fcsr) == FCSR_OFFSET);
    assert!(core::mem::offset_of!(UserContext, kernel) == KERNEL_OFFSET);
    assert!(core::mem::offset_of!(UserContext, kernel_float) == KERNEL_FLOAT_OFFSET);
    assert!(core::mem::offset_of!(UserContext, float_used) == FLOAT_USED_OFFSET);
    assert!(core::mem::offset_of!(UserContext, kernel_fs) == KERNEL_FS_OFFSET);
};

core::arch::global_asm!(
    ".section .text",
    // Module-level assembly does not see the target's extensions; fld/fsd need D.
    ".option push",
    ".option arch, +d",
    ".balign 4",
    // void spindle_enter_user(UserContext *context); "returns" when U-mode traps (trap.rs).
    ".globl spindle_enter_user",
    "spindle_enter_user:",
    "    sd ra, {kernel}+0*8(a0)",
    "    sd sp, {kernel}+1*8(a0)",
    "    sd gp, {kernel}+2*8(a0)",
    "    sd tp, {kernel}+3*8(a0)",
    "    sd s0, {kernel}+4*8(a0)",
    "    sd s1, {kernel}+5*8(a0)",
    "    sd s2, {kernel}+6*8(a0)",
    "    sd s3, {kernel}+7*8(a0)",
    "    sd s4, {kernel}+8*8(a0)",
    "    sd s5, {kernel}+9*8(a0)",
    "    sd s6, {kernel}+10*8(a0)",
    "    sd s7, {kernel}+11*8(a0)",
    "    sd s8, {kernel}+12*8(a0)",
    "    sd s9, {kernel}+13*8(a0)",
    "    sd s10, {kernel}+14*8(a0)",
    "    sd s11, {kernel}+15*8(a0)",
    // Without the unit in U-mode, its registers are neither saved nor loaded (`run`
    // entered U-mode with FS = Off then, so user code cannot touch them).
    "    ld t1, {float_used}(a0)",
    "    beqz t1, 1f",
    "    fsd fs0, {kernel_float}+0*8(a0)",
    "    fsd fs1, {kernel_float}+1*8(a0)",
    "    fsd fs2, {kernel_float}+2*8(a0)",
    "    fsd fs3, {kernel_float}+3*8(a0)",
    "    fsd fs4, {kernel_float}+4*8(a0)",
    "    fsd fs5, {kernel_float}+5*8(a0)",
    "    fsd fs6, {kernel_float}+6*8(a0)",
    "    fsd fs7, {kernel_float}+7*8(a0)",
    "    fsd fs8, {kernel_float}+8*8(a0)",
    "    fsd fs9, {kernel_float}+9*8(a0)",
    "    fsd fs10, {kernel_float}+10*8(a0)",
    "    fsd fs11, {kernel_float}+11*8(a0)",
    "1:",
    // From here until sret, a trap would be taken as coming from U-mode: interrupts are
    // off (the caller's contract) and nothing below can fault (the context is kernel heap).
    "    csrw sscratch, a0",
    "    ld t0, {pc}(a0)",
    "    csrw sepc, t0",
    "    ld t0, {sstatus}(a0)",
    "    csrw sstatus, t0",
    "    beqz t1, 2f",
    "    fld f0, {float}+0*8(a0)",
    "    fld f1, {float}+1*8(a0)",
    "    fld f2, {float}+2*8(a0)",
    "    fld f3, {float}+3*8(a0)",
    "    fld f4, {float}+4*8(a0)",
    "    fld f5, {float}+5*8(a0)",
    "    fld f6, {float}+6*8(a0)",
    "    fld f7, {float}+7*8(a0)",
    "    fld f8, {float}+8*8(a0)",
    "    fld f9, {float}+9*8(a0)",
    "    fld f10, {float}+10*8(a0)",
    "    fld f11, {float}+11*8(a0)",
    "    fld f12, {float}+12*8(a0)",
    "    fld f13, {float}+13*8(a0)",
    "    fld f14, {float}+14*8(a0)",
    "    fld f15, {float}+15*8(a0)",
    "    fld f16, {float}+16*8(a0)",
    "    fld f17, {float}+17*8(a0)",
    "    fld f18, {float}+18*8(a0)",
    "    fld f19, {float}+19*8(a0)",
    "    fld f20, {float}+20*8(a0)",
    "    fld f21, {float}+21*8(a0)",
    "    fld f22, {float}+22*8(a0)",
    "    fld f23, {float}+23*8(a0)",
    "    fld f24, {float}+24*8(a0)",
    "    fld f25, {float}+25*8(a0)",
    "    fld f26, {float}+26*8(a0)",
    "    fld f27, {float}+27*8(a0)",
    "    fld f28, {float}+28*8(a0)",
    "    fld f29, {float}+29*8(a0)",
    "    fld f30, {float}+30*8(a0)",
    "    fld f31, {float}+31*8(a0)",
    "    ld t0, {fcsr}(a0)",
    "    fscsr t0",
    "2:",
    "    ld x1, {registers}+1*8(a0)",
    "    ld x2, {registers}+2*8(a0)",
    "    ld x3, {registers}+3*8(a0)",
    "    ld x4, {registers}+4*8(a0)",
    "    ld x5, {registers}+5*8(a0)",
    "    ld x6, {registers}+6*8(a0)",
    "    ld x7, {registers}+7*8(a0)",
    "    ld x8, {registers}+8*8(a0)",
    "    ld x9, {registers}+9*8(a0)",
    "    ld x11, {registers}+11*8(a0)",
    "    ld x12, {registers}+12*8(a0)",
    "    ld x13, {registers}+13*8(a0)",
    "    ld x14, {registers}+14*8(a0)",
    "    ld x15, {registers}+15*8(a0)",
    "    ld x16, {registers}+16*8(a0)",
    "    ld x17, {registers}+17*8(a0)",
    "    ld x18, {registers}+18*8(a0)",
    "    ld x19, {registers}+19*8(a0)",
    "    ld x20, {registers}+20*8(a0)",
    "    ld x21, {registers}+21*8(a0)",
    "    ld x22, {registers}+22*8(a0)",
    "    ld x23, {registers}+23*8(a0)",
    "    ld x24, {registers}+24*8(a0)",
    "    ld x25, {registers}+25*8(a0)",
    "    ld x26, {registers}+26*8(a0)",
    "    ld x27, {registers}+27*8(a0)",
    "    ld x28, {registers}+28*8(a0)",
    "    ld x29, {registers}+29*8(a0)",
    "    ld x30, {registers}+30*8(a0)",
    "    ld x31, {registers}+31*8(a0)",
    "    ld x10, {registers}+10*8(a0)",
    "    sret",
    ".option pop",
    registers = const REGISTERS_OFFSET,
    pc = const PC_OFFSET,
    sstatus = const SSTATUS_OFFSET,
    float = const FLOAT_OFFSET,
    fcsr = const FCSR_OFFSET,
    kernel = const KERNEL_OFFSET,
    kernel_float = const KERNEL_FLOAT_OFFSET,
    float_used = const FLOAT_USED_OFFSET,
);

unsafe extern "C" {
    fn spindle_enter_user(context: *mut UserContext);
}

/// Register numbers of the system-call convention (`spindle_abi::syscall`).
pub mod reg {
    /// First argument; the error code on return.
    pub const A0: usize = 10;
    /// Second argument; the result on return.
    pub const A1: usize = 11;
    /// The call number.
    pub const A7: usize = 17;
    /// Stack pointer.
    pub const SP: usize = 2;
    /// Return address.
    pub const RA: usize = 1;
}

/// Width of a RISC-V `ecall` instruction (it has no compressed form).
const ECALL_SIZE: usize = 4;

/// `scause` of an environment call from U-mode (exception 8).
const SCAUSE_USER_ECALL: usize = 8;

impl UserContext {
    /// A context that starts at `entry` with the stack pointer at `stack_top`, every other
    /// register zero and the floating-point unit clean.
    pub fn new(entry: usize, stack_top: usize) -> UserContext {
        let mut registers = [0; 32];
        registers[reg::SP] = stack_top;
        UserContext {
            registers,
            pc: entry,
            sstatus: 0,
            scause: 0,
            stval: 0,
            float_registers: [0; 32],
            fcsr: 0,
            kernel: [0; 16],
            kernel_float: [0; 12],
            float_used: 0,
            kernel_fs: 0,
        }
    }

    /// Runs U-mode from the saved state until it traps; returns with interrupts off and
    /// the trap recorded ([`Self::cause`], [`Self::fault_report`]).
    ///
    /// The page table active on this hart decides what the user code can reach (only
    /// pages with the U bit); the caller activates the process's before calling this.
    pub fn run(&mut self) {
        csr::disable_interrupts();
        let kernel = csr::sstatus();
        self.kernel_fs = kernel & SSTATUS_FS_MASK;
        loop {
            // U-mode after sret, interrupts on there (and off again when it traps), no
            // supervisor access to user memory, the floating-point unit on only for a
            // context that uses it (module documentation). The rest stays as it is.
            let floating_point = if self.float_used != 0 { SSTATUS_FS_DIRTY } else { 0 };
            self.sstatus = (kernel & !(SSTATUS_SPP | SSTATUS_SIE | SSTATUS_SUM | SSTATUS_FS_MASK)) | SSTATUS_SPIE | floating_point;
            // Interrupts are off, so nothing traps between setting sscratch and sret; the
            // entry code saves, and the trap vector restores, every callee-saved register,
            // sp, gp, tp (and fs0–fs11 whenever U-mode may touch them).
            // SAFETY: `self` is live and exclusively borrowed for the whole call (the vector
            // writes it only until `run` returns); the sstatus above makes `sret` enter
            // U-mode, where the code can touch only user pages.
            unsafe { spindle_enter_user(self) };
            // The first floating-point instruction of a context without the unit: turn it
            // on (registers zero at first) and run the instruction again. An instruction
            // illegal for another reason traps again and is reported then.
            if self.float_used == 0 && self.cause() == TrapCause::Exception(super::trap::Exception::IllegalInstruction) {
                self.float_used = 1;
                continue;
            }
            return;
        }
    }


    /// Sets up a call into user code: the next [`Self::run`] starts at `entry` with the
    /// stack pointer at `stack_top` and `arguments` in `a0`..`a7` (upcalls and
    /// cross-address-space calls reuse one context per target this way; the other
    /// registers keep the target's own earlier values).
    pub fn prepare_call<const N: usize>(&mut self, entry: usize, stack_top: usize, arguments: [usize; N]) {
        const { assert!(N <= 8, "a call passes at most eight arguments, in a0..a7") };
        self.pc = entry;
        self.registers[reg::SP] = stack_top;
        // A return from the entry (which must end with a system call) jumps to 0 and
        // faults instead of running stale code.
        self.registers[reg::RA] = 0;
        self.registers[reg::A0..reg::A0 + N].copy_from_slice(&arguments);
    }

    /// Whether U-mode last trapped by making system call `number` (an `ecall` with
    /// `number` in `a7`): the one test a migrating call's loop makes before decoding the
    /// trap, for the call that ends it.
    #[inline]
    pub fn made_system_call(&self, number: usize) -> bool {
        self.scause == SCAUSE_USER_ECALL && self.registers[reg::A7] == number
    }

    /// The first `N` argument registers, `a0`.. (`N` at most 8).
    #[inline]
    pub fn arguments<const N: usize>(&self) -> [usize; N] {
        const { assert!(N <= 8, "there are eight argument registers, a0..a7") };
        let mut arguments = [0; N];
        arguments.copy_from_slice(&self.registers[reg::A0..reg::A0 + N]);
        arguments
    }

    /// Why U-mode last trapped.
    pub fn cause(&self) -> TrapCause {
        TrapCause::from_scause(self.scause)
    }

    /// The last trap described as a fault (cause, address or value, pc).
    pub fn fault_report(&self) -> FaultReport {
        FaultReport { cause: self.cause(), scause: self.scause, stval: self.stval, pc: self.pc, stack_overflow: false }
    }

    /// User register `x<number>` (0 for `x0` and out-of-range numbers).
    pub fn register(&self, number: usize) -> usize {
        if number == 0 { 0 } else { self.registers.get(number).copied().unwrap_or(0) }
    }

    /// Sets user register `x<number>` (writes to `x0` are ignored).
    pub fn set_register(&mut self, number: usize, value: usize) {
        if number != 0
            && let Some(register) = self.registers.get_mut(number)
        {
            *register = value;
        }
    }

    /// Where U-mode resumes.
    pub fn pc(&self) -> usize {
        self.pc
    }

    /// Resumes after the `ecall` that trapped (for system calls that return).
    pub fn skip_ecall(&mut self) {
        self.pc = self.pc.wrapping_add(ECALL_SIZE);
    }
}

impl fmt::Debug for UserContext {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("UserContext")
            .field("pc", &format_args!("{:#x}", self.pc))
            .field("sp", &format_args!("{:#x}", self.registers[reg::SP]))
            .field("scause", &format_args!("{:#x}", self.scause))
            .field("stval", &format_args!("{:#x}", self.stval))
            .finish_non_exhaustive()
    }
}
