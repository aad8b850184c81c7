//! `mm.Reclaim` and `mm.HotListSet` in the kernel dispatcher, with a synthetic LRU queue.
//!
//! There is no physical-memory service yet, so this primary module stands in for it: it
//! owns one owner's LRU queue of [`LRU_FRAMES`] frames (frame `LRU_BASE_FRAME + position`,
//! head = least recently used), which the `mm` kernel functions
//! (`spindle_mm_lru_length`, `spindle_mm_lru_frame`) expose, and a mirror of the owner's
//! hot list, set through [`set_hot`] (which also raises `mm.HotListSet` so the bound
//! extension fills its own list). Every volunteered frame is validated (DESIGN §6): it
//! must be the candidate or a frame of the queue that is not hot; a rejected answer counts
//! as a fault of the binding, is counted in [`rejections`], and the candidate is taken.
//! Raised by the benchmarks, the in-kernel tests and the `reclaim` console command.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{HotListEntry, MM_HOT_LIST_SET, MM_RECLAIM, ReclaimCandidate, Volunteer};
use spindle_dispatch::{Authorization, Combiner, EventTable, InstallRequest, PrimaryModule, Refusal, ResultRejection};
use spin::Once;

/// Frames in the synthetic LRU queue.
pub const LRU_FRAMES: u64 = 1024;
/// Frame number at the queue's head (position 0).
pub const LRU_BASE_FRAME: u64 = 0x8_0400;
const SLOTS: usize = HotListEntry::SLOTS as usize;

/// The frame at `position` of the LRU queue, 0 past its end.
pub fn lru_frame(position: u64) -> u64 {
    if position < LRU_FRAMES { LRU_BASE_FRAME + position } else { 0 }
}

/// The kernel's mirror of the owner's hot list: slot → frame (0: empty), and a bitmap of
/// hot queue positions for constant-time validation.
static HOT_SLOTS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static HOT_POSITIONS: [AtomicU64; (LRU_FRAMES / 64) as usize] = [const { AtomicU64::new(0) }; (LRU_FRAMES / 64) as usize];
static REJECTIONS: AtomicU64 = AtomicU64::new(0);

/// Whether `frame` is on the (mirrored) hot list; frames outside the queue never are.
pub fn is_hot(frame: u64) -> bool {
    let Some(position) = frame.checked_sub(LRU_BASE_FRAME).filter(|&position| position < LRU_FRAMES) else { return false };
    HOT_POSITIONS[(position / 64) as usize].load(Ordering::Relaxed) & (1 << (position % 64)) != 0
}

fn rebuild_positions() {
    for word in &HOT_POSITIONS {
        word.store(0, Ordering::Relaxed);
    }
    for slot in &HOT_SLOTS {
        let frame = slot.load(Ordering::Relaxed);
        if let Some(position) = frame.checked_sub(LRU_BASE_FRAME).filter(|&position| position < LRU_FRAMES) {
            HOT_POSITIONS[(position / 64) as usize].fetch_or(1 << (position % 64), Ordering::Relaxed);
        }
    }
}

/// Volunteered frames the primary module rejected since boot.
pub fn rejections() -> u64 {
    REJECTIONS.load(Ordering::Relaxed)
}

/// The frame the primary module expects for `candidate` (the reference the benchmarks and
/// tests compare with): the candidate if cold, else the first cold frame of the queue.
pub fn reference_choice(candidate: u64) -> u64 {
    if !is_hot(candidate) {
        return candidate;
    }
    (0..LRU_FRAMES).map(lru_frame).find(|&frame| !is_hot(frame)).unwrap_or(candidate)
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
    fn authorize(&self, _: &InstallRequest<'_, ReclaimCandidate>) -> Result<Authorization<ReclaimCandidate>, Refusal> {
        Ok(Authorization::allow())
    }
    fn validates_results(&self) -> bool {
        true
    }
    fn validate_result(&self, args: &ReclaimCandidate, result: &Volunteer) -> Result<(), ResultRejection> {
        if result.frame == args.candidate_frame {
            return Ok(());
        }
        let queued = result.frame.checked_sub(LRU_BASE_FRAME).is_some_and(|position| position < LRU_FRAMES);
        let reason = if !queued {
            "volunteered frame is not in the owner's LRU queue"
        } else if is_hot(result.frame) {
            "volunteered frame is on the owner's hot list"
        } else {
            return Ok(());
        };
        REJECTIONS.fetch_add(1, Ordering::Relaxed);
        Err(ResultRejection { reason })
    }
}

/// The primary module of `mm.HotListSet`: anyone may bind; nothing is returned.
pub struct HotListService;

impl PrimaryModule<HotListEntry, ()> for HotListService {
    fn name(&self) -> &str {
        "mm"
    }
    fn default_result(&self, _: &HotListEntry) {}
    fn authorize(&self, _: &InstallRequest<'_, HotListEntry>) -> Result<Authorization<HotListEntry>, Refusal> {
        Ok(Authorization::allow())
    }
}

static RECLAIM: Once<Arc<EventTable<ReclaimCandidate, Volunteer>>> = Once::new();
static HOT_LIST_SET: Once<Arc<EventTable<HotListEntry, ()>>> = Once::new();

/// Registers `mm.Reclaim` and `mm.HotListSet`.
pub fn init() {
    let reclaim = super::dispatcher().register(&MM_RECLAIM, Arc::new(ReclaimService)).expect("mm.Reclaim registered twice");
    RECLAIM.call_once(|| reclaim);
    let set = super::dispatcher().register(&MM_HOT_LIST_SET, Arc::new(HotListService)).expect("mm.HotListSet registered twice");
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
        Some(table) => super::raise(table, &ReclaimCandidate { candidate_frame: candidate, owner: 0 }).frame,
        None => candidate,
    }
}

fn raise_set(slot: u64, frame: u64) {
    if let Some(table) = HOT_LIST_SET.get() {
        super::raise(table, &HotListEntry { slot, frame });
    }
}

/// Sets hot-list `slot` to `frame` in the mirror and raises `mm.HotListSet`.
pub fn set_hot(slot: usize, frame: u64) {
    if slot >= SLOTS {
        return;
    }
    HOT_SLOTS[slot].store(frame, Ordering::Relaxed);
    rebuild_positions();
    raise_set(slot as u64, frame);
}

/// Empties the hot list (mirror and bound handlers).
pub fn clear_hot() {
    for slot in &HOT_SLOTS {
        slot.store(0, Ordering::Relaxed);
    }
    rebuild_positions();
    raise_set(HotListEntry::CLEAR, 0);
}
