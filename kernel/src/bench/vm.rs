//! Virtual-memory rows (group `vm`, SPIN Table 4): the program `vmtest` measures Appel &
//! Li's primitives from user space and prints its own `bench row vm …` lines — `fault` (a
//! demand-zero fault), `dirty`, `prot1`, `prot100`, `unprot100` once, and `trap`, `appel1`,
//! `appel2` with the protection faults delivered to `pager_fill` in each technology
//! (`builtin` and `native` are in-kernel extensions, `user` an upcall into its server
//! process); this harness starts the runs and waits.

use crate::ext::Preference;
use crate::proc::{self, Grants, Parent};

/// Runs `command_line` with `grants` and waits; reports a failure on the console.
fn run_program(command_line: &str, grants: Grants) {
    let outcome = proc::spawn(command_line, Parent::Kernel, grants)
        .map_err(|error| alloc::format!("{error}"))
        .and_then(|process| proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}")));
    match outcome {
        Ok(status) if status.is_success() => {}
        Ok(status) => crate::println!("bench: {command_line} {status}; its rows are withheld or incomplete"),
        Err(error) => crate::println!("bench: {command_line} could not run: {error}"),
    }
}

/// Runs the `vm` group.
pub fn run() {
    run_program("vmtest bench", Grants::NONE);
    let Ok(loader) = Grants::from_spawn_flags(spindle_abi::syscall::SPAWN_EXTENSION_LOADER) else { return };
    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        run_program(&alloc::format!("vmtest bench-trap {} {}", preference as usize, preference.label()), loader);
    }
}
