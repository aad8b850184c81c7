//! `spindle-process`: the pure, host-testable half of user processes.
//!
//! The kernel's `proc` and `syscall` modules own page tables, frames and strands; what can
//! be decided without touching hardware lives here and is unit-tested on the host:
//!
//! - [`layout`]: where a process's image, anonymous mappings and stack live in its Sv39
//!   address space, and which top-level page-table slots belong to user space;
//! - [`executable`]: validation of a static RISC-V ELF executable before a byte is
//!   copied (file bounds, W^X, segments inside the image region and on disjoint pages,
//!   entry point in an executable segment);
//! - [`range`]: the first check of every user pointer/length pair a system call receives
//!   (inside the user region, no wrap-around, under the call's limit) — the kernel then
//!   checks each page against the page table;
//! - [`regions`]: the bookkeeping of a process's mapped regions (image, stack, anonymous
//!   mappings with guard pages), including placement and the rules of `unmap` and `protect`.
//!
//! Limitations: static executables only (no `PT_INTERP`, `PT_DYNAMIC`, `PT_TLS`);
//! `PT_GNU_RELRO` is not honoured (the pages stay writable, as nothing relocates them).

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod executable;
pub mod layout;
pub mod range;
pub mod regions;

pub use executable::{Executable, ExecutableError, LoadSegment, SegmentPermissions};
pub use range::{PageAccess, user_range};
pub use regions::{InsertRefusal, Protection, Region, RegionKind, Regions};
