//! Extensions in the running kernel: the registry, loading and unloading, containment.
//!
//! An extension arrives as one of the technologies of DESIGN.md §1 — built-in (linked
//! into the kernel, [`builtin`]), native (a signed shared object, [`native`]) or Wasm (a
//! module run by `wasmi`, [`wasm`]) — and becomes a [`LoadedExtension`]: its
//! bindings in the dispatcher, its state, and the reason it died if it did. The console
//! commands `ext list | load | unload` drive this module.
//!
//! Containment (DESIGN.md §6): every handler of an extension runs bounded (its manifest's
//! budget, capped by the event's primary module). A handler that panics, traps or overruns
//! gets the event's default result for that raise, and the extension is killed: its
//! bindings are removed and the reason is kept for `ext list`. A native extension's memory
//! comes from its own arena with a quota ([`arena`]); an allocation past the quota fails,
//! which by default panics and so kills it, and unloading frees the arena whole.

#[allow(unsafe_code)]
pub mod arena;
pub mod builtin;
#[allow(unsafe_code)]
pub mod bundle;
#[allow(unsafe_code)]
pub mod exports;
#[allow(unsafe_code)]
pub mod glue;
pub mod introspect;
#[allow(unsafe_code)]
pub mod native;
#[allow(unsafe_code)]
pub mod user;
pub mod wasm;

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use spindle_dispatch::{BindingId, HandlerFault};

/// Longest panic message kept for a killed extension.
pub const PANIC_MESSAGE_MAX: usize = 256;

/// How an extension's code came into the kernel: the dispatcher's one definition (its
/// handlers say the same), so the registry, introspection and listings agree.
pub use spindle_dispatch::Technology;

/// Lifecycle of a loaded extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtensionState {
    /// Bindings installed and serving events.
    Running,
    /// Killed by containment; the reason says why.
    Killed(String),
}

/// An extension in the kernel.
pub struct LoadedExtension {
    /// Unique name.
    pub name: String,
    /// Version text.
    pub version: String,
    /// Technology.
    pub technology: Technology,
    /// Its bindings (empty once killed or unloaded).
    pub bindings: spin::Mutex<Vec<BindingId>>,
    /// Running or killed, with the reason.
    pub state: spin::Mutex<ExtensionState>,
    /// A native extension's mapped image and memory arena, or a Wasm extension's
    /// instance (released by `unload`, or when the extension is dropped).
    pub image: spin::Mutex<Option<ExtensionImage>>,
    /// Its manifest's budget, quota and domains, and the artifact it came from.
    pub provenance: introspect::Provenance,
    /// When and at what cost it was loaded (set once the load succeeded).
    pub load_record: spin::Once<introspect::LoadRecord>,
    /// Its bindings as they were when removed (kill, replace), for `ext show`.
    pub removed_bindings: spin::Mutex<Vec<introspect::BindingReport>>,
}

/// What a loaded extension's code and memory are, per technology.
pub enum ExtensionImage {
    /// A mapped native image with its arena.
    Native(native::NativeImage),
    /// A Wasm module's instance (its store, linear memory and compiled code).
    Wasm(wasm::WasmImage),
    /// A user-level extension's serving process (dropping this ends the serving).
    User(user::UserImage),
}

impl LoadedExtension {
    /// A running extension with no bindings yet.
    pub fn new(name: &str, version: &str, technology: Technology, provenance: introspect::Provenance, image: Option<ExtensionImage>) -> LoadedExtension {
        LoadedExtension {
            name: String::from(name),
            version: String::from(version),
            technology,
            bindings: spin::Mutex::new(Vec::new()),
            state: spin::Mutex::new(ExtensionState::Running),
            image: spin::Mutex::new(image),
            provenance,
            load_record: spin::Once::new(),
            removed_bindings: spin::Mutex::new(Vec::new()),
        }
    }

    /// Memory usage: a native extension's arena (bytes used and its quota,
    /// page-rounded), a Wasm extension's linear memory (bytes and its limit: initial
    /// memory plus quota); `None` for a built-in extension (it shares the kernel heap,
    /// with no quota of its own), once the image is released, or while the arena's or
    /// instance's lock is held.
    pub fn memory_usage(&self) -> Option<arena::ArenaUsage> {
        crate::arch::csr::without_interrupts(|| match self.image.lock().as_ref()? {
            ExtensionImage::Native(image) => image.arena().usage(),
            ExtensionImage::Wasm(image) => image.usage(),
            ExtensionImage::User(_) => None,
        })
    }
}

/// Why loading or unloading failed.
#[derive(Debug)]
pub enum ExtensionError {
    /// An extension with this name is already loaded.
    AlreadyLoaded(String),
    /// No extension with this name is loaded.
    NotLoaded(String),
    /// No extension with this name is available to load.
    Unknown(String),
    /// The extension binds an event the kernel does not raise.
    UnknownEvent(&'static str),
    /// A native extension was refused by the loader.
    Native(alloc::boxed::Box<native::NativeError>),
    /// A Wasm extension was refused by the loader.
    Wasm(alloc::boxed::Box<wasm::WasmError>),
    /// A user-level extension could not be started or was refused.
    User(alloc::boxed::Box<user::UserError>),
    /// The artifact found under the requested name declares another name.
    NameMismatch {
        /// The name asked for (`ext load NAME`).
        requested: String,
        /// The name in the artifact's manifest.
        declared: String,
    },
    /// The dispatcher (or the event's primary module) refused a binding.
    Install {
        /// The event.
        event: &'static str,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for ExtensionError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtensionError::AlreadyLoaded(name) => write!(formatter, "extension `{name}` is already loaded (unload it first)"),
            ExtensionError::NotLoaded(name) => write!(formatter, "extension `{name}` is not loaded"),
            ExtensionError::Unknown(name) => write!(
                formatter,
                "no extension called `{name}` is available: it is neither built in nor in the boot bundle (list it in image.toml and run `cargo xtask qemu` again, or push it with `cargo xtask load CRATE`; `ext list` shows what is available)"
            ),
            ExtensionError::Native(error) => write!(formatter, "native extension refused: {error}"),
            ExtensionError::Wasm(error) => write!(formatter, "Wasm extension refused: {error}"),
            ExtensionError::User(error) => write!(formatter, "user-level extension refused: {error}"),
            ExtensionError::NameMismatch { requested, declared } => write!(
                formatter,
                "the build found for `{requested}` declares the name `{declared}`: refused (rebuild the image with `cargo xtask qemu`, or load `{declared}`)"
            ),
            ExtensionError::UnknownEvent(event) => write!(formatter, "binds `{event}`, which this kernel does not raise"),
            ExtensionError::Install { event, reason } => write!(formatter, "binding `{event}` refused: {reason}"),
        }
    }
}

static LOADED: spin::Mutex<Vec<Arc<LoadedExtension>>> = spin::Mutex::new(Vec::new());
static LAST_PANIC: spin::Mutex<Option<String>> = spin::Mutex::new(None);

fn with_loaded<T>(f: impl FnOnce(&mut Vec<Arc<LoadedExtension>>) -> T) -> T {
    crate::arch::csr::without_interrupts(|| f(&mut LOADED.lock()))
}

/// Records an extension's panic message (called by `spindle_extension_panic`).
pub(crate) fn record_panic(mut message: String) {
    message.truncate(PANIC_MESSAGE_MAX);
    crate::arch::csr::without_interrupts(|| *LAST_PANIC.lock() = Some(message));
}

/// The loaded extension called `name`.
pub fn find(name: &str) -> Option<Arc<LoadedExtension>> {
    with_loaded(|loaded| loaded.iter().find(|extension| extension.name == name).cloned())
}

/// Every loaded (or killed) extension.
pub fn list() -> Vec<Arc<LoadedExtension>> {
    with_loaded(|loaded| loaded.clone())
}

/// Adds a freshly installed extension to the registry.
fn register(extension: Arc<LoadedExtension>) -> Result<(), ExtensionError> {
    with_loaded(|loaded| {
        if loaded.iter().any(|existing| existing.name == extension.name) {
            return Err(ExtensionError::AlreadyLoaded(extension.name.clone()));
        }
        loaded.push(extension);
        Ok(())
    })
}

/// Which build `load` uses when an extension is available as several — the ABI's choice
/// for the `ext_load` system call, one definition for the console, the shell and the
/// kernel: `Default` (the bundled native `.kext` if there is one, else the built-in crate),
/// `BuiltIn`, `Wasm` (bundle entry `<name>.wasm`), `User` (program `bin/ext-<name>`).
pub use spindle_abi::syscall::Technology as Preference;

/// Suffix of the boot bundle's entries that hold Wasm builds (`hello.wasm`).
pub const WASM_ENTRY_SUFFIX: &str = ".wasm";

/// The bundle entry of `name`'s Wasm build, if the bundle has one.
fn bundled_wasm(name: &str) -> Option<&'static [u8]> {
    bundle::payload(&alloc::format!("{name}{WASM_ENTRY_SUFFIX}"))
}

fn native_refusal(error: native::NativeError) -> ExtensionError {
    match error {
        native::NativeError::Install(inner) => inner,
        other => ExtensionError::Native(alloc::boxed::Box::new(other)),
    }
}

fn user_refusal(error: user::UserError) -> ExtensionError {
    match error {
        user::UserError::Install(inner) => inner,
        other => ExtensionError::User(alloc::boxed::Box::new(other)),
    }
}

fn wasm_refusal(error: wasm::WasmError) -> ExtensionError {
    match error {
        wasm::WasmError::Install(inner) => inner,
        other => ExtensionError::Wasm(alloc::boxed::Box::new(other)),
    }
}

/// Loads the available build of `name` that `preference` picks into `installer`.
fn load_available(name: &str, preference: Preference, installer: &mut Installer) -> Result<Arc<LoadedExtension>, ExtensionError> {
    match (preference, bundle::payload(name)) {
        (Preference::Wasm, _) => {
            let bytes = bundled_wasm(name).ok_or_else(|| ExtensionError::Unknown(alloc::format!("{name}{WASM_ENTRY_SUFFIX}")))?;
            wasm::load(bytes, installer.loading_bundled(bytes)).map_err(wasm_refusal)
        }
        (Preference::User, _) => user::load(name, installer).map_err(user_refusal),
        (Preference::Default, Some(bytes)) => native::load(bytes, installer.loading_bundled(bytes)).map_err(native_refusal),
        _ => {
            let declaration = builtin::AVAILABLE
                .iter()
                .find(|declaration| (declaration)().name == name)
                .ok_or_else(|| ExtensionError::Unknown(name.into()))?;
            builtin::install((declaration)(), installer)
        }
    }
}

/// Where an extension's new bindings go: fresh installs, or — when it replaces a loaded
/// version — atomic replacements of the old version's bindings on the same events (the
/// dispatcher guarantees that no raise runs both or neither), in order.
pub struct Installer {
    /// The bytes being loaded when they are the boot bundle's (mapped for good): their
    /// digest can wait until someone asks.
    bundled: Option<&'static [u8]>,
    replacing: Option<String>,
    /// The name the caller asked for (`ext load NAME`): an artifact declaring another
    /// name is refused, whatever its technology.
    expected: Option<String>,
    old_bindings: Vec<BindingId>,
    replaced: usize,
}

impl Installer {
    /// Installs without replacing anything (bytes pushed by the host: any name).
    pub fn fresh() -> Installer {
        Installer { bundled: None, replacing: None, expected: None, old_bindings: Vec::new(), replaced: 0 }
    }

    /// Installs the extension asked for by `name`, replacing nothing.
    pub fn named(name: &str) -> Installer {
        Installer { expected: Some(name.into()), ..Installer::fresh() }
    }

    /// Replaces the bindings of the loaded extension `name`.
    pub fn replacing(name: &str, old_bindings: Vec<BindingId>) -> Installer {
        Installer { bundled: None, replacing: Some(name.into()), expected: Some(name.into()), old_bindings, replaced: 0 }
    }

    /// Says that the bytes about to be loaded are the boot bundle's `bytes`.
    fn loading_bundled(&mut self, bytes: &'static [u8]) -> &mut Installer {
        self.bundled = Some(bytes);
        self
    }

    /// The identity of the artifact `bytes` a loader was given: hashed now, or later if
    /// they are the boot bundle's.
    pub fn artifact(&self, bytes: &[u8], signer: introspect::Signer) -> introspect::Artifact {
        match self.bundled {
            Some(bundled) if core::ptr::eq(bundled, bytes) => introspect::Artifact::of_static(bundled, signer),
            _ => introspect::Artifact::of(bytes, signer),
        }
    }

    /// Admits an extension whose manifest declares `name`: it must be the name asked for
    /// (if one was) and not loaded already, unless it is the one being replaced. Every
    /// technology's loader calls this before installing anything.
    ///
    /// Errors: [`ExtensionError::NameMismatch`], [`ExtensionError::AlreadyLoaded`].
    pub fn admit(&self, name: &str) -> Result<(), ExtensionError> {
        if let Some(expected) = self.expected.as_deref().filter(|&expected| expected != name) {
            return Err(ExtensionError::NameMismatch { requested: expected.into(), declared: name.into() });
        }
        if self.replacing.as_deref() == Some(name) || find(name).is_none() {
            Ok(())
        } else {
            Err(ExtensionError::AlreadyLoaded(name.into()))
        }
    }

    /// Installs `spec`, atomically replacing the first remaining old binding on the same event.
    pub fn install<A: spindle_abi::event::EventRecord, R: spindle_abi::event::EventRecord>(
        &mut self,
        event: &'static spindle_abi::event::Event<A, R>,
        spec: spindle_dispatch::BindingSpec<A, R>,
    ) -> Result<BindingId, spindle_dispatch::InstallError> {
        let dispatcher = crate::events::dispatcher();
        match self.old_bindings.iter().position(|old| old.event == event.id()) {
            Some(position) => {
                let old = self.old_bindings.remove(position);
                let id = dispatcher.replace(event, old, spec)?;
                self.replaced += 1;
                Ok(id)
            }
            None => dispatcher.install(event, spec),
        }
    }
}

/// Serialises load, unload and replace (from the console, the boot list and the host), so
/// the "already loaded" check and the registration cannot interleave.
static OPERATION: spin::Mutex<()> = spin::Mutex::new(());

/// Runs `operation` holding [`OPERATION`], yielding (not spinning) while another strand
/// holds it.
fn exclusively<T>(operation: impl FnOnce() -> T) -> T {
    loop {
        if let Some(_guard) = OPERATION.try_lock() {
            return operation();
        }
        crate::sched::yield_now();
    }
}

/// What a load answers, the same for the console, spsh and the host: `Ok("`NAME` VERSION
/// (TECHNOLOGY), N binding(s)" + caps)` if the extension is running, `Err(why)` if it was
/// killed (or degraded) before the answer was written — a load is reported as a success
/// only if the extension is serving.
pub fn loaded_summary(extension: &LoadedExtension) -> Result<String, String> {
    let report = introspect::report(extension);
    match &report.status {
        introspect::Status::Running => Ok(alloc::format!(
            "`{}` {} ({}), {} binding(s){}",
            report.name,
            report.version,
            report.technology,
            report.bindings.iter().filter(|binding| binding.installed).count(),
            introspect::caps_note(&report)
        )),
        status => Err(alloc::format!("`{}` was loaded but is not serving: {}", report.name, status.describe())),
    }
}

/// Loads an available extension by name.
pub fn load(name: &str, preference: Preference) -> Result<Arc<LoadedExtension>, ExtensionError> {
    exclusively(|| load_locked(name, preference))
}

fn load_locked(name: &str, preference: Preference) -> Result<Arc<LoadedExtension>, ExtensionError> {
    if find(name).is_some() {
        return Err(ExtensionError::AlreadyLoaded(name.into()));
    }
    let extension = timed(|| load_available(name, preference, &mut Installer::named(name)))?;
    register(extension.clone())?;
    Ok(extension)
}

/// Runs a load and records when it finished and what it cost in the extension.
fn timed(load: impl FnOnce() -> Result<Arc<LoadedExtension>, ExtensionError>) -> Result<Arc<LoadedExtension>, ExtensionError> {
    let (started, counted) = (crate::time::now(), crate::arch::csr::instret() as u64);
    let extension = load()?;
    let (finished, counted) = (crate::time::now(), (crate::arch::csr::instret() as u64).wrapping_sub(counted));
    let hz = crate::time::timebase_hz().max(1);
    extension.load_record.call_once(|| introspect::LoadRecord {
        at_micros: crate::time::uptime_micros(),
        took_micros: (finished - started).saturating_mul(1_000_000) / hz,
        counted,
    });
    Ok(extension)
}

/// Loads an extension from `.kext` bytes (from the bundle, or pushed by the host) with
/// the technology its container's kind names: native (signature mandatory) or Wasm
/// (signature optional). Bytes that are not a container are refused by the native loader,
/// which names what is wrong.
pub fn load_kext_bytes(bytes: &[u8]) -> Result<Arc<LoadedExtension>, ExtensionError> {
    exclusively(|| load_kext_bytes_locked(bytes))
}

fn load_kext_bytes_locked(bytes: &[u8]) -> Result<Arc<LoadedExtension>, ExtensionError> {
    let is_wasm = spindle_loader::Container::parse(bytes).is_ok_and(|container| container.kind() == spindle_loader::Kind::Wasm);
    let extension = timed(|| {
        if is_wasm {
            wasm::load(bytes, &mut Installer::fresh()).map_err(wasm_refusal)
        } else {
            native::load(bytes, &mut Installer::fresh()).map_err(native_refusal)
        }
    })?;
    register(extension.clone())?;
    Ok(extension)
}

/// Replaces the loaded extension `name` by a fresh load of the available one (the bundled
/// native `.kext`, its Wasm build, or the built-in crate, as `preference` picks): each new binding atomically replaces the old
/// binding on the same event, old bindings without a counterpart are removed, new ones
/// without a counterpart are added, and the old version's memory is released. If the new
/// version is refused before any binding was replaced, the old one keeps running; if it
/// is refused halfway, the old one is killed with the reason (no event is left with both).
pub fn replace(name: &str, preference: Preference) -> Result<Arc<LoadedExtension>, ExtensionError> {
    exclusively(|| replace_locked(name, preference))
}

fn replace_locked(name: &str, preference: Preference) -> Result<Arc<LoadedExtension>, ExtensionError> {
    let old = find(name).ok_or_else(|| ExtensionError::NotLoaded(name.into()))?;
    let old_bindings = old.bindings.lock().clone();
    let mut installer = Installer::replacing(name, old_bindings);
    let outcome = timed(|| load_available(name, preference, &mut installer));
    let new = match outcome {
        Ok(new) => new,
        Err(error) => {
            if installer.replaced > 0 {
                crate::arch::csr::without_interrupts(|| {
                    *old.state.lock() = ExtensionState::Killed(alloc::format!("replacement failed halfway: {error}"));
                });
                remove_bindings(&old);
            }
            return Err(error);
        }
    };
    for leftover in installer.old_bindings {
        let _ = crate::events::dispatcher().uninstall(leftover);
    }
    old.bindings.lock().clear();
    with_loaded(|loaded| {
        if let Some(slot) = loaded.iter_mut().find(|extension| extension.name == name) {
            *slot = new.clone();
        }
    });
    // As in `unload`: no raise is in progress here and one hart runs, so the old code is
    // unreachable once its bindings are gone.
    crate::events::quiescent();
    crate::events::reclaim();
    drop(old.image.lock().take());
    Ok(new)
}

/// Removes an extension's bindings and forgets it.
pub fn unload(name: &str) -> Result<(), ExtensionError> {
    exclusively(|| unload_locked(name))
}

fn unload_locked(name: &str) -> Result<(), ExtensionError> {
    let extension = with_loaded(|loaded| {
        let position = loaded.iter().position(|extension| extension.name == name)?;
        Some(loaded.remove(position))
    })
    .ok_or_else(|| ExtensionError::NotLoaded(name.into()))?;
    // The extension is forgotten: nothing is kept of its bindings.
    uninstall_bindings(&extension);
    // No raise is in progress on this hart (unload runs outside handlers) and only this
    // hart is online, so the extension's code can no longer run: release its image.
    crate::events::quiescent();
    crate::events::reclaim();
    drop(extension.image.lock().take());
    Ok(())
}

fn remove_bindings(extension: &LoadedExtension) {
    introspect::keep_final_snapshots(extension);
    uninstall_bindings(extension);
}

/// Installs an extension's bindings in order, one `install` call per item, recording each
/// binding; on the first refusal uninstalls those already installed and returns it. The
/// one install-or-roll-back step of every technology's loader.
pub(crate) fn install_all<T, E>(
    extension: &LoadedExtension,
    items: impl IntoIterator<Item = T>,
    mut install: impl FnMut(T) -> Result<BindingId, E>,
) -> Result<(), E> {
    for item in items {
        match install(item) {
            Ok(id) => extension.bindings.lock().push(id),
            Err(error) => {
                uninstall_bindings(extension);
                crate::events::quiescent();
                return Err(error);
            }
        }
    }
    Ok(())
}

/// Uninstalls an extension's bindings (no record kept: a rolled-back load).
fn uninstall_bindings(extension: &LoadedExtension) {
    let bindings = core::mem::take(&mut *extension.bindings.lock());
    for binding in bindings {
        let _ = crate::events::dispatcher().uninstall(binding);
    }
}

/// Containment: kills `extension` after `fault` — bindings removed, reason kept.
///
/// Runs with interrupts off: it is called from inside the (possibly already expired)
/// budget of the raise that faulted, and must not be aborted halfway with a lock held. Its
/// time is not charged to an enclosing bounded call (the caller of that raise): see
/// [`crate::arch::recovery::uncharged`].
pub fn kill(extension: &LoadedExtension, fault: HandlerFault, handler: &str) {
    kill_with_detail(extension, fault, handler, None);
}

/// [`kill`] with a technology's own words for the fault appended to the reason (a Wasm
/// trap's message, say).
pub fn kill_with_detail(extension: &LoadedExtension, fault: HandlerFault, handler: &str, detail: Option<&str>) {
    crate::arch::recovery::uncharged(|| kill_now(extension, fault, handler, detail));
}

fn kill_now(extension: &LoadedExtension, fault: HandlerFault, handler: &str, detail: Option<&str>) {
    let mut reason = alloc::format!("{handler} {fault}");
    if fault == HandlerFault::Panicked
        && let Some(message) = LAST_PANIC.lock().take()
    {
        reason = alloc::format!("{reason}: {message}");
    } else if let Some(detail) = detail {
        reason = alloc::format!("{reason}: {detail}");
    }
    if let HandlerFault::Overrun { budget } = fault
        && extension.technology != Technology::Wasm
        && budget < crate::time::budget_from_micros(extension.provenance.budget_microseconds)
    {
        reason = alloc::format!(
            "{reason} (the event's owner caps handlers at that; the manifest asked {} us)",
            extension.provenance.budget_microseconds
        );
    }
    {
        let mut state = extension.state.lock();
        if *state != ExtensionState::Running {
            return;
        }
        *state = ExtensionState::Killed(reason.clone());
    }
    crate::println!("[ext] `{}` killed: {reason}; its bindings are removed, events fall back to their defaults", extension.name);
    remove_bindings(extension);
}
