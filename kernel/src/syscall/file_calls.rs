//! The file-system calls (`open`, `close`, `seek`, `stat`, `readdir`, `mkdir`, `unlink`,
//! `fsync`, and `read`/`write` on an open file's handle) over `services::fs`.
//!
//! An open file is an entry of the caller's capability table (kind File, rights as
//! opened); its raw handle is what user space passes back, and every use validates it
//! there. Checks run in the ABI's documented order; a call that fails a check has no
//! effect.

use alloc::string::String;
use alloc::vec;

use spindle_abi::syscall::{
    Error, FileStat, MAX_PATH, MAX_READ_LENGTH, MAX_WRITE_LENGTH, OPEN_APPEND, OPEN_CREATE, OPEN_READ, OPEN_TRUNCATE, OPEN_WRITE, SEEK_CURRENT,
    SEEK_END, SEEK_START,
};
use spindle_capability::Rights;
use spindle_process::{PageAccess, user_range};

use super::Arguments;
use super::shell_calls::copy_out;
use crate::proc::{AddressSpace, Process};
use crate::services::fs::{self, FsCallError, OpenMode, Whence};

/// Reads the path at `pointer`/`length`: BadLength (0 or above [`MAX_PATH`]), BadAddress,
/// BadArgument (not UTF-8).
fn read_path(space: &AddressSpace, pointer: usize, length: usize) -> Result<String, Error> {
    if length == 0 {
        return Err(Error::BadLength);
    }
    let range = user_range(pointer, length, MAX_PATH)?;
    let mut bytes = vec![0u8; range.len()];
    space.read(range.start, &mut bytes)?;
    String::from_utf8(bytes).map_err(|_| Error::BadArgument)
}

fn code(error: FsCallError) -> Error {
    error.code()
}

/// `open(pointer, length, flags)`.
pub fn open(process: &Process, space: &AddressSpace, [pointer, length, flags, ..]: Arguments) -> Result<usize, Error> {
    let path = read_path(space, pointer, length)?;
    let known = OPEN_READ | OPEN_WRITE | OPEN_CREATE | OPEN_TRUNCATE | OPEN_APPEND;
    if flags & !known != 0 || flags & (OPEN_READ | OPEN_WRITE) == 0 {
        return Err(Error::BadArgument);
    }
    let mode = OpenMode {
        read: flags & OPEN_READ != 0,
        write: flags & OPEN_WRITE != 0,
        create: flags & OPEN_CREATE != 0,
        truncate: flags & OPEN_TRUNCATE != 0,
        append: flags & OPEN_APPEND != 0,
    };
    let file = fs::open(&path, mode).map_err(code)?;
    let mut rights = Rights::NONE;
    if mode.read {
        rights = rights | Rights::READ;
    }
    if mode.write {
        rights = rights | Rights::WRITE;
    }
    process.capabilities().insert_file(file, rights)
}

/// `close(handle)`.
pub fn close(process: &Process, [handle, ..]: Arguments) -> Result<usize, Error> {
    process.capabilities().close_file(handle).map(|()| 0)
}

/// `read(handle, pointer, length)` on an open file: BadHandle, NotPermitted, BadLength,
/// BadAddress, then the file system's errors.
pub fn read(process: &Process, space: &AddressSpace, [handle, pointer, length, ..]: Arguments) -> Result<usize, Error> {
    let file = process.capabilities().file(handle, Rights::READ)?;
    if length == 0 {
        return Err(Error::BadLength);
    }
    let range = user_range(pointer, length, MAX_READ_LENGTH)?;
    space.check(range.start, range.len(), PageAccess::Write)?;
    let mut buffer = vec![0u8; range.len()];
    let count = fs::read(&file, &mut buffer).map_err(code)?;
    space.write(range.start, &buffer[..count])?;
    Ok(count)
}

/// `write(handle, pointer, length)` on an open file: BadHandle, NotPermitted, BadLength,
/// BadAddress, then the file system's errors.
pub fn write(process: &Process, space: &AddressSpace, [handle, pointer, length, ..]: Arguments) -> Result<usize, Error> {
    let file = process.capabilities().file(handle, Rights::WRITE)?;
    let range = user_range(pointer, length, MAX_WRITE_LENGTH)?;
    if range.is_empty() {
        return Ok(0);
    }
    let mut bytes = vec![0u8; range.len()];
    space.read(range.start, &mut bytes)?;
    fs::write(&file, &bytes).map_err(code)
}

/// `seek(handle, offset, whence)`.
pub fn seek(process: &Process, [handle, offset, whence, ..]: Arguments) -> Result<usize, Error> {
    let file = process.capabilities().file(handle, Rights::NONE)?;
    let whence = match whence {
        SEEK_START => Whence::Start,
        SEEK_CURRENT => Whence::Current,
        SEEK_END => Whence::End,
        _ => return Err(Error::BadArgument),
    };
    fs::seek(&file, offset as i64, whence).map(|position| position as usize).map_err(code)
}

/// `fsync(handle)`.
pub fn fsync(process: &Process, [handle, ..]: Arguments) -> Result<usize, Error> {
    process.capabilities().file(handle, Rights::NONE)?;
    fs::sync().map(|()| 0).map_err(code)
}

/// `stat(pointer, length, out_pointer)`.
pub fn stat(space: &AddressSpace, [pointer, length, out_pointer, ..]: Arguments) -> Result<usize, Error> {
    let path = read_path(space, pointer, length)?;
    let range = user_range(out_pointer, FileStat::SIZE, FileStat::SIZE)?;
    space.check(range.start, range.len(), PageAccess::Write)?;
    let stat = fs::stat(&path).map_err(code)?;
    let record = FileStat {
        inode: u64::from(stat.inode),
        kind: if stat.kind == spindle_service_fs::Kind::Directory { FileStat::DIRECTORY } else { FileStat::FILE },
        size: stat.size,
        blocks: stat.blocks,
        links: u64::from(stat.links),
        changes: stat.changes,
    };
    space.write(range.start, &record.to_bytes())?;
    Ok(0)
}

/// `readdir(pointer, length, out_pointer, out_length)`.
pub fn readdir(space: &AddressSpace, [pointer, length, out_pointer, out_length, ..]: Arguments) -> Result<usize, Error> {
    let path = read_path(space, pointer, length)?;
    let entries = fs::list(&path).map_err(code)?;
    let mut text = String::new();
    for (entry, stat) in entries {
        let kind = if stat.kind == spindle_service_fs::Kind::Directory { 'd' } else { 'f' };
        text.push_str(&alloc::format!("{kind}\t{}\t{}\n", stat.size, entry.name_str().unwrap_or("?")));
    }
    copy_out(space, out_pointer, out_length, text.as_bytes())
}

/// `mkdir(pointer, length)`.
pub fn mkdir(space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    let path = read_path(space, pointer, length)?;
    fs::mkdir(&path).map(|()| 0).map_err(code)
}

/// `unlink(pointer, length)`.
pub fn unlink(space: &AddressSpace, [pointer, length, ..]: Arguments) -> Result<usize, Error> {
    let path = read_path(space, pointer, length)?;
    fs::unlink(&path).map(|()| 0).map_err(code)
}

/// `setpolicy(pointer, length, name_pointer, name_length, technology)`.
pub fn setpolicy(process: &Process, space: &AddressSpace, [pointer, length, name_pointer, name_length, technology, ..]: Arguments) -> Result<usize, Error> {
    if !process.capabilities().may_load_extensions() {
        return Err(Error::NotPermitted);
    }
    let path = read_path(space, pointer, length)?;
    let (name, technology) = policy_extension(space, name_pointer, name_length, technology)?;
    bound(process, crate::services::policy::bind_to_file(&path, &name, technology))
}

/// `setpolicy_process(pid, name_pointer, name_length, technology)`.
pub fn setpolicy_process(process: &Process, space: &AddressSpace, [pid, name_pointer, name_length, technology, ..]: Arguments) -> Result<usize, Error> {
    if !process.capabilities().may_load_extensions() {
        return Err(Error::NotPermitted);
    }
    let (name, technology) = policy_extension(space, name_pointer, name_length, technology)?;
    let pid = if pid == 0 { process.pid() } else { pid as u64 };
    bound(process, crate::services::policy::bind_to_process(pid, &name, technology))
}

/// The extension name and technology arguments of `setpolicy` and `setpolicy_process`.
fn policy_extension(space: &AddressSpace, name_pointer: usize, name_length: usize, technology: usize) -> Result<(String, crate::ext::Preference), Error> {
    if name_length == 0 {
        return Err(Error::BadLength);
    }
    let range = user_range(name_pointer, name_length, spindle_abi::syscall::MAX_NAME)?;
    let mut name = vec![0u8; range.len()];
    space.read(range.start, &mut name)?;
    let name = String::from_utf8(name).map_err(|_| Error::BadArgument)?;
    Ok((name, crate::ext::Preference::from_number(technology).ok_or(Error::BadArgument)?))
}

/// A binding's outcome as a system call's.
fn bound(process: &Process, outcome: Result<(), crate::services::policy::BindError>) -> Result<usize, Error> {
    use crate::services::policy::BindError;
    match outcome {
        Ok(()) => Ok(0),
        Err(BindError::File(error)) => Err(error.code()),
        Err(BindError::Unknown | BindError::NoProcess(_)) => Err(Error::NotFound),
        Err(BindError::Refused(why)) => Err(super::shell_calls::refuse(process, why)),
    }
}

/// `getpolicy(pointer, length, out_pointer, out_length)`.
pub fn getpolicy(space: &AddressSpace, [pointer, length, out_pointer, out_length, ..]: Arguments) -> Result<usize, Error> {
    let text: String = if length == 0 {
        let scoped = crate::services::policy::scoped_policies();
        scoped.iter().map(|(name, technology, scope)| alloc::format!("{name}\t{technology}\t{scope}\n")).collect()
    } else {
        let path = read_path(space, pointer, length)?;
        let bound = crate::services::policy::bound_to_file(&path).map_err(code)?;
        bound.iter().map(|(name, technology)| alloc::format!("{name}\t{technology}\n")).collect()
    };
    copy_out(space, out_pointer, out_length, text.as_bytes())
}

/// `cache_hint(pointer, length, hint, value)`.
pub fn cache_hint(space: &AddressSpace, [pointer, length, hint, value, ..]: Arguments) -> Result<usize, Error> {
    use spindle_abi::event::CacheHint;
    let path = read_path(space, pointer, length)?;
    if ![CacheHint::READ_AHEAD_COUNT, CacheHint::PIN_FIRST, CacheHint::PIN_END].contains(&(hint as u64)) {
        return Err(Error::BadArgument);
    }
    let inode = fs::inode_of(&path).map_err(code)?;
    let value = value as u64;
    crate::services::cache_events::set_hint(inode, hint as u64, (value != CacheHint::UNSET).then_some(value));
    Ok(0)
}

/// `cache_state(pointer, length, out_pointer, out_length)`.
pub fn cache_state(space: &AddressSpace, [pointer, length, out_pointer, out_length, ..]: Arguments) -> Result<usize, Error> {
    let path = if length == 0 { None } else { Some(read_path(space, pointer, length)?) };
    let text = crate::services::policy::cache_state_text(path.as_deref()).map_err(code)?;
    copy_out(space, out_pointer, out_length, text.as_bytes())
}

/// `lock(handle, start, length, flags)`; `None` when the process was killed while waiting.
pub fn lock(process: &Process, [handle, start, length, flags, ..]: Arguments) -> Option<Result<usize, Error>> {
    use spindle_abi::syscall::{LOCK_WAIT, LOCK_WRITE};
    use spindle_service_locks::LockKind;
    let checked = (|| {
        let file = process.capabilities().file(handle, Rights::NONE)?;
        if flags & !(LOCK_WRITE | LOCK_WAIT) != 0 {
            return Err(Error::BadArgument);
        }
        let range = crate::services::locks::range(start as u64, length as u64).map_err(|_| Error::BadArgument)?;
        Ok((file, range))
    })();
    let (file, range) = match checked {
        Ok(checked) => checked,
        Err(error) => return Some(Err(error)),
    };
    let kind = if flags & LOCK_WRITE != 0 { LockKind::Write } else { LockKind::Read };
    match crate::services::locks::lock(file.inode(), process.pid() as u32, kind, range, flags & LOCK_WAIT != 0, &|| process.kill_requested()) {
        Ok(()) => Some(Ok(0)),
        Err(error) => error.code().map(Err),
    }
}

/// `unlock(handle, start, length)`.
pub fn unlock(process: &Process, [handle, start, length, ..]: Arguments) -> Result<usize, Error> {
    let file = process.capabilities().file(handle, Rights::NONE)?;
    let range = crate::services::locks::range(start as u64, length as u64).map_err(|_| Error::BadArgument)?;
    crate::services::locks::unlock(file.inode(), process.pid() as u32, range).map(|()| 0).map_err(|_| Error::TooMany)
}
