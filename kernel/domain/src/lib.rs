//! `spindle-domain`: domains (named, typed export tables of kernel functions) and the
//! name server through which extensions find them.
//!
//! This is SPIN's `Domain` interface in Rust:
//!
//! - [`Domain::create`] builds a domain from [`Symbol`]s (duplicate names rejected);
//! - [`Domain::resolve`] / [`resolve`] resolves an importer's [`Import`]s (name plus
//!   fingerprint) against a domain, failing with the symbol's name when it is missing or
//!   its fingerprint differs, so a mismatched importer cannot link;
//! - [`Domain::combine`] makes the union of several domains (conflicts rejected);
//! - the [`NameServer`] registers domains with an [`Authorizer`] and hands them out only
//!   to [`Principal`]s the authorizer admits; [`NameServer::abi_fingerprint`] summarises
//!   every exported signature in one value, checked when an extension is loaded.
//!
//! Design: a symbol's fingerprint is `fingerprint_of(name ++ signature)`, the signature
//! being the stringified Rust fn type. [`export!`] derives the text from the same tokens it
//! type-checks the function against, so the text cannot lie; [`import!`] computes the
//! importer's fingerprint in `const` context; [`typed_fn!`] gets a callable fn pointer
//! back, checked by fingerprint and by Rust type (`core::any`, no `unsafe`). Domains are
//! immutable once built (share them as `Arc<Domain>`); the name server is internally
//! locked. Everything is `Send + Sync`.
//!
//! ```
//! use spindle_capability::CapabilityIssuer;
//! use spindle_domain::{Domain, NameServer, Principal, export, import, require_grant, typed_fn};
//!
//! fn add(left: u64, right: u64) -> u64 { left + right }
//!
//! let names = NameServer::new();
//! names.register(Domain::create("arith", [export!("add", add, fn(u64, u64) -> u64)]).unwrap(), require_grant).unwrap();
//!
//! // SAFETY: trust marker only; this example plays the trusted kernel.
//! let issuer = unsafe { CapabilityIssuer::new() };
//! let domain = names.lookup(&Principal::kernel(&issuer), "arith").unwrap();
//! let symbols = domain.resolve(&[import!("add", fn(u64, u64) -> u64)]).unwrap();
//! let add_function = typed_fn!(symbols[0], fn(u64, u64) -> u64).unwrap();
//! assert_eq!(add_function(2, 3), 5);
//! ```
//!
//! Limitations: fingerprints hash the *text* of a type, so two spellings of one type
//! (`u64` vs `core::primitive::u64`, a type alias) differ, and a changed struct behind an
//! unchanged name does not; the `abi/` declarations are meant to be the one spelling.
//! FNV-1a guards against mistakes, not attackers (artifact signatures do that). Resolution
//! stops at the first failing import rather than listing all of them. Domains cannot be
//! revoked from importers that already resolved against them.

#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod domain;
pub mod error;
pub mod name_server;
pub mod symbol;

pub use domain::{Domain, DomainName, resolve};
pub use error::{DomainError, NameServerError, ResolveError, SymbolError};
pub use name_server::{
    Authorizer, DomainGrant, NameServer, Principal, PrincipalId, Refusal, abi_fingerprint,
    allow_all, kernel_only, require_grant,
};
pub use symbol::{Import, Symbol, symbol_fingerprint};

/// Items the exported macros need; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use spindle_abi::fingerprint_of;
}
