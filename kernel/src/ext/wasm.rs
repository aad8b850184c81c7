//! The Wasm technology: WebAssembly extensions run by the `wasmi` interpreter.
//!
//! A Wasm extension is the same crate as its native build, compiled by the trusted
//! builder for `wasm32-unknown-unknown` (or any module that implements the contract of
//! `spindle_abi::wasm`, such as the C extension `hello-c`). Untrusted code is fine here:
//! the sandbox contains it, so a `.kext` of kind Wasm may be unsigned (one that carries a
//! signature must verify).
//!
//! Loading, in order — all the expensive work happens here, once, never per event:
//! 1. [`spindle_loader::open`] (container, optional signature, ABI fingerprint, manifest);
//! 2. a fresh `wasmi` [`Engine`] for this extension (fuel metering on, eager compilation),
//!    made in the extension's own private heap (below), **validates and compiles** the
//!    module;
//! 3. its linear memory is limited to its declared initial memory (static data and shadow
//!    stack, at most the quota) plus the manifest's quota (a [`StoreLimits`] resource
//!    limiter: one memory, one table of at most [`MAX_TABLE_ELEMENTS`], one instance);
//! 4. every import is resolved through the same name server as native extensions
//!    (`Domain.Combine` of the manifest's granted domains): an import from another module
//!    than `"spindle"`, an unknown kernel function, one of an ungranted domain, or a
//!    native-only function fails the load naming it;
//! 5. the module is **instantiated** (its start function, if any, runs on
//!    [`DESCRIBE_BUDGET`] fuel), its bindings are described through the exported
//!    functions, checked against the kernel's event declarations, and installed through
//!    [`super::Installer`] exactly like native ones.
//!
//! Each invocation reuses the one instance: it writes the encoded arguments into the
//! exchange buffer in linear memory, sets the fuel to the binding's budget (**one unit of
//! fuel per budgeted instruction**: `wasmi` charges about one unit per Wasm instruction,
//! and one Wasm instruction costs the interpreter several machine instructions, so a
//! Wasm handler gets fewer machine instructions than a native one with the same budget
//! would, never more — unless the event's primary module capped the binding's timer
//! budget, in which case the fuel is what fits that cap, see [`fuel_for`]), calls
//! `invoke`, and reads the result. Out of fuel is
//! [`HandlerFault::Overrun`]; a call of `spindle_extension_panic` is `Panicked` with the
//! message; any other trap — including memory growth past the limit (`growth operation
//! limited`) and `wasmi`'s call-depth limit (a Wasm stack overflow) — is `Trapped`, with
//! the trap's message in the kill reason; every fault kills the extension (bindings
//! removed, reason kept), as for native.
//!
//! Concurrency: the instance sits behind a lock taken with [`spin::Mutex::try_lock`] with
//! preemption off (interrupts stay on, so the budget timer works). The holder therefore
//! runs to completion on its hart; the lock can only be found held by a re-entrant raise
//! on the same hart (a handler's kernel call raising an event the same extension handles)
//! or, with SMP, by another hart. Such a raise gets the event's default result
//! ([`HandlerFault::Unavailable`], not the extension's fault) instead of spinning — a
//! per-hart pool of instances would remove that limit.
//!
//! Each call also runs under a timer budget of [`TIMER_BUDGET_FACTOR`] × the fuel — the
//! binding is installed `Mode::Bounded`, so that is the dispatcher's own bounded executor,
//! as for native, at most the binding's capped budget; the adapter arms no second timer —
//! a backstop for a slow kernel call, an interpreter defect or an enclosing caller's
//! earlier deadline; fuel runs out first in every other case.
//!
//! Memory: everything `wasmi` allocates for an extension — engine, compiled code, store,
//! linear memory, the stacks its calls take — lies in a [`PrivateHeap`] of the
//! extension's (frames it owns; `crate::mm::private_heap`): each `wasmi` operation runs
//! inside `PrivateHeap::enter`, and the kernel functions it calls back into run on the
//! kernel heap again ([`on_kernel_heap`]). A timer abort stops `wasmi` in the middle of a
//! call, skipping the destructors of the call's locals (the stack it took from the
//! engine's pool, for one) and leaving the instance's lock held: it is never used again,
//! and when it is dropped its store is forgotten and the private heap's frames are freed whole —
//! nothing is leaked. See docs/wasm-extensions.md for the choice and the measurements.

use alloc::string::{String, ToString};
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{Event, EventRecord};
use spindle_abi::extension::{decode, encode};
use spindle_abi::native::{BINDING_COUNT_SYMBOL, BINDING_INFO_SYMBOL, BindingInfo, INVOKE_SYMBOL};
use spindle_abi::wasm::{
    ARGUMENTS_OFFSET, EXCHANGE_SIZE, EXCHANGE_SYMBOL, MEMORY_EXPORT, NATIVE_ONLY_FUNCTIONS, RESULT_OFFSET, WASM_IMPORT_MODULE, WASM_PAGE_SIZE,
};
use spindle_dispatch::{BindingId, BindingSpec, Handler, HandlerDescription, HandlerFault, Mode};
use spindle_loader::{ContainerError, Kind, Policy};
use wasmi::{Caller, CompilationMode, Config, Engine, ExternType, Linker, Memory, Module, Store, StoreLimits, StoreLimitsBuilder, TrapCode, TypedFunc};

use super::arena::{self, ArenaUsage, QuotaTooLarge};
use crate::mm::private_heap::{PrivateHeap, PrivateHeapUsage, on_kernel_heap};
use super::native::{DESCRIBE_BUDGET, VERIFYING_KEY};
use super::{ExtensionError, ExtensionImage, LoadedExtension, Technology};

/// Most table elements a module may have (Rust modules use a few for indirect calls).
pub const MAX_TABLE_ELEMENTS: usize = 4096;
/// Timer backstop per call: this many timer-budget instructions per unit of fuel (a
/// Wasm instruction costs `wasmi` several machine instructions; fuel runs out first).
pub const TIMER_BUDGET_FACTOR: u64 = 64;
/// `HandlerFault::Trapped::cause` of a Wasm trap: this bit plus `wasmi`'s trap code (0
/// for a trap without a code), so it cannot be mistaken for an `scause`.
pub const WASM_TRAP_CAUSE: u64 = 1 << 32;
/// Deepest call nesting `wasmi` allows before a stack-overflow trap (its own stack; the
/// module's shadow stack in linear memory is bounded by the builder).
const MAX_CALL_DEPTH: usize = 1024;
/// Instructions of a call that fuel does not meter — the dispatcher's bounded executor,
/// encoding the records, entering and leaving `wasmi` (about 6,000, see
/// docs/wasm-extensions.md §4) — with room to spare: kept out of the fuel of a binding
/// whose timer budget a primary module capped, so that its fuel runs out first.
pub const CALL_ALLOWANCE: u64 = 8_000;
/// Frames a Wasm extension's private heap may hold beyond four times its linear-memory
/// limit (the memory's buffer, which grows by doubling and is copied when it does) and
/// sixteen times its module (compiled code): the interpreter's value and call stacks.
const PRIVATE_HEAP_ALLOWANCE: usize = 4 << 20;

/// Why a Wasm extension was refused.
#[derive(Debug)]
pub enum WasmError {
    /// The container, signature, ABI fingerprint or manifest is wrong (or the kind is
    /// not Wasm).
    Container(ContainerError),
    /// The manifest's memory quota is above the largest allowed.
    QuotaTooLarge(QuotaTooLarge),
    /// `wasmi` refused to validate or compile the module.
    Invalid(String),
    /// The module lacks an export of the contract (or has it with the wrong type).
    MissingExport(&'static str),
    /// The module's initial memory is above its quota.
    InitialMemoryAboveQuota {
        /// Bytes the module declares.
        bytes: u64,
        /// The quota, rounded up to Wasm pages.
        quota: u64,
    },
    /// An import could not be linked.
    Import {
        /// `module.name` of the import.
        symbol: String,
        /// Why.
        reason: String,
    },
    /// Instantiation failed (start function trapped or ran out of fuel, limits).
    Instantiate(String),
    /// No frames for the extension's private heap (or too many exist).
    NoMemory,
    /// The describe calls failed or described something invalid.
    BadBinding(String),
    /// Installing its bindings failed.
    Install(ExtensionError),
}

impl fmt::Display for WasmError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WasmError::Container(error) => write!(formatter, "container: {error}"),
            WasmError::QuotaTooLarge(error) => write!(formatter, "{error}"),
            WasmError::Invalid(error) => write!(formatter, "invalid module: {error}"),
            WasmError::MissingExport(symbol) => write!(formatter, "the module does not export `{symbol}` with the contract's type"),
            WasmError::InitialMemoryAboveQuota { bytes, quota } => {
                write!(formatter, "initial memory of {bytes} bytes is above the memory quota ({quota} bytes)")
            }
            WasmError::Import { symbol, reason } => write!(formatter, "import `{symbol}`: {reason}"),
            WasmError::Instantiate(reason) => write!(formatter, "instantiation: {reason}"),
            WasmError::NoMemory => write!(formatter, "no memory for its private heap"),
            WasmError::BadBinding(reason) => write!(formatter, "binding: {reason}"),
            WasmError::Install(error) => write!(formatter, "{error}"),
        }
    }
}

/// What the store keeps beside the instance.
struct WasmState {
    /// The resource limiter (memory, table, instance limits).
    limits: StoreLimits,
    /// Set by `spindle_extension_panic` (the message is in `ext::record_panic`).
    panicked: bool,
}

/// The instantiated module and its typed entry points. Everything `wasmi` allocated for
/// it lies in the extension's private heap.
struct Live {
    /// The store (engine, compiled code, instance, linear memory); taken when the
    /// instance is dropped.
    store: Option<Store<WasmState>>,
    memory: Memory,
    invoke: TypedFunc<(i32, i32, i32, i32, i32), i32>,
    /// Offset of the exchange buffer (checked to lie inside memory at load).
    exchange: usize,
}

/// One Wasm extension's instance, shared by its handlers and its [`LoadedExtension`].
pub struct WasmInstance {
    live: spin::Mutex<Live>,
    /// Bytes the linear memory may reach.
    memory_limit: usize,
    /// Where `wasmi` allocates for this extension; dropped after `live` (field order),
    /// freeing whatever is still allocated in it.
    heap: alloc::boxed::Box<PrivateHeap>,
}

impl Drop for WasmInstance {
    /// A healthy store is dropped as usual (its memory goes back to the private heap); one
    /// that an abort left in an unknown state is forgotten — its destructors might free
    /// what the aborted call had already freed — and reclaimed with the private heap, like
    /// everything the aborted call held. The aborted call's lock was never released, and
    /// nothing else holds it once the last reference is gone: a locked instance is one
    /// an abort left behind ([`WasmInstance::aborted`]).
    fn drop(&mut self) {
        let aborted = self.live.is_locked();
        let live = self.live.get_mut();
        let store = live.store.take();
        if aborted {
            core::mem::forget(store);
        } else {
            drop(store);
        }
    }
}

/// A loaded Wasm extension's image: its instance and the module's size.
pub struct WasmImage {
    instance: Arc<WasmInstance>,
    module_bytes: usize,
}

impl WasmImage {
    /// Bytes of the module the extension was loaded from.
    pub fn module_bytes(&self) -> usize {
        self.module_bytes
    }

    /// Linear memory in use and its limit; `None` while a call holds the instance.
    pub fn usage(&self) -> Option<ArenaUsage> {
        let live = self.instance.live.try_lock()?;
        Some(ArenaUsage { used_bytes: live.memory.data_size(live.store.as_ref()?), quota_bytes: self.instance.memory_limit })
    }

    /// The private heap's counters: what the interpreter holds for this extension.
    pub fn runtime_usage(&self) -> PrivateHeapUsage {
        self.instance.heap.usage()
    }
}

/// Classifies a failed call: the fault and words for the kill reason.
fn classify(error: &wasmi::Error, state: &WasmState, fuel: u64) -> (HandlerFault, Option<String>) {
    if state.panicked {
        return (HandlerFault::Panicked, None);
    }
    match error.as_trap_code() {
        Some(TrapCode::OutOfFuel) => (HandlerFault::Overrun { budget: fuel }, Some(alloc::format!("out of fuel ({fuel} units)"))),
        Some(code) => (HandlerFault::Trapped { cause: WASM_TRAP_CAUSE | u64::from(u8::from(code)) }, Some(alloc::format!("Wasm trap: {error}"))),
        None => (HandlerFault::Trapped { cause: WASM_TRAP_CAUSE }, Some(alloc::format!("Wasm error: {error}"))),
    }
}

impl WasmInstance {
    /// Runs binding `index` on `args` with `fuel`; the fault and its detail on failure.
    fn call<A: EventRecord, R: EventRecord>(&self, index: usize, args: &A, fuel: u64) -> Result<R, (HandlerFault, Option<String>)> {
        let _no_preemption = crate::sched::no_preemption();
        let Some(mut live) = self.live.try_lock() else { return Err((HandlerFault::Unavailable, None)) };
        let (argument_size, result_size) = (core::mem::size_of::<A>(), core::mem::size_of::<R>());
        let Live { store: Some(store), memory, invoke, exchange, .. } = &mut *live else { return Err((HandlerFault::Unavailable, None)) };
        let (arguments_at, result_at) = (*exchange + ARGUMENTS_OFFSET, *exchange + RESULT_OFFSET);
        // Encoded straight into the exchange buffer (one look-up of the memory, no copy).
        let target = memory.data_mut(&mut *store).get_mut(arguments_at..arguments_at + argument_size).ok_or((HandlerFault::Unavailable, None))?;
        encode(args, target).map_err(|_| (HandlerFault::MalformedResult, None))?;
        store.data_mut().panicked = false;
        store.set_fuel(fuel).map_err(|_| (HandlerFault::Unavailable, None))?;
        let invoke = *invoke;
        let parameters = (index as i32, arguments_at as i32, argument_size as i32, result_at as i32, result_size as i32);
        // No timer of its own: the dispatcher runs this binding under its bounded executor
        // (`Mode::Bounded`, see `install_typed`), whose recovery point is armed outside
        // `enter`. An abort there leaves this call in the middle of `wasmi` with the lock
        // held for good, which is how `faulted` and `drop` recognise it; the recovery
        // point gives the hart's allocations back to the kernel heap and restores the
        // preemption depth.
        let outcome = self.heap.enter(|| invoke.call(&mut *store, parameters));
        match outcome {
            Ok(0) => {
                let result = memory.data(&*store).get(result_at..result_at + result_size).ok_or((HandlerFault::MalformedResult, None))?;
                decode::<R>(result).map_err(|_| (HandlerFault::MalformedResult, Some(String::from("the result record is not valid"))))
            }
            Ok(code) => Err((HandlerFault::MalformedResult, Some(alloc::format!("invoke returned error code {code}")))),
            Err(error) => Err(classify(&error, store.data(), fuel)),
        }
    }

    /// Whether a call was aborted in the middle (by the binding's deadline, or a fault the
    /// bounded executor caught): its lock is still held and never will be released. Only
    /// meaningful once the raise that ran the call has returned to the dispatcher, on the
    /// hart that ran it (another hart's call would hold the lock too, once SMP arrives).
    fn aborted(&self) -> bool {
        self.live.is_locked()
    }
}

/// A Wasm extension's handler: marshals through linear memory and calls the module's
/// `invoke` with the binding's budget as fuel; a fault kills the extension.
struct WasmHandler<A, R> {
    index: usize,
    name: String,
    /// Fuel per call: the manifest's budget, or less when the event's primary module capped
    /// the binding's timer budget (set right after installation, see [`fuel_for`]).
    fuel: AtomicU64,
    extension: Weak<LoadedExtension>,
    instance: Arc<WasmInstance>,
    /// The interpreter's words for the last fault (a trap's message), kept by `invoke` for
    /// the containment in `faulted`.
    fault_detail: spin::Mutex<Option<String>>,
    records: PhantomData<fn(&A) -> R>,
}

/// Fuel for a binding asked to run with `manifest_fuel` whose timer budget the dispatcher
/// set to `timer_budget` instructions: the manifest's fuel when the timer is the usual
/// [`TIMER_BUDGET_FACTOR`] times it, else what fits the timer — the budget less
/// [`CALL_ALLOWANCE`], at `TIMER_BUDGET_FACTOR` instructions per unit — so that fuel, a
/// clean exit from `wasmi`, runs out before the timer backstop fires (at least 1).
pub fn fuel_for(manifest_fuel: u64, timer_budget: u64) -> u64 {
    if timer_budget >= manifest_fuel.saturating_mul(TIMER_BUDGET_FACTOR) {
        return manifest_fuel;
    }
    (timer_budget.saturating_sub(CALL_ALLOWANCE) / TIMER_BUDGET_FACTOR).clamp(1, manifest_fuel)
}

impl<A: EventRecord, R: EventRecord> Handler<A, R> for WasmHandler<A, R> {
    fn invoke(&self, args: &A) -> Result<R, HandlerFault> {
        self.instance.call::<A, R>(self.index, args, self.fuel.load(Ordering::Relaxed)).map_err(|(fault, detail)| {
            // Interrupts off: a deadline passing here must not leave the lock held.
            crate::arch::csr::without_interrupts(|| *self.fault_detail.lock() = detail);
            fault
        })
    }

    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::Wasm, name: self.name.clone() }
    }

    /// Containment, as for every technology, once the dispatcher has counted the fault:
    /// the extension is killed, with the interpreter's words for it when `invoke` kept
    /// some (none when the binding's deadline aborted `invoke` as a whole). `Unavailable`
    /// (a re-entrant raise) is not the extension's fault.
    fn faulted(&self, fault: &HandlerFault) {
        let detail = crate::arch::csr::without_interrupts(|| self.fault_detail.try_lock().and_then(|mut detail| detail.take()));
        let detail = detail.or_else(|| match fault {
            HandlerFault::Overrun { .. } if self.instance.aborted() => Some(String::from("stopped by the timer backstop inside the interpreter")),
            _ if self.instance.aborted() => Some(String::from("aborted inside the interpreter")),
            _ => None,
        });
        if *fault != HandlerFault::Unavailable
            && let Some(extension) = self.extension.upgrade()
        {
            super::kill_with_detail(&extension, *fault, &self.name, detail.as_deref());
        }
    }
}

/// Bytes of `length` at linear-memory offset `pointer`, if they lie inside the caller's
/// memory and are at most `limit` long.
fn guest_bytes(caller: &Caller<'_, WasmState>, pointer: i32, length: i32, limit: usize) -> Option<Vec<u8>> {
    let memory = caller.get_export(MEMORY_EXPORT)?.into_memory()?;
    let (start, length) = (pointer as u32 as usize, length as u32 as usize);
    if length > limit {
        return None;
    }
    memory.data(caller).get(start..start.checked_add(length)?).map(<[u8]>::to_vec)
}

/// Why the kernel function `name` cannot be imported by a Wasm module, if it cannot.
fn wasm_definition_missing(name: &str) -> Option<&'static str> {
    let declared = spindle_abi::host::KERNEL_FUNCTIONS.iter().find(|function| function.name == name)?;
    if NATIVE_ONLY_FUNCTIONS.contains(&name) {
        Some("native only (a Wasm module's heap is its linear memory)")
    } else if declared.runtime && name != "spindle_extension_panic" {
        Some("no Wasm definition in this kernel")
    } else {
        None
    }
}

/// Defines the kernel function `name` for Wasm in `linker`: a service function from the
/// generated glue (`super::glue::define_wasm`), or the runtime's `spindle_extension_panic`.
/// Each runs on the kernel heap: what a kernel function keeps (a panic message) must
/// outlive the extension's private heap.
fn define_kernel_function(linker: &mut Linker<WasmState>, name: &str) -> Result<(), wasmi::Error> {
    if let Some(defined) = super::glue::define_wasm(linker, name) {
        return defined;
    }
    if name != "spindle_extension_panic" {
        return Err(wasmi::Error::new("no Wasm definition in this kernel"));
    }
    linker
        .func_wrap(WASM_IMPORT_MODULE, name, |mut caller: Caller<'_, WasmState>, pointer: i32, length: i32| -> Result<(), wasmi::Error> {
            on_kernel_heap(|| {
                let message = guest_bytes(&caller, pointer, length, super::PANIC_MESSAGE_MAX)
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                    .unwrap_or_else(|| String::from("(unreadable panic message)"));
                super::record_panic(message);
                caller.data_mut().panicked = true;
                Err(wasmi::Error::new("the extension panicked"))
            })
        })
        .map(drop)
        .map_err(wasmi::Error::from)
}

/// Whether every kernel function extensions may import has a Wasm definition (checked by
/// the `ext::every_declared_function_is_defined` kernel test).
pub fn every_kernel_function_is_defined() -> Result<(), String> {
    let engine = Engine::default();
    let mut linker = Linker::<WasmState>::new(&engine);
    for function in spindle_abi::host::KERNEL_FUNCTIONS.iter().filter(|function| !NATIVE_ONLY_FUNCTIONS.contains(&function.name)) {
        if let Some(missing) = wasm_definition_missing(function.name) {
            return Err(alloc::format!("`{}`: {missing}", function.name));
        }
        define_kernel_function(&mut linker, function.name).map_err(|error| alloc::format!("`{}`: {error}", function.name))?;
    }
    Ok(())
}

/// The engine configuration: fuel metering, eager compilation (all translation happens
/// at load), a bounded call depth.
fn engine() -> Engine {
    let mut config = Config::default();
    config.consume_fuel(true).compilation_mode(CompilationMode::Eager).set_max_recursion_depth(MAX_CALL_DEPTH);
    Engine::new(&config)
}

/// Checks the module's imports against the name server (`Domain.Combine` of the granted
/// domains) and returns the kernel functions to define; errors name the import.
fn checked_imports<'module>(module: &'module Module, manifest: &spindle_loader::Manifest) -> Result<Vec<&'module str>, WasmError> {
    let granted = super::exports::import_granted_domains(manifest).map_err(|(wanted, error)| WasmError::Import {
        symbol: alloc::format!("{wanted:?}"),
        reason: alloc::format!("importing domains: {error}"),
    })?;
    let mut names = Vec::new();
    for import in module.imports() {
        let refuse = |reason: String| WasmError::Import { symbol: alloc::format!("{}.{}", import.module(), import.name()), reason };
        if import.module() != WASM_IMPORT_MODULE || import.ty().func().is_none() {
            return Err(refuse(alloc::format!("only functions of module `{WASM_IMPORT_MODULE}` can be imported")));
        }
        let name = import.name();
        if granted.symbol(name).is_none() {
            return Err(refuse(if super::exports::domain_table().iter().any(|export| export.name == name) {
                alloc::format!("`{name}` is in a domain the manifest does not import")
            } else {
                alloc::format!("`{name}` is not a kernel export")
            }));
        }
        if let Some(missing) = wasm_definition_missing(name) {
            return Err(refuse(String::from(missing)));
        }
        names.push(name);
    }
    Ok(names)
}

/// Frames a Wasm extension's private heap starts with (room for its initial linear
/// memory and compiled code, usually all it needs) and may grow to.
fn private_heap_sizes(initial_memory: usize, memory_limit: usize, module_bytes: usize) -> (usize, usize) {
    let initial = initial_memory + module_bytes + crate::mm::private_heap::MIN_CHUNK_BYTES;
    let limit = 4 * memory_limit.next_power_of_two() + 16 * module_bytes + PRIVATE_HEAP_ALLOWANCE;
    (initial, limit)
}

/// Verifies (if signed), validates, compiles, links, instantiates and installs a Wasm
/// extension from `.kext` bytes.
///
/// Everything `wasmi` allocates for the extension — engine, compiled code, store, linear
/// memory, and later each call's stacks — lies in a private heap of its own
/// ([`crate::mm::private_heap`]), reclaimed whole when the instance is dropped.
pub fn load(bytes: &[u8], installer: &mut super::Installer) -> Result<Arc<LoadedExtension>, WasmError> {
    // A kernel without the builder's key accepts only unsigned Wasm (a zero key verifies
    // nothing).
    let policy = Policy { verifying_key: VERIFYING_KEY.unwrap_or([0; 32]), abi_fingerprint: spindle_abi::abi_fingerprint().0, allow_unsigned_wasm: true };
    let verified = spindle_loader::open(bytes, &policy).map_err(WasmError::Container)?;
    let manifest = verified.manifest().clone();
    installer.admit(&manifest.name).map_err(WasmError::Install)?;
    let payload = verified.payload_of_kind(Kind::Wasm).map_err(WasmError::Container)?;
    let quota = arena::size_for_quota(manifest.memory_quota_bytes).map_err(WasmError::QuotaTooLarge)?.next_multiple_of(WASM_PAGE_SIZE);
    // The module's initial memory (at most the quota) is not known before it is parsed.
    let (initial, limit) = private_heap_sizes(quota.min(MAX_INITIAL_MEMORY_GUESS), 2 * quota, payload.len());
    let heap = PrivateHeap::new(&manifest.name, initial, limit).ok_or(WasmError::NoMemory)?;
    let (live, memory_limit, infos) = instantiate(&heap, payload, &manifest, quota)?;

    let instance = Arc::new(WasmInstance { live: spin::Mutex::new(live), memory_limit, heap });
    let signer = match (verified.is_signed(), VERIFYING_KEY) {
        (true, Some(key)) => super::introspect::Signer::Builder(key),
        _ => super::introspect::Signer::Unsigned,
    };
    let provenance = super::introspect::Provenance::of_manifest(&manifest, Some(installer.artifact(bytes, signer)));
    let image = ExtensionImage::Wasm(WasmImage { instance: instance.clone(), module_bytes: payload.len() });
    let extension = Arc::new(LoadedExtension::new(&manifest.name, &manifest.version, Technology::Wasm, provenance, Some(image)));
    let fuel = crate::time::budget_from_micros(manifest.budget_microseconds);
    super::install_all(&extension, infos.iter().enumerate(), |(index, info)| install_binding(info, index, fuel, &extension, &instance, installer))?;
    Ok(extension)
}

/// The largest initial memory [`load`] plans its private heap for before it knows the
/// module's (the builder's shadow stack and static data; more just grows the heap).
const MAX_INITIAL_MEMORY_GUESS: usize = 2 * WASM_PAGE_SIZE;

/// Compiles, links and instantiates `payload` in `heap` and describes its bindings: the
/// instance, its memory limit and the binding descriptions. Every `wasmi` value is made
/// inside `heap.enter`; errors are turned into text outside it (on the kernel heap), and
/// nothing made in `heap` but the returned store outlives this function.
fn instantiate(heap: &PrivateHeap, payload: &[u8], manifest: &spindle_loader::Manifest, quota: usize) -> Result<(Live, usize, Vec<BindingInfo>), WasmError> {
    let engine = heap.enter(engine);
    let module = heap.enter(|| Module::new(&engine, payload)).map_err(|error| WasmError::Invalid(error.to_string()))?;
    let Some(ExternType::Memory(memory_type)) = heap.enter(|| module.get_export(MEMORY_EXPORT)) else { return Err(WasmError::MissingExport(MEMORY_EXPORT)) };
    let initial = memory_type.minimum().saturating_mul(WASM_PAGE_SIZE as u64);
    if initial > quota as u64 {
        return Err(WasmError::InitialMemoryAboveQuota { bytes: initial, quota: quota as u64 });
    }
    let memory_limit = initial as usize + quota;
    let names = checked_imports(&module, manifest)?;
    let linker = heap
        .enter(|| -> Result<Linker<WasmState>, (usize, wasmi::Error)> {
            let mut linker = Linker::<WasmState>::new(&engine);
            for (position, name) in names.iter().enumerate() {
                define_kernel_function(&mut linker, name).map_err(|error| (position, error))?;
            }
            Ok(linker)
        })
        .map_err(|(position, error)| WasmError::Import { symbol: alloc::format!("{WASM_IMPORT_MODULE}.{}", names[position]), reason: error.to_string() })?;

    let limits = StoreLimitsBuilder::new()
        .memory_size(memory_limit)
        .table_elements(MAX_TABLE_ELEMENTS)
        .instances(1)
        .memories(1)
        .tables(1)
        .trap_on_grow_failure(true)
        .build();
    let mut store = heap.enter(|| {
        let mut store = Store::new(&engine, WasmState { limits, panicked: false });
        store.limiter(|state| &mut state.limits);
        store
    });
    store.set_fuel(DESCRIBE_BUDGET).map_err(|error| WasmError::Instantiate(error.to_string()))?;
    let instance = heap.enter(|| linker.instantiate_and_start(&mut store, &module)).map_err(|error| match error.as_trap_code() {
        Some(TrapCode::OutOfFuel) => WasmError::Instantiate(alloc::format!("the start function ran out of fuel ({DESCRIBE_BUDGET} units)")),
        _ => WasmError::Instantiate(error.to_string()),
    })?;
    let memory = heap.enter(|| instance.get_memory(&store, MEMORY_EXPORT)).ok_or(WasmError::MissingExport(MEMORY_EXPORT))?;
    let (count, info, invoke, exchange_function) = heap.enter(|| {
        (
            instance.get_typed_func::<(), i32>(&store, BINDING_COUNT_SYMBOL).ok(),
            instance.get_typed_func::<(i32, i32), i32>(&store, BINDING_INFO_SYMBOL).ok(),
            instance.get_typed_func::<(i32, i32, i32, i32, i32), i32>(&store, INVOKE_SYMBOL).ok(),
            instance.get_typed_func::<(), i32>(&store, EXCHANGE_SYMBOL).ok(),
        )
    });
    let count = count.ok_or(WasmError::MissingExport(BINDING_COUNT_SYMBOL))?;
    let info = info.ok_or(WasmError::MissingExport(BINDING_INFO_SYMBOL))?;
    let invoke = invoke.ok_or(WasmError::MissingExport(INVOKE_SYMBOL))?;
    let exchange_function = exchange_function.ok_or(WasmError::MissingExport(EXCHANGE_SYMBOL))?;

    // Describe, on the load-time fuel.
    let describe_failed = |what: &str, error: wasmi::Error| WasmError::BadBinding(alloc::format!("{what}: {error}"));
    let bindings = heap.enter(|| count.call(&mut store, ())).map_err(|error| describe_failed("binding count", error))?;
    let exchange = heap.enter(|| exchange_function.call(&mut store, ())).map_err(|error| describe_failed("exchange buffer", error))? as u32 as usize;
    if exchange.checked_add(EXCHANGE_SIZE).is_none_or(|end| end > memory.data_size(&store)) {
        return Err(WasmError::BadBinding(alloc::format!("the exchange buffer at {exchange:#x} is not inside linear memory")));
    }
    let mut infos = Vec::new();
    for index in 0..bindings.clamp(0, 64) {
        let code = heap.enter(|| info.call(&mut store, (index, exchange as i32))).map_err(|error| describe_failed("describing a binding", error))?;
        if code != 0 {
            return Err(WasmError::BadBinding(alloc::format!("describing binding {index} returned error code {code}")));
        }
        let mut bytes = [0u8; BindingInfo::SIZE];
        memory.read(&store, exchange, &mut bytes).map_err(|error| WasmError::BadBinding(error.to_string()))?;
        infos.push(BindingInfo::from_bytes(&bytes).ok_or_else(|| WasmError::BadBinding(String::from("short binding description")))?);
    }
    Ok((Live { store: Some(store), memory, invoke, exchange }, memory_limit, infos))
}

fn install_typed<A: EventRecord, R: EventRecord>(
    event: &'static Event<A, R>,
    info: &BindingInfo,
    index: usize,
    fuel: u64,
    extension: &Arc<LoadedExtension>,
    instance: &Arc<WasmInstance>,
    installer: &mut super::Installer,
) -> Result<BindingId, WasmError> {
    let guards = super::native::checked_guards(&event.descriptor(), info, index).map_err(WasmError::BadBinding)?;
    let handler = Arc::new(WasmHandler::<A, R> {
        index,
        name: alloc::format!("{}#{index}", extension.name),
        fuel: AtomicU64::new(fuel),
        extension: Arc::downgrade(extension),
        instance: instance.clone(),
        fault_detail: spin::Mutex::new(None),
        records: PhantomData,
    });
    // Bounded like native: the dispatcher's executor is the only timer (the adapter arms
    // none of its own); the fuel is the real budget, the timer a backstop.
    let mut spec = BindingSpec::new(&extension.name, handler.clone()).mode(Mode::Bounded { budget: fuel.saturating_mul(TIMER_BUDGET_FACTOR) });
    for guard in guards {
        spec = spec.when(guard);
    }
    // The event's primary module may lower the timer budget (`clock.Tick` caps it at
    // 100,000 instructions): the fuel follows what the dispatcher granted. Interrupts stay
    // off from the installation to the fuel's update, so no raise on this hart runs the
    // binding with the manifest's fuel under a smaller cap.
    crate::arch::csr::without_interrupts(|| {
        let id = installer
            .install(event, spec)
            .map_err(|error| WasmError::Install(ExtensionError::Install { event: event.name(), reason: error.to_string() }))?;
        if let Some(Mode::Bounded { budget }) = granted_mode(event, id) {
            handler.fuel.store(fuel_for(fuel, budget), Ordering::Relaxed);
        }
        Ok(id)
    })
}

/// The mode the dispatcher runs binding `id` of `event` in (after its primary module's cap).
fn granted_mode<A: EventRecord, R: EventRecord>(event: &'static Event<A, R>, id: BindingId) -> Option<Mode> {
    let table = crate::events::dispatcher().table(event).ok()?;
    table.snapshot().binding(id).map(|binding| binding.mode)
}

fn install_binding(
    info: &BindingInfo,
    index: usize,
    fuel: u64,
    extension: &Arc<LoadedExtension>,
    instance: &Arc<WasmInstance>,
    installer: &mut super::Installer,
) -> Result<BindingId, WasmError> {
    let visitor = InstallBinding { info, index, fuel, extension, instance, installer };
    spindle_abi::event::visit_event(spindle_abi::event::EventId(info.event_id), visitor).unwrap_or_else(|_| {
        Err(WasmError::BadBinding(alloc::format!("binding {index} names event id {}, which this kernel does not raise", info.event_id)))
    })
}

/// Installs one binding, typed by the event its description names.
struct InstallBinding<'a> {
    info: &'a BindingInfo,
    index: usize,
    fuel: u64,
    extension: &'a Arc<LoadedExtension>,
    instance: &'a Arc<WasmInstance>,
    installer: &'a mut super::Installer,
}

impl spindle_abi::event::EventVisitor for InstallBinding<'_> {
    type Output = Result<BindingId, WasmError>;
    fn visit<A: EventRecord, R: EventRecord>(self, event: &'static Event<A, R>) -> Self::Output {
        install_typed(event, self.info, self.index, self.fuel, self.extension, self.instance, self.installer)
    }
}
