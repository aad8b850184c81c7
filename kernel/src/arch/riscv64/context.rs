//! Strand context switch: saves the callee-saved integer and floating-point registers,
//! `ra` and `sp` of the current strand and loads another's.
//!
//! Caller-saved registers need no saving: `switch_context` is an ordinary call. A
//! strand preempted by the timer is suspended inside the trap handler, whose frame on
//! the strand's stack holds every register of the interrupted code.

/// Saved registers of a suspended strand.
#[repr(C)]
#[derive(Default, Debug)]
pub struct Context {
    /// ra, sp, s0..s11.
    integer: [usize; 14],
    /// fs0..fs11.
    float: [u64; 12],
}

impl Context {
    /// A context that starts at `strand_start` on `stack_top` with `argument` in s0;
    /// `strand_start` calls `entry(argument)`.
    pub fn new_start(stack_top: usize, entry: extern "C" fn(usize) -> !, argument: usize) -> Context {
        let mut context = Context::default();
        context.integer[0] = strand_start as *const () as usize;
        context.integer[1] = stack_top;
        context.integer[2] = argument;
        context.integer[3] = entry as *const () as usize;
        context
    }
}

core::arch::global_asm!(
    ".section .text",
    // Module-level assembly does not see the target's extensions; fsd/fld need D.
    ".option arch, +d",
    ".balign 4",
    // void switch_context(Context *from, const Context *to, usize *from_running)
    ".globl switch_context",
    "switch_context:",
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
    "    fsd fs0, 14*8(a0)",
    "    fsd fs1, 15*8(a0)",
    "    fsd fs2, 16*8(a0)",
    "    fsd fs3, 17*8(a0)",
    "    fsd fs4, 18*8(a0)",
    "    fsd fs5, 19*8(a0)",
    "    fsd fs6, 20*8(a0)",
    "    fsd fs7, 21*8(a0)",
    "    fsd fs8, 22*8(a0)",
    "    fsd fs9, 23*8(a0)",
    "    fsd fs10, 24*8(a0)",
    "    fsd fs11, 25*8(a0)",
    // The old strand's registers are saved: another hart may now resume it.
    "    fence rw, w",
    "    sd zero, 0(a2)",
    "    ld ra, 0*8(a1)",
    "    ld sp, 1*8(a1)",
    "    ld s0, 2*8(a1)",
    "    ld s1, 3*8(a1)",
    "    ld s2, 4*8(a1)",
    "    ld s3, 5*8(a1)",
    "    ld s4, 6*8(a1)",
    "    ld s5, 7*8(a1)",
    "    ld s6, 8*8(a1)",
    "    ld s7, 9*8(a1)",
    "    ld s8, 10*8(a1)",
    "    ld s9, 11*8(a1)",
    "    ld s10, 12*8(a1)",
    "    ld s11, 13*8(a1)",
    "    fld fs0, 14*8(a1)",
    "    fld fs1, 15*8(a1)",
    "    fld fs2, 16*8(a1)",
    "    fld fs3, 17*8(a1)",
    "    fld fs4, 18*8(a1)",
    "    fld fs5, 19*8(a1)",
    "    fld fs6, 20*8(a1)",
    "    fld fs7, 21*8(a1)",
    "    fld fs8, 22*8(a1)",
    "    fld fs9, 23*8(a1)",
    "    fld fs10, 24*8(a1)",
    "    fld fs11, 25*8(a1)",
    "    ret",
    // First code of a new strand: s0 = argument, s1 = entry.
    ".globl strand_start",
    "strand_start:",
    "    mv a0, s0",
    "    jr s1",
);

unsafe extern "C" {
    fn switch_context(from: *mut Context, to: *const Context, from_running: *mut usize);
    fn strand_start();
}

/// Saves the current registers into `from` and resumes `to`; returns when something
/// switches back to `from`. Stores 0 into `from_running` once `from` is fully saved.
///
/// # Safety
/// `to` must hold a context saved by this function or made by [`Context::new_start`],
/// whose stack is still mapped and not in use by any hart; `from` and `from_running`
/// must stay valid until the strand is resumed. Interrupts must be off.
pub unsafe fn switch(from: *mut Context, to: *const Context, from_running: *mut usize) {
    // SAFETY: forwarded from the caller; the assembly saves and restores exactly the
    // callee-saved registers, so the Rust ABI holds on both sides.
    unsafe { switch_context(from, to, from_running) }
}
