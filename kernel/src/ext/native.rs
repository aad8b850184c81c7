//! The native technology: signed, dynamically linked RISC-V shared objects (`.kext`).
//!
//! Loading, in order, touching nothing before the signature is checked:
//! 1. [`spindle_loader::open`] checks the container, the Ed25519 signature against the
//!    key baked into this kernel by `cargo xtask`, the ABI fingerprint and the manifest;
//! 2. the ELF is parsed and checked (segments, dynamic section, relocation types);
//! 3. frames for the image come from the frame allocator, the image is copied and
//!    relocated through the kernel's writable view, with every import resolved against
//!    the domains the manifest names and the loading principal is granted (an unknown or
//!    ungranted symbol fails the load and names it);
//! 4. the image is mapped W^X at the start of its own slot of the extension region (`r-x`
//!    text, `r--` rodata/RELRO, `rw-` data) and the instruction cache is synchronised;
//!    after an unmapped guard page comes the extension's memory arena (its manifest's
//!    quota rounded up to pages, mapped `rw-`; see [`super::arena`]), then at least one
//!    more unmapped guard page before the next slot;
//! 5. each binding the extension describes is checked against the kernel's declaration
//!    of its event (id, fingerprint, record sizes) and installed, bounded by the
//!    manifest's budget.
//!
//! Every call into the image (the describe calls and each handler) runs bounded, with
//! preemption off; its allocations come from its own quota: the allocator's entries find
//! the arena from the caller's address ([`with_arena_of_code`]).
//!
//! Every failure is a specific [`NativeError`] and releases everything taken so far.
//! Known limits: the image's and the arena's frames stay reachable through the kernel's
//! identity map (writable there; safe Rust in an extension cannot name those addresses);
//! freeing an unloaded image assumes no other hart is inside its code (one hart runs
//! today).

use alloc::string::{String, ToString};
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::mem::MaybeUninit;

use spindle_abi::event::{Event, EventDescriptor, EventRecord};
use spindle_abi::extension::{GuardDecl, RecordBuffer, decode, encode};
use spindle_abi::native::{BINDING_COUNT_SYMBOL, BINDING_INFO_SYMBOL, BindingInfo, INVOKE_SYMBOL, MAX_GUARDS};
use spindle_dispatch::{BindingId, BindingSpec, DeclarativeGuard, Handler, HandlerDescription, HandlerFault, Mode};
use spindle_loader::{ContainerError, ElfError, ElfObject, Kind, LoadError, Permissions, Policy};
use spindle_service_frames::Owner;

use super::arena::{self, ExtensionArena, MAX_ARENA_SIZE, QuotaTooLarge};
use super::{ExtensionError, LoadedExtension, Technology};
use crate::arch::PAGE_SIZE;
use crate::arch::sv39::{MapError, PteFlags};
use crate::mm::frame::{self, FrameRun, PermanentFrames};

include!(concat!(env!("OUT_DIR"), "/verifying_key.rs"));

use crate::memlayout::{EXTENSION_REGION_BASE, EXTENSION_REGION_SIZE};
/// Virtual space per extension: its image, a guard page, its arena, a guard page.
const EXTENSION_SLOT_SIZE: usize = 16 * 1024 * 1024;
/// Most native extensions loaded at once.
const MAX_SLOTS: usize = 256;
const _: () = assert!(MAX_SLOTS * EXTENSION_SLOT_SIZE <= EXTENSION_REGION_SIZE, "extension slots overflow their region");
/// An unmapped page after the image and after the arena: an overrun of either faults.
const GUARD_SIZE: usize = PAGE_SIZE;
/// Largest image a native extension may have: the rest of its slot holds the largest
/// arena and two guard pages.
pub const MAX_IMAGE_SIZE: u64 = spindle_loader::MAX_NATIVE_IMAGE_SIZE;
const _: () = assert!(MAX_IMAGE_SIZE == (EXTENSION_SLOT_SIZE - MAX_ARENA_SIZE - 2 * GUARD_SIZE) as u64, "the loader's image limit is not this slot layout's");
/// Largest argument or result record marshalled to a native or Wasm handler.
pub(super) const MAX_RECORD: usize = 32;

// Every record an extension can be handed fits the marshalling buffers (checked at compile
// time; the buffers are zeroed on every call, so they are kept as small as the ABI allows).
const _: () = assert!(spindle_abi::extension::records_fit(spindle_abi::event::KERNEL_EVENTS, MAX_RECORD));
const _: () = assert!(spindle_abi::extension::records_fit(spindle_abi::event::MEASUREMENT_EVENTS, MAX_RECORD));
/// Budget for the describe calls made while loading (instructions; Wasm: fuel).
pub(super) const DESCRIBE_BUDGET: u64 = 10_000_000;

static SLOTS: spin::Mutex<[bool; MAX_SLOTS]> = spin::Mutex::new([false; MAX_SLOTS]);

/// The arena of each slot's loaded image (`Arc::as_ptr`), or 0: set once the image is
/// mapped with its arena, cleared when the image is dropped (before the arena goes).
/// Code running in a slot is that image's, so a return address names its caller's arena.
static SLOT_ARENAS: [AtomicUsize; MAX_SLOTS] = [const { AtomicUsize::new(0) }; MAX_SLOTS];

/// Runs `f` on the arena of the native extension whose image holds `code` (a return
/// address: the caller of `spindle_extension_alloc`/`free`); `None` when `code` lies in
/// no loaded image (the kernel, a built-in extension).
pub(super) fn with_arena_of_code<R>(code: usize, f: impl FnOnce(&ExtensionArena) -> R) -> Option<R> {
    let offset = code.checked_sub(EXTENSION_REGION_BASE)?;
    let address = SLOT_ARENAS.get(offset / EXTENSION_SLOT_SIZE)?.load(Ordering::Acquire);
    if address == 0 {
        return None;
    }
    // A nonzero entry is `Arc::as_ptr` of the arena of the image loaded in that slot, which
    // `NativeImage` keeps alive and clears here before dropping; no call into an extension
    // is in progress when its image is dropped.
    // SAFETY: `code` runs in that image (a return address into it): the arena is alive.
    let arena = unsafe { &*(address as *const ExtensionArena) };
    Some(f(arena))
}

/// Why a native extension was refused.
#[derive(Debug)]
pub enum NativeError {
    /// This kernel was built without the builder's verifying key.
    NoVerifyingKey,
    /// The container, signature, ABI fingerprint or manifest is wrong.
    Container(ContainerError),
    /// The ELF shared object is malformed or unsupported.
    Elf(ElfError),
    /// Relocation or symbol resolution failed (names the symbol when it is an import).
    Link(String),
    /// The extension lacks a required entry point.
    MissingEntry(&'static str),
    /// No frames or no virtual slot for the image.
    OutOfMemory,
    /// The manifest's memory quota is above the largest arena.
    QuotaTooLarge(QuotaTooLarge),
    /// No frames for the extension's arena.
    NoArenaMemory {
        /// Bytes the arena needed.
        bytes: usize,
    },
    /// `mm.Allocate` refused the arena's frames (a handler, or the default for want of
    /// frames).
    ArenaRefused {
        /// Bytes the arena needed.
        bytes: usize,
    },
    /// Mapping the image or its arena failed.
    Map(MapError),
    /// The extension's describe calls failed or described something invalid.
    BadBinding(String),
    /// Installing its bindings failed.
    Install(ExtensionError),
}

impl fmt::Display for NativeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NativeError::NoVerifyingKey => formatter.write_str("this kernel has no verifying key (build and run it with `cargo xtask`)"),
            NativeError::Container(error) => write!(formatter, "container: {error}"),
            NativeError::Elf(error) => write!(formatter, "ELF: {error}"),
            NativeError::Link(reason) => write!(formatter, "link: {reason}"),
            NativeError::MissingEntry(symbol) => write!(formatter, "missing entry point `{symbol}`"),
            NativeError::OutOfMemory => formatter.write_str("out of memory for the image"),
            NativeError::QuotaTooLarge(error) => write!(formatter, "{error}"),
            NativeError::NoArenaMemory { bytes } => write!(formatter, "out of memory for the {bytes}-byte arena"),
            NativeError::ArenaRefused { bytes } => write!(formatter, "mm.Allocate refused the {bytes}-byte arena"),
            NativeError::Map(error) => write!(formatter, "mapping the image or its arena: {error}"),
            NativeError::BadBinding(reason) => write!(formatter, "binding: {reason}"),
            NativeError::Install(error) => write!(formatter, "{error}"),
        }
    }
}

/// A mapped native image with its memory arena: its frames, the arena's frames and its
/// slot; released, unmapped and freed on drop (no code of the extension runs then).
pub struct NativeImage {
    frames: Option<FrameRun>,
    slot: usize,
    mapped: Vec<(usize, usize)>,
    /// The extension's heap (its address is in `SLOT_ARENAS` while the image is loaded).
    arena: Arc<ExtensionArena>,
    /// Frames behind the arena's pages (none for quota 0).
    arena_frames: Option<FrameRun>,
}

impl NativeImage {
    /// Virtual base of the image.
    pub fn base(&self) -> usize {
        EXTENSION_REGION_BASE + self.slot * EXTENSION_SLOT_SIZE
    }
    /// Bytes of physical memory the image holds (without the arena).
    pub fn size(&self) -> usize {
        self.frames.as_ref().map_or(0, FrameRun::size)
    }
    /// The extension's memory arena.
    pub fn arena(&self) -> &Arc<ExtensionArena> {
        &self.arena
    }
}

impl Drop for NativeImage {
    fn drop(&mut self) {
        SLOT_ARENAS[self.slot].store(0, Ordering::Release);
        // The arena is forgotten whole — no destructor of the extension runs — before its
        // pages go away.
        self.arena.release();
        if let Some(root) = crate::mm::kernel_space::root() {
            crate::arch::csr::without_interrupts(|| {
                for &(address, size) in &self.mapped {
                    let _ = root.unmap_range(address, size);
                }
            });
            crate::arch::csr::flush_tlb();
        }
        // The arena's frames leave the frame table as they are freed.
        drop(self.arena_frames.take());
        drop(self.frames.take());
        crate::arch::csr::without_interrupts(|| SLOTS.lock()[self.slot] = false);
    }
}

fn allocate_slot() -> Option<usize> {
    crate::arch::csr::without_interrupts(|| {
        let mut slots = SLOTS.lock();
        let free = slots.iter().position(|used| !used)?;
        slots[free] = true;
        Some(free)
    })
}

fn pte_flags(permissions: Permissions) -> PteFlags {
    let mut flags = PteFlags::GLOBAL;
    if permissions.read {
        flags = flags | PteFlags::READ;
    }
    if permissions.write {
        flags = flags | PteFlags::WRITE;
    }
    if permissions.execute {
        flags = flags | PteFlags::EXECUTE;
    }
    flags
}

type CountFunction = extern "C" fn() -> usize;
type InfoFunction = extern "C" fn(usize, *mut BindingInfo) -> i32;
type InvokeFunction = extern "C" fn(usize, *const u8, usize, *mut u8, usize) -> i32;
/// A binding's direct entry (`spindle_abi::extension::direct_entry::<A, R, F>`, made for its
/// handler `F`): context,
/// the argument record, the result record to write.
type DirectFunction<A, R> = extern "C" fn(usize, &A, &mut MaybeUninit<R>);

/// Reinterprets a resolved entry address as a function pointer.
///
/// # Safety
/// `address` must be the address of a function with signature `F` inside a mapped,
/// executable, relocated image that outlives every call through the pointer.
unsafe fn function_at<F: Copy>(address: u64) -> F {
    debug_assert_eq!(core::mem::size_of::<F>(), core::mem::size_of::<usize>());
    // SAFETY: forwarded from the caller; `F` is a function-pointer type of pointer size.
    unsafe { core::mem::transmute_copy(&(address as usize)) }
}

/// Calls into a native image: bounded by `budget`, with preemption off.
fn call_into<R>(budget: u64, body: impl FnOnce() -> R) -> Result<R, HandlerFault> {
    let _no_preemption = crate::sched::no_preemption();
    crate::events::run_with_budget(budget, body)
}

/// A native extension's handler: calls the binding's direct entry with the records (or
/// marshals them through the image's invoke entry), bounded by the dispatcher, with
/// preemption off; a fault kills the extension.
struct NativeHandler<A, R> {
    invoke: InvokeFunction,
    /// The binding's direct entry and its context, when the image reported one inside
    /// its executable mapping: records are then passed by pointer, not marshalled.
    direct: Option<(DirectFunction<A, R>, usize)>,
    index: usize,
    name: String,
    extension: Weak<LoadedExtension>,
    records: PhantomData<fn(&A) -> R>,
}

impl<A: EventRecord, R: EventRecord> Handler<A, R> for NativeHandler<A, R> {
    fn invoke(&self, args: &A) -> Result<R, HandlerFault> {
        if let Some((entry, context)) = self.direct {
            let mut result = MaybeUninit::<R>::uninit();
            // Preemption off for the call: inside a raise it already is (one load); an
            // async worker's call turns it off itself.
            if crate::arch::hart::current().preempt_disabled.load(Ordering::Relaxed) != 0 {
                entry(context, args, &mut result);
            } else {
                let _no_preemption = crate::sched::no_preemption();
                entry(context, args, &mut result);
            }
            // The entry returned, so it wrote `result`: `direct_entry` writes it before
            // returning, and a handler that panics or traps never returns (the bounded
            // call's recovery point ends the call).
            // SAFETY: written (above); an `R` built by the extension's type-checked code from
            // the same `#[repr(C)]` declaration (fingerprint and sizes checked at load).
            return Ok(unsafe { result.assume_init() });
        }
        // Aligned buffers: records move as whole words on both sides of the call.
        let mut arguments = RecordBuffer::<MAX_RECORD>::default();
        let mut result = RecordBuffer::<MAX_RECORD>::default();
        let argument_size = core::mem::size_of::<A>();
        let result_size = core::mem::size_of::<R>();
        encode(args, &mut arguments.0).map_err(|_| HandlerFault::MalformedResult)?;
        let (invoke, index) = (self.invoke, self.index);
        let (argument_pointer, result_pointer) = (arguments.0.as_ptr(), result.0.as_mut_ptr());
        // The binding is bounded: the dispatcher's executor supplies the budget and the
        // recovery point.
        let code = {
            let _no_preemption = crate::sched::no_preemption();
            invoke(index, argument_pointer, argument_size, result_pointer, result_size)
        };
        match code {
            0 => decode::<R>(&result.0[..result_size]).map_err(|_| HandlerFault::MalformedResult),
            _ => Err(HandlerFault::MalformedResult),
        }
    }

    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::Native, name: self.name.clone() }
    }

    /// Containment: a fault (panic, trap, overrun, malformed result) kills the extension.
    fn faulted(&self, fault: &HandlerFault) {
        if let Some(extension) = self.extension.upgrade() {
            super::kill(&extension, *fault, &self.name);
        }
    }
}

/// What every binding of one native extension shares.
struct BindingTarget<'a> {
    invoke: InvokeFunction,
    /// The image's executable mappings (start, size): where a direct entry may lie.
    executable: &'a [(u64, u64)],
    budget: u64,
    extension: &'a Arc<LoadedExtension>,
}

fn install_typed<A: EventRecord, R: EventRecord>(
    event: &'static Event<A, R>,
    info: &BindingInfo,
    index: usize,
    target: &BindingTarget<'_>,
    installer: &mut super::Installer,
) -> Result<BindingId, NativeError> {
    let BindingTarget { invoke, budget, extension, executable } = *target;
    let guards = checked_guards(&event.descriptor(), info, index).map_err(NativeError::BadBinding)?;
    let entry = info.direct_entry;
    let direct = if entry != 0 && executable.iter().any(|&(start, size)| entry >= start && entry - start < size) {
        // The builder's glue reports `direct_entry::<A, R, F>` for this binding, whose event (id,
        // fingerprint and record sizes, checked above) is `event`'s.
        // SAFETY: in the image's executable mapping (kept while any binding can call it), a
        // function whose C signature is therefore `DirectFunction<A, R>`.
        let function = unsafe { function_at::<DirectFunction<A, R>>(entry) };
        Some((function, info.direct_context as usize))
    } else {
        None
    };
    let handler = Arc::new(NativeHandler::<A, R> {
        invoke,
        direct,
        index,
        name: alloc::format!("{}#{index}", extension.name),
        extension: Arc::downgrade(extension),
        records: PhantomData,
    });
    let mut spec = BindingSpec::new(&extension.name, handler).mode(Mode::Bounded { budget });
    for guard in guards {
        spec = spec.when(guard);
    }
    installer
        .install(event, spec)
        .map_err(|error| NativeError::Install(ExtensionError::Install { event: event.name(), reason: error.to_string() }))
}

/// Checks binding `index`'s description (from a native or Wasm extension) against the
/// kernel's declaration of its event — fingerprint, record sizes, guard count and kinds —
/// and returns its guards for the dispatcher.
///
/// Errors: a message naming the binding and what differs.
pub(super) fn checked_guards(descriptor: &EventDescriptor, info: &BindingInfo, index: usize) -> Result<Vec<DeclarativeGuard>, String> {
    if info.event_fingerprint != descriptor.fingerprint.0 {
        return Err(alloc::format!(
            "binding {index} was built against a different declaration of `{}` (fingerprint {:#x}, kernel {:#x})",
            descriptor.name,
            info.event_fingerprint,
            descriptor.fingerprint.0
        ));
    }
    if info.arguments_size != descriptor.arguments.size as u64 || info.result_size != descriptor.result.size as u64 {
        return Err(alloc::format!("binding {index}: record sizes differ from the kernel's `{}`", descriptor.name));
    }
    let count = info.guard_count as usize;
    if count > MAX_GUARDS {
        return Err(alloc::format!("binding {index} declares {count} guards (at most {MAX_GUARDS})"));
    }
    info.guards[..count]
        .iter()
        .map(|raw| {
            let guard = raw.to_decl().ok_or_else(|| alloc::format!("binding {index}: unknown guard kind {}", raw.kind))?;
            if let GuardDecl::Equals { field, .. } | GuardDecl::InRange { field, .. } | GuardDecl::Mask { field, .. } = guard
                && field >= descriptor.arguments.fields.len()
            {
                return Err(alloc::format!("binding {index}: guard on field {field}, but `{}` has {} fields", descriptor.name, descriptor.arguments.fields.len()));
            }
            Ok(super::builtin::dispatcher_guard(&guard))
        })
        .collect()
}

/// Installs one binding, typed by the event its description names.
struct InstallBinding<'a> {
    info: &'a BindingInfo,
    index: usize,
    target: &'a BindingTarget<'a>,
    installer: &'a mut super::Installer,
}

impl spindle_abi::event::EventVisitor for InstallBinding<'_> {
    type Output = Result<BindingId, NativeError>;
    fn visit<A: EventRecord, R: EventRecord>(self, event: &'static Event<A, R>) -> Self::Output {
        install_typed(event, self.info, self.index, self.target, self.installer)
    }
}

fn install_binding(info: &BindingInfo, index: usize, target: &BindingTarget<'_>, installer: &mut super::Installer) -> Result<BindingId, NativeError> {
    spindle_abi::event::visit_event(spindle_abi::event::EventId(info.event_id), InstallBinding { info, index, target, installer }).unwrap_or_else(|_| {
        Err(NativeError::BadBinding(alloc::format!("binding {index} names event id {}, which this kernel does not raise", info.event_id)))
    })
}

/// Verifies, links, maps and installs a native extension from `.kext` bytes.
pub fn load(bytes: &[u8], installer: &mut super::Installer) -> Result<Arc<LoadedExtension>, NativeError> {
    let verifying_key = VERIFYING_KEY.ok_or(NativeError::NoVerifyingKey)?;
    let policy = Policy { verifying_key, abi_fingerprint: spindle_abi::abi_fingerprint().0, allow_unsigned_wasm: false };
    let verified = spindle_loader::open(bytes, &policy).map_err(NativeError::Container)?;
    let manifest = verified.manifest().clone();
    installer.admit(&manifest.name).map_err(NativeError::Install)?;
    let payload = verified.payload_of_kind(Kind::Native).map_err(NativeError::Container)?;
    let elf = ElfObject::parse(payload, MAX_IMAGE_SIZE).map_err(NativeError::Elf)?;
    let arena_size = arena::size_for_quota(manifest.memory_quota_bytes).map_err(NativeError::QuotaTooLarge)?;

    let pages = (elf.image_size() as usize).div_ceil(PAGE_SIZE).max(1);
    let frames = frame::allocate_zeroed(pages).ok_or(NativeError::OutOfMemory)?;
    let slot = allocate_slot().ok_or(NativeError::OutOfMemory)?;
    let mut image = NativeImage {
        frames: Some(frames),
        slot,
        mapped: Vec::new(),
        arena: Arc::new(ExtensionArena::empty(&manifest.name)),
        arena_frames: None,
    };
    let physical = image.frames.as_ref().map_or(0, FrameRun::address);
    // SAFETY: the frames were just allocated for this image and are owned by `image`;
    // RAM is identity-mapped read-write for the kernel, and nothing else refers to them.
    let buffer = unsafe { core::slice::from_raw_parts_mut(physical as *mut u8, pages * PAGE_SIZE) };

    // Domain.Combine of the granted domains; an ungranted or unknown domain fails here.
    let granted = super::exports::import_granted_domains(&manifest)
        .map_err(|(wanted, error)| NativeError::Link(alloc::format!("importing domains {wanted:?}: {error}")))?;
    let mut resolver = |symbol: &str| -> Result<u64, String> {
        match granted.symbol(symbol) {
            Some(found) => Ok(found.address() as u64),
            None if super::exports::domain_table().iter().any(|export| export.name == symbol) => {
                Err(alloc::format!("`{symbol}` is in a domain the manifest does not import"))
            }
            None => Err(alloc::format!("`{symbol}` is not a kernel export")),
        }
    };
    let loaded = spindle_loader::load_into(&elf, buffer, image.base() as u64, &mut resolver).map_err(|error| match error {
        LoadError::Unresolved { symbol, error } => NativeError::Link(alloc::format!("unresolved import `{symbol}`: {error}")),
        other => NativeError::Link(alloc::format!("{other}")),
    })?;

    let root = crate::mm::kernel_space::root().ok_or(NativeError::OutOfMemory)?;
    let executable: Vec<(u64, u64)> =
        loaded.mappings().iter().filter(|mapping| mapping.permissions.execute).map(|mapping| (mapping.address, mapping.size)).collect();
    for mapping in loaded.mappings() {
        let (address, size) = (mapping.address as usize, mapping.size as usize);
        let offset = mapping.image_offset as usize;
        crate::arch::csr::without_interrupts(|| {
            root.map_range(address, physical + offset, size, pte_flags(mapping.permissions), &mut PermanentFrames)
        })
        .map_err(NativeError::Map)?;
        image.mapped.push((address, size));
    }
    map_arena(&mut image, root, pages * PAGE_SIZE, arena_size, &manifest.name)?;
    SLOT_ARENAS[image.slot].store(Arc::as_ptr(&image.arena) as usize, Ordering::Release);
    crate::arch::csr::flush_tlb();
    crate::arch::csr::fence_instructions();

    let entry = |symbol: &'static str| loaded.function(symbol).map_err(|_| NativeError::MissingEntry(symbol));
    // SAFETY: the address is the exported BINDING_COUNT_SYMBOL function of the image just relocated
    // and mapped executable, with the C-ABI signature `spindle_abi::native` fixes for `CountFunction`;
    // the image stays in the LoadedExtension for as long as any binding can call it.
    let count_function: CountFunction = unsafe { function_at(entry(BINDING_COUNT_SYMBOL)?) };
    // SAFETY: the address is the exported BINDING_INFO_SYMBOL function of the image just relocated
    // and mapped executable, with the C-ABI signature `spindle_abi::native` fixes for `InfoFunction`;
    // the image stays in the LoadedExtension for as long as any binding can call it.
    let info_function: InfoFunction = unsafe { function_at(entry(BINDING_INFO_SYMBOL)?) };
    // SAFETY: the address is the exported INVOKE_SYMBOL function of the image just relocated
    // and mapped executable, with the C-ABI signature `spindle_abi::native` fixes for `InvokeFunction`;
    // the image stays in the LoadedExtension for as long as any binding can call it.
    let invoke_function: InvokeFunction = unsafe { function_at(entry(INVOKE_SYMBOL)?) };

    let budget = crate::time::budget_from_micros(manifest.budget_microseconds);
    let count = call_into(DESCRIBE_BUDGET, || count_function())
        .map_err(|fault| NativeError::BadBinding(alloc::format!("binding count: {fault}")))?;
    let mut infos = Vec::new();
    for index in 0..count.min(64) {
        let mut info = BindingInfo::default();
        let pointer: *mut BindingInfo = &mut info;
        let code = call_into(DESCRIBE_BUDGET, || info_function(index, pointer))
            .map_err(|fault| NativeError::BadBinding(alloc::format!("describing binding {index}: {fault}")))?;
        if code != 0 {
            return Err(NativeError::BadBinding(alloc::format!("describing binding {index} returned error code {code}")));
        }
        infos.push(info);
    }

    let artifact = installer.artifact(bytes, super::introspect::Signer::Builder(verifying_key));
    let provenance = super::introspect::Provenance::of_manifest(&manifest, Some(artifact));
    let extension =
        Arc::new(LoadedExtension::new(&manifest.name, &manifest.version, Technology::Native, provenance, Some(super::ExtensionImage::Native(image))));
    let target = BindingTarget { invoke: invoke_function, executable: &executable, budget, extension: &extension };
    super::install_all(&extension, infos.iter().enumerate(), |(index, info)| install_binding(info, index, &target, installer))?;
    Ok(extension)
}

/// Where in its slot an extension's arena of `arena_size` bytes starts: after the image's
/// `image_span` bytes and at least a guard page, aligned to the arena's size rounded up to
/// a power of two when that still leaves a guard page before the slot's end (the buddy
/// heap's blocks are aligned to their size, so an aligned arena can hand out one block as
/// large as itself), else just after the guard page.
fn arena_start(slot_base: usize, image_span: usize, arena_size: usize) -> usize {
    let earliest = slot_base + image_span + GUARD_SIZE;
    let aligned = earliest.next_multiple_of(arena_size.next_power_of_two().max(PAGE_SIZE));
    if aligned + arena_size + GUARD_SIZE <= slot_base + EXTENSION_SLOT_SIZE { aligned } else { earliest }
}

/// Gives `image` its arena: `arena_size` bytes of zeroed frames mapped `rw-` in its slot
/// after the image's `image_span` bytes and a guard page (see [`arena_start`]), managed by
/// a fresh [`ExtensionArena`]. Does nothing for an arena of 0 bytes (no heap).
fn map_arena(
    image: &mut NativeImage,
    root: crate::arch::sv39::PageTableRoot,
    image_span: usize,
    arena_size: usize,
    name: &str,
) -> Result<(), NativeError> {
    if arena_size == 0 {
        return Ok(());
    }
    let start = arena_start(image.base(), image_span, arena_size);
    // The slot ends with a guard page too, so the next slot's image never abuts the arena
    // (MAX_IMAGE_SIZE leaves room for the largest arena and both guard pages).
    debug_assert!(start + arena_size + GUARD_SIZE <= image.base() + EXTENSION_SLOT_SIZE);
    // `mm.Allocate` is asked first, in consecutive batches of at most MAX_ALLOCATE frames
    // for one arena, once the whole arena fits the free frames; the frame table names the
    // arena's frames the extension's (by its slot).
    let owner = Owner::ExtensionArena(image.slot as u64);
    let pages = (arena_size / PAGE_SIZE) as u64;
    if frame::with_table(|table| table.check_allocation(owner, pages)).is_err() {
        return Err(NativeError::NoArenaMemory { bytes: arena_size });
    }
    let mut asked = 0;
    while asked < pages {
        let batch = (pages - asked).min(spindle_service_frames::MAX_ALLOCATE);
        if crate::services::vm::may_allocate_for(owner, batch, spindle_service_frames::Purpose::ArenaPage).is_err() {
            return Err(NativeError::ArenaRefused { bytes: arena_size });
        }
        asked += batch;
    }
    let frames = frame::allocate_zeroed_for(arena_size / PAGE_SIZE, owner).ok_or(NativeError::NoArenaMemory { bytes: arena_size })?;
    let physical = frames.address();
    image.arena_frames = Some(frames);
    let flags = PteFlags::GLOBAL | PteFlags::READ | PteFlags::WRITE;
    crate::arch::csr::without_interrupts(|| root.map_range(start, physical, arena_size, flags, &mut PermanentFrames))
        .map_err(NativeError::Map)?;
    image.mapped.push((start, arena_size));
    // `arena_start` rounds a page-aligned address up to a multiple of a page or more.
    // SAFETY: `[start, start + arena_size)` is page-aligned, at most MAX_ARENA_SIZE (`size_for_quota`),
    // just mapped read-write to frames owned by `image` and used by nothing else;
    // `NativeImage::drop` releases the arena before it unmaps the range and frees them.
    image.arena = Arc::new(unsafe { ExtensionArena::new(name, start, arena_size) });
    Ok(())
}
