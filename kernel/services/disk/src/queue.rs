//! The request queue: pending requests, the reference scheduling policies, the checks on a
//! policy's answer, and the starvation bound.
//!
//! # Design
//!
//! [`Scheduler`] holds at most `capacity` pending requests ([`QueuedRequest`]), in
//! submission order, in one allocation made up front: a full queue refuses a submission
//! ([`SubmitError::QueueFull`]) instead of growing. It gives every accepted request a
//! unique id (from 1; 0 is never an id, so an answer of 0 is always refused).
//!
//! When the disk is free, [`Scheduler::dispatch`] takes the policy's answer — the id of the
//! request to serve next, from an extension handling the scheduling event, or none — and
//! removes exactly one request:
//!
//! 1. a valid answer names a queued request ([`Scheduler::validate`]); anything else is
//!    counted ([`QueueCounters::bad_answers`]) and the configured reference policy
//!    decides instead, as it does when there is no answer;
//! 2. the **starvation bound** comes first: once the oldest request has waited
//!    `max_wait_ns`, it is served whatever the policy chose, and the override is counted
//!    ([`QueueCounters::starvation_overrides`]). This bounds when a request reaches the
//!    front, not when it completes: several requests can reach the bound together.
//!
//! Every submitted request is dispatched exactly once: it stays queued until
//! `dispatch` removes it, and `dispatch` removes one per call while the queue is not empty.
//!
//! The reference policies ([`choose`]) are pure functions of the queue and the head's
//! cylinder — the answers the kernel compares extensions' answers with:
//!
//! - [`Policy::Fifo`]: the oldest request;
//! - [`Policy::ShortestSeekFirst`] (SSTF): the request whose first block is on the cylinder
//!   nearest the head; ties go to the oldest;
//! - [`Policy::CircularLook`] (C-LOOK): the next request at or beyond the head's cylinder in
//!   increasing (cylinder, block) order; when none is, wrap to the lowest. Ties go to the
//!   oldest.
//!
//! "Oldest" is the earliest arrival, then the lowest id (submission order). The policies
//! use cylinders from the [`Geometry`], not the timing model, so they make the same choices
//! under every parameter set with that layout.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::model::{Geometry, RequestError};

/// The largest queue a [`Scheduler`] may be configured with (its memory is allocated up
/// front: 1024 × 40 bytes).
pub const MAX_QUEUE_CAPACITY: usize = 1024;

/// One pending request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedRequest {
    /// The id the scheduler gave it: unique, never 0, increasing in submission order.
    pub id: u64,
    /// The first block.
    pub start_block: u64,
    /// Blocks, at least 1.
    pub blocks: u32,
    /// A write (else a read).
    pub write: bool,
    /// When it was submitted, ns.
    pub arrival_ns: u64,
    /// Who submitted it (an opaque tag the kernel chooses, e.g. a strand or stream).
    pub submitter: u64,
}

impl QueuedRequest {
    /// The ordering key of "oldest first": arrival, then submission order.
    fn age_key(&self) -> (u64, u64) {
        (self.arrival_ns, self.id)
    }
}

/// A reference scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// First in, first out: the oldest request.
    Fifo,
    /// Shortest seek time first (SSTF): the nearest cylinder; ties to the oldest.
    ShortestSeekFirst,
    /// Circular LOOK (C-LOOK): upwards from the head in (cylinder, block) order, then wrap.
    CircularLook,
}

impl Policy {
    /// Every policy.
    pub const ALL: [Policy; 3] = [Policy::Fifo, Policy::ShortestSeekFirst, Policy::CircularLook];

    /// The policy's short name: `fifo`, `sstf` or `clook`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::ShortestSeekFirst => "sstf",
            Policy::CircularLook => "clook",
        }
    }

    /// The policy called `name` (see [`Policy::name`]).
    ///
    /// Errors: [`UnknownPolicy`], whose message lists the known names.
    pub fn by_name(name: &str) -> Result<Policy, UnknownPolicy> {
        Policy::ALL.into_iter().find(|policy| policy.name() == name).ok_or_else(|| UnknownPolicy { requested: String::from(name) })
    }
}

/// A name [`Policy::by_name`] does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPolicy {
    /// The name asked for.
    pub requested: String,
}

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "unknown disk scheduling policy `{}`; known policies: fifo, sstf, clook", self.requested)
    }
}

impl core::error::Error for UnknownPolicy {}

/// The index in `queue` of the request `policy` serves next with the arm over
/// `head_cylinder`; `None` for an empty queue. Pure: the same arguments give the same answer.
pub fn choose(policy: Policy, queue: &[QueuedRequest], head_cylinder: u32, geometry: &Geometry) -> Option<usize> {
    let cylinder = |request: &QueuedRequest| geometry.cylinder_of_block(request.start_block);
    let chosen = match policy {
        Policy::Fifo => queue.iter().enumerate().min_by_key(|(_, request)| request.age_key()),
        Policy::ShortestSeekFirst => {
            queue.iter().enumerate().min_by_key(|(_, request)| (cylinder(request).abs_diff(head_cylinder), request.age_key()))
        }
        Policy::CircularLook => {
            let sweep_key = |request: &QueuedRequest| (cylinder(request), request.start_block, request.age_key());
            let ahead = queue
                .iter()
                .enumerate()
                .filter(|(_, request)| cylinder(request) >= head_cylinder)
                .min_by_key(|(_, request)| sweep_key(request));
            ahead.or_else(|| queue.iter().enumerate().min_by_key(|(_, request)| sweep_key(request)))
        }
    };
    chosen.map(|(index, _)| index)
}

/// How a [`Scheduler`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Most pending requests, 1 to [`MAX_QUEUE_CAPACITY`].
    pub capacity: usize,
    /// The starvation bound: a request that has waited this long (ns) is served next
    /// whatever the policy says. `None`: no bound.
    pub max_wait_ns: Option<u64>,
    /// The policy that decides when there is no valid answer.
    pub reference: Policy,
}

/// A [`SchedulerConfig`] whose capacity is 0 or above [`MAX_QUEUE_CAPACITY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidCapacity {
    /// The capacity asked for.
    pub capacity: usize,
}

impl fmt::Display for InvalidCapacity {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "queue capacity {} is not between 1 and {MAX_QUEUE_CAPACITY}", self.capacity)
    }
}

impl core::error::Error for InvalidCapacity {}

/// Why a submission was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// The queue holds `capacity` requests already.
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The request is empty or ends past the disk.
    Request(RequestError),
}

impl SubmitError {
    /// The reason in words.
    pub fn reason(self) -> &'static str {
        match self {
            SubmitError::QueueFull { .. } => "the disk queue is full",
            SubmitError::Request(error) => error.reason(),
        }
    }
}

impl fmt::Display for SubmitError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::QueueFull { capacity } => write!(formatter, "the disk queue is full ({capacity} requests)"),
            SubmitError::Request(error) => fmt::Display::fmt(error, formatter),
        }
    }
}

impl core::error::Error for SubmitError {}

/// Why a policy's answer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadAnswer {
    /// Nothing is queued, so no answer can be valid.
    QueueEmpty,
    /// The id names no queued request (never submitted, already dispatched, or 0).
    NotQueued {
        /// The id answered.
        id: u64,
    },
}

impl BadAnswer {
    /// The reason as the dispatcher records it.
    pub fn reason(self) -> &'static str {
        match self {
            BadAnswer::QueueEmpty => "no request is queued",
            BadAnswer::NotQueued { .. } => "the answer names no queued request",
        }
    }
}

impl fmt::Display for BadAnswer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadAnswer::QueueEmpty => formatter.write_str(self.reason()),
            BadAnswer::NotQueued { id } => write!(formatter, "the answer {id} names no queued request"),
        }
    }
}

impl core::error::Error for BadAnswer {}

/// Why [`Scheduler::dispatch`] served the request it served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The policy's answer was valid and served.
    Answer,
    /// The reference policy decided: there was no answer (`bad_answer: None`) or it was
    /// refused.
    Reference {
        /// Why the answer was refused, if there was one.
        bad_answer: Option<BadAnswer>,
    },
    /// The starvation bound overrode the choice: the oldest request had waited too long.
    Starvation {
        /// How long it had waited, ns.
        waited_ns: u64,
        /// The request the answer or reference policy had chosen instead.
        overridden_id: u64,
    },
}

/// One request taken off the queue, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// The request, no longer queued.
    pub request: QueuedRequest,
    /// Why it was chosen.
    pub decision: Decision,
}

/// What a [`Scheduler`] has done since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Requests accepted.
    pub submitted: u64,
    /// Requests removed by [`Scheduler::dispatch`].
    pub dispatched: u64,
    /// Submissions refused because the queue was full.
    pub refused_full: u64,
    /// Submissions refused because the request was empty or past the end.
    pub refused_request: u64,
    /// Dispatches decided by a valid answer.
    pub answered: u64,
    /// Dispatches with no answer.
    pub unanswered: u64,
    /// Answers refused ([`BadAnswer`]).
    pub bad_answers: u64,
    /// Dispatches where the starvation bound overrode the choice.
    pub starvation_overrides: u64,
}

/// The bounded queue of pending requests of one disk.
#[derive(Clone, Debug)]
pub struct Scheduler {
    geometry: Geometry,
    config: SchedulerConfig,
    pending: Vec<QueuedRequest>,
    next_id: u64,
    counters: QueueCounters,
}

impl Scheduler {
    /// An empty queue for a disk laid out as `geometry`.
    ///
    /// Errors: [`InvalidCapacity`] unless `1 <= config.capacity <= MAX_QUEUE_CAPACITY`.
    pub fn new(geometry: Geometry, config: SchedulerConfig) -> Result<Scheduler, InvalidCapacity> {
        if config.capacity == 0 || config.capacity > MAX_QUEUE_CAPACITY {
            return Err(InvalidCapacity { capacity: config.capacity });
        }
        Ok(Scheduler { geometry, config, pending: Vec::with_capacity(config.capacity), next_id: 1, counters: QueueCounters::default() })
    }

    /// The configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// The disk's layout.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Pending requests in submission order: what a policy chooses from.
    pub fn pending(&self) -> &[QueuedRequest] {
        &self.pending
    }

    /// How many requests are pending.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no request is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The counters so far.
    pub fn counters(&self) -> QueueCounters {
        self.counters
    }

    /// Queues `blocks` blocks from `start_block` (a write if `write`), submitted at
    /// `arrival_ns` by `submitter`; returns the request's id.
    ///
    /// Errors: [`SubmitError::Request`] for an empty request or one past the disk's end,
    /// [`SubmitError::QueueFull`] when `capacity` requests are pending. Nothing is queued.
    pub fn submit(&mut self, start_block: u64, blocks: u32, write: bool, arrival_ns: u64, submitter: u64) -> Result<u64, SubmitError> {
        if let Err(error) = self.geometry.check(start_block, blocks) {
            self.counters.refused_request += 1;
            return Err(SubmitError::Request(error));
        }
        if self.pending.len() >= self.config.capacity {
            self.counters.refused_full += 1;
            return Err(SubmitError::QueueFull { capacity: self.config.capacity });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.pending.push(QueuedRequest { id, start_block, blocks, write, arrival_ns, submitter });
        self.counters.submitted += 1;
        Ok(id)
    }

    /// Checks a policy's answer: the index in [`Scheduler::pending`] of the request it
    /// names. Does not count the refusal ([`Scheduler::dispatch`] does).
    ///
    /// Errors: [`BadAnswer::QueueEmpty`], [`BadAnswer::NotQueued`].
    pub fn validate(&self, answer_id: u64) -> Result<usize, BadAnswer> {
        if self.pending.is_empty() {
            return Err(BadAnswer::QueueEmpty);
        }
        self.pending.iter().position(|request| request.id == answer_id).ok_or(BadAnswer::NotQueued { id: answer_id })
    }

    /// The id `policy` would serve next with the arm over `head_cylinder`; `None` when
    /// nothing is queued.
    pub fn reference(&self, policy: Policy, head_cylinder: u32) -> Option<u64> {
        choose(policy, &self.pending, head_cylinder, &self.geometry).map(|index| self.pending[index].id)
    }

    /// The index of the oldest request if it has waited at least the starvation bound at
    /// `now_ns`; `None` otherwise (or with no bound).
    pub fn starving(&self, now_ns: u64) -> Option<usize> {
        let bound = self.config.max_wait_ns?;
        let (index, oldest) = self.pending.iter().enumerate().min_by_key(|(_, request)| request.age_key())?;
        (now_ns.saturating_sub(oldest.arrival_ns) >= bound).then_some(index)
    }

    /// Removes and returns the request to serve at `now_ns`, with the arm over
    /// `head_cylinder`: the one `answer` names if valid, else the reference policy's —
    /// unless the oldest request has reached the starvation bound. `None` only when
    /// nothing is queued (an answer is then ignored and not counted).
    pub fn dispatch(&mut self, now_ns: u64, answer: Option<u64>, head_cylinder: u32) -> Option<Dispatch> {
        if self.pending.is_empty() {
            return None;
        }
        let reference = || choose(self.config.reference, &self.pending, head_cylinder, &self.geometry).unwrap_or(0);
        let (chosen, mut decision) = match answer.map(|id| self.validate(id)) {
            Some(Ok(index)) => {
                self.counters.answered += 1;
                (index, Decision::Answer)
            }
            Some(Err(bad_answer)) => {
                self.counters.bad_answers += 1;
                (reference(), Decision::Reference { bad_answer: Some(bad_answer) })
            }
            None => {
                self.counters.unanswered += 1;
                (reference(), Decision::Reference { bad_answer: None })
            }
        };
        let mut index = chosen;
        if let Some(oldest) = self.starving(now_ns)
            && oldest != chosen
        {
            decision = Decision::Starvation {
                waited_ns: now_ns.saturating_sub(self.pending[oldest].arrival_ns),
                overridden_id: self.pending[chosen].id,
            };
            self.counters.starvation_overrides += 1;
            index = oldest;
        }
        let request = self.pending.remove(index);
        self.counters.dispatched += 1;
        Some(Dispatch { request, decision })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::collections::BTreeSet;
    use std::vec;

    use super::*;
    use crate::model::Parameters;

    /// The HP 97560 in 4 KiB blocks: cylinder c starts at block 171 × c (19 × 72 / 8 = 171).
    fn geometry() -> Geometry {
        *Parameters::hp97560().with_block_bytes(4096).unwrap().geometry()
    }

    const BLOCKS_PER_CYLINDER: u64 = 171;

    fn config(capacity: usize, max_wait_ns: Option<u64>, reference: Policy) -> SchedulerConfig {
        SchedulerConfig { capacity, max_wait_ns, reference }
    }

    /// Requests on the given cylinders, submitted in that order one ns apart.
    fn queue_on(cylinders: &[u64]) -> Vec<QueuedRequest> {
        cylinders
            .iter()
            .enumerate()
            .map(|(index, cylinder)| QueuedRequest {
                id: index as u64 + 1,
                start_block: cylinder * BLOCKS_PER_CYLINDER,
                blocks: 1,
                write: false,
                arrival_ns: index as u64,
                submitter: 0,
            })
            .collect()
    }

    /// The cylinders in the order `policy` serves `queue` from `head`, each served request
    /// moving the head to its cylinder.
    fn service_order(policy: Policy, mut queue: Vec<QueuedRequest>, mut head: u32) -> Vec<u32> {
        let geometry = geometry();
        let mut order = vec![];
        while let Some(index) = choose(policy, &queue, head, &geometry) {
            head = geometry.cylinder_of_block(queue.remove(index).start_block);
            order.push(head);
        }
        order
    }

    // The classic example: head at cylinder 53, requests for 98, 183, 37, 122, 14, 124, 65,
    // 67 in that order.
    const CLASSIC: [u64; 8] = [98, 183, 37, 122, 14, 124, 65, 67];

    #[test]
    fn fifo_serves_in_arrival_order() {
        assert_eq!(service_order(Policy::Fifo, queue_on(&CLASSIC), 53), [98, 183, 37, 122, 14, 124, 65, 67]);
        // Arrival decides, not position in the slice.
        let mut queue = queue_on(&[10, 20]);
        queue[0].arrival_ns = 5;
        assert_eq!(choose(Policy::Fifo, &queue, 0, &geometry()), Some(1));
    }

    #[test]
    fn sstf_serves_the_nearest_cylinder() {
        // From 53: 65 (12 away), 67 (2), 37 (30; 98 is 31), 14 (23), 98 (84), 122, 124, 183.
        assert_eq!(service_order(Policy::ShortestSeekFirst, queue_on(&CLASSIC), 53), [65, 67, 37, 14, 98, 122, 124, 183]);
        // A tie (40 and 60 are both 10 away from 50) goes to the oldest, whichever side.
        assert_eq!(choose(Policy::ShortestSeekFirst, &queue_on(&[60, 40]), 50, &geometry()), Some(0));
        assert_eq!(choose(Policy::ShortestSeekFirst, &queue_on(&[40, 60]), 50, &geometry()), Some(0));
    }

    #[test]
    fn clook_sweeps_up_then_wraps_to_the_lowest() {
        // From 53 upwards: 65, 67, 98, 122, 124, 183; then wrap to 14 and 37.
        assert_eq!(service_order(Policy::CircularLook, queue_on(&CLASSIC), 53), [65, 67, 98, 122, 124, 183, 14, 37]);
        // Requests on the head's own cylinder are served in this sweep, lowest block first.
        let geometry = geometry();
        let mut queue = queue_on(&[60, 53, 53]);
        queue[1].start_block += 100;
        assert_eq!(choose(Policy::CircularLook, &queue, 53, &geometry), Some(2));
        // Everything below the head: wrap to the lowest cylinder.
        assert_eq!(choose(Policy::CircularLook, &queue_on(&[30, 10, 20]), 53, &geometry), Some(1));
        // The same block twice: the oldest.
        assert_eq!(choose(Policy::CircularLook, &queue_on(&[70, 70]), 53, &geometry), Some(0));
    }

    #[test]
    fn policies_choose_nothing_from_an_empty_queue() {
        for policy in Policy::ALL {
            assert_eq!(choose(policy, &[], 0, &geometry()), None);
        }
    }

    #[test]
    fn policies_are_found_by_name() {
        for policy in Policy::ALL {
            assert_eq!(Policy::by_name(policy.name()), Ok(policy));
        }
        let error = Policy::by_name("elevator").unwrap_err();
        assert_eq!(alloc::format!("{error}"), "unknown disk scheduling policy `elevator`; known policies: fifo, sstf, clook");
    }

    #[test]
    fn capacities_are_checked() {
        assert_eq!(Scheduler::new(geometry(), config(0, None, Policy::Fifo)).unwrap_err(), InvalidCapacity { capacity: 0 });
        assert!(Scheduler::new(geometry(), config(MAX_QUEUE_CAPACITY + 1, None, Policy::Fifo)).is_err());
        assert!(Scheduler::new(geometry(), config(MAX_QUEUE_CAPACITY, None, Policy::Fifo)).is_ok());
        assert_eq!(core::mem::size_of::<QueuedRequest>(), 40, "the memory bound in MAX_QUEUE_CAPACITY's doc");
    }

    #[test]
    fn a_full_queue_refuses_submissions() {
        let mut scheduler = Scheduler::new(geometry(), config(2, None, Policy::Fifo)).unwrap();
        assert_eq!(scheduler.submit(1, 1, false, 0, 7), Ok(1));
        assert_eq!(scheduler.submit(2, 1, true, 0, 7), Ok(2));
        assert_eq!(scheduler.submit(3, 1, false, 0, 7), Err(SubmitError::QueueFull { capacity: 2 }));
        assert_eq!(scheduler.len(), 2);
        assert_eq!(scheduler.counters().refused_full, 1);
        scheduler.dispatch(0, None, 0).unwrap();
        assert_eq!(scheduler.submit(3, 1, false, 0, 7), Ok(3), "room again after a dispatch");
        assert_eq!(alloc::format!("{}", SubmitError::QueueFull { capacity: 2 }), "the disk queue is full (2 requests)");
    }

    #[test]
    fn requests_past_the_end_are_refused_at_submission() {
        let mut scheduler = Scheduler::new(geometry(), config(4, None, Policy::Fifo)).unwrap();
        let past = RequestError::PastEnd { start_block: 335_502, blocks: 1, capacity_blocks: 335_502 };
        assert_eq!(scheduler.submit(335_502, 1, false, 0, 0), Err(SubmitError::Request(past)));
        assert_eq!(scheduler.submit(0, 0, false, 0, 0), Err(SubmitError::Request(RequestError::Empty)));
        assert!(matches!(scheduler.submit(u64::MAX, 2, false, 0, 0), Err(SubmitError::Request(RequestError::PastEnd { .. }))));
        assert_eq!(scheduler.counters().refused_request, 3);
        assert!(scheduler.is_empty());
        assert_eq!(scheduler.submit(335_501, 1, false, 0, 0), Ok(1));
    }

    #[test]
    fn answers_are_validated() {
        let mut scheduler = Scheduler::new(geometry(), config(8, None, Policy::CircularLook)).unwrap();
        assert_eq!(scheduler.validate(1), Err(BadAnswer::QueueEmpty));
        let first = scheduler.submit(500, 1, false, 0, 0).unwrap();
        let second = scheduler.submit(100, 1, false, 1, 0).unwrap();
        assert_eq!(scheduler.validate(second), Ok(1));
        assert_eq!(scheduler.validate(0), Err(BadAnswer::NotQueued { id: 0 }));
        assert_eq!(scheduler.validate(u64::MAX), Err(BadAnswer::NotQueued { id: u64::MAX }));
        // A valid answer is served as answered, even against the reference policy.
        let served = scheduler.dispatch(0, Some(first), 0).unwrap();
        assert_eq!((served.request.id, served.decision), (first, Decision::Answer));
        assert_eq!(scheduler.validate(first), Err(BadAnswer::NotQueued { id: first }), "already dispatched");
        // Garbage falls back to the reference policy and is counted.
        let third = scheduler.submit(50, 1, false, 2, 0).unwrap();
        let served = scheduler.dispatch(0, Some(12_345), 0).unwrap();
        assert_eq!(served.decision, Decision::Reference { bad_answer: Some(BadAnswer::NotQueued { id: 12_345 }) });
        assert_eq!(served.request.id, third, "C-LOOK from cylinder 0: block 50 before block 100");
        let served = scheduler.dispatch(0, None, 0).unwrap();
        assert_eq!((served.request.id, served.decision), (second, Decision::Reference { bad_answer: None }));
        assert_eq!(scheduler.dispatch(0, Some(second), 0), None, "nothing queued");
        let counters = scheduler.counters();
        assert_eq!((counters.answered, counters.bad_answers, counters.unanswered, counters.dispatched), (1, 1, 1, 3));
    }

    #[test]
    fn the_starvation_bound_serves_the_oldest_first() {
        const MAX_WAIT_NS: u64 = 100_000_000;
        let mut scheduler = Scheduler::new(geometry(), config(8, Some(MAX_WAIT_NS), Policy::CircularLook)).unwrap();
        let head = 1000;
        // An old request far below the head, then newer ones just above it: C-LOOK keeps
        // serving the newer ones while they keep coming.
        let old = scheduler.submit(10 * BLOCKS_PER_CYLINDER, 1, false, 0, 0).unwrap();
        let near = scheduler.submit(1001 * BLOCKS_PER_CYLINDER, 1, false, 1_000, 1).unwrap();
        assert_eq!(scheduler.starving(MAX_WAIT_NS - 1), None);
        let served = scheduler.dispatch(MAX_WAIT_NS - 1, None, head).unwrap();
        assert_eq!(served.request.id, near, "below the bound the policy decides");
        let near = scheduler.submit(1002 * BLOCKS_PER_CYLINDER, 1, false, MAX_WAIT_NS - 1, 1).unwrap();
        // At the bound the oldest goes first, whatever the policy or the answer says.
        assert_eq!(scheduler.starving(MAX_WAIT_NS), Some(0));
        let served = scheduler.dispatch(MAX_WAIT_NS, Some(near), head).unwrap();
        assert_eq!(served.request.id, old);
        assert_eq!(served.decision, Decision::Starvation { waited_ns: MAX_WAIT_NS, overridden_id: near });
        assert_eq!(scheduler.counters().starvation_overrides, 1);
        // When the policy would pick the oldest anyway, nothing is overridden.
        let served = scheduler.dispatch(10 * MAX_WAIT_NS, None, head).unwrap();
        assert_eq!((served.request.id, served.decision), (near, Decision::Reference { bad_answer: None }));
        assert_eq!(scheduler.counters().starvation_overrides, 1);
    }

    #[test]
    fn without_a_bound_nothing_starves() {
        let mut scheduler = Scheduler::new(geometry(), config(4, None, Policy::CircularLook)).unwrap();
        scheduler.submit(0, 1, false, 0, 0).unwrap();
        let near = scheduler.submit(1001 * BLOCKS_PER_CYLINDER, 1, false, 0, 0).unwrap();
        assert_eq!(scheduler.starving(u64::MAX), None);
        assert_eq!(scheduler.dispatch(u64::MAX, None, 1000).unwrap().request.id, near);
    }

    /// A deterministic pseudo-random sequence (xorshift64*).
    struct Random(u64);

    impl Random {
        fn below(&mut self, bound: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
        }
    }

    #[test]
    fn every_request_is_dispatched_exactly_once_under_random_submissions_and_garbage_answers() {
        let geometry = geometry();
        let mut random = Random(0x5eed);
        for (capacity, max_wait_ns) in [(1, None), (8, Some(50_000)), (64, None), (64, Some(1_000)), (MAX_QUEUE_CAPACITY, Some(200_000))] {
            let policy = Policy::ALL[random.below(3) as usize];
            let mut scheduler = Scheduler::new(geometry, config(capacity, max_wait_ns, policy)).unwrap();
            let mut queued = BTreeSet::new();
            let mut dispatched = BTreeSet::new();
            let (mut accepted, mut refused, mut garbage) = (0_u64, 0_u64, 0_u64);
            let mut now = 0;
            for _ in 0..20_000 {
                now += random.below(2_000);
                if random.below(100) < 55 {
                    // Some submissions are past the end or empty on purpose.
                    let start = random.below(geometry.capacity_blocks() + 10);
                    let blocks = random.below(4) as u32;
                    match scheduler.submit(start, blocks, random.below(2) == 0, now, random.below(16)) {
                        Ok(id) => {
                            assert!(queued.insert(id), "id {id} given twice");
                            accepted += 1;
                        }
                        Err(_) => refused += 1,
                    }
                } else {
                    let answer = match random.below(4) {
                        0 => None,
                        1 => Some(random.next_garbage()),
                        _ => scheduler.pending().get(random.below(capacity as u64) as usize).map(|request| request.id),
                    };
                    // An answer to an empty queue is ignored, not counted.
                    if !scheduler.is_empty() && answer.is_some_and(|id| scheduler.validate(id).is_err()) {
                        garbage += 1;
                    }
                    match scheduler.dispatch(now, answer, random.below(u64::from(geometry.cylinders())) as u32) {
                        Some(dispatch) => {
                            assert!(queued.remove(&dispatch.request.id), "dispatched {} which is not queued", dispatch.request.id);
                            assert!(dispatched.insert(dispatch.request.id), "dispatched {} twice", dispatch.request.id);
                        }
                        None => assert!(scheduler.is_empty()),
                    }
                }
                assert_eq!(scheduler.len(), queued.len());
                assert!(scheduler.len() <= capacity);
            }
            while let Some(dispatch) = scheduler.dispatch(now, Some(0), 0) {
                assert!(queued.remove(&dispatch.request.id));
                assert!(dispatched.insert(dispatch.request.id));
                garbage += 1;
            }
            assert!(queued.is_empty());
            let counters = scheduler.counters();
            assert_eq!(dispatched.len() as u64, accepted, "every accepted request dispatched once");
            assert_eq!((counters.submitted, counters.dispatched), (accepted, accepted));
            assert_eq!(counters.refused_full + counters.refused_request, refused);
            assert_eq!(counters.bad_answers, garbage);
            assert!(accepted > 1000 && refused > 100 && garbage > 1000, "the test exercised every path: {counters:?}");
        }
    }

    impl Random {
        /// An id that is usually not queued: 0, huge, or a small number that may have been
        /// dispatched already.
        fn next_garbage(&mut self) -> u64 {
            match self.below(3) {
                0 => 0,
                1 => u64::MAX - self.below(1000),
                _ => self.below(64),
            }
        }
    }
}
