//! `spindle-loader`: the `.kext` extension container and the loader for native (RISC-V ELF
//! shared-object) extensions — the pure, host-testable half of loading an extension.
//!
//! Design: loading is a pipeline of checks, each stage accepting only what the previous
//! one vouched for.
//!
//! 1. [`open`] parses the container ([`Container::parse`]: magic, version, lengths),
//!    verifies its Ed25519 signature against the builder's key (mandatory for
//!    [`Kind::Native`]), checks the ABI fingerprint, and parses the [`Manifest`], giving
//!    a [`VerifiedExtension`].
//! 2. [`ElfObject::parse`] validates the payload as an ELF64 little-endian RISC-V shared
//!    object: segments, dynamic table, dynamic symbols and every relocation are checked
//!    up front against a caller-given size limit.
//! 3. [`load_into`] copies the segments into a caller-provided buffer, zero-fills bss,
//!    resolves imports through the caller's resolver (which enforces domain grants) and
//!    applies `R_RISCV_RELATIVE`, `R_RISCV_64` and `R_RISCV_JUMP_SLOT`, giving a
//!    [`LoadedImage`] with page-granular W^X [`Mapping`]s and the exported symbols.
//!
//! The kernel then maps the buffer (it owns the page tables and `fence.i`); this crate
//! has no `unsafe` and never executes or maps anything. The format is documented in
//! `docs/kext-format.md`.
//!
//! Features: none by default (what the kernel uses: `no_std` + `alloc`). `pack` adds the
//! trusted builder's side for `xtask` — [`pack::pack`], signing, key generation — using
//! the same layout constants and signed-message function as the reader.
//!
//! Limitations: no lazy binding (`JUMP_SLOT`s are bound at load), no symbol
//! interposition, no TLS, IFUNC, `DT_NEEDED` dependencies, initialisers/finalisers,
//! `DT_RELR` or `DT_REL`; undefined weak symbols must be resolvable like any import;
//! section headers and `e_flags` (float ABI) are not checked; relocated *values* are not
//! checked to point into the image (the signature vouches for the code that uses them).
//! Signature verification is only as strong as the key handling around it, and a signed
//! native extension is trusted code: it is contained only by the language's safety.

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod bundle;
pub mod container;
pub mod elf;
pub mod load;
pub mod manifest;
#[cfg(feature = "pack")]
pub mod pack;
pub mod relocation;

pub use container::{Container, ContainerError, Kind, Policy, VerifiedExtension, artifact_digest, open};
pub use elf::{
    Binding, Definition, DynamicSymbol, ElfError, ElfObject, Mapping, PAGE_SIZE, Permissions,
    Relocation, Segment, SymbolKind,
};
pub use load::{Export, LoadError, LoadedImage, SymbolLookupError, load_into};
pub use manifest::{Manifest, ManifestError};
pub use relocation::RelocationKind;

/// Largest image (the span of its loadable segments) a native extension may have: its
/// 16 MiB slot in the kernel also holds the largest arena (8 MiB) and two guard pages. The
/// kernel's loader and the trusted builder check the same limit.
pub const MAX_NATIVE_IMAGE_SIZE: u64 = 16 * 1024 * 1024 - 8 * 1024 * 1024 - 2 * 4096;
