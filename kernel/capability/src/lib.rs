//! `spindle-capability`: unforgeable references to kernel objects, in the kernel and
//! towards user space.
//!
//! SPIN made capabilities ordinary type-safe pointers, and gave user space an index into
//! a per-process table instead ("externalized references"). This crate provides both:
//!
//! - [`Capability<T>`]: an in-kernel typed reference with [`Rights`]. Extension code cannot
//!   construct one; only a [`CapabilityIssuer`] mints them, and creating an issuer needs
//!   `unsafe`, which extension crates forbid (Tock's capability-token pattern).
//!   Capabilities are not `Clone`; copying needs the [`Rights::DUPLICATE`] right, and rights
//!   only ever shrink.
//! - [`CapabilityTable`]: a per-process table mapping [`Handle`]s (table tag, generation,
//!   index packed in a `u64`) to typed entries, validated on every use with a specific
//!   [`CapError`]: foreign, invalid, stale, wrong type, insufficient rights, table full.
//!
//! Object types opt in with [`KernelObject`], which names their [`ObjectKind`].
//!
//! ```
//! use std::sync::Arc;
//! use spindle_capability::{CapabilityIssuer, CapabilityTable, KernelObject, ObjectKind, Rights};
//!
//! struct File { inode: u64 }
//! impl KernelObject for File { const KIND: ObjectKind = ObjectKind::File; }
//!
//! // SAFETY: trust marker only; this example plays the trusted kernel.
//! let issuer = unsafe { CapabilityIssuer::new() };
//! let file = issuer.mint(Arc::new(File { inode: 7 }), Rights::READ | Rights::DUPLICATE);
//! assert_eq!(file.access(Rights::READ).unwrap().inode, 7);
//!
//! // Externalize a read-only copy for a user process; validate it when it comes back.
//! let table = CapabilityTable::new(64);
//! let handle = table.insert_capability(file.duplicate(Rights::READ).unwrap()).unwrap();
//! let raw: u64 = handle.raw(); // what user space sees
//! let back = spindle_capability::Handle::from_raw(raw);
//! assert_eq!(table.lookup::<File>(back, Rights::READ).unwrap().inode, 7);
//! assert!(table.lookup::<File>(back, Rights::WRITE).is_err());
//! ```
//!
//! The trust boundary is enforced by the compiler. Extension code cannot mint an issuer
//! (it forbids `unsafe`) ...
//!
//! ```compile_fail
//! #![forbid(unsafe_code)]
//! // SAFETY: none — this is the forbidden use the example shows failing to compile.
//! let issuer = unsafe { spindle_capability::CapabilityIssuer::new() };
//! ```
//!
//! ... nor build one or a capability by hand (private fields):
//!
//! ```compile_fail,E0451
//! struct Page;
//! impl spindle_capability::KernelObject for Page {
//!     const KIND: spindle_capability::ObjectKind = spindle_capability::ObjectKind::PhysicalPage;
//! }
//! let forged = spindle_capability::Capability::<Page> {
//!     object: std::sync::Arc::new(Page),
//!     rights: spindle_capability::Rights::ALL,
//! };
//! ```
//!
//! Design: types are checked with `core::any` downcasts (no `unsafe`); kinds exist for
//! errors and introspection. Tables are internally locked (`spin::RwLock`, lookups in
//! parallel), and every type here is `Send + Sync`.
//!
//! Limitations: revocation is per handle (remove) — there is no revocation tree that
//! withdraws every copy derived from a capability; an in-kernel `Capability<T>` cannot be
//! revoked at all once handed out (drop the object's service state instead). See
//! [`table`] for the limits of handle tags.

#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod capability;
pub mod error;
pub mod object;
pub mod rights;
pub mod table;

pub use capability::{Capability, CapabilityIssuer};
pub use error::CapError;
pub use object::{KernelObject, ObjectKind};
pub use rights::Rights;
pub use table::{CapabilityTable, Handle, HandleInfo, MAX_CAPACITY};

#[cfg(test)]
mod tests {
    use super::*;

    struct Page;
    impl KernelObject for Page {
        const KIND: ObjectKind = ObjectKind::PhysicalPage;
    }

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn shared_types_are_send_and_sync() {
        assert_send_sync::<Capability<Page>>();
        assert_send_sync::<CapabilityIssuer>();
        assert_send_sync::<CapabilityTable>();
        assert_send_sync::<Handle>();
        assert_send_sync::<CapError>();
    }

    #[test]
    fn errors_display_their_details() {
        let handle = Handle::from_raw(0);
        assert_eq!(
            CapError::WrongType {
                expected: ObjectKind::File,
                found: ObjectKind::PhysicalPage
            }
            .to_string(),
            "wrong object type: expected file, found physical page"
        );
        assert_eq!(
            CapError::InsufficientRights {
                needed: Rights::WRITE,
                held: Rights::READ
            }
            .to_string(),
            "insufficient rights: needed WRITE, held READ"
        );
        assert_eq!(
            CapError::Stale { handle }.to_string(),
            "stale handle 0.0@0000: its entry was removed"
        );
        assert_eq!(
            CapError::TableFull { capacity: 4 }.to_string(),
            "capability table full (4 entries)"
        );
    }
}
