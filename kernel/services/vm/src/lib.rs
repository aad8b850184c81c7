//! `spindle-service-vm`: the policy half of the translation service — user regions, the
//! classification of page faults into translation events, the records those events carry
//! and the checks of a handler's answer, Appel & Li's primitives, and the swap-slot
//! allocator for paging to disk.
//!
//! A core service is split in two (docs/architecture.md): this crate holds the decisions —
//! plain data and rules, `no_std`, no `unsafe`, tested on the host — and a kernel file
//! wires them to the trap path, the page tables and the dispatcher: `kernel/src/services/vm.rs`
//! (the events, the frame table, pagers' grants) and `kernel/src/proc/address_space.rs`
//! (the region table of each address space, fault handling, demand-zero, the Appel & Li
//! system calls); see docs/virtual-memory.md for what is built and what is not. The parts:
//!
//! - [`region`]: [`RegionTable`], one per address space: regions (start, length,
//!   [`Protection`], [`RegionKind`] — anonymous, managed by an extension, file-backed
//!   later), the [`Trap`] that receives a region's faults, and per-page protection.
//! - [`fault`]: [`classify`] — `PageNotPresent`, `ProtectionFault`, `BadAddress` (or a
//!   spurious fault) from the address, the access kind, the regions and the PTE; the
//!   [`TranslationRecord`] an event carries (address space, address, access kind,
//!   region: the guard-able fields); [`check_answer`] for a handler's [`Answer`] (map a
//!   frame its owner holds, change protection, decline) and [`default_outcome`]
//!   (demand-zero for anonymous memory, otherwise kill with a [`KillCause`]).
//! - [`primitives`]: `dirty`, `prot1`, `protN`, `unprotN`, `trap` with their argument
//!   checks, as operations on the region table that return the [`ProtChange`] the kernel
//!   applies to the page table.
//! - [`runs`]: [`ProtectionRuns`], the pages whose protection differs from their region's,
//!   as runs (one per `protN` range) in a sorted list.
//! - [`swap`]: [`SwapArea`], a bitmap of 4 KiB slots on the disk.
//!
//! A fault in a region a handler manages:
//!
//! ```
//! use spindle_service_frames::{FrameTable, Owner};
//! use spindle_service_vm::*;
//!
//! let mut regions = RegionTable::new(7);
//! let heap = regions.add(0x14_0000_0000, 16 * PAGE_SIZE, Protection::READ_WRITE, RegionKind::Managed).unwrap();
//! let pager = Owner::ExtensionArena(3);
//! regions.trap(heap, Trap { owner: pager, handler: 1 }).unwrap();
//! let mut frames = FrameTable::new(0x8_0000, 64).unwrap();
//! let frame = frames.allocate(pager).unwrap();
//!
//! let fault = classify(&regions, 0x14_0000_1008, AccessKind::Write, Pte::ABSENT);
//! assert_eq!(fault.class, FaultClass::PageNotPresent);
//! assert_eq!(fault.record(), TranslationRecord { space: 7, address: 0x14_0000_1008, access: 1, region: heap });
//! let answer = Answer::Map { page: 0x14_0000_1000, frame, protection: Protection::READ_WRITE };
//! let resolution = resolve(&regions, &frames, &fault, Some(answer));
//! assert_eq!(resolution.outcome, Outcome::Map { page: 0x14_0000_1000, frame, protection: Protection::READ_WRITE });
//! // Someone else's frame is refused; the default for a managed region kills.
//! let stranger = frames.allocate(Owner::AddressSpace(9)).unwrap();
//! let bad = resolve(&regions, &frames, &fault, Some(Answer::Map { page: 0x14_0000_1000, frame: stranger, protection: Protection::READ_WRITE }));
//! assert_eq!(bad.rejected, Some(AnswerRejection::NotGranted));
//! assert_eq!(bad.outcome, Outcome::Kill(KillCause::NoPager));
//! ```
//!
//! Known limitations: a protection range lies inside one region; per-page protections are
//! kept in a `BTreeMap` entry per page (bounded by [`MAX_PROT_PAGES`] per call, not in
//! total); file-backed regions exist as a kind only.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod fault;
pub mod pagemap;
pub mod primitives;
pub mod region;
pub mod runs;
pub mod swap;

#[cfg(test)]
mod tests;

pub use fault::{
    AccessKind, Answer, AnswerRejection, Fault, FaultClass, FrameLookup, Frames, KillCause, Outcome, Pte, Resolution, TranslationRecord,
    check_answer, classify, default_outcome, resolve,
};
pub use pagemap::PageMap;
pub use primitives::{CheckedChange, MAX_PROT_PAGES, PrimitiveError, ProtChange};
pub use region::{MAX_REGIONS, PAGE_SIZE, Protection, Region, RegionError, RegionId, RegionKind, RegionTable, Trap, USER_END, USER_START, is_user_address};
pub use runs::{ProtectionRuns, Run};
pub use swap::{MAX_SLOTS, SECTORS_PER_SLOT, SLOT_BYTES, Slot, SwapArea, SwapError};
