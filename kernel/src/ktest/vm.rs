//! Tests of the translation service (`services::vm`, `proc::AddressSpace`'s `vm_map`
//! regions), driven by the user program `vmtest`: demand-zero (pages read zero, only touched
//! pages get frames, kernel copies fault a page in), kill causes, a managed region's pager
//! `pager_fill` in every technology, guards keeping two processes' regions apart, refused
//! answers, `vm.BadAddress` in every technology, and frame accounting.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_abi::event::{TranslationAnswer, TranslationRecord, VM_PAGE_NOT_PRESENT, VM_PROTECTION_FAULT};
use spindle_abi::syscall::{ExitStatus, KillCause, SPAWN_EXTENSION_LOADER};
use spindle_dispatch::{BindingSpec, HandlerFault, handler_fn};
use spindle_service_vm::KillCause as VmKill;

use super::{KernelTest, TestResult, text};
use crate::ensure;
use crate::ext::{self, Preference};
use crate::proc::{self, FaultKill, Grants, Parent, Process};
use crate::services::vm::{Stats, stats};

/// The tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "vm::demand_zero_maps_only_touched_pages", run: demand_zero_maps_only_touched_pages },
    KernelTest { name: "vm::bad_address_and_protection_kill_with_their_cause", run: bad_address_and_protection_kill_with_their_cause },
    KernelTest { name: "vm::managed_region_without_a_pager_is_killed", run: managed_region_without_a_pager_is_killed },
    KernelTest { name: "vm::pager_fill_in_every_technology", run: pager_fill_in_every_technology },
    KernelTest { name: "vm::guards_isolate_two_processes_regions", run: guards_isolate_two_processes_regions },
    KernelTest { name: "vm::assigned_bindings_see_only_their_space_and_region", run: assigned_bindings_see_only_their_space_and_region },
    KernelTest { name: "vm::bad_answers_are_rejected_and_the_default_applies", run: bad_answers_are_rejected_and_the_default_applies },
    KernelTest { name: "vm::bad_address_is_announced_in_every_technology", run: bad_address_is_announced_in_every_technology },
    KernelTest { name: "vm::appel_li_write_barrier_in_every_technology", run: appel_li_write_barrier_in_every_technology },
    KernelTest { name: "vm::system_calls_get_every_documented_error", run: system_calls_get_every_documented_error },
    KernelTest { name: "vm::protection_ranges_cross_a_leaf_table", run: protection_ranges_cross_a_leaf_table },
    KernelTest { name: "vm::in_kernel_handler_protects_through_kernel_functions", run: in_kernel_handler_protects_through_kernel_functions },
    KernelTest { name: "vm::benchmark_modes_run_and_trap_every_time", run: benchmark_modes_run_and_trap_every_time },
    KernelTest { name: "vm::frames_come_back_after_create_touch_exit", run: frames_come_back_after_create_touch_exit },
    KernelTest { name: "vm::checkpoint_client_in_every_technology", run: checkpoint_client_in_every_technology },
    KernelTest { name: "vm::pages_go_to_swap_and_come_back", run: pages_go_to_swap_and_come_back },
    KernelTest { name: "vm::memory_pressure_makes_a_process_page_itself", run: memory_pressure_makes_a_process_page_itself },
    KernelTest { name: "vm::memory_pressure_takes_an_idle_processs_pages", run: memory_pressure_takes_an_idle_processs_pages },
    KernelTest { name: "vm::a_read_of_a_page_in_transit_waits_for_its_write", run: a_read_of_a_page_in_transit_waits_for_its_write },
    KernelTest { name: "vm::allocate_event_grants_refuses_and_is_checked", run: allocate_event_grants_refuses_and_is_checked },
    KernelTest { name: "vm::hot_list_steers_reclaim_in_every_technology", run: hot_list_steers_reclaim_in_every_technology },
    KernelTest { name: "vm::bad_reclaim_answers_are_refused", run: bad_reclaim_answers_are_refused },
    KernelTest { name: "vm::scan_barrier_in_every_technology", run: scan_barrier_in_every_technology },
    KernelTest { name: "vm::image_pages_are_filled_on_first_touch", run: image_pages_are_filled_on_first_touch },
    KernelTest { name: "vm::image_pages_are_the_processs_own", run: image_pages_are_the_processs_own },
    KernelTest { name: "vm::a_running_programs_file_is_not_written", run: a_running_programs_file_is_not_written },
    KernelTest { name: "vm::allocate_event_is_asked_for_cache_buffers_and_arenas", run: allocate_event_is_asked_for_cache_buffers_and_arenas },
    KernelTest { name: "vm::memory_pressure_takes_the_caches_clean_buffers_first", run: memory_pressure_takes_the_caches_clean_buffers_first },
    KernelTest { name: "vm::swap_and_frames_come_back_after_exit_and_kill", run: swap_and_frames_come_back_after_exit_and_kill },
    KernelTest { name: "vm::random_calls_keep_every_word_and_leak_nothing", run: random_calls_keep_every_word_and_leak_nothing },
    KernelTest { name: "vm::random_processes_under_global_pressure", run: random_processes_under_global_pressure },
];

/// Every technology: built in, native, Wasm, user level.
const TECHNOLOGIES: [Preference; 4] = [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User];

/// The `Technology` number `vmtest` passes to `ext_load` for `preference`.
fn technology_number(preference: Preference) -> usize {
    preference as usize
}

/// Runs `command_line` from the kernel with `grants` and waits for it.
fn run_with(command_line: &str, grants: Grants) -> Result<(Arc<Process>, ExitStatus), String> {
    let process = proc::spawn(command_line, Parent::Kernel, grants).map_err(|error| format!("spawn {command_line:?}: {error}"))?;
    let status = proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for {command_line:?}: {error:?}"))?;
    Ok((process, status))
}

fn run(command_line: &str) -> Result<(Arc<Process>, ExitStatus), String> {
    run_with(command_line, Grants::NONE)
}

fn loader() -> Result<Grants, String> {
    Grants::from_spawn_flags(SPAWN_EXTENSION_LOADER).map_err(text)
}

/// Requires `command_line` to be killed by a page fault with `cause`.
fn ensure_killed(command_line: &str, cause: VmKill) -> TestResult {
    let (process, status) = run(command_line)?;
    ensure!(status == ExitStatus::Killed(KillCause::Fault), "{command_line:?} ended {status}, expected a kill by a fault");
    ensure!(process.fault_cause() == Some(FaultKill::Vm(cause)), "{command_line:?}: cause {:?}, expected {cause:?}", process.fault_cause());
    Ok(())
}

/// `after - before`, counter by counter.
fn delta(before: Stats, after: Stats) -> Stats {
    Stats {
        faults: after.faults - before.faults,
        demand_zero: after.demand_zero - before.demand_zero,
        pager_maps: after.pager_maps - before.pager_maps,
        protects: after.protects - before.protects,
        retries: after.retries - before.retries,
        raised: after.raised - before.raised,
        rejected: after.rejected - before.rejected,
        kills: after.kills - before.kills,
        frames_held: after.frames_held.wrapping_sub(before.frames_held),
        page_outs: after.page_outs - before.page_outs,
        swap_writes: after.swap_writes - before.swap_writes,
        page_ins: after.page_ins - before.page_ins,
        reclaim_raises: after.reclaim_raises - before.reclaim_raises,
        reclaim_rejected: after.reclaim_rejected - before.reclaim_rejected,
        reclaim_instructions: after.reclaim_instructions.wrapping_sub(before.reclaim_instructions),
        swap_used: after.swap_used.wrapping_sub(before.swap_used),
        pressure_page_outs: after.pressure_page_outs - before.pressure_page_outs,
        taken_from_others: after.taken_from_others - before.taken_from_others,
        transit_waits: after.transit_waits - before.transit_waits,
        stack_pages: after.stack_pages - before.stack_pages,
        allocate_raises: after.allocate_raises - before.allocate_raises,
        allocate_refused: after.allocate_refused - before.allocate_refused,
        allocate_rejected: after.allocate_rejected - before.allocate_rejected,
        image_pages: after.image_pages - before.image_pages,
        image_drops: after.image_drops - before.image_drops,
    }
}

/// Invocations of `owner`'s bindings on `event`.
fn invocations(event: &str, owner: &str) -> u64 {
    crate::events::dispatcher()
        .snapshot()
        .into_iter()
        .filter(|snapshot| snapshot.name == event)
        .flat_map(|snapshot| snapshot.bindings.into_iter())
        .filter(|binding| binding.owner == owner)
        .map(|binding| binding.counters.invocations)
        .sum()
}

/// Unloads `pager_fill` if it is loaded (and waits for a user-level server to end).
fn unload_pager() -> TestResult {
    unload_named("pager_fill")
}

/// Unloads extension `name` if it is loaded (and waits for a user-level server to end).
fn unload_named(name: &str) -> TestResult {
    if ext::find(name).is_none() {
        return Ok(());
    }
    let server = ext::user::serving_pid(name);
    ext::unload(name).map_err(text)?;
    if let Some(pid) = server {
        ensure!(proc::wait_until_reaped(pid, 200), "{name}'s serving process {pid} did not end after the unload");
    }
    crate::events::quiescent();
    crate::events::reclaim();
    Ok(())
}

/// Runs `test`, then unloads `pager_fill` and `scan_barrier` and forgets their assignments
/// whatever happened.
fn clean(test: impl FnOnce() -> TestResult) -> TestResult {
    let outcome = test();
    crate::services::vm::assign("pager_fill", None);
    crate::services::vm::assign("scan_barrier", None);
    let unloaded = unload_pager().and_then(|()| unload_named("scan_barrier"));
    outcome?;
    unloaded
}

/// `vmtest zero 16 5`: the five touched pages read zero and the untouched page the kernel
/// copied into is faulted in — six pages mapped, no more; of the 16-page stack only the
/// pages the program touched get frames, and so do its image's; all given back at exit.
fn demand_zero_maps_only_touched_pages() -> TestResult {
    let before = stats();
    let frames_before = crate::mm::frame::stats().allocated;
    let (process, status) = run("vmtest zero 16 5")?;
    let change = delta(before, stats());
    ensure!(status == ExitStatus::Exited(0), "vmtest zero ended {status} (fault {:?})", process.fault_cause());
    ensure!(change.demand_zero == 6, "{} pages were mapped for 5 touched pages and one kernel copy: {change:?}", change.demand_zero);
    // The stack is demand-zero too: the pages the program touched of its 16, counted apart.
    ensure!((1..16).contains(&change.stack_pages), "stack pages: {change:?}");
    // And its image's pages, filled on their first touch.
    ensure!(change.image_pages >= 1 && change.faults == 5 + change.stack_pages + change.image_pages && change.raised == 0 && change.kills == 0, "counters: {change:?}");
    ensure!(change.frames_held == 0, "{} frames still held after exit", change.frames_held as i64);
    ensure!(crate::services::vm::held_by(process.pid()) == 0, "the frame table still records frames of pid {}", process.pid());
    crate::sched::sleep_ticks(1);
    let frames_after = crate::mm::frame::stats().allocated;
    ensure!(frames_after == frames_before, "frames allocated {frames_before} -> {frames_after}");
    Ok(())
}

/// A load from the guard page after a region (no region) and a store to a read-only
/// region end the process with those causes.
fn bad_address_and_protection_kill_with_their_cause() -> TestResult {
    ensure_killed("vmtest bad", VmKill::BadAddress)?;
    ensure_killed("vmtest readonly", VmKill::ProtectionViolation)?;
    // Outside the `vm_map` regions the old checks still hold: a store to the program's
    // own text is a protection violation.
    let (process, status) = run("fault store 0x1000000000")?;
    ensure!(status == ExitStatus::Killed(KillCause::Fault), "fault store ended {status}");
    ensure!(process.fault_cause().is_some(), "no cause recorded for a store fault");
    Ok(())
}

/// A managed region without a pager: the first touch kills the process (no pager).
fn managed_region_without_a_pager_is_killed() -> TestResult {
    let before = stats();
    ensure_killed("vmtest managed 2 none 0", VmKill::NoPager)?;
    let change = delta(before, stats());
    ensure!(change.demand_zero == 0 && change.pager_maps == 0 && change.kills == 1, "counters: {change:?}");
    Ok(())
}

/// `pager_fill`, loaded by the program itself in each technology, supplies every page of
/// its managed region (the program checks each page's first word).
fn pager_fill_in_every_technology() -> TestResult {
    for preference in TECHNOLOGIES {
        clean(|| {
            let before = stats();
            let command_line = format!("vmtest managed 4 pager_fill {}", technology_number(preference));
            let (process, status) = run_with(&command_line, loader()?)?;
            let change = delta(before, stats());
            ensure!(status == ExitStatus::Exited(0), "{} : {command_line:?} ended {status} (fault {:?})", preference.label(), process.fault_cause());
            ensure!(change.pager_maps == 4 && change.raised == 4 && change.rejected == 0, "{}: counters {change:?}", preference.label());
            // A user-level pager's server faults its own stack and heap in (demand-zero).
            let server_pages = if preference == Preference::User { change.demand_zero } else { 0 };
            ensure!(change.demand_zero == server_pages && change.frames_held == 0, "{}: counters {change:?}", preference.label());
            Ok(())
        })?;
    }
    Ok(())
}

/// Process A's region is assigned to `pager_fill`; process B's managed region, faulting
/// while `pager_fill` is still loaded, is not served (the imposed guards name A's space
/// and region), so B is killed for want of a pager — in every technology. And a name
/// assigned to one space cannot be taken by another (`Busy`) until the first is gone.
fn guards_isolate_two_processes_regions() -> TestResult {
    // A name assigned to one address space's region cannot be taken by another's until the
    // first is gone.
    let (first, second) = (u64::MAX - 1, u64::MAX - 2);
    crate::services::vm::assign_for_space("test.vm.owner", first, 1).map_err(text)?;
    let taken = crate::services::vm::assign_for_space("test.vm.owner", second, 1);
    crate::services::vm::forget_space(first);
    let after = crate::services::vm::assign_for_space("test.vm.owner", second, 1);
    crate::services::vm::forget_space(second);
    ensure!(taken == Err(spindle_abi::syscall::Error::Busy) && after.is_ok(), "another space took the name: {taken:?}, after the first went: {after:?}");
    for preference in TECHNOLOGIES {
        clean(|| {
            let command_line = format!("vmtest managed 3 pager_fill {} keep", technology_number(preference));
            let (first, status) = run_with(&command_line, loader()?)?;
            ensure!(status == ExitStatus::Exited(0), "{}: A ended {status} (fault {:?})", preference.label(), first.fault_cause());
            let served = invocations("vm.PageNotPresent", "pager_fill");
            ensure!(served == 3, "{}: pager_fill answered {served} faults for A's 3 pages", preference.label());
            ensure_killed("vmtest managed 3 none 0", VmKill::NoPager)?;
            let served = invocations("vm.PageNotPresent", "pager_fill");
            ensure!(served == 3, "{}: pager_fill saw B's fault ({served} invocations)", preference.label());
            Ok(())
        })?;
    }
    Ok(())
}

/// The vm service's imposed guards on their own: a binding whose owner is assigned one
/// space's region runs only for records naming that space *and* that region. Region ids
/// are unique across spaces, so a real fault never tells the two guards apart; forged
/// records do: the region in another space, and another region of the space, are both
/// refused.
fn assigned_bindings_see_only_their_space_and_region() -> TestResult {
    const OWNER: &str = "test.vm.assigned";
    let (space, other_space, region) = (u64::MAX - 3, u64::MAX - 4, 77);
    crate::services::vm::assign_for_space(OWNER, space, region).map_err(text)?;
    let dispatcher = crate::events::dispatcher();
    let outcome = (|| {
        let answer = |_: &TranslationRecord| Ok(TranslationAnswer::default());
        let binding = dispatcher.install(&VM_PAGE_NOT_PRESENT, BindingSpec::new(OWNER, handler_fn(OWNER, answer))).map_err(text)?;
        let table = dispatcher.table(&VM_PAGE_NOT_PRESENT).map_err(text);
        let mut ran = Vec::new();
        if let Ok(table) = &table {
            for (space, region) in [(other_space, region), (space, region + 1), (space, region)] {
                let _ = crate::events::raise(table, &TranslationRecord { space, address: 0x14_0000_0000, access: TranslationRecord::READ, region });
                ran.push(invocations("vm.PageNotPresent", OWNER));
            }
        }
        dispatcher.uninstall(binding).map_err(text)?;
        table?;
        ensure!(ran == [0, 0, 1], "the binding ran after each raise: {ran:?} (expected only for its own space and region)");
        Ok(())
    })();
    crate::services::vm::forget_space(space);
    outcome
}

/// A test handler of `vm.PageNotPresent`.
type Answerer = fn(&TranslationRecord) -> TranslationAnswer;

/// Handlers that answer wrongly: an encoding the primary module refuses (counted as the
/// binding's fault), a frame that was not granted, and a granted frame for the wrong page
/// (the service refuses and counts both, and frees the grant), a protection above the
/// region's, a kernel or unaligned page, a handler that fails or loops after taking a
/// grant: the default applies each time (the
/// managed region's process is killed), and no frame is left behind.
fn bad_answers_are_rejected_and_the_default_applies() -> TestResult {
    let garbage = |_: &TranslationRecord| TranslationAnswer { action: 9, ..TranslationAnswer::default() };
    let stranger = |record: &TranslationRecord| TranslationAnswer {
        action: TranslationAnswer::MAP,
        protection: TranslationAnswer::READ | TranslationAnswer::WRITE,
        page: record.page(),
        frame: 0x8_0000,
        count: 0,
    };
    let wrong_page = |record: &TranslationRecord| {
        let frame = spindle_abi::host::vm_grant(record.space);
        TranslationAnswer {
            action: TranslationAnswer::MAP,
            protection: TranslationAnswer::READ | TranslationAnswer::WRITE,
            page: record.page() + 0x1000,
            frame,
            count: 0,
        }
    };
    let above = |record: &TranslationRecord| {
        let frame = spindle_abi::host::vm_grant(record.space);
        TranslationAnswer { action: TranslationAnswer::MAP, protection: 7, page: record.page(), frame, count: 0 }
    };
    let kernel_page = |record: &TranslationRecord| {
        let frame = spindle_abi::host::vm_grant(record.space);
        TranslationAnswer { action: TranslationAnswer::MAP, protection: 3, page: 0x8020_0000, frame, count: 0 }
    };
    let unaligned = |record: &TranslationRecord| {
        let frame = spindle_abi::host::vm_grant(record.space);
        TranslationAnswer { action: TranslationAnswer::MAP, protection: 3, page: record.page() + 8, frame, count: 0 }
    };
    let dispatcher = crate::events::dispatcher();
    let frames_before = crate::mm::frame::stats().allocated;
    let cases: [(&str, Answerer, u64); 6] = [
        ("garbage", garbage, 0),
        ("stranger", stranger, 1),
        ("wrong page", wrong_page, 1),
        ("above the region", above, 1),
        ("a kernel address", kernel_page, 1),
        ("an unaligned page", unaligned, 1),
    ];
    for (name, handler, rejected) in cases {
        let binding = dispatcher.install(&VM_PAGE_NOT_PRESENT, BindingSpec::new("test.vm", handler_fn("test.vm", move |record: &TranslationRecord| Ok(handler(record))))).map_err(text)?;
        let before = stats();
        let outcome = ensure_killed("vmtest managed 2 none 0", VmKill::NoPager);
        let change = delta(before, stats());
        let _ = dispatcher.uninstall(binding);
        outcome.map_err(|error| format!("{name}: {error}"))?;
        ensure!(change.rejected == rejected && change.raised == 1 && change.pager_maps == 0, "{name}: counters {change:?}");
    }
    // A handler that fails (as a panicking or overrunning extension's does) after taking
    // a grant: contained by the dispatcher, the grant freed, the default applied.
    let failing = handler_fn("test.vm", |record: &TranslationRecord| {
        spindle_abi::host::vm_grant(record.space);
        Err::<TranslationAnswer, HandlerFault>(HandlerFault::Panicked)
    });
    let binding = dispatcher.install(&VM_PAGE_NOT_PRESENT, BindingSpec::new("test.vm", failing)).map_err(text)?;
    let outcome = ensure_killed("vmtest managed 2 none 0", VmKill::NoPager);
    let _ = dispatcher.uninstall(binding);
    outcome.map_err(|error| format!("a failing handler: {error}"))?;
    // A handler that loops after taking a grant: stopped by its budget, the same.
    let looping = handler_fn("test.vm", |record: &TranslationRecord| {
        spindle_abi::host::vm_grant(record.space);
        loop {
            core::hint::spin_loop();
        }
        #[allow(unreachable_code)]
        Ok::<TranslationAnswer, HandlerFault>(TranslationAnswer::default())
    });
    let spec = BindingSpec::new("test.vm", looping).mode(spindle_dispatch::Mode::Bounded { budget: 200_000 });
    let binding = dispatcher.install(&VM_PAGE_NOT_PRESENT, spec).map_err(text)?;
    let outcome = ensure_killed("vmtest managed 2 none 0", VmKill::NoPager);
    let _ = dispatcher.uninstall(binding);
    outcome.map_err(|error| format!("a looping handler: {error}"))?;
    crate::events::quiescent();
    crate::events::reclaim();
    crate::sched::sleep_ticks(1);
    let frames_after = crate::mm::frame::stats().allocated;
    ensure!(frames_after == frames_before, "frames allocated {frames_before} -> {frames_after}: a refused grant leaked");
    Ok(())
}

/// `pager_fill` loaded in the kernel in each technology sees `vm.BadAddress` for a load
/// from a guard page (an announcement, raised before the kill).
fn bad_address_is_announced_in_every_technology() -> TestResult {
    for preference in TECHNOLOGIES {
        clean(|| {
            ext::load("pager_fill", preference).map_err(|error| format!("loading pager_fill ({}): {error}", preference.label()))?;
            ensure_killed("vmtest bad", VmKill::BadAddress)?;
            let announced = invocations("vm.BadAddress", "pager_fill");
            ensure!(announced == 1, "{}: pager_fill saw {announced} bad addresses", preference.label());
            Ok(())
        })?;
    }
    Ok(())
}

/// Appel & Li through `vmtest barrier`: `dirty`, `vm_trap` to `pager_fill`, `protN` to
/// read-only, a store to every page — each a `vm.ProtectionFault` the handler answers by
/// unprotecting the page, after which the store runs again — then `unprotN` and `prot1`;
/// last, a trapped page set read-only before its first touch: the pager's page comes
/// mapped read-only, so the store after the load is one more protection fault.
fn appel_li_write_barrier_in_every_technology() -> TestResult {
    for preference in TECHNOLOGIES {
        clean(|| {
            let before = stats();
            let command_line = format!("vmtest barrier 4 {}", technology_number(preference));
            let (process, status) = run_with(&command_line, loader()?)?;
            let change = delta(before, stats());
            ensure!(status == ExitStatus::Exited(0), "{}: {command_line:?} ended {status} (fault {:?})", preference.label(), process.fault_cause());
            ensure!(change.protects == 5 && change.pager_maps == 1 && change.raised == 6 && change.rejected == 0, "{}: counters {change:?}", preference.label());
            // A user-level handler's server faults its own stack and heap in (demand-zero).
            let server_pages = if preference == Preference::User { change.demand_zero.saturating_sub(4) } else { 0 };
            ensure!(change.demand_zero == 4 + server_pages && change.frames_held == 0, "{}: counters {change:?}", preference.label());
            Ok(())
        })?;
    }
    Ok(())
}

/// `vmtest wide`: `protN` over a region that crosses a 2 MiB boundary (the leaves are
/// rewritten one level-0 table at a time): read-only and back keeps data and dirty bits;
/// no access takes every leaf — exactly one trapped fault per page on the next load — and
/// read-only brings every leaf back — no fault on a load, one per page on a store.
fn protection_ranges_cross_a_leaf_table() -> TestResult {
    clean(|| {
        let before = stats();
        let (process, status) = run_with("vmtest wide", loader()?)?;
        let change = delta(before, stats());
        ensure!(status == ExitStatus::Exited(0), "vmtest wide ended {status} (the failed step; fault {:?})", process.fault_cause());
        ensure!(change.protects == 1024 && change.raised == 1024 && change.rejected == 0, "counters {change:?}");
        Ok(())
    })
}

/// `vmtest errors`: every documented error of the new calls, in order.
fn system_calls_get_every_documented_error() -> TestResult {
    let (_, status) = run("vmtest errors")?;
    ensure!(status == ExitStatus::Exited(0), "vmtest errors ended {status} (the count of wrong answers; see the log)");
    Ok(())
}

/// The `vm` benchmark group's programs (`vmtest bench`, `vmtest bench-trap`) run to the end,
/// every measured trap is one protection fault answered by the handler (3,000 per run), so
/// the rows measure what they name.
fn benchmark_modes_run_and_trap_every_time() -> TestResult {
    let (_, status) = run("vmtest bench")?;
    ensure!(status == ExitStatus::Exited(0), "vmtest bench ended {status}");
    for preference in [Preference::BuiltIn, Preference::User] {
        clean(|| {
            let before = stats();
            let command_line = format!("vmtest bench-trap {} {}", technology_number(preference), preference.label());
            let (_, status) = run_with(&command_line, loader()?)?;
            let change = delta(before, stats());
            ensure!(status == ExitStatus::Exited(0), "{command_line:?} ended {status}");
            ensure!(change.protects == 3000 && change.rejected == 0 && change.kills == 0, "{}: counters {change:?}", preference.label());
            Ok(())
        })?;
    }
    Ok(())
}

/// In-kernel Appel & Li: a handler of `vm.ProtectionFault` answers by unprotecting the
/// faulting page and queues `spindle_vm_protect` of the next page (read-only), so each of
/// `vmtest chain 4`'s stores in order traps exactly once; the change queued past the
/// region's end is refused and counted; a queue outside a raise is refused. The handler
/// also asks `spindle_vm_dirty`: the faulting page (written before) is dirty, an unaligned
/// address and a page in no region are refused, and so is a call outside a raise.
fn in_kernel_handler_protects_through_kernel_functions() -> TestResult {
    use core::sync::atomic::{AtomicU64, Ordering};
    ensure!(spindle_abi::host::vm_protect(1, 0x10_0000_0000, 1, 1) == 0, "vm_protect outside a raise was queued");
    ensure!(spindle_abi::host::vm_dirty(1, 0x10_0000_0000) == u64::MAX, "vm_dirty outside a raise answered");
    // What `vm_dirty` answered inside the raises: the faulting page (written before it was
    // protected), an unaligned address, and a page in no region — summed over the raises.
    static DIRTY: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];
    for counter in &DIRTY {
        counter.store(0, Ordering::Relaxed);
    }
    let chain = handler_fn("test.vm.chain", |record: &TranslationRecord| {
        DIRTY[0].fetch_add(spindle_abi::host::vm_dirty(record.space, record.page()), Ordering::Relaxed);
        DIRTY[1].fetch_add(u64::from(spindle_abi::host::vm_dirty(record.space, record.page() + 8) == u64::MAX), Ordering::Relaxed);
        DIRTY[2].fetch_add(u64::from(spindle_abi::host::vm_dirty(record.space, 0x18_0000_0000) == u64::MAX), Ordering::Relaxed);
        spindle_abi::host::vm_protect(record.space, record.page() + 0x1000, 1, u64::from(TranslationAnswer::READ));
        Ok::<TranslationAnswer, HandlerFault>(TranslationAnswer {
            action: TranslationAnswer::PROTECT,
            protection: TranslationAnswer::READ | TranslationAnswer::WRITE,
            page: record.page(),
            frame: 0,
            count: 1,
        })
    });
    let dispatcher = crate::events::dispatcher();
    let binding = dispatcher.install(&VM_PROTECTION_FAULT, BindingSpec::new("test.vm", chain)).map_err(text)?;
    let before = stats();
    let outcome = run("vmtest chain 4");
    let change = delta(before, stats());
    let _ = dispatcher.uninstall(binding);
    let (process, status) = outcome?;
    ensure!(status == ExitStatus::Exited(0), "vmtest chain ended {status} (fault {:?})", process.fault_cause());
    ensure!(change.protects == 4 && change.raised == 4 && change.rejected == 1, "counters {change:?}");
    let dirty: [u64; 3] = core::array::from_fn(|index| DIRTY[index].load(Ordering::Relaxed));
    ensure!(dirty == [4, 4, 4], "vm_dirty in the 4 raises: faulting page dirty, unaligned and outside refused: {dirty:?}");
    Ok(())
}

/// Pages of the image of bundle program `name`: all of them, and those that hold bytes of
/// the file (the others are all zero: `.bss`).
pub(super) fn image_pages_of(name: &str) -> Result<(u64, u64), String> {
    let bytes = crate::ext::bundle::payload(&format!("bin/{name}")).ok_or_else(|| format!("no program {name} in the bundle"))?;
    let executable = spindle_process::Executable::parse(bytes).map_err(|error| format!("{name}: {error}"))?;
    let page = crate::arch::PAGE_SIZE;
    let total = executable.segments().iter().map(|segment| (segment.pages().len() / page) as u64).sum();
    let with_bytes = executable
        .segments()
        .iter()
        .map(|segment| segment.pages().step_by(page).filter(|&start| start < segment.address + segment.file_size && start + page > segment.address).count() as u64)
        .sum();
    Ok((total, with_bytes))
}

/// A program's image is filled page by page on first touch: `vmtest zero 16 5` (which
/// runs one of its many modes) gets a frame for fewer image pages than its image has, and
/// at least one — from the boot bundle, and from its ELF file of the file system (read
/// through the buffer cache, only as far as its headers at spawn); every frame comes back
/// at exit.
fn image_pages_are_filled_on_first_touch() -> TestResult {
    let (total, with_bytes) = image_pages_of("vmtest")?;
    // The file system mounted (its cache takes frames) and its cache full (one short of
    // buffers after a pressure test would take frames back meanwhile) before counting.
    crate::services::fs::status().map_err(text)?;
    crate::services::fs::refill_buffers(usize::MAX);
    for (command_line, from_bundle) in [("vmtest zero 16 5", true), ("/bin/vmtest zero 16 5", false)] {
        let allocated = crate::mm::frame::stats().allocated;
        let before = stats();
        let (process, status) = run(command_line)?;
        let change = delta(before, stats());
        ensure!(status == ExitStatus::Exited(0), "{command_line:?} ended {status} ({:?})", process.fault_cause());
        let filled = change.image_pages;
        ensure!(filled >= 1 && filled < total, "{command_line:?} (from the bundle: {from_bundle}): {filled} image pages filled of {total}");
        crate::sched::sleep_ticks(1);
        ensure!(crate::mm::frame::stats().allocated == allocated, "{command_line:?}: frames allocated {allocated} before, {} after", crate::mm::frame::stats().allocated);
        crate::println!("ktest: {command_line}: {filled} of {total} image pages filled ({with_bytes} hold file bytes)");
    }
    crate::mm::frame::audit()
}

/// A program's image pages are its own, under its memory limit like any other page:
/// `vmtest image 2 8` writes 48 image pages (24 of `.data` from the file, 24 of `.bss`)
/// twice under a limit of 8 frames, so its written image pages go to swap and come back
/// (before, image pages were the kernel's and never left) and every word stays right; the
/// process never holds more than its limit; every slot and frame comes back. From the boot
/// bundle and from the program's file.
fn image_pages_are_the_processs_own() -> TestResult {
    with_unmodelled_disk(|| {
        for command_line in ["vmtest image 2 8", "/bin/vmtest image 2 8"] {
            let allocated = crate::mm::frame::stats().allocated;
            let before = stats();
            let process = proc::spawn(command_line, Parent::Kernel, Grants::NONE).map_err(|error| format!("spawn {command_line:?}: {error}"))?;
            let mut most = 0;
            while process.exit_status().is_none() {
                most = most.max(crate::services::vm::held_by(process.pid()));
                crate::sched::sleep_ticks(1);
            }
            let status = proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for {command_line:?}: {error:?}"))?;
            let change = delta(before, stats());
            ensure!(status == ExitStatus::Exited(0), "{command_line:?} ended {status} ({:?})", process.fault_cause());
            // 48 written pages under 8 frames, three times over (the initial check, two
            // passes): at least 40 leave dirty and come back per pass.
            ensure!(change.swap_writes >= 80 && change.page_ins >= 80, "{command_line:?}: written image pages did not go to swap and back: {change:?}");
            ensure!(most <= 8, "{command_line:?}: held {most} frames under a limit of 8");
            ensure!(change.swap_used == 0 && change.frames_held == 0, "{command_line:?}: left over {change:?}");
            crate::sched::sleep_ticks(1);
            ensure!(crate::mm::frame::stats().allocated == allocated, "{command_line:?}: frames allocated {allocated} before, {} after", crate::mm::frame::stats().allocated);
            crate::println!(
                "ktest: {command_line}: {} image pages filled, {} swap writes, {} page-ins, at most {most} frames held",
                change.image_pages,
                change.swap_writes,
                change.page_ins
            );
        }
        crate::mm::frame::audit()
    })
}

/// A running program's file is its image: while `/bin/vmtest idle …` runs, the file
/// cannot be opened for writing (`Running`) or removed (`Busy`); a file open for writing
/// cannot be run (`Busy`); after the process ends, the file can be opened for writing
/// again.
fn a_running_programs_file_is_not_written() -> TestResult {
    use crate::services::fs::{self, FsCallError, OpenMode};
    let writing = OpenMode { write: true, ..OpenMode::default() };
    let process = proc::spawn("/bin/vmtest idle 2 20", Parent::Kernel, Grants::NONE).map_err(|error| format!("spawn: {error}"))?;
    let opened = fs::open("/bin/vmtest", writing).map(drop);
    let removed = fs::unlink("/bin/vmtest");
    let status = proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait: {error:?}"))?;
    ensure!(status == ExitStatus::Exited(0), "vmtest idle ended {status}");
    ensure!(opened == Err(FsCallError::Running), "opening a running program's file for writing: {opened:?}");
    ensure!(removed == Err(FsCallError::Busy), "removing a running program's file: {removed:?}");
    let writer = fs::open("/bin/vmtest", writing).map_err(|error| format!("open for writing after the exit: {error}"))?;
    let spawned = proc::spawn("/bin/vmtest zero 16 5", Parent::Kernel, Grants::NONE).map(|process| process.pid());
    drop(writer);
    ensure!(matches!(spawned, Err(proc::SpawnError::Refused(spindle_abi::syscall::Error::Busy))), "running a file open for writing: {spawned:?}");
    let (_, status) = run("/bin/vmtest zero 16 5")?;
    ensure!(status == ExitStatus::Exited(0), "vmtest zero after the writer closed ended {status}");
    Ok(())
}

/// The `scan_barrier` extension (Appel1's handler) in every technology, through `vmtest
/// chain 4 TECHNOLOGY`: each store traps once, the handler unprotects its page and protects
/// the next through `spindle_vm_protect` (at user level, a kernel function called from the
/// server), and the change past the region's end is refused and counted.
fn scan_barrier_in_every_technology() -> TestResult {
    for preference in TECHNOLOGIES {
        clean(|| {
            let before = stats();
            let command_line = format!("vmtest chain 4 {}", technology_number(preference));
            let (process, status) = run_with(&command_line, loader()?)?;
            let change = delta(before, stats());
            ensure!(status == ExitStatus::Exited(0), "{}: {command_line:?} ended {status} (fault {:?})", preference.label(), process.fault_cause());
            ensure!(change.protects == 4 && change.raised == 4 && change.rejected == 1, "{}: counters {change:?}", preference.label());
            Ok(())
        })?;
    }
    Ok(())
}

/// Create → touch → exit, demand-zero and through a pager, over and over: the heap and the
/// free frames are exactly where they were, and the service holds no frame.
fn frames_come_back_after_create_touch_exit() -> TestResult {
    // An earlier test's process (a user-level extension's server after its unload) may
    // still be ending, its pages with it: the count starts once every process is gone.
    let mut waited = 0;
    while !proc::list().is_empty() && waited < 500 {
        crate::sched::sleep_ticks(1);
        waited += 1;
    }
    let held = stats().frames_held;
    super::leaks::repeat("vm_map, touch, exit", || {
        let (_, status) = run("vmtest zero 16 5")?;
        ensure!(status == ExitStatus::Exited(0), "vmtest zero ended {status}");
        ensure_killed("vmtest managed 2 none 0", VmKill::NoPager)
    })?;
    clean(|| {
        super::leaks::repeat("vm_map, managed by pager_fill, exit", || {
            let (_, status) = run_with("vmtest managed 4 pager_fill 1", loader()?)?;
            ensure!(status == ExitStatus::Exited(0), "vmtest managed ended {status}");
            Ok(())
        })
    })?;
    ensure!(stats().frames_held == held, "the service holds {} frames, {held} before", stats().frames_held);
    Ok(())
}

/// Runs `test` with the buffer cache down to its floor, then gives the cache its buffers
/// back: memory pressure takes the cache's clean buffers before any page, and these tests
/// are about processes' pages.
fn with_cache_at_its_floor(test: impl FnOnce() -> TestResult) -> TestResult {
    crate::services::fs::settle_read_ahead();
    crate::services::fs::give_back_buffers(usize::MAX);
    let outcome = test();
    crate::services::fs::refill_buffers(usize::MAX);
    outcome
}

/// Frames the frame table records for the buffer cache.
fn cache_frames() -> u64 {
    crate::services::vm::frames_by_owner().into_iter().find(|(owner, _)| *owner == spindle_service_frames::Owner::BufferCache).map_or(0, |(_, count)| count)
}

/// Memory pressure takes the buffer cache's clean buffers before any process's page: with
/// the low-water mark just below the free frames, `vmtest swap 48 0 1` runs with no page
/// paged out under pressure while the cache gives back buffers (their frames leave the
/// frame table's buffer-cache count with them); a file read through the smaller cache
/// reads right; then the cache takes its buffers back, and the frame allocator's count is
/// exactly where it was.
fn memory_pressure_takes_the_caches_clean_buffers_first() -> TestResult {
    use crate::services::fs;
    with_unmodelled_disk(|| {
        match fs::mkdir("/ktest") {
            Ok(()) | Err(fs::FsCallError::Fs(spindle_service_fs::FsError::Exists)) => {}
            Err(error) => return Err(format!("mkdir /ktest: {error}")),
        }
        let data: alloc::vec::Vec<u8> = (0..256 * 1024).map(|index: usize| (index.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        fs::write_file("/ktest/pressure", &data).map_err(text)?;
        fs::sync().map_err(text)?;
        fs::settle_read_ahead();
        fs::refill_buffers(usize::MAX);
        let full = fs::status().map_err(text)?;
        ensure!(full.cache_buffers == full.cache_blocks, "the cache holds {} of {} buffers before the test", full.cache_buffers, full.cache_blocks);
        ensure!(cache_frames() == full.cache_buffers as u64, "the frame table records {} frames of the cache, which holds {}", cache_frames(), full.cache_buffers);
        let allocated = crate::mm::frame::stats().allocated;
        let default = crate::services::vm::low_water();
        let before = stats();
        crate::services::vm::set_low_water(crate::services::vm::free_frames().saturating_sub(20));
        let outcome = run("vmtest swap 48 0 1");
        let change = delta(before, stats());
        let during = fs::status().map_err(text);
        let frames_during = cache_frames();
        crate::services::vm::set_low_water(default);
        let (process, status) = outcome?;
        let during = during?;
        ensure!(status == ExitStatus::Exited(0), "vmtest swap ended {status} ({:?})", process.fault_cause());
        // Given back under the pressure, and taken back by file-system calls once the
        // program's frames were free again (`fs::status` is one).
        let given = during.cache.given_back - full.cache.given_back;
        let taken = during.cache.taken_back - full.cache.taken_back;
        ensure!(change.pressure_page_outs == 0 && change.page_outs == 0, "pages went out while the cache had clean buffers: {change:?}");
        ensure!(given >= 16, "the cache gave back {given} buffers");
        ensure!((full.cache_buffers - during.cache_buffers) as u64 == given - taken, "the cache holds {} buffers after giving back {given} and taking back {taken}", during.cache_buffers);
        ensure!(frames_during == during.cache_buffers as u64, "the frame table records {frames_during} frames of the cache, which holds {}", during.cache_buffers);
        ensure!(fs::read_file("/ktest/pressure").map_err(text)? == data, "the file reads back wrong through the smaller cache");
        fs::settle_read_ahead();
        let returned = fs::refill_buffers(usize::MAX);
        let after = fs::status().map_err(text)?;
        ensure!(after.cache_buffers == after.cache_blocks && cache_frames() == after.cache_buffers as u64, "the cache holds {} of {} buffers after the refill", after.cache_buffers, after.cache_blocks);
        ensure!(crate::mm::frame::stats().allocated == allocated, "frames allocated {allocated} before, {} after", crate::mm::frame::stats().allocated);
        crate::mm::frame::audit()?;
        fs::unlink("/ktest/pressure").map_err(text)?;
        crate::println!("ktest: memory pressure: the cache gave back {given} buffers, no page went out; {taken} came back at once, {returned} on the refill");
        Ok(())
    })
}

/// Runs `test` with the disk model `none` (the real virtio disk, no modelled seek and
/// rotation time: paging tests make hundreds of transfers, which the HP 97560 model would
/// stretch past the watchdog), then puts the default model back.
fn with_unmodelled_disk(test: impl FnOnce() -> TestResult) -> TestResult {
    crate::services::disk::configure("none", crate::services::disk::DEFAULT_MAX_WAIT_NS)?;
    let outcome = test();
    crate::services::disk::configure(spindle_service_disk::model::DEFAULT_MODEL, crate::services::disk::DEFAULT_MAX_WAIT_NS)?;
    outcome
}

/// A process four times its memory limit (`vmtest swap 48 12 2`) runs to completion with
/// every word right: pages go to swap (written ones written, clean ones dropped) and come
/// back on faults and on kernel copies (a write into a page on swap, a child spawned from a
/// command line on swap); it never holds more than its limit.
fn pages_go_to_swap_and_come_back() -> TestResult {
    with_unmodelled_disk(|| {
    let before = stats();
    let (process, status) = run("vmtest swap 48 12 2")?;
    let change = delta(before, stats());
    ensure!(status == ExitStatus::Exited(0), "vmtest swap ended {status} (fault {:?})", process.fault_cause());
    // Two passes over 48 written pages under 12 frames: at least 36 written pages leave per
    // pass and come back for the check.
    ensure!(change.swap_writes >= 72 && change.page_ins >= 72, "counters {change:?}");
    ensure!(change.page_outs > change.swap_writes, "no clean page was dropped: {change:?}");
    ensure!(change.swap_used == 0 && change.frames_held == 0, "swap slots or frames left after exit: {change:?}");
    ensure!(change.reclaim_raises == 0, "mm.Reclaim raised with nothing bound: {change:?}");
    Ok(())
    })
}

/// The hot-list workload with and without the `hotlist` graft on `mm.Reclaim`, in every
/// technology: with the graft (its source unchanged: it reads the owner's real queue through
/// `spindle_mm_lru_length`/`lru_frame` during the raise) the hot pages never leave, so
/// there are exactly as many fewer page-ins as the clock alone pays for them; every answer
/// passes the check; the program's words are all right.
fn hot_list_steers_reclaim_in_every_technology() -> TestResult {
    with_unmodelled_disk(|| {
    let workload = |mode: &str| -> Result<Stats, String> {
        let before = stats();
        let command_line = format!("vmtest hotscan 8 64 6 16 {mode}");
        let (process, status) = run(&command_line)?;
        ensure!(status == ExitStatus::Exited(0), "{command_line:?} ended {status} (fault {:?})", process.fault_cause());
        Ok(delta(before, stats()))
    };
    let clock = workload("plain")?;
    ensure!(clock.reclaim_raises == 0, "raises with nothing bound: {clock:?}");
    for preference in TECHNOLOGIES {
        let outcome = (|| {
            ext::load("hotlist", preference).map_err(text)?;
            let plain = workload("plain")?;
            let steered = workload("hot")?;
            ensure!(plain.page_ins == clock.page_ins, "{}: the graft with an empty hot list changed the page-ins: {} vs {}", preference.label(), plain.page_ins, clock.page_ins);
            ensure!(steered.reclaim_raises > 0 && steered.reclaim_rejected == 0, "{}: counters {steered:?}", preference.label());
            // Each of the 6 rounds the clock pages the 8 hot pages out and in again (after
            // the first); the graft keeps them. (The program's stack page is under the limit
            // too, and not on the hot list, so the saving is a little under 8 × 5.)
            ensure!(
                steered.page_ins + 24 <= clock.page_ins,
                "{}: page-ins with the hot list {} vs {} with the clock alone",
                preference.label(),
                steered.page_ins,
                clock.page_ins
            );
            Ok(())
        })();
        unload_named("hotlist")?;
        outcome?;
    }
    Ok(())
    })
}

/// `mm.Reclaim` handlers that volunteer what they may not — no frame, a kernel frame, the
/// frame of another address space — are refused and counted; the clock's candidate goes
/// instead and the program's data is intact.
fn bad_reclaim_answers_are_refused() -> TestResult {
    with_unmodelled_disk(|| {
    use spindle_abi::event::{MM_RECLAIM, ReclaimCandidate, Volunteer};
    // A frame of the kernel heap: the kernel's, never an address space's.
    let probe = alloc::boxed::Box::new(0u64);
    let kernel_frame = (&*probe as *const u64 as usize / crate::arch::PAGE_SIZE) as u64;
    for (label, answer) in [("no frame", 1u64), ("a kernel heap frame", kernel_frame), ("past memory", u64::MAX)] {
        let handler = handler_fn("test.vm.reclaim", move |_: &ReclaimCandidate| Ok::<Volunteer, HandlerFault>(Volunteer { frame: answer }));
        let dispatcher = crate::events::dispatcher();
        let binding = dispatcher.install(&MM_RECLAIM, BindingSpec::new("test.vm", handler)).map_err(text)?;
        let before = stats();
        let outcome = run("vmtest swap 24 8 1");
        let change = delta(before, stats());
        let _ = dispatcher.uninstall(binding);
        let (process, status) = outcome?;
        ensure!(status == ExitStatus::Exited(0), "{label}: vmtest swap ended {status} (fault {:?})", process.fault_cause());
        ensure!(change.reclaim_raises > 0, "{label}: no raise: {change:?}");
        // The primary module refuses it (a fault of the binding; the default, the candidate,
        // comes back), so the service's own check never sees it.
        ensure!(change.page_outs >= change.reclaim_raises, "{label}: counters {change:?}");
    }
    Ok(())
    })
}

/// Swap slots and frames come back whether the process exits or is killed with pages on
/// swap, over and over (heap and free frames exactly equal after the rounds).
fn swap_and_frames_come_back_after_exit_and_kill() -> TestResult {
    with_unmodelled_disk(|| {
    let used = stats().swap_used;
    super::leaks::repeat("pages on swap, exit", || {
        let (_, status) = run("vmtest swap 16 6 1")?;
        ensure!(status == ExitStatus::Exited(0), "vmtest swap ended {status}");
        Ok(())
    })?;
    super::leaks::repeat("pages on swap, killed", || {
        // Pages on swap, then a load from no region: killed by the fault.
        let (process, status) = run("vmtest swapkill")?;
        ensure!(status == ExitStatus::Killed(KillCause::Fault), "vmtest swapkill ended {status} ({:?})", process.fault_cause());
        Ok(())
    })?;
    ensure!(stats().swap_used == used, "{} swap slots in use, {used} before", stats().swap_used);
    Ok(())
    })
}

/// Rounds of `vmtest random` runs after the warm-up round.
const RANDOM_ROUNDS: usize = 3;
/// Steps of each `vmtest random` run.
const RANDOM_STEPS: usize = 1500;

/// `vmtest random SEED 1500`, a round being two runs — one with its first region trapped
/// to `pager_fill`, one without — four rounds with new seeds each: random interleavings of
/// `vm_map`, `unmap`, stores, loads, `prot1`/`protN`/`unprotN`, `dirty`, kernel copies and
/// `vm_limit` (so pages go to swap and come back while protected) agree with the program's
/// model of every page; after the first round (the first trapped fault and the first
/// paging allocate what later ones reuse) the heap, the free frames and the swap slots are
/// exactly as before; the runs paged (page-outs, swap writes, page-ins) and the trapped
/// ones had protection faults answered and pages mapped by the pager.
fn random_calls_keep_every_word_and_leak_nothing() -> TestResult {
    with_unmodelled_disk(|| {
        clean(|| {
            let grants = loader()?;
            let used = stats().swap_used;
            let before = stats();
            let mut seed = 0;
            super::leaks::repeat_rounds("random vm calls", RANDOM_ROUNDS, || {
                for trap in [true, false] {
                    seed += 1;
                    let command_line = format!("vmtest random {seed} {RANDOM_STEPS}{}", if trap { " trap" } else { "" });
                    let (process, status) = run_with(&command_line, grants)?;
                    ensure!(status == ExitStatus::Exited(0), "{command_line:?} ended {status} (fault {:?}; the log has the step)", process.fault_cause());
                }
                Ok(())
            })?;
            let change = delta(before, stats());
            ensure!(stats().swap_used == used, "{} swap slots in use, {used} before", stats().swap_used);
            ensure!(change.page_outs > 0 && change.swap_writes > 0 && change.page_ins > 0, "the runs did not page: {change:?}");
            ensure!(change.protects > 0 && change.pager_maps > 0 && change.rejected == 0, "the trapped runs had no protection fault or no page from the pager, or an answer was refused: {change:?}");
            crate::println!(
                "ktest: vmtest random: {} runs of {RANDOM_STEPS} steps: {} faults, {} protection answers, {} page-outs ({} written), {} page-ins",
                2 * (RANDOM_ROUNDS + 1),
                change.faults,
                change.protects,
                change.page_outs,
                change.swap_writes,
                change.page_ins
            );
            Ok(())
        })
    })
}

/// Three `vmtest random` processes at once (one with a trapped region) under global memory
/// pressure (the low-water mark 40 frames below the free frames, the buffer cache at its
/// floor): each takes frames while the global clock pages out the others' pages as well as
/// its own, also while they are protected, in transit or trapped. Every model agrees in
/// every process; twice after a warm-up, the heap, the free frames and the swap slots are
/// exactly as before; pages of one process went out for another.
fn random_processes_under_global_pressure() -> TestResult {
    with_unmodelled_disk(|| {
        with_cache_at_its_floor(|| {
            clean(|| {
                let grants = loader()?;
                let default = crate::services::vm::low_water();
                let used = stats().swap_used;
                let before = stats();
                let mut seed = 100;
                let outcome = super::leaks::repeat_rounds("random processes under pressure", 2, || {
                    let frames = crate::mm::frame::stats();
                    crate::services::vm::set_low_water(((frames.total - frames.allocated) as u64).saturating_sub(40));
                    let mut processes = Vec::new();
                    for trap in [false, true, false] {
                        seed += 1;
                        let command_line = format!("vmtest random {seed} {RANDOM_STEPS}{}", if trap { " trap" } else { "" });
                        processes.push((proc::spawn(&command_line, Parent::Kernel, grants).map_err(|error| format!("spawn {command_line:?}: {error}")), command_line));
                    }
                    let mut failed = None;
                    for (process, command_line) in processes {
                        let ended = process.and_then(|process| {
                            let status = proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for {command_line:?}: {error:?}"))?;
                            Ok((status, process.fault_cause()))
                        });
                        match ended {
                            Ok((ExitStatus::Exited(0), _)) => {}
                            Ok((status, cause)) => failed = failed.or(Some(format!("{command_line:?} ended {status} (fault {cause:?}; the log has the step)"))),
                            Err(error) => failed = failed.or(Some(error)),
                        }
                    }
                    crate::services::vm::set_low_water(default);
                    failed.map_or(Ok(()), Err)
                });
                crate::services::vm::set_low_water(default);
                outcome?;
                let change = delta(before, stats());
                ensure!(stats().swap_used == used, "{} swap slots in use, {used} before", stats().swap_used);
                ensure!(change.pressure_page_outs > 0 && change.taken_from_others > 0, "no page went for another process: {change:?}");
                crate::println!(
                    "ktest: three random processes under pressure, 3 times: {} page-outs ({} under pressure, {} for another process), {} page-ins, {} waits for a page in transit",
                    change.page_outs,
                    change.pressure_page_outs,
                    change.taken_from_others,
                    change.page_ins,
                    change.transit_waits
                );
                Ok(())
            })
        })
    })
}

/// `mm.Allocate`: a handler that refuses user pages gets the process killed at its first
/// touch (cause: refused), with nothing held; a malformed answer is refused by the primary
/// module and the default grants; an explicit grant works, also under a memory limit with
/// paging (every grant fits: room is made before the raise).
fn allocate_event_grants_refuses_and_is_checked() -> TestResult {
    use spindle_abi::event::{FrameAnswer, FrameRequest, MM_ALLOCATE};
    let dispatcher = crate::events::dispatcher();
    let with_answer = |answer: u64, command_line: &str| -> Result<(Arc<Process>, ExitStatus, Stats), String> {
        let handler = handler_fn("test.vm.allocate", move |request: &FrameRequest| {
            let answer = if request.purpose == FrameRequest::USER_PAGE && request.count == 1 { answer } else { FrameAnswer::DEFAULT };
            Ok::<FrameAnswer, HandlerFault>(FrameAnswer { answer })
        });
        let binding = dispatcher.install(&MM_ALLOCATE, BindingSpec::new("test.vm", handler)).map_err(text)?;
        let before = stats();
        let outcome = run(command_line);
        let change = delta(before, stats());
        let _ = dispatcher.uninstall(binding);
        let (process, status) = outcome?;
        Ok((process, status, change))
    };
    let (process, status, change) = with_answer(FrameAnswer::REFUSE, "vmtest zero 16 5")?;
    ensure!(status == ExitStatus::Killed(KillCause::Fault), "refused: vmtest zero ended {status}");
    ensure!(process.fault_cause() == Some(FaultKill::AllocationRefused), "refused: cause {:?}", process.fault_cause());
    ensure!(change.allocate_refused == 1 && change.demand_zero + change.stack_pages == 0 && change.frames_held == 0, "refused: counters {change:?}");
    let (process, status, change) = with_answer(7, "vmtest zero 16 5")?;
    ensure!(status == ExitStatus::Exited(0), "malformed: vmtest zero ended {status} ({:?})", process.fault_cause());
    // Every page the program takes is asked for: its 6 `vm_map` pages, its stack's and its
    // image's.
    let pages = |change: &Stats| 6 + change.stack_pages + change.image_pages;
    ensure!(change.allocate_raises == pages(&change) && change.allocate_refused == 0 && change.demand_zero == 6, "malformed: counters {change:?}");
    let (process, status, change) = with_answer(FrameAnswer::GRANT, "vmtest zero 16 5")?;
    ensure!(status == ExitStatus::Exited(0), "granted: vmtest zero ended {status} ({:?})", process.fault_cause());
    ensure!(change.allocate_raises == pages(&change) && change.allocate_rejected == 0 && change.demand_zero == 6, "granted: counters {change:?}");
    with_unmodelled_disk(|| {
        let (process, status, change) = with_answer(FrameAnswer::GRANT, "vmtest swap 24 8 1")?;
        ensure!(status == ExitStatus::Exited(0), "granted under a limit: vmtest swap ended {status} ({:?})", process.fault_cause());
        ensure!(change.allocate_rejected == 0 && change.allocate_raises >= change.page_ins && change.page_ins > 0, "granted under a limit: counters {change:?}");
        Ok(())
    })
}

/// `mm.Allocate` is asked for the buffer cache's buffers and a native extension's arena
/// too: a handler refusing buffers makes a mount fail with that reason (and the next mount,
/// with nothing bound, succeeds); one refusing arena pages makes a native load fail with
/// that reason, leaving the frames where they were (and the load succeeds once it is gone).
fn allocate_event_is_asked_for_cache_buffers_and_arenas() -> TestResult {
    use spindle_abi::event::{FrameAnswer, FrameRequest, MM_ALLOCATE};
    let dispatcher = crate::events::dispatcher();
    let refusing = |purpose: u64| {
        handler_fn("test.vm.allocate", move |request: &FrameRequest| {
            let answer = if request.purpose == purpose { FrameAnswer::REFUSE } else { FrameAnswer::DEFAULT };
            Ok::<FrameAnswer, HandlerFault>(FrameAnswer { answer })
        })
    };
    crate::services::fs::settle_read_ahead();
    let binding = dispatcher.install(&MM_ALLOCATE, BindingSpec::new("test.vm", refusing(FrameRequest::CACHE_BUFFER))).map_err(text)?;
    let refused = crate::services::fs::remount(crate::services::fs::DEFAULT_CACHE_BLOCKS);
    let _ = dispatcher.uninstall(binding);
    let mounted = crate::services::fs::remount(crate::services::fs::DEFAULT_CACHE_BLOCKS);
    ensure!(refused.as_ref().is_err_and(|error| format!("{error}").contains("mm.Allocate refused the buffer cache's 1024 buffers")), "a mount with buffers refused: {refused:?}");
    mounted.map_err(|error| format!("the mount after the refusal: {error}"))?;
    // Once loaded and unloaded first: the kernel's page-table pages for the extension slots
    // stay (they are permanent), so the count below compares like with like.
    ext::load("hello", Preference::Default).map_err(text)?;
    unload_named("hello")?;
    crate::sched::sleep_ticks(1);
    let allocated = crate::mm::frame::stats().allocated;
    let binding = dispatcher.install(&MM_ALLOCATE, BindingSpec::new("test.vm", refusing(FrameRequest::ARENA_PAGE))).map_err(text)?;
    let refused = ext::load("hello", Preference::Default);
    let _ = dispatcher.uninstall(binding);
    crate::sched::sleep_ticks(1);
    let after_refusal = crate::mm::frame::stats().allocated;
    let loaded = ext::load("hello", Preference::Default);
    let unloaded = unload_named("hello");
    ensure!(refused.as_ref().is_err_and(|error| format!("{error}").contains("mm.Allocate refused the")), "a native load with its arena refused: {:?}", refused.as_ref().map(|_| ()));
    ensure!(after_refusal == allocated, "frames allocated {allocated} before the refused load, {after_refusal} after");
    loaded.map_err(|error| format!("the load after the refusal: {error}"))?;
    unloaded?;
    crate::mm::frame::audit()
}

/// A real client of Appel & Li's primitives: `vmtest checkpoint 12` takes a copy-on-write
/// checkpoint of 12 pages with `vm_checkpoint` (every technology) handling the protection
/// faults: exactly the 4 pages written afterwards fault, once each, and are saved through
/// `spindle_vm_copy_page`; the program checks the snapshot and rolls back from it.
fn checkpoint_client_in_every_technology() -> TestResult {
    for preference in TECHNOLOGIES {
        let before = stats();
        let running = pids();
        let (process, status) = run_with(&format!("vmtest checkpoint 12 {}", technology_number(preference)), loader()?)?;
        let change = delta(before, stats());
        let unloaded = unload_named("vm_checkpoint");
        // `vmtest` unloads the extension itself: a user-level server may still be ending
        // (and giving its frames back, which the next test would count).
        wait_for_new_processes(&running)?;
        ensure!(status == ExitStatus::Exited(0), "{}: vmtest checkpoint ended {status} (fault {:?})", preference.label(), process.fault_cause());
        ensure!(change.raised == 4 && change.protects == 4 && change.rejected == 0 && change.kills == 0, "{}: counters {change:?}", preference.label());
        unloaded?;
    }
    Ok(())
}

/// The pids of the processes that exist now.
fn pids() -> Vec<u64> {
    proc::list().iter().map(|process| process.pid()).collect()
}

/// Waits until every process not in `running` has been reaped (2 s each at most).
fn wait_for_new_processes(running: &[u64]) -> TestResult {
    for pid in pids().into_iter().filter(|pid| !running.contains(pid)) {
        ensure!(proc::wait_until_reaped(pid, 200), "process {pid} did not end");
    }
    Ok(())
}

/// Resident pages of `pid`'s `vm_map` regions.
fn vm_map_pages(pid: u64) -> u64 {
    crate::proc::testing::resident_vm_map_pages(pid).len() as u64
}

/// Spawns `vmtest idle 64 500` and waits (at most 2,000 ticks) until it holds its 64
/// `vm_map` pages: then it sleeps.
fn spawn_idle_and_wait_until_filled() -> Result<Arc<Process>, String> {
    let idle = proc::spawn("vmtest idle 64 500", Parent::Kernel, Grants::NONE).map_err(|error| format!("spawn vmtest idle: {error}"))?;
    let mut waited = 0;
    while vm_map_pages(idle.pid()) < 64 && waited < 2000 {
        crate::sched::sleep_ticks(1);
        waited += 1;
    }
    let filled = vm_map_pages(idle.pid());
    if filled < 64 {
        return Err(format!("vmtest idle holds {filled} pages after {waited} ticks"));
    }
    Ok(idle)
}

/// Global pressure across processes: process A (`vmtest idle 64 …`) fills 64 pages and
/// sleeps; with the low-water mark just below the free frames, process B (`vmtest swap 48
/// 0 1`, no limit of its own) takes frames, and the global clock finds A's pages unused
/// and pages them out for B — after dropping A's read-only image pages (code, constants),
/// which need no write. B ends with every word right, A wakes, gets its code back from its
/// image and its pages back from swap and finds every word right; no slot or frame is left.
fn memory_pressure_takes_an_idle_processs_pages() -> TestResult {
    with_unmodelled_disk(|| with_cache_at_its_floor(|| {
        let default = crate::services::vm::low_water();
        let free = || {
            let frames = crate::mm::frame::stats();
            (frames.total - frames.allocated) as u64
        };
        let before = stats();
        let idle = spawn_idle_and_wait_until_filled()?;
        crate::services::vm::set_low_water(free().saturating_sub(20));
        let outcome = run("vmtest swap 48 0 1");
        let during = delta(before, stats());
        let idle_on_swap = vm_map_pages(idle.pid());
        crate::services::vm::set_low_water(default);
        let idle_status = proc::wait(idle.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for vmtest idle: {error:?}"))?;
        let change = delta(before, stats());
        let (process, status) = outcome?;
        ensure!(status == ExitStatus::Exited(0), "vmtest swap ended {status} ({:?})", process.fault_cause());
        ensure!(idle_status == ExitStatus::Exited(0), "vmtest idle ended {idle_status} ({:?}) after {} of its pages were taken", idle.fault_cause(), during.taken_from_others);
        ensure!(during.taken_from_others > 0 && idle_on_swap < 64, "no page of the idle process was taken: {during:?}, it holds {idle_on_swap}");
        // Its code pages went first (dropped, not written), and came back when it ran.
        ensure!(during.image_drops > 0, "no image page of the idle process was dropped: {during:?}");
        ensure!(change.page_ins >= during.taken_from_others.min(64 - idle_on_swap), "the idle process's pages did not come back from swap: {change:?}");
        ensure!(change.swap_used == 0 && change.frames_held == 0, "left over {change:?}");
        crate::println!(
            "ktest: global pressure: {} image pages dropped, {} page-outs under pressure, {} of them the idle process's (it held {idle_on_swap} of 64 at the end), {} page-ins",
            during.image_drops,
            during.pressure_page_outs,
            during.taken_from_others,
            change.page_ins
        );
        // Again, killing the idle process while its pages are being taken: the pages in
        // transit are cancelled with the space, and every slot and frame comes back.
        let before = stats();
        let idle = spawn_idle_and_wait_until_filled()?;
        crate::services::vm::set_low_water(free().saturating_sub(20));
        let taker = proc::spawn("vmtest swap 48 0 1", Parent::Kernel, Grants::NONE).map_err(|error| format!("spawn vmtest swap: {error}"));
        let mut waited = 0;
        while stats().taken_from_others == before.taken_from_others && waited < 2000 {
            crate::sched::yield_now();
            waited += 1;
        }
        let _ = proc::kill(idle.pid(), Parent::Kernel);
        let taker_status = taker.and_then(|taker| proc::wait(taker.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for vmtest swap: {error:?}")));
        crate::services::vm::set_low_water(default);
        let idle_status = proc::wait(idle.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for vmtest idle: {error:?}"))?;
        crate::events::quiescent();
        let change = delta(before, stats());
        ensure!(taker_status? == ExitStatus::Exited(0), "vmtest swap beside the killed process failed");
        ensure!(idle_status == ExitStatus::Killed(KillCause::Request), "the idle process ended {idle_status}, expected killed");
        ensure!(change.taken_from_others > 0, "no page of the idle process was taken before the kill: {change:?}");
        ensure!(change.swap_used == 0 && change.frames_held == 0, "after the kill: left over {change:?}");
        // Two busy processes under pressure, each paying for its frames with pages the
        // global clock picks (mostly its own: the other's pages are in use too): every
        // word right in both.
        let before = stats();
        crate::services::vm::set_low_water(free().saturating_sub(30));
        let first = proc::spawn("vmtest swap 48 0 3", Parent::Kernel, Grants::NONE).map_err(|error| format!("spawn vmtest swap: {error}"));
        let second = run("vmtest swap 48 0 3");
        let first = first.and_then(|first| proc::wait(first.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for vmtest swap: {error:?}")));
        crate::services::vm::set_low_water(default);
        let change = delta(before, stats());
        ensure!(first? == ExitStatus::Exited(0) && second?.1 == ExitStatus::Exited(0), "two busy processes under pressure: not every word right ({change:?})");
        ensure!(change.pressure_page_outs > 0, "two busy processes: nothing paged under pressure: {change:?}");
        ensure!(change.swap_used == 0 && change.frames_held == 0, "two busy processes: left over {change:?}");
        crate::println!("ktest: two busy processes: {} page-outs under pressure, {} of the other's pages, {} waits for a page in transit", change.pressure_page_outs, change.taken_from_others, change.transit_waits);
        Ok(())
    }))
}

/// A page on its way to swap: while one strand pages out a page of an idle process (the
/// disk write blocks it with the page in transit), another strand reads that page as a
/// kernel copy does. The reader waits for the write (`transit_waits`), then faults the page
/// back in from swap (`page_ins`) and reads what the process wrote; the process wakes and
/// finds every word right; nothing is left over.
fn a_read_of_a_page_in_transit_waits_for_its_write() -> TestResult {
    with_unmodelled_disk(|| {
        let before = stats();
        let idle = spawn_idle_and_wait_until_filled()?;
        let pid = idle.pid();
        let page = crate::proc::testing::lowest_resident_page(pid).ok_or("the idle process has no resident page")?;
        let written = crate::proc::testing::read_word(pid, page)?;
        let read = Arc::new(spin::Mutex::new(None));
        let reader = {
            let read = read.clone();
            crate::sched::spawn("test-transit-reader", crate::sched::Priority::NORMAL, move || {
                // Reads only once the page is in transit (if a tick lets this strand run
                // before the page-out has begun, it yields back to it).
                let mut yields = 0;
                while !crate::proc::testing::in_transit(pid, page) && yields < 100_000 {
                    crate::sched::yield_now();
                    yields += 1;
                }
                *read.lock() = Some(crate::proc::testing::read_word(pid, page));
            })
            .map_err(text)?
        };
        // The reader runs while this strand waits for the disk, the page in transit.
        let paged_out = crate::proc::testing::page_out_page(pid, page);
        let mut waited = 0;
        while read.lock().is_none() && waited < 2000 {
            crate::sched::sleep_ticks(1);
            waited += 1;
        }
        drop(reader);
        let outcome = read.lock().take();
        // A reader still at work would walk the space's tables: leave the process alone.
        let outcome = outcome.ok_or("the reader never finished")?;
        let _ = proc::kill(pid, Parent::Kernel);
        let status = proc::wait(pid, Parent::Kernel, &|| false).map_err(|error| format!("wait for vmtest idle: {error:?}"))?;
        crate::events::quiescent();
        let change = delta(before, stats());
        paged_out?;
        let value = outcome?;
        ensure!(written != 0 && value == written, "the page read back from swap holds {value:#x}, {written:#x} was written");
        ensure!(change.transit_waits > 0, "the reader did not wait for the page in transit: {change:?}");
        ensure!(change.page_ins > 0 && change.swap_writes > 0, "no swap round trip: {change:?}");
        ensure!(status == ExitStatus::Killed(KillCause::Request), "the idle process ended {status}");
        ensure!(change.swap_used == 0 && change.frames_held == 0, "left over {change:?}");
        Ok(())
    })
}

/// Global pressure: with the low-water mark just below the free frames, a process with no
/// limit of its own pages its own pages out to take more (self-paging) and runs to
/// completion with every word right, leaving no slot or frame behind. With the mark back at
/// its default nothing pages.
fn memory_pressure_makes_a_process_page_itself() -> TestResult {
    with_unmodelled_disk(|| with_cache_at_its_floor(|| {
        let default = crate::services::vm::low_water();
        let free = || {
            let frames = crate::mm::frame::stats();
            (frames.total - frames.allocated) as u64
        };
        // Room for the program's image, stack and page tables and a few pages of its own.
        crate::services::vm::set_low_water(free().saturating_sub(40));
        let before = stats();
        let outcome = run("vmtest swap 48 0 2");
        let change = delta(before, stats());
        crate::services::vm::set_low_water(default);
        let (process, status) = outcome?;
        ensure!(status == ExitStatus::Exited(0), "under pressure: vmtest swap ended {status} ({:?})", process.fault_cause());
        ensure!(change.pressure_page_outs > 0 && change.swap_writes >= 48 && change.page_ins >= 48, "under pressure: counters {change:?}");
        ensure!(change.swap_used == 0 && change.frames_held == 0, "under pressure: left over {change:?}");
        let before = stats();
        let (_, status) = run("vmtest swap 48 0 1")?;
        let change = delta(before, stats());
        ensure!(status == ExitStatus::Exited(0) && change.page_outs == 0 && change.pressure_page_outs == 0, "no pressure: {status}, counters {change:?}");
        Ok(())
    }))
}
