//! `fault [stack | panic | protect | illegal | load ADDRESS | store ADDRESS]`: misbehaves
//! on purpose, to show that the kernel contains it.
//!
//! - `stack` (default): recurses until the stack runs into its unmapped guard page — a
//!   store to an address the program does not own, in safe Rust. The kernel kills the
//!   process and reports the store page fault and the address.
//! - `panic`: panics; the runtime prints the message and exits with status 101.
//! - `protect`: maps a page, writes it (so the TLB may hold a writable translation),
//!   makes it read-only with `protect`, reads it back, then stores to it: the store must
//!   fault (the kernel rewrote the leaf and flushed the TLB).
//! - `illegal`: runs `unimp`, an illegal instruction. The process has not used the
//!   floating-point unit, so the kernel's first answer is to turn the unit on and retry
//!   (lazy switching); the instruction traps again and the process is killed with the
//!   illegal-instruction cause.
//! - `load ADDRESS` / `store ADDRESS` (hex with `0x`, or decimal): reads or writes one
//!   word at ADDRESS — kernel memory (no U bit), an unmapped page, or the program's own
//!   read-only text (W^X) all end the process with a page fault at ADDRESS.
//!
//! The raw access needs `unsafe`: it is the one place this crate allows it ([`raw`]).

#![no_std]
#![no_main]
#![deny(unsafe_code)]

use spindle_runtime::{Arguments, arch, println};

spindle_runtime::entry!(main);

fn main(arguments: &Arguments) -> i32 {
    let pid = arch::getpid();
    match (arguments.get(0).unwrap_or("stack"), arguments.get(1).and_then(parse_address)) {
        ("stack", _) => {
            println!("fault: pid {pid} overflows its stack");
            recurse(0) as i32
        }
        ("panic", _) => panic!("fault: a deliberate panic"),
        ("protect", _) => store_to_read_only(pid),
        ("illegal", _) => {
            println!("fault: pid {pid} runs an illegal instruction");
            raw::illegal();
            println!("fault: the illegal instruction completed");
            1
        }
        ("load", Some(address)) => {
            println!("fault: pid {pid} loads from {address:#x}");
            let value = raw::load(address);
            println!("fault: the load returned {value:#x}");
            1
        }
        ("store", Some(address)) => {
            println!("fault: pid {pid} stores to {address:#x}");
            raw::store(address);
            println!("fault: the store completed");
            1
        }
        _ => {
            println!("fault: usage: fault [stack | panic | protect | illegal | load ADDRESS | store ADDRESS]");
            2
        }
    }
}

/// The `protect` mode; returns only if something went wrong.
fn store_to_read_only(pid: usize) -> i32 {
    let Ok(mut region) = arch::AnonymousRegion::map(arch::PAGE_SIZE) else {
        println!("fault: map_anonymous failed");
        return 2;
    };
    region.as_mut_slice()[0] = 0x5a;
    if region.protect(arch::ACCESS_READ).is_err() {
        println!("fault: protect failed");
        return 2;
    }
    if region.as_slice()[0] != 0x5a {
        println!("fault: the read-only page lost its contents");
        return 2;
    }
    let address = region.address();
    println!("fault: pid {pid} stores to its read-only page at {address:#x}");
    raw::store(address);
    println!("fault: the store completed");
    1
}

fn parse_address(text: &str) -> Option<usize> {
    match text.strip_prefix("0x") {
        Some(hex) => usize::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Recurses without bound (the depth test only hides that from the compiler), storing a
/// frame on the stack each time.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    if core::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    let frame = core::hint::black_box([depth as u8; 256]);
    u64::from(frame[0]) + recurse(core::hint::black_box(depth + 1))
}

/// Accesses to arbitrary addresses: the only `unsafe` in this program.
#[allow(unsafe_code)]
mod raw {
    /// Reads the word at `address`.
    pub fn load(address: usize) -> u64 {
        // SAFETY: none in Rust's terms — this deliberately reads memory the program does
        // not own, so that the hardware refuses it and the kernel ends the process before
        // the value is used. `read_volatile` keeps the access from being optimised away.
        unsafe { (address as *const u64).read_volatile() }
    }

    /// Runs `unimp`, which no RISC-V hart executes.
    pub fn illegal() {
        // SAFETY: none in Rust's terms — the instruction is meant to trap, and the kernel
        // ends the process there; it touches no memory and no register.
        unsafe { core::arch::asm!("unimp", options(nomem, nostack)) }
    }

    /// Writes a word at `address`.
    pub fn store(address: usize) {
        // SAFETY: as for `load`: the store is meant to fault.
        unsafe { (address as *mut u64).write_volatile(0x5a5a_5a5a_5a5a_5a5a) }
    }
}
