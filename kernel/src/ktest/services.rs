//! Tests of cross-address-space services (`proc::service`): a call from the kernel and
//! from a process reaches the server's code in the server's space and returns its
//! answer; a server that loops, overflows its stack, panics or exits inside a call is
//! withdrawn, the caller gets `Contained`, and the kernel and the caller carry on.

use alloc::string::String;

use spindle_abi::syscall::{Error, ExitStatus, KillCause};

use super::{KernelTest, TestResult};
use super::text;
use crate::ensure;
use crate::proc::{self, Grants, Parent, service};

/// The service tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "service::call_reaches_the_server_and_returns", run: call_reaches_the_server },
    KernelTest { name: "service::endless_server_is_timed_out", run: || contained("loop", "overran") },
    KernelTest { name: "service::faulting_server_is_withdrawn", run: || contained("fault", "trapped") },
    KernelTest { name: "service::panicking_server_is_withdrawn", run: || contained("panic", "exited") },
    KernelTest { name: "service::exiting_server_is_withdrawn", run: || contained("exit", "exited") },
    KernelTest { name: "service::a_server_from_a_file_reads_its_image_in_before_serving", run: server_from_a_file },
];

/// Starts `ubench serve NAME MODE` and waits (at most 2 s) until the service is offered.
fn start_server(name: &str, mode: &str) -> Result<(u64, alloc::sync::Arc<service::Service>), String> {
    start_server_from("ubench", name, mode)
}

/// [`start_server`] with the program `program` (`ubench`, or `/bin/ubench` from the file
/// system).
fn start_server_from(program: &str, name: &str, mode: &str) -> Result<(u64, alloc::sync::Arc<service::Service>), String> {
    let server = proc::spawn(&alloc::format!("{program} serve {name} {mode}"), Parent::Kernel, Grants::NONE).map_err(text)?;
    let deadline = crate::time::ticks() + 200;
    loop {
        if let Some(offered) = service::find(name) {
            return Ok((server.pid(), offered));
        }
        ensure!(crate::time::ticks() < deadline, "service {name} not offered 2 s after its server started");
        crate::sched::sleep_ticks(1);
    }
}

fn call_reaches_the_server() -> TestResult {
    let frames_before = crate::mm::frame::stats();
    let (pid, echo) = start_server("test-echo", "echo")?;
    ensure!(echo.pid() == pid && echo.name() == "test-echo", "offered by pid {} as {}", echo.pid(), echo.name());
    let answers: alloc::vec::Vec<_> = [0usize, 41, usize::MAX].iter().map(|&argument| service::call_service(&echo, argument)).collect();
    drop(echo);
    proc::kill(pid, Parent::Kernel).map_err(text)?;
    let status = proc::wait(pid, Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}"))?;
    ensure!(answers == [Ok(1), Ok(42), Ok(0)], "answers {answers:?}");
    ensure!(status == ExitStatus::Killed(KillCause::Request), "server {status}");
    ensure!(service::find("test-echo").is_none(), "the service outlived its server");
    ensure!(crate::mm::frame::stats() == frames_before, "frames changed: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

/// A server run from its ELF file: its strand cannot wait for the disk inside a call, so
/// `service_register` reads its whole image in before it is offered — every page of the
/// image has a frame by then (counted as filled), and calls run with no page of it left
/// to read; all frames come back after the kill.
fn server_from_a_file() -> TestResult {
    let (image_pages, _) = super::vm::image_pages_of("ubench")?;
    // The file system mounted and its cache full first (reading the program must not
    // change the cache's frames between the two counts).
    crate::services::fs::status().map_err(text)?;
    crate::services::fs::refill_buffers(usize::MAX);
    let frames_before = crate::mm::frame::stats();
    let filled_before = crate::services::vm::stats().image_pages;
    let (pid, echo) = start_server_from("/bin/ubench", "test-file-echo", "echo")?;
    let filled = crate::services::vm::stats().image_pages - filled_before;
    let answers: alloc::vec::Vec<_> = [0usize, 41].iter().map(|&argument| service::call_service(&echo, argument)).collect();
    drop(echo);
    proc::kill(pid, Parent::Kernel).map_err(text)?;
    let status = proc::wait(pid, Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}"))?;
    ensure!(filled >= image_pages, "{filled} image pages filled by the time the service was offered, of {image_pages}");
    ensure!(answers == [Ok(1), Ok(42)], "answers {answers:?}");
    ensure!(status == ExitStatus::Killed(KillCause::Request), "server {status}");
    crate::sched::sleep_ticks(1);
    ensure!(crate::mm::frame::stats() == frames_before, "frames changed: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

fn contained(mode: &str, _reason: &str) -> TestResult {
    let name = alloc::format!("test-{mode}");
    let (pid, offered) = start_server(&name, mode)?;
    let answer = service::call_service(&offered, 1);
    drop(offered);
    let still_offered = service::find(&name).is_some();
    // The withdrawn server's `service_register` returns `Contained`; `ubench serve` then
    // exits 1 by itself — unless the call itself ended it (`exit` mode exits 7 inside
    // the call, which the kernel does not let it do: it is withdrawn, then exits 1).
    let status = proc::wait(pid, Parent::Kernel, &|| false).map_err(|error| alloc::format!("{error:?}"))?;
    ensure!(answer == Err(Error::Contained), "{mode}: call answered {answer:?}");
    ensure!(!still_offered, "{mode}: still offered after a failed call");
    ensure!(status == ExitStatus::Exited(1), "{mode}: server {status}");
    Ok(())
}
