//! `spindle-abi`: the one interface between the Spindle kernel, its extensions and
//! user programs.
//!
//! Everything that crosses a protection or technology boundary is declared here once:
//! events and their argument/result types, exported kernel functions (domains), system
//! call numbers, and the fingerprints that stop a mismatched binary from linking.
//! The crate is `no_std` and has no dependencies so that every technology (kernel,
//! native extension, Wasm module, user program) can use it.

#![no_std]

pub mod event;
pub mod fingerprint;

pub use event::{Event, EventDescriptor, EventId, EventRecord, FieldDesc};
pub use fingerprint::{Fingerprint, fingerprint_of};
