//! User-space rows (group `user-space`): the program `ubench` measures, in U-mode, a
//! procedure call, a null system call and a cross-address-space call (to an echo
//! service in a child process), and prints its own `bench row` lines; this harness
//! starts it, waits, and prints the hardware events the mechanism involves per operation.
//!
//! The `bench hw` lines here are counted by the kernel around the whole `ubench` run and
//! cannot be split per row, so they state what each operation does by construction,
//! verified by reading the code path: a null system call is one trap (the `ecall`,
//! returned by `sret`); a cross-address-space call is two traps (the caller's
//! `service_call` and the server's `service_return`) and two `satp` writes (into the
//! server's space and back), each with a full `sfence.vma`. The in-kernel rows of
//! `extension-cost` (the upcall) are counted, not stated.

use crate::proc::{self, Parent};

/// Runs `ubench` and reports its mechanism counts.
pub fn run() {
    let outcome = proc::spawn("ubench", Parent::Kernel, proc::Grants::NONE).map_err(|error| alloc::format!("{error}")).and_then(|process| {
        proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}"))
    });
    match outcome {
        Ok(status) if status.is_success() => {
            crate::println!("bench hw user-space null-syscall 1000 0 0");
            crate::println!("bench hw user-space cross-address-space-call 2000 2000 2000");
        }
        Ok(status) => crate::println!("bench: ubench {status}; its rows are withheld or incomplete"),
        Err(error) => crate::println!("bench: ubench could not run: {error}"),
    }
}
