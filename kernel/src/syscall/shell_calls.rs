//! System calls for the shell: console input, extension management, introspection,
//! memory protection and kernel console commands (calls 12–20 of
//! `spindle_abi::syscall`).
//!
//! Every call checks in the order its ABI documentation lists the errors: privilege
//! first (`NotPermitted`, from the caller's capability table), then each pointer/length
//! pair with `spindle_process::user_range` and [`AddressSpace::read`]/[`AddressSpace::write`],
//! then the text and the other arguments. A call that fails a check has no effect; in
//! particular `read` checks its buffer before it consumes any input.
//!
//! The listing calls (`ext_list`, `events`, `processes`, `last_error`) share one copy rule:
//! the text is copied up to `length` bytes and its full length returned; `length` 0
//! copies nothing and checks no pointer.
//!
//! A `Refused` error records the kernel's reason in the caller's `last_error`.
//!
//! Limitations: `kernel_command` output goes to the console, not to the caller.

use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec;
use core::fmt::Write;

use spindle_abi::syscall::{Error, MAX_COMMAND_LINE, MAX_NAME, MAX_READ_LENGTH};
use spindle_capability::Rights;
use spindle_process::{PageAccess, user_range};

use super::Arguments;
use crate::ext::{self, ExtensionError, Preference};
use crate::proc::{self, AddressSpace, Process};

/// Copies `text` to the user buffer `pointer..pointer + length` (at most `length` bytes)
/// and returns its full length. Errors: `BadLength` (wrapping), `BadAddress`.
pub(super) fn copy_out(space: &AddressSpace, pointer: usize, length: usize, text: &[u8]) -> Result<usize, Error> {
    let range = user_range(pointer, length, usize::MAX)?;
    let count = range.len().min(text.len());
    if count > 0 {
        space.write(range.start, &text[..count])?;
    }
    Ok(text.len())
}

/// Reads the UTF-8 text at `pointer..pointer + length` into `buffer`. Errors: `BadLength`
/// (0, above `limit` or wrapping), `BadAddress`, `BadArgument` (not UTF-8).
pub(crate) fn read_text<'buffer>(
    space: &AddressSpace,
    pointer: usize,
    length: usize,
    limit: usize,
    buffer: &'buffer mut [u8],
) -> Result<&'buffer str, Error> {
    if length == 0 {
        return Err(Error::BadLength);
    }
    let range = user_range(pointer, length, limit)?;
    let bytes = buffer.get_mut(..range.len()).ok_or(Error::BadLength)?;
    space.read(range.start, bytes)?;
    core::str::from_utf8(bytes).map_err(|_| Error::BadArgument)
}

/// Answers `Refused`, keeping `reason` for the caller's `last_error`.
pub(super) fn refuse(process: &Process, reason: String) -> Error {
    process.set_last_error(reason);
    Error::Refused
}

/// `read(handle, pointer, length)`: BadHandle, BadLength (0, above `MAX_READ_LENGTH`,
/// wrapping), BadAddress (checked before any input is taken); then blocks until input
/// arrives. `None` when the process was killed while waiting.
pub fn read(process: &Arc<Process>, space: &AddressSpace, [handle, pointer, length, ..]: Arguments) -> Option<Result<usize, Error>> {
    let checked = (|| {
        process.capabilities().check_console(handle, Rights::READ)?;
        if length == 0 {
            return Err(Error::BadLength);
        }
        let range = user_range(pointer, length, MAX_READ_LENGTH)?;
        space.check(range.start, range.len(), PageAccess::Write)?;
        Ok(range)
    })();
    let range = match checked {
        Ok(range) => range,
        Err(error) => return Some(Err(error)),
    };
    let mut buffer = vec![0u8; range.len()];
    loop {
        match crate::console::read_input(&mut buffer) {
            crate::console::Input::Bytes(count) => return Some(space.write(range.start, &buffer[..count]).map(|()| count)),
            crate::console::Input::Ended => return Some(Ok(0)),
            crate::console::Input::NotYet => {
                crate::sched::sleep_ticks(1);
                if process.kill_requested() {
                    return None;
                }
            }
        }
    }
}

/// Checks the caller's extension-loading capability. Errors: `NotPermitted`.
fn require_extension_loader(process: &Process) -> Result<(), Error> {
    if process.capabilities().may_load_extensions() { Ok(()) } else { Err(Error::NotPermitted) }
}

/// `ext_load(pointer, length, technology)`: NotPermitted, BadLength, BadAddress,
/// BadArgument (not UTF-8, unknown technology), NotFound, Refused; for a path (`/…`) the
/// file system's errors (NotFound, NoDevice, Io, Corrupt, BadLength for a file too large).
pub fn ext_load(process: &Arc<Process>, space: &AddressSpace, [pointer, length, technology, ..]: Arguments) -> Result<usize, Error> {
    require_extension_loader(process)?;
    let mut buffer = [0u8; MAX_NAME];
    let name = read_text(space, pointer, length, MAX_NAME, &mut buffer)?;
    let technology = Preference::from_number(technology).ok_or(Error::BadArgument)?;
    let loaded = if name.starts_with('/') {
        // A `.kext` file of the file system (the container's kind decides the technology).
        let bytes = crate::services::fs::read_file(name).map_err(|error| match error.code() {
            Error::NotADirectory | Error::IsADirectory => Error::NotFound,
            code => code,
        })?;
        ext::load_kext_bytes(&bytes)
    } else {
        ext::load(name, technology)
    };
    match loaded {
        Ok(extension) => match ext::loaded_summary(&extension) {
            Ok(_) => Ok(0),
            Err(why) => Err(refuse(process, alloc::format!("ext load {name}: {why}"))),
        },
        Err(ExtensionError::Unknown(_)) => Err(Error::NotFound),
        Err(ExtensionError::User(error)) if matches!(*error, ext::user::UserError::NoProgram(_)) => Err(Error::NotFound),
        Err(error) => Err(refuse(process, alloc::format!("ext load {name}: {error}"))),
    }
}

/// `ext_unload(pointer, length)`: NotPermitted, BadLength, BadAddress, BadArgument,
/// NotFound (not loaded).
pub fn ext_unload(process: &Arc<Process>, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    require_extension_loader(process)?;
    let mut buffer = [0u8; MAX_NAME];
    let name = read_text(space, pointer, length, MAX_NAME, &mut buffer)?;
    match ext::unload(name) {
        Ok(()) => Ok(0),
        Err(ExtensionError::NotLoaded(_)) => Err(Error::NotFound),
        Err(error) => Err(refuse(process, alloc::format!("ext unload {name}: {error}"))),
    }
}

/// The loaded extensions, one per line: `NAME TECHNOLOGY VERSION STATE BINDINGS MEMORY
/// CALLS FAULTS OVERRUNS`,
/// tab-separated. STATE is `running`, `DEGRADED: REASON` or `KILLED: REASON` (derived as in
/// every other view, `ext::introspect`); MEMORY is `USED/QUOTA` bytes or
/// `-` (built-in extensions use the kernel heap without a quota).
pub fn extension_listing() -> String {
    let mut text = String::new();
    for report in ext::introspect::reports() {
        let state = report.status.describe().replace(['\t', '\n'], " ");
        let memory = match report.memory {
            Some(usage) => alloc::format!("{}/{}", usage.used_bytes, usage.quota_bytes),
            None => String::from("-"),
        };
        let bindings = report.bindings.iter().filter(|binding| binding.installed).count();
        let totals = report.totals();
        let _ = writeln!(
            text,
            "{}\t{}\t{}\t{state}\t{bindings}\t{memory}\t{}\t{}\t{}",
            report.name, report.technology, report.version, totals.calls, totals.faults, totals.overruns
        );
    }
    text
}

/// `ext_list(pointer, length)`: NotPermitted, BadLength (wrapping), BadAddress.
pub fn ext_list(process: &Arc<Process>, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    require_extension_loader(process)?;
    copy_out(space, pointer, length, extension_listing().as_bytes())
}

/// `ext_stats(pointer, length)`: every extension's record as JSON. BadLength, BadAddress.
pub fn ext_stats(_process: &Arc<Process>, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    copy_out(space, pointer, length, ext::introspect::all_json().as_bytes())
}

/// `events(pointer, length)`: the text of the console's `events`. BadLength, BadAddress.
pub fn events(_process: &Arc<Process>, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    copy_out(space, pointer, length, crate::events::listing(None).as_bytes())
}

/// Every process, one per line: `PID PARENT STATE MEMORY SYSCALLS COMMAND`,
/// tab-separated; MEMORY in bytes, PARENT `kernel`, a pid or `-` (detached).
pub fn process_listing() -> String {
    let mut text = String::new();
    for process in proc::list() {
        let _ = writeln!(
            text,
            "{}\t{}\t{}\t{}\t{}\t{}",
            process.pid(),
            process.parent(),
            crate::shell::process_state(&process),
            process.mapped_bytes(),
            process.system_calls(),
            process.command_line()
        );
    }
    text
}

/// `processes(pointer, length)`: BadLength, BadAddress.
pub fn processes(_process: &Arc<Process>, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    copy_out(space, pointer, length, process_listing().as_bytes())
}

/// `last_error(pointer, length)`: BadLength, BadAddress.
pub fn last_error(process: &Arc<Process>, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    copy_out(space, pointer, length, process.last_error().as_bytes())
}

/// `protect(address, length, access)`: BadAddress, NotPermitted, BadLength, BadArgument
/// (see [`AddressSpace::protect`]).
pub fn protect(_process: &Arc<Process>, space: &mut AddressSpace, [address, length, access, ..]: Arguments) -> Result<usize, Error> {
    space.protect(address, length, access).map(|()| 0)
}

/// `kernel_command(pointer, length)`: NotPermitted, BadLength (0 or above
/// `MAX_COMMAND_LINE`), BadAddress, BadArgument (not UTF-8), Refused (the command
/// failed; the console's error text goes to `last_error`).
pub fn kernel_command(process: &Arc<Process>, space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    if !process.capabilities().may_run_console_commands() {
        return Err(Error::NotPermitted);
    }
    let mut buffer = [0u8; MAX_COMMAND_LINE];
    let line = read_text(space, pointer, length, MAX_COMMAND_LINE, &mut buffer)?;
    match crate::shell::run_line(line) {
        Ok(()) => Ok(0),
        Err(error) => Err(refuse(process, error.to_string())),
    }
}
