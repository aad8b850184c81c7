//! Page faults: their classification into the translation events, the record an event
//! carries, the check of a handler's answer, and the default outcome.
//!
//! # Classification ([`classify`])
//!
//! From the faulting address, the access kind, the region table and the leaf PTE the
//! kernel found (if any), in this order:
//!
//! 1. not a user address, or in no region → [`FaultClass::BadAddress`];
//! 2. the page's effective protection does not allow the access →
//!    [`FaultClass::ProtectionFault`] (whether or not the page is present: a protected
//!    page traps, as Appel & Li's `prot1` requires);
//! 3. the PTE is not present → [`FaultClass::PageNotPresent`];
//! 4. the PTE does not allow the access (narrower than the protection: a lazy protection
//!    change, a copy-on-write page) → [`FaultClass::ProtectionFault`];
//! 5. otherwise → [`FaultClass::Spurious`]: no event, the kernel retries the access (a
//!    stale TLB entry, or an accessed/dirty bit the hardware wants set in software).
//!
//! # Events and answers
//!
//! A fault in a region with a trap handler ([`crate::region::Trap`]) raises
//! `vm.PageNotPresent`, `vm.ProtectionFault` or `vm.BadAddress` with a
//! [`TranslationRecord`] (address space, address, access kind, region — the guard-able
//! fields). A `BadAddress` fault has no region, so no handler: it takes the default at
//! once. The handler answers an [`Answer`]; [`check_answer`] is the rule; a refused
//! answer, or none, takes the default ([`default_outcome`]): demand-zero for a missing
//! page of an anonymous region, a fill from the image for a missing page of a file-backed
//! one, otherwise the process is killed with a [`KillCause`].

use core::fmt;

use spindle_service_frames::{FrameError, FrameInfo, FrameTable, Owner};

use crate::primitives::{CheckedChange, PrimitiveError};
use crate::region::{PAGE_SIZE, Protection, RegionId, RegionKind, RegionTable, Trap, is_user_address};

/// Where [`check_answer`] looks up a `Map` answer's frame: the frame table itself, or a
/// [`FrameLookup`] that reaches it only when asked (the kernel then takes the table's lock
/// for a `Map` answer alone).
pub trait Frames {
    /// What the frame table records for `frame`.
    fn info(&self, frame: u64) -> Result<FrameInfo, FrameError>;
}

impl Frames for FrameTable {
    fn info(&self, frame: u64) -> Result<FrameInfo, FrameError> {
        FrameTable::info(self, frame)
    }
}

/// A function that looks a frame up in the frame table, as [`Frames`].
pub struct FrameLookup<F>(pub F);

impl<F: Fn(u64) -> Result<FrameInfo, FrameError>> Frames for FrameLookup<F> {
    fn info(&self, frame: u64) -> Result<FrameInfo, FrameError> {
        (self.0)(frame)
    }
}

/// The kind of access that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// A load.
    Read,
    /// A store (or an atomic).
    Write,
    /// An instruction fetch.
    Execute,
}

impl AccessKind {
    /// Every access kind, in the order of its encoding.
    pub const ALL: [AccessKind; 3] = [AccessKind::Read, AccessKind::Write, AccessKind::Execute];

    /// The kind as a record field.
    pub fn encode(self) -> u64 {
        self as u64
    }

    /// The inverse of [`AccessKind::encode`].
    pub fn decode(raw: u64) -> Option<AccessKind> {
        usize::try_from(raw).ok().and_then(|index| AccessKind::ALL.get(index)).copied()
    }

    /// Whether `protection` allows this access.
    pub fn permitted_by(self, protection: Protection) -> bool {
        match self {
            AccessKind::Read => protection.readable(),
            AccessKind::Write => protection.writable(),
            AccessKind::Execute => protection.executable(),
        }
    }
}

/// The bits of the leaf PTE the kernel found for the faulting page (all false if there is
/// none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pte {
    /// Valid.
    pub present: bool,
    /// Readable.
    pub readable: bool,
    /// Writable.
    pub writable: bool,
    /// Executable.
    pub executable: bool,
    /// Accessed.
    pub accessed: bool,
    /// Dirty.
    pub dirty: bool,
}

impl Pte {
    /// No PTE.
    pub const ABSENT: Pte = Pte { present: false, readable: false, writable: false, executable: false, accessed: false, dirty: false };

    /// A present PTE with `protection` and the accessed and dirty bits set.
    pub fn mapped(protection: Protection) -> Pte {
        Pte {
            present: true,
            readable: protection.readable(),
            writable: protection.writable(),
            executable: protection.executable(),
            accessed: true,
            dirty: true,
        }
    }

    /// Whether the leaf is present and allows `access`.
    pub fn allows(self, access: AccessKind) -> bool {
        self.present && access.permitted_by(self.protection())
    }

    fn protection(self) -> Protection {
        let bits = u64::from(self.readable) | (u64::from(self.writable) << 1) | (u64::from(self.executable) << 2);
        Protection::from_bits(bits).unwrap_or(Protection::NONE)
    }
}

/// What a fault is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultClass {
    /// The page is allowed but has no frame: `vm.PageNotPresent`.
    PageNotPresent,
    /// The access is not allowed: `vm.ProtectionFault`.
    ProtectionFault,
    /// No region (or not a user address): `vm.BadAddress`.
    BadAddress,
    /// The PTE already allows the access: no event, retry.
    Spurious,
}

impl FaultClass {
    /// The event raised for it (none for [`FaultClass::Spurious`]).
    pub fn event_name(self) -> Option<&'static str> {
        match self {
            FaultClass::PageNotPresent => Some("vm.PageNotPresent"),
            FaultClass::ProtectionFault => Some("vm.ProtectionFault"),
            FaultClass::BadAddress => Some("vm.BadAddress"),
            FaultClass::Spurious => None,
        }
    }
}

/// A classified fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What it is.
    pub class: FaultClass,
    /// The address space.
    pub space: u64,
    /// The faulting address.
    pub address: u64,
    /// Its page.
    pub page: u64,
    /// The access.
    pub access: AccessKind,
    /// The region, unless [`FaultClass::BadAddress`].
    pub region: Option<RegionId>,
    /// What backs the region.
    pub kind: Option<RegionKind>,
    /// The region's handler, if any (who the event goes to).
    pub trap: Option<Trap>,
    /// Whether the PTE was present.
    pub present: bool,
    /// The page's protection when classified (its own, else its region's); `None` outside
    /// every region.
    pub protection: Option<Protection>,
}

/// The record a translation event carries: plain `u64`s the kernel copies into the
/// event's `#[repr(C)]` record. Every field can be guarded on, so a handler sees only the
/// faults of its own address space and region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TranslationRecord {
    /// The address space's id.
    pub space: u64,
    /// The faulting address.
    pub address: u64,
    /// [`AccessKind::encode`].
    pub access: u64,
    /// The region's id; 0 for none ([`FaultClass::BadAddress`]).
    pub region: u64,
}

impl Fault {
    /// The event record.
    pub fn record(&self) -> TranslationRecord {
        TranslationRecord { space: self.space, address: self.address, access: self.access.encode(), region: self.region.unwrap_or(0) }
    }

    /// Whether an event is raised for it: a real fault in a region with a handler.
    pub fn raises_event(&self) -> bool {
        self.class != FaultClass::Spurious && self.trap.is_some()
    }
}

/// Classifies a fault at `address` (see the module documentation).
pub fn classify(table: &RegionTable, address: u64, access: AccessKind, pte: Pte) -> Fault {
    let page = address - address % PAGE_SIZE;
    let region = if is_user_address(address) { table.containing(address) } else { None };
    let mut fault = Fault {
        class: FaultClass::BadAddress,
        space: table.space(),
        address,
        page,
        access,
        region: region.map(|region| region.id),
        kind: region.map(|region| region.kind),
        trap: region.and_then(|region| region.trap),
        present: pte.present,
        protection: None,
    };
    let Some(protection) = region.map(|region| table.page_protection.get(page).unwrap_or(region.protection)) else { return fault };
    fault.protection = Some(protection);
    fault.class = if !access.permitted_by(protection) {
        FaultClass::ProtectionFault
    } else if !pte.present {
        FaultClass::PageNotPresent
    } else if !access.permitted_by(pte.protection()) {
        FaultClass::ProtectionFault
    } else {
        FaultClass::Spurious
    };
    fault
}

/// A handler's answer to a translation event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Map `frame` at `page` with `protection`.
    Map {
        /// The virtual page.
        page: u64,
        /// The frame (one the handler's owner holds).
        frame: u64,
        /// Its protection.
        protection: Protection,
    },
    /// Change the protection of `count` pages from `page`.
    Protect {
        /// The first page.
        page: u64,
        /// Pages.
        count: u64,
        /// The new protection.
        protection: Protection,
    },
    /// Do nothing: the default decides.
    Decline,
}

/// Why a process is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillCause {
    /// The address is in no region.
    BadAddress,
    /// The access is not allowed and no handler allowed it.
    ProtectionViolation,
    /// A page of a managed region is missing and no handler supplied it.
    NoPager,
}

impl fmt::Display for KillCause {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            KillCause::BadAddress => "access to an address in no region",
            KillCause::ProtectionViolation => "access not allowed by the page's protection",
            KillCause::NoPager => "page of a managed region missing and no handler supplied it",
        })
    }
}

/// What the kernel does about a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Map `frame` at `page` with `protection`, then resume.
    Map {
        /// The virtual page.
        page: u64,
        /// The frame.
        frame: u64,
        /// Its protection.
        protection: Protection,
    },
    /// Apply the change (checked; record it with [`RegionTable::apply_checked`]), then
    /// resume.
    Protect(CheckedChange),
    /// Allocate a zeroed frame for the address space, map it at `page` with `protection`,
    /// resume.
    DemandZero {
        /// The virtual page.
        page: u64,
        /// Its protection (the page's effective protection).
        protection: Protection,
    },
    /// Fill a frame for the address space from the region's backing (a program's image),
    /// map it at `page` with `protection`, resume.
    Fill {
        /// The virtual page.
        page: u64,
        /// Its protection (the region's).
        protection: Protection,
    },
    /// Resume at once (a spurious fault).
    Retry,
    /// Kill the process.
    Kill(KillCause),
}

/// Why a handler's answer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerRejection {
    /// The answer maps or protects although the fault has no region.
    NoRegion,
    /// The page is not a user address (a kernel address).
    KernelAddress,
    /// The page is not page-aligned.
    Misaligned,
    /// The page lies outside the faulting region.
    OutsideRegion,
    /// The answer would leave the faulting access faulting (a different page, or a
    /// protection that does not allow the access): the handler would loop.
    Unresolved,
    /// `Map` for a page that is present (its frame would be lost).
    PagePresent,
    /// The frame is not in the frame table.
    NotAFrame,
    /// The frame is the kernel's.
    KernelFrame,
    /// The frame is not held by the handler's owner (someone else's, or free).
    NotGranted,
    /// The frame is already mapped somewhere.
    FrameMapped,
    /// The protection allows more than the region's.
    AboveRegion,
    /// A protection change of 0 or too many pages, or past the region's end.
    BadRange,
}

impl AnswerRejection {
    /// The reason as the dispatcher records it.
    pub fn reason(self) -> &'static str {
        match self {
            AnswerRejection::NoRegion => "the fault has no region to map or protect",
            AnswerRejection::KernelAddress => "the page is not a user address",
            AnswerRejection::Misaligned => "the page is not page-aligned",
            AnswerRejection::OutsideRegion => "the page is outside the faulting region",
            AnswerRejection::Unresolved => "the answer does not resolve the faulting access",
            AnswerRejection::PagePresent => "the page is already present",
            AnswerRejection::NotAFrame => "the frame is not in the frame table",
            AnswerRejection::KernelFrame => "the frame belongs to the kernel",
            AnswerRejection::NotGranted => "the frame is not held by the handler's owner",
            AnswerRejection::FrameMapped => "the frame is already mapped",
            AnswerRejection::AboveRegion => "the protection allows more than the region's",
            AnswerRejection::BadRange => "the page range is empty, too long or crosses the region's end",
        }
    }
}

impl fmt::Display for AnswerRejection {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.reason())
    }
}

impl core::error::Error for AnswerRejection {}

/// The default outcome of `fault` (no answer, or a refused one).
pub fn default_outcome(fault: &Fault) -> Outcome {
    match (fault.class, fault.kind) {
        (FaultClass::Spurious, _) => Outcome::Retry,
        (FaultClass::BadAddress, _) | (_, None) => Outcome::Kill(KillCause::BadAddress),
        (FaultClass::ProtectionFault, _) => Outcome::Kill(KillCause::ProtectionViolation),
        (FaultClass::PageNotPresent, Some(RegionKind::Anonymous)) => {
            Outcome::DemandZero { page: fault.page, protection: fault.protection.unwrap_or(Protection::NONE) }
        }
        (FaultClass::PageNotPresent, Some(RegionKind::Managed)) => Outcome::Kill(KillCause::NoPager),
        (FaultClass::PageNotPresent, Some(RegionKind::FileBacked)) => {
            Outcome::Fill { page: fault.page, protection: fault.protection.unwrap_or(Protection::NONE) }
        }
    }
}

/// Checks a handler's answer to `fault`; `handler` is the owner the handler runs for (its
/// [`Trap::owner`]). Returns the outcome the answer asks for.
///
/// A `Map` must name a page-aligned user page inside the faulting region — the faulting
/// page, not present, with a protection within the region's that allows the access —
/// and a frame `handler` holds that is not mapped. The frame is mapped with the
/// answer's protection capped at the page's own ([`Fault::protection`]: `prot1` may
/// have narrowed it below the region's); the capped protection must still allow the
/// access. A `Protect` must be a valid
/// `protN` of the region ([`RegionTable::check_protect`]) that covers the faulting page
/// and allows the access. `Decline` is the default outcome.
///
/// Errors: an [`AnswerRejection`] naming the first rule broken.
pub fn check_answer(table: &RegionTable, frames: &impl Frames, fault: &Fault, handler: Owner, answer: Answer) -> Result<Outcome, AnswerRejection> {
    let (page, protection) = match answer {
        Answer::Decline => return Ok(default_outcome(fault)),
        Answer::Map { page, protection, .. } | Answer::Protect { page, protection, .. } => (page, protection),
    };
    let region = fault.region.and_then(|id| table.region(id)).ok_or(AnswerRejection::NoRegion)?;
    if !is_user_address(page) {
        return Err(AnswerRejection::KernelAddress);
    }
    if !page.is_multiple_of(PAGE_SIZE) {
        return Err(AnswerRejection::Misaligned);
    }
    if !region.contains(page) {
        return Err(AnswerRejection::OutsideRegion);
    }
    if !protection.within(region.protection) {
        return Err(AnswerRejection::AboveRegion);
    }
    match answer {
        Answer::Map { frame, .. } => {
            // A page narrowed by `prot1`/`protN` before its first touch keeps its own
            // protection: the frame is mapped with no more than the page's, so a later
            // access the page does not allow still faults.
            let protection = fault.protection.map_or(protection, |own| protection.capped_at(own));
            if page != fault.page || !fault.access.permitted_by(protection) {
                return Err(AnswerRejection::Unresolved);
            }
            if fault.present {
                return Err(AnswerRejection::PagePresent);
            }
            let info = frames.info(frame).map_err(|_| AnswerRejection::NotAFrame)?;
            if info.owner == Owner::Kernel {
                return Err(AnswerRejection::KernelFrame);
            }
            if info.owner != handler {
                return Err(AnswerRejection::NotGranted);
            }
            if info.mapped.is_some() {
                return Err(AnswerRejection::FrameMapped);
            }
            Ok(Outcome::Map { page, frame, protection })
        }
        Answer::Protect { count, .. } => {
            let checked = table.check_change_in(region, page, count, protection).map_err(|error| match error {
                PrimitiveError::AboveRegion(_) => AnswerRejection::AboveRegion,
                _ => AnswerRejection::BadRange,
            })?;
            let change = checked.change();
            let covers = fault.page >= change.start && (fault.page - change.start) / PAGE_SIZE < change.count;
            if !covers || !fault.access.permitted_by(protection) {
                return Err(AnswerRejection::Unresolved);
            }
            Ok(Outcome::Protect(checked))
        }
        Answer::Decline => Ok(default_outcome(fault)),
    }
}

/// The outcome of a fault after the fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// What the kernel does.
    pub outcome: Outcome,
    /// The handler's answer, if one was refused (the kernel counts it).
    pub rejected: Option<AnswerRejection>,
}

/// A fault end to end: the handler's answer (`None`: no handler, or it failed) if it
/// passes [`check_answer`], else the default. Without a trap on the region any answer
/// is ignored.
pub fn resolve(table: &RegionTable, frames: &impl Frames, fault: &Fault, answer: Option<Answer>) -> Resolution {
    let default = || Resolution { outcome: default_outcome(fault), rejected: None };
    let (Some(trap), Some(answer)) = (fault.trap, answer) else { return default() };
    if fault.class == FaultClass::Spurious {
        return default();
    }
    match check_answer(table, frames, fault, trap.owner, answer) {
        Ok(outcome) => Resolution { outcome, rejected: None },
        Err(rejection) => Resolution { rejected: Some(rejection), ..default() },
    }
}
