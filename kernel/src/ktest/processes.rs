//! Tests of user processes: spawn/wait/exit status, preemption of processes that never
//! yield, containment of a faulting process, the system-call contract (`badcalls`, also
//! with each capability), capabilities and their passing, `protect` enforced by the
//! hardware, the user shell run on script input, and that an ended process leaves no
//! frames behind.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;

use spindle_abi::syscall::{Error, ExitStatus, KillCause};
use spindle_process::layout::{STACK_BOTTOM, STACK_GUARD};

use super::{KernelTest, TestResult};
use crate::arch::trap::{Exception, TrapCause};
use crate::ensure;
use crate::proc::{self, Grants, Parent, Process, SpawnError, WaitError};

/// The process tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "proc::exit_status_round_trip", run: exit_status_round_trip },
    KernelTest { name: "proc::spawn_and_wait_errors", run: spawn_and_wait_errors },
    KernelTest { name: "proc::two_spinning_processes_are_preempted", run: two_spinning_processes_are_preempted },
    KernelTest { name: "proc::fault_kills_only_the_process", run: fault_kills_only_the_process },
    KernelTest { name: "proc::panic_exits_with_101", run: panic_exits_with_101 },
    KernelTest { name: "proc::badcalls_gets_every_documented_error", run: badcalls_gets_every_documented_error },
    KernelTest { name: "proc::ended_processes_leave_no_frames", run: ended_processes_leave_no_frames },
    KernelTest { name: "proc::capability_tables_hold_what_was_granted", run: capability_tables_hold_what_was_granted },
    KernelTest { name: "proc::badcalls_with_the_extension_loader", run: badcalls_with_the_extension_loader },
    KernelTest { name: "proc::badcalls_with_the_console", run: badcalls_with_the_console },
    KernelTest { name: "proc::store_to_a_protected_page_faults", run: store_to_a_protected_page_faults },
    KernelTest { name: "proc::spsh_runs_script_input", run: spsh_runs_script_input },
    KernelTest { name: "proc::events_listing_is_the_consoles", run: events_listing_is_the_consoles },
    KernelTest { name: "proc::floating_point_registers_are_each_processs_own", run: floating_point_registers_are_each_processs_own },
];

fn start_with(command_line: &str, grants: Grants) -> Result<Arc<Process>, String> {
    proc::spawn(command_line, Parent::Kernel, grants).map_err(|error| format!("spawn {command_line:?}: {error}"))
}

fn start(command_line: &str) -> Result<Arc<Process>, String> {
    proc::spawn(command_line, Parent::Kernel, Grants::NONE).map_err(|error| format!("spawn {command_line:?}: {error}"))
}

fn wait_for(process: &Process) -> Result<ExitStatus, String> {
    proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| format!("wait for pid {}: {error:?}", process.pid()))
}

/// Spawns `command_line` from the kernel and waits for it.
fn run(command_line: &str) -> Result<(Arc<Process>, ExitStatus), String> {
    let process = start(command_line)?;
    let status = wait_for(&process)?;
    Ok((process, status))
}

fn exit_status_round_trip() -> TestResult {
    for (command_line, expected) in [("hello", 0), ("hello 42", 42), ("hello -7", -7)] {
        let (process, status) = run(command_line)?;
        ensure!(status == ExitStatus::Exited(expected), "{command_line:?} ended {status}, expected status {expected}");
        ensure!(process.system_calls() >= 4, "{command_line:?} made {} system calls", process.system_calls());
        ensure!(proc::find(process.pid()).is_none(), "pid {} is still in the table after wait", process.pid());
    }
    Ok(())
}

fn spawn_and_wait_errors() -> TestResult {
    let code = |command_line: &str| proc::spawn(command_line, Parent::Kernel, Grants::NONE).map(|_| ()).map_err(|error| error.code());
    ensure!(code("no-such-program") == Err(Error::NoSuchProgram), "unknown program: {:?}", code("no-such-program"));
    ensure!(code("  ") == Err(Error::BadArgument), "empty command line: {:?}", code("  "));
    let long = "x".repeat(spindle_abi::syscall::MAX_COMMAND_LINE + 1);
    ensure!(code(&long) == Err(Error::BadLength), "long command line: {:?}", code(&long));
    ensure!(matches!(proc::spawn("no-such-program", Parent::Kernel, Grants::NONE), Err(SpawnError::Refused(Error::NoSuchProgram))), "error kind");
    let never = u64::MAX;
    ensure!(proc::wait(never, Parent::Kernel, &|| false) == Err(WaitError::Refused(Error::NoSuchProcess)), "wait for no process");
    ensure!(proc::kill(never, Parent::Kernel) == Err(Error::NoSuchProcess), "kill no process");
    // A process that is not the waiter's child.
    let process = start("hello")?;
    let foreign = proc::wait(process.pid(), Parent::Process(process.pid() + 1000), &|| false);
    ensure!(foreign == Err(WaitError::Refused(Error::NotPermitted)), "wait by a non-parent: {foreign:?}");
    ensure!(proc::kill(process.pid(), Parent::Process(process.pid() + 1000)) == Err(Error::NotPermitted), "kill by a non-parent");
    ensure!(wait_for(&process)? == ExitStatus::Exited(0), "hello failed");
    Ok(())
}

fn two_spinning_processes_are_preempted() -> TestResult {
    // `spin 0 WORK` never yields and makes one system call (a write) per round of WORK
    // busy iterations (a few milliseconds): only timer preemption lets both progress.
    let first = start("spin 0 3000000")?;
    let second = start("spin 0 3000000")?;
    let mut previous = (first.system_calls(), second.system_calls());
    for window in 0..3 {
        // `sleep_ticks` returns early on an unblock (a stale wakeup left by an earlier
        // handoff counts): sleep until the window has really passed.
        let window_end = crate::time::ticks() + 20;
        while !crate::sched::sleep_ticks(window_end.saturating_sub(crate::time::ticks())) {}
        let now = (first.system_calls(), second.system_calls());
        ensure!(
            now.0 > previous.0 && now.1 > previous.1,
            "window {window}: progress {previous:?} -> {now:?} (both must advance); processes: {:?}; ready strands: {}",
            proc::list().iter().map(|process| (process.pid(), alloc::string::String::from(process.name()), process.system_calls(), process.exit_status())).collect::<alloc::vec::Vec<_>>(),
            crate::sched::ready_count()
        );
        previous = now;
    }
    ensure!(first.exit_status().is_none() && second.exit_status().is_none(), "a spinner ended on its own");
    for process in [&first, &second] {
        proc::kill(process.pid(), Parent::Kernel).map_err(|error| format!("kill: {error}"))?;
    }
    for process in [&first, &second] {
        let status = wait_for(process)?;
        ensure!(status == ExitStatus::Killed(KillCause::Request), "pid {} ended {status}", process.pid());
    }
    Ok(())
}

fn fault_kills_only_the_process() -> TestResult {
    let (process, status) = run("fault stack")?;
    ensure!(status == ExitStatus::Killed(KillCause::Fault), "fault ended {status}");
    let report = process.fault().ok_or("no fault was recorded")?;
    ensure!(report.cause == TrapCause::Exception(Exception::StorePageFault), "cause {}", report.cause);
    ensure!((STACK_GUARD..STACK_BOTTOM).contains(&report.stval), "fault address {:#x} is not in the stack guard page", report.stval);
    // Direct accesses the page tables refuse: kernel memory (no U bit), an unmapped user
    // page, and the program's own text (executable, not writable: W^X).
    let text = spindle_process::layout::IMAGE_BASE;
    for (command_line, cause, address) in [
        (format!("fault load {:#x}", crate::memlayout::KERNEL_BASE), Exception::LoadPageFault, crate::memlayout::KERNEL_BASE),
        (format!("fault store {:#x}", crate::memlayout::KERNEL_BASE), Exception::StorePageFault, crate::memlayout::KERNEL_BASE),
        (format!("fault load {:#x}", STACK_GUARD), Exception::LoadPageFault, STACK_GUARD),
        (format!("fault store {text:#x}"), Exception::StorePageFault, text),
    ] {
        let (process, status) = run(&command_line)?;
        ensure!(status == ExitStatus::Killed(KillCause::Fault), "{command_line:?} ended {status}");
        let report = process.fault().ok_or("no fault was recorded")?;
        ensure!(report.cause == TrapCause::Exception(cause) && report.stval == address, "{command_line:?}: {}", proc::describe_fault(&report));
    }
    // An illegal instruction: lazy floating point retries it once with the unit on, then
    // it is reported as what it is.
    let (process, status) = run("fault illegal")?;
    ensure!(status == ExitStatus::Killed(KillCause::Fault), "\"fault illegal\" ended {status}");
    let report = process.fault().ok_or("no fault was recorded for the illegal instruction")?;
    ensure!(report.cause == TrapCause::Exception(Exception::IllegalInstruction), "\"fault illegal\": {}", proc::describe_fault(&report));
    // The kernel carries on: another process runs normally.
    let (_, status) = run("hello")?;
    ensure!(status == ExitStatus::Exited(0), "hello after the fault ended {status}");
    Ok(())
}

fn panic_exits_with_101() -> TestResult {
    let (_, status) = run("fault panic")?;
    ensure!(status == ExitStatus::Exited(ExitStatus::PANIC), "fault panic ended {status}");
    Ok(())
}

fn badcalls_gets_every_documented_error() -> TestResult {
    let (process, status) = run("badcalls")?;
    ensure!(status == ExitStatus::Exited(0), "badcalls ended {status} (its status is the number of mismatches; see the log)");
    ensure!(process.system_calls() > 100, "badcalls made only {} system calls", process.system_calls());
    Ok(())
}

fn ended_processes_leave_no_frames() -> TestResult {
    // Warm up: the first processes may create page-table pages of the kernel's strand-stack
    // region, which are kept for later stacks.
    run("hello")?;
    let before = crate::mm::frame::stats();
    for command_line in ["hello", "fault", "badcalls"] {
        run(command_line)?;
    }
    let spinner = start("spin 0 100000")?;
    crate::sched::sleep_ticks(3);
    proc::kill(spinner.pid(), Parent::Kernel).map_err(|error| format!("kill: {error}"))?;
    wait_for(&spinner)?;
    let after = crate::mm::frame::stats();
    ensure!(after == before, "frames leaked: {before:?} -> {after:?}");
    Ok(())
}

fn capability_tables_hold_what_was_granted() -> TestResult {
    use spindle_abi::syscall::{CONSOLE, SPAWN_CONSOLE, SPAWN_EXTENSION_LOADER};
    use spindle_capability::Rights;
    let none = proc::ProcessCapabilities::new(Grants::NONE).map_err(|error| format!("{error}"))?;
    ensure!(none.len() == 1, "an unprivileged table holds {} entries", none.len());
    ensure!(none.check_console(CONSOLE, Rights::READ | Rights::WRITE).is_ok(), "the console handle does not validate");
    ensure!(none.check_console(CONSOLE, Rights::INVOKE) == Err(Error::BadHandle), "the plain console entry carries INVOKE");
    for handle in [0, 2, usize::MAX] {
        ensure!(none.check_console(handle, Rights::WRITE) == Err(Error::BadHandle), "handle {handle} validates");
    }
    ensure!(!none.may_load_extensions() && !none.may_run_console_commands(), "an unprivileged table grants privileges");
    let all = proc::ProcessCapabilities::new(Grants::ALL).map_err(|error| format!("{error}"))?;
    ensure!(all.len() == 3 && all.grants() == Grants::ALL, "a full table holds {} entries, grants {:?}", all.len(), all.grants());
    let loader = Grants { extension_loader: true, console_commands: false };
    ensure!(Grants::from_spawn_flags(SPAWN_EXTENSION_LOADER) == Ok(loader), "flag decoding");
    ensure!(Grants::from_spawn_flags(SPAWN_EXTENSION_LOADER | SPAWN_CONSOLE) == Ok(Grants::ALL), "flag decoding");
    ensure!(Grants::from_spawn_flags(4) == Err(Error::BadArgument), "unknown flag bits are accepted");
    ensure!(Grants::ALL.contains(loader) && !loader.contains(Grants::ALL) && Grants::NONE.contains(Grants::NONE), "contains");
    // Spawned processes get their grants.
    let process = start_with("hello", loader)?;
    let granted = process.capabilities().grants();
    wait_for(&process)?;
    ensure!(granted == loader, "hello spawned with {loader:?} holds {granted:?}");
    Ok(())
}

fn badcalls_with_the_extension_loader() -> TestResult {
    // Another test may have left `hello` loaded; the program loads it itself.
    let _ = crate::ext::unload("hello");
    let process = start_with("badcalls loader", Grants { extension_loader: true, console_commands: false })?;
    let status = wait_for(&process)?;
    ensure!(status == ExitStatus::Exited(0), "badcalls loader ended {status} (its status is the number of mismatches; see the log)");
    ensure!(crate::ext::find("hello").is_none(), "hello is still loaded after badcalls loader");
    Ok(())
}

fn badcalls_with_the_console() -> TestResult {
    let process = start_with("badcalls console", Grants { extension_loader: false, console_commands: true })?;
    let status = wait_for(&process)?;
    ensure!(status == ExitStatus::Exited(0), "badcalls console ended {status} (its status is the number of mismatches; see the log)");
    ensure!(process.last_error().contains("unknown command"), "last_error is {:?}", process.last_error());
    Ok(())
}

fn store_to_a_protected_page_faults() -> TestResult {
    let (process, status) = run("fault protect")?;
    ensure!(status == ExitStatus::Killed(KillCause::Fault), "fault protect ended {status}");
    let report = process.fault().ok_or("no fault was recorded")?;
    ensure!(report.cause == TrapCause::Exception(Exception::StorePageFault), "cause {}", report.cause);
    let anonymous = spindle_process::layout::ANONYMOUS_REGION;
    ensure!(anonymous.contains(&report.stval), "fault address {:#x} is not an anonymous mapping", report.stval);
    Ok(())
}

/// Runs `spsh -s` with every privilege on `script` as console input; returns its status.
fn run_spsh(script: &str) -> Result<ExitStatus, String> {
    crate::console::set_script_input(script);
    let outcome = start_with(crate::shell::USER_SHELL_SCRIPT, Grants::ALL).and_then(|process| wait_for(&process));
    crate::console::clear_script_input();
    outcome
}

fn spsh_runs_script_input() -> TestResult {
    let status = run_spsh("echo one\nrun hello 0\nexit 7\necho never\n")?;
    ensure!(status == ExitStatus::Exited(7), "`exit 7` ended spsh with {status}");
    let status = run_spsh("echo one\nrun hello 3\necho never\n")?;
    ensure!(status == ExitStatus::Exited(1), "a failing line ended spsh with {status}, expected 1");
    let status = run_spsh("no-such-command\n")?;
    ensure!(status == ExitStatus::Exited(1), "an unknown kernel command ended spsh with {status}, expected 1");
    let status = run_spsh("echo fine\nuptime\n\nps\n")?;
    ensure!(status == ExitStatus::Exited(0), "the end of input ended spsh with {status}, expected 0");
    let status = run_spsh("echo no final line break")?;
    ensure!(status == ExitStatus::Exited(0), "a last line without a line break ended spsh with {status}");
    Ok(())
}

fn events_listing_is_the_consoles() -> TestResult {
    let text = crate::events::listing(None);
    let events = crate::events::dispatcher().snapshot();
    ensure!(!events.is_empty() && text.contains("clock.Tick"), "the listing lacks clock.Tick: {text:?}");
    let mut expected = String::new();
    for event in events {
        use core::fmt::Write;
        let _ = write!(expected, "{event}");
    }
    // Counters move between the two snapshots; the lines do not. The listing starts with
    // one line saying what budgets and counters mean.
    ensure!(text.starts_with("clock "), "the listing does not say what the clock is: {text:?}");
    ensure!(text.lines().count() == expected.lines().count() + 1, "the listing differs from the events' own text");
    Ok(())
}

/// Lazy floating-point switching (`arch::user`): two `fptest` processes each find every
/// f-register zero when they first touch the unit (nothing of the kernel's or the other's
/// state), then keep their own patterns across 200 yields that switch between them; a
/// third, started after both used the unit, again finds zeros.
fn floating_point_registers_are_each_processs_own() -> TestResult {
    let first = start("fptest 1 200")?;
    let second = start("fptest 2 200")?;
    for process in [&first, &second] {
        let status = wait_for(process)?;
        ensure!(status == ExitStatus::Exited(0), "fptest (pid {}) ended {status} (its console lines say what differed)", process.pid());
    }
    let (_, status) = run("fptest 3 1")?;
    ensure!(status == ExitStatus::Exited(0), "a third fptest ended {status}");
    Ok(())
}
