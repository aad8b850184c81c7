//! In-kernel capabilities: unforgeable typed references, minted only by trusted code.
//!
//! A [`Capability<T>`] is an `Arc<T>` plus [`Rights`], with private fields and no public
//! constructor. The only way to make one is [`CapabilityIssuer::mint`], and the only way
//! to get an issuer is the `unsafe` [`CapabilityIssuer::new`]. Extension crates are
//! `#![forbid(unsafe_code)]`, so the compiler itself keeps them from minting: they can
//! only use, restrict, duplicate (with the `DUPLICATE` right) or drop the capabilities
//! they were given. This is Tock's capability-token pattern applied to object references.

use alloc::sync::Arc;
use core::fmt;

use crate::error::CapError;
use crate::object::{KernelObject, ObjectKind};
use crate::rights::Rights;

/// The minting token. Whoever holds one can create a capability to any object, so only
/// trusted kernel code (boot, the loader, core services) may hold it.
///
/// Zero-sized; pass it by reference. Not `Clone`: trusted code lends it, it is not
/// copied into places that did not ask for it.
pub struct CapabilityIssuer {
    /// Keeps the type unconstructible outside this module.
    _private: (),
}

impl CapabilityIssuer {
    /// Creates a minting token.
    ///
    /// # Safety
    ///
    /// This is not a memory-safety hazard but a trust marker (Tock style): calling it
    /// requires `unsafe`, which extension crates forbid. The caller must be trusted kernel
    /// code and must not hand the issuer to untrusted code, because every capability
    /// check in the kernel relies on capabilities having been minted deliberately.
    pub const unsafe fn new() -> CapabilityIssuer {
        CapabilityIssuer { _private: () }
    }

    /// Mints a capability to `object` carrying `rights`.
    pub fn mint<T: KernelObject>(&self, object: Arc<T>, rights: Rights) -> Capability<T> {
        Capability { object, rights }
    }
}

impl fmt::Debug for CapabilityIssuer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("CapabilityIssuer")
    }
}

/// An unforgeable, typed reference to a kernel object of type `T`, with rights.
///
/// Not `Clone`: copying a capability is [`duplicate`](Capability::duplicate), which
/// needs [`Rights::DUPLICATE`]. A capability without that right is linear (a page given
/// to exactly one extension stays with that extension). There is no `Deref`: reaching
/// the object goes through [`access`](Capability::access), which checks rights.
pub struct Capability<T: KernelObject> {
    /// The object; shared with the owning service and any duplicates.
    object: Arc<T>,
    /// What this capability allows; only ever shrinks.
    rights: Rights,
}

impl<T: KernelObject> Capability<T> {
    /// The kind of object this capability names.
    pub fn kind(&self) -> ObjectKind {
        T::KIND
    }

    /// The rights this capability carries.
    pub fn rights(&self) -> Rights {
        self.rights
    }

    /// Checks that the capability carries every right in `needed`.
    ///
    /// Errors: [`CapError::InsufficientRights`] naming the needed and held rights.
    pub fn check(&self, needed: Rights) -> Result<(), CapError> {
        if self.rights.contains(needed) {
            Ok(())
        } else {
            Err(CapError::InsufficientRights {
                needed,
                held: self.rights,
            })
        }
    }

    /// The object, if the capability carries every right in `needed`.
    ///
    /// Errors: [`CapError::InsufficientRights`].
    pub fn access(&self, needed: Rights) -> Result<&T, CapError> {
        self.check(needed)?;
        Ok(&self.object)
    }

    /// A shared reference to the object that outlives the capability (for a service
    /// that must keep the object, e.g. in a page table), if `needed` is held.
    ///
    /// Errors: [`CapError::InsufficientRights`].
    pub fn access_shared(&self, needed: Rights) -> Result<Arc<T>, CapError> {
        self.check(needed)?;
        Ok(Arc::clone(&self.object))
    }

    /// The same capability with its rights reduced to those also in `keep`.
    /// Always allowed: consuming `self` means no copy is made.
    pub fn restrict(self, keep: Rights) -> Capability<T> {
        Capability {
            object: self.object,
            rights: self.rights.intersection(keep),
        }
    }

    /// A second capability to the same object carrying exactly `rights`.
    ///
    /// Errors: [`CapError::InsufficientRights`] if this capability lacks
    /// [`Rights::DUPLICATE`] or any right in `rights` (rights never grow).
    pub fn duplicate(&self, rights: Rights) -> Result<Capability<T>, CapError> {
        self.check(rights.union(Rights::DUPLICATE))?;
        Ok(Capability {
            object: Arc::clone(&self.object),
            rights,
        })
    }

    /// Whether `self` and `other` name the same object (not merely equal ones).
    pub fn same_object(&self, other: &Capability<T>) -> bool {
        Arc::ptr_eq(&self.object, &other.object)
    }

    /// Splits the capability into its object and rights (for externalizing it into a
    /// [`CapabilityTable`](crate::CapabilityTable)); crate-private so that the pair
    /// cannot be reassembled elsewhere.
    pub(crate) fn into_parts(self) -> (Arc<T>, Rights) {
        (self.object, self.rights)
    }
}

impl<T: KernelObject> fmt::Debug for Capability<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Capability")
            .field("kind", &T::KIND)
            .field("rights", &self.rights)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Page {
        frame_number: u64,
    }

    impl KernelObject for Page {
        const KIND: ObjectKind = ObjectKind::PhysicalPage;
    }

    fn issuer() -> CapabilityIssuer {
        // SAFETY: trust marker only (no memory-safety precondition); this is test code,
        // which is trusted.
        unsafe { CapabilityIssuer::new() }
    }

    #[test]
    fn access_checks_rights() {
        let capability = issuer().mint(Arc::new(Page { frame_number: 7 }), Rights::READ);
        assert_eq!(capability.kind(), ObjectKind::PhysicalPage);
        assert_eq!(
            capability
                .access(Rights::READ)
                .map(|page| page.frame_number),
            Ok(7)
        );
        assert_eq!(
            capability.access(Rights::READ | Rights::WRITE).err(),
            Some(CapError::InsufficientRights {
                needed: Rights::READ | Rights::WRITE,
                held: Rights::READ
            })
        );
    }

    #[test]
    fn duplicate_needs_duplicate_right_and_never_adds_rights() {
        let linear = issuer().mint(
            Arc::new(Page { frame_number: 1 }),
            Rights::READ | Rights::WRITE,
        );
        assert!(matches!(
            linear.duplicate(Rights::READ),
            Err(CapError::InsufficientRights { .. })
        ));

        let shared = issuer().mint(
            Arc::new(Page { frame_number: 2 }),
            Rights::READ | Rights::DUPLICATE,
        );
        let copy = shared
            .duplicate(Rights::READ)
            .expect("READ is held and DUPLICATE allows copies");
        assert!(copy.same_object(&shared));
        assert_eq!(copy.rights(), Rights::READ);
        assert!(matches!(
            shared.duplicate(Rights::READ | Rights::WRITE),
            Err(CapError::InsufficientRights { .. })
        ));
        // The copy did not receive DUPLICATE, so it cannot be copied again.
        assert!(copy.duplicate(Rights::READ).is_err());
    }

    #[test]
    fn restrict_only_removes_rights() {
        let capability = issuer().mint(Arc::new(Page { frame_number: 3 }), Rights::READ);
        let restricted = capability.restrict(Rights::READ | Rights::WRITE);
        assert_eq!(restricted.rights(), Rights::READ);
        assert_eq!(restricted.restrict(Rights::NONE).rights(), Rights::NONE);
    }

    #[test]
    fn distinct_objects_are_not_the_same() {
        let first = issuer().mint(Arc::new(Page { frame_number: 4 }), Rights::ALL);
        let second = issuer().mint(Arc::new(Page { frame_number: 4 }), Rights::ALL);
        assert!(!first.same_object(&second));
    }
}
