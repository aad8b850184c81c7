//! The physical-memory service in the kernel: `mm.Reclaim` and `mm.HotListSet`, raised
//! over one owner's reclaim queue whose policy (queue, hot list, validation of answers) is
//! the host-tested crate `spindle-service-frames`.
//!
//! Two kinds of raise share the event. Over **real frames** (record `owner` ≠ 0: an address
//! space over its memory limit, raised by the translation service, `services::vm`), the
//! candidate is the clock hand's and the `mm` kernel functions (`spindle_mm_lru_length`,
//! `spindle_mm_lru_frame`) answer the owner's real reclaim queue during the raise; an
//! answer must be the candidate or a resident, unpinned frame of the same owner. Over the
//! **synthetic queue** (owner 0: [`LRU_FRAMES`] frames from [`LRU_BASE_FRAME`]), raised by
//! the benchmarks that price a decision without I/O, the kernel functions answer that queue.
//! Every volunteered frame is validated: the candidate, or a queued frame that is not hot;
//! a rejected answer counts as a fault of the binding and the candidate is taken.
//! Raised by the benchmarks, the in-kernel tests and the `reclaim` console command.

use alloc::sync::Arc;

use spindle_abi::event::{HotListEntry, MM_HOT_LIST_SET, MM_RECLAIM, ReclaimCandidate, Volunteer};
use spindle_dispatch::{Combiner, EventTable, PrimaryModule, ResultRejection};
use spindle_service_frames::ReclaimQueue;
use spin::Once;

/// Frames in the synthetic LRU queue.
pub const LRU_FRAMES: u64 = 1024;
/// Frame number at the queue's head (position 0).
pub const LRU_BASE_FRAME: u64 = 0x8_0400;

/// The one owner's queue and hot list.
static QUEUE: ReclaimQueue = ReclaimQueue::new(LRU_BASE_FRAME, LRU_FRAMES);

/// The frame at `position` of the LRU queue, 0 past its end.
pub fn lru_frame(position: u64) -> u64 {
    QUEUE.frame(position)
}

/// Whether `frame` is on the (mirrored) hot list; frames outside the queue never are.
pub fn is_hot(frame: u64) -> bool {
    QUEUE.is_hot(frame)
}

/// Volunteered frames the primary module rejected since boot.
pub fn rejections() -> u64 {
    QUEUE.rejections()
}

/// The frame the primary module expects for `candidate` (the reference the benchmarks and
/// tests compare with): the candidate if cold, else the first cold frame of the queue.
pub fn reference_choice(candidate: u64) -> u64 {
    QUEUE.reference_choice(candidate)
}

/// The primary module of `mm.Reclaim`: default = take the candidate; validates answers.
pub struct ReclaimService;

impl PrimaryModule<ReclaimCandidate, Volunteer> for ReclaimService {
    fn name(&self) -> &str {
        "mm"
    }
    fn default_result(&self, args: &ReclaimCandidate) -> Volunteer {
        Volunteer { frame: args.candidate_frame }
    }
    fn combiner(&self) -> Combiner<Volunteer> {
        Combiner::Last
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &ReclaimCandidate, result: &Volunteer) -> Result<(), ResultRejection> {
        if args.owner != 0 {
            return validate_real_reclaim(args, result);
        }
        match QUEUE.validate(args.candidate_frame, result.frame) {
            Ok(()) => Ok(()),
            Err(rejection) => Err(ResultRejection { reason: rejection.reason() }),
        }
    }
}

/// An answer about real frames of an address space (the translation service's reclaim),
/// out of line: its frame-table walk would otherwise give every validation (the queue's
/// is one comparison in the common case) the stack frame and register saves it needs.
#[inline(never)]
fn validate_real_reclaim(args: &ReclaimCandidate, result: &Volunteer) -> Result<(), ResultRejection> {
    super::vm::validate_reclaim(args.candidate_frame, args.owner, result.frame).map_err(|reason| ResultRejection { reason })
}

/// The primary module of `mm.HotListSet`: anyone may bind; nothing is returned.
pub struct HotListService;

impl PrimaryModule<HotListEntry, ()> for HotListService {
    fn name(&self) -> &str {
        "mm"
    }
    fn default_result(&self, _: &HotListEntry) {}
}

static RECLAIM: Once<Arc<EventTable<ReclaimCandidate, Volunteer>>> = Once::new();
static HOT_LIST_SET: Once<Arc<EventTable<HotListEntry, ()>>> = Once::new();

/// Registers `mm.Reclaim` and `mm.HotListSet`.
pub fn init() {
    let dispatcher = crate::events::dispatcher();
    let reclaim = dispatcher.register(&MM_RECLAIM, Arc::new(ReclaimService)).expect("mm.Reclaim registered twice");
    RECLAIM.call_once(|| reclaim);
    let set = dispatcher.register(&MM_HOT_LIST_SET, Arc::new(HotListService)).expect("mm.HotListSet registered twice");
    HOT_LIST_SET.call_once(|| set);
}

/// The `mm.Reclaim` table (after [`init`]).
pub fn reclaim_table() -> Option<&'static Arc<EventTable<ReclaimCandidate, Volunteer>>> {
    RECLAIM.get()
}

/// Raises `mm.Reclaim` for `candidate` (owner 0) and returns the frame to reclaim.
#[inline]
pub fn reclaim(candidate: u64) -> u64 {
    match RECLAIM.get() {
        Some(table) => crate::events::raise(table, &ReclaimCandidate { candidate_frame: candidate, owner: 0 }).frame,
        None => candidate,
    }
}

fn raise_set(slot: u64, frame: u64) {
    if let Some(table) = HOT_LIST_SET.get() {
        crate::events::raise(table, &HotListEntry { slot, frame });
    }
}

/// Sets hot-list `slot` to `frame` in the mirror and raises `mm.HotListSet`.
pub fn set_hot(slot: usize, frame: u64) {
    if QUEUE.set_hot(slot, frame) {
        raise_set(slot as u64, frame);
    }
}

/// Raises `mm.HotListSet { slot, frame }` for real frames (a process's `vm_hot`), without
/// the synthetic queue's mirror (which validates only owner-0 raises).
pub fn announce_hot(slot: u64, frame: u64) {
    raise_set(slot, frame);
}

/// Empties the hot list (mirror and bound handlers).
pub fn clear_hot() {
    QUEUE.clear_hot();
    raise_set(HotListEntry::CLEAR, 0);
}

/// Domain `mm` of the kernel functions (`spindle_abi::host`): the owner's LRU queue (the
/// synthetic queue until the physical-memory service exists).
impl spindle_abi::host::domains::Mm for crate::ext::glue::KernelFunctions {
    /// During a raise over real frames, the owner's reclaim queue; else the synthetic one.
    fn mm_lru_length(&self) -> u64 {
        super::vm::reclaim_queue(|queue| queue.len() as u64).unwrap_or(LRU_FRAMES)
    }

    /// During a raise over real frames, the frame at `position` of the owner's reclaim queue
    /// (clock order, head first; 0 past its end); else of the synthetic one.
    fn mm_lru_frame(&self, position: u64) -> u64 {
        super::vm::reclaim_queue(|queue| usize::try_from(position).ok().and_then(|position| queue.get(position)).copied().unwrap_or(0)).unwrap_or_else(|| lru_frame(position))
    }
}
