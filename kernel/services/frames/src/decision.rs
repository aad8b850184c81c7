//! The two decision points of the physical-memory service — `mm.Allocate` and
//! `mm.Reclaim` on real frames — as pure checks of an answer against the frame table, with
//! the default answers, plus the service's exported state.
//!
//! # `mm.Allocate`
//!
//! The question is an [`AllocateRequest`] (owner, count, purpose). A handler answers
//! [`AllocateAnswer::Grant`] or [`AllocateAnswer::Refuse`]; without one the default
//! ([`default_allocate`]) grants what fits the owner's limit and the free frames. A grant
//! must fit as well — a handler may refuse more, never grant more than the kernel allows
//! ([`check_allocate_answer`]); and the kernel's own allocations cannot be refused.
//!
//! # `mm.Reclaim`
//!
//! The kernel offers a candidate (the clock's first, [`FrameTable::next_victims`]) and its
//! owner ([`reclaim_question`]). The owner's extension may answer the candidate or
//! volunteer another page *of its own*: owned by the same owner, resident (not free), not
//! pinned, not the kernel's ([`check_reclaim_answer`]). The default is the candidate.
//!
//! A refused answer is counted by the kernel and the default is used instead
//! ([`decide_allocate`], [`decide_reclaim`]).

use core::fmt;

use crate::Rejection;
use crate::owners::{FrameError, FrameTable, Owner, check_owner};

/// Most frames one `mm.Allocate` may ask for.
pub const MAX_ALLOCATE: u64 = 512;

/// What an allocation is for (an attribute a policy may look at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A page of a user address space (anonymous memory, demand-zero, swap-in).
    UserPage,
    /// A page-table page.
    PageTable,
    /// A page of an extension's arena.
    ArenaPage,
    /// A buffer-cache buffer.
    CacheBuffer,
    /// Kernel data (heap, stacks).
    KernelData,
}

impl Purpose {
    /// Every purpose, in the order of its encoding.
    pub const ALL: [Purpose; 5] = [Purpose::UserPage, Purpose::PageTable, Purpose::ArenaPage, Purpose::CacheBuffer, Purpose::KernelData];

    /// The purpose as a record field.
    pub fn encode(self) -> u64 {
        self as u64
    }

    /// The inverse of [`Purpose::encode`].
    pub fn decode(raw: u64) -> Option<Purpose> {
        usize::try_from(raw).ok().and_then(|index| Purpose::ALL.get(index)).copied()
    }
}

/// The question `mm.Allocate` asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocateRequest {
    /// Who will hold the frames.
    pub owner: Owner,
    /// How many frames (1 to [`MAX_ALLOCATE`]).
    pub count: u64,
    /// What for.
    pub purpose: Purpose,
}

/// A handler's answer to `mm.Allocate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocateAnswer {
    /// Give the frames.
    Grant,
    /// Do not.
    Refuse,
}

/// Checks the request itself before it is raised: a real owner, 1 to [`MAX_ALLOCATE`]
/// frames.
///
/// Errors: [`FrameError::NoOwner`], [`FrameError::OwnerIdTooLarge`],
/// [`FrameError::BadCount`].
pub fn check_request(request: &AllocateRequest) -> Result<(), FrameError> {
    check_owner(request.owner)?;
    if request.count == 0 || request.count > MAX_ALLOCATE {
        return Err(FrameError::BadCount(request.count));
    }
    Ok(())
}

/// The default answer: grant what fits the owner's limit and the free frames, else refuse
/// with the reason.
///
/// Errors: as [`check_request`] and [`FrameTable::check_allocation`].
pub fn default_allocate(table: &FrameTable, request: &AllocateRequest) -> Result<(), FrameError> {
    check_request(request)?;
    table.check_allocation(request.owner, request.count)
}

/// Checks a handler's answer to `mm.Allocate`; returns the answer if it stands.
///
/// Errors: [`Rejection::RefusedKernel`] for refusing the kernel's own allocation;
/// [`Rejection::GrantOverLimit`] / [`Rejection::GrantWithoutFrames`] for a grant the
/// default would refuse.
pub fn check_allocate_answer(table: &FrameTable, request: &AllocateRequest, answer: AllocateAnswer) -> Result<AllocateAnswer, Rejection> {
    match answer {
        AllocateAnswer::Refuse if request.owner == Owner::Kernel => Err(Rejection::RefusedKernel),
        AllocateAnswer::Refuse => Ok(AllocateAnswer::Refuse),
        AllocateAnswer::Grant => match default_allocate(table, request) {
            Ok(()) => Ok(AllocateAnswer::Grant),
            Err(FrameError::OverLimit { .. }) => Err(Rejection::GrantOverLimit),
            Err(_) => Err(Rejection::GrantWithoutFrames),
        },
    }
}

/// The outcome of `mm.Allocate` after the fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocateDecision {
    /// Granted, or refused with the reason (a refusal by a handler is
    /// [`AllocateRefusal::ByHandler`]).
    pub result: Result<(), AllocateRefusal>,
    /// The handler's answer, if one was refused (the kernel counts it).
    pub rejected: Option<Rejection>,
}

/// Why an allocation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocateRefusal {
    /// The default refused: over the limit, out of frames, or a bad request.
    Default(FrameError),
    /// A handler refused.
    ByHandler,
}

impl fmt::Display for AllocateRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocateRefusal::Default(error) => write!(formatter, "allocation refused: {error}"),
            AllocateRefusal::ByHandler => formatter.write_str("allocation refused by the mm.Allocate handler"),
        }
    }
}

/// `mm.Allocate` end to end: the handler's answer (`None`: nobody answered) if it passes
/// [`check_allocate_answer`], else the default.
pub fn decide_allocate(table: &FrameTable, request: &AllocateRequest, answer: Option<AllocateAnswer>) -> AllocateDecision {
    let default = || default_allocate(table, request).map_err(AllocateRefusal::Default);
    match answer.map(|answer| check_allocate_answer(table, request, answer)) {
        None => AllocateDecision { result: default(), rejected: None },
        Some(Ok(AllocateAnswer::Grant)) => AllocateDecision { result: Ok(()), rejected: None },
        Some(Ok(AllocateAnswer::Refuse)) => AllocateDecision { result: Err(AllocateRefusal::ByHandler), rejected: None },
        Some(Err(rejection)) => AllocateDecision { result: default(), rejected: Some(rejection) },
    }
}

/// The question `mm.Reclaim` asks: a candidate frame and its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReclaimQuestion {
    /// The frame the kernel intends to reclaim.
    pub candidate: u64,
    /// Its owner (whose extension is asked).
    pub owner: Owner,
}

/// The question for `candidate`: it must be a reclaimable frame (owned, not the kernel's,
/// not pinned).
///
/// Errors: [`FrameError::NotAFrame`], [`FrameError::FrameIsFree`],
/// [`FrameError::NotLimitable`] for a kernel frame, [`FrameError::Pinned`].
pub fn reclaim_question(table: &FrameTable, candidate: u64) -> Result<ReclaimQuestion, FrameError> {
    let info = table.info(candidate)?;
    match info.owner {
        Owner::Free => Err(FrameError::FrameIsFree(candidate)),
        Owner::Kernel => Err(FrameError::NotLimitable(Owner::Kernel)),
        _ if info.pinned => Err(FrameError::Pinned(candidate)),
        owner => Ok(ReclaimQuestion { candidate, owner }),
    }
}

/// The default answer: the candidate.
pub fn default_reclaim(question: &ReclaimQuestion) -> u64 {
    question.candidate
}

/// Checks a volunteered frame: the candidate itself, or a frame of the same owner that is
/// resident, not pinned and not the kernel's. Returns the frame to reclaim.
///
/// Errors: [`Rejection::NotAFrame`], [`Rejection::NotResident`],
/// [`Rejection::KernelFrame`], [`Rejection::OtherOwner`], [`Rejection::Pinned`].
pub fn check_reclaim_answer(table: &FrameTable, question: &ReclaimQuestion, volunteered: u64) -> Result<u64, Rejection> {
    if volunteered == question.candidate {
        return Ok(volunteered);
    }
    let info = table.info(volunteered).map_err(|_| Rejection::NotAFrame)?;
    match info.owner {
        Owner::Free => Err(Rejection::NotResident),
        Owner::Kernel => Err(Rejection::KernelFrame),
        owner if owner != question.owner => Err(Rejection::OtherOwner),
        _ if info.pinned => Err(Rejection::Pinned),
        _ => Ok(volunteered),
    }
}

/// The outcome of `mm.Reclaim` after the fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReclaimDecision {
    /// The frame to give up.
    pub frame: u64,
    /// The handler's answer, if one was refused.
    pub rejected: Option<Rejection>,
}

/// `mm.Reclaim` end to end: the volunteered frame (`None`: nobody answered) if it passes
/// [`check_reclaim_answer`], else the candidate.
pub fn decide_reclaim(table: &FrameTable, question: &ReclaimQuestion, volunteered: Option<u64>) -> ReclaimDecision {
    match volunteered.map(|frame| check_reclaim_answer(table, question, frame)) {
        None => ReclaimDecision { frame: default_reclaim(question), rejected: None },
        Some(Ok(frame)) => ReclaimDecision { frame, rejected: None },
        Some(Err(rejection)) => ReclaimDecision { frame: default_reclaim(question), rejected: Some(rejection) },
    }
}

/// One owner's state as the `mm` domain exports it (plain data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerState {
    /// The owner.
    pub owner: Owner,
    /// Frames it holds.
    pub held: u64,
    /// Its limit, if any.
    pub limit: Option<u64>,
    /// Frames on its reclaim queue (= held, except for the kernel, which has none).
    pub queued: u64,
    /// Of those held: pinned.
    pub pinned: u64,
    /// Of those held: mapped somewhere.
    pub mapped: u64,
    /// Of those held: accessed bit set as last sampled.
    pub accessed: u64,
    /// Of those held: dirty as last sampled.
    pub dirty: u64,
}

/// The state of `owner` (walks the whole table: for the console and tests, not a hot path).
pub fn owner_state(table: &FrameTable, owner: Owner) -> OwnerState {
    let mut state = OwnerState {
        owner,
        held: table.held(owner),
        limit: table.limit(owner),
        queued: table.queue_len(owner),
        pinned: 0,
        mapped: 0,
        accessed: 0,
        dirty: 0,
    };
    let frames = table.frames.iter().filter(|info| info.owner == owner);
    for info in frames {
        state.pinned += u64::from(info.pinned);
        state.mapped += u64::from(info.mapped.is_some());
        state.accessed += u64::from(info.accessed);
        state.dirty += u64::from(info.dirty);
    }
    state
}
