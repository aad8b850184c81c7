//! System calls: the kernel side of `spindle_abi::syscall`.
//!
//! [`handle`] runs on the calling process's strand, with interrupts on, after its
//! `ecall` trapped: it reads the number from `a7` and the arguments from `a0`..`a5`,
//! dispatches, and writes the error code to `a0` and the result to `a1`. Every pointer and
//! length is checked first by `spindle_process::user_range` (inside user space, no
//! wrap-around, under the call's limit) and then page by page against the caller's page
//! table by [`AddressSpace::read`]/[`AddressSpace::write`]; a bad one gets the documented
//! error code, never a kernel fault. Checks happen in the order the ABI documents the
//! errors, and a call that fails a check has no effect.
//!
//! Handles and privileges come from the caller's capability table
//! (`proc::capabilities`): `write`/`read` validate the console handle through it, and the
//! shell's calls ([`shell_calls`]) check its privileges.
//!
//! File-system calls and `read`/`write` on a handle other than the console go to
//! [`file_calls`].
//!
//! Limitations: `write` copies through a kernel buffer (at most `MAX_WRITE_LENGTH` bytes).

mod file_calls;
pub(crate) mod shell_calls;

use alloc::sync::Arc;
use alloc::vec;

use spindle_abi::syscall::{CONSOLE, Error, MAX_COMMAND_LINE, MAX_SLEEP_TICKS, MAX_WRITE_LENGTH, Syscall};
use spindle_capability::Rights;
use spindle_process::user_range;

use crate::arch::user::{UserContext, reg};
use crate::proc::{self, AddressSpace, Grants, Parent, Process, WaitError};

/// What the process does after a system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Returns to U-mode with the result in `a0`/`a1`.
    Return,
    /// Ends with this status (the `exit` call).
    Exit(i32),
    /// Ends because it was killed while blocked in the call.
    Killed,
}

/// The six argument registers.
pub(crate) type Arguments = [usize; 6];

/// Handles the system call `context` trapped with, for `process` in `space`.
pub fn handle(process: &Arc<Process>, space: &mut AddressSpace, context: &mut UserContext) -> Outcome {
    process.count_system_call();
    let number = context.register(reg::A7);
    let arguments: Arguments = core::array::from_fn(|index| context.register(reg::A0 + index));
    let result = match Syscall::from_number(number) {
        None => Err(Error::NoSuchCall),
        Some(Syscall::Exit) => return Outcome::Exit(arguments[0] as u32 as i32),
        Some(Syscall::Write) if arguments[0] != CONSOLE => file_calls::write(process, space, arguments),
        Some(Syscall::Write) => write(process, space, arguments),
        Some(Syscall::Yield) => {
            crate::sched::yield_now();
            Ok(0)
        }
        Some(Syscall::GetPid) => Ok(process.pid() as usize),
        Some(Syscall::Spawn) => spawn(process, space, arguments),
        Some(Syscall::Wait) => match proc::wait(arguments[0] as u64, Parent::Process(process.pid()), &|| process.kill_requested()) {
            Ok(status) => Ok(status.encode() as usize),
            Err(WaitError::Refused(error)) => Err(error),
            Err(WaitError::Interrupted) => return Outcome::Killed,
        },
        Some(Syscall::SleepTicks) => match sleep(process, arguments[0]) {
            Some(result) => result,
            None => return Outcome::Killed,
        },
        Some(Syscall::MapAnonymous) => space.map_anonymous(arguments[0]),
        Some(Syscall::VmMap) => space.vm_map(arguments[0], arguments[1]),
        Some(Syscall::VmManage) => vm_manage(space, arguments, false),
        Some(Syscall::VmTrap) => vm_manage(space, arguments, true),
        Some(Syscall::Prot1) => space.protect_pages(arguments[0], 1, Some(arguments[1])).map(|()| 0),
        Some(Syscall::ProtN) => space.protect_pages(arguments[0], arguments[1], Some(arguments[2])).map(|()| 0),
        Some(Syscall::UnprotN) => space.protect_pages(arguments[0], arguments[1], None).map(|()| 0),
        Some(Syscall::Dirty) => space.dirty(arguments[0]).map(usize::from),
        Some(Syscall::VmLimit) => space.set_limit(arguments[0]).map(|()| 0),
        Some(Syscall::VmHot) => space.hot(arguments[0], arguments[1]).map(|frame| frame as usize),
        Some(Syscall::Unmap) => space.unmap(arguments[0], arguments[1]).map(|()| 0),
        Some(Syscall::EventCount) => Ok(crate::events::dispatcher().snapshot().len()),
        Some(Syscall::HwCounters) => hw_counters(space, arguments),
        Some(Syscall::Arguments) => copy_arguments(process, space, arguments),
        Some(Syscall::Kill) => {
            let pid = arguments[0] as u64;
            if pid == process.pid() {
                Err(Error::NotPermitted)
            } else {
                proc::kill(pid, Parent::Process(process.pid())).map(|()| 0)
            }
        }
        Some(Syscall::Read) if arguments[0] != CONSOLE => file_calls::read(process, space, arguments),
        Some(Syscall::Read) => match shell_calls::read(process, space, arguments) {
            Some(result) => result,
            None => return Outcome::Killed,
        },
        Some(Syscall::ExtLoad) => shell_calls::ext_load(process, space, arguments),
        Some(Syscall::ExtUnload) => shell_calls::ext_unload(process, space, arguments),
        Some(Syscall::ExtList) => shell_calls::ext_list(process, space, arguments),
        Some(Syscall::ExtStats) => shell_calls::ext_stats(process, space, arguments),
        Some(Syscall::DiskState) => disk_state(space, arguments),
        Some(Syscall::Open) => file_calls::open(process, space, arguments),
        Some(Syscall::Close) => file_calls::close(process, arguments),
        Some(Syscall::Seek) => file_calls::seek(process, arguments),
        Some(Syscall::Stat) => file_calls::stat(space, arguments),
        Some(Syscall::ReadDir) => file_calls::readdir(space, arguments),
        Some(Syscall::MakeDir) => file_calls::mkdir(space, arguments),
        Some(Syscall::Unlink) => file_calls::unlink(space, arguments),
        Some(Syscall::Fsync) => file_calls::fsync(process, arguments),
        Some(Syscall::SetPolicy) => file_calls::setpolicy(process, space, arguments),
        Some(Syscall::SetProcessPolicy) => file_calls::setpolicy_process(process, space, arguments),
        Some(Syscall::GetPolicy) => file_calls::getpolicy(space, arguments),
        Some(Syscall::CacheHint) => file_calls::cache_hint(space, arguments),
        Some(Syscall::CacheState) => file_calls::cache_state(space, arguments),
        Some(Syscall::Lock) => match file_calls::lock(process, arguments) {
            Some(result) => result,
            None => return Outcome::Killed,
        },
        Some(Syscall::Unlock) => file_calls::unlock(process, arguments),
        Some(Syscall::Events) => shell_calls::events(process, space, arguments),
        Some(Syscall::Processes) => shell_calls::processes(process, space, arguments),
        Some(Syscall::LastError) => shell_calls::last_error(process, space, arguments),
        Some(Syscall::Protect) => shell_calls::protect(process, space, arguments),
        Some(Syscall::KernelCommand) => shell_calls::kernel_command(process, space, arguments),
        Some(Syscall::UpcallServe) => match crate::ext::user::serve(process, space, arguments[0], arguments[1]) {
            Ok(value) => Ok(value),
            Err(Some(error)) => Err(error),
            Err(None) => return Outcome::Killed,
        },
        // Valid only inside an upcall (answered by `ext::user`).
        Some(Syscall::UpcallReturn | Syscall::KernelFunction) => Err(Error::WrongState),
        Some(Syscall::ServiceRegister) => match proc::service::register(process, space, arguments) {
            Ok(value) => Ok(value),
            Err(Some(error)) => Err(error),
            Err(None) => return Outcome::Killed,
        },
        Some(Syscall::ServiceCall) => proc::service::call(space, arguments),
        // Valid only inside a service call (answered by `proc::migrate`).
        Some(Syscall::ServiceReturn) => Err(Error::WrongState),
    };
    let (code, value) = match result {
        Ok(value) => (0, value),
        Err(error) => (error.code(), 0),
    };
    context.set_register(reg::A0, code);
    context.set_register(reg::A1, value);
    Outcome::Return
}

/// `write(handle, pointer, length)`: BadHandle, then BadLength/BadAddress.
fn write(process: &Process, space: &AddressSpace, [handle, pointer, length, ..]: Arguments) -> Result<usize, Error> {
    process.capabilities().check_console(handle, Rights::WRITE)?;
    let range = user_range(pointer, length, MAX_WRITE_LENGTH)?;
    if range.is_empty() {
        return Ok(0);
    }
    let mut bytes = vec![0; length];
    space.read(range.start, &mut bytes)?;
    crate::print!("{}", alloc::string::String::from_utf8_lossy(&bytes));
    Ok(length)
}

/// `vm_manage(address, pointer, length)` (or `vm_trap` with `trap`): the name (if
/// `length` > 0) is read first — BadLength, BadAddress, BadArgument — then the region's
/// errors.
fn vm_manage(space: &mut AddressSpace, [address, pointer, length, ..]: Arguments, trap: bool) -> Result<usize, Error> {
    let mut buffer = [0u8; spindle_abi::syscall::MAX_NAME];
    let name = if length == 0 { None } else { Some(shell_calls::read_text(space, pointer, length, spindle_abi::syscall::MAX_NAME, &mut buffer)?) };
    let region = if trap { space.vm_trap(address, name) } else { space.vm_manage(address, name) };
    region.map(|region| region as usize)
}

/// `disk_state(pointer, length)`: NoDevice (no disk service), then BadLength (wrapping)
/// and BadAddress; copies the disk's exported state (`services::disk::exported_state`).
fn disk_state(space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    let state = crate::services::disk::exported_state(crate::time::now_ns()).ok_or(Error::NoDevice)?;
    shell_calls::copy_out(space, pointer, length, &state)
}

/// `hw_counters(pointer, length)`: this hart's traps, `satp` writes and `sfence.vma`s
/// (the `satp` writes' included), as the benchmarks' `bench hw` lines count them.
fn hw_counters(space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    shell_calls::copy_out(space, pointer, length, &crate::arch::hart::current().hardware_events().to_bytes())
}

/// `spawn(pointer, length, flags)`: BadLength (0 or too long), BadAddress, BadArgument
/// (not UTF-8, unknown flag bits), NotPermitted (a flag the caller does not hold), then
/// the spawn's own errors.
fn spawn(process: &Arc<Process>, space: &AddressSpace, [pointer, length, flags, ..]: Arguments) -> Result<usize, Error> {
    if length == 0 {
        return Err(Error::BadLength);
    }
    let range = user_range(pointer, length, MAX_COMMAND_LINE)?;
    let mut bytes = [0u8; MAX_COMMAND_LINE];
    let line = &mut bytes[..range.len()];
    space.read(range.start, line)?;
    let line = core::str::from_utf8(line).map_err(|_| Error::BadArgument)?;
    let grants = Grants::from_spawn_flags(flags)?;
    if !process.capabilities().grants().contains(grants) {
        return Err(Error::NotPermitted);
    }
    let child = proc::spawn(line, Parent::Process(process.pid()), grants).map_err(|error| error.code())?;
    Ok(child.pid() as usize)
}

/// `sleep_ticks(ticks)`; `None` when the process was killed while sleeping.
fn sleep(process: &Process, ticks: usize) -> Option<Result<usize, Error>> {
    if ticks > MAX_SLEEP_TICKS {
        return Some(Err(Error::BadArgument));
    }
    let wake_at = crate::time::ticks() + ticks as u64;
    loop {
        let now = crate::time::ticks();
        if now >= wake_at {
            return Some(Ok(0));
        }
        crate::sched::sleep_ticks(wake_at - now);
        if process.kill_requested() {
            return None;
        }
    }
}

/// `arguments(pointer, length)`: BadLength (wrapping), BadAddress (the bytes to be
/// written are not writable user memory); length 0 checks nothing.
fn copy_arguments(process: &Process, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    let line = process.command_line().as_bytes();
    let range = user_range(pointer, length, usize::MAX)?;
    let count = range.len().min(line.len());
    if count > 0 {
        space.write(range.start, &line[..count])?;
    }
    Ok(line.len())
}
