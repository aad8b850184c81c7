//! `spindle-abi`: the one interface between the Spindle kernel, its extensions and
//! user programs.
//!
//! Everything that crosses a protection or technology boundary is declared here once:
//! events and their argument/result types, exported kernel functions (domains), system
//! call numbers, and the fingerprints that stop a mismatched binary from linking.
//! The crate is `no_std`, depends only on `spin` (the installed domain implementations of
//! [`host`]) and `spindle-functions` (the kernel-function list; with a `direct-<domain>`
//! feature also the trusted `spindle-imports`, see [`host`]) so that every technology (kernel, native extension, Wasm module, user program)
//! can use it, and is `#![forbid(unsafe_code)]`: it is what extension crates depend on.
//! The crossing itself — imports, allocators, system calls, upcall serving — is the
//! trusted glue crate `spindle-glue` (`abi/glue`), which only the builder's generated
//! crates and user programs depend on.

#![no_std]
#![forbid(unsafe_code)]

pub mod event;
pub mod extension;
pub mod host;
pub mod machine;
pub mod native;
pub mod syscall;
pub mod wasm;
pub mod fingerprint;

pub use event::{Event, EventDescriptor, EventId, EventRecord, FieldDesc};
/// The one declaration of every kernel function (crate `spindle-functions`; see [`host`]).
pub use spindle_functions::for_each_kernel_function;
pub use fingerprint::{Fingerprint, fingerprint_of};

/// The ABI-wide fingerprint: every event declaration (kernel and measurement events) and
/// every kernel function. A `.kext` built against a different ABI carries a different
/// value and is refused at load.
pub fn abi_fingerprint() -> Fingerprint {
    let events = event::fingerprint_of_events(event::KERNEL_EVENTS)
        .combine(event::fingerprint_of_events(event::MEASUREMENT_EVENTS));
    events.combine(host::kernel_functions_fingerprint())
}
