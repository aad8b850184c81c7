//! The kernel functions native extensions import (declared once in `spindle_abi::host`),
//! and the domains they are granted through.
//!
//! The service functions' exports are generated (`super::glue`); this file defines the
//! native runtime's own (`extension` domain: panic, the arena allocator) and the name
//! server: the loader resolves a native extension's imports to these addresses through the
//! domains its manifest was granted ([`domain_table`]). Every argument is validated: a
//! native extension is trusted to be type-safe Rust, not to be bug-free.

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use spindle_abi::host::KERNEL_FUNCTIONS;

/// Whether every page of `[pointer, pointer + length)` is mapped readable for the kernel.
fn readable(pointer: *const u8, length: usize) -> bool {
    super::glue::mapped_with(pointer as usize, length, crate::arch::sv39::PteFlags::READ)
}

/// Copies extension-supplied bytes after checking that they are readable kernel memory.
fn copy_in(pointer: *const u8, length: usize, limit: usize) -> Option<Vec<u8>> {
    if pointer.is_null() || length > limit || !readable(pointer, length) {
        return None;
    }
    // SAFETY: the range is non-null, at most `limit` bytes, and every page of it is mapped
    // readable in the kernel page table (checked above); it is only read, and copied out
    // before returning, so a later unmapping cannot affect the copy.
    let bytes = unsafe { core::slice::from_raw_parts(pointer, length) };
    Some(bytes.to_vec())
}

/// Domain `extension`: the calling extension panicked. Records the message and aborts
/// the handler at its recovery point (a breakpoint trap the bounded executor catches).
#[unsafe(no_mangle)]
pub extern "C" fn spindle_extension_panic(pointer: *const u8, length: usize) -> ! {
    let message = copy_in(pointer, length, super::PANIC_MESSAGE_MAX)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_else(|| String::from("(unreadable panic message)"));
    super::record_panic(message);
    crate::arch::hart::current().pending_panic.store(1, Ordering::Relaxed);
    crate::arch::trap::raise_breakpoint()
}

// The entries of `spindle_extension_alloc`/`free`: the caller is known by its return
// address (the glue's allocator in the extension's image, whose slot names its arena:
// `native::with_arena_of_code`), passed on as one more argument; a tail call, so the
// Rust function returns straight to the extension. Nothing is set per call into an
// extension for this ("the arena switched lazily").
core::arch::global_asm!(
    ".section .text",
    ".balign 4",
    ".globl spindle_extension_alloc_entry",
    "spindle_extension_alloc_entry:",
    "    mv a2, ra",
    "    tail {alloc}",
    ".globl spindle_extension_free_entry",
    "spindle_extension_free_entry:",
    "    mv a3, ra",
    "    tail {free}",
    alloc = sym extension_alloc_for,
    free = sym extension_free_for,
);

unsafe extern "C" {
    fn spindle_extension_alloc_entry(size: usize, align: usize) -> *mut u8;
    fn spindle_extension_free_entry(pointer: *mut u8, size: usize, align: usize);
}

/// Domain `extension`: allocates from the calling native extension's arena (the glue's
/// global allocator calls this). Null when the quota is exhausted or the layout is
/// invalid — the extension's allocation-error path, by default a panic that kills it —
/// and, with a warning, when the caller is not a native extension's code (from the kernel,
/// as here, it always is refused: kernel tests call it so).
pub fn spindle_extension_alloc(size: usize, align: usize) -> *mut u8 {
    // SAFETY: the entry takes two integers and returns a pointer (or null); it reads no
    // memory of the caller's.
    unsafe { spindle_extension_alloc_entry(size, align) }
}

/// Domain `extension`: returns a block to the calling native extension's arena. A block
/// outside that arena (or a call not from a native extension's code) is ignored with a
/// warning.
pub fn spindle_extension_free(address: usize, size: usize, align: usize) {
    // SAFETY: the entry frees only a block of the calling extension's own arena (checked
    // there), and the kernel is not one: nothing is dereferenced.
    unsafe { spindle_extension_free_entry(address as *mut u8, size, align) }
}

/// `spindle_extension_alloc` for the code at `caller` (a return address).
extern "C" fn extension_alloc_for(size: usize, align: usize, caller: usize) -> *mut u8 {
    super::native::with_arena_of_code(caller, |arena| arena.allocate(size, align)).unwrap_or_else(|| {
        crate::println!("[ext] extension_alloc of {size} bytes refused: the caller ({caller:#x}) is no native extension's code");
        core::ptr::null_mut()
    })
}

/// `spindle_extension_free` for the code at `caller` (a return address).
extern "C" fn extension_free_for(pointer: *mut u8, size: usize, align: usize, caller: usize) {
    let freed = super::native::with_arena_of_code(caller, |arena| {
        if let Err(error) = arena.free(pointer, size, align) {
            super::arena::warn_refused_free(arena, pointer, size, align, error);
        }
    });
    if freed.is_none() {
        crate::println!("[ext] extension_free at {:#x} ignored: the caller ({caller:#x}) is no native extension's code", pointer as usize);
    }
}

/// Address of the kernel's definition of an exported function, by name.
fn address_of(name: &str) -> Option<usize> {
    let address = match name {
        "spindle_extension_panic" => spindle_extension_panic as *const () as usize,
        "spindle_extension_alloc" => spindle_extension_alloc_entry as *const () as usize,
        "spindle_extension_free" => spindle_extension_free_entry as *const () as usize,
        // Service functions: generated from the declaration (`super::glue`).
        _ => return super::glue::native_address(name),
    };
    Some(address)
}

/// One resolvable export: name, domain, fingerprint and address.
#[derive(Clone, Copy, Debug)]
pub struct Export {
    /// Symbol name.
    pub name: &'static str,
    /// Domain granting it.
    pub domain: &'static str,
    /// Signature fingerprint from the ABI declaration.
    pub fingerprint: u64,
    /// The kernel function's address.
    pub address: usize,
}

/// Every declared kernel function with its address; a declaration without a kernel
/// definition is a kernel bug caught by the `ext::every_declared_function_is_defined` test.
pub fn domain_table() -> Vec<Export> {
    KERNEL_FUNCTIONS
        .iter()
        .filter_map(|function| {
            Some(Export { name: function.name, domain: function.domain, fingerprint: function.fingerprint.0, address: address_of(function.name)? })
        })
        .collect()
}

/// The kernel's name server: one domain per `domain` of [`KERNEL_FUNCTIONS`], built with
/// SPIN's `Domain.Create`, each registered with an authorisation callback. Native
/// extensions' imports are resolved only through the domains their manifest names and
/// their loading principal is authorised for (`Domain.Combine` of those).
static NAME_SERVER: spin::Once<spindle_domain::NameServer> = spin::Once::new();

/// Domains every extension may import without a grant (its own runtime support).
pub const ALWAYS_GRANTED: &[&str] = &["extension"];

/// The name server, created on first use from the kernel-function table.
pub fn name_server() -> &'static spindle_domain::NameServer {
    NAME_SERVER.call_once(|| {
        let server = spindle_domain::NameServer::new();
        let table = domain_table();
        let mut domains: Vec<&str> = table.iter().map(|export| export.domain).collect();
        domains.sort_unstable();
        domains.dedup();
        for domain in domains {
            let symbols = table.iter().filter(|export| export.domain == domain).filter_map(|export| {
                let function = KERNEL_FUNCTIONS.iter().find(|function| function.name == export.name)?;
                Some(spindle_domain::Symbol::from_address(function.name, function.signature, export.address))
            });
            let created = spindle_domain::Domain::create(domain, symbols);
            let registered = created.map_err(|error| alloc::format!("{error}")).and_then(|created| {
                let result = if ALWAYS_GRANTED.contains(&domain) {
                    server.register(created, spindle_domain::allow_all)
                } else {
                    server.register(created, spindle_domain::require_grant)
                };
                result.map_err(|error| alloc::format!("{error}"))
            });
            if let Err(error) = registered {
                crate::println!("[ext] domain `{domain}` not registered: {error}");
            }
        }
        server
    })
}

/// The principal that loads extensions from the console, the boot bundle and the host:
/// the kernel itself (it may import every domain).
pub fn loading_principal() -> spindle_domain::Principal {
    // SAFETY: `CapabilityIssuer::new` is a trust marker that only kernel code may use to
    // mint capabilities; this is kernel code creating the kernel's own principal.
    let issuer = unsafe { spindle_capability::CapabilityIssuer::new() };
    spindle_domain::Principal::kernel(&issuer)
}

/// `Domain.Combine` of the domains `manifest` names plus [`ALWAYS_GRANTED`], looked up by
/// the loading principal (each domain's authoriser decides). Shared by the native and
/// Wasm loaders. Errors: the names asked for and the name server's refusal.
pub fn import_granted_domains(manifest: &spindle_loader::Manifest) -> Result<spindle_domain::Domain, (Vec<&str>, spindle_domain::NameServerError)> {
    let mut wanted: Vec<&str> = manifest.domains.iter().map(alloc::string::String::as_str).collect();
    for always in ALWAYS_GRANTED {
        if !wanted.contains(always) {
            wanted.push(always);
        }
    }
    name_server().import(&loading_principal(), &wanted, manifest.name.clone()).map_err(|error| (wanted, error))
}
