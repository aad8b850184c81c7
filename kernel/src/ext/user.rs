//! User-level extensions: the fourth technology (Small & Seltzer's user-level server,
//! reached by an upcall).
//!
//! The trusted builder (`cargo xtask ext build <crate> --user`) links an extension crate
//! with generated glue into a user program, bundled as `bin/ext-<name>`. [`load`] starts
//! that program as a detached process and waits for it to register through the
//! `upcall_serve` system call ([`serve`], on the process's own strand): the
//! registration names the manifest text, one `BindingInfo` per binding (the native
//! contract), the upcall entry and the upcall stack. The loader checks each binding
//! against the kernel's declaration of its event exactly as for native and Wasm
//! extensions, installs bounded bindings, and lets the process's strand block inside
//! `upcall_serve` for as long as the extension is loaded — which pins its address space:
//! a process blocked there cannot map, unmap or exit.
//!
//! **An upcall** runs on the strand that raised the event (the thread migrates, as in
//! LRPC; nothing is queued and no scheduler decision is made): [`UserHandler::invoke`]
//! encodes the argument record into four words, switches `satp` to the process's root
//! table, enters U-mode at the registered entry with the binding index, the record sizes
//! and the words in `a0`..`a6`, and runs until the handler makes the `upcall_return`
//! system call with a status and the result words; then it switches back and decodes the
//! result. While the upcall runs the kernel answers the handler's `write` (console) and
//! `kernel_function` (its granted domains) system calls inline; any other call gets
//! `WrongState`. Timer and device interrupts taken in U-mode are delivered to the kernel
//! at once (interrupts are briefly enabled in S-mode), so the binding's budget is
//! enforced by the same deadline as for every other technology: an upcall that loops is
//! aborted, the extension is killed (bindings removed, events fall back to their
//! defaults), and its process's `upcall_serve` returns `Contained`. A U-mode fault or a
//! handler panic (the runtime exits, which inside an upcall counts as a panic) is
//! contained the same way.
//!
//! Unloading ends the serving: the process's `upcall_serve` returns 0 and the glue exits.
//! Killing the process (from the kernel) withdraws the extension first.
//!
//! Limitations: one upcall at a time per extension (a raise that arrives while one runs —
//! only possible if an upcall handler's own kernel function raised an event bound to the
//! same extension — gets the event's default); floating-point state is the upcall
//! context's own, switched lazily like a process's (not at all unless the handler uses
//! the unit: `arch::user`).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::fmt;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, Ordering};

use spindle_abi::event::{Event, EventRecord};
use spindle_abi::extension::{decode_words, encode_words};
use spindle_abi::host::KERNEL_FUNCTIONS;
use spindle_abi::native::BindingInfo;
use spindle_abi::syscall::{Error, MAX_UPCALL_BINDINGS, MAX_UPCALL_MANIFEST, Syscall, UPCALL_RECORD_WORDS, UpcallRegistration};
use spindle_dispatch::{BindingId, BindingSpec, Handler, HandlerDescription, HandlerFault, Mode};
use spindle_loader::Manifest;
use spindle_process::user_range;

use super::{ExtensionError, LoadedExtension, Technology};
use crate::arch::csr;
use crate::arch::user::UserContext;
use crate::proc::migrate::{self, CallFault};
use crate::proc::{self, AddressSpace, Parent, Process, SpaceView};
use crate::sched::{self, Strand};

/// User-level builds are bundled as program `bin/ext-<name>`.
pub const PROGRAM_PREFIX: &str = "ext-";
/// How long [`load`] waits for the started process to register (5 s at 100 Hz).
const REGISTRATION_TIMEOUT_TICKS: u64 = 500;
/// Bytes of a record passed in registers.
const RECORD_BYTES: usize = UPCALL_RECORD_WORDS * 8;
/// The status the glue's panic path returns with `upcall_return`.
const PANIC_STATUS: usize = 101;

const _: () = assert!(RECORD_BYTES >= super::native::MAX_RECORD);

/// Why a user-level extension could not be loaded.
#[derive(Debug)]
pub enum UserError {
    /// The bundle has no `bin/ext-<name>`.
    NoProgram(String),
    /// The program could not be started.
    Spawn(String),
    /// The process ended before registering.
    ExitedBeforeServing(String),
    /// The process did not register in time (it was killed).
    Timeout,
    /// The registration names another extension, or a binding does not match the kernel.
    BadRegistration(String),
    /// Installation failed (the dispatcher refused a binding, or the name is taken).
    Install(ExtensionError),
}

impl fmt::Display for UserError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserError::NoProgram(name) => write!(formatter, "no user-level build of `{name}` in the boot bundle (bin/{PROGRAM_PREFIX}{name})"),
            UserError::Spawn(reason) => write!(formatter, "starting its process failed: {reason}"),
            UserError::ExitedBeforeServing(status) => write!(formatter, "its process {status} before registering"),
            UserError::Timeout => write!(formatter, "its process did not register within {} ticks (killed)", REGISTRATION_TIMEOUT_TICKS),
            UserError::BadRegistration(reason) => write!(formatter, "bad registration: {reason}"),
            UserError::Install(error) => write!(formatter, "{error}"),
        }
    }
}

/// What a registered process offers: checked at `upcall_serve`, used by the loader.
struct Registration {
    manifest: Manifest,
    bindings: Vec<BindingInfo>,
    view: SpaceView,
    entry: usize,
    stack_top: usize,
}

/// How serving ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Unloaded (or replaced): `upcall_serve` returns 0.
    Unloaded,
    /// Killed by containment: `upcall_serve` returns `Contained`.
    Contained,
}

/// A load in progress: the loader waits for the process `pid` to register.
struct Pending {
    pid: u64,
    loader: Arc<Strand>,
    registration: Option<Registration>,
    server: Option<Arc<Strand>>,
    verdict: Option<Result<Arc<UserExtension>, String>>,
}

static PENDING: spin::Mutex<Vec<Pending>> = spin::Mutex::new(Vec::new());

fn with_pending<T>(f: impl FnOnce(&mut Vec<Pending>) -> T) -> T {
    csr::without_interrupts(|| f(&mut PENDING.lock()))
}

/// What an upcall needs while the extension is served.
struct Serving {
    view: SpaceView,
    entry: usize,
    stack_top: usize,
    context: Box<UserContext>,
}

/// A user-level extension's serving process, as its handlers see it.
pub struct UserExtension {
    name: String,
    pid: u64,
    domains: Vec<String>,
    budget: u64,
    /// `None` once serving ended (no upcall may start; the space is no longer pinned).
    /// An upcall aborted by its bounded call leaks its guard: the lock then stays held
    /// and `end` cannot empty it, which keeps every later upcall out just as well; the
    /// `Serving` (and its view of the space) goes when this extension is dropped.
    serving: TryLock<Option<Serving>>,
    ending: spin::Mutex<Option<Ending>>,
    server: Arc<Strand>,
}

impl UserExtension {
    /// The serving process's id.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// Ends serving (once): no new upcall starts, and the process's `upcall_serve` returns.
    fn end(&self, ending: Ending) {
        let first = csr::without_interrupts(|| {
            let mut slot = self.ending.lock();
            if slot.is_some() {
                return false;
            }
            *slot = Some(ending);
            true
        });
        if first {
            // An upcall holds `serving` only with preemption off on this hart, so this strand
            // cannot be interrupting one: the lock is free — unless an aborted call leaked
            // its guard, which keeps every later upcall out just as well (never spin here).
            csr::without_interrupts(|| {
                if let Some(mut serving) = self.serving.try_lock() {
                    serving.take();
                }
            });
            sched::unblock(&self.server);
        }
    }
}

/// A lock that is only ever tried, never waited for (`UserExtension::serving`: a busy
/// server refuses the upcall). Its flag is a whole word, so taking it is one `amoswap.w`;
/// `spin::Mutex`'s flag is a byte, which RISC-V reaches through a masked `amoor.w` (eight
/// more instructions on every upcall).
struct TryLock<T> {
    locked: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `TryLockGuard`, and at most one exists at a
// time (the flag), so sharing the lock between harts hands the value to one at a time:
// `T: Send` is what that needs.
unsafe impl<T: Send> Sync for TryLock<T> {}

impl<T> TryLock<T> {
    const fn new(value: T) -> Self {
        TryLock { locked: AtomicU32::new(0), value: UnsafeCell::new(value) }
    }

    /// The value, if nobody holds it.
    #[inline(always)]
    fn try_lock(&self) -> Option<TryLockGuard<'_, T>> {
        (self.locked.swap(1, Ordering::Acquire) == 0).then_some(TryLockGuard { lock: self })
    }
}

/// The held [`TryLock`]; dropping it releases the lock. (An aborted upcall never drops it:
/// the lock then stays held, as `UserExtension::serving` describes.)
struct TryLockGuard<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> core::ops::Deref for TryLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (it set the flag and has not cleared it), so no
        // other reference to the value exists while the returned one lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> core::ops::DerefMut for TryLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for TryLockGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        self.lock.locked.store(0, Ordering::Release);
    }
}

/// The image of a loaded user-level extension: dropping it (unload, replace) ends serving.
pub struct UserImage {
    extension: Arc<UserExtension>,
}

impl UserImage {
    /// The serving extension.
    pub fn extension(&self) -> &Arc<UserExtension> {
        &self.extension
    }
}

impl Drop for UserImage {
    fn drop(&mut self) {
        self.extension.end(Ending::Unloaded);
    }
}

/// The serving process of the loaded extension `name`, if it is user-level.
pub fn serving_pid(name: &str) -> Option<u64> {
    let extension = super::find(name)?;
    let image = extension.image.lock();
    match image.as_ref()? {
        super::ExtensionImage::User(image) => Some(image.extension().pid()),
        _ => None,
    }
}

/// Starts `bin/ext-<name>`, waits for it to register, checks and installs its bindings.
pub fn load(name: &str, installer: &mut super::Installer) -> Result<Arc<LoadedExtension>, UserError> {
    let program = alloc::format!("{PROGRAM_PREFIX}{name}");
    if super::bundle::payload(&alloc::format!("{}{program}", proc::PROGRAM_PREFIX)).is_none() {
        return Err(UserError::NoProgram(name.into()));
    }
    installer.admit(name).map_err(UserError::Install)?;
    let process = proc::spawn(&program, Parent::Detached, proc::Grants::NONE).map_err(|error| UserError::Spawn(alloc::format!("{error}")))?;
    let pid = process.pid();
    // Its code runs inside raises: memory pressure leaves its pages alone.
    crate::services::vm::wire(pid);
    with_pending(|pending| pending.push(Pending { pid, loader: sched::current(), registration: None, server: None, verdict: None }));
    let outcome = wait_for_registration(&process);
    let (registration, server) = match outcome {
        Ok(found) => found,
        Err(error) => {
            with_pending(|pending| pending.retain(|entry| entry.pid != pid));
            return Err(error);
        }
    };
    let installed = install(name, pid, registration, server.clone(), installer);
    let verdict = match &installed {
        Ok((_, user)) => Ok(user.clone()),
        Err(error) => Err(alloc::format!("{error}")),
    };
    with_pending(|pending| {
        if let Some(entry) = pending.iter_mut().find(|entry| entry.pid == pid) {
            entry.verdict = Some(verdict);
        }
    });
    sched::unblock(&server);
    installed.map(|(extension, _)| extension)
}

/// Waits (blocked, woken by the registration or the next tick) until process `process`
/// registers, ends, or the timeout passes.
fn wait_for_registration(process: &Arc<Process>) -> Result<(Registration, Arc<Strand>), UserError> {
    let deadline = crate::time::ticks() + REGISTRATION_TIMEOUT_TICKS;
    loop {
        let registered = with_pending(|pending| {
            let entry = pending.iter_mut().find(|entry| entry.pid == process.pid())?;
            Some((entry.registration.take()?, entry.server.clone()?))
        });
        if let Some(found) = registered {
            return Ok(found);
        }
        if let Some(status) = process.exit_status() {
            return Err(UserError::ExitedBeforeServing(alloc::format!("{status}")));
        }
        if crate::time::ticks() > deadline {
            let _ = proc::kill(process.pid(), Parent::Kernel);
            return Err(UserError::Timeout);
        }
        // Blocked, not spinning: the process may run at a lower priority than the loader.
        sched::sleep_ticks(1);
    }
}

/// Builds the extension from a checked registration and installs its bindings.
fn install(
    name: &str,
    pid: u64,
    registration: Registration,
    server: Arc<Strand>,
    installer: &mut super::Installer,
) -> Result<(Arc<LoadedExtension>, Arc<UserExtension>), UserError> {
    let Registration { manifest, bindings, view, entry, stack_top } = registration;
    installer.admit(&manifest.name).map_err(UserError::Install)?;
    if manifest.name != name {
        return Err(UserError::BadRegistration(alloc::format!("program for `{name}` registered extension `{}`", manifest.name)));
    }
    let budget = crate::time::budget_from_micros(manifest.budget_microseconds);
    let user = Arc::new(UserExtension {
        name: manifest.name.clone(),
        pid,
        domains: manifest.domains.clone(),
        budget,
        serving: TryLock::new(Some(Serving { view, entry, stack_top, context: Box::new(UserContext::new(entry, stack_top)) })),
        ending: spin::Mutex::new(None),
        server,
    });
    let program = super::bundle::payload(&alloc::format!("{}{PROGRAM_PREFIX}{name}", proc::PROGRAM_PREFIX));
    let artifact = program.map(|bytes| super::introspect::Artifact::of_static(bytes, super::introspect::Signer::BootBundleProgram));
    let provenance = super::introspect::Provenance::of_manifest(&manifest, artifact);
    let image = super::ExtensionImage::User(UserImage { extension: user.clone() });
    let extension = Arc::new(LoadedExtension::new(&manifest.name, &manifest.version, Technology::UserLevel, provenance, Some(image)));
    super::install_all(&extension, bindings.iter().enumerate(), |(index, info)| install_binding(info, index, &user, &extension, installer)).inspect_err(
        |_| {
            // Dropping the image would end serving; the caller reports the refusal.
            drop(extension.image.lock().take());
        },
    )?;
    Ok((extension, user))
}

fn install_binding(
    info: &BindingInfo,
    index: usize,
    user: &Arc<UserExtension>,
    extension: &Arc<LoadedExtension>,
    installer: &mut super::Installer,
) -> Result<BindingId, UserError> {
    let visitor = InstallBinding { info, index, user, extension, installer };
    spindle_abi::event::visit_event(spindle_abi::event::EventId(info.event_id), visitor).unwrap_or_else(|_| {
        Err(UserError::BadRegistration(alloc::format!("binding {index} names event id {}, which this kernel does not raise", info.event_id)))
    })
}

/// Installs one binding, typed by the event its registration names.
struct InstallBinding<'a> {
    info: &'a BindingInfo,
    index: usize,
    user: &'a Arc<UserExtension>,
    extension: &'a Arc<LoadedExtension>,
    installer: &'a mut super::Installer,
}

impl spindle_abi::event::EventVisitor for InstallBinding<'_> {
    type Output = Result<BindingId, UserError>;
    fn visit<A: EventRecord, R: EventRecord>(self, event: &'static Event<A, R>) -> Self::Output {
        install_typed(event, self.info, self.index, self.user, self.extension, self.installer)
    }
}

fn install_typed<A: EventRecord, R: EventRecord>(
    event: &'static Event<A, R>,
    info: &BindingInfo,
    index: usize,
    user: &Arc<UserExtension>,
    extension: &Arc<LoadedExtension>,
    installer: &mut super::Installer,
) -> Result<BindingId, UserError> {
    let guards = super::native::checked_guards(&event.descriptor(), info, index).map_err(UserError::BadRegistration)?;
    let handler = Arc::new(UserHandler::<A, R> {
        user: user.clone(),
        index,
        name: alloc::format!("{}#{index}", extension.name),
        extension: Arc::downgrade(extension),
        records: PhantomData,
    });
    let mut spec = BindingSpec::new(&extension.name, handler).mode(Mode::Bounded { budget: user.budget });
    for guard in guards {
        spec = spec.when(guard);
    }
    installer
        .install(event, spec)
        .map_err(|error| UserError::Install(ExtensionError::Install { event: event.name(), reason: alloc::string::ToString::to_string(&error) }))
}

/// A user-level extension's handler: one upcall per invocation.
struct UserHandler<A, R> {
    user: Arc<UserExtension>,
    index: usize,
    name: String,
    extension: Weak<LoadedExtension>,
    records: PhantomData<fn(&A) -> R>,
}

impl<A: EventRecord, R: EventRecord> Handler<A, R> for UserHandler<A, R> {
    fn invoke(&self, args: &A) -> Result<R, HandlerFault> {
        // The records travel in registers as little-endian words, the layout of the bytes
        // the glue's byte path reads (`spindle_abi::extension::encode_words`).
        let mut words = [0u64; UPCALL_RECORD_WORDS];
        encode_words(args, &mut words).map_err(|_| HandlerFault::MalformedResult)?;
        let _no_preemption = sched::no_preemption();
        // Busy (a nested raise from this extension's own upcall) or no longer served.
        let mut serving = self.user.serving.try_lock().ok_or(HandlerFault::Unavailable)?;
        let serving = serving.as_mut().ok_or(HandlerFault::Unavailable)?;
        let sizes = (core::mem::size_of::<A>(), core::mem::size_of::<R>());
        let result = upcall(serving, &self.user, self.index, sizes, words)?;
        decode_words::<R>(&result).map_err(|_| HandlerFault::MalformedResult)
    }

    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::UserLevel, name: self.name.clone() }
    }

    /// Containment: a fault (U-mode trap, panic, overrun, bad status) kills the extension
    /// and ends its serving.
    fn faulted(&self, fault: &HandlerFault) {
        if let Some(extension) = self.extension.upgrade() {
            super::kill(&extension, *fault, &self.name);
        }
        if *fault != HandlerFault::Unavailable {
            self.user.end(Ending::Contained);
        }
    }
}

/// Runs one upcall of binding `index` in `serving`'s address space on this strand.
fn upcall(
    serving: &mut Serving,
    user: &UserExtension,
    index: usize,
    (argument_size, result_size): (usize, usize),
    words: [u64; UPCALL_RECORD_WORDS],
) -> Result<[u64; UPCALL_RECORD_WORDS], HandlerFault> {
    let arguments = [index, argument_size, result_size, words[0] as usize, words[1] as usize, words[2] as usize, words[3] as usize];
    serving.context.prepare_call(serving.entry, serving.stack_top, arguments);
    let domains = &user.domains;
    let view = &serving.view;
    let mut answer = |call: Syscall, arguments: [usize; 6]| match call {
        Syscall::KernelFunction => Some(kernel_function(domains, view, arguments)),
        _ => None,
    };
    // Inside the dispatcher's bounded call, whose deadline applies and whose recovery point
    // the call marks: an overrun or a fault on the handler's behalf aborts that call, and
    // its abort path switches the address space back (`recovery::mark_migration`). The
    // `serving` guard is leaked then, which keeps every later upcall out (`end`).
    let returned = migrate::call(view, &mut serving.context, u64::MAX, Syscall::UpcallReturn, &mut answer);
    match returned {
        Ok([0, words @ ..]) => Ok(words.map(|word| word as u64)),
        Ok([PANIC_STATUS, ..]) | Err(CallFault::Exited) => Err(HandlerFault::Panicked),
        Ok(_) => Err(HandlerFault::MalformedResult),
        Err(CallFault::Overrun) => Err(HandlerFault::Overrun { budget: user.budget }),
        Err(CallFault::Trapped(scause)) => Err(HandlerFault::Trapped { cause: scause as u64 }),
    }
}

/// `kernel_function(index, a, b, c, d)` from an upcall: the kernel functions a user-level
/// extension reaches by system call (the glue's generated stubs), the words decoded by the
/// generated `super::glue::call_user`, ranges being addresses in the extension's own space.
fn kernel_function(domains: &[String], view: &SpaceView, [index, words @ .., _]: [usize; 6]) -> Result<usize, Error> {
    let function = KERNEL_FUNCTIONS.get(index).ok_or(Error::NotFound)?;
    let granted = super::exports::ALWAYS_GRANTED.contains(&function.domain) || domains.iter().any(|domain| domain == function.domain);
    if !granted {
        return Err(Error::NotPermitted);
    }
    // SAFETY: the extension's space is pinned while it serves an upcall (see `migrate`),
    // and this runs inside that upcall.
    let space = unsafe { super::glue::UserSpace::new(view.clone()) };
    super::glue::call_user(function.name, &words, &space).unwrap_or(Err(Error::NotFound))
}

/// `upcall_serve(pointer, length)` on the calling process's strand: checks the
/// registration, hands it to the waiting loader, and blocks while the extension is
/// served. Returns 0 when unloaded; errors as documented for the system call (plus
/// `Err(None)` when the process was killed meanwhile).
pub fn serve(process: &Arc<Process>, space: &AddressSpace, pointer: usize, length: usize) -> Result<usize, Option<Error>> {
    let registration = read_registration(space, pointer, length).map_err(Some)?;
    let pid = process.pid();
    let me = sched::current();
    with_pending(|pending| {
        let entry = pending.iter_mut().find(|entry| entry.pid == pid).ok_or(Error::NotPermitted)?;
        if entry.server.is_some() {
            return Err(Error::WrongState);
        }
        entry.registration = Some(registration);
        entry.server = Some(me.clone());
        Ok(entry.loader.clone())
    })
    .map(|loader| sched::unblock(&loader))
    .map_err(Some)?;
    // The loader installs the bindings and gives its verdict.
    let verdict = loop {
        let verdict = with_pending(|pending| {
            let position = pending.iter().position(|entry| entry.pid == pid)?;
            pending[position].verdict.as_ref()?;
            pending.remove(position).verdict
        });
        if let Some(verdict) = verdict {
            break verdict;
        }
        if process.kill_requested() {
            return Err(None);
        }
        sched::block_current();
    };
    let user = verdict.map_err(|_| Some(Error::Refused))?;
    loop {
        if let Some(ending) = csr::without_interrupts(|| *user.ending.lock()) {
            return match ending {
                Ending::Unloaded => Ok(0),
                Ending::Contained => Err(Some(Error::Contained)),
            };
        }
        if process.kill_requested() {
            withdraw(&user);
            return Err(None);
        }
        sched::block_current();
    }
}

/// The serving process is being killed: kill the extension first, so no upcall enters a
/// space that is about to be freed.
fn withdraw(user: &Arc<UserExtension>) {
    if let Some(extension) = super::find(&user.name)
        && let Some(super::ExtensionImage::User(image)) = extension.image.lock().as_ref()
        && Arc::ptr_eq(image.extension(), user)
    {
        super::kill(&extension, HandlerFault::Unavailable, "its process was killed;");
    }
    user.end(Ending::Contained);
}

/// Reads and checks an [`UpcallRegistration`] and what it points to.
fn read_registration(space: &AddressSpace, pointer: usize, length: usize) -> Result<Registration, Error> {
    if length != UpcallRegistration::SIZE {
        return Err(Error::BadLength);
    }
    let range = user_range(pointer, length, UpcallRegistration::SIZE)?;
    let mut bytes = [0u8; UpcallRegistration::SIZE];
    space.read(range.start, &mut bytes)?;
    let raw = UpcallRegistration::from_bytes(&bytes).ok_or(Error::BadLength)?;
    if raw.manifest_length == 0 || raw.manifest_length > MAX_UPCALL_MANIFEST as u64 {
        return Err(Error::BadLength);
    }
    let manifest_range = user_range(raw.manifest as usize, raw.manifest_length as usize, MAX_UPCALL_MANIFEST)?;
    let mut text = alloc::vec![0u8; manifest_range.len()];
    space.read(manifest_range.start, &mut text)?;
    let manifest = Manifest::parse_bytes(&text).map_err(|_| Error::BadArgument)?;
    let count = raw.binding_count as usize;
    if count == 0 || count > MAX_UPCALL_BINDINGS {
        return Err(Error::BadArgument);
    }
    let bindings_range = user_range(raw.bindings as usize, count * BindingInfo::SIZE, MAX_UPCALL_BINDINGS * BindingInfo::SIZE)?;
    let mut described = alloc::vec![0u8; bindings_range.len()];
    space.read(bindings_range.start, &mut described)?;
    let bindings = described.chunks_exact(BindingInfo::SIZE).filter_map(BindingInfo::from_bytes).collect();
    let (entry, stack_top) = (raw.entry as usize, raw.stack_top as usize);
    migrate::check_target(space, entry, stack_top)?;
    Ok(Registration { manifest, bindings, view: space.view(), entry, stack_top })
}
