//! The buffer cache's decision points as events: `cache.Enqueue`, `cache.Evict`,
//! `cache.Writeback` and `cache.ReadAhead` (docs/buffer-cache.md).
//!
//! The cache itself is the policy crate's ([`spindle_service_bcache::Cache`]); whoever owns
//! a cache (the file-system service) hands it an [`EventPolicy`], which implements the
//! crate's [`Policy`] by raising the events:
//!
//! - with nothing bound to an event, the method answers `None` at once (one load: the cache
//!   then uses its default — LRU, write everything, clustered sequential read-ahead);
//! - otherwise it fills the record, and for `cache.Evict` / `cache.Writeback` the list the
//!   `cache` domain's `spindle_cache_candidates` / `spindle_cache_offered` copy from
//!   ([`CacheBlockEntry`]), raises the event outside every lock of this module (raises of
//!   every decision with something bound is serialised by a gate, so the list a handler reads is its raise's),
//!   and maps the answer back (`NO_ANSWER`: `None`).
//!
//! Each event's primary module rejects the answers it can judge from the record and the
//! list (counted as a fault of the binding, which contributes the default: `NO_ANSWER`);
//! the cache core checks every answer again with the crate's `check_*` functions and counts
//! what it refuses ([`spindle_service_bcache::Counters::rejections`]) — an answer can be
//! valid when raised and refused by the core only where the primary module cannot see the
//! cache (a per-file policy's victim outside the candidates, a prefetch above the cache's
//! cap).
//!
//! Per-file policies: every record carries the file as a guardable field (`file`). A
//! binding narrows itself with a guard `file == F`; for an extension, whose guards are
//! fixed when it is built, [`assign`] names the file its bindings are for: the primary
//! modules then impose `file == F` on every binding that owner installs afterwards, so
//! policies for different files coexist, each seeing only its file's events.
//!
//! Application hints ([`set_hint`]): per-file values extensions read with
//! `spindle_cache_file_hint` (`readahead_app`'s count, `evict_pinrange`'s range).
//! Exported state: while a decision is raised, the cache asking is lent ([`VIEW`]) so that
//! `spindle_cache_victims` reads its next victims as they are at that moment.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_abi::event::{
    CACHE_DIRTY, CACHE_ENQUEUE, CACHE_EVICT, CACHE_NO_FILE, CACHE_PINNED, CACHE_READ_AHEAD, CACHE_WRITEBACK, CacheBlockEntry, CacheEnqueue,
    CacheEvict, CacheHint, CachePlacement, CachePrefetch, CacheReadAhead, CacheVictim, CacheWriteback, CacheWritebackSet, EventRecord,
    field_index,
};
use spindle_dispatch::{Authorization, Combiner, DeclarativeGuard, EventTable, InstallRequest, PrimaryModule, Refusal, ResultRejection};
use spindle_service_bcache::{
    Access, BlockInfo, Cache, EnqueueEvent, EvictEvent, FileId, LEVELS, Place, Placement, Policy, Prefetch, ReadAheadEvent, Victim,
    WritebackEvent, WritebackReason, WritebackSet, policy::encode_file,
};

use crate::arch::csr::without_interrupts;

/// How many victims `spindle_cache_victims` copies at most.
pub const EXPORTED_VICTIMS: usize = 64;

static ENQUEUE: spin::Once<Arc<EventTable<CacheEnqueue, CachePlacement>>> = spin::Once::new();
static EVICT: spin::Once<Arc<EventTable<CacheEvict, CacheVictim>>> = spin::Once::new();
static WRITEBACK: spin::Once<Arc<EventTable<CacheWriteback, CacheWritebackSet>>> = spin::Once::new();
static READ_AHEAD: spin::Once<Arc<EventTable<CacheReadAhead, CachePrefetch>>> = spin::Once::new();

/// The candidates of the `cache.Evict` raise in progress (what `spindle_cache_candidates`
/// copies).
static CANDIDATES: spin::Mutex<Vec<CacheBlockEntry>> = spin::Mutex::new(Vec::new());
/// The blocks the `cache.Writeback` raise in progress offers (`spindle_cache_offered`).
static OFFERED: spin::Mutex<Vec<CacheBlockEntry>> = spin::Mutex::new(Vec::new());
/// Application hints: (file, hint) → value.
static HINTS: spin::Mutex<BTreeMap<(u32, u64), u64>> = spin::Mutex::new(BTreeMap::new());
/// Owners whose bindings are imposed a `file == F` or `process == P` guard.
static ASSIGNMENTS: spin::Mutex<BTreeMap<String, Scope>> = spin::Mutex::new(BTreeMap::new());

/// What a policy extension's bindings are narrowed to ([`assign_scope`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One file (an inode): the imposed guard `file == F`.
    File(FileId),
    /// Every file one process uses (a process id): the imposed guard `process == P` —
    /// the events the process's own file-system calls raise.
    Process(u32),
}
/// Serialises the raises made with something bound, whose handlers may read a list
/// ([`CANDIDATES`], [`OFFERED`]) or the lent cache ([`VIEW`]).
static GATE: spin::Mutex<()> = spin::Mutex::new(());

/// Runs `body` holding [`GATE`], yielding (not spinning) while another strand holds it.
fn gated<T>(body: impl FnOnce() -> T) -> T {
    loop {
        if let Some(_gate) = GATE.try_lock() {
            return body();
        }
        crate::sched::yield_now();
    }
}

/// Registers the four events with their primary modules (at boot, from `services::init`).
pub fn init() {
    let dispatcher = crate::events::dispatcher();
    ENQUEUE.call_once(|| dispatcher.register(&CACHE_ENQUEUE, Arc::new(EnqueueModule)).expect("cache.Enqueue registered twice"));
    EVICT.call_once(|| dispatcher.register(&CACHE_EVICT, Arc::new(EvictModule)).expect("cache.Evict registered twice"));
    WRITEBACK.call_once(|| dispatcher.register(&CACHE_WRITEBACK, Arc::new(WritebackModule)).expect("cache.Writeback registered twice"));
    READ_AHEAD.call_once(|| dispatcher.register(&CACHE_READ_AHEAD, Arc::new(ReadAheadModule)).expect("cache.ReadAhead registered twice"));
}

/// From now on, every binding `owner` (an extension's name) installs on a `cache.*` event
/// or `lock.Grant` is for `file` only: the primary module imposes the guard `file == file`. `None` removes
/// the assignment (bindings installed later see every file). Bindings installed before are
/// not changed: assign, then load.
pub fn assign(owner: &str, file: Option<FileId>) {
    assign_scope(owner, file.map(Scope::File));
}

/// [`assign`] for any [`Scope`]: a file, or one process's calls (`process == P`; only
/// the `cache.*` events carry a process — `lock.Grant` refuses such an owner's binding).
pub fn assign_scope(owner: &str, scope: Option<Scope>) {
    without_interrupts(|| {
        let mut assignments = ASSIGNMENTS.lock();
        match scope {
            Some(scope) => assignments.insert(String::from(owner), scope),
            None => assignments.remove(owner),
        }
    });
}

/// The file `owner`'s cache bindings are assigned to ([`assign`]).
pub fn assignment(owner: &str) -> Option<FileId> {
    match scope_of(owner) {
        Some(Scope::File(file)) => Some(file),
        _ => None,
    }
}

/// What `owner`'s cache bindings are narrowed to ([`assign_scope`]).
pub fn scope_of(owner: &str) -> Option<Scope> {
    without_interrupts(|| ASSIGNMENTS.lock().get(owner).copied())
}

/// Sets (`Some`) or clears (`None`) an application hint of `file`
/// ([`spindle_abi::event::CacheHint`]: the read-ahead count, the pinned range).
pub fn set_hint(file: FileId, hint: u64, value: Option<u64>) {
    without_interrupts(|| {
        let mut hints = HINTS.lock();
        match value {
            Some(value) => hints.insert((file, hint), value),
            None => hints.remove(&(file, hint)),
        }
    });
}

/// Forgets every hint of `file` (its unlink).
pub fn clear_hints(file: FileId) {
    without_interrupts(|| HINTS.lock().retain(|&(owner, _), _| owner != file));
}

/// Exported state: `spindle_cache_victims` copies the next victims of the cache lent here
/// — the cache whose decision is being raised (every decision method's `cache`), read as it is at
/// the moment of the call; outside a raise, the file system's cache if no strand is inside
/// the file system (else nothing). Nothing is copied while nobody asks: a cached read with
/// a policy bound (but filtered out by its guard) pays only for lending the reference.
static VIEW: crate::sched::Lent<Cache> = crate::sched::Lent::new();

/// Runs `reader` on the cache the exported state is read from: the one lent for the raise
/// in progress ([`VIEW`]), else the file system's if no strand is inside it (`None`: busy or
/// not mounted).
fn with_exported_cache<T>(reader: impl FnOnce(&Cache) -> T) -> Option<T> {
    let mut reader = Some(reader);
    if let Some(value) = VIEW.read(|cache| cache.and_then(|cache| reader.take().map(|read| read(cache)))) {
        return Some(value);
    }
    reader.and_then(crate::services::fs::with_idle_cache)
}

const _: () = assert!(spindle_abi::event::CACHE_COUNTERS.len() == 9, "cache_counters copies nine values");

/// Copies `cache`'s next victims (at most [`EXPORTED_VICTIMS`]) into `destination` as
/// whole [`CacheBlockEntry`] records; how many.
fn copy_victims(cache: &Cache, destination: &mut [u8]) -> u64 {
    let mut victims = [BlockInfo::default(); EXPORTED_VICTIMS];
    let wanted = (destination.len() / CacheBlockEntry::SIZE).min(EXPORTED_VICTIMS);
    let count = cache.next_victims(&mut victims[..wanted]);
    for (chunk, victim) in destination.chunks_exact_mut(CacheBlockEntry::SIZE).zip(&victims[..count]) {
        chunk.copy_from_slice(&entry(victim).to_bytes());
    }
    count as u64
}

/// A block as the `cache` domain copies it out.
pub fn entry(info: &BlockInfo) -> CacheBlockEntry {
    CacheBlockEntry {
        block: info.block,
        file_block: info.file_block,
        age: info.age,
        file: encode_file(info.file),
        references: info.references,
        level: u32::from(info.level),
        state: state_bits(info),
    }
}

fn state_bits(info: &BlockInfo) -> u32 {
    (if info.dirty { CACHE_DIRTY } else { 0 }) | (if info.pinned { CACHE_PINNED } else { 0 })
}

/// The imposed guard for `request`'s owner, if it is assigned a scope: `file == F`, or
/// `process == P` (refused for a record without a process field).
pub(super) fn authorize_for_file<A: EventRecord>(request: &InstallRequest<'_, A>) -> Result<Authorization<A>, Refusal> {
    let (name, value) = match scope_of(request.owner) {
        None => return Ok(Authorization::allow()),
        Some(Scope::File(file)) => ("file", file),
        Some(Scope::Process(process)) => ("process", process),
    };
    let field = field_index(A::FIELDS, name).ok_or(match name {
        "file" => Refusal::Other("the record has no file field"),
        _ => Refusal::Other("a per-process policy cannot bind this event: its record has no process field"),
    })?;
    Ok(Authorization::allow().impose(DeclarativeGuard::equals(field, u64::from(value))))
}

/// `cache.Enqueue`'s primary module.
struct EnqueueModule;

impl PrimaryModule<CacheEnqueue, CachePlacement> for EnqueueModule {
    fn name(&self) -> &str {
        "cache"
    }

    fn default_result(&self, _: &CacheEnqueue) -> CachePlacement {
        CachePlacement { place: CachePlacement::NO_ANSWER, level: 0 }
    }

    fn combiner(&self) -> Combiner<CachePlacement> {
        Combiner::FirstNonDefault
    }

    fn authorize(&self, request: &InstallRequest<'_, CacheEnqueue>) -> Result<Authorization<CacheEnqueue>, Refusal> {
        authorize_for_file(request)
    }

    fn validates_results(&self) -> bool {
        true
    }

    fn validate_result(&self, _: &CacheEnqueue, result: &CachePlacement) -> Result<(), ResultRejection> {
        match result.place {
            CachePlacement::NO_ANSWER => Ok(()),
            CachePlacement::MRU | CachePlacement::LRU | CachePlacement::KEEP if result.level < CacheEnqueue::LEVELS => Ok(()),
            CachePlacement::MRU | CachePlacement::LRU | CachePlacement::KEEP => Err(ResultRejection { reason: "names a queue level that does not exist" }),
            _ => Err(ResultRejection { reason: "names no place (MRU, LRU or KEEP)" }),
        }
    }
}

/// `cache.Evict`'s primary module.
struct EvictModule;

impl PrimaryModule<CacheEvict, CacheVictim> for EvictModule {
    fn name(&self) -> &str {
        "cache"
    }

    fn default_result(&self, _: &CacheEvict) -> CacheVictim {
        CacheVictim { block: CacheVictim::NO_ANSWER }
    }

    fn combiner(&self) -> Combiner<CacheVictim> {
        Combiner::FirstNonDefault
    }

    fn authorize(&self, request: &InstallRequest<'_, CacheEvict>) -> Result<Authorization<CacheEvict>, Refusal> {
        authorize_for_file(request)
    }

    fn validates_results(&self) -> bool {
        true
    }

    fn validate_result(&self, args: &CacheEvict, result: &CacheVictim) -> Result<(), ResultRejection> {
        // A per-file policy may name any block of its file: only the cache can tell.
        if result.block == CacheVictim::NO_ANSWER || args.scope != CACHE_NO_FILE {
            return Ok(());
        }
        match without_interrupts(|| CANDIDATES.lock().iter().find(|candidate| candidate.block == result.block).copied()) {
            Some(candidate) if candidate.pinned() => Err(ResultRejection { reason: "the victim is pinned" }),
            Some(_) => Ok(()),
            None => Err(ResultRejection { reason: "the victim is not a candidate" }),
        }
    }
}

/// `cache.Writeback`'s primary module.
struct WritebackModule;

/// The mask of the first `offered` blocks.
fn mask_of(offered: u32) -> u64 {
    if offered >= 64 { u64::MAX } else { (1u64 << offered) - 1 }
}

impl PrimaryModule<CacheWriteback, CacheWritebackSet> for WritebackModule {
    fn name(&self) -> &str {
        "cache"
    }

    fn default_result(&self, args: &CacheWriteback) -> CacheWritebackSet {
        CacheWritebackSet { mask: mask_of(args.offered) }
    }

    fn combiner(&self) -> Combiner<CacheWritebackSet> {
        Combiner::FirstNonDefault
    }

    fn authorize(&self, request: &InstallRequest<'_, CacheWriteback>) -> Result<Authorization<CacheWriteback>, Refusal> {
        authorize_for_file(request)
    }

    fn validates_results(&self) -> bool {
        true
    }

    fn validate_result(&self, args: &CacheWriteback, result: &CacheWritebackSet) -> Result<(), ResultRejection> {
        if result.mask & !mask_of(args.offered) == 0 { Ok(()) } else { Err(ResultRejection { reason: "selects a block that was not offered" }) }
    }
}

/// `cache.ReadAhead`'s primary module.
struct ReadAheadModule;

impl PrimaryModule<CacheReadAhead, CachePrefetch> for ReadAheadModule {
    fn name(&self) -> &str {
        "cache"
    }

    fn default_result(&self, _: &CacheReadAhead) -> CachePrefetch {
        CachePrefetch { first: 0, count: CachePrefetch::NO_ANSWER }
    }

    fn combiner(&self) -> Combiner<CachePrefetch> {
        Combiner::FirstNonDefault
    }

    fn authorize(&self, request: &InstallRequest<'_, CacheReadAhead>) -> Result<Authorization<CacheReadAhead>, Refusal> {
        authorize_for_file(request)
    }

    fn validates_results(&self) -> bool {
        true
    }

    fn validate_result(&self, args: &CacheReadAhead, result: &CachePrefetch) -> Result<(), ResultRejection> {
        // The cap is the cache's: the core checks it.
        if result.count == CachePrefetch::NO_ANSWER || result.count == 0 {
            return Ok(());
        }
        match result.first.checked_add(result.count) {
            Some(end) if end <= u64::from(args.file_blocks) && result.count <= u64::from(u32::MAX) => Ok(()),
            _ => Err(ResultRejection { reason: "the prefetch reaches past the end of the file" }),
        }
    }
}

/// A [`Policy`] that raises the `cache.*` events (see the module documentation).
///
/// [`EventPolicy::whole_cache`] is the cache-wide policy; [`EventPolicy::for_file`] a
/// per-file one, whose `cache.Evict` answers may also name any evictable block of its file
/// ([`Policy::scope`]) and whose `cache.Writeback` raises carry its file. The events'
/// `file` field is always the file of the block concerned, so bindings guarded on a file
/// see that file's blocks whichever policy raises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventPolicy {
    /// The file this policy is for (`None`: the whole cache).
    pub file: Option<FileId>,
    /// The process the records name (`None`: the running strand's, `sched::current_process`).
    pub on_behalf_of: Option<u32>,
}

impl EventPolicy {
    /// The policy of the whole cache.
    pub const fn whole_cache() -> EventPolicy {
        EventPolicy { file: None, on_behalf_of: None }
    }

    /// The policy of `file`.
    pub const fn for_file(file: FileId) -> EventPolicy {
        EventPolicy { file: Some(file), on_behalf_of: None }
    }

    /// The same policy, its records naming process `process` whoever runs (tests of
    /// per-process bindings).
    pub const fn on_behalf_of(self, process: u32) -> EventPolicy {
        EventPolicy { on_behalf_of: Some(process), ..self }
    }

    /// The process the records name now.
    fn process(&self) -> u32 {
        self.on_behalf_of.unwrap_or_else(|| u32::try_from(crate::sched::current_process()).unwrap_or(u32::MAX))
    }
}

/// Raises `args` on `table` if a handler could run for it (its guards' index names a
/// candidate; else `None`: the default, counted as a defaulted raise), holding [`GATE`],
/// with `list` (the blocks the handlers read: [`CANDIDATES`], [`OFFERED`]) filled for the
/// raise and emptied after it, and `cache` lent to `spindle_cache_victims` ([`VIEW`]) — so
/// the lists and the cache a handler reads are its own raise's, and a raise that no guard
/// lets through costs one index lookup.
fn raise_with_view<A: EventRecord, R: EventRecord>(
    table: &EventTable<A, R>,
    args: &A,
    cache: &Cache,
    list: Option<(&spin::Mutex<Vec<CacheBlockEntry>>, &[BlockInfo])>,
) -> Option<R> {
    if !table.would_run(args) {
        return None;
    }
    Some(gated(|| {
        if let Some((list, blocks)) = list {
            let entries: Vec<CacheBlockEntry> = blocks.iter().map(entry).collect();
            without_interrupts(|| *list.lock() = entries);
        }
        let answer = VIEW.lend(cache, || crate::events::raise(table, args));
        if let Some((list, _)) = list {
            without_interrupts(|| list.lock().clear());
        }
        answer
    }))
}

/// The table of an event, if it has a binding (else `None`: answer the default).
fn bound<A: EventRecord, R: EventRecord>(table: &spin::Once<Arc<EventTable<A, R>>>) -> Option<&Arc<EventTable<A, R>>> {
    table.get().filter(|table| table.has_bindings())
}

fn access_code(access: Access) -> u8 {
    match access {
        Access::Read => CacheEnqueue::READ,
        Access::Write => CacheEnqueue::WRITE,
        Access::Prefetch => CacheEnqueue::PREFETCH,
    }
}

/// The `cache.Enqueue` record of `event`, made by `process`'s call.
pub fn enqueue_record(event: &EnqueueEvent, process: u32) -> CacheEnqueue {
    CacheEnqueue {
        block: event.info.block,
        file_block: event.info.file_block,
        file: encode_file(event.info.file),
        references: event.info.references,
        level: event.info.level,
        access: access_code(event.access),
        first: u8::from(event.first),
        state: state_bits(&event.info) as u8,
        process,
    }
}

/// The crate's placement for a `cache.Enqueue` answer (`None`: no answer).
pub fn placement(answer: CachePlacement) -> Option<Placement> {
    let place = match answer.place {
        CachePlacement::MRU => Place::Mru,
        CachePlacement::LRU => Place::Lru,
        CachePlacement::KEEP => Place::Keep,
        _ => return None,
    };
    // An out-of-range level stays out of range, so the core refuses and counts it.
    Some(Placement { place, level: u8::try_from(answer.level).unwrap_or(u8::MAX) })
}

impl Policy for EventPolicy {
    fn scope(&self) -> Option<FileId> {
        self.file
    }

    fn enqueue(&mut self, event: &EnqueueEvent, cache: &Cache) -> Option<Placement> {
        let table = bound(&ENQUEUE)?;
        placement(raise_with_view(table, &enqueue_record(event, self.process()), cache, None)?)
    }

    fn evict(&mut self, event: &EvictEvent, candidates: &[BlockInfo], cache: &Cache) -> Option<Victim> {
        let table = bound(&EVICT)?;
        let args = CacheEvict {
            block: event.block,
            file_block: event.file_block,
            file: encode_file(event.file),
            candidates: candidates.len() as u16,
            prefetch: u16::from(event.prefetch),
            scope: encode_file(self.file),
            process: self.process(),
        };
        let answer = raise_with_view(table, &args, cache, Some((&CANDIDATES, candidates)))?;
        (answer.block != CacheVictim::NO_ANSWER).then_some(Victim { block: answer.block })
    }

    fn writeback(&mut self, event: &WritebackEvent, offered: &[BlockInfo], cache: &Cache) -> Option<WritebackSet> {
        let table = bound(&WRITEBACK)?;
        let args = CacheWriteback {
            file: encode_file(self.file),
            reason: match event.reason {
                WritebackReason::Sync => CacheWriteback::SYNC,
                WritebackReason::Pressure => CacheWriteback::PRESSURE,
            },
            dirty: event.dirty,
            limit: event.limit,
            capacity: event.capacity,
            offered: event.offered,
            process: self.process(),
        };
        let answer = raise_with_view(table, &args, cache, Some((&OFFERED, offered)))?;
        Some(WritebackSet { mask: answer.mask })
    }

    fn read_ahead(&mut self, event: &ReadAheadEvent, cache: &Cache) -> Option<Prefetch> {
        let table = bound(&READ_AHEAD)?;
        let args = CacheReadAhead {
            file_block: event.file_block,
            ahead: event.ahead,
            // A file has fewer than 2^32 blocks (the file system's largest is about 2^20).
            file_blocks: u32::try_from(event.file_blocks).unwrap_or(u32::MAX),
            file: event.file,
            run: event.run,
            process: self.process(),
        };
        let answer = raise_with_view(table, &args, cache, None)?;
        (answer.count != CachePrefetch::NO_ANSWER).then(|| Prefetch { first: answer.first, count: u32::try_from(answer.count).unwrap_or(u32::MAX) })
    }
}

/// Copies `entries` into `destination` as whole [`CacheBlockEntry`] records; how many.
fn copy_entries(entries: &spin::Mutex<Vec<CacheBlockEntry>>, destination: &mut [u8]) -> u64 {
    without_interrupts(|| {
        let entries = entries.lock();
        let mut copied = 0;
        for (chunk, entry) in destination.chunks_exact_mut(CacheBlockEntry::SIZE).zip(entries.iter()) {
            chunk.copy_from_slice(&entry.to_bytes());
            copied += 1;
        }
        copied
    })
}

/// Domain `cache` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Cache for crate::ext::glue::KernelFunctions {
    /// The candidates of the `cache.Evict` raise being answered.
    fn cache_candidates(&self, destination: &mut [u8]) -> u64 {
        copy_entries(&CANDIDATES, destination)
    }

    /// The blocks the `cache.Writeback` raise being answered offers.
    fn cache_offered(&self, destination: &mut [u8]) -> u64 {
        copy_entries(&OFFERED, destination)
    }

    /// The next victims of the cache whose decision is being raised, or of the idle file
    /// system's cache ([`VIEW`]).
    fn cache_victims(&self, destination: &mut [u8]) -> u64 {
        with_exported_cache(|cache| copy_victims(cache, destination)).unwrap_or(0)
    }

    /// The counters of the same cache as `cache_victims`.
    fn cache_counters(&self, destination: &mut [u8]) -> u64 {
        with_exported_cache(|cache| {
            let counters = cache.counters();
            let values = [
                counters.hits,
                counters.misses,
                counters.prefetches,
                counters.prefetch_hits,
                counters.prefetch_unused,
                counters.evictions,
                counters.writebacks,
                counters.write_errors,
                counters.rejections.iter().sum(),
            ];
            let mut copied = 0;
            for (chunk, value) in destination.chunks_exact_mut(8).zip(values) {
                chunk.copy_from_slice(&value.to_le_bytes());
                copied += 1;
            }
            copied
        })
        .unwrap_or(0)
    }

    /// Resident (low half) and dirty (high half) blocks of `file` in the same cache.
    fn cache_file_blocks(&self, file: u64) -> u64 {
        let Ok(file) = u32::try_from(file) else { return 0 };
        with_exported_cache(|cache| {
            let counts = cache.file_counts(file);
            u64::from(counts.resident) | u64::from(counts.dirty) << 32
        })
        .unwrap_or(0)
    }

    /// An application hint of a file.
    fn cache_file_hint(&self, file: u64, hint: u64) -> u64 {
        let Ok(file) = u32::try_from(file) else { return CacheHint::UNSET };
        without_interrupts(|| HINTS.lock().get(&(file, hint)).copied()).unwrap_or(CacheHint::UNSET)
    }
}

const _: () = assert!(LEVELS as u32 == CacheEnqueue::LEVELS);
const _: () = assert!(spindle_service_bcache::EVICT_CANDIDATES == CacheEvict::MAX_CANDIDATES);
const _: () = assert!(spindle_service_bcache::WRITEBACK_BATCH == CacheWriteback::MAX_OFFERED);
const _: () = assert!(spindle_service_bcache::policy::NO_FILE == CACHE_NO_FILE);
