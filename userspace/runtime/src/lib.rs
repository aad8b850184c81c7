//! `spindle-runtime`: what every Spindle user program links — its entry point, panic
//! handler, `print!`/`println!`, command-line arguments and the system calls.
//!
//! A program is a `#![no_std]`, `#![no_main]`, `#![forbid(unsafe_code)]` binary crate:
//!
//! ```ignore
//! #![no_std]
//! #![no_main]
//! #![forbid(unsafe_code)]
//!
//! spindle_runtime::entry!(main);
//!
//! fn main(arguments: &spindle_runtime::Arguments) -> i32 {
//!     spindle_runtime::println!("hello, {}", arguments.get(0).unwrap_or("world"));
//!     0
//! }
//! ```
//!
//! [`entry!`] defines `_start`, where the kernel enters the program with the stack pointer
//! at the top of its stack (the kernel maps the stack; nothing is set up here). `_start`
//! calls [`start`], which fetches the command line, runs `main` and exits with its
//! status. A panic prints its message and exits with status
//! [`ExitStatus::PANIC`](spindle_abi::syscall::ExitStatus::PANIC) (101).
//!
//! The system calls are [`arch`]'s safe wrappers from `spindle_glue::user`; this
//! crate has no `unsafe`. The one `#[unsafe(no_mangle)]` a program needs comes from the
//! [`entry!`] macro, which the `unsafe_code` lint of the program does not see into.
//!
//! Built by `cargo xtask` for `riscv64gc-unknown-none-elf` with `userspace/user.ld`. On
//! other targets only the pure parts ([`Arguments`], [`io::LineBuffer`]) exist, so they
//! can be unit-tested on the host.
//!
//! Console input: [`input::LineReader`] reads edited, echoed lines (the pure editing
//! logic is [`line::LineEditor`]); [`input::with_listing`] fetches the kernel's text
//! listings whatever their length.
//!
//! Limitations: no heap allocator yet (programs use the stack and
//! [`arch::AnonymousRegion`]).

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

pub mod arguments;
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub mod input;
pub mod io;
pub mod line;

pub use arguments::Arguments;

/// The system calls (bare-metal RISC-V only): safe wrappers around `ecall`.
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub mod arch {
    pub use spindle_glue::user::*;
    pub use spindle_abi::syscall::{
        ACCESS_READ, ACCESS_WRITE, CONSOLE, Error, ExitStatus, KillCause, MAX_ANONYMOUS_BYTES, MAX_ANONYMOUS_REGIONS,
        MAX_COMMAND_LINE, MAX_MAP_LENGTH, MAX_NAME, MAX_READ_LENGTH, MAX_SLEEP_TICKS, MAX_WRITE_LENGTH, PAGE_SIZE,
        SPAWN_CONSOLE, SPAWN_EXTENSION_LOADER, Syscall, Technology, VM_EXECUTE, VM_READ, VM_WRITE,
    };
    pub use spindle_abi::syscall::{DiskState, HwCounters};
    pub use spindle_abi::syscall::{FileStat, LOCK_READ, LOCK_WAIT, LOCK_WRITE, MAX_PATH, OPEN_APPEND, OPEN_CREATE, OPEN_READ, OPEN_TRUNCATE, OPEN_WRITE, SEEK_CURRENT, SEEK_END, SEEK_START};
    pub use spindle_abi::event::DiskQueueEntry;
}

/// Defines the program's entry point `_start`, which runs `$main` (a
/// `fn(&Arguments) -> i32`) and exits with the status it returns.
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        /// The program's entry point (the ELF entry): the kernel starts here.
        #[unsafe(no_mangle)]
        pub extern "C" fn _start() -> ! {
            $crate::start($main)
        }
    };
}

/// Runs `main` with the process's command line and exits with its status.
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub fn start(main: fn(&Arguments) -> i32) -> ! {
    let mut buffer = [0u8; spindle_abi::syscall::MAX_COMMAND_LINE];
    let length = arch::arguments(&mut buffer).unwrap_or(0).min(buffer.len());
    // The kernel accepts only UTF-8 command lines at spawn.
    let line = core::str::from_utf8(&buffer[..length]).unwrap_or("");
    let status = main(&Arguments::new(line));
    arch::exit(status)
}

#[cfg(all(target_arch = "riscv64", target_os = "none"))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    match info.location() {
        Some(location) => println!("panic at {}:{}: {}", location.file(), location.line(), info.message()),
        None => println!("panic: {}", info.message()),
    }
    arch::exit(spindle_abi::syscall::ExitStatus::PANIC)
}
