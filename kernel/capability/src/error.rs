//! The one error type of capability checks, both in-kernel and through handle tables.

use core::fmt;

use crate::object::ObjectKind;
use crate::rights::Rights;
use crate::table::Handle;

/// Why a capability or handle could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapError {
    /// The handle was never issued by this table: its index is beyond the slots the table
    /// has used, or its generation is newer than the slot's.
    Invalid {
        /// The offending handle.
        handle: Handle,
    },
    /// The handle was issued by a different table (another process's): its table tag
    /// does not match.
    Foreign {
        /// The offending handle.
        handle: Handle,
    },
    /// The handle was valid once, but its entry has since been removed (and the slot
    /// possibly reused): its generation is older than the slot's.
    Stale {
        /// The offending handle.
        handle: Handle,
    },
    /// The handle names an object of a different type than the caller asked for.
    /// (If the kinds print the same, two Rust types share a kind.)
    WrongType {
        /// The kind the caller asked for.
        expected: ObjectKind,
        /// The kind the handle actually names.
        found: ObjectKind,
    },
    /// The capability lacks a right the operation needs.
    InsufficientRights {
        /// The rights the operation needs.
        needed: Rights,
        /// The rights the capability carries.
        held: Rights,
    },
    /// The table already holds its maximum number of entries.
    TableFull {
        /// The table's capacity.
        capacity: usize,
    },
}

impl fmt::Display for CapError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapError::Invalid { handle } => write!(formatter, "invalid handle {handle}"),
            CapError::Foreign { handle } => {
                write!(
                    formatter,
                    "handle {handle} belongs to another capability table"
                )
            }
            CapError::Stale { handle } => {
                write!(formatter, "stale handle {handle}: its entry was removed")
            }
            CapError::WrongType { expected, found } => {
                write!(
                    formatter,
                    "wrong object type: expected {expected}, found {found}"
                )
            }
            CapError::InsufficientRights { needed, held } => {
                write!(
                    formatter,
                    "insufficient rights: needed {needed}, held {held}"
                )
            }
            CapError::TableFull { capacity } => {
                write!(formatter, "capability table full ({capacity} entries)")
            }
        }
    }
}

impl core::error::Error for CapError {}
