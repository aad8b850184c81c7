//! The dispatcher's errors: one specific enum per kind of operation.

use core::fmt;

use spindle_abi::event::EventId;
use spindle_abi::fingerprint::Fingerprint;

use crate::handler::BindingId;
use crate::primary::Refusal;
pub use crate::rcu::UnknownHart;

/// Why an installation or replacement failed. Nothing was changed when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallError {
    /// No event with this id is registered with the dispatcher.
    UnknownEvent(EventId),
    /// The event is registered with a different signature (types or fingerprint): the
    /// installer was built against another declaration.
    SignatureMismatch {
        /// Fingerprint of the registered event.
        registered: Fingerprint,
        /// Fingerprint the installer was built with.
        requested: Fingerprint,
    },
    /// The event's primary module refused.
    Refused(Refusal),
    /// `Mode::Async` was requested, but the platform has no async executor.
    AsyncUnsupported,
    /// `Mode::Async` was requested, but the async executor could not start a worker
    /// (e.g. no memory for a strand's stack).
    AsyncWorkerUnavailable,
    /// `Mode::Bounded` was requested (or imposed) but the platform has no bounded executor.
    BoundedUnsupported,
    /// `Mode::Bounded` with a budget of zero instructions.
    ZeroBudget,
    /// A declarative guard (the installer's or an imposed one) names a field the event's
    /// argument record does not have.
    UnknownField {
        /// The guard's field index.
        field: usize,
        /// How many fields the argument record has.
        field_count: usize,
    },
    /// A range guard whose low bound is above its high bound (it could never hold).
    EmptyRange {
        /// The guard's field index.
        field: usize,
    },
    /// The event already has `MAX_BINDINGS_PER_EVENT` bindings.
    TooManyBindings,
    /// The binding to replace is not installed (already uninstalled or never was).
    UnknownBinding(BindingId),
}

impl fmt::Display for InstallError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::UnknownEvent(id) => write!(formatter, "no event {id} is registered"),
            InstallError::SignatureMismatch { registered, requested } => write!(
                formatter,
                "signature mismatch: registered {:#018x}, requested {:#018x}",
                registered.0, requested.0
            ),
            InstallError::Refused(refusal) => write!(formatter, "refused by primary module: {refusal}"),
            InstallError::AsyncUnsupported => write!(formatter, "no async executor on this platform"),
            InstallError::AsyncWorkerUnavailable => write!(formatter, "no worker could be started for the async binding"),
            InstallError::BoundedUnsupported => write!(formatter, "no bounded executor on this platform"),
            InstallError::ZeroBudget => write!(formatter, "bounded budget of zero"),
            InstallError::UnknownField { field, field_count } => {
                write!(formatter, "guard on field {field}, but the arguments have {field_count} fields")
            }
            InstallError::EmptyRange { field } => write!(formatter, "empty range guard on field {field}"),
            InstallError::TooManyBindings => write!(formatter, "too many bindings on this event"),
            InstallError::UnknownBinding(id) => write!(formatter, "no binding {id}"),
        }
    }
}

/// Why an uninstallation, a re-enabling or a settings change failed. Nothing was changed
/// when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateError {
    /// No event with this id is registered with the dispatcher.
    UnknownEvent(EventId),
    /// The binding is not installed.
    UnknownBinding(BindingId),
}

impl fmt::Display for UpdateError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::UnknownEvent(id) => write!(formatter, "no event {id} is registered"),
            UpdateError::UnknownBinding(id) => write!(formatter, "no binding {id}"),
        }
    }
}

impl fmt::Display for UnknownHart {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "hart {} is beyond the dispatcher's hart count", self.0)
    }
}

/// Why registering an event with the dispatcher failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// An event with this id is already registered.
    DuplicateId(EventId),
    /// An event with this name is already registered.
    DuplicateName(&'static str),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::DuplicateId(id) => write!(formatter, "event id {id} already registered"),
            RegisterError::DuplicateName(name) => write!(formatter, "event {name} already registered"),
        }
    }
}
