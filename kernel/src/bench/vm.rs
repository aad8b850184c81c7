//! Virtual-memory rows (group `vm`, SPIN Table 4): the program `vmtest` measures Appel &
//! Li's primitives from user space and prints its own `bench row vm …` lines — `fault` (a
//! demand-zero fault), `dirty`, `prot1`, `prot100`, `unprot100` once, and `trap`, `appel1`,
//! `appel2` with the protection faults delivered to `pager_fill` in each technology
//! (`builtin` and `native` are in-kernel extensions, `user` an upcall into its server
//! process); this harness starts the runs and waits.
//!
//! Then reclaim on real pages (Small & Seltzer's hot list, §5.1, on the translation
//! service's clock): `vmtest hotscan` under a memory limit, the HP 97560 model pricing the
//! swap transfers, once with the clock alone and once with the `hotlist` graft on
//! `mm.Reclaim` in each technology, printed as
//! `bench policies reclaim <policy> <technology> <rounds> <elapsed_ns> <page_ins>
//! <page_outs> <swap_writes> <raises> <raise_instructions>` (xtask's `policies` tables).

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

/// Hot pages of the reclaim workload (named in hot-list slots with `vm_hot`).
const HOT_PAGES: usize = 8;
/// Pages of its scanned region.
const SCAN_PAGES: usize = 96;
/// Rounds (each: the hot pages, then 2 × the limit scanned pages).
const ROUNDS: usize = 6;
/// Its memory limit in frames.
const LIMIT: usize = 24;

/// One reclaim run: `vmtest hotscan` in `mode` (`plain` or `hot`), its line printed.
fn reclaim_run(policy: &str, technology: &str, mode: &str) {
    let before = crate::services::vm::stats();
    let start = crate::time::now_ns();
    run_program(&alloc::format!("vmtest hotscan {HOT_PAGES} {SCAN_PAGES} {ROUNDS} {LIMIT} {mode}"), Grants::NONE);
    let elapsed = crate::time::now_ns() - start;
    let after = crate::services::vm::stats();
    crate::println!(
        "bench policies reclaim {policy} {technology} {ROUNDS} {elapsed} {} {} {} {} {}",
        after.page_ins - before.page_ins,
        after.page_outs - before.page_outs,
        after.swap_writes - before.swap_writes,
        after.reclaim_raises - before.reclaim_raises,
        after.reclaim_instructions.wrapping_sub(before.reclaim_instructions)
    );
}

/// The reclaim runs: the clock alone, then the hot-list graft in every technology.
fn reclaim() {
    reclaim_run("clock", "none", "plain");
    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        let technology = crate::bench::Graft::Extension(preference).name();
        if let Err(error) = crate::ext::load("hotlist", preference) {
            crate::println!("bench: hotlist ({technology}) could not load: {error}");
            continue;
        }
        reclaim_run("hotlist", technology, "hot");
        let server = crate::ext::user::serving_pid("hotlist");
        if let Err(error) = crate::ext::unload("hotlist") {
            crate::println!("bench: hotlist ({technology}) could not unload: {error}");
        }
        if let Some(pid) = server {
            proc::wait_until_reaped(pid, 200);
        }
        crate::events::quiescent();
        crate::events::reclaim();
    }
}

/// Runs the `vm` group; the reclaim runs only with `io` (they page to the disk).
pub fn run(io: bool) {
    run_program("vmtest bench", Grants::NONE);
    let Ok(loader) = Grants::from_spawn_flags(spindle_abi::syscall::SPAWN_EXTENSION_LOADER) else { return };
    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        run_program(&alloc::format!("vmtest bench-trap {} {}", preference as usize, preference.label()), loader);
    }
    if io {
        reclaim();
    }
}
