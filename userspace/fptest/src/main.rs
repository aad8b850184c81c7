//! `fptest [SEED [YIELDS]]`: checks that the floating-point registers are the process's
//! own. The kernel switches them lazily (docs/user-space.md, "Floating point"): a process
//! starts with the unit off, and its first floating-point instruction turns it on with
//! every register zero.
//!
//! 1. Reads `f0`..`f31` and `fcsr` — its first floating-point instructions — and checks
//!    that all are zero: nothing of the kernel's or another process's state shows through.
//! 2. Loads a pattern made from SEED (default 1) into all 32 registers and `fcsr`, makes
//!    YIELDS (default 64) `yield` system calls in a loop that touches no floating-point
//!    register, then reads them back and checks every bit. Two of these running together
//!    with different seeds switch between each other on every yield.
//!
//! Prints one line and exits 0, or prints what differed and exits 1.
//!
//! The register accesses need inline assembly: the one place this crate allows `unsafe`
//! ([`raw`]).

#![no_std]
#![no_main]
#![deny(unsafe_code)]

use spindle_runtime::{Arguments, arch, println};

spindle_runtime::entry!(main);

fn main(arguments: &Arguments) -> i32 {
    let pid = arch::getpid();
    let seed: u64 = arguments.get(0).and_then(|word| word.parse().ok()).unwrap_or(1);
    let yields: usize = arguments.get(1).and_then(|word| word.parse().ok()).unwrap_or(64);
    let (fresh, fresh_fcsr) = raw::read_all();
    if let Some(index) = fresh.iter().position(|word| *word != 0) {
        println!("fptest: pid {pid}: a fresh process found f{index} = {:#x} (every register must start zero)", fresh[index]);
        return 1;
    }
    if fresh_fcsr != 0 {
        println!("fptest: pid {pid}: a fresh process found fcsr = {fresh_fcsr:#x} (must start zero)");
        return 1;
    }
    let pattern: [u64; 32] = core::array::from_fn(|index| (seed.wrapping_add(1)).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(index as u32) ^ index as u64);
    // fflags (bits 0..5) and a valid rounding mode (0..=4) in bits 5..8.
    let fcsr = (seed & 0x1f) | ((seed % 5) << 5);
    let (held, held_fcsr) = raw::hold_across_yields(&pattern, fcsr, yields.max(1));
    let mut wrong = 0;
    for (index, (want, got)) in pattern.iter().zip(held.iter()).enumerate() {
        if want != got {
            println!("fptest: pid {pid}: f{index} is {got:#x} after {yields} yields, was set to {want:#x}");
            wrong += 1;
        }
    }
    if held_fcsr != fcsr {
        println!("fptest: pid {pid}: fcsr is {held_fcsr:#x} after {yields} yields, was set to {fcsr:#x}");
        wrong += 1;
    }
    if wrong != 0 {
        return 1;
    }
    println!("fptest: pid {pid}: started with zero f-registers; all 32 and fcsr (seed {seed}) held across {yields} yields");
    0
}

#[allow(unsafe_code)]
mod raw {
    use core::arch::asm;

    /// `f0`..`f31` (their bits) and `fcsr`.
    pub fn read_all() -> ([u64; 32], u64) {
        let mut registers = [0u64; 32];
        let fcsr: u64;
        // SAFETY: stores 32 doublewords into `registers`, which is 256 bytes and writable;
        // reads fcsr. Nothing else is touched.
        unsafe {
            asm!(
                "fsd f0, 0({r})", "fsd f1, 8({r})", "fsd f2, 16({r})", "fsd f3, 24({r})",
                "fsd f4, 32({r})", "fsd f5, 40({r})", "fsd f6, 48({r})", "fsd f7, 56({r})",
                "fsd f8, 64({r})", "fsd f9, 72({r})", "fsd f10, 80({r})", "fsd f11, 88({r})",
                "fsd f12, 96({r})", "fsd f13, 104({r})", "fsd f14, 112({r})", "fsd f15, 120({r})",
                "fsd f16, 128({r})", "fsd f17, 136({r})", "fsd f18, 144({r})", "fsd f19, 152({r})",
                "fsd f20, 160({r})", "fsd f21, 168({r})", "fsd f22, 176({r})", "fsd f23, 184({r})",
                "fsd f24, 192({r})", "fsd f25, 200({r})", "fsd f26, 208({r})", "fsd f27, 216({r})",
                "fsd f28, 224({r})", "fsd f29, 232({r})", "fsd f30, 240({r})", "fsd f31, 248({r})",
                "frcsr {fcsr}",
                r = in(reg) registers.as_mut_ptr(),
                fcsr = out(reg) fcsr,
                options(nostack),
            );
        }
        (registers, fcsr)
    }

    /// Loads `pattern` into `f0`..`f31` and `fcsr` into fcsr, makes `yields` (≥ 1) `yield`
    /// system calls, then returns what the registers hold.
    pub fn hold_across_yields(pattern: &[u64; 32], fcsr: u64, yields: usize) -> ([u64; 32], u64) {
        let mut registers = [0u64; 32];
        let held_fcsr: u64;
        // SAFETY: loads 32 doublewords from `pattern` (256 readable bytes) and stores 32
        // into `registers` (256 writable bytes); the system call (`yield`, number 2) takes
        // no arguments and returns in a0/a1, which are declared clobbered with a7; every
        // f-register is declared clobbered.
        unsafe {
            asm!(
                "fld f0, 0({p})", "fld f1, 8({p})", "fld f2, 16({p})", "fld f3, 24({p})",
                "fld f4, 32({p})", "fld f5, 40({p})", "fld f6, 48({p})", "fld f7, 56({p})",
                "fld f8, 64({p})", "fld f9, 72({p})", "fld f10, 80({p})", "fld f11, 88({p})",
                "fld f12, 96({p})", "fld f13, 104({p})", "fld f14, 112({p})", "fld f15, 120({p})",
                "fld f16, 128({p})", "fld f17, 136({p})", "fld f18, 144({p})", "fld f19, 152({p})",
                "fld f20, 160({p})", "fld f21, 168({p})", "fld f22, 176({p})", "fld f23, 184({p})",
                "fld f24, 192({p})", "fld f25, 200({p})", "fld f26, 208({p})", "fld f27, 216({p})",
                "fld f28, 224({p})", "fld f29, 232({p})", "fld f30, 240({p})", "fld f31, 248({p})",
                "fscsr {fcsr}",
                "2:",
                "li a7, 2",
                "ecall",
                "addi {n}, {n}, -1",
                "bnez {n}, 2b",
                "fsd f0, 0({r})", "fsd f1, 8({r})", "fsd f2, 16({r})", "fsd f3, 24({r})",
                "fsd f4, 32({r})", "fsd f5, 40({r})", "fsd f6, 48({r})", "fsd f7, 56({r})",
                "fsd f8, 64({r})", "fsd f9, 72({r})", "fsd f10, 80({r})", "fsd f11, 88({r})",
                "fsd f12, 96({r})", "fsd f13, 104({r})", "fsd f14, 112({r})", "fsd f15, 120({r})",
                "fsd f16, 128({r})", "fsd f17, 136({r})", "fsd f18, 144({r})", "fsd f19, 152({r})",
                "fsd f20, 160({r})", "fsd f21, 168({r})", "fsd f22, 176({r})", "fsd f23, 184({r})",
                "fsd f24, 192({r})", "fsd f25, 200({r})", "fsd f26, 208({r})", "fsd f27, 216({r})",
                "fsd f28, 224({r})", "fsd f29, 232({r})", "fsd f30, 240({r})", "fsd f31, 248({r})",
                "frcsr {fcsr}",
                p = in(reg) pattern.as_ptr(),
                r = in(reg) registers.as_mut_ptr(),
                n = inout(reg) yields => _,
                fcsr = inout(reg) fcsr => held_fcsr,
                out("a0") _, out("a1") _, out("a7") _,
                out("f0") _, out("f1") _, out("f2") _, out("f3") _, out("f4") _, out("f5") _, out("f6") _, out("f7") _,
                out("f8") _, out("f9") _, out("f10") _, out("f11") _, out("f12") _, out("f13") _, out("f14") _, out("f15") _,
                out("f16") _, out("f17") _, out("f18") _, out("f19") _, out("f20") _, out("f21") _, out("f22") _, out("f23") _,
                out("f24") _, out("f25") _, out("f26") _, out("f27") _, out("f28") _, out("f29") _, out("f30") _, out("f31") _,
                options(nostack),
            );
        }
        (registers, held_fcsr)
    }
}
