//! Access rights: what the holder of a capability may do with the object it names.
//!
//! Rights are a small bit set. They only ever shrink as a capability is passed on
//! (`restrict`, `duplicate`), never grow: there is no operation that adds a right.

use core::fmt;
use core::ops::{BitAnd, BitOr};

/// A set of access rights, checked by the service that owns the object on every use.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rights(u32);

impl Rights {
    /// No rights: the holder can name the object but do nothing with it.
    pub const NONE: Rights = Rights(0);
    /// Read the object's contents or state.
    pub const READ: Rights = Rights(1 << 0);
    /// Modify the object's contents or state.
    pub const WRITE: Rights = Rights(1 << 1);
    /// Execute the object (code pages, extension images).
    pub const EXECUTE: Rights = Rights(1 << 2);
    /// Map the object into an address space.
    pub const MAP: Rights = Rights(1 << 3);
    /// Invoke the object: raise an event, call through a domain, signal a strand.
    pub const INVOKE: Rights = Rights(1 << 4);
    /// Make another capability to the same object (with equal or fewer rights).
    /// Without it a capability is linear: it can be moved or dropped, not copied.
    pub const DUPLICATE: Rights = Rights(1 << 5);
    /// Every right defined above.
    pub const ALL: Rights = Rights((1 << 6) - 1);

    /// Names used by `Display`/`Debug`, in bit order.
    const NAMES: [(Rights, &'static str); 6] = [
        (Rights::READ, "READ"),
        (Rights::WRITE, "WRITE"),
        (Rights::EXECUTE, "EXECUTE"),
        (Rights::MAP, "MAP"),
        (Rights::INVOKE, "INVOKE"),
        (Rights::DUPLICATE, "DUPLICATE"),
    ];

    /// The raw bits (for crossing to user space).
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Rights from raw bits; `None` if any bit does not name a right (a user program
    /// asking for rights that do not exist is a bug worth reporting, not ignoring).
    pub const fn from_bits(bits: u32) -> Option<Rights> {
        if bits & !Rights::ALL.0 == 0 {
            Some(Rights(bits))
        } else {
            None
        }
    }

    /// The rights in `self` or in `other`.
    pub const fn union(self, other: Rights) -> Rights {
        Rights(self.0 | other.0)
    }

    /// The rights in both `self` and `other`.
    pub const fn intersection(self, other: Rights) -> Rights {
        Rights(self.0 & other.0)
    }

    /// The rights in `self` that are not in `other`.
    pub const fn difference(self, other: Rights) -> Rights {
        Rights(self.0 & !other.0)
    }

    /// Whether every right in `other` is also in `self`.
    pub const fn contains(self, other: Rights) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Rights {
    type Output = Rights;
    fn bitor(self, other: Rights) -> Rights {
        self.union(other)
    }
}

impl BitAnd for Rights {
    type Output = Rights;
    fn bitand(self, other: Rights) -> Rights {
        self.intersection(other)
    }
}

impl fmt::Display for Rights {
    /// Formats as `READ|WRITE`, or `NONE` for the empty set.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return formatter.write_str("NONE");
        }
        let mut first = true;
        for (right, name) in Rights::NAMES {
            if self.contains(right) {
                if !first {
                    formatter.write_str("|")?;
                }
                formatter.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Rights {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "Rights({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let read_write = Rights::READ | Rights::WRITE;
        assert!(read_write.contains(Rights::READ));
        assert!(!read_write.contains(Rights::READ | Rights::MAP));
        assert_eq!(read_write & Rights::WRITE, Rights::WRITE);
        assert_eq!(read_write.difference(Rights::READ), Rights::WRITE);
        assert!(Rights::ALL.contains(Rights::DUPLICATE));
        assert!(Rights::NONE.is_empty());
    }

    #[test]
    fn from_bits_rejects_unknown_bits() {
        assert_eq!(Rights::from_bits(0b11), Some(Rights::READ | Rights::WRITE));
        assert_eq!(Rights::from_bits(1 << 31), None);
    }

    #[test]
    fn display_names_each_right() {
        assert_eq!((Rights::READ | Rights::MAP).to_string(), "READ|MAP");
        assert_eq!(Rights::NONE.to_string(), "NONE");
    }
}
