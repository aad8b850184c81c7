//! The errors of domain creation, combination, resolution, typed access and naming.

use alloc::string::String;
use core::fmt;

use spindle_abi::Fingerprint;

use crate::domain::DomainName;
use crate::name_server::{PrincipalId, Refusal};

/// Formats a fingerprint the same way everywhere.
struct Hex(Fingerprint);

impl fmt::Display for Hex {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{:#018x}", self.0.0)
    }
}

/// Why a domain could not be created or combined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainError {
    /// `Create` was given two symbols with the same name.
    DuplicateSymbol {
        /// The domain being created.
        domain: DomainName,
        /// The repeated symbol name.
        name: String,
    },
    /// `Combine` found the same name exported differently (different fingerprint or
    /// address) by two of its inputs. Identical exports of one symbol merge silently.
    CombineConflict {
        /// The conflicting symbol name.
        name: String,
        /// The input domain whose export was seen first.
        first: DomainName,
        /// The input domain whose export conflicts with it.
        second: DomainName,
    },
}

impl fmt::Display for DomainError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainError::DuplicateSymbol { domain, name } => {
                write!(formatter, "domain `{domain}` exports `{name}` twice")
            }
            DomainError::CombineConflict {
                name,
                first,
                second,
            } => write!(
                formatter,
                "cannot combine: `{name}` is exported differently by `{first}` and `{second}`"
            ),
        }
    }
}

impl core::error::Error for DomainError {}

/// Why an importer's imports could not be resolved against a domain. Either way the
/// importer must not be linked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolveError {
    /// The domain exports no symbol of that name.
    UnknownSymbol {
        /// The missing symbol.
        name: String,
        /// The domain searched.
        domain: DomainName,
    },
    /// The domain exports the name with a different signature.
    FingerprintMismatch {
        /// The symbol.
        name: String,
        /// The domain searched.
        domain: DomainName,
        /// The fingerprint the importer was built against.
        expected: Fingerprint,
        /// The fingerprint the domain exports.
        found: Fingerprint,
    },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::UnknownSymbol { name, domain } => {
                write!(
                    formatter,
                    "unknown symbol `{name}`: domain `{domain}` does not export it"
                )
            }
            ResolveError::FingerprintMismatch {
                name,
                domain,
                expected,
                found,
            } => write!(
                formatter,
                "fingerprint mismatch for `{name}` in domain `{domain}`: importer expects {}, domain exports {}",
                Hex(*expected),
                Hex(*found)
            ),
        }
    }
}

impl core::error::Error for ResolveError {}

/// Why a symbol could not be used as a typed Rust function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymbolError {
    /// The requested signature text does not match the export's.
    FingerprintMismatch {
        /// The symbol.
        name: String,
        /// The fingerprint of the requested name and signature.
        expected: Fingerprint,
        /// The export's fingerprint.
        found: Fingerprint,
    },
    /// The symbol is known only by address.
    NotTyped {
        /// The symbol.
        name: String,
    },
    /// The signature text matched but the requested Rust type is not the function's.
    TypeMismatch {
        /// The symbol.
        name: String,
    },
}

impl fmt::Display for SymbolError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymbolError::FingerprintMismatch {
                name,
                expected,
                found,
            } => write!(
                formatter,
                "fingerprint mismatch for `{name}`: requested {}, exported {}",
                Hex(*expected),
                Hex(*found)
            ),
            SymbolError::NotTyped { name } => {
                write!(formatter, "symbol `{name}` is known only by address")
            }
            SymbolError::TypeMismatch { name } => {
                write!(
                    formatter,
                    "symbol `{name}` is not of the requested Rust type"
                )
            }
        }
    }
}

impl core::error::Error for SymbolError {}

/// Why the name server refused a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameServerError {
    /// A domain of that name is already registered.
    AlreadyRegistered {
        /// The name.
        domain: DomainName,
    },
    /// No domain of that name is registered.
    NotRegistered {
        /// The name.
        domain: DomainName,
    },
    /// The domain's authorizer refused the principal.
    Refused {
        /// The domain asked for.
        domain: DomainName,
        /// Who asked.
        principal: PrincipalId,
        /// The authorizer's reason.
        refusal: Refusal,
    },
    /// The domains granted could not be combined into one.
    Combine(DomainError),
}

impl fmt::Display for NameServerError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameServerError::AlreadyRegistered { domain } => {
                write!(formatter, "domain `{domain}` is already registered")
            }
            NameServerError::NotRegistered { domain } => {
                write!(formatter, "no domain `{domain}` is registered")
            }
            NameServerError::Refused {
                domain,
                principal,
                refusal,
            } => {
                write!(
                    formatter,
                    "{principal} refused access to domain `{domain}`: {refusal}"
                )
            }
            NameServerError::Combine(error) => write!(formatter, "{error}"),
        }
    }
}

impl core::error::Error for NameServerError {}

impl From<DomainError> for NameServerError {
    fn from(error: DomainError) -> NameServerError {
        NameServerError::Combine(error)
    }
}
