//! The translation service (docs/virtual-memory.md): the events `vm.PageNotPresent`,
//! `vm.ProtectionFault` and `vm.BadAddress`, the frame table that says who holds each frame
//! the service hands out, the frames granted to pagers, and the `vm` kernel-function domain.
//!
//! The policy is the crate's ([`spindle_service_vm`]): a process's address space
//! (`proc::AddressSpace`) keeps a [`RegionTable`] of its `vm_map` regions, classifies a
//! user page fault there ([`spindle_service_vm::classify`]) and asks [`decide`] what to do;
//! [`decide`] raises the fault's event when the region is trapped (a managed region),
//! checks the answer with [`spindle_service_vm::resolve`] (a refused answer is counted and
//! the default applies) and returns the outcome, which the address space applies to its
//! page table. Bad addresses are announced with `vm.BadAddress` before the kill.
//!
//! Pagers: a handler of `vm.PageNotPresent` asks `spindle_vm_grant(space)` for a zeroed
//! frame charged to the faulting address space, may fill it (`spindle_vm_fill`) and answers
//! MAP with its number. The grant exists only while the raise is in progress; a grant the
//! outcome does not map is freed right after the raise, so nothing leaks whatever the
//! handler does. Appel & Li for in-kernel handlers: `spindle_vm_protect` queues `protN` /
//! `unprotN` changes of the faulting space, applied (and checked) after the answer.
//!
//! Isolation: every record field is guardable. For an extension, whose guards are fixed
//! when it is built, [`assign`] (the `vm_manage` system call) names the address space and
//! region its bindings are for: the primary modules impose `region == R` and `space == S` on
//! every binding that owner installs afterwards (the region first: it is the index key).
//!
//! Frame accounting: every frame mapped for a `vm_map` region (demand-zero or a pager's) is
//! recorded in the frame table (owner: the address space) and released with the region or
//! the process ([`release`]); [`stats`] counts them.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::syscall::Error;
use spindle_abi::event::{EventRecord, FrameAnswer, FrameRequest, MM_ALLOCATE, TranslationAnswer, TranslationRecord, VM_BAD_ADDRESS, VM_PAGE_NOT_PRESENT, VM_PROTECTION_FAULT, field_index};
use spindle_dispatch::{Authorization, Combiner, DeclarativeGuard, EventTable, InstallRequest, PrimaryModule, Refusal, ResultRejection};
use spindle_service_frames::{FrameTable, Owner};
use spindle_service_vm::{Answer, AnswerRejection, Fault, FaultClass, Outcome, Protection, RegionTable, SLOT_BYTES, Slot, SwapArea};

use crate::arch::PAGE_SIZE;
use crate::arch::csr::without_interrupts;
use crate::mm::frame::{self, FrameRun};

static PAGE_NOT_PRESENT: spin::Once<Arc<EventTable<TranslationRecord, TranslationAnswer>>> = spin::Once::new();
static PROTECTION_FAULT: spin::Once<Arc<EventTable<TranslationRecord, TranslationAnswer>>> = spin::Once::new();
static BAD_ADDRESS: spin::Once<Arc<EventTable<TranslationRecord, ()>>> = spin::Once::new();
static ALLOCATE: spin::Once<Arc<EventTable<FrameRequest, FrameAnswer>>> = spin::Once::new();

/// The frame table over all of RAM the frame allocator hands out, built on first use.
/// What the handlers of an address space's raise in progress asked for through the `vm`
/// domain: a granted frame (`spindle_vm_grant`) and protection changes to apply after the
/// answer (`spindle_vm_protect`).
#[derive(Default)]
struct RaiseState {
    grant: Option<FrameRun>,
    protects: Vec<PageProtection>,
    /// The space's page table (what `spindle_vm_dirty` and `spindle_vm_copy_page` look at,
    /// with the region table lent in [`REGIONS`]).
    root: Option<crate::arch::sv39::PageTableRoot>,
}

/// The faulting space's region table, lent for the length of a `vm.*` raise (the fault
/// holds it locked up the stack), read by the `vm` kernel functions: no copy per raise.
/// One raise lends at a time; a reader checks the table is its space's.
static REGIONS: crate::sched::Lent<RegionTable> = crate::sched::Lent::new();

/// Runs `reader` on `space`'s region table and page table if `space`'s raise is in progress
/// (and its table is the one lent); `None` otherwise.
fn with_raise_view<T>(space: u64, reader: impl FnOnce(&RegionTable, crate::arch::sv39::PageTableRoot) -> Option<T>) -> Option<T> {
    let root = without_interrupts(|| RAISES.lock().get(&space).and_then(|state| state.root))?;
    REGIONS.read(|table| table.filter(|table| table.space() == space).and_then(|table| reader(table, root)))
}

/// Whether `page` is a page-aligned address in one of `table`'s regions.
fn holds(table: &RegionTable, page: u64) -> bool {
    page.is_multiple_of(PAGE_SIZE as u64) && table.containing(page).is_some()
}

/// A protection change a handler queued with `spindle_vm_protect`: `count` pages from
/// `page` to `protection` (`None`: back to the region's, `unprotN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageProtection {
    /// The first page.
    pub page: u64,
    /// Pages.
    pub count: u64,
    /// The protection, or `None` for the region's.
    pub protection: Option<Protection>,
}

/// Most protection changes the handlers of one raise may queue.
pub const MAX_QUEUED_PROTECTIONS: usize = 8;

/// An empty list with the storage of an earlier raise's queued changes, kept between raises
/// ([`recycle_protects`]) and taken by the first change a raise queues, so a handler's
/// queued change allocates nothing after the first.
static SPARE_PROTECTS: spin::Mutex<Vec<PageProtection>> = spin::Mutex::new(Vec::new());

/// The spare list of queued changes (empty; a fresh one if it is out, e.g. nested raises).
fn spare_protects() -> Vec<PageProtection> {
    without_interrupts(|| core::mem::take(&mut *SPARE_PROTECTS.lock()))
}

/// Gives a raise's list of queued changes back for the next raise (emptied, its storage
/// kept).
pub fn recycle_protects(mut protects: Vec<PageProtection>) {
    if protects.capacity() == 0 {
        return;
    }
    protects.clear();
    without_interrupts(|| {
        let mut spare = SPARE_PROTECTS.lock();
        if spare.capacity() < protects.capacity() {
            *spare = protects;
        }
    });
}

/// The state of each address space whose `vm.PageNotPresent` or `vm.ProtectionFault`
/// raise is in progress.
static RAISES: spin::Mutex<Raises> = spin::Mutex::new(Raises(Vec::new()));

/// The raises in progress, by address space: a short list (one entry per process stopped
/// in a fault) that keeps its storage, so a fault allocates nothing here.
struct Raises(Vec<(u64, RaiseState)>);

impl Raises {
    fn get(&self, space: &u64) -> Option<&RaiseState> {
        self.0.iter().find(|(id, _)| id == space).map(|(_, state)| state)
    }

    fn get_mut(&mut self, space: &u64) -> Option<&mut RaiseState> {
        self.0.iter_mut().find(|(id, _)| id == space).map(|(_, state)| state)
    }

    /// Starts `space`'s raise (a space has at most one: its only thread is in the fault).
    fn insert(&mut self, space: u64, state: RaiseState) {
        match self.get_mut(&space) {
            Some(existing) => *existing = state,
            None => self.0.push((space, state)),
        }
    }

    fn remove(&mut self, space: &u64) -> Option<RaiseState> {
        let index = self.0.iter().position(|(id, _)| id == space)?;
        // Usually the only entry: `pop` moves it out without `swap_remove`'s copy of the
        // last entry onto itself (a call of `memmove`).
        let entry = if index + 1 == self.0.len() { self.0.pop() } else { Some(self.0.swap_remove(index)) };
        entry.map(|(_, state)| state)
    }
}
/// Owners whose bindings are imposed `region == R` and `space == S`.
static ASSIGNMENTS: spin::Mutex<BTreeMap<String, (u64, u64)>> = spin::Mutex::new(BTreeMap::new());

/// The service's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// User page faults handled by the service (every user page fault: `vm_map` regions,
    /// the stack, the image, no region).
    pub faults: u64,
    /// Pages mapped to a fresh zeroed frame by the default (demand-zero), including the
    /// ones kernel copies faulted in.
    pub demand_zero: u64,
    /// Pages mapped to a frame a handler supplied.
    pub pager_maps: u64,
    /// Protection changes a handler answered.
    pub protects: u64,
    /// Spurious faults (retried).
    pub retries: u64,
    /// Events raised.
    pub raised: u64,
    /// Handler answers refused by the checks (the default applied).
    pub rejected: u64,
    /// Processes killed by the service.
    pub kills: u64,
    /// Frames the service's regions hold now.
    pub frames_held: u64,
    /// Pages given up to stay within a memory limit (written to swap, or dropped if they
    /// were clean).
    pub page_outs: u64,
    /// Of those, pages written to the swap area.
    pub swap_writes: u64,
    /// Pages read back from the swap area on a fault or a kernel copy.
    pub page_ins: u64,
    /// `mm.Reclaim` raises over real frames.
    pub reclaim_raises: u64,
    /// Volunteered frames the reclaim check refused (the candidate was taken).
    pub reclaim_rejected: u64,
    /// Instructions (`rdinstret`; the host's counter under the host clock) spent in
    /// `mm.Reclaim` raises over real frames: the decisions' cost.
    pub reclaim_instructions: u64,
    /// Swap slots in use now.
    pub swap_used: u64,
    /// Page-outs made because free memory was below the low-water mark.
    pub pressure_page_outs: u64,
    /// Of those, pages of another address space than the one that needed the frame (the
    /// global clock chose them).
    pub taken_from_others: u64,
    /// Waits of a tick: a fault or kernel copy for a page another strand is writing to swap,
    /// or a space at its limit for frames other strands hold outside its resident pages
    /// (in transit, being given back or filled) when nothing else could be paged out.
    pub transit_waits: u64,
    /// Stack pages given a zeroed frame on their first touch (the stack is demand-zero).
    pub stack_pages: u64,
    /// `mm.Allocate` raises (frames for pages of address spaces).
    pub allocate_raises: u64,
    /// Of those, allocations refused (by a handler, or by the default: over the limit).
    pub allocate_refused: u64,
    /// Handler answers the check refused (a grant above the limit or the free frames).
    pub allocate_rejected: u64,
    /// Pages of programs' images filled from the program's bytes (the bundle's, or the
    /// file's through the buffer cache) on their first touch (again after a drop).
    pub image_pages: u64,
    /// Read-only image pages dropped under memory pressure (filled again when touched).
    pub image_drops: u64,
}

struct Counters {
    faults: AtomicU64,
    demand_zero: AtomicU64,
    pager_maps: AtomicU64,
    protects: AtomicU64,
    retries: AtomicU64,
    raised: AtomicU64,
    rejected: AtomicU64,
    kills: AtomicU64,
    frames_held: AtomicU64,
    page_outs: AtomicU64,
    swap_writes: AtomicU64,
    page_ins: AtomicU64,
    reclaim_raises: AtomicU64,
    reclaim_rejected: AtomicU64,
    reclaim_instructions: AtomicU64,
    pressure_page_outs: AtomicU64,
    taken_from_others: AtomicU64,
    transit_waits: AtomicU64,
    stack_pages: AtomicU64,
    allocate_raises: AtomicU64,
    allocate_refused: AtomicU64,
    allocate_rejected: AtomicU64,
    image_pages: AtomicU64,
    image_drops: AtomicU64,
}

static COUNTERS: Counters = Counters {
    faults: AtomicU64::new(0),
    demand_zero: AtomicU64::new(0),
    pager_maps: AtomicU64::new(0),
    protects: AtomicU64::new(0),
    retries: AtomicU64::new(0),
    raised: AtomicU64::new(0),
    rejected: AtomicU64::new(0),
    kills: AtomicU64::new(0),
    frames_held: AtomicU64::new(0),
    page_outs: AtomicU64::new(0),
    swap_writes: AtomicU64::new(0),
    page_ins: AtomicU64::new(0),
    reclaim_raises: AtomicU64::new(0),
    reclaim_rejected: AtomicU64::new(0),
    reclaim_instructions: AtomicU64::new(0),
    pressure_page_outs: AtomicU64::new(0),
    taken_from_others: AtomicU64::new(0),
    transit_waits: AtomicU64::new(0),
    stack_pages: AtomicU64::new(0),
    allocate_raises: AtomicU64::new(0),
    allocate_refused: AtomicU64::new(0),
    allocate_rejected: AtomicU64::new(0),
    image_pages: AtomicU64::new(0),
    image_drops: AtomicU64::new(0),
};

/// The counters now.
pub fn stats() -> Stats {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    Stats {
        faults: load(&COUNTERS.faults),
        demand_zero: load(&COUNTERS.demand_zero),
        pager_maps: load(&COUNTERS.pager_maps),
        protects: load(&COUNTERS.protects),
        retries: load(&COUNTERS.retries),
        raised: load(&COUNTERS.raised),
        rejected: load(&COUNTERS.rejected),
        kills: load(&COUNTERS.kills),
        frames_held: load(&COUNTERS.frames_held),
        page_outs: load(&COUNTERS.page_outs),
        swap_writes: load(&COUNTERS.swap_writes),
        page_ins: load(&COUNTERS.page_ins),
        reclaim_raises: load(&COUNTERS.reclaim_raises),
        reclaim_rejected: load(&COUNTERS.reclaim_rejected),
        reclaim_instructions: load(&COUNTERS.reclaim_instructions),
        pressure_page_outs: load(&COUNTERS.pressure_page_outs),
        taken_from_others: load(&COUNTERS.taken_from_others),
        transit_waits: load(&COUNTERS.transit_waits),
        stack_pages: load(&COUNTERS.stack_pages),
        allocate_raises: load(&COUNTERS.allocate_raises),
        allocate_refused: load(&COUNTERS.allocate_refused),
        allocate_rejected: load(&COUNTERS.allocate_rejected),
        image_pages: load(&COUNTERS.image_pages),
        image_drops: load(&COUNTERS.image_drops),
        swap_used: without_interrupts(|| SWAP.lock().as_ref().and_then(|area| area.as_ref().ok()).map_or(0, SwapArea::used)),
    }
}

fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Registers the three events with their primary modules and builds the frame table (at
/// boot, from `services::init`).
pub fn init() {
    let dispatcher = crate::events::dispatcher();
    PAGE_NOT_PRESENT.call_once(|| dispatcher.register(&VM_PAGE_NOT_PRESENT, Arc::new(AnswerModule)).expect("vm.PageNotPresent registered twice"));
    PROTECTION_FAULT.call_once(|| dispatcher.register(&VM_PROTECTION_FAULT, Arc::new(AnswerModule)).expect("vm.ProtectionFault registered twice"));
    BAD_ADDRESS.call_once(|| dispatcher.register(&VM_BAD_ADDRESS, Arc::new(AnnounceModule)).expect("vm.BadAddress registered twice"));
    ALLOCATE.call_once(|| dispatcher.register(&MM_ALLOCATE, Arc::new(AllocateModule)).expect("mm.Allocate registered twice"));
    // The frame table now, not inside the first page fault (whose cost it would be).
    with_frames(|_| ());
}

/// From now on, every binding `owner` (an extension's name) installs on a `vm.*` event
/// sees only the faults of region `region` of address space `space`; `None` removes the
/// assignment. Bindings installed before are not changed: assign, then load.
pub fn assign(owner: &str, target: Option<(u64, u64)>) {
    without_interrupts(|| {
        let mut assignments = ASSIGNMENTS.lock();
        match target {
            Some(target) => assignments.insert(String::from(owner), target),
            None => assignments.remove(owner),
        }
    });
}

/// [`assign`] for a process's `vm_manage`/`vm_trap`: `owner`'s bindings installed from now
/// on see only region `region` of `space`.
///
/// Errors: [`Error::Busy`] if `owner` is assigned to a region of another address space
/// (a process cannot take another's pager).
pub fn assign_for_space(owner: &str, space: u64, region: u64) -> Result<(), Error> {
    without_interrupts(|| {
        let mut assignments = ASSIGNMENTS.lock();
        if assignments.get(owner).is_some_and(|&(assigned, _)| assigned != space) {
            return Err(Error::Busy);
        }
        assignments.insert(String::from(owner), (space, region));
        Ok(())
    })
}

/// Forgets every assignment to address space `space` and its memory limit (its process
/// ended).
pub fn forget_space(space: u64) {
    without_interrupts(|| ASSIGNMENTS.lock().retain(|_, (assigned, _)| *assigned != space));
    without_interrupts(|| WIRED.lock().remove(&space));
    let _ = with_frames(|frames| frames.set_limit(Owner::AddressSpace(space), None));
}

/// The imposed guards for `request`'s owner, if it is assigned a region.
fn authorize_for_region(request: &InstallRequest<'_, TranslationRecord>) -> Result<Authorization<TranslationRecord>, Refusal> {
    let fields = TranslationRecord::FIELDS;
    let (Some(space_field), Some(region_field)) = (field_index(fields, "space"), field_index(fields, "region")) else {
        return Err(Refusal::Other("the record has no space or region field"));
    };
    Ok(match without_interrupts(|| ASSIGNMENTS.lock().get(request.owner).copied()) {
        // The region first: the dispatcher indexes a binding by its first equality.
        // Region ids are unique across address spaces (`RegionTable::with_unique_ids`), so
        // the index leaves one candidate per fault (keyed by the space, all of a space's
        // pagers would be candidates of each of its faults); the space guard, checked after
        // the lookup, is what makes the binding the space's.
        Some((space, region)) => {
            Authorization::allow().impose(DeclarativeGuard::equals(region_field, region)).impose(DeclarativeGuard::equals(space_field, space))
        }
        None => Authorization::allow(),
    })
}

/// The primary module of `vm.PageNotPresent` and `vm.ProtectionFault`.
struct AnswerModule;

impl PrimaryModule<TranslationRecord, TranslationAnswer> for AnswerModule {
    fn name(&self) -> &str {
        "vm"
    }

    fn default_result(&self, _: &TranslationRecord) -> TranslationAnswer {
        TranslationAnswer::default()
    }

    fn combiner(&self) -> Combiner<TranslationAnswer> {
        Combiner::FirstNonDefault
    }

    fn authorize(&self, request: &InstallRequest<'_, TranslationRecord>) -> Result<Authorization<TranslationRecord>, Refusal> {
        authorize_for_region(request)
    }

    fn validates_results(&self) -> bool {
        true
    }

    /// The encoding only; whether the answer resolves the fault is the service's check
    /// (`spindle_service_vm::check_answer`), after the raise.
    fn validate_result(&self, _: &TranslationRecord, result: &TranslationAnswer) -> Result<(), ResultRejection> {
        match decode(result) {
            Ok(_) => Ok(()),
            Err(reason) => Err(ResultRejection { reason }),
        }
    }
}

/// The primary module of `mm.Allocate`: the default grants within the limit (the service
/// applies it); an answer must be DEFAULT, GRANT or REFUSE.
struct AllocateModule;

impl PrimaryModule<FrameRequest, FrameAnswer> for AllocateModule {
    fn name(&self) -> &str {
        "mm"
    }

    fn default_result(&self, _: &FrameRequest) -> FrameAnswer {
        FrameAnswer { answer: FrameAnswer::DEFAULT }
    }

    fn combiner(&self) -> Combiner<FrameAnswer> {
        Combiner::FirstNonDefault
    }

    fn validates_results(&self) -> bool {
        true
    }

    fn validate_result(&self, _: &FrameRequest, result: &FrameAnswer) -> Result<(), ResultRejection> {
        match result.answer {
            FrameAnswer::DEFAULT | FrameAnswer::GRANT | FrameAnswer::REFUSE => Ok(()),
            _ => Err(ResultRejection { reason: "the answer is none of DEFAULT, GRANT, REFUSE" }),
        }
    }
}

/// Why no frame was given for a page ([`allocate_page`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFrame {
    /// Memory (or the owner's limit) is exhausted.
    OutOfMemory,
    /// An `mm.Allocate` handler refused.
    Refused,
}

/// Whether space `space` may take one more frame for a page: raises `mm.Allocate` if
/// anything is bound, checks the answer (`decide_allocate`: a grant must fit the limit and
/// the free frames; a refused answer is counted and the default applies).
fn may_allocate(space: u64) -> Result<(), NoFrame> {
    may_allocate_for(Owner::AddressSpace(space), 1, spindle_service_frames::Purpose::UserPage)
}

/// `mm.Allocate` for `count` frames (1 to `spindle_service_frames::MAX_ALLOCATE`) that
/// `owner` is about to take for `purpose` — a page of an address space, an extension's
/// arena, buffers of the buffer cache: the handlers' answer if it passes the check, else
/// the default (what fits the owner's limit and the free frames). Nothing bound: the
/// caller goes ahead (the allocation itself may still find no frame). Errors:
/// [`NoFrame::Refused`] (a handler refused), [`NoFrame::OutOfMemory`] (the default did).
pub fn may_allocate_for(owner: Owner, frames: u64, purpose: spindle_service_frames::Purpose) -> Result<(), NoFrame> {
    let Some(table) = bound(&ALLOCATE) else { return Ok(()) };
    let Some(encoded) = owner.encode() else { return Ok(()) };
    count(&COUNTERS.allocate_raises);
    let answer = crate::events::raise(table, &FrameRequest { owner: encoded, count: frames, purpose: purpose.encode() }).answer;
    let answer = match answer {
        FrameAnswer::GRANT => Some(spindle_service_frames::AllocateAnswer::Grant),
        FrameAnswer::REFUSE => Some(spindle_service_frames::AllocateAnswer::Refuse),
        _ => None,
    };
    let request = spindle_service_frames::AllocateRequest { owner, count: frames, purpose };
    let decision = with_frames(|frames| spindle_service_frames::decide_allocate(frames, &request, answer));
    if decision.rejected.is_some() {
        count(&COUNTERS.allocate_rejected);
    }
    match decision.result {
        Ok(()) => Ok(()),
        Err(spindle_service_frames::AllocateRefusal::ByHandler) => {
            count(&COUNTERS.allocate_refused);
            Err(NoFrame::Refused)
        }
        Err(spindle_service_frames::AllocateRefusal::Default(_)) => {
            count(&COUNTERS.allocate_refused);
            Err(NoFrame::OutOfMemory)
        }
    }
}

/// The primary module of `vm.BadAddress` (an announcement).
struct AnnounceModule;

impl PrimaryModule<TranslationRecord, ()> for AnnounceModule {
    fn name(&self) -> &str {
        "vm"
    }

    fn default_result(&self, _: &TranslationRecord) {}

    fn authorize(&self, request: &InstallRequest<'_, TranslationRecord>) -> Result<Authorization<TranslationRecord>, Refusal> {
        authorize_for_region(request)
    }
}

/// The crate's answer for an event's result, or why it is not one.
fn decode(answer: &TranslationAnswer) -> Result<Answer, &'static str> {
    let protection = || Protection::from_bits(u64::from(answer.protection)).map_err(|_| "the protection bits are not a protection");
    match answer.action {
        TranslationAnswer::DECLINE => Ok(Answer::Decline),
        TranslationAnswer::MAP => Ok(Answer::Map { page: answer.page, frame: answer.frame, protection: protection()? }),
        TranslationAnswer::PROTECT => Ok(Answer::Protect { page: answer.page, count: answer.count, protection: protection()? }),
        _ => Err("the action is none of DECLINE, MAP, PROTECT"),
    }
}

/// The table of an event, if it has a binding.
fn bound<A: EventRecord, R: EventRecord>(table: &spin::Once<Arc<EventTable<A, R>>>) -> Option<&Arc<EventTable<A, R>>> {
    table.get().filter(|table| table.has_bindings())
}

/// The event record of `fault`.
fn record(fault: &Fault) -> TranslationRecord {
    let record = fault.record();
    TranslationRecord { space: record.space, address: record.address, access: record.access, region: record.region }
}

/// What the address space does about a fault ([`decide`]).
#[derive(Debug)]
pub struct Decision {
    /// The outcome to apply.
    pub outcome: Outcome,
    /// For a `Map` outcome: the frame the handler was granted, now the address space's
    /// (recorded as mapped in the frame table; the space keeps it and [`release`]s it).
    pub frame: Option<FrameRun>,
    /// The handler's answer, if it was refused (already counted).
    pub rejected: Option<AnswerRejection>,
    /// Protection changes the handlers queued (`spindle_vm_protect`), to apply after the
    /// outcome unless it kills; each is checked as `prot_n`/`unprot_n` are, and one
    /// refused is counted with [`refused`].
    pub protects: Vec<PageProtection>,
}

/// Counts a handler's request the address space refused (a queued protection change
/// that does not pass the primitives' checks).
pub fn refused() {
    count(&COUNTERS.rejected);
}

/// Decides a classified user fault in `table`'s address space: raises its event when the
/// region is trapped (or announces a bad address), checks the answer, falls back to the
/// default. Counts everything.
pub fn decide(table: &RegionTable, fault: &Fault, root: crate::arch::sv39::PageTableRoot) -> Decision {
    count(&COUNTERS.faults);
    // Computed only where it is the outcome (a raise's resolution has its own).
    let default = || Decision { outcome: spindle_service_vm::default_outcome(fault), frame: None, rejected: None, protects: Vec::new() };
    if fault.class == FaultClass::BadAddress {
        if let Some(events) = bound(&BAD_ADDRESS) {
            count(&COUNTERS.raised);
            crate::events::raise(events, &record(fault));
        }
        return finish(default());
    }
    let events = match fault.class {
        FaultClass::PageNotPresent => &PAGE_NOT_PRESENT,
        FaultClass::ProtectionFault => &PROTECTION_FAULT,
        FaultClass::BadAddress | FaultClass::Spurious => return finish(default()),
    };
    let Some(events) = bound(events).filter(|_| fault.raises_event()) else { return finish(default()) };
    let space = fault.space;
    let state = RaiseState { root: Some(root), ..RaiseState::default() };
    without_interrupts(|| RAISES.lock().insert(space, state));
    count(&COUNTERS.raised);
    let answer = REGIONS.lend(table, || crate::events::raise(events, &record(fault)));
    let state = without_interrupts(|| RAISES.lock().remove(&space)).unwrap_or_default();
    let grant = state.grant;
    // A refused encoding was replaced by the default (DECLINE) by the dispatcher.
    let answer = decode(&answer).unwrap_or(Answer::Decline);
    // The frame table's lock only if a `Map` answer's frame is looked up.
    let frames = spindle_service_vm::FrameLookup(|frame| with_frames(|frames| frames.info(frame)));
    let resolution = spindle_service_vm::resolve(table, &frames, fault, Some(answer));
    if resolution.rejected.is_some() {
        count(&COUNTERS.rejected);
    }
    let mut decision = Decision { outcome: resolution.outcome, frame: None, rejected: resolution.rejected, protects: state.protects };
    match (resolution.outcome, grant) {
        // A pager's page stays resident (pinned): its content is the pager's, which the
        // space cannot page out and read back on its own.
        (Outcome::Map { page, frame: number, .. }, Some(run))
            if number == frame_number(&run) && with_frames(|frames| frames.map(number, space, page).and_then(|()| frames.pin(number))).is_ok() =>
        {
            count(&COUNTERS.pager_maps);
            COUNTERS.frames_held.fetch_add(1, Ordering::Relaxed);
            decision.frame = Some(run);
        }
        (outcome, grant) => {
            if let Some(run) = grant {
                drop(run);
            }
            if matches!(outcome, Outcome::Map { .. }) {
                // A frame of the space that is not this raise's grant (check_answer cannot
                // tell them apart): refused like any frame not granted.
                count(&COUNTERS.rejected);
                decision = Decision { rejected: Some(AnswerRejection::NotGranted), protects: decision.protects, ..default() };
            }
        }
    }
    finish(decision)
}

/// Counts the decision's kind.
fn finish(decision: Decision) -> Decision {
    match decision.outcome {
        Outcome::Kill(_) => count(&COUNTERS.kills),
        Outcome::Retry => count(&COUNTERS.retries),
        Outcome::Protect(_) => count(&COUNTERS.protects),
        Outcome::DemandZero { .. } | Outcome::Map { .. } | Outcome::Fill { .. } => {}
    }
    decision
}

/// The frame number of a one-frame run.
fn frame_number(run: &FrameRun) -> u64 {
    (run.address() / PAGE_SIZE) as u64
}

/// Runs `body` on the frame table (the frame allocator's, which records every allocated
/// frame's owner).
fn with_frames<T>(body: impl FnOnce(&mut FrameTable) -> T) -> T {
    frame::with_table(body)
}

/// A zeroed frame for a page of address space `space`, recorded in the frame table as the
/// space's and mapped at `page` (demand-zero, or a kernel copy faulting a page in);
/// `None` when memory is exhausted.
pub fn allocate(space: u64, page: u64) -> Result<FrameRun, NoFrame> {
    let source = if spindle_process::layout::STACK_BOTTOM as u64 <= page && page < spindle_process::layout::STACK_TOP as u64 { PageSource::Stack } else { PageSource::DemandZero };
    allocate_page(space, page, source)
}

/// Where a page's contents come from ([`allocate_page`]; what it is counted as).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSource {
    /// Zero: a `vm_map` page touched for the first time (or again after a clean drop).
    DemandZero,
    /// Zero: a page of the user stack (counted apart, so the counts of `vm_map` pages stay
    /// what a program's regions take).
    Stack,
    /// The caller fills it: a page coming back from swap.
    Swap,
    /// The caller fills it from the program's image (first touch, or again after a drop).
    Image,
}

/// A zeroed frame for `page` of `space`, recorded as [`allocate`] does, after `mm.Allocate`
/// allowed it; counted by `source`.
pub fn allocate_page(space: u64, page: u64, source: PageSource) -> Result<FrameRun, NoFrame> {
    may_allocate(space)?;
    let run = frame::allocate_zeroed_for(1, Owner::AddressSpace(space)).ok_or(NoFrame::OutOfMemory)?;
    let number = frame_number(&run);
    let recorded = with_frames(|frames| frames.map(number, space, page));
    if recorded.is_err() {
        // Outside the table (cannot happen for frames of the boot RAM); refuse rather
        // than hold an unrecorded frame.
        drop(run);
        return Err(NoFrame::OutOfMemory);
    }
    match source {
        PageSource::DemandZero => count(&COUNTERS.demand_zero),
        PageSource::Stack => count(&COUNTERS.stack_pages),
        PageSource::Image => count(&COUNTERS.image_pages),
        PageSource::Swap => {}
    }
    COUNTERS.frames_held.fetch_add(1, Ordering::Relaxed);
    Ok(run)
}

/// Counts a read-only image page dropped under memory pressure.
pub fn counted_image_drop() {
    count(&COUNTERS.image_drops);
}

/// Records in the frame table that `frame` was written (its leaf, which had the bit, is
/// going away).
pub fn note_dirty(frame: u64) {
    let _ = with_frames(|frames| frames.sample(frame, false, true));
}

/// Whether the frame table has `frame` as written ([`note_dirty`], or a sample).
pub fn was_dirty(frame: u64) -> bool {
    with_frames(|frames| frames.info(frame).is_ok_and(|info| info.dirty))
}

/// Gives back a frame [`allocate`] or a grant returned (the run's drop forgets it in the
/// frame table, pinned or not, and frees it).
pub fn release(run: FrameRun) {
    COUNTERS.frames_held.fetch_sub(1, Ordering::Relaxed);
    drop(run);
}

/// Frames each owner holds in the frame table (`mem`), in owner order: every allocated
/// frame is someone's (the kernel's: page tables, strand stacks, extension images, device rings, …).
pub fn frames_by_owner() -> Vec<(Owner, u64)> {
    with_frames(|frames| frames.owners().collect())
}

/// Frames the frame table records for address space `space` (tests compare it with what
/// the space holds).
pub fn held_by(space: u64) -> u64 {
    with_frames(|frames| frames.held(Owner::AddressSpace(space)))
}

/// Fewest pages a memory limit may allow: one instruction can touch two pages of a region
/// (a store across a page boundary), and a kernel copy works a page at a time; four leave
/// room so that neither pages out what it needs next.
pub const MIN_LIMIT_PAGES: u64 = 4;

/// Sets (`Some`) or removes (`None`) the memory limit of address space `space`: the most
/// frames its `vm_map` pages may hold (a pager's pinned pages included). Above it, each
/// new page first pages one out ([`choose_victim`]). Errors: [`Error::BadArgument`] for a
/// limit below [`MIN_LIMIT_PAGES`].
pub fn set_limit(space: u64, pages: Option<u64>) -> Result<(), Error> {
    if pages.is_some_and(|pages| pages < MIN_LIMIT_PAGES) {
        return Err(Error::BadArgument);
    }
    with_frames(|frames| frames.set_limit(Owner::AddressSpace(space), pages)).map_err(|_| Error::BadArgument)
}

/// Address space `space`'s memory limit in frames, if it has one.
pub fn limit(space: u64) -> Option<u64> {
    with_frames(|frames| frames.limit(Owner::AddressSpace(space)))
}

/// The low-water mark: free frames (of the whole frame allocator) below which memory is
/// under pressure ([`under_pressure`]).
static LOW_WATER: AtomicU64 = AtomicU64::new(crate::param::LOW_WATER_FRAMES);

/// Sets the low-water mark in frames (0: never under pressure).
pub fn set_low_water(frames: u64) {
    LOW_WATER.store(frames, Ordering::Relaxed);
}

/// The low-water mark in frames.
pub fn low_water() -> u64 {
    LOW_WATER.load(Ordering::Relaxed)
}

/// Whether memory is under pressure: the frame allocator's free frames are below the
/// low-water mark. Then each frame a space takes for a page is paid for by paging a page
/// out first — the one the global clock chooses, of any space ([`choose_global_victim`]).
pub fn under_pressure() -> bool {
    free_frames() < low_water()
}

/// Free frames of the frame allocator now.
pub fn free_frames() -> u64 {
    let frames = frame::stats();
    frames.total.saturating_sub(frames.allocated) as u64
}

/// Counts a page-out made because memory was under pressure; `other` if the page was
/// another address space's than the one that needed the frame.
pub fn counted_pressure(other: bool) {
    count(&COUNTERS.pressure_page_outs);
    if other {
        count(&COUNTERS.taken_from_others);
    }
}

/// Address spaces whose pages the global clock leaves alone: processes serving
/// user-level extensions or services, whose code runs inside raises and calls with
/// preemption off (where waiting for the disk is not allowed). They still page themselves
/// under their own limit.
static WIRED: spin::Mutex<alloc::collections::BTreeSet<u64>> = spin::Mutex::new(alloc::collections::BTreeSet::new());

/// Counts a wait for a page in transit to swap.
pub fn counted_transit_wait() {
    count(&COUNTERS.transit_waits);
}

/// Whether address space `space` is wired ([`wire`]).
pub fn is_wired(space: u64) -> bool {
    without_interrupts(|| WIRED.lock().contains(&space))
}

/// Marks address space `space` as wired: see [`WIRED`]. Forgotten with the space.
pub fn wire(space: u64) {
    without_interrupts(|| WIRED.lock().insert(space));
}

/// Whether `space` must give a page up before it takes another: it has a limit and holds
/// that many frames or more.
pub fn at_limit(space: u64) -> bool {
    with_frames(|frames| frames.limit(Owner::AddressSpace(space)).is_some_and(|limit| frames.held(Owner::AddressSpace(space)) >= limit))
}

/// The page-table bits of one resident page, read by the address space for [`choose_victim`].
#[derive(Clone, Copy, Debug)]
pub struct PageSample {
    /// The page's frame number.
    pub frame: u64,
    /// The leaf's accessed bit.
    pub accessed: bool,
    /// The leaf's dirty bit.
    pub dirty: bool,
}

/// What [`choose_victim`] decided: the frame to give up and the frames whose accessed bit
/// the clock hand consumed (the address space clears their leaves' A bits).
#[derive(Debug, Default)]
pub struct Victim {
    /// The frame to page out, `None` if the space has no frame that may go (every one is
    /// pinned, or it holds none).
    pub frame: Option<u64>,
    /// Frames given a second chance: clear the accessed bit of their leaves.
    pub clear_accessed: Vec<u64>,
}

/// The candidate queue of the `mm.Reclaim` raise in progress over real frames (the owner's
/// reclaim queue in clock order), what `spindle_mm_lru_length`/`lru_frame` answer during
/// it; `None` outside such a raise (they answer the synthetic queue then).
static RECLAIM_QUEUE: spin::Mutex<Option<Vec<u64>>> = spin::Mutex::new(None);
/// One real `mm.Reclaim` raise at a time (the queue above is the raise's).
static RECLAIM_GATE: crate::sched::SleepLock<()> = crate::sched::SleepLock::new(());

/// The queue of the real `mm.Reclaim` raise in progress (kernel functions of domain `mm`).
pub fn reclaim_queue<T>(body: impl FnOnce(&[u64]) -> T) -> Option<T> {
    without_interrupts(|| RECLAIM_QUEUE.lock().as_deref().map(body))
}

/// Chooses the page `space` gives up among its pages in `samples` (the resident ones that
/// may go): records the samples in the frame table (its other frames as referenced), runs
/// the clock hand over the space's queue (second chance), then raises `mm.Reclaim` for the
/// candidate with the owner's queue exported; the answer is checked
/// ([`spindle_service_frames::check_reclaim_answer`]: the candidate, or a resident,
/// unpinned frame of the same space) and a refused one counted and replaced by the
/// candidate. Thread context (a user-level handler blocks the caller).
pub fn choose_victim(space: u64, samples: &[PageSample]) -> Victim {
    let owner = Owner::AddressSpace(space);
    let mut resident: Vec<u64> = samples.iter().map(|sample| sample.frame).collect();
    resident.sort_unstable();
    let (sweep, queue) = with_frames(|frames| {
        for sample in samples {
            let _ = frames.sample(sample.frame, sample.accessed, sample.dirty);
        }
        // Frames of the space that are not among the pages sampled — another strand holds
        // them (a page in transit to or from swap, being given back or being filled), or
        // the caller may not give them up — count as referenced, as the hand passes pinned
        // ones: it goes on to a page that can go instead of stopping at one it cannot.
        for frame in frames.queue(owner) {
            if resident.binary_search(&frame).is_err() {
                let _ = frames.sample(frame, true, false);
            }
        }
        (frames.next_victims_of(owner, 1), frames.queue(owner))
    });
    let Some(&candidate) = sweep.candidates.first() else { return Victim { frame: None, clear_accessed: sweep.clear_accessed } };
    Victim { frame: Some(raise_reclaim(space, candidate, queue)), clear_accessed: sweep.clear_accessed }
}

/// Candidates one global sweep asks the clock for: the first that may go is taken.
const GLOBAL_SWEEP: usize = 16;

/// What [`choose_global_victim`] decided.
#[derive(Debug, Default)]
pub struct GlobalVictim {
    /// The page to page out: (address space, page address, frame); `None` if no page of
    /// any space may go.
    pub page: Option<(u64, u64, u64)>,
    /// Frames given a second chance (clear their leaves' accessed bits): (space, page).
    pub clear_accessed: Vec<(u64, u64)>,
}

/// Chooses the page memory pressure takes, for `requester` (the space that needs a
/// frame): records the samples of every space's resident pages, runs the clock hand over
/// the global queue, and takes the first candidate that may go — not of a wired space
/// ([`wire`]), and not of the requester if it holds fewer than [`MIN_LIMIT_PAGES`]
/// (the pages one instruction needs). `mm.Reclaim` is raised for it with its owner's queue
/// exported (the owner's extension may volunteer another page of its own), checked as for
/// [`choose_victim`].
pub fn choose_global_victim(requester: u64, samples: &[PageSample]) -> GlobalVictim {
    let wired = without_interrupts(|| WIRED.lock().clone());
    let (chosen, clear_accessed) = with_frames(|frames| {
        let requester_small = frames.held(Owner::AddressSpace(requester)) < MIN_LIMIT_PAGES;
        // The space whose frame this is, if the frame may go.
        let may_go = |frames: &FrameTable, frame: u64| match frames.owner(frame) {
            Some(Owner::AddressSpace(space)) if !wired.contains(&space) && !(space == requester && requester_small) => Some(space),
            _ => None,
        };
        // Frames that may not go count as referenced: the hand passes them (to the queue's
        // tail) instead of stopping at them sweep after sweep.
        let kept_frames: Vec<u64> = frames.global_queue().into_iter().filter(|&frame| may_go(frames, frame).is_none()).collect();
        for frame in kept_frames {
            let _ = frames.sample(frame, true, false);
        }
        for sample in samples {
            let _ = frames.sample(sample.frame, sample.accessed, sample.dirty);
        }
        let sweep = frames.next_victims(GLOBAL_SWEEP);
        let mapped = |frame: u64| frames.info(frame).ok().and_then(|info| info.mapped).map(|mapping| (mapping.space, mapping.page));
        let clear_accessed: Vec<(u64, u64)> = sweep.clear_accessed.iter().filter_map(|&frame| mapped(frame)).collect();
        let chosen = sweep.candidates.iter().find_map(|&frame| may_go(frames, frame).map(|space| (space, frame, frames.queue(Owner::AddressSpace(space)))));
        (chosen, clear_accessed)
    });
    let Some((space, candidate, queue)) = chosen else { return GlobalVictim { page: None, clear_accessed } };
    let frame = raise_reclaim(space, candidate, queue);
    let page = with_frames(|frames| frames.info(frame).ok().and_then(|info| info.mapped)).filter(|mapping| mapping.space == space).map(|mapping| (space, mapping.page, frame));
    GlobalVictim { page, clear_accessed }
}

/// Raises `mm.Reclaim` for `candidate` of `space` with the owner's `queue` exported (if
/// anything is bound) and returns the frame to give up: the candidate, or the checked
/// volunteered frame. Thread context (a user-level handler blocks the caller).
fn raise_reclaim(space: u64, candidate: u64, queue: Vec<u64>) -> u64 {
    let owner = Owner::AddressSpace(space);
    let Some(table) = crate::services::frames::reclaim_table().filter(|table| table.has_bindings()) else { return candidate };
    let Some(encoded) = owner.encode() else { return candidate };
    let gate = RECLAIM_GATE.lock();
    without_interrupts(|| *RECLAIM_QUEUE.lock() = Some(queue));
    count(&COUNTERS.reclaim_raises);
    let before = crate::arch::csr::instret() as u64;
    let volunteered = crate::events::raise(table, &spindle_abi::event::ReclaimCandidate { candidate_frame: candidate, owner: encoded }).frame;
    COUNTERS.reclaim_instructions.fetch_add((crate::arch::csr::instret() as u64).wrapping_sub(before), Ordering::Relaxed);
    without_interrupts(|| *RECLAIM_QUEUE.lock() = None);
    drop(gate);
    check_volunteered(space, candidate, volunteered)
}

/// The frame `mm.Reclaim`'s answer gives up for `candidate` of `space`: `volunteered` if
/// the check passes it, else the candidate (the refusal counted).
fn check_volunteered(space: u64, candidate: u64, volunteered: u64) -> u64 {
    let question = spindle_service_frames::ReclaimQuestion { candidate, owner: Owner::AddressSpace(space) };
    let decision = with_frames(|frames| spindle_service_frames::decide_reclaim(frames, &question, Some(volunteered)));
    if decision.rejected.is_some() {
        count(&COUNTERS.reclaim_rejected);
    }
    decision.frame
}

/// The check the primary module of `mm.Reclaim` applies to an answer over real frames
/// (owner ≠ 0): the candidate, or a resident, unpinned frame of the same owner.
pub fn validate_reclaim(candidate: u64, owner: u64, volunteered: u64) -> Result<(), &'static str> {
    let owner = Owner::decode(owner).ok_or("the owner is not one")?;
    let question = spindle_service_frames::ReclaimQuestion { candidate, owner };
    with_frames(|frames| spindle_service_frames::check_reclaim_answer(frames, &question, volunteered)).map(drop).map_err(|rejection| rejection.reason())
}

/// Counts a page given up ([`page_out`] or a clean page dropped); `written`: it went to swap.
pub fn counted_page_out(written: bool) {
    count(&COUNTERS.page_outs);
    if written {
        count(&COUNTERS.swap_writes);
    }
}

/// The swap area: the disk's last [`crate::param::SWAP_BYTES`], made on first use; the
/// error says why there is none (no disk, a disk too small).
static SWAP: spin::Mutex<Option<Result<SwapArea, String>>> = spin::Mutex::new(None);

/// Why a page could not go to swap or come back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwapFailure {
    /// There is no swap area (the text says why).
    NoSwap(String),
    /// Every slot is in use.
    Full,
    /// The disk refused the transfer.
    Disk(String),
}

impl core::fmt::Display for SwapFailure {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SwapFailure::NoSwap(why) => write!(formatter, "no swap area: {why}"),
            SwapFailure::Full => formatter.write_str("the swap area is full"),
            SwapFailure::Disk(why) => write!(formatter, "swap I/O failed: {why}"),
        }
    }
}

/// Runs `body` on the swap area, making it on first use.
fn with_swap<T>(body: impl FnOnce(&mut SwapArea) -> T) -> Result<T, SwapFailure> {
    without_interrupts(|| {
        let mut swap = SWAP.lock();
        let area = swap.get_or_insert_with(|| {
            let sectors = crate::services::disk::capacity_sectors().ok_or_else(|| String::from("the machine has no disk"))?;
            let swap_sectors = crate::param::SWAP_BYTES / crate::services::disk::SECTOR_SIZE as u64;
            let first = sectors.checked_sub(swap_sectors).filter(|&first| first >= crate::param::FS_REGION_START / crate::services::disk::SECTOR_SIZE as u64);
            let first = first.ok_or_else(|| alloc::format!("the disk has {} MiB, too few for {} MiB of swap after the file system's region", sectors >> 11, crate::param::SWAP_BYTES >> 20))?;
            SwapArea::new(first, crate::param::SWAP_BYTES / SLOT_BYTES).map_err(|error| alloc::format!("{error}"))
        });
        match area {
            Ok(area) => Ok(body(area)),
            Err(why) => Err(SwapFailure::NoSwap(why.clone())),
        }
    })
}

/// Takes a free swap slot.
pub fn swap_allocate() -> Result<Slot, SwapFailure> {
    with_swap(|area| area.allocate())?.map_err(|_| SwapFailure::Full)
}

/// Gives a slot back (a double free is a bookkeeping bug: reported on the console, never a
/// panic).
pub fn swap_free(slot: Slot) {
    if let Ok(Err(error)) = with_swap(|area| area.free(slot)) {
        crate::println!("[vm] swap: {error}");
    }
}

/// Slots in the swap area and in use (`None`: there is none, with the reason).
pub fn swap_usage() -> Result<(u64, u64), SwapFailure> {
    with_swap(|area| (area.slots(), area.used()))
}

/// One disk transfer of a slot, retried while the disk queue is full.
fn swap_transfer(slot: Slot, mut transfer: impl FnMut(u64) -> Result<(), crate::services::disk::DiskError>) -> Result<(), SwapFailure> {
    let sector = with_swap(|area| area.sector(slot))?.map_err(|error| SwapFailure::Disk(alloc::format!("{error}")))?;
    let mut attempts = 0;
    loop {
        match transfer(sector) {
            Ok(()) => return Ok(()),
            Err(crate::services::disk::DiskError::QueueFull) if attempts < 100 => {
                attempts += 1;
                crate::sched::yield_now();
            }
            Err(error) => return Err(SwapFailure::Disk(alloc::format!("{error}"))),
        }
    }
}

/// Writes the page in `run` to `slot` (thread context: blocks until the device has it).
pub fn swap_write(slot: Slot, run: &FrameRun) -> Result<(), SwapFailure> {
    let mut page = alloc::vec![0u8; PAGE_SIZE];
    run.read(0, &mut page);
    swap_transfer(slot, |sector| crate::services::disk::write(sector, &page))
}

/// Reads `slot` into the page in `run` (thread context) and counts a page-in.
pub fn swap_read(slot: Slot, run: &mut FrameRun) -> Result<(), SwapFailure> {
    let mut page = alloc::vec![0u8; PAGE_SIZE];
    swap_transfer(slot, |sector| crate::services::disk::read(sector, &mut page))?;
    run.write(0, &page);
    count(&COUNTERS.page_ins);
    Ok(())
}

/// Domain `vm` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Vm for crate::ext::glue::KernelFunctions {
    /// A zeroed frame for the fault of `space` being answered (see the declaration).
    fn vm_grant(&self, space: u64) -> u64 {
        // A grant already made in this raise, or none possible (no raise for the space).
        let existing = without_interrupts(|| RAISES.lock().get(&space).map(|state| state.grant.as_ref().map(frame_number)));
        match existing {
            None => return 0,
            Some(Some(number)) => return number,
            Some(None) => {}
        }
        // `mm.Allocate` is raised with no lock held (its handler may be user level).
        if may_allocate(space).is_err() {
            return 0;
        }
        without_interrupts(|| {
            let mut raises = RAISES.lock();
            let Some(RaiseState { grant: slot, .. }) = raises.get_mut(&space) else { return 0 };
            if let Some(run) = slot {
                return frame_number(run);
            }
            let Some(run) = frame::allocate_zeroed_for(1, Owner::AddressSpace(space)) else { return 0 };
            let number = frame_number(&run);
            *slot = Some(run);
            number
        })
    }

    /// Copies `bytes` into the frame granted for `space`'s fault.
    fn vm_fill(&self, space: u64, offset: u64, bytes: &[u8]) -> u64 {
        without_interrupts(|| {
            let mut raises = RAISES.lock();
            let Some(RaiseState { grant: Some(run), .. }) = raises.get_mut(&space) else { return 0 };
            let Ok(offset) = usize::try_from(offset) else { return 0 };
            if run.write(offset, bytes) { bytes.len() as u64 } else { 0 }
        })
    }

    /// `dirty` of a page of the address space whose fault is being answered.
    fn vm_dirty(&self, space: u64, page: u64) -> u64 {
        let Some(root) = with_raise_view(space, |table, root| holds(table, page).then_some(root)) else { return u64::MAX };
        let flags = root.translate(page as usize).map(|(_, flags)| flags);
        u64::from(flags.is_some_and(|flags| flags.contains(crate::arch::sv39::PteFlags::USER) && flags.contains(crate::arch::sv39::PteFlags::DIRTY)))
    }

    /// Pages of a region of the address space whose fault is being answered.
    fn vm_region_pages(&self, space: u64, region: u64) -> u64 {
        with_raise_view(space, |table, _| table.region(region).map(|region| region.pages())).unwrap_or(0)
    }

    /// Copies one page of the address space whose fault is being answered to another.
    fn vm_copy_page(&self, space: u64, from: u64, to: u64) -> u64 {
        let root = with_raise_view(space, |table, root| (from != to && holds(table, from) && holds(table, to)).then_some(root));
        // The space's only thread is stopped in the fault being answered.
        root.is_some_and(|root| crate::proc::copy_user_page(root, from as usize, to as usize)).into()
    }

    /// Queues a protection change for the address space whose fault is being answered.
    fn vm_protect(&self, space: u64, page: u64, count: u64, protection: u64) -> u64 {
        let protection = if protection == u64::MAX {
            None
        } else {
            match Protection::from_bits(protection) {
                Ok(protection) => Some(protection),
                Err(_) => return 0,
            }
        };
        without_interrupts(|| {
            let mut raises = RAISES.lock();
            let Some(state) = raises.get_mut(&space) else { return 0 };
            if state.protects.len() >= MAX_QUEUED_PROTECTIONS {
                return 0;
            }
            if state.protects.capacity() == 0 {
                state.protects = spare_protects();
            }
            state.protects.push(PageProtection { page, count, protection });
            1
        })
    }
}
