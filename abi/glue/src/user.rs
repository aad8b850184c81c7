//! Safe system-call wrappers for user programs (bare-metal RISC-V only).
//!
//! The raw `ecall` ([`call`]) is `unsafe`: a call that writes into memory or unmaps it
//! must not touch memory the program still uses. Every other function here is safe for
//! every input, because the kernel checks each pointer and only *reads* through the
//! pointers these wrappers take as integers.

use spindle_abi::syscall::{ACCESS_READ, ACCESS_WRITE, Error, ExitStatus, Syscall, Technology};

/// Makes system call `syscall` with `arguments` in `a0`..`a5`; returns the value in `a1`
/// or the error in `a0`.
///
/// # Safety
/// Any memory the call writes or unmaps (per its documentation in [`Syscall`]) must not
/// be referenced by the program afterwards as if unchanged: the kernel checks that the
/// memory is the caller's and writable, not that Rust's aliasing rules allow it.
pub unsafe fn call(syscall: Syscall, arguments: [usize; 6]) -> Result<usize, Error> {
    // SAFETY: forwarded from the caller.
    unsafe { call_number(syscall.number(), arguments) }
}

/// [`call`] with a raw number (to test the kernel's answer to unknown numbers).
///
/// # Safety
/// As for [`call`], for the call the number names.
pub unsafe fn call_number(number: usize, arguments: [usize; 6]) -> Result<usize, Error> {
    let code: usize;
    let value: usize;
    // SAFETY: `ecall` traps to the kernel, which follows the convention of this module:
    // it reads a0..a5 and a7, writes a0 and a1 and preserves every other register. Its
    // memory effects are the call's own (covered by the caller's contract).
    unsafe {
        core::arch::asm!(
            "ecall",
            inlateout("a0") arguments[0] => code,
            inlateout("a1") arguments[1] => value,
            in("a2") arguments[2],
            in("a3") arguments[3],
            in("a4") arguments[4],
            in("a5") arguments[5],
            in("a7") number,
            options(nostack),
        );
    }
    match code {
        0 => Ok(value),
        code => Err(Error::from_code(code).unwrap_or(Error::NoSuchCall)),
    }
}

fn reading_call(syscall: Syscall, arguments: [usize; 6]) -> Result<usize, Error> {
    debug_assert!(matches!(
        syscall,
        Syscall::Write | Syscall::Yield | Syscall::GetPid | Syscall::Spawn | Syscall::Wait | Syscall::SleepTicks
            | Syscall::EventCount | Syscall::Kill | Syscall::MapAnonymous | Syscall::ExtLoad | Syscall::ExtUnload
            | Syscall::KernelCommand | Syscall::Open | Syscall::Close | Syscall::Seek | Syscall::MakeDir | Syscall::Unlink
            | Syscall::Fsync | Syscall::SetPolicy | Syscall::CacheHint | Syscall::Lock | Syscall::Unlock | Syscall::VmMap
            | Syscall::VmManage | Syscall::Dirty | Syscall::VmTrap | Syscall::VmLimit | Syscall::VmHot
    ));
    // SAFETY: these calls write no user memory and unmap nothing (map_anonymous only
    // adds a new mapping; extension and console commands act on the kernel), so no
    // memory the program uses can change under it.
    unsafe { call(syscall, arguments) }
}

/// Writes `bytes` to `handle`; returns the number written. Errors as for
/// [`Syscall::Write`].
pub fn write(handle: usize, bytes: &[u8]) -> Result<usize, Error> {
    write_from_address(handle, bytes.as_ptr() as usize, bytes.len())
}

/// [`Syscall::Write`] with a raw address: the kernel only reads there, so any address
/// is safe to pass (a bad one gets [`Error::BadAddress`]).
pub fn write_from_address(handle: usize, address: usize, length: usize) -> Result<usize, Error> {
    reading_call(Syscall::Write, [handle, address, length, 0, 0, 0])
}

/// Ends the process with `status`.
pub fn exit(status: i32) -> ! {
    // SAFETY: exit does not return, so no memory is used afterwards.
    let _ = unsafe { call(Syscall::Exit, [status as u32 as usize, 0, 0, 0, 0, 0]) };
    // The kernel never returns from exit; should it, stop here rather than run on.
    loop {
        core::hint::spin_loop();
    }
}

/// Gives the processor to another ready strand, if any.
pub fn yield_now() {
    let _ = reading_call(Syscall::Yield, [0; 6]);
}

/// The caller's process id.
pub fn getpid() -> usize {
    reading_call(Syscall::GetPid, [0; 6]).unwrap_or(0)
}

/// Starts `command_line` (`NAME [ARGUMENTS…]`) as a child; returns its pid.
pub fn spawn(command_line: &str) -> Result<usize, Error> {
    spawn_from_address(command_line.as_ptr() as usize, command_line.len())
}

/// [`Syscall::Spawn`] with a raw address (the kernel only reads there).
pub fn spawn_from_address(address: usize, length: usize) -> Result<usize, Error> {
    spawn_from_address_with_flags(address, length, 0)
}

/// Starts `command_line` as a child holding the capabilities `flags` names
/// ([`spindle_abi::syscall::SPAWN_EXTENSION_LOADER`], [`spindle_abi::syscall::SPAWN_CONSOLE`]); returns its pid.
pub fn spawn_with_flags(command_line: &str, flags: usize) -> Result<usize, Error> {
    spawn_from_address_with_flags(command_line.as_ptr() as usize, command_line.len(), flags)
}

/// [`Syscall::Spawn`] with a raw address and flags (the kernel only reads there).
pub fn spawn_from_address_with_flags(address: usize, length: usize, flags: usize) -> Result<usize, Error> {
    reading_call(Syscall::Spawn, [address, length, flags, 0, 0, 0])
}

/// Waits for child `pid` to end and returns how it ended.
pub fn wait(pid: usize) -> Result<ExitStatus, Error> {
    let word = reading_call(Syscall::Wait, [pid, 0, 0, 0, 0, 0])?;
    ExitStatus::decode(word as u64).ok_or(Error::BadArgument)
}

/// Ends child `pid`.
pub fn kill(pid: usize) -> Result<(), Error> {
    reading_call(Syscall::Kill, [pid, 0, 0, 0, 0, 0]).map(|_| ())
}

/// Sleeps for `ticks` timer ticks.
pub fn sleep_ticks(ticks: usize) -> Result<(), Error> {
    reading_call(Syscall::SleepTicks, [ticks, 0, 0, 0, 0, 0]).map(|_| ())
}

/// Number of events in the kernel's dispatcher.
pub fn event_count() -> usize {
    reading_call(Syscall::EventCount, [0; 6]).unwrap_or(0)
}

/// Copies the command line into `buffer` (at most its length); returns the full length.
pub fn arguments(buffer: &mut [u8]) -> Result<usize, Error> {
    // SAFETY: the kernel writes at most `buffer.len()` bytes into `buffer`, which is
    // exclusively borrowed here, so no other reference sees the change.
    unsafe { call(Syscall::Arguments, [buffer.as_mut_ptr() as usize, buffer.len(), 0, 0, 0, 0]) }
}

/// A call whose kernel writes at most `buffer.len()` bytes into `buffer` (`arguments`
/// and the listing calls, `read`): `[first, buffer address, buffer length, 0, …]`.
fn buffer_call(syscall: Syscall, first: Option<usize>, buffer: &mut [u8]) -> Result<usize, Error> {
    debug_assert!(matches!(
        syscall,
        Syscall::Read | Syscall::ExtList | Syscall::Events | Syscall::Processes | Syscall::LastError | Syscall::ExtStats | Syscall::DiskState
            | Syscall::HwCounters
    ));
    let (address, length) = (buffer.as_mut_ptr() as usize, buffer.len());
    let arguments = match first {
        Some(first) => [first, address, length, 0, 0, 0],
        None => [address, length, 0, 0, 0, 0],
    };
    // SAFETY: the kernel writes at most `buffer.len()` bytes into `buffer`, which is
    // exclusively borrowed here, so no other reference sees the change.
    unsafe { call(syscall, arguments) }
}

/// Reads console input from `handle` ([`spindle_abi::syscall::CONSOLE`]) into `buffer`: blocks until
/// at least one byte arrives; returns the count, 0 at the end of a script's input.
/// Errors as for [`Syscall::Read`].
pub fn read(handle: usize, buffer: &mut [u8]) -> Result<usize, Error> {
    buffer_call(Syscall::Read, Some(handle), buffer)
}

/// Loads extension `name` as `technology` (needs the extension-loading capability).
/// Errors as for [`Syscall::ExtLoad`].
pub fn ext_load(name: &str, technology: Technology) -> Result<(), Error> {
    ext_load_from_address(name.as_ptr() as usize, name.len(), technology as usize)
}

/// [`Syscall::ExtLoad`] with a raw address and technology number (the kernel only
/// reads there).
pub fn ext_load_from_address(address: usize, length: usize, technology: usize) -> Result<(), Error> {
    reading_call(Syscall::ExtLoad, [address, length, technology, 0, 0, 0]).map(|_| ())
}

/// Unloads extension `name`. Errors as for [`Syscall::ExtUnload`].
pub fn ext_unload(name: &str) -> Result<(), Error> {
    ext_unload_from_address(name.as_ptr() as usize, name.len())
}

/// [`Syscall::ExtUnload`] with a raw address (the kernel only reads there).
pub fn ext_unload_from_address(address: usize, length: usize) -> Result<(), Error> {
    reading_call(Syscall::ExtUnload, [address, length, 0, 0, 0, 0]).map(|_| ())
}

/// Copies the loaded-extension listing into `buffer`; returns its full length.
/// Errors as for [`Syscall::ExtList`].
pub fn ext_list(buffer: &mut [u8]) -> Result<usize, Error> {
    buffer_call(Syscall::ExtList, None, buffer)
}

/// Copies every extension's JSON record into `buffer`; returns the document's full
/// length. Errors as for [`Syscall::ExtStats`].
pub fn ext_stats(buffer: &mut [u8]) -> Result<usize, Error> {
    buffer_call(Syscall::ExtStats, None, buffer)
}

/// Copies the disk's exported state (a `spindle_abi::syscall::DiskState` header, then the
/// queue's entries) into `buffer`; returns its full length. Errors as for
/// [`Syscall::DiskState`].
pub fn disk_state(buffer: &mut [u8]) -> Result<usize, Error> {
    buffer_call(Syscall::DiskState, None, buffer)
}

/// The running hart's counters since boot: traps, `satp` writes, `sfence.vma`s (see
/// [`Syscall::HwCounters`]). Errors as for it.
pub fn hw_counters() -> Result<spindle_abi::syscall::HwCounters, Error> {
    let mut bytes = [0u8; spindle_abi::syscall::HwCounters::SIZE];
    buffer_call(Syscall::HwCounters, None, &mut bytes)?;
    spindle_abi::syscall::HwCounters::from_bytes(&bytes).ok_or(Error::BadLength)
}

/// Opens the file-system path `path` with `flags` (`spindle_abi::syscall::OPEN_*`);
/// returns its handle. Errors as for [`Syscall::Open`].
pub fn open(path: &str, flags: usize) -> Result<usize, Error> {
    reading_call(Syscall::Open, [path.as_ptr() as usize, path.len(), flags, 0, 0, 0])
}

/// Closes an open file. Errors as for [`Syscall::Close`].
pub fn close(handle: usize) -> Result<(), Error> {
    reading_call(Syscall::Close, [handle, 0, 0, 0, 0, 0]).map(|_| ())
}

/// Moves an open file's position to `offset` from `whence`
/// (`spindle_abi::syscall::SEEK_*`); returns the new position. Errors as for
/// [`Syscall::Seek`].
pub fn seek(handle: usize, offset: i64, whence: usize) -> Result<u64, Error> {
    reading_call(Syscall::Seek, [handle, offset as usize, whence, 0, 0, 0]).map(|position| position as u64)
}

/// Makes everything written to the file system durable. Errors as for [`Syscall::Fsync`].
pub fn fsync(handle: usize) -> Result<(), Error> {
    reading_call(Syscall::Fsync, [handle, 0, 0, 0, 0, 0]).map(|_| ())
}

/// Makes directory `path`. Errors as for [`Syscall::MakeDir`].
pub fn mkdir(path: &str) -> Result<(), Error> {
    reading_call(Syscall::MakeDir, [path.as_ptr() as usize, path.len(), 0, 0, 0, 0]).map(|_| ())
}

/// Removes the file or empty directory `path`. Errors as for [`Syscall::Unlink`].
pub fn unlink(path: &str) -> Result<(), Error> {
    reading_call(Syscall::Unlink, [path.as_ptr() as usize, path.len(), 0, 0, 0, 0]).map(|_| ())
}

/// What `path` is. Errors as for [`Syscall::Stat`].
pub fn stat(path: &str) -> Result<spindle_abi::syscall::FileStat, Error> {
    let mut record = [0u8; spindle_abi::syscall::FileStat::SIZE];
    // SAFETY: the kernel writes `FileStat::SIZE` bytes into `record`, exclusively borrowed
    // here, and only reads the path.
    unsafe { call(Syscall::Stat, [path.as_ptr() as usize, path.len(), record.as_mut_ptr() as usize, 0, 0, 0]) }?;
    spindle_abi::syscall::FileStat::from_bytes(&record).ok_or(Error::BadLength)
}

/// Copies directory `path`'s listing (`KIND\tSIZE\tNAME` lines) into `buffer`; returns its
/// full length. Errors as for [`Syscall::ReadDir`].
pub fn readdir(path: &str, buffer: &mut [u8]) -> Result<usize, Error> {
    let arguments = [path.as_ptr() as usize, path.len(), buffer.as_mut_ptr() as usize, buffer.len(), 0, 0];
    // SAFETY: the kernel writes at most `buffer.len()` bytes into `buffer`, exclusively
    // borrowed here, and only reads the path.
    unsafe { call(Syscall::ReadDir, arguments) }
}

/// Binds policy extension `name` (loaded as `technology`) to the file at `path` only.
/// Errors as for [`Syscall::SetPolicy`].
pub fn setpolicy(path: &str, name: &str, technology: Technology) -> Result<(), Error> {
    reading_call(Syscall::SetPolicy, [path.as_ptr() as usize, path.len(), name.as_ptr() as usize, name.len(), technology as usize, 0]).map(|_| ())
}

/// Binds policy extension `name` (loaded as `technology`) to the file-system calls of
/// process `pid` (0: the caller) only. Errors as for [`Syscall::SetProcessPolicy`].
pub fn setpolicy_process(pid: u64, name: &str, technology: Technology) -> Result<(), Error> {
    reading_call(Syscall::SetProcessPolicy, [pid as usize, name.as_ptr() as usize, name.len(), technology as usize, 0, 0]).map(|_| ())
}

/// Copies the policy extensions bound to `path` (`NAME\tTECHNOLOGY` lines) into `buffer`;
/// returns the listing's full length. Errors as for [`Syscall::GetPolicy`].
pub fn getpolicy(path: &str, buffer: &mut [u8]) -> Result<usize, Error> {
    let arguments = [path.as_ptr() as usize, path.len(), buffer.as_mut_ptr() as usize, buffer.len(), 0, 0];
    // SAFETY: the kernel writes at most `buffer.len()` bytes into `buffer`, exclusively
    // borrowed here, and only reads the path.
    unsafe { call(Syscall::GetPolicy, arguments) }
}

/// Sets application hint `hint` (`spindle_abi::event::CacheHint`) of the file at `path`
/// to `value` (`CacheHint::UNSET` clears it). Errors as for [`Syscall::CacheHint`].
pub fn cache_hint(path: &str, hint: u64, value: u64) -> Result<(), Error> {
    reading_call(Syscall::CacheHint, [path.as_ptr() as usize, path.len(), hint as usize, value as usize, 0, 0]).map(|_| ())
}

/// Copies the buffer cache's exported state (text; `path` "" for no file line) into
/// `buffer`; returns its full length. Errors as for [`Syscall::CacheState`].
pub fn cache_state(path: &str, buffer: &mut [u8]) -> Result<usize, Error> {
    let arguments = [path.as_ptr() as usize, path.len(), buffer.as_mut_ptr() as usize, buffer.len(), 0, 0];
    // SAFETY: the kernel writes at most `buffer.len()` bytes into `buffer`, exclusively
    // borrowed here, and only reads the path.
    unsafe { call(Syscall::CacheState, arguments) }
}

/// Locks bytes `[start, start + length)` (`length` 0: to the end) of the open file
/// `handle` (`flags`: `spindle_abi::syscall::LOCK_WRITE`, `LOCK_WAIT`). Errors as for
/// [`Syscall::Lock`].
pub fn lock(handle: usize, start: u64, length: u64, flags: usize) -> Result<(), Error> {
    reading_call(Syscall::Lock, [handle, start as usize, length as usize, flags, 0, 0]).map(|_| ())
}

/// Releases the caller's locks on `[start, start + length)` of `handle`. Errors as for
/// [`Syscall::Unlock`].
pub fn unlock(handle: usize, start: u64, length: u64) -> Result<(), Error> {
    reading_call(Syscall::Unlock, [handle, start as usize, length as usize, 0, 0, 0]).map(|_| ())
}

/// Copies the dispatcher's event listing into `buffer`; returns its full length.
/// Errors as for [`Syscall::Events`].
pub fn events(buffer: &mut [u8]) -> Result<usize, Error> {
    buffer_call(Syscall::Events, None, buffer)
}

/// Copies the process listing into `buffer`; returns its full length.
/// Errors as for [`Syscall::Processes`].
pub fn processes(buffer: &mut [u8]) -> Result<usize, Error> {
    buffer_call(Syscall::Processes, None, buffer)
}

/// Copies the kernel's words for the last `Refused` error into `buffer`; returns
/// their full length. Errors as for [`Syscall::LastError`].
pub fn last_error(buffer: &mut [u8]) -> Result<usize, Error> {
    buffer_call(Syscall::LastError, None, buffer)
}

/// Runs one kernel console line (needs the console capability); output goes to the
/// console. Errors as for [`Syscall::KernelCommand`].
pub fn kernel_command(line: &str) -> Result<(), Error> {
    kernel_command_from_address(line.as_ptr() as usize, line.len())
}

/// [`Syscall::KernelCommand`] with a raw address (the kernel only reads there).
pub fn kernel_command_from_address(address: usize, length: usize) -> Result<(), Error> {
    reading_call(Syscall::KernelCommand, [address, length, 0, 0, 0, 0]).map(|_| ())
}

/// The platform timer (`time` CSR; 10 MHz on QEMU `virt`). The kernel lets U-mode
/// read the counters (`scounteren`).
pub fn time() -> u64 {
    let value: u64;
    // SAFETY: reading `time` has no side effects; the kernel enables it for U-mode.
    unsafe { core::arch::asm!("rdtime {}", out(reg) value, options(nomem, nostack)) };
    value
}

/// Instructions retired by this hart (`instret`; exact under QEMU `-icount`).
pub fn instructions_retired() -> u64 {
    let value: u64;
    // SAFETY: reading `instret` has no side effects; the kernel enables it for U-mode.
    unsafe { core::arch::asm!("rdinstret {}", out(reg) value, options(nomem, nostack)) };
    value
}

/// Creates a demand-zero region of `length` bytes with `protection`
/// (`spindle_abi::syscall::VM_READ` | `VM_WRITE` | `VM_EXECUTE`); returns its address.
/// Errors as for [`Syscall::VmMap`]. The region stays until unmapped with
/// [`Syscall::Unmap`] or the process ends; touching it is the caller's business.
pub fn vm_map(length: usize, protection: usize) -> Result<usize, Error> {
    reading_call(Syscall::VmMap, [length, protection, 0, 0, 0, 0])
}

/// Marks the `vm_map` region at `address` managed, assigned to extension `pager` if given;
/// returns the region's id. Errors as for [`Syscall::VmManage`].
pub fn vm_manage(address: usize, pager: Option<&str>) -> Result<u64, Error> {
    let (pointer, length) = pager.map_or((0, 0), |name| (name.as_ptr() as usize, name.len()));
    reading_call(Syscall::VmManage, [address, pointer, length, 0, 0, 0]).map(|region| region as u64)
}

/// Appel & Li's `trap`: the faults of the `vm_map` region at `address` go to handlers
/// (assigned to extension `handler` if given); returns the region's id. Errors as for
/// [`Syscall::VmTrap`].
pub fn vm_trap(address: usize, handler: Option<&str>) -> Result<u64, Error> {
    let (pointer, length) = handler.map_or((0, 0), |name| (name.as_ptr() as usize, name.len()));
    reading_call(Syscall::VmTrap, [address, pointer, length, 0, 0, 0]).map(|region| region as u64)
}

/// Appel & Li's `dirty`: whether the page at `address` was written. Errors as for
/// [`Syscall::Dirty`].
pub fn dirty(address: usize) -> Result<bool, Error> {
    reading_call(Syscall::Dirty, [address, 0, 0, 0, 0, 0]).map(|dirty| dirty != 0)
}

/// Limits this process's `vm_map` memory to `pages` frames (0: no limit); pages beyond
/// go to swap. Errors as for [`Syscall::VmLimit`].
pub fn vm_limit(pages: usize) -> Result<(), Error> {
    // Paging changes no byte the program sees: a page comes back as it went.
    reading_call(Syscall::VmLimit, [pages, 0, 0, 0, 0, 0]).map(|_| ())
}

/// Puts the page at `address` into hot-list slot `slot` (64: clears the list); returns its
/// frame number. Errors as for [`Syscall::VmHot`].
pub fn vm_hot(address: usize, slot: usize) -> Result<u64, Error> {
    reading_call(Syscall::VmHot, [address, slot, 0, 0, 0, 0]).map(|frame| frame as u64)
}

/// Appel & Li's `prot1`, `protN` (`count` pages) and `unprotN` (`protection` `None`).
///
/// # Safety
/// No reference of the program may point into the pages whose access is narrowed (an
/// access through it would fault), as for [`call`].
pub unsafe fn protect_pages(address: usize, count: usize, protection: Option<usize>) -> Result<(), Error> {
    let (syscall, arguments) = match (count, protection) {
        (1, Some(protection)) => (Syscall::Prot1, [address, protection, 0, 0, 0, 0]),
        (count, Some(protection)) => (Syscall::ProtN, [address, count, protection, 0, 0, 0]),
        (count, None) => (Syscall::UnprotN, [address, count, 0, 0, 0, 0]),
    };
    // SAFETY: forwarded from the caller.
    unsafe { call(syscall, arguments) }.map(|_| ())
}

/// Anonymous memory from [`Syscall::MapAnonymous`], owned: unmapped on drop. Its
/// access can be changed with [`AnonymousRegion::protect`].
#[derive(Debug)]
pub struct AnonymousRegion {
    address: usize,
    length: usize,
    access: usize,
}

impl AnonymousRegion {
    /// Maps `length` bytes (rounded up to pages) of zeroed read-write memory.
    pub fn map(length: usize) -> Result<AnonymousRegion, Error> {
        let address = reading_call(Syscall::MapAnonymous, [length, 0, 0, 0, 0, 0])?;
        let length = length.div_ceil(spindle_abi::syscall::PAGE_SIZE) * spindle_abi::syscall::PAGE_SIZE;
        Ok(AnonymousRegion { address, length, access: ACCESS_READ | ACCESS_WRITE })
    }

    /// Its address.
    pub fn address(&self) -> usize {
        self.address
    }

    /// Its length in bytes (a multiple of the page size).
    pub fn len(&self) -> usize {
        self.length
    }

    /// Whether it is empty (never: mappings have at least one page).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Its access ([`ACCESS_READ`] | [`ACCESS_WRITE`], as last set).
    pub fn access(&self) -> usize {
        self.access
    }

    /// Changes its access with [`Syscall::Protect`] ([`ACCESS_READ`] | [`ACCESS_WRITE`];
    /// 0 makes it inaccessible). Needs `&mut self`, so no slice of it is alive.
    pub fn protect(&mut self, access: usize) -> Result<(), Error> {
        // SAFETY: the region is this process's own anonymous mapping and no reference
        // into it exists (`&mut self`); `as_slice`/`as_mut_slice` check the new access
        // before handing one out again.
        unsafe { call(Syscall::Protect, [self.address, self.length, access, 0, 0, 0]) }?;
        // The kernel reads write as read-write.
        self.access = if access & ACCESS_WRITE != 0 { ACCESS_READ | ACCESS_WRITE } else { access };
        Ok(())
    }

    /// The memory, read-only. Panics if the region is not readable (see
    /// [`Self::protect`]).
    pub fn as_slice(&self) -> &[u8] {
        assert!(self.access & ACCESS_READ != 0, "the region is not readable");
        // SAFETY: the kernel mapped `length` bytes at `address`, readable (checked just
        // above), and unmaps them only on `drop`; no mutable slice exists while `&self`
        // is borrowed.
        unsafe { core::slice::from_raw_parts(self.address as *const u8, self.length) }
    }

    /// The memory. Panics if the region is not writable (see [`Self::protect`]).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        assert!(self.access & ACCESS_WRITE != 0, "the region is not writable");
        // The kernel mapped `length` zeroed read-write bytes at `address` for this
        // process and unmaps them only when asked to, which only `drop` does.
        // SAFETY: the memory is mapped and writable while `self` lives (its access is
        // read-write, checked just above), and the slice borrows `self` exclusively, so
        // no other reference to it exists.
        unsafe { core::slice::from_raw_parts_mut(self.address as *mut u8, self.length) }
    }
}

impl Drop for AnonymousRegion {
    fn drop(&mut self) {
        // SAFETY: no reference into the region outlives `self` (`as_mut_slice`
        // borrows it), so unmapping cannot leave one dangling.
        let _ = unsafe { call(Syscall::Unmap, [self.address, self.length, 0, 0, 0, 0]) };
    }
}
