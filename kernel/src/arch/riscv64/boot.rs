//! Boot entry: the first instructions the kernel runs, per-hart boot stacks and BSS
//! clearing.
//!
//! OpenSBI enters `_start` in S-mode with the MMU off, a0 = hart id and a1 = the
//! device-tree address. Before any Rust code runs the entry code clears `.bss`, picks
//! this hart's boot stack, points `tp` at the hart's [`HartLocal`](super::hart::HartLocal)
//! and installs the trap vector, so that even the first fault is reported, not a silent
//! reset. Only the boot hart enters here; secondary harts will get their own entry when
//! SMP is brought up.

use super::PAGE_SIZE;
use super::hart::{HartLocal, MAX_HARTS};

/// Size of each hart's boot stack (release builds run `wasmi` fine with 256 KiB).
pub const BOOT_STACK_SIZE: usize = 256 * 1024;
/// A boot-stack slot: an unmapped guard page, then the stack growing down towards it.
pub const BOOT_STACK_SLOT: usize = PAGE_SIZE + BOOT_STACK_SIZE;

core::arch::global_asm!(
    ".section .text.entry",
    // Module-level assembly does not see the target's extensions; `mul` needs M.
    ".option arch, +m",
    ".globl _start",
    "_start:",
    // Harts beyond MAX_HARTS have no stack: park them.
    "    li t0, {max_harts}",
    "    bgeu a0, t0, 3f",
    // Clear .bss (registers only: the stack itself lives in .stacks, which is not cleared).
    "    la t0, __bss_start",
    "    la t1, __bss_end",
    "1:  bgeu t0, t1, 2f",
    "    sd zero, 0(t0)",
    "    addi t0, t0, 8",
    "    j 1b",
    "2:",
    // sp = __stacks_start + (hart + 1) * slot: the top of this hart's slot.
    "    la sp, __stacks_start",
    "    li t0, {slot}",
    "    addi t1, a0, 1",
    "    mul t0, t0, t1",
    "    add sp, sp, t0",
    // tp = &HART_LOCALS[hart].
    "    la tp, HART_LOCALS",
    "    li t0, {hart_local_size}",
    "    mul t0, t0, a0",
    "    add tp, tp, t0",
    // Trap vector before anything can fault; sscratch = 0 means 'trap came from the kernel'.
    "    la t0, trap_vector",
    "    csrw stvec, t0",
    "    csrw sscratch, zero",
    "    call {kernel_main}",
    "3:  wfi",
    "    j 3b",
    max_harts = const MAX_HARTS,
    slot = const BOOT_STACK_SLOT,
    hart_local_size = const core::mem::size_of::<HartLocal>(),
    kernel_main = sym crate::kernel_main,
);

unsafe extern "C" {
    static __stacks_start: u8;
    static __stacks_end: u8;
}

/// Address range of the boot-stack region (guard pages included).
pub fn boot_stacks_region() -> (usize, usize) {
    ((&raw const __stacks_start) as usize, (&raw const __stacks_end) as usize)
}

/// Lowest usable address of `hart`'s boot stack (just above its guard page).
pub fn boot_stack_bottom(hart: usize) -> usize {
    boot_stacks_region().0 + hart * BOOT_STACK_SLOT + PAGE_SIZE
}

/// Guard-page address ranges of every boot stack (to be left unmapped).
pub fn boot_stack_guard(hart: usize) -> (usize, usize) {
    let start = boot_stacks_region().0 + hart * BOOT_STACK_SLOT;
    (start, start + PAGE_SIZE)
}

/// Checks that the linker script reserved exactly what this module expects.
pub fn check_layout() -> Result<(), &'static str> {
    let (start, end) = boot_stacks_region();
    if end - start != MAX_HARTS * BOOT_STACK_SLOT {
        return Err("kernel.ld .stacks size does not match MAX_HARTS * BOOT_STACK_SLOT");
    }
    Ok(())
}
