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

    /// `$op f0`..`f31` (`fsd` or `fld`) at the 256 bytes whose address is operand `$base`.
    macro_rules! all_f {
        ($op:literal, $base:literal) => {
            concat!(
            $op, " f0, 0(", $base, ")\n", $op, " f1, 8(", $base, ")\n",
            $op, " f2, 16(", $base, ")\n", $op, " f3, 24(", $base, ")\n",
            $op, " f4, 32(", $base, ")\n", $op, " f5, 40(", $base, ")\n",
            $op, " f6, 48(", $base, ")\n", $op, " f7, 56(", $base, ")\n",
            $op, " f8, 64(", $base, ")\n", $op, " f9, 72(", $base, ")\n",
            $op, " f10, 80(", $base, ")\n", $op, " f11, 88(", $base, ")\n",
            $op, " f12, 96(", $base, ")\n", $op, " f13, 104(", $base, ")\n",
            $op, " f14, 112(", $base, ")\n", $op, " f15, 120(", $base, ")\n",
            $op, " f16, 128(", $base, ")\n", $op, " f17, 136(", $base, ")\n",
            $op, " f18, 144(", $base, ")\n", $op, " f19, 152(", $base, ")\n",
            $op, " f20, 160(", $base, ")\n", $op, " f21, 168(", $base, ")\n",
            $op, " f22, 176(", $base, ")\n", $op, " f23, 184(", $base, ")\n",
            $op, " f24, 192(", $base, ")\n", $op, " f25, 200(", $base, ")\n",
            $op, " f26, 208(", $base, ")\n", $op, " f27, 216(", $base, ")\n",
            $op, " f28, 224(", $base, ")\n", $op, " f29, 232(", $base, ")\n",
            $op, " f30, 240(", $base, ")\n", $op, " f31, 248(", $base, ")\n",
            )
        };
    }

    /// `f0`..`f31` (their bits) and `fcsr`.
    pub fn read_all() -> ([u64; 32], u64) {
        let mut registers = [0u64; 32];
        let fcsr: u64;
        // SAFETY: stores 32 doublewords into `registers`, which is 256 bytes and writable;
        // reads fcsr. Nothing else is touched.
        unsafe {
            asm!(
                all_f!("fsd", "{r}"),
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
                all_f!("fld", "{p}"),
                "fscsr {fcsr}",
                "2:",
                "li a7, 2",
                "ecall",
                "addi {n}, {n}, -1",
                "bnez {n}, 2b",
                all_f!("fsd", "{r}"),
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
