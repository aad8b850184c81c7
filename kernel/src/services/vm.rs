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
//! region its bindings are for: the primary modules impose `space == S` and `region == R` on
//! every binding that owner installs afterwards.
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
use spindle_abi::event::{TranslationAnswer, TranslationRecord, VM_BAD_ADDRESS, VM_PAGE_NOT_PRESENT, VM_PROTECTION_FAULT, EventRecord, field_index};
use spindle_dispatch::{Authorization, Combiner, DeclarativeGuard, EventTable, InstallRequest, PrimaryModule, Refusal, ResultRejection};
use spindle_service_frames::{FrameTable, Owner};
use spindle_service_vm::{Answer, AnswerRejection, Fault, FaultClass, Outcome, Protection, RegionTable};

use crate::arch::PAGE_SIZE;
use crate::arch::csr::without_interrupts;
use crate::mm::frame::{self, FrameRun};

static PAGE_NOT_PRESENT: spin::Once<Arc<EventTable<TranslationRecord, TranslationAnswer>>> = spin::Once::new();
static PROTECTION_FAULT: spin::Once<Arc<EventTable<TranslationRecord, TranslationAnswer>>> = spin::Once::new();
static BAD_ADDRESS: spin::Once<Arc<EventTable<TranslationRecord, ()>>> = spin::Once::new();

/// The frame table over all of RAM the frame allocator hands out, built on first use.
static FRAMES: spin::Mutex<Option<FrameTable>> = spin::Mutex::new(None);
/// What the handlers of an address space's raise in progress asked for through the `vm`
/// domain: a granted frame (`spindle_vm_grant`) and protection changes to apply after the
/// answer (`spindle_vm_protect`).
#[derive(Default)]
struct RaiseState {
    grant: Option<FrameRun>,
    protects: Vec<PageProtection>,
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

/// The state of each address space whose `vm.PageNotPresent` or `vm.ProtectionFault`
/// raise is in progress.
static RAISES: spin::Mutex<BTreeMap<u64, RaiseState>> = spin::Mutex::new(BTreeMap::new());
/// Owners whose bindings are imposed `space == S` and `region == R`.
static ASSIGNMENTS: spin::Mutex<BTreeMap<String, (u64, u64)>> = spin::Mutex::new(BTreeMap::new());

/// The service's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// User page faults in `vm_map` regions or in no region.
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
    }
}

fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Registers the three events with their primary modules (at boot, from `services::init`).
pub fn init() {
    let dispatcher = crate::events::dispatcher();
    PAGE_NOT_PRESENT.call_once(|| dispatcher.register(&VM_PAGE_NOT_PRESENT, Arc::new(AnswerModule)).expect("vm.PageNotPresent registered twice"));
    PROTECTION_FAULT.call_once(|| dispatcher.register(&VM_PROTECTION_FAULT, Arc::new(AnswerModule)).expect("vm.ProtectionFault registered twice"));
    BAD_ADDRESS.call_once(|| dispatcher.register(&VM_BAD_ADDRESS, Arc::new(AnnounceModule)).expect("vm.BadAddress registered twice"));
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

/// Forgets every assignment to address space `space` (its process ended).
pub fn forget_space(space: u64) {
    without_interrupts(|| ASSIGNMENTS.lock().retain(|_, (assigned, _)| *assigned != space));
}

/// The imposed guards for `request`'s owner, if it is assigned a region.
fn authorize_for_region(request: &InstallRequest<'_, TranslationRecord>) -> Result<Authorization<TranslationRecord>, Refusal> {
    let fields = TranslationRecord::FIELDS;
    let (Some(space_field), Some(region_field)) = (field_index(fields, "space"), field_index(fields, "region")) else {
        return Err(Refusal::Other("the record has no space or region field"));
    };
    Ok(match without_interrupts(|| ASSIGNMENTS.lock().get(request.owner).copied()) {
        Some((space, region)) => {
            Authorization::allow().impose(DeclarativeGuard::equals(space_field, space)).impose(DeclarativeGuard::equals(region_field, region))
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
pub fn decide(table: &RegionTable, fault: &Fault) -> Decision {
    count(&COUNTERS.faults);
    let default = Decision { outcome: spindle_service_vm::default_outcome(table, fault), frame: None, rejected: None, protects: Vec::new() };
    if fault.class == FaultClass::BadAddress {
        if let Some(events) = bound(&BAD_ADDRESS) {
            count(&COUNTERS.raised);
            crate::events::raise(events, &record(fault));
        }
        return finish(default);
    }
    let events = match fault.class {
        FaultClass::PageNotPresent => &PAGE_NOT_PRESENT,
        FaultClass::ProtectionFault => &PROTECTION_FAULT,
        FaultClass::BadAddress | FaultClass::Spurious => return finish(default),
    };
    let Some(events) = bound(events).filter(|_| fault.raises_event()) else { return finish(default) };
    let space = fault.space;
    without_interrupts(|| RAISES.lock().insert(space, RaiseState::default()));
    count(&COUNTERS.raised);
    let answer = crate::events::raise(events, &record(fault));
    let state = without_interrupts(|| RAISES.lock().remove(&space)).unwrap_or_default();
    let grant = state.grant;
    // A refused encoding was replaced by the default (DECLINE) by the dispatcher.
    let answer = decode(&answer).unwrap_or(Answer::Decline);
    let resolution = with_frames(|frames| spindle_service_vm::resolve(table, frames, fault, Some(answer)));
    if resolution.rejected.is_some() {
        count(&COUNTERS.rejected);
    }
    let mut decision = Decision { outcome: resolution.outcome, frame: None, rejected: resolution.rejected, protects: state.protects };
    match (resolution.outcome, grant) {
        (Outcome::Map { page, frame: number, .. }, Some(run)) if number == frame_number(&run) && with_frames(|frames| frames.map(number, space, page)).is_ok() => {
            count(&COUNTERS.pager_maps);
            COUNTERS.frames_held.fetch_add(1, Ordering::Relaxed);
            decision.frame = Some(run);
        }
        (outcome, grant) => {
            if let Some(run) = grant {
                release_run(run);
            }
            if matches!(outcome, Outcome::Map { .. }) {
                // A frame of the space that is not this raise's grant (check_answer cannot
                // tell them apart): refused like any frame not granted.
                count(&COUNTERS.rejected);
                decision = Decision { rejected: Some(AnswerRejection::NotGranted), protects: decision.protects, ..default };
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
        Outcome::DemandZero { .. } | Outcome::Map { .. } => {}
    }
    decision
}

/// The frame number of a one-frame run.
fn frame_number(run: &FrameRun) -> u64 {
    (run.address() / PAGE_SIZE) as u64
}

/// Runs `body` on the frame table, building it on first use over the RAM the frame
/// allocator manages.
fn with_frames<T>(body: impl FnOnce(&mut FrameTable) -> T) -> T {
    without_interrupts(|| {
        let mut frames = FRAMES.lock();
        let table = frames.get_or_insert_with(|| {
            let (low, high) = crate::mm::boot_free_ranges()
                .map(|ranges| ranges.iter().fold((usize::MAX, 0), |(low, high), (start, end)| (low.min(start), high.max(end))))
                .unwrap_or((PAGE_SIZE, 2 * PAGE_SIZE));
            let base = (low / PAGE_SIZE).max(1) as u64;
            let length = (high.saturating_sub(low) / PAGE_SIZE).max(1) as u64;
            // Boot RAM is at most a few GiB: within MAX_FRAMES, and the base is not 0.
            FrameTable::new(base, length).expect("RAM fits a frame table")
        });
        body(table)
    })
}

/// A zeroed frame for a page of address space `space`, recorded in the frame table as the
/// space's and mapped at `page` (demand-zero, or a kernel copy faulting a page in);
/// `None` when memory is exhausted.
pub fn allocate(space: u64, page: u64) -> Option<FrameRun> {
    let run = frame::allocate_zeroed(1)?;
    let number = frame_number(&run);
    let recorded = with_frames(|frames| frames.claim(number, Owner::AddressSpace(space)).and_then(|()| frames.map(number, space, page)));
    if recorded.is_err() {
        // Outside the table (cannot happen for frames of the boot RAM); refuse rather
        // than hold an unrecorded frame.
        drop(run);
        return None;
    }
    count(&COUNTERS.demand_zero);
    COUNTERS.frames_held.fetch_add(1, Ordering::Relaxed);
    Some(run)
}

/// Gives back a frame [`allocate`] or a grant returned: forgets it in the frame table,
/// then frees it.
pub fn release(run: FrameRun) {
    COUNTERS.frames_held.fetch_sub(1, Ordering::Relaxed);
    release_run(run);
}

/// Forgets a frame in the frame table and frees it (grants are not counted as held until
/// mapped).
fn release_run(run: FrameRun) {
    let number = frame_number(&run);
    let _ = with_frames(|frames| frames.free(number));
    drop(run);
}

/// Frames the frame table records for address space `space` (tests compare it with what
/// the space holds).
pub fn held_by(space: u64) -> u64 {
    with_frames(|frames| frames.held(Owner::AddressSpace(space)))
}

/// Domain `vm` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Vm for crate::ext::glue::KernelFunctions {
    /// A zeroed frame for the fault of `space` being answered (see the declaration).
    fn vm_grant(&self, space: u64) -> u64 {
        without_interrupts(|| {
            let mut raises = RAISES.lock();
            let Some(RaiseState { grant: slot, .. }) = raises.get_mut(&space) else { return 0 };
            if let Some(run) = slot {
                return frame_number(run);
            }
            let Some(run) = frame::allocate_zeroed(1) else { return 0 };
            let number = frame_number(&run);
            if with_frames(|frames| frames.claim(number, Owner::AddressSpace(space))).is_err() {
                return 0;
            }
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
            state.protects.push(PageProtection { page, count, protection });
            1
        })
    }
}
