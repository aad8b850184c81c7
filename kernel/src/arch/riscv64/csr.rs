//! Control and status registers, counters and a few privileged instructions, each
//! wrapped in a small safe function.

use core::arch::asm;

/// `sstatus.SIE`: supervisor interrupts enabled.
pub const SSTATUS_SIE: usize = 1 << 1;
/// `sstatus.SPIE`: interrupts were enabled before the trap.
pub const SSTATUS_SPIE: usize = 1 << 5;
/// `sstatus.SPP`: the trap came from S-mode.
pub const SSTATUS_SPP: usize = 1 << 8;
/// `sstatus.FS` field (floating-point unit state).
pub const SSTATUS_FS_MASK: usize = 3 << 13;
/// `sstatus.FS = Initial`: the FPU is on and clean.
pub const SSTATUS_FS_INITIAL: usize = 1 << 13;
/// `sstatus.FS = Dirty`: the FPU is on and its state may differ from the saved one.
pub const SSTATUS_FS_DIRTY: usize = 3 << 13;
/// `sstatus.SUM`: S-mode may access user pages.
pub const SSTATUS_SUM: usize = 1 << 18;
/// `scounteren` bits letting U-mode read `cycle` (CY), `time` (TM) and `instret` (IR).
const SCOUNTEREN_CYCLE_TIME_INSTRET: usize = 0b111;
/// The physical page number field of `satp`.
pub const SATP_PPN_MASK: usize = (1 << 44) - 1;
/// `sie.STIE`: supervisor timer interrupt enable.
pub const SIE_STIE: usize = 1 << 5;
/// `sie.SEIE`: supervisor external interrupt enable.
pub const SIE_SEIE: usize = 1 << 9;

macro_rules! read_csr {
    ($(#[$doc:meta])* $name:ident, $csr:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> usize {
            let value: usize;
            // SAFETY: reading this CSR has no side effects and is legal in S-mode.
            unsafe { asm!(concat!("csrr {}, ", $csr), out(reg) value, options(nomem, nostack)) };
            value
        }
    };
}

read_csr!(/// `sstatus`.
    sstatus, "sstatus");
read_csr!(/// `scause` of the current trap.
    scause, "scause");
read_csr!(/// `stval` of the current trap.
    stval, "stval");
read_csr!(/// `sepc` of the current trap.
    sepc, "sepc");
read_csr!(/// `satp` (address translation and protection).
    satp, "satp");
read_csr!(/// `time`: the platform timer (10 MHz on QEMU virt).
    time, "time");
read_csr!(/// `instret`: instructions retired by this hart (exact under QEMU `-icount`).
    instret, "instret");
read_csr!(/// `cycle`: cycles (equal to `instret` under QEMU `-icount shift=0`).
    cycle, "cycle");

/// Sets bits in `sstatus`.
#[inline(always)]
pub fn set_sstatus_bits(bits: usize) {
    // SAFETY: the callers in this module set only SIE/SUM/FS bits, which change interrupt
    // delivery, user-memory access and FPU state; none invalidates memory safety by itself.
    unsafe { asm!("csrs sstatus, {}", in(reg) bits, options(nostack)) };
}

/// Clears bits in `sstatus`.
#[inline(always)]
pub fn clear_sstatus_bits(bits: usize) {
    // SAFETY: the callers in this module clear only SIE/SUM/FS bits, which change interrupt
    // delivery, user-memory access and FPU state; none invalidates memory safety by itself.
    unsafe { asm!("csrc sstatus, {}", in(reg) bits, options(nostack)) };
}

/// Enables the FPU (`sstatus.FS = Initial`); required before `wasmi` or any float code.
pub fn enable_fpu() {
    clear_sstatus_bits(SSTATUS_FS_MASK);
    set_sstatus_bits(SSTATUS_FS_INITIAL);
}

/// Enables supervisor interrupts on this hart.
#[inline(always)]
pub fn enable_interrupts() {
    set_sstatus_bits(SSTATUS_SIE);
}

/// Disables supervisor interrupts on this hart and returns whether they were enabled.
#[inline(always)]
pub fn disable_interrupts() -> bool {
    let previous: usize;
    // SAFETY: atomically clears SIE; disabling interrupts cannot break memory safety.
    unsafe { asm!("csrrc {}, sstatus, {}", out(reg) previous, in(reg) SSTATUS_SIE, options(nostack)) };
    previous & SSTATUS_SIE != 0
}

/// Whether supervisor interrupts are enabled on this hart (false in a trap handler and
/// in sections run with interrupts off).
#[inline(always)]
pub fn interrupts_enabled() -> bool {
    sstatus() & SSTATUS_SIE != 0
}

/// Runs `f` with interrupts disabled on this hart, restoring the previous state after.
pub fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let were_enabled = disable_interrupts();
    let result = f();
    if were_enabled {
        enable_interrupts();
    }
    result
}

/// Enables the given bits of `sie` (interrupt sources).
pub fn enable_interrupt_sources(bits: usize) {
    // SAFETY: enabling interrupt sources only changes which interrupts are delivered.
    unsafe { asm!("csrs sie, {}", in(reg) bits, options(nostack)) };
}

/// Waits for an interrupt (returns immediately if one is pending).
#[inline(always)]
pub fn wait_for_interrupt() {
    // SAFETY: `wfi` is a hint that stalls until an interrupt is pending; no memory effects.
    unsafe { asm!("wfi", options(nomem, nostack)) };
}

/// Installs `root_ppn` as the Sv39 root page table (mode 8) and flushes the TLB.
///
/// # Safety
/// The page table must map the currently executing code, its stack and every address
/// the kernel will touch afterwards with the permissions it needs.
pub unsafe fn write_satp_sv39(root_ppn: usize) {
    const SATP_MODE_SV39: usize = 8 << 60;
    // SAFETY: the caller guarantees the new table maps everything the kernel uses.
    unsafe {
        asm!("csrw satp, {}", "sfence.vma", in(reg) SATP_MODE_SV39 | root_ppn, options(nostack));
    }
}

/// Lets U-mode read the `cycle`, `time` and `instret` counters (DESIGN.md §3: set
/// `scounteren` before user code reads counters; without it those reads trap).
pub fn enable_user_counters() {
    // SAFETY: `scounteren` only controls which counters U-mode may read; the counters
    // reveal nothing a process could not measure itself.
    unsafe { asm!("csrs scounteren, {}", in(reg) SCOUNTEREN_CYCLE_TIME_INSTRET, options(nostack)) };
}

/// Flushes every TLB entry on this hart.
pub fn flush_tlb() {
    super::hart::current().tlb_flushes.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    // SAFETY: a full TLB flush only drops cached translations.
    unsafe { asm!("sfence.vma", options(nostack)) };
}

/// Synchronises the instruction stream with prior stores (after writing code).
pub fn fence_instructions() {
    // SAFETY: `fence.i` only orders instruction fetch after earlier stores.
    unsafe { asm!("fence.i", options(nostack)) };
}
