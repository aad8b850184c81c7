//! The lock-granting policy point (`lock.Grant`): what a policy is asked, what it may
//! answer, the check on an answer, and the reference policies FRP and FIFO.
//!
//! # The question
//!
//! Whenever the state of a file's locks changes while requests wait — a request arrives
//! and others are waiting, a lock is released, a waiting request is cancelled — the table
//! computes which waiting requests *could* be granted now (those compatible with every
//! lock held: the [`Candidate`]s) and asks the policy which one to grant next
//! ([`GrantPolicy::choose`]), with a [`GrantQuery`] describing the file. It grants that
//! one and asks again, until the policy declines ([`GrantChoice::NONE`]) or nothing is
//! grantable. Every argument and the answer are small `Copy` records of integers, so the
//! kernel can pass them to an extension through an event.
//!
//! # Valid answers
//!
//! [`validate`] is the rule, a pure function of the question and the answer:
//!
//! - [`GrantChoice::NONE`] declines — valid, except when nothing is held on the file
//!   while requests could be granted ([`Rejection::DeclinedWhileIdle`]): nothing would
//!   ever be released to ask again, so the waiters would wait forever;
//! - any other answer must name a waiting request ([`Rejection::NotWaiting`]) that is a
//!   candidate, i.e. grantable now ([`Rejection::NotGrantable`]).
//!
//! The table counts a rejected answer and uses its default policy's answer instead.
//!
//! # Reference policies
//!
//! Pure functions ([`choose`]) — the answers the kernel compares an extension's with:
//!
//! - [`Policy::Frp`] ("FIFO/reader's priority", the default, BSD/OS's policy as Seltzer et
//!   al. describe it): any grantable waiting reader first, oldest first; otherwise the
//!   oldest grantable writer. It never declines while something is grantable, so a reader
//!   arriving while readers hold the lock gets in at once, ahead of any waiting writer —
//!   which is what starves writers under a steady stream of readers.
//! - [`Policy::Fifo`]: strict arrival order: the oldest waiting request if it is grantable,
//!   otherwise nothing — later requests, even compatible ones, wait behind it. After the
//!   head is granted the table asks again, so consecutive compatible readers at the head
//!   all get in.
//!
//! "Oldest" is the lowest [`Candidate::sequence`] (arrival order).

use core::fmt;

use crate::range::{LockKind, OwnerId};

/// A request id: unique in a table, never 0.
pub type RequestId = u64;

/// A file's id (the kernel's choice: an inode or open-file number).
pub type FileId = u32;

/// What changed, so that the policy is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Trigger {
    /// A request arrived while others were waiting (it is among the waiting requests; see
    /// [`GrantQuery::arriving`]).
    Arrival = 0,
    /// Locks were released (an unlock or an owner's exit).
    Release = 1,
    /// A waiting request was withdrawn (cancelled, or its owner exited).
    Cancel = 2,
}

/// The question's header: the file and its queue as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantQuery {
    /// The file.
    pub file: FileId,
    /// Now, ns.
    pub now_ns: u64,
    /// What changed.
    pub trigger: Trigger,
    /// The request that just arrived (with [`Trigger::Arrival`]), else 0.
    pub arriving: RequestId,
    /// Requests waiting on the file, grantable or not.
    pub waiting: u32,
    /// Locks held on the file (by all owners; each owner's locks are merged).
    pub holders: u32,
}

/// One waiting request that could be granted now (compatible with every lock held).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The request.
    pub request: RequestId,
    /// Its owner.
    pub owner: OwnerId,
    /// Read or write.
    pub kind: LockKind,
    /// The first byte.
    pub start: u64,
    /// One past the last byte (`u64::MAX`: to the end of the file).
    pub end: u64,
    /// Arrival order on the table: lower arrived earlier.
    pub sequence: u64,
    /// Its place in the file's waiting queue, 0 = the oldest waiting request.
    pub position: u32,
    /// How long it has waited, ns.
    pub waited_ns: u64,
    /// Whether an earlier waiting request of another owner conflicts with it (granting it
    /// overtakes that request).
    pub overtakes: bool,
}

/// A policy's answer: the request to grant next, or [`GrantChoice::NONE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantChoice {
    /// The request to grant, or [`GrantChoice::NONE`].
    pub request: RequestId,
}

impl GrantChoice {
    /// Grant nothing more now.
    pub const NONE: RequestId = 0;

    /// The answer that declines.
    pub const fn decline() -> GrantChoice {
        GrantChoice { request: GrantChoice::NONE }
    }

    /// The answer that grants `request`.
    pub const fn grant(request: RequestId) -> GrantChoice {
        GrantChoice { request }
    }

    /// Whether the answer declines.
    pub const fn is_decline(self) -> bool {
        self.request == GrantChoice::NONE
    }
}

/// A lock-granting policy: the kernel's implementation raises `lock.Grant`.
pub trait GrantPolicy {
    /// The request to grant next among `candidates` (never empty when asked), or
    /// [`GrantChoice::decline`].
    fn choose(&mut self, query: &GrantQuery, candidates: &[Candidate]) -> GrantChoice;
}

/// A reference policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// FIFO/reader's priority: grantable readers first (oldest first), then the oldest
    /// grantable writer; never declines while something is grantable.
    Frp,
    /// Strict arrival order: the oldest waiting request if grantable, else nothing.
    Fifo,
}

impl Policy {
    /// Every reference policy.
    pub const ALL: [Policy; 2] = [Policy::Frp, Policy::Fifo];

    /// `frp` or `fifo`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Frp => "frp",
            Policy::Fifo => "fifo",
        }
    }

    /// The policy called `name` (see [`Policy::name`]).
    ///
    /// Errors: [`UnknownPolicy`].
    pub fn by_name(name: &str) -> Result<Policy, UnknownPolicy> {
        Policy::ALL.into_iter().find(|policy| policy.name() == name).ok_or(UnknownPolicy)
    }
}

impl GrantPolicy for Policy {
    fn choose(&mut self, _: &GrantQuery, candidates: &[Candidate]) -> GrantChoice {
        choose(*self, candidates)
    }
}

/// A name [`Policy::by_name`] does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownPolicy;

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("unknown lock-granting policy; known policies: frp, fifo")
    }
}

impl core::error::Error for UnknownPolicy {}

/// The answer of the reference `policy` to `candidates`. Pure: the same candidates give
/// the same answer.
pub fn choose(policy: Policy, candidates: &[Candidate]) -> GrantChoice {
    let oldest_of =
        |kind: LockKind| candidates.iter().filter(|candidate| candidate.kind == kind).min_by_key(|candidate| candidate.sequence);
    let chosen = match policy {
        Policy::Frp => oldest_of(LockKind::Read).or_else(|| oldest_of(LockKind::Write)),
        Policy::Fifo => candidates.iter().find(|candidate| candidate.position == 0),
    };
    chosen.map_or(GrantChoice::decline(), |candidate| GrantChoice::grant(candidate.request))
}

/// Why a policy's answer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The answer names no waiting request on the file (never made, granted, withdrawn,
    /// on another file).
    NotWaiting {
        /// The id answered.
        request: RequestId,
    },
    /// The answer names a waiting request that conflicts with a lock held now.
    NotGrantable {
        /// The id answered.
        request: RequestId,
    },
    /// The answer declined while no lock is held on the file and requests could be
    /// granted: nothing would ever ask again.
    DeclinedWhileIdle,
}

impl Rejection {
    /// The reason in words (what the kernel's validation reports).
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::NotWaiting { .. } => "names no waiting request",
            Rejection::NotGrantable { .. } => "names a request that conflicts with a held lock",
            Rejection::DeclinedWhileIdle => "declined while nothing is held and requests could be granted",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::NotWaiting { request } | Rejection::NotGrantable { request } => {
                write!(formatter, "the answer {request} {}", self.reason())
            }
            Rejection::DeclinedWhileIdle => write!(formatter, "the answer {}", self.reason()),
        }
    }
}

impl core::error::Error for Rejection {}

/// Checks `choice` against the question: `Ok(Some(index))` of the chosen candidate,
/// `Ok(None)` for a valid decline, or why the answer is refused. `waiting` holds the ids
/// of every request waiting on the file (grantable or not). Pure.
pub fn validate(
    choice: GrantChoice,
    query: &GrantQuery,
    waiting: &[RequestId],
    candidates: &[Candidate],
) -> Result<Option<usize>, Rejection> {
    if choice.is_decline() {
        return if query.holders == 0 && !candidates.is_empty() { Err(Rejection::DeclinedWhileIdle) } else { Ok(None) };
    }
    if let Some(index) = candidates.iter().position(|candidate| candidate.request == choice.request) {
        return Ok(Some(index));
    }
    if waiting.contains(&choice.request) {
        Err(Rejection::NotGrantable { request: choice.request })
    } else {
        Err(Rejection::NotWaiting { request: choice.request })
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;

    /// Candidates of the given kinds at the given queue positions (sequence = position).
    fn candidates(entries: &[(LockKind, u32)]) -> Vec<Candidate> {
        entries
            .iter()
            .map(|&(kind, position)| Candidate {
                request: u64::from(position) + 100,
                owner: position + 1,
                kind,
                start: 0,
                end: 1,
                sequence: u64::from(position),
                position,
                waited_ns: 0,
                overtakes: false,
            })
            .collect()
    }

    fn query(holders: u32) -> GrantQuery {
        GrantQuery { file: 1, now_ns: 0, trigger: Trigger::Release, arriving: 0, waiting: 4, holders }
    }

    #[test]
    fn frp_prefers_the_oldest_reader_then_the_oldest_writer() {
        use LockKind::{Read, Write};
        assert_eq!(choose(Policy::Frp, &candidates(&[(Write, 0), (Read, 2), (Read, 1)])), GrantChoice::grant(101));
        assert_eq!(choose(Policy::Frp, &candidates(&[(Write, 3), (Write, 1)])), GrantChoice::grant(101));
        assert_eq!(choose(Policy::Frp, &[]), GrantChoice::decline());
    }

    #[test]
    fn fifo_grants_only_the_head() {
        use LockKind::{Read, Write};
        assert_eq!(choose(Policy::Fifo, &candidates(&[(Write, 0), (Read, 1)])), GrantChoice::grant(100));
        assert_eq!(choose(Policy::Fifo, &candidates(&[(Read, 1), (Read, 2)])), GrantChoice::decline(), "the head is not grantable");
        assert_eq!(choose(Policy::Fifo, &[]), GrantChoice::decline());
    }

    #[test]
    fn policies_are_found_by_name() {
        for policy in Policy::ALL {
            assert_eq!(Policy::by_name(policy.name()), Ok(policy));
        }
        assert_eq!(Policy::by_name("lifo"), Err(UnknownPolicy));
        assert_eq!(alloc::format!("{UnknownPolicy}"), "unknown lock-granting policy; known policies: frp, fifo");
    }

    #[test]
    fn answers_are_validated() {
        let candidates = candidates(&[(LockKind::Read, 1)]);
        let waiting = [100, 101];
        // A candidate is valid; a waiting request that is not a candidate is not grantable;
        // anything else is not waiting (0 is the decline, never a request).
        assert_eq!(validate(GrantChoice::grant(101), &query(1), &waiting, &candidates), Ok(Some(0)));
        assert_eq!(validate(GrantChoice::grant(100), &query(1), &waiting, &candidates), Err(Rejection::NotGrantable { request: 100 }));
        assert_eq!(validate(GrantChoice::grant(7), &query(1), &waiting, &candidates), Err(Rejection::NotWaiting { request: 7 }));
        assert_eq!(validate(GrantChoice::grant(u64::MAX), &query(1), &waiting, &[]), Err(Rejection::NotWaiting { request: u64::MAX }));
        // Declining is valid while something is held, or when nothing is grantable.
        assert_eq!(validate(GrantChoice::decline(), &query(1), &waiting, &candidates), Ok(None));
        assert_eq!(validate(GrantChoice::decline(), &query(0), &waiting, &[]), Ok(None));
        assert_eq!(validate(GrantChoice::decline(), &query(0), &waiting, &candidates), Err(Rejection::DeclinedWhileIdle));
        assert_eq!(alloc::format!("{}", Rejection::NotWaiting { request: 7 }), "the answer 7 names no waiting request");
        assert_eq!(
            alloc::format!("{}", Rejection::NotGrantable { request: 100 }),
            "the answer 100 names a request that conflicts with a held lock"
        );
        assert_eq!(
            alloc::format!("{}", Rejection::DeclinedWhileIdle),
            "the answer declined while nothing is held and requests could be granted"
        );
    }
}
