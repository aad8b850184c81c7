//! User processes: programs from the boot bundle running in U-mode, each in its own Sv39
//! address space, on its own strand (DESIGN.md §1: a strand is also "a user thread's
//! kernel side").
//!
//! [`spawn`] finds `bin/NAME` in the boot bundle, validates it as a static executable
//! (`spindle_process::Executable`: W^X, bounds, segments inside the image region), builds
//! an [`AddressSpace`] (the kernel's mappings shared, the image and a stack with a guard
//! page mapped with the U bit), records the process and starts its strand. The strand
//! loops: enter U-mode ([`UserContext::run`]) until a trap; a system call goes to
//! [`crate::syscall`], a timer interrupt to the scheduler's tick (which preempts the
//! process like any strand), and any other exception kills the process with the cause
//! reported (`[proc] pid N (name) killed: …`), never the kernel. When the process exits or
//! is killed, its strand switches back to the kernel's table, frees the address space
//! and records the [`ExitStatus`]; [`wait`] returns it to the parent and reaps the entry.
//!
//! Parents: a process spawned by the kernel (console `run`, tests) has
//! [`Parent::Kernel`]; one spawned by a process has that process as parent, which alone
//! may [`wait`] for or [`kill`] it. When a parent ends, its children are detached and
//! reaped as soon as they end.
//!
//! Locking: the process table is one lock, taken with interrupts off and never across a
//! block. A process's address space and user context are owned by its strand alone, so
//! system calls touch them without locks.
//!
//! Capabilities: each process has a table ([`capabilities`]) with the console and the
//! privileges its spawner granted ([`Grants`]); its kernel-side messages for `Refused`
//! errors are kept for `last_error`.
//!
//! Limitations: one thread per process; programs come only from the boot bundle; no
//! signals beyond kill; the scheduler treats process strands like kernel strands (same priority).

#[allow(unsafe_code)]
mod address_space;
#[allow(unsafe_code)]
pub mod migrate;
pub mod service;
pub mod capabilities;

/// What the kernel tests reach inside the translation of a live space (by process id).
#[cfg(feature = "tests")]
pub mod testing {
    pub use super::address_space::{in_transit, lowest_resident_page, page_out_page, read_word, resident_vm_map_pages};
}

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use spindle_abi::syscall::{Error, ExitStatus, KillCause, MAX_COMMAND_LINE};
use spindle_process::layout::STACK_TOP;
use spindle_process::{Executable, ExecutableError};

pub use address_space::{AddressSpace, FaultKill, ImageSource, SpaceError, SpaceView, copy_user_page};
pub use capabilities::{Grants, ProcessCapabilities};

use crate::arch::csr;
use crate::arch::trap::{Exception, FaultReport, TrapCause};
use crate::arch::user::UserContext;
use crate::sched::{self, Priority, Strand};

/// Bundle entries of user programs are named `bin/<name>` (xtask packs them so).
pub const PROGRAM_PREFIX: &str = "bin/";
/// Most processes that may exist at once (running or not yet reaped).
pub const MAX_PROCESSES: usize = 64;

/// Who may wait for and kill a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parent {
    /// The kernel (the console's `run`, tests).
    Kernel,
    /// The process with this id.
    Process(u64),
    /// Nobody: its parent ended first; it is reaped as soon as it ends.
    Detached,
}

impl fmt::Display for Parent {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Parent::Kernel => formatter.write_str("kernel"),
            Parent::Process(pid) => write!(formatter, "{pid}"),
            Parent::Detached => formatter.write_str("-"),
        }
    }
}

/// One process, as the table and other strands see it.
pub struct Process {
    pid: u64,
    name: String,
    command_line: String,
    parent: spin::Mutex<Parent>,
    status: spin::Mutex<Option<ExitStatus>>,
    kill_requested: AtomicBool,
    strand: spin::Once<Arc<Strand>>,
    waiters: spin::Mutex<Vec<Arc<Strand>>>,
    fault: spin::Mutex<Option<FaultReport>>,
    fault_cause: spin::Mutex<Option<FaultKill>>,
    system_calls: AtomicU64,
    mapped_bytes: AtomicUsize,
    capabilities: ProcessCapabilities,
    last_error: spin::Mutex<String>,
}

impl Process {
    /// Its id (from 1, never reused).
    pub fn pid(&self) -> u64 {
        self.pid
    }
    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The command line it was started with.
    pub fn command_line(&self) -> &str {
        &self.command_line
    }
    /// Who may wait for it.
    pub fn parent(&self) -> Parent {
        csr::without_interrupts(|| *self.parent.lock())
    }
    /// How it ended, once it has.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        csr::without_interrupts(|| *self.status.lock())
    }
    /// The fault that killed it, if one did.
    pub fn fault(&self) -> Option<FaultReport> {
        csr::without_interrupts(|| *self.fault.lock())
    }
    /// Why a user page fault killed it, if one did (the translation service's cause).
    pub fn fault_cause(&self) -> Option<FaultKill> {
        csr::without_interrupts(|| *self.fault_cause.lock())
    }
    /// Whether a kill was requested (the process ends at its next trap or wakeup).
    pub fn kill_requested(&self) -> bool {
        self.kill_requested.load(Ordering::Acquire)
    }
    /// System calls made so far (a progress counter for tests and `ps`).
    pub fn system_calls(&self) -> u64 {
        self.system_calls.load(Ordering::Relaxed)
    }
    /// Counts one system call.
    pub fn count_system_call(&self) {
        self.system_calls.fetch_add(1, Ordering::Relaxed);
    }
    /// Bytes of user memory it has mapped.
    pub fn mapped_bytes(&self) -> usize {
        self.mapped_bytes.load(Ordering::Relaxed)
    }
    /// Updates [`Self::mapped_bytes`] (its strand does, after mapping changes).
    pub fn set_mapped_bytes(&self, bytes: usize) {
        self.mapped_bytes.store(bytes, Ordering::Relaxed);
    }
    /// Its strand (the kernel side of its one thread).
    pub fn strand(&self) -> Option<&Arc<Strand>> {
        self.strand.get()
    }
    /// Its capability table: the console and the privileges it was granted.
    pub fn capabilities(&self) -> &ProcessCapabilities {
        &self.capabilities
    }
    /// The kernel's words for its last `Refused` system call (empty if none).
    pub fn last_error(&self) -> String {
        csr::without_interrupts(|| self.last_error.lock().clone())
    }
    /// Records the reason of a `Refused` system call for `last_error`.
    pub fn set_last_error(&self, message: String) {
        csr::without_interrupts(|| *self.last_error.lock() = message);
    }
}

static PROCESSES: spin::Mutex<BTreeMap<u64, Arc<Process>>> = spin::Mutex::new(BTreeMap::new());
static NEXT_PID: AtomicU64 = AtomicU64::new(1);

fn with_table<R>(f: impl FnOnce(&mut BTreeMap<u64, Arc<Process>>) -> R) -> R {
    csr::without_interrupts(|| f(&mut PROCESSES.lock()))
}

/// Prepares the hardware for user mode: U-mode may read the counters (DESIGN.md §3).
pub fn init() {
    csr::enable_user_counters();
}

/// Why a process could not be started.
#[derive(Debug)]
pub enum SpawnError {
    /// A system-call error (no such program, bad command line, too many processes, …).
    Refused(Error),
    /// The program is not a valid static executable.
    BadProgram(ExecutableError),
    /// Building its address space failed.
    Space(SpaceError),
}

impl SpawnError {
    /// The error code a `spawn` system call returns for this.
    pub fn code(&self) -> Error {
        match self {
            SpawnError::Refused(error) => *error,
            SpawnError::BadProgram(_) => Error::BadProgram,
            SpawnError::Space(SpaceError::OutOfMemory) => Error::NoMemory,
            SpawnError::Space(_) => Error::BadProgram,
        }
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Refused(error) => write!(formatter, "{error}"),
            SpawnError::BadProgram(error) => write!(formatter, "not a valid program: {error}"),
            SpawnError::Space(error) => write!(formatter, "address space: {error}"),
        }
    }
}

/// The names of the programs in the boot bundle.
pub fn programs() -> Vec<&'static str> {
    crate::ext::bundle::get()
        .map(|bundle| bundle.entries.iter().filter_map(|entry| entry.name.strip_prefix(PROGRAM_PREFIX)).collect())
        .unwrap_or_default()
}

/// Most bytes of ELF and program headers a program file may have (its first bytes, read
/// at spawn).
const MAX_PROGRAM_HEADERS: usize = 64 * 1024;

/// Opens program file `path` as a running program's image and reads its ELF and program
/// headers: the open file, those bytes, the file's length. Errors as [`spawn`]'s for a file.
fn read_program_head(path: &str) -> Result<(Arc<crate::services::fs::OpenFile>, Vec<u8>, u64), SpawnError> {
    let refused = |error: crate::services::fs::FsCallError| match error.code() {
        Error::NotFound | Error::NotADirectory | Error::IsADirectory => SpawnError::Refused(Error::NoSuchProgram),
        code => SpawnError::Refused(code),
    };
    let (file, length) = crate::services::fs::open_program(path).map_err(refused)?;
    let read = |wanted: usize| -> Result<Vec<u8>, SpawnError> {
        let mut bytes = alloc::vec![0u8; wanted];
        let count = crate::services::fs::read_at(&file, 0, &mut bytes).map_err(refused)?;
        bytes.truncate(count);
        Ok(bytes)
    };
    // The first block holds the headers of every program we build; a file whose table lies
    // further in is read again as far as it ends.
    let mut head = read(crate::arch::PAGE_SIZE.min(length as usize))?;
    let wanted = Executable::header_length(&head).map_err(SpawnError::BadProgram)?;
    if wanted > head.len() && (wanted as u64) <= length && wanted <= MAX_PROGRAM_HEADERS {
        head = read(wanted)?;
    }
    Ok((file, head, length))
}

/// Starts `command_line` (`NAME [ARGUMENTS…]`): program `bin/NAME` of the boot bundle
/// (or, for a NAME starting with `/`, the ELF file at that path of the file system), as a
/// child of `parent`, holding the console and `grants` (the caller decides what it
/// may pass on).
///
/// A file program's file stays open as its image while the process lives (its pages are
/// read from it on first touch): it cannot be written or removed meanwhile.
///
/// Errors: `Refused(BadArgument)` (no name), `Refused(BadLength)` (longer than
/// `MAX_COMMAND_LINE`), `Refused(NoSuchProgram)` (no such program or file),
/// `Refused(Busy)` (the file is open for writing), `Refused(NoDevice | Io | Corrupt)`
/// (the file system could not read the file), `BadProgram`, `Space` (out of memory),
/// `Refused(TooMany)` (`MAX_PROCESSES` exist), `Refused(NoMemory)` (no strand stack).
pub fn spawn(command_line: &str, parent: Parent, grants: Grants) -> Result<Arc<Process>, SpawnError> {
    if command_line.len() > MAX_COMMAND_LINE {
        return Err(SpawnError::Refused(Error::BadLength));
    }
    let name = command_line.split_ascii_whitespace().next().ok_or(SpawnError::Refused(Error::BadArgument))?;
    // An ELF file of the file system (`run /bin/NAME`) is read only as far as its headers:
    // its pages come from the file through the buffer cache when first touched.
    let head: Vec<u8>;
    let (source, executable) = if name.starts_with('/') {
        let (file, head_bytes, length) = read_program_head(name)?;
        head = head_bytes;
        (ImageSource::File(file), Executable::parse_headers(&head, length).map_err(SpawnError::BadProgram)?)
    } else {
        let bytes = crate::ext::bundle::payload(&alloc::format!("{PROGRAM_PREFIX}{name}")).ok_or(SpawnError::Refused(Error::NoSuchProgram))?;
        (ImageSource::Bundle(bytes), Executable::parse(bytes).map_err(SpawnError::BadProgram)?)
    };
    if with_table(|table| table.len()) >= MAX_PROCESSES {
        return Err(SpawnError::Refused(Error::TooMany));
    }
    let capabilities = ProcessCapabilities::new(grants).map_err(SpawnError::Refused)?;
    let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
    let mut space = AddressSpace::new(pid).map_err(SpawnError::Space)?;
    space.load(&executable, source).map_err(SpawnError::Space)?;
    space.map_stack().map_err(SpawnError::Space)?;
    let process = Arc::new(Process {
        pid,
        name: name.into(),
        command_line: command_line.trim().into(),
        parent: spin::Mutex::new(parent),
        status: spin::Mutex::new(None),
        kill_requested: AtomicBool::new(false),
        strand: spin::Once::new(),
        waiters: spin::Mutex::new(Vec::new()),
        fault: spin::Mutex::new(None),
        fault_cause: spin::Mutex::new(None),
        system_calls: AtomicU64::new(0),
        mapped_bytes: AtomicUsize::new(space.mapped_bytes()),
        capabilities,
        last_error: spin::Mutex::new(String::new()),
    });
    let inserted = with_table(|table| {
        if table.len() >= MAX_PROCESSES {
            return false;
        }
        table.insert(process.pid, process.clone());
        true
    });
    if !inserted {
        return Err(SpawnError::Refused(Error::TooMany));
    }
    let entry = executable.entry();
    let body_process = process.clone();
    match sched::spawn(name, Priority::NORMAL, move || process_main(body_process, space, entry)) {
        Ok(strand) => {
            process.strand.call_once(|| strand);
            Ok(process)
        }
        Err(_) => {
            with_table(|table| table.remove(&process.pid));
            Err(SpawnError::Refused(Error::NoMemory))
        }
    }
}

/// The body of a process's strand: runs U-mode and handles its traps until the process
/// exits, faults or is killed; then frees the address space and records the status.
fn process_main(process: Arc<Process>, space: AddressSpace, entry: usize) {
    // The spawner records the strand too, but this strand may run (and end) first.
    process.strand.call_once(sched::current);
    sched::set_current_process(process.pid());
    let mut space = space;
    let mut context = alloc::boxed::Box::new(UserContext::new(entry, STACK_TOP));
    sched::set_address_space(space.root_address());
    let status = loop {
        if process.kill_requested() {
            break ExitStatus::Killed(KillCause::Request);
        }
        context.run();
        crate::arch::hart::current().trap_count.fetch_add(1, Ordering::Relaxed);
        match context.cause() {
            // Interrupts are off here, as in the kernel's trap handler; the tick may
            // preempt this strand, which then resumes here.
            TrapCause::TimerInterrupt => {
                // The switch, if due, happens here in thread context, so policies see it
                // as `sched.Checkpoint` (reason TIME_SLICE).
                if crate::sched::on_user_timer_interrupt() {
                    csr::enable_interrupts();
                    sched::preempt_for_time_slice();
                }
            }
            TrapCause::Exception(Exception::UserEnvironmentCall) => {
                context.skip_ecall();
                csr::enable_interrupts();
                match crate::syscall::handle(&process, &mut space, &mut context) {
                    crate::syscall::Outcome::Return => {}
                    crate::syscall::Outcome::Exit(status) => break ExitStatus::Exited(status),
                    crate::syscall::Outcome::Killed => break ExitStatus::Killed(KillCause::Request),
                }
                process.set_mapped_bytes(space.mapped_bytes());
            }
            // A device interrupt (level-triggered at the PLIC, so still pending): taken
            // again at once in S-mode by the kernel's trap handler, which claims it and runs
            // the driver; `run` turns interrupts off again before entering U-mode.
            TrapCause::ExternalInterrupt => csr::enable_interrupts(),
            TrapCause::SoftwareInterrupt => {
                crate::println!("[proc] pid {} ({}): spurious {}", process.pid, process.name, context.cause());
            }
            // A user page fault: the translation service decides (demand-zero, a pager's
            // frame, a protection change, a retry — then the instruction runs again — or a
            // kill with its cause).
            TrapCause::Exception(exception @ (Exception::LoadPageFault | Exception::StorePageFault | Exception::InstructionPageFault)) => {
                csr::enable_interrupts();
                let access = match exception {
                    Exception::StorePageFault => spindle_service_vm::AccessKind::Write,
                    Exception::InstructionPageFault => spindle_service_vm::AccessKind::Execute,
                    _ => spindle_service_vm::AccessKind::Read,
                };
                let report = context.fault_report();
                if let Err(cause) = space.handle_fault(report.stval, access) {
                    crate::println!("[proc] pid {} ({}) killed: {}: {cause}", process.pid, process.name, describe_fault(&report));
                    csr::without_interrupts(|| {
                        *process.fault.lock() = Some(report);
                        *process.fault_cause.lock() = Some(cause);
                    });
                    break ExitStatus::Killed(KillCause::Fault);
                }
            }
            TrapCause::Exception(_) | TrapCause::Unknown(_) => {
                let report = context.fault_report();
                crate::println!("[proc] pid {} ({}) killed: {}", process.pid, process.name, describe_fault(&report));
                csr::without_interrupts(|| *process.fault.lock() = Some(report));
                break ExitStatus::Killed(KillCause::Fault);
            }
        }
    };
    csr::enable_interrupts();
    // Off the process's table before freeing it (see AddressSpace's Drop).
    sched::set_address_space(0);
    drop(context);
    drop(space);
    process.set_mapped_bytes(0);
    // Its byte-range locks and waiting lock requests go with it.
    crate::services::locks::release_owner(process.pid as u32);
    crate::services::policy::process_exited(process.pid);
    finish(&process, status);
}

/// `load page fault at 0x… (pc 0x…)`, or the value for non-address causes.
pub fn describe_fault(report: &FaultReport) -> String {
    let address_like = match report.cause {
        TrapCause::Exception(exception) => exception.stval_meaning() == "address",
        _ => false,
    };
    if address_like {
        alloc::format!("{} at {:#x} (pc {:#x})", report.cause, report.stval, report.pc)
    } else {
        alloc::format!("{} (stval {:#x}) at pc {:#x}", report.cause, report.stval, report.pc)
    }
}

/// Records the end of `process`, wakes its waiters, detaches its children, and reaps it
/// at once if nobody will wait for it.
fn finish(process: &Arc<Process>, status: ExitStatus) {
    let waiters = csr::without_interrupts(|| {
        *process.status.lock() = Some(status);
        core::mem::take(&mut *process.waiters.lock())
    });
    for waiter in waiters {
        sched::unblock(&waiter);
    }
    with_table(|table| {
        let children: Vec<Arc<Process>> =
            table.values().filter(|child| *child.parent.lock() == Parent::Process(process.pid)).cloned().collect();
        for child in children {
            *child.parent.lock() = Parent::Detached;
            if child.status.lock().is_some() {
                table.remove(&child.pid);
            }
        }
        if *process.parent.lock() == Parent::Detached {
            table.remove(&process.pid);
        }
    });
}

/// Why [`wait`] returned without a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// A system-call error: `NoSuchProcess`, `NotPermitted`.
    Refused(Error),
    /// The waiter itself was asked to stop (`interrupted` returned true).
    Interrupted,
}

/// Waits until process `pid`, a child of `waiter`, has ended, reaps it and returns its
/// status. `interrupted` is asked after every wakeup (a waiting process that is killed
/// stops waiting).
///
/// Errors: `NoSuchProcess` (no such process, or already reaped), `NotPermitted` (not a
/// child of `waiter`), `Interrupted`.
pub fn wait(pid: u64, waiter: Parent, interrupted: &dyn Fn() -> bool) -> Result<ExitStatus, WaitError> {
    let process = with_table(|table| table.get(&pid).cloned()).ok_or(WaitError::Refused(Error::NoSuchProcess))?;
    if process.parent() != waiter {
        return Err(WaitError::Refused(Error::NotPermitted));
    }
    let me = sched::current();
    let status = loop {
        let status = csr::without_interrupts(|| {
            let status = *process.status.lock();
            if status.is_none() {
                process.waiters.lock().push(me.clone());
            }
            status
        });
        if let Some(status) = status {
            break status;
        }
        sched::block_current();
        if interrupted() {
            csr::without_interrupts(|| process.waiters.lock().retain(|strand| !Arc::ptr_eq(strand, &me)));
            return Err(WaitError::Interrupted);
        }
    };
    let reaped = with_table(|table| table.remove(&pid)).is_some();
    if !reaped {
        // Another kernel waiter reaped it first.
        return Err(WaitError::Refused(Error::NoSuchProcess));
    }
    // The strand has recorded the status; wait until it has returned too, so that its
    // kernel stack is freed when this returns (the reaper runs on the next switch).
    if let Some(strand) = process.strand() {
        strand.join();
    }
    Ok(status)
}

/// Asks process `pid` to end; `requester` must be its parent (the kernel may end any
/// process). A process ends at its next trap (at most one timer tick away) or when its
/// blocking system call wakes; its status becomes `Killed(Request)`. Killing a process
/// that has ended but is not yet reaped does nothing.
///
/// Errors: `NoSuchProcess`, `NotPermitted`.
pub fn kill(pid: u64, requester: Parent) -> Result<(), Error> {
    let process = with_table(|table| table.get(&pid).cloned()).ok_or(Error::NoSuchProcess)?;
    if requester != Parent::Kernel && process.parent() != requester {
        return Err(Error::NotPermitted);
    }
    process.kill_requested.store(true, Ordering::Release);
    if let Some(strand) = process.strand() {
        sched::unblock(strand);
    }
    Ok(())
}

/// Sleeps until process `pid` is no longer in the table (ended and reaped — detached
/// processes are reaped as they end) or `ticks` timer ticks have passed; true if it is gone.
pub fn wait_until_reaped(pid: u64, ticks: u64) -> bool {
    let deadline = crate::time::ticks() + ticks;
    while find(pid).is_some() {
        if crate::time::ticks() >= deadline {
            return false;
        }
        // Blocked, not spinning: the process may run at a lower priority than the caller.
        sched::sleep_ticks(1);
    }
    true
}

/// The process with id `pid`, if it exists (running or not yet reaped).
pub fn find(pid: u64) -> Option<Arc<Process>> {
    with_table(|table| table.get(&pid).cloned())
}

/// Every process, by id.
pub fn list() -> Vec<Arc<Process>> {
    with_table(|table| table.values().cloned().collect())
}
