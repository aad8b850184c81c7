//! System calls: numbers, argument conventions, limits and error codes of the interface
//! between user programs and the kernel, declared once for the kernel's dispatcher, the
//! user runtime and the documentation (`docs/user-space.md`).
//!
//! **Convention.** A program executes `ecall` in U-mode with the call number in `a7` and
//! up to six arguments in `a0`..`a5`. On return `a0` holds 0 for success or an [`Error`]
//! code, and `a1` the call's result (0 when it has none, and on error); every other
//! register is preserved. Pointers are user virtual addresses and lengths are byte counts;
//! the kernel checks every pointer/length pair against the caller's address space, page by
//! page (mapped, user-accessible, readable or writable as the call needs), and answers a bad
//! one with [`Error::BadAddress`] or [`Error::BadLength`] — never with a kernel fault.
//!
//! The calls are declared once, in the table at the bottom ([`Syscall`]), with their
//! numbers, argument names, result and the errors each returns.
//!
//! For user programs (bare-metal RISC-V only) [`user`] wraps every call in a safe
//! function; the raw `ecall` is the only `unsafe` there. The kernel uses [`Syscall`],
//! [`Error`], [`ExitStatus`] and the limits.
//!
//! Handles and privileges: the kernel keeps a capability table per process (the console,
//! and the extension-loading and console-command capabilities when granted); user space
//! names the console with the well-known number [`CONSOLE`], which the kernel maps to the
//! table's console entry and validates on every use.
//!
//! Limitations: one handle number exists ([`CONSOLE`]); no call hands out table handles yet.

use core::fmt;

/// The only handle number so far: the kernel console (`write`, `read`); the kernel maps
/// it to the caller's console capability.
pub const CONSOLE: usize = 1;
/// Largest `length` of one [`Syscall::Write`]; longer writes get [`Error::BadLength`]
/// (the runtime splits its output below this).
pub const MAX_WRITE_LENGTH: usize = 64 * 1024;
/// Largest command line (`NAME [ARGUMENTS…]`) accepted by [`Syscall::Spawn`].
pub const MAX_COMMAND_LINE: usize = 256;
/// Largest `length` of one [`Syscall::MapAnonymous`] (2 MiB).
pub const MAX_MAP_LENGTH: usize = 2 * 1024 * 1024;
/// Anonymous memory one process may hold at once (4 MiB); more gets [`Error::NoMemory`].
pub const MAX_ANONYMOUS_BYTES: usize = 4 * 1024 * 1024;
/// Anonymous regions one process may hold at once; more gets [`Error::TooMany`].
pub const MAX_ANONYMOUS_REGIONS: usize = 32;
/// Longest [`Syscall::SleepTicks`] (one hour at 100 Hz); longer gets [`Error::BadArgument`].
pub const MAX_SLEEP_TICKS: usize = 360_000;
/// Granularity of anonymous mappings: lengths are rounded up to this.
pub const PAGE_SIZE: usize = 4096;
/// Largest `length` of one [`Syscall::Read`].
pub const MAX_READ_LENGTH: usize = 4096;
/// Longest extension or service name.
pub const MAX_NAME: usize = 64;
/// [`Syscall::Protect`] access bit: readable.
pub const ACCESS_READ: usize = 1;
/// [`Syscall::Protect`] access bit: writable (implies readable).
pub const ACCESS_WRITE: usize = 2;
/// [`Syscall::Spawn`] flag: give the child the extension-loading capability (the caller
/// must hold it).
pub const SPAWN_EXTENSION_LOADER: usize = 1;
/// [`Syscall::Spawn`] flag: give the child the console capability (the caller must hold it).
pub const SPAWN_CONSOLE: usize = 2;

/// The technology [`Syscall::ExtLoad`] loads an extension as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Technology {
    /// The bundled native `.kext` if there is one, else the built-in crate.
    Default = 0,
    /// The crate linked into the kernel.
    BuiltIn = 1,
    /// The bundled Wasm build, run by `wasmi`.
    Wasm = 2,
    /// The bundled user-level build (program `bin/ext-NAME`), started as a process that
    /// serves upcalls.
    User = 3,
}

impl Technology {
    /// The technology with this number.
    pub const fn from_number(number: usize) -> Option<Technology> {
        match number {
            0 => Some(Technology::Default),
            1 => Some(Technology::BuiltIn),
            2 => Some(Technology::Wasm),
            3 => Some(Technology::User),
            _ => None,
        }
    }

    /// The technology's short name in commands, benchmark rows and messages (`native` —
    /// the default —, `builtin`, `wasm`, `user`).
    pub const fn label(self) -> &'static str {
        match self {
            Technology::Default => "native",
            Technology::BuiltIn => "builtin",
            Technology::Wasm => "wasm",
            Technology::User => "user",
        }
    }
}

/// What a user-level extension registers with [`Syscall::UpcallServe`] (`#[repr(C)]`,
/// read by the kernel from user memory and checked field by field).
///
/// Records travel in registers (every event record is at most [`UPCALL_RECORD_WORDS`]
/// words): for each upcall the kernel enters U-mode at `entry` with `sp = stack_top`,
/// `a0` = binding index, `a1` = argument record size, `a2` = result record size and the
/// argument record's words in `a3`..`a6` (little-endian bytes, as
/// `spindle_abi::extension::encode` lays them out); the handler ends with
/// [`Syscall::UpcallReturn`] carrying a status and the result record's words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct UpcallRegistration {
    /// Address of the extension's manifest text (`spindle_loader::Manifest`, as the
    /// trusted builder writes it for native extensions).
    pub manifest: u64,
    /// Its length in bytes (at most [`MAX_UPCALL_MANIFEST`]).
    pub manifest_length: u64,
    /// Address of an array of `spindle_abi::native::BindingInfo`, one per binding.
    pub bindings: u64,
    /// Number of bindings (at most [`MAX_UPCALL_BINDINGS`]).
    pub binding_count: u64,
    /// Where upcalls enter.
    pub entry: u64,
    /// Top of the stack upcalls run on (16-byte aligned; the 16 bytes below it writable).
    pub stack_top: u64,
}

impl UpcallRegistration {
    /// Size in bytes.
    pub const SIZE: usize = core::mem::size_of::<UpcallRegistration>();

    /// Reads a registration from little-endian bytes (the kernel's copy of user memory);
    /// `None` if `bytes` is not exactly [`Self::SIZE`] long.
    pub fn from_bytes(bytes: &[u8]) -> Option<UpcallRegistration> {
        if bytes.len() != Self::SIZE {
            return None;
        }
        let word = |index: usize| {
            let mut value = [0u8; 8];
            value.copy_from_slice(&bytes[index * 8..index * 8 + 8]);
            u64::from_le_bytes(value)
        };
        Some(UpcallRegistration {
            manifest: word(0),
            manifest_length: word(1),
            bindings: word(2),
            binding_count: word(3),
            entry: word(4),
            stack_top: word(5),
        })
    }
}

/// Words of an event record passed in registers by an upcall (4 × 8 = 32 bytes, the
/// largest record the kernel declares).
pub const UPCALL_RECORD_WORDS: usize = 4;
/// Argument words of one kernel function in a `kernel_function` system call (after the
/// function's index): an integer takes one, a byte range two (address, length).
pub const KERNEL_FUNCTION_WORDS: usize = 4;
/// Longest manifest text a user-level extension may register.
pub const MAX_UPCALL_MANIFEST: usize = 4096;
/// Most bindings a user-level extension may register.
pub const MAX_UPCALL_BINDINGS: usize = 16;

/// Why a system call failed: the code in `a0` (0 is success). Each call documents which
/// of these it returns and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Error {
    /// No system call has this number.
    NoSuchCall = 1,
    /// A pointer range is not entirely mapped in the caller's address space with the
    /// access the call needs (user-accessible, and readable for input or writable for
    /// output), lies outside the user region, or an address is not page-aligned where the
    /// call requires it.
    BadAddress = 2,
    /// A length is zero where data is required, above the call's limit, or makes the
    /// range wrap around the address space.
    BadLength = 3,
    /// The handle names no object the caller holds.
    BadHandle = 4,
    /// The object exists but the caller may not do this to it (not its child, not an
    /// anonymous mapping, itself).
    NotPermitted = 5,
    /// No process has this id (or it has already been waited for).
    NoSuchProcess = 6,
    /// A per-process or system-wide count limit is reached (processes, mapped regions).
    TooMany = 7,
    /// No memory is left: the caller's quota is used up or the kernel is out of frames.
    NoMemory = 8,
    /// The boot bundle holds no program of this name.
    NoSuchProgram = 9,
    /// The program is not a valid executable (refused by the kernel's ELF checks).
    BadProgram = 10,
    /// An argument other than a pointer, length or handle is invalid (text not UTF-8,
    /// a duration above its limit).
    BadArgument = 11,
    /// The kernel refused the request for a reason of its own (an extension the loader
    /// refused, a console command that failed); [`Syscall::LastError`] returns the
    /// kernel's words for it.
    Refused = 12,
    /// No extension, service or object of this name exists.
    NotFound = 13,
    /// The caller's user-level extension was killed by containment (fault, overrun,
    /// malformed result) or unloaded; it no longer serves upcalls.
    Contained = 14,
    /// The call is valid only in another state of the caller (an upcall return outside an
    /// upcall, a second registration).
    WrongState = 15,
    /// The machine has no device of the kind the call is about (no disk), or the service
    /// that runs it is not running.
    NoDevice = 16,
    /// A file or directory of that name exists already.
    Exists = 17,
    /// A directory was needed (a path's component, `readdir`).
    NotADirectory = 18,
    /// A file was needed (writing or opening a directory for writing).
    IsADirectory = 19,
    /// The directory still has entries.
    NotEmpty = 20,
    /// The file system has no free block, inode or directory slot (or the file would pass
    /// its largest size).
    NoSpace = 21,
    /// The disk failed a request the call needed.
    Io = 22,
    /// The file system's data on the disk is inconsistent (a corrupt image).
    Corrupt = 23,
    /// The lock cannot be granted now and the caller asked not to wait.
    WouldBlock = 24,
    /// Waiting for the lock would close a cycle of processes waiting for each other.
    Deadlock = 25,
    /// The object is in use: a file that is open cannot be removed.
    Busy = 26,
}

impl Error {
    /// Every error, in code order.
    pub const ALL: &'static [Error] = &[
        Error::NoSuchCall,
        Error::BadAddress,
        Error::BadLength,
        Error::BadHandle,
        Error::NotPermitted,
        Error::NoSuchProcess,
        Error::TooMany,
        Error::NoMemory,
        Error::NoSuchProgram,
        Error::BadProgram,
        Error::BadArgument,
        Error::Refused,
        Error::NotFound,
        Error::Contained,
        Error::WrongState,
        Error::NoDevice,
        Error::Exists,
        Error::NotADirectory,
        Error::IsADirectory,
        Error::NotEmpty,
        Error::NoSpace,
        Error::Io,
        Error::Corrupt,
        Error::WouldBlock,
        Error::Deadlock,
        Error::Busy,
    ];

    /// The code returned in `a0`.
    pub const fn code(self) -> usize {
        self as usize
    }

    /// The error with `code`, or `None` (0 is success, not an error).
    pub fn from_code(code: usize) -> Option<Error> {
        Error::ALL.iter().copied().find(|error| error.code() == code)
    }

    /// A short description.
    pub const fn description(self) -> &'static str {
        match self {
            Error::NoSuchCall => "no such system call",
            Error::BadAddress => "bad address",
            Error::BadLength => "bad length",
            Error::BadHandle => "bad handle",
            Error::NotPermitted => "not permitted",
            Error::NoSuchProcess => "no such process",
            Error::TooMany => "too many",
            Error::NoMemory => "out of memory",
            Error::NoSuchProgram => "no such program",
            Error::BadProgram => "not a valid program",
            Error::BadArgument => "bad argument",
            Error::Refused => "refused by the kernel",
            Error::NotFound => "not found",
            Error::Contained => "extension contained",
            Error::WrongState => "wrong state for this call",
            Error::NoDevice => "no such device",
            Error::Exists => "already exists",
            Error::NotADirectory => "not a directory",
            Error::IsADirectory => "is a directory",
            Error::NotEmpty => "directory not empty",
            Error::NoSpace => "no space left",
            Error::Io => "input/output error",
            Error::Corrupt => "file system corrupt",
            Error::WouldBlock => "would block",
            Error::Deadlock => "deadlock",
            Error::Busy => "in use",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.description())
    }
}

impl core::error::Error for Error {}

/// Why a process was killed (see [`ExitStatus::Killed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum KillCause {
    /// It took a fault in U-mode (page fault, illegal instruction, …); the kernel log
    /// names the cause and address.
    Fault = 1,
    /// Its parent (or the kernel) asked for it with [`Syscall::Kill`].
    Request = 2,
}

/// How a process ended: what [`Syscall::Wait`] returns, encoded in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// It called [`Syscall::Exit`] with this status (a panic in the runtime exits 101).
    Exited(i32),
    /// The kernel ended it.
    Killed(KillCause),
}

/// Bit of an encoded status that marks [`ExitStatus::Killed`]; the low 32 bits then hold
/// the [`KillCause`], otherwise the exit status (as an unsigned 32-bit pattern).
const KILLED_FLAG: u64 = 1 << 32;

impl ExitStatus {
    /// The status a runtime panic exits with.
    pub const PANIC: i32 = 101;

    /// The one-word encoding returned by [`Syscall::Wait`].
    pub const fn encode(self) -> u64 {
        match self {
            ExitStatus::Exited(status) => status as u32 as u64,
            ExitStatus::Killed(cause) => KILLED_FLAG | cause as u32 as u64,
        }
    }

    /// Decodes [`Self::encode`]'s word; `None` for a word no status encodes to.
    pub const fn decode(word: u64) -> Option<ExitStatus> {
        if word & KILLED_FLAG == 0 {
            return if word >> 32 == 0 { Some(ExitStatus::Exited(word as u32 as i32)) } else { None };
        }
        match word & !KILLED_FLAG {
            1 => Some(ExitStatus::Killed(KillCause::Fault)),
            2 => Some(ExitStatus::Killed(KillCause::Request)),
            _ => None,
        }
    }

    /// Whether the process exited with status 0.
    pub const fn is_success(self) -> bool {
        matches!(self, ExitStatus::Exited(0))
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitStatus::Exited(status) => write!(formatter, "exited with status {status}"),
            ExitStatus::Killed(KillCause::Fault) => formatter.write_str("killed (fault)"),
            ExitStatus::Killed(KillCause::Request) => formatter.write_str("killed (by request)"),
        }
    }
}

/// Declares the system calls once: the [`Syscall`] enum, its number table, and per call
/// its name, argument names and result, for the kernel's dispatcher and the docs.
macro_rules! declare_syscalls {
    ($($(#[doc = $doc:literal])* $variant:ident = $number:literal, $name:literal, ($($argument:ident),*) -> $result:literal;)*) => {
        /// A system call (number in `a7`). Per call: arguments in `a0`.., the result in
        /// `a1`, and the errors it returns in `a0`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Syscall {
            $($(#[doc = $doc])* $variant = $number,)*
        }

        impl Syscall {
            /// Every call, in number order.
            pub const ALL: &'static [Syscall] = &[$(Syscall::$variant),*];

            /// The call with `number`, or `None` ([`Error::NoSuchCall`]).
            pub const fn from_number(number: usize) -> Option<Syscall> {
                match number {
                    $($number => Some(Syscall::$variant),)*
                    _ => None,
                }
            }

            /// Its number (`a7`).
            pub const fn number(self) -> usize {
                self as usize
            }

            /// Its name, as in the documentation.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Syscall::$variant => $name,)*
                }
            }

            /// Names of its arguments, in register order (`a0`, `a1`, …).
            pub const fn arguments(self) -> &'static [&'static str] {
                match self {
                    $(Syscall::$variant => &[$(stringify!($argument)),*],)*
                }
            }

            /// What it returns in `a1` on success.
            pub const fn result(self) -> &'static str {
                match self {
                    $(Syscall::$variant => $result,)*
                }
            }
        }
    };
}

declare_syscalls! {
    /// `write(handle, pointer, length) -> written`: writes the bytes at `pointer` to
    /// `handle` ([`CONSOLE`], or a file opened for writing by [`Syscall::Open`]: at its
    /// position, which advances); returns how many were written (`length`, unless the file
    /// system filled up). `length` 0 writes nothing.
    /// Errors: `BadHandle` (neither [`CONSOLE`] nor an open file), `NotPermitted` (a file not
    /// opened for writing), `BadLength` (above [`MAX_WRITE_LENGTH`] or wrapping),
    /// `BadAddress` (not all readable user memory), `NoSpace`, `Io`, `Corrupt`.
    Write = 0, "write", (handle, pointer, length) -> "bytes written";
    /// `exit(status) -> !`: ends the calling process with `status`; never returns.
    Exit = 1, "exit", (status) -> "does not return";
    /// `yield()`: gives the processor to another ready process or strand, if any.
    Yield = 2, "yield", () -> "0";
    /// `getpid() -> pid`: the caller's process id (ids start at 1 and are never reused).
    GetPid = 3, "getpid", () -> "process id";
    /// `spawn(pointer, length) -> pid`: starts the program named by the first word of
    /// the command line at `pointer` (`NAME [ARGUMENTS…]`, UTF-8) as a child of the caller.
    /// Errors: `BadLength` (0 or above [`MAX_COMMAND_LINE`], or wrapping), `BadAddress`,
    /// `BadArgument` (not UTF-8, or no name), `NoSuchProgram`, `BadProgram`, `TooMany`
    /// (process table full), `NoMemory`.
    /// `flags` ([`SPAWN_EXTENSION_LOADER`], [`SPAWN_CONSOLE`]) pass capabilities the caller
    /// holds to the child: unknown bits are `BadArgument` (checked with the text) and a
    /// flag the caller does not hold is `NotPermitted`, both before `NoSuchProgram`.
    /// Children get only the console unless flags say otherwise.
    Spawn = 4, "spawn", (pointer, length, flags) -> "child's process id";
    /// `wait(pid) -> status`: blocks until child `pid` ends, reaps it and returns its
    /// [`ExitStatus::encode`]d status. Errors: `NoSuchProcess` (no such process, or already
    /// reaped), `NotPermitted` (not the caller's child).
    Wait = 5, "wait", (pid) -> "encoded exit status";
    /// `sleep_ticks(ticks)`: blocks for `ticks` timer ticks (0 returns at once).
    /// Errors: `BadArgument` (above [`MAX_SLEEP_TICKS`]).
    SleepTicks = 6, "sleep_ticks", (ticks) -> "0";
    /// `map_anonymous(length) -> address`: maps `length` bytes (rounded up to pages) of
    /// zeroed read-write memory at an address the kernel chooses, with an unmapped guard
    /// page after it: `vm_map(length, VM_READ | VM_WRITE)`, demand-zero (a page gets its
    /// frame when first touched; with no frame left then, the process is killed).
    /// Errors: `BadLength` (0 or above [`MAX_MAP_LENGTH`]), `NoMemory` (above
    /// [`MAX_ANONYMOUS_BYTES`] in all, or no room), `TooMany` (above
    /// [`MAX_ANONYMOUS_REGIONS`]).
    MapAnonymous = 7, "map_anonymous", (length) -> "address of the mapping";
    /// `unmap(address, length)`: unmaps a whole region returned by `map_anonymous`
    /// (`length` as given then, or rounded up). Errors: `BadAddress` (not page-aligned or
    /// no region starts there), `NotPermitted` (the program image or the stack),
    /// `BadLength` (0, or not the region's length).
    Unmap = 8, "unmap", (address, length) -> "0";
    /// `event_count() -> count`: number of events in the kernel's dispatcher
    /// (introspection).
    EventCount = 9, "event_count", () -> "number of events";
    /// `arguments(pointer, length) -> total`: copies the caller's command line (as given to
    /// `spawn`) into the buffer, at most `length` bytes, and returns its full length.
    /// `length` 0 copies nothing and checks no pointer. Errors: `BadLength` (wrapping),
    /// `BadAddress` (the buffer leaves user space, or the bytes to be copied are not all
    /// writable user memory).
    Arguments = 10, "arguments", (pointer, length) -> "length of the command line";
    /// `kill(pid)`: ends child `pid` (its status becomes `Killed(Request)`; reap it with
    /// `wait`). Errors: `NoSuchProcess`, `NotPermitted` (not the caller's child).
    Kill = 11, "kill", (pid) -> "0";
    /// `read(handle, pointer, length) -> read`: reads console input ([`CONSOLE`]) into the
    /// buffer: blocks until at least one byte is available, returns how many were copied
    /// (at most `length`); 0 means the input has ended (a non-interactive script is used
    /// up). Bytes arrive raw (no echo, no line editing: the reader does both). For a file
    /// opened for reading by [`Syscall::Open`]: reads at its position (which advances);
    /// 0 at the end of the file.
    /// Errors: `BadHandle`, `NotPermitted` (a file not opened for reading), `BadLength` (0,
    /// above [`MAX_READ_LENGTH`], or wrapping), `BadAddress`, `Io`, `Corrupt`.
    Read = 12, "read", (handle, pointer, length) -> "bytes read (0: end of input)";
    /// `ext_load(pointer, length, technology) -> 0`: loads the available extension named by
    /// the UTF-8 text at `pointer` with [`Technology`] `technology`. Only for a process
    /// holding the extension-loading capability. Errors: `NotPermitted` (no capability),
    /// `BadLength` (0 or above [`MAX_NAME`]), `BadAddress`, `BadArgument` (not UTF-8,
    /// unknown technology), `NotFound` (no such extension available), `Refused` (the
    /// loader or dispatcher refused it, or it is already loaded; see [`Syscall::LastError`]).
    ExtLoad = 13, "ext_load", (pointer, length, technology) -> "0";
    /// `ext_unload(pointer, length) -> 0`: unloads the loaded extension of that name.
    /// Errors: `NotPermitted` (no capability), `BadLength`, `BadAddress`, `BadArgument`,
    /// `NotFound` (not loaded).
    ExtUnload = 14, "ext_unload", (pointer, length) -> "0";
    /// `ext_list(pointer, length) -> total`: the loaded extensions as text, one per line
    /// (`NAME TECHNOLOGY VERSION STATE BINDINGS MEMORY CALLS FAULTS OVERRUNS`, fields
    /// separated by tabs; see
    /// `docs/user-space.md`), copied up to `length` bytes; returns the full length (call
    /// again with a bigger buffer if it is larger; `length` 0 copies nothing and checks no
    /// pointer). Errors: `NotPermitted` (no capability), `BadLength` (wrapping),
    /// `BadAddress` (the bytes to be copied are not writable user memory).
    ExtList = 15, "ext_list", (pointer, length) -> "length of the listing";
    /// `events(pointer, length) -> total`: the dispatcher's events, their bindings (owner,
    /// technology, mode, guards) and counters as text, as the kernel console's `events`
    /// prints them; copy semantics as [`Syscall::ExtList`]. Errors: `BadLength`, `BadAddress`.
    Events = 16, "events", (pointer, length) -> "length of the listing";
    /// `processes(pointer, length) -> total`: the processes as text, one per line (`PID
    /// PARENT STATE MEMORY SYSCALLS COMMAND`, tab-separated); copy semantics as
    /// [`Syscall::ExtList`]. Errors: `BadLength`, `BadAddress`.
    Processes = 17, "processes", (pointer, length) -> "length of the listing";
    /// `last_error(pointer, length) -> total`: the kernel's words for the caller's last
    /// `Refused` error (empty if none); copy semantics as [`Syscall::ExtList`].
    /// Errors: `BadLength`, `BadAddress`.
    LastError = 18, "last_error", (pointer, length) -> "length of the message";
    /// `protect(address, length, access) -> 0`: changes the access of a whole anonymous
    /// region ([`ACCESS_READ`] | [`ACCESS_WRITE`]; 0 makes it inaccessible; its pages keep
    /// their frames) — `prot_n` over all its pages.
    /// Errors: `BadAddress` (misaligned, or no anonymous region starts there),
    /// `NotPermitted` (image or stack, or more than a `vm_map` region's own protection),
    /// `BadLength` (not the region's length), `BadArgument` (unknown access bits).
    Protect = 19, "protect", (address, length, access) -> "0";
    /// `kernel_command(pointer, length) -> 0`: runs one line of the kernel console's
    /// commands (`mem`, `probe`, `reclaim`, `halt`, …; see `help`). Only for a process
    /// holding the console capability (the shell). Errors: `NotPermitted`, `BadLength`
    /// (0 or above [`MAX_COMMAND_LINE`]), `BadAddress`, `BadArgument` (not UTF-8),
    /// `Refused` (the command failed; [`Syscall::LastError`] says why).
    KernelCommand = 20, "kernel_command", (pointer, length) -> "0";
    /// `upcall_serve(pointer, length) -> 0`: registers the caller as the user-level
    /// technology of the extension described by the [`UpcallRegistration`] at `pointer`
    /// and serves its upcalls until it is unloaded or contained: the kernel runs each
    /// upcall on the raising strand, in this address space, at the registration's entry
    /// point and stack. Returns 0 when the extension is unloaded. Errors: `BadLength`, `BadAddress`,
    /// `BadArgument` (a malformed registration), `WrongState` (already serving),
    /// `Refused` (the dispatcher refused a binding; see [`Syscall::LastError`]),
    /// `Contained` (the extension was killed by containment while serving).
    /// Only a process the kernel started as a user-level extension may serve (others get
    /// `NotPermitted`).
    UpcallServe = 21, "upcall_serve", (pointer, length) -> "0 when unloaded";
    /// `upcall_return(code, word0, word1, word2, word3) -> !`: ends the running upcall;
    /// `code` 0 means the words hold the result record, anything else is a failure (a
    /// `spindle_abi::native::ErrorCode`; the extension is contained). Errors: `WrongState`
    /// (no upcall is running).
    UpcallReturn = 22, "upcall_return", (code, word0, word1, word2, word3) -> "does not return";
    /// `kernel_function(index, a, b, c, d) -> value`: calls entry `index` of
    /// `spindle_abi::host::KERNEL_FUNCTIONS` from an upcall, if the extension's domains
    /// grant it; pointer arguments are addresses in the caller's space (console writes
    /// use [`Syscall::Write`]). Errors: `WrongState` (not in an upcall), `NotFound` (no
    /// such function, or one user level cannot call), `NotPermitted` (its domain is not
    /// granted).
    KernelFunction = 23, "kernel_function", (index, a, b, c, d) -> "the function's result";
    /// `service_register(pointer, length, entry, stack_top) -> !`: offers a
    /// cross-address-space service under the given name and serves calls until the
    /// process is killed: a [`Syscall::ServiceCall`] runs `entry(argument)` in this
    /// process's address space on `stack_top`, on the *calling* strand (the thread
    /// migrates, as in LRPC), and ends with [`Syscall::ServiceReturn`]. Returns only with
    /// an error: `BadLength`, `BadAddress`, `BadArgument` (not UTF-8, entry or stack not
    /// user memory, stack misaligned), `TooMany` (service table full), `Refused` (name
    /// taken), `NoMemory` or `Io` (a program from a file could not be read in whole: it
    /// serves where its strand cannot wait for the disk).
    ServiceRegister = 24, "service_register", (pointer, length, entry, stack_top) -> "does not return while serving";
    /// `service_call(pointer, length, argument) -> value`: calls the named service in its
    /// own address space and returns its result. Errors: `BadLength`, `BadAddress`,
    /// `NotFound`, `Contained` (the service faulted or overran; it is withdrawn).
    ServiceCall = 25, "service_call", (pointer, length, argument) -> "the service's result";
    /// `service_return(value) -> !`: ends the running service call with `value`.
    /// Errors: `WrongState` (no service call is running).
    ServiceReturn = 26, "service_return", (value) -> "does not return";
    /// `ext_stats(pointer, length) -> total`: every loaded (or killed) extension's full
    /// record as one JSON document (`{"clock":…,"extensions":[…]}`: technology, version,
    /// state and reason, artifact size, SHA-256 and signer, load time and cost, budget,
    /// memory, bindings with guards and counters — what `ext show` prints); copy
    /// semantics as [`Syscall::ExtList`]. Errors: `BadLength`, `BadAddress`.
    ExtStats = 27, "ext_stats", (pointer, length) -> "length of the document";
    /// `disk_state(pointer, length) -> total`: the disk's exported state (Infokernel-style):
    /// a [`DiskState`] header (the arm's cylinder, the counters — requests, seek distance,
    /// busy time, mean and p99 response) followed by one `event::DiskQueueEntry` per queued
    /// request (id, sector, cylinder, arrival), oldest first, all taken at one instant;
    /// copied up to `length` bytes, returns the full length (copy semantics as
    /// [`Syscall::ExtList`]). Errors: `NoDevice` (the machine has no disk, or the disk
    /// service is not running), `BadLength` (wrapping), `BadAddress` (the bytes to be copied
    /// are not writable user memory).
    DiskState = 28, "disk_state", (pointer, length) -> "length of the state";
    /// `open(pointer, length, flags) -> handle`: opens the file-system path (absolute,
    /// UTF-8) at `pointer` with [`OPEN_READ`], [`OPEN_WRITE`], [`OPEN_CREATE`],
    /// [`OPEN_TRUNCATE`], [`OPEN_APPEND`]; returns a handle for `read`, `write`, `seek`,
    /// `fsync` and `close` (a capability-table handle of kind File; never [`CONSOLE`]).
    /// Errors: `BadLength` (0 or above [`MAX_PATH`]), `BadAddress`, `BadArgument` (not
    /// UTF-8, unknown flag bits, neither read nor write, a bad name), `NoDevice` (no file
    /// system), `NotFound`, `NotADirectory`, `IsADirectory` (a directory opened for
    /// writing), `NoSpace`, `Io`, `Corrupt`, `TooMany` (the handle table is full).
    Open = 29, "open", (pointer, length, flags) -> "handle";
    /// `close(handle) -> 0`: closes an open file (its handle becomes stale).
    /// Errors: `BadHandle` (not an open file of the caller).
    Close = 30, "close", (handle) -> "0";
    /// `seek(handle, offset, whence) -> position`: moves the file's position to `offset`
    /// (a signed 64-bit value) from [`SEEK_START`], [`SEEK_CURRENT`] or [`SEEK_END`]; returns
    /// the new position. Errors: `BadHandle`, `BadArgument` (unknown `whence`, a negative or
    /// too large position), `Io`, `Corrupt`.
    Seek = 31, "seek", (handle, offset, whence) -> "new position";
    /// `stat(pointer, length, out_pointer) -> 0`: writes the [`FileStat`] of the path at
    /// `pointer` to `out_pointer` ([`FileStat::SIZE`] bytes). Errors: as `open`'s for the
    /// path, and `BadAddress` for the output.
    Stat = 32, "stat", (pointer, length, out_pointer) -> "0";
    /// `readdir(pointer, length, out_pointer, out_length) -> total`: the directory at the
    /// path as text, one entry per line: `KIND SIZE NAME` tab-separated (`d` directory,
    /// `f` file); copy semantics as [`Syscall::ExtList`]. Errors: as `open`'s for the path,
    /// `NotADirectory`, `BadLength`/`BadAddress` for the output.
    ReadDir = 33, "readdir", (pointer, length, out_pointer, out_length) -> "length of the listing";
    /// `mkdir(pointer, length) -> 0`: makes the directory at the path (its parent must
    /// exist). Errors: as `open`'s, and `Exists`.
    MakeDir = 34, "mkdir", (pointer, length) -> "0";
    /// `unlink(pointer, length) -> 0`: removes the file or empty directory at the path.
    /// Errors: as `open`'s, `NotEmpty`, and `Busy` (it is open, by any process).
    Unlink = 35, "unlink", (pointer, length) -> "0";
    /// `fsync(handle) -> 0`: returns when everything written to the file system so far —
    /// this file's data and the metadata it needs — is on the disk. Errors: `BadHandle`,
    /// `Io`.
    Fsync = 36, "fsync", (handle) -> "0";
    /// `setpolicy(pointer, length, name_pointer, name_length, technology) -> 0`: binds the
    /// policy extension NAME (e.g. `evict_mru`, `readahead_app`, `lockgrant_fifo`) to the
    /// file at the path only: the extension is loaded with [`Technology`] `technology`, and
    /// every binding it installs on the `cache.*` and `lock.Grant` events carries the guard
    /// `file == the file's inode`, so policies of different files coexist. Needs the
    /// extension-loading capability. Errors: `NotPermitted`, `BadLength`, `BadAddress`,
    /// `BadArgument` (not UTF-8, unknown technology), the path's errors as for `open`,
    /// `NotFound` (no such extension), `Refused` (already loaded, or the loader refused;
    /// see [`Syscall::LastError`]).
    SetPolicy = 37, "setpolicy", (pointer, length, name_pointer, name_length, technology) -> "0";
    /// `getpolicy(pointer, length, out_pointer, out_length) -> total`: the policy
    /// extensions bound to the file at the path, one per line (`NAME TECHNOLOGY`,
    /// tab-separated); with `length` 0, every policy extension bound to a file or a
    /// process (`NAME TECHNOLOGY file INODE` or `NAME TECHNOLOGY process PID`); copy
    /// semantics as [`Syscall::ExtList`]. Errors: the path's as for `open`,
    /// `BadLength`/`BadAddress` for the output.
    GetPolicy = 38, "getpolicy", (pointer, length, out_pointer, out_length) -> "length of the listing";
    /// `cache_hint(pointer, length, hint, value) -> 0`: sets an application hint of the file
    /// at the path for its policy extensions (`event::CacheHint`: the read-ahead count
    /// `readahead_app` uses, the block range `evict_pinrange` keeps); `value`
    /// `CacheHint::UNSET` clears it. Errors: the path's as for `open`, `BadArgument`
    /// (unknown hint).
    CacheHint = 39, "cache_hint", (pointer, length, hint, value) -> "0";
    /// `cache_state(pointer, length, out_pointer, out_length) -> total`: the buffer cache's
    /// exported state as text: a `counters` line (buffers, dirty, hits, misses, prefetches,
    /// prefetch hits, evictions, write-backs, write errors, rejected answers), a `file`
    /// line for the path (its inode, resident and dirty blocks; `length` 0: no file), then
    /// one `victim` line per block in eviction order (device block, file or `-`, file
    /// block, dirty, references), next victim first; copy semantics as
    /// [`Syscall::ExtList`]. Errors: `NoDevice` (no file system), the path's errors,
    /// `BadLength`/`BadAddress` for the output.
    CacheState = 40, "cache_state", (pointer, length, out_pointer, out_length) -> "length of the state";
    /// `lock(handle, start, length, flags) -> 0`: locks bytes `[start, start + length)`
    /// (`length` 0: to the end of the file, however long it grows) of the open file for
    /// the calling process — shared ([`LOCK_READ`]) or exclusive ([`LOCK_WRITE`]), POSIX
    /// style: a process's own locks never conflict with each other and a new lock replaces
    /// its old ones on the range. With [`LOCK_WAIT`] the call waits until the lock is
    /// granted, in the order `lock.Grant` decides (default FRP: readers first, writers in
    /// arrival order; `lockgrant_fifo`: strict arrival order). A process's locks go when it
    /// ends. Errors: `BadHandle`, `BadArgument` (unknown flags, an empty or overflowing
    /// range), `WouldBlock` (without [`LOCK_WAIT`]), `Deadlock`, `TooMany` (the file's queue
    /// or the lock table is full).
    Lock = 41, "lock", (handle, start, length, flags) -> "0";
    /// `unlock(handle, start, length) -> 0`: releases the calling process's locks on the
    /// range (splitting a lock that reaches outside it); what it does not hold is not an
    /// error. Errors: `BadHandle`, `BadArgument` (a bad range), `TooMany` (a split would
    /// pass the lock table's limit).
    Unlock = 42, "unlock", (handle, start, length) -> "0";
    /// `vm_map(length, protection) -> address`: creates a demand-zero anonymous region of
    /// `length` bytes (rounded up to pages) with `protection` ([`VM_READ`] | [`VM_WRITE`]
    /// | [`VM_EXECUTE`]; write needs read, write and execute together are refused) at an
    /// address the kernel chooses, with an unmapped guard page after it. No frame is
    /// allocated until a page is touched (by the program, or by a system call that copies
    /// into or out of it); each touched page is a fresh zeroed frame, returned when the
    /// region is `unmap`ped or the process ends. Shares `map_anonymous`'s limits.
    /// Errors: `BadLength` (0 or above [`MAX_MAP_LENGTH`]), `BadArgument` (a protection
    /// that is none of those), `NoMemory` (above [`MAX_ANONYMOUS_BYTES`] in all, or no
    /// room), `TooMany` (above [`MAX_ANONYMOUS_REGIONS`]).
    VmMap = 43, "vm_map", (length, protection) -> "address of the region";
    /// `vm_manage(address, pointer, length) -> region`: marks the `vm_map` region starting
    /// at `address` managed: its faults raise `vm.PageNotPresent` / `vm.ProtectionFault`
    /// (guardable on the address space and the region) and a missing page no handler
    /// supplies kills the process (no pager). A name (`pointer`, `length` > 0) assigns the
    /// region to that extension: bindings it installs afterwards (load it after this call)
    /// see only this region's faults. Returns the region's id (the events' `region`).
    /// Errors: `BadAddress` (no `vm_map` region starts at `address`), `BadLength` (a name
    /// above [`MAX_NAME`]), `BadAddress` (the name is not readable), `BadArgument` (not
    /// UTF-8), `Exists` (the region is managed already), `Busy` (the extension is assigned
    /// to another process's region).
    VmManage = 44, "vm_manage", (address, pointer, length) -> "region id";
    /// `prot1(address, protection) -> 0`: Appel & Li's `prot1`: sets the protection of the
    /// page at `address` of a `vm_map` region ([`VM_READ`] | [`VM_WRITE`] | [`VM_EXECUTE`],
    /// 0 for no access), within the region's own; the leaf is rewritten (or removed for no
    /// access, the frame kept) and the TLB flushed. An access the new protection forbids
    /// faults: `vm.ProtectionFault` for a trapped region (see [`Syscall::VmTrap`]), else
    /// the process is killed. Errors: `BadAddress` (not page-aligned, in no `vm_map`
    /// region), `BadArgument` (not a protection), `NotPermitted` (above the region's).
    Prot1 = 45, "prot1", (address, protection) -> "0";
    /// `prot_n(address, count, protection) -> 0`: Appel & Li's `protN`: as `prot1` for
    /// `count` pages from `address`, all in one region. Errors: as `prot1`; `BadLength`
    /// (`count` 0 or above 65,536), `BadAddress` (the range leaves the region).
    ProtN = 46, "prot_n", (address, count, protection) -> "0";
    /// `unprot_n(address, count) -> 0`: Appel & Li's `unprotN`: gives `count` pages from
    /// `address` their region's protection back. Errors: as `prot_n`.
    UnprotN = 47, "unprot_n", (address, count) -> "0";
    /// `dirty(address) -> 0 or 1`: Appel & Li's `dirty`: 1 if the page at `address` of a
    /// `vm_map` region was written since it got its frame (a page without a frame is clean;
    /// one protected to no access, or paged out and back, keeps the answer its leaf gave).
    /// Errors: `BadAddress` (not page-aligned, in no `vm_map` region).
    Dirty = 48, "dirty", (address) -> "1 if dirty";
    /// `vm_trap(address, pointer, length) -> region`: Appel & Li's `trap`: the faults of
    /// the `vm_map` region starting at `address` raise `vm.PageNotPresent` /
    /// `vm.ProtectionFault` to handlers — assigned to extension NAME (`pointer`, `length`
    /// > 0) as for `vm_manage` — while its pages stay demand-zero by default; a handler's
    /// answer (e.g. PROTECT, unprotecting the page) is applied and the faulting instruction
    /// runs again. Returns the region's id. Errors: `BadAddress` (no `vm_map` region
    /// starts there), the name's (`BadLength`, `BadAddress`, `BadArgument`), `Busy` (the
    /// extension is assigned to another process's region).
    VmTrap = 49, "vm_trap", (address, pointer, length) -> "region id";
    /// `setpolicy_process(pid, name_pointer, name_length, technology) -> 0`: binds the
    /// policy extension NAME to the file-system calls of process `pid` (0: the caller):
    /// the extension is loaded with [`Technology`] `technology`, and every binding it
    /// installs on a `cache.*` event carries the guard `process == pid` (each record names
    /// the process whose call raised it), so it decides for that process's reads and
    /// writes of every file and no one else's. Unloaded when the process ends. Needs the
    /// extension-loading capability. Errors: `NotPermitted`, `BadLength`, `BadAddress`,
    /// `BadArgument` (not UTF-8, unknown technology), `NotFound` (no such extension or no
    /// running process `pid`), `Refused` (already loaded, the loader refused, or it binds
    /// `lock.Grant`, whose record names no process; see [`Syscall::LastError`]).
    SetProcessPolicy = 50, "setpolicy_process", (pid, name_pointer, name_length, technology) -> "0";
    /// `vm_limit(pages) -> 0`: the caller's pages — its image, its stack, its `vm_map`
    /// regions (and `map_anonymous` memory, which is one); not its page tables — may hold
    /// at most `pages` frames (0: no limit). Above it, each page the process touches first
    /// pages one of its pages out — the clock hand's choice, which an `mm.Reclaim` handler
    /// may change — to the swap area at the end of the disk (a page never written is
    /// dropped: it is zero, or its image still holds it); a page comes back when touched.
    /// Errors: `BadArgument` (1 to 3 pages: an instruction may need two pages of code and
    /// two of data at once).
    VmLimit = 51, "vm_limit", (pages) -> "0";
    /// `vm_hot(address, slot) -> frame`: puts the page at `address` (of a `vm_map`
    /// region; faulted in if needed) into hot-list slot `slot` (`0..64`): the kernel raises
    /// `mm.HotListSet { slot, frame }` now and again whenever the page gets another frame,
    /// so a hot-list graft on `mm.Reclaim` (extension `hotlist`) keeps it resident.
    /// `slot` 64 clears the list. Returns the frame number (0 for a clear). Errors:
    /// `BadAddress` (not in a `vm_map` region, or it cannot be faulted in), `BadArgument`
    /// (slot above 64).
    VmHot = 52, "vm_hot", (address, slot) -> "frame number";
    /// `hw_counters(pointer, length) -> total`: what the hart running the caller has done
    /// since boot, as a [`HwCounters`] record — traps taken (system calls,
    /// faults and interrupts, this call's own included), `satp` writes, and `sfence.vma`s
    /// (those of the `satp` writes included): the events `cargo xtask bench`'s cost model
    /// prices. A program reads them before and after an operation; the difference less
    /// one (the second call's trap) is what the operation and anything that interrupted
    /// it caused. Copied up to `length` bytes; returns the full length (copy semantics
    /// as [`Syscall::ExtList`]). Errors: `BadLength` (wrapping), `BadAddress` (the bytes
    /// to be copied are not writable user memory).
    HwCounters = 53, "hw_counters", (pointer, length) -> "length of the counters";
}


/// [`Syscall::VmMap`] protection bit: readable.
pub const VM_READ: usize = 1;
/// [`Syscall::VmMap`] protection bit: writable (needs [`VM_READ`]).
pub const VM_WRITE: usize = 2;
/// [`Syscall::VmMap`] protection bit: executable.
pub const VM_EXECUTE: usize = 4;

/// [`Syscall::Lock`] flag: a shared (read) lock (the default: no flag).
pub const LOCK_READ: usize = 0;
/// [`Syscall::Lock`] flag: an exclusive (write) lock.
pub const LOCK_WRITE: usize = 1;
/// [`Syscall::Lock`] flag: wait until it can be granted.
pub const LOCK_WAIT: usize = 2;

/// Longest path [`Syscall::Open`] and the other file-system calls accept.
pub const MAX_PATH: usize = 256;
/// [`Syscall::Open`] flag: reading allowed.
pub const OPEN_READ: usize = 1;
/// [`Syscall::Open`] flag: writing allowed.
pub const OPEN_WRITE: usize = 2;
/// [`Syscall::Open`] flag: create the file if it does not exist.
pub const OPEN_CREATE: usize = 4;
/// [`Syscall::Open`] flag: cut the file to 0 bytes (with [`OPEN_WRITE`]).
pub const OPEN_TRUNCATE: usize = 8;
/// [`Syscall::Open`] flag: every write goes to the end.
pub const OPEN_APPEND: usize = 16;
/// [`Syscall::Seek`] origin: the start of the file.
pub const SEEK_START: usize = 0;
/// [`Syscall::Seek`] origin: the current position.
pub const SEEK_CURRENT: usize = 1;
/// [`Syscall::Seek`] origin: the end of the file.
pub const SEEK_END: usize = 2;

/// Writes `words` into `bytes` as little-endian `u64`s, in order (as many as fit).
fn put_words(bytes: &mut [u8], words: &[u64]) {
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
}

/// The first `N` little-endian `u64`s of `bytes`; `None` if `bytes` is shorter.
fn get_words<const N: usize>(bytes: &[u8]) -> Option<[u64; N]> {
    let bytes = bytes.get(..N * 8)?;
    let mut words = [0u64; N];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut value = [0u8; 8];
        value.copy_from_slice(chunk);
        *word = u64::from_le_bytes(value);
    }
    Some(words)
}

/// What [`Syscall::Stat`] writes: [`FileStat::WORDS`] little-endian `u64`s in field order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStat {
    /// The inode number.
    pub inode: u64,
    /// [`FileStat::FILE`] or [`FileStat::DIRECTORY`].
    pub kind: u64,
    /// Size in bytes.
    pub size: u64,
    /// Blocks (4 KiB) allocated to it, indirect blocks included.
    pub blocks: u64,
    /// Directory entries naming it.
    pub links: u64,
    /// Modification counter: grows with every change of contents or size.
    pub changes: u64,
}

impl FileStat {
    /// Words of the record.
    pub const WORDS: usize = 6;
    /// Bytes of the record.
    pub const SIZE: usize = Self::WORDS * 8;
    /// `kind` of a regular file.
    pub const FILE: u64 = 1;
    /// `kind` of a directory.
    pub const DIRECTORY: u64 = 2;

    /// The record's bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut bytes = [0u8; Self::SIZE];
        put_words(&mut bytes, &[self.inode, self.kind, self.size, self.blocks, self.links, self.changes]);
        bytes
    }

    /// Reads a record; `None` if `bytes` is shorter than [`FileStat::SIZE`].
    pub fn from_bytes(bytes: &[u8]) -> Option<FileStat> {
        let [inode, kind, size, blocks, links, changes] = get_words::<{ Self::WORDS }>(bytes)?;
        Some(FileStat { inode, kind, size, blocks, links, changes })
    }
}

/// What [`Syscall::HwCounters`] copies: [`HwCounters::WORDS`] little-endian `u64`s in field
/// order, counted by the hart since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HwCounters {
    /// Traps taken: system calls, faults and interrupts.
    pub traps: u64,
    /// `satp` writes (address-space switches, each with a full `sfence.vma`).
    pub satp_writes: u64,
    /// `sfence.vma`s, those of the `satp` writes included.
    pub sfences: u64,
}

impl HwCounters {
    /// Words of the record.
    pub const WORDS: usize = 3;
    /// Bytes of the record.
    pub const SIZE: usize = Self::WORDS * 8;

    /// The counters as words, in field order.
    pub const fn words(&self) -> [u64; Self::WORDS] {
        [self.traps, self.satp_writes, self.sfences]
    }

    /// The record's bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut bytes = [0u8; Self::SIZE];
        put_words(&mut bytes, &self.words());
        bytes
    }

    /// Reads a record; `None` if `bytes` is shorter than [`HwCounters::SIZE`].
    pub fn from_bytes(bytes: &[u8]) -> Option<HwCounters> {
        let [traps, satp_writes, sfences] = get_words::<{ Self::WORDS }>(bytes)?;
        Some(HwCounters { traps, satp_writes, sfences })
    }
}

/// The header [`Syscall::DiskState`] copies: [`DiskState::WORDS`] little-endian `u64`s in
/// field order, then `queued` queue entries (`event::DiskQueueEntry`, 32 bytes each).
/// Times are guest nanoseconds; distances are cylinders of the disk model. The first word
/// is the header's size, so fields can be added at the end without breaking readers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskState {
    /// Bytes of this header ([`DiskState::SIZE`]; the queue entries start there).
    pub header_bytes: u64,
    /// Guest time when the state was taken, ns since boot.
    pub now_ns: u64,
    /// The cylinder the arm is over.
    pub head_cylinder: u64,
    /// Cylinders of the modelled disk.
    pub cylinders: u64,
    /// Sectors (512 bytes) the disk has.
    pub capacity_sectors: u64,
    /// Most requests the queue holds.
    pub queue_capacity: u64,
    /// Requests queued (the entries that follow).
    pub queued: u64,
    /// Requests on the device (0 or 1).
    pub on_device: u64,
    /// Requests accepted since the service (re)started.
    pub submitted: u64,
    /// Requests completed (successfully or not).
    pub completed: u64,
    /// Requests taken off the queue.
    pub dispatched: u64,
    /// Submissions refused because the queue was full.
    pub refused_full: u64,
    /// Requests the device failed.
    pub device_errors: u64,
    /// Dispatches decided by a `disk.Schedule` answer.
    pub answered: u64,
    /// Dispatches where the maximum wait overrode the choice.
    pub starvation_overrides: u64,
    /// Modelled seek distance so far, cylinders.
    pub seek_cylinders: u64,
    /// Modelled busy time so far, ns.
    pub busy_ns: u64,
    /// Mean response time (queueing + service), ns; [`DiskState::NO_VALUE`] before the
    /// first request.
    pub mean_response_ns: u64,
    /// 99th-percentile response time, ns; [`DiskState::NO_VALUE`] before the first request.
    pub p99_response_ns: u64,
}

impl DiskState {
    /// Words of the header.
    pub const WORDS: usize = 19;
    /// Bytes of the header.
    pub const SIZE: usize = Self::WORDS * 8;
    /// A time that has no value yet.
    pub const NO_VALUE: u64 = u64::MAX;

    fn words(&self) -> [u64; Self::WORDS] {
        [
            self.header_bytes,
            self.now_ns,
            self.head_cylinder,
            self.cylinders,
            self.capacity_sectors,
            self.queue_capacity,
            self.queued,
            self.on_device,
            self.submitted,
            self.completed,
            self.dispatched,
            self.refused_full,
            self.device_errors,
            self.answered,
            self.starvation_overrides,
            self.seek_cylinders,
            self.busy_ns,
            self.mean_response_ns,
            self.p99_response_ns,
        ]
    }

    /// The header's bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut bytes = [0u8; Self::SIZE];
        put_words(&mut bytes, &self.words());
        bytes
    }

    /// Reads a header from the start of `bytes`; `None` if they are shorter than
    /// [`Self::SIZE`] or the first word says a shorter header.
    pub fn from_bytes(bytes: &[u8]) -> Option<DiskState> {
        let words = get_words::<{ Self::WORDS }>(bytes)?;
        if words[0] < Self::SIZE as u64 {
            return None;
        }
        let [header_bytes, now_ns, head_cylinder, cylinders, capacity_sectors, queue_capacity, queued, on_device, submitted, completed, dispatched, refused_full, device_errors, answered, starvation_overrides, seek_cylinders, busy_ns, mean_response_ns, p99_response_ns] =
            words;
        Some(DiskState {
            header_bytes,
            now_ns,
            head_cylinder,
            cylinders,
            capacity_sectors,
            queue_capacity,
            queued,
            on_device,
            submitted,
            completed,
            dispatched,
            refused_full,
            device_errors,
            answered,
            starvation_overrides,
            seek_cylinders,
            busy_ns,
            mean_response_ns,
            p99_response_ns,
        })
    }

    /// The queue entries in `bytes` (a whole [`Syscall::DiskState`] copy: header first):
    /// at most `queued`, as many whole entries as `bytes` holds.
    pub fn entries<'bytes>(&self, bytes: &'bytes [u8]) -> impl Iterator<Item = crate::event::DiskQueueEntry> + Clone + 'bytes {
        let start = (self.header_bytes as usize).min(bytes.len());
        crate::event::DiskQueueEntry::all(&bytes[start..]).take(self.queued as usize)
    }

    /// The full length of a copy with `queued` entries.
    pub fn total_bytes(&self) -> u64 {
        self.header_bytes.saturating_add(self.queued.saturating_mul(crate::event::DiskQueueEntry::SIZE as u64))
    }
}

impl fmt::Display for Syscall {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}(", self.name())?;
        for (index, argument) in self.arguments().iter().enumerate() {
            if index > 0 {
                formatter.write_str(", ")?;
            }
            formatter.write_str(argument)?;
        }
        write!(formatter, ") -> {}", self.result())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn numbers_are_unique_dense_and_round_trip() {
        for (index, call) in Syscall::ALL.iter().enumerate() {
            assert_eq!(call.number(), index, "{call:?} is not numbered densely");
            assert_eq!(Syscall::from_number(call.number()), Some(*call));
        }
        assert_eq!(Syscall::from_number(Syscall::ALL.len()), None);
        assert_eq!(Syscall::from_number(usize::MAX), None);
    }

    #[test]
    fn names_are_unique_and_arguments_fit_in_six_registers() {
        for call in Syscall::ALL {
            assert!(call.arguments().len() <= 6, "{call}");
            assert_eq!(Syscall::ALL.iter().filter(|other| other.name() == call.name()).count(), 1);
        }
        assert_eq!(Syscall::Write.to_string(), "write(handle, pointer, length) -> bytes written");
        assert_eq!(Syscall::Yield.to_string(), "yield() -> 0");
    }

    #[test]
    fn error_codes_round_trip_and_zero_is_success() {
        assert_eq!(Error::from_code(0), None);
        for (index, error) in Error::ALL.iter().enumerate() {
            assert_eq!(error.code(), index + 1);
            assert_eq!(Error::from_code(error.code()), Some(*error));
        }
        assert_eq!(Error::from_code(Error::ALL.len() + 1), None);
    }

    #[test]
    fn disk_state_round_trips_with_its_entries() {
        use crate::event::DiskQueueEntry;
        let state = DiskState {
            header_bytes: DiskState::SIZE as u64,
            now_ns: 1,
            head_cylinder: 2,
            cylinders: 1962,
            capacity_sectors: 4,
            queue_capacity: 256,
            queued: 2,
            on_device: 1,
            submitted: 9,
            completed: 6,
            dispatched: 7,
            refused_full: 10,
            device_errors: 11,
            answered: 12,
            starvation_overrides: 13,
            seek_cylinders: 14,
            busy_ns: 15,
            mean_response_ns: DiskState::NO_VALUE,
            p99_response_ns: 17,
        };
        let entries = [DiskQueueEntry { id: 8, sector: 100, cylinder: 3, arrival_ns: 50 }, DiskQueueEntry { id: 9, sector: 7, cylinder: 0, arrival_ns: 60 }];
        let mut bytes = std::vec::Vec::from(state.to_bytes());
        for entry in &entries {
            bytes.extend_from_slice(&entry.to_bytes());
        }
        assert_eq!(bytes.len() as u64, state.total_bytes());
        let read = DiskState::from_bytes(&bytes).unwrap();
        assert_eq!(read, state);
        assert_eq!(read.entries(&bytes).collect::<std::vec::Vec<_>>(), entries);
        // A copy cut short holds the whole entries only; a short header is none.
        assert_eq!(read.entries(&bytes[..DiskState::SIZE + 40]).count(), 1);
        assert_eq!(DiskState::from_bytes(&bytes[..DiskState::SIZE - 1]), None);
        let mut lying = bytes.clone();
        lying[0] = 8;
        assert_eq!(DiskState::from_bytes(&lying), None, "a header claiming 8 bytes");
        // A longer header (a later ABI): the entries start where it says.
        let mut longer = state;
        longer.header_bytes += 8;
        let mut bytes = std::vec::Vec::from(longer.to_bytes());
        bytes.extend_from_slice(&[0xff; 8]);
        bytes.extend_from_slice(&entries[0].to_bytes());
        assert_eq!(DiskState::from_bytes(&bytes).unwrap().entries(&bytes).next(), Some(entries[0]));
    }

    #[test]
    fn hardware_counters_round_trip_in_field_order() {
        let counters = HwCounters { traps: 1, satp_writes: 2, sfences: 0x0102_0304_0506_0708 };
        let bytes = counters.to_bytes();
        assert_eq!((bytes[0], bytes[8], &bytes[16..]), (1, 2, &[8, 7, 6, 5, 4, 3, 2, 1][..]), "little-endian words in field order");
        assert_eq!(HwCounters::from_bytes(&bytes), Some(counters));
        assert_eq!(HwCounters::from_bytes(&bytes[..HwCounters::SIZE - 1]), None, "a short copy is none");
        assert_eq!(counters.words(), [1, 2, 0x0102_0304_0506_0708]);
    }

    #[test]
    fn exit_statuses_round_trip() {
        for status in [
            ExitStatus::Exited(0),
            ExitStatus::Exited(42),
            ExitStatus::Exited(-1),
            ExitStatus::Exited(i32::MIN),
            ExitStatus::Killed(KillCause::Fault),
            ExitStatus::Killed(KillCause::Request),
        ] {
            assert_eq!(ExitStatus::decode(status.encode()), Some(status));
        }
        assert_eq!(ExitStatus::decode(KILLED_FLAG | 9), None);
        assert_eq!(ExitStatus::decode(1 << 40), None);
        assert!(ExitStatus::Exited(0).is_success());
        assert!(!ExitStatus::Exited(1).is_success());
        assert!(!ExitStatus::Killed(KillCause::Request).is_success());
    }
}
