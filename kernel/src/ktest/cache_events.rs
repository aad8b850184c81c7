//! Tests of the buffer cache's and the lock service's events (`services::cache_events`,
//! `services::lock_events`): a small cache over an in-memory device, driven by a scripted
//! access sequence through [`EventPolicy`], serves exactly like the buffer cache's reference
//! policy when each policy extension (built in, native, Wasm, user-level) answers; broken
//! answers are rejected and the default used (counted); bindings assigned to different
//! files see only their file's events; `lockgrant_fifo` grants like the lock service's FIFO
//! on a scripted lock sequence (and unlike FRP); and loading, running and unloading a policy
//! leaves no heap behind.

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{
    CACHE_ENQUEUE, CACHE_EVICT, CACHE_READ_AHEAD, CACHE_WRITEBACK, CacheEnqueue, CacheEvict, CacheHint, CachePlacement, CachePrefetch,
    CacheReadAhead, CacheVictim, CacheWriteback, CacheWritebackSet, LOCK_GRANT, LockGrant, LockGrantChoice,
};
use spindle_dispatch::{BindingSpec, HandlerFault, handler_fn};
use spindle_service_bcache::{
    AppReadAhead, BLOCK_SIZE, BlockDevice, BlockInfo, Cache, CachedDevice, Config, Counters, DefaultPolicy, Event, Lfu, Mru, Owner, PinRange, Policy,
    Prefetch, Range, ReadAheadEvent, WritebackReason,
};
use spindle_service_locks::{Decision, GrantPolicy, LockConfig, LockKind, LockTable, Range as ByteRange, Requested};

use super::{KernelTest, TestResult};
use super::text;
use crate::ensure;
use crate::ext::{self, Preference};
use crate::services::cache_events::{self, EventPolicy};
use crate::services::lock_events::EventGrantPolicy;

/// The tests.
pub const TESTS: &[KernelTest] = &[
    KernelTest { name: "cache_events::nothing_bound_is_the_default", run: || clean(nothing_bound_is_the_default) },
    KernelTest { name: "cache_events::policies_match_the_reference_in_every_technology", run: || clean(policies_match_the_reference_in_every_technology) },
    KernelTest { name: "cache_events::broken_answers_are_rejected_and_the_default_used", run: || clean(broken_answers_are_rejected_and_the_default_used) },
    KernelTest { name: "cache_events::per_file_bindings_see_only_their_file", run: || clean(per_file_bindings_see_only_their_file) },
    KernelTest { name: "cache_events::per_file_extension_in_every_technology", run: || clean(per_file_extension_in_every_technology) },
    KernelTest { name: "cache_events::lockgrant_fifo_matches_fifo_in_every_technology", run: || clean(lockgrant_fifo_matches_fifo_in_every_technology) },
    KernelTest { name: "cache_events::broken_lock_answers_fall_back_to_frp", run: || clean(broken_lock_answers_fall_back_to_frp) },
    KernelTest { name: "cache_events::policy_rounds_leave_no_heap_behind", run: || clean(policy_rounds_leave_no_heap_behind) },
    KernelTest { name: "cache_events::exported_victims_are_the_cache_at_the_raise", run: || clean(exported_victims_are_the_cache_at_the_raise) },
    KernelTest { name: "cache_events::per_process_extension_in_every_technology", run: || clean(per_process_extension_in_every_technology) },
    KernelTest { name: "cache_events::faulty_policy_is_contained_in_every_technology", run: || clean(faulty_policy_is_contained_in_every_technology) },
];

/// The file the scripted workload reads.
const FILE: u32 = 5;
/// A second file (per-file tests).
const OTHER: u32 = 9;
/// Blocks in each file.
const FILE_BLOCKS: u64 = 24;
/// Buffers in the test cache.
const CAPACITY: usize = 8;
/// Every technology, in the order the disk tests use.
const TECHNOLOGIES: [Preference; 4] = [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User];

/// Events of the tests, for the binding and fault checks.
const EVENT_NAMES: [&str; 5] = ["cache.Enqueue", "cache.Evict", "cache.Writeback", "cache.ReadAhead", "lock.Grant"];

fn debug(error: impl core::fmt::Debug) -> String {
    alloc::format!("{error:?}")
}

/// Runs `test`, then requires that nothing is left bound to the events and no assignment
/// or hint is left (whether the test passed or not; its own failure is reported first).
fn clean(test: fn() -> TestResult) -> TestResult {
    let outcome = test();
    for owner in ["evict_mru", "evict_lfu", "evict_pinrange", "readahead_app", "lockgrant_fifo", "cache_faulty", "test.file-a", "test.file-b"] {
        cache_events::assign(owner, None);
    }
    cache_events::clear_hints(FILE);
    cache_events::clear_hints(OTHER);
    outcome?;
    let left: Vec<(String, usize)> = crate::events::dispatcher()
        .snapshot()
        .into_iter()
        .filter(|event| EVENT_NAMES.contains(&event.name) && !event.bindings.is_empty())
        .map(|event| (String::from(event.name), event.bindings.len()))
        .collect();
    ensure!(left.is_empty(), "bindings left after the test: {left:?}");
    Ok(())
}

/// A device of zeroed blocks that logs every read and write.
#[derive(Default)]
struct LoggingDevice {
    log: Vec<(u8, u64)>,
}

impl BlockDevice for LoggingDevice {
    type Error = ();

    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), ()> {
        self.log.push((b'r', block));
        buf[0] = block as u8;
        Ok(())
    }

    fn write(&mut self, block: u64, _: &[u8; BLOCK_SIZE]) -> Result<(), ()> {
        self.log.push((b'w', block));
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ()> {
        Ok(())
    }
}

/// What a run of the script did: the device's log (the eviction decisions show in which
/// blocks are read again), the victim list at the end, and the cache's counters.
#[derive(Debug, PartialEq, Eq)]
struct Trace {
    log: Vec<(u8, u64)>,
    victims: Vec<u64>,
    counters: Counters,
}

/// The device block of block `file_block` of `file`.
fn device_block(file: u32, file_block: u64) -> u64 {
    u64::from(file) * 100 + file_block
}

/// One scripted access: a read (with read-ahead) or a write of a file block.
#[derive(Clone, Copy)]
enum Access {
    Read(u32, u64),
    Write(u32, u64),
}

/// The script: three loops over 12 blocks of [`FILE`] (larger than the cache: MRU keeps
/// part of the loop, LRU none), a hot block read between them (LFU keeps it), a jump
/// backwards (read-ahead restarts), writes (dirty victims written first), and, with
/// `other`, the same interleaved on [`OTHER`].
fn script(other: bool) -> Vec<Access> {
    let mut accesses = Vec::new();
    for round in 0..3u64 {
        for block in 0..12u64 {
            accesses.push(Access::Read(FILE, block));
            if block % 4 == 3 {
                accesses.push(Access::Read(FILE, 20));
            }
            if other && block % 3 == 0 {
                accesses.push(Access::Read(OTHER, block + round));
            }
        }
        accesses.push(Access::Write(FILE, 2 + round));
        accesses.push(Access::Read(FILE, 1));
    }
    accesses
}

/// Runs `accesses` on a fresh cache of [`CAPACITY`] buffers decided by `policy`, with a
/// sync round at the end (`cache.Writeback`).
fn run<P: Policy>(policy: P, accesses: &[Access]) -> Result<Trace, String> {
    let mut config = Config::new(CAPACITY);
    config.prefetch_cap = 4;
    let mut cached = CachedDevice::new(LoggingDevice::default(), config, policy).map_err(text)?;
    let mut buf = [0u8; 16];
    for &access in accesses {
        match access {
            Access::Read(file, file_block) => {
                cached.read_file(file, file_block, FILE_BLOCKS, |block| Some(device_block(file, block)), 0, &mut buf).map_err(debug)?;
            }
            Access::Write(file, file_block) => cached.write(device_block(file, file_block), Owner::of(file, file_block), 0, &[7u8; 16]).map_err(debug)?,
        }
    }
    cached.writeback(WritebackReason::Sync).map_err(debug)?;
    let mut victims = [BlockInfo::default(); CAPACITY];
    let count = cached.cache().next_victims(&mut victims);
    let counters = cached.cache().counters();
    let (device, _) = cached.into_parts();
    Ok(Trace { log: device.log, victims: victims[..count].iter().map(|victim| victim.block).collect(), counters })
}

/// Loads `name` with `preference`, runs `body`, unloads it (waiting for a user-level
/// server to end), and requires it to have stayed running.
fn with_extension<T>(name: &str, preference: Preference, body: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let extension = ext::load(name, preference).map_err(|error| alloc::format!("loading {name} ({}): {error}", preference.label()))?;
    let technology = extension.technology;
    drop(extension);
    let outcome = body();
    let state = ext::find(name).map(|extension| extension.state.lock().clone());
    let server = ext::user::serving_pid(name);
    ext::unload(name).map_err(text)?;
    if let Some(pid) = server {
        ensure!(crate::proc::wait_until_reaped(pid, 200), "{name} {technology}: serving process {pid} did not end after the unload");
    }
    crate::events::quiescent();
    crate::events::reclaim();
    let outcome = outcome.map_err(|error| alloc::format!("{name} {technology}: {error}"))?;
    ensure!(state == Some(ext::ExtensionState::Running), "{name} {technology}: state {state:?}");
    Ok(outcome)
}

/// Faults (refused answers among them) of `event`'s bindings, removed ones included.
fn faults(event: &str) -> u64 {
    crate::events::dispatcher()
        .snapshot()
        .into_iter()
        .filter(|snapshot| snapshot.name == event)
        .map(|snapshot| snapshot.removed.faults + snapshot.bindings.iter().map(|binding| binding.counters.faults).sum::<u64>())
        .sum()
}

/// With nothing bound, [`EventPolicy`] answers nothing: the run is the default's.
fn nothing_bound_is_the_default() -> TestResult {
    let accesses = script(true);
    let default = run(DefaultPolicy, &accesses)?;
    ensure!(run(EventPolicy::whole_cache(), &accesses)? == default, "the whole-cache event policy differs from the default");
    ensure!(run(EventPolicy::for_file(FILE), &accesses)? == default, "the per-file event policy differs from the default");
    ensure!(default.counters.evictions > 0 && default.counters.prefetches > 0, "the script neither evicts nor prefetches: {:?}", default.counters);
    Ok(())
}

/// Each cache policy extension, in every technology, gives the run of the buffer cache's
/// reference policy (and not the default's), with no answer refused.
fn policies_match_the_reference_in_every_technology() -> TestResult {
    let accesses = script(false);
    let default = run(DefaultPolicy, &accesses)?;
    let pinned = Range { file: FILE, first: 0, end: evict_pinrange::DEFAULT_PINNED_BLOCKS };
    let cases: [(&str, Trace, EventPolicy, bool); 4] = [
        ("evict_mru", run(Mru, &accesses)?, EventPolicy::whole_cache(), false),
        ("evict_lfu", run(Lfu, &accesses)?, EventPolicy::whole_cache(), false),
        ("evict_pinrange", run(PinRange { range: pinned }, &accesses)?, EventPolicy::for_file(FILE), true),
        ("readahead_app", run(AppReadAhead { count: readahead_app::DEFAULT_COUNT }, &accesses)?, EventPolicy::for_file(FILE), true),
    ];
    for (name, expected, policy, per_file) in cases {
        ensure!(expected.log != default.log, "{name}: the reference reads like the default on this script (a useless test)");
        if per_file {
            cache_events::assign(name, Some(FILE));
        }
        for preference in TECHNOLOGIES {
            let before: Vec<u64> = EVENT_NAMES.iter().map(|event| faults(event)).collect();
            let trace = with_extension(name, preference, || run(policy, &accesses))?;
            let after: Vec<u64> = EVENT_NAMES.iter().map(|event| faults(event)).collect();
            ensure!(trace == expected, "{name} ({}): {trace:?}\n  the reference {expected:?}", preference.label());
            ensure!(before == after, "{name} ({}): answers refused: faults {before:?} -> {after:?}", preference.label());
        }
        cache_events::assign(name, None);
    }
    Ok(())
}

fn garbage_placement(_: &CacheEnqueue) -> Result<CachePlacement, HandlerFault> {
    Ok(CachePlacement { place: CachePlacement::MRU, level: 9 })
}

fn garbage_victim(_: &CacheEvict) -> Result<CacheVictim, HandlerFault> {
    Ok(CacheVictim { block: 0xdead })
}

fn garbage_writeback(args: &CacheWriteback) -> Result<CacheWritebackSet, HandlerFault> {
    Ok(CacheWritebackSet { mask: 1u64 << args.offered.min(63) | 1 })
}

fn garbage_prefetch(args: &CacheReadAhead) -> Result<CachePrefetch, HandlerFault> {
    Ok(CachePrefetch { first: u64::from(args.file_blocks) - 1, count: 3 })
}

/// Handlers answering nonsense on all four events: every answer is refused by the
/// primary module (a fault of the binding, counted) and the run is the default's; a
/// per-file policy's victim the primary module cannot judge is refused by the cache
/// itself (counted in its rejections) and the default victim used.
fn broken_answers_are_rejected_and_the_default_used() -> TestResult {
    let accesses = script(false);
    let default = run(DefaultPolicy, &accesses)?;
    let dispatcher = crate::events::dispatcher();
    let before: Vec<u64> = EVENT_NAMES[..4].iter().map(|event| faults(event)).collect();
    let bindings = [
        dispatcher.install(&CACHE_ENQUEUE, BindingSpec::new("test", handler_fn("test.garbage", garbage_placement))).map_err(text)?,
        dispatcher.install(&CACHE_EVICT, BindingSpec::new("test", handler_fn("test.garbage", garbage_victim))).map_err(text)?,
        dispatcher.install(&CACHE_WRITEBACK, BindingSpec::new("test", handler_fn("test.garbage", garbage_writeback))).map_err(text)?,
        dispatcher.install(&CACHE_READ_AHEAD, BindingSpec::new("test", handler_fn("test.garbage", garbage_prefetch))).map_err(text)?,
    ];
    let whole = run(EventPolicy::whole_cache(), &accesses);
    let after: Vec<u64> = EVENT_NAMES[..4].iter().map(|event| faults(event)).collect();
    for binding in bindings {
        let _ = dispatcher.uninstall(binding);
    }
    // A per-file policy may name any block of its file: the primary module lets the
    // answer through and the cache refuses it (0xdead is not resident). A fresh binding:
    // the first was disabled by the circuit breaker after three refused answers.
    let binding = dispatcher.install(&CACHE_EVICT, BindingSpec::new("test", handler_fn("test.garbage", garbage_victim))).map_err(text)?;
    let per_file = run(EventPolicy::for_file(FILE), &accesses);
    let _ = dispatcher.uninstall(binding);
    let whole = whole?;
    ensure!(whole.log == default.log && whole.victims == default.victims, "garbage answers changed the run: {whole:?}\n  the default {default:?}");
    ensure!(whole.counters.rejections == [0; 4], "the cache saw answers the primary modules should have refused: {:?}", whole.counters.rejections);
    for (index, event) in EVENT_NAMES[..4].iter().enumerate() {
        ensure!(after[index] > before[index], "{event}: no answer was refused ({} faults before and after)", before[index]);
    }
    let per_file = per_file?;
    ensure!(per_file.log == default.log, "a refused per-file victim changed the run: {per_file:?}");
    ensure!(per_file.counters.rejected(Event::Evict) > 0, "the cache refused no per-file victim: {:?}", per_file.counters);
    Ok(())
}

/// `cache.Evict` raises [`victims_reader`] saw, and how many of them read a victim list
/// that did not begin with the raise's candidates.
static EVICTIONS_SEEN: AtomicU64 = AtomicU64::new(0);
static VIEW_MISMATCHES: AtomicU64 = AtomicU64::new(0);

/// Blocks of the [`spindle_abi::event::CacheBlockEntry`] records a kernel function wrote.
fn entry_blocks(bytes: &[u8], count: u64) -> Vec<u64> {
    let records = bytes.chunks_exact(spindle_abi::event::CacheBlockEntry::SIZE).take(count as usize);
    records.filter_map(spindle_abi::event::CacheBlockEntry::from_bytes).map(|entry| entry.block).collect()
}

/// A `cache.Evict` handler that reads the exported victim list and the candidates through
/// the `cache` domain's kernel functions (as an extension does) and checks that the list
/// begins with the candidates — the cache as it is at the raise. No answer.
fn victims_reader(args: &CacheEvict) -> Result<CacheVictim, HandlerFault> {
    use spindle_abi::host::domains::Cache as _;
    let mut victims = [0u8; 64 * spindle_abi::event::CacheBlockEntry::SIZE];
    let mut candidates = [0u8; 64 * spindle_abi::event::CacheBlockEntry::SIZE];
    let listed = crate::ext::glue::KernelFunctions.cache_victims(&mut victims);
    let offered = crate::ext::glue::KernelFunctions.cache_candidates(&mut candidates);
    let (victims, candidates) = (entry_blocks(&victims, listed), entry_blocks(&candidates, offered));
    EVICTIONS_SEEN.fetch_add(1, Ordering::Relaxed);
    if offered != u64::from(args.candidates) || candidates.is_empty() || !victims.starts_with(&candidates) {
        VIEW_MISMATCHES.fetch_add(1, Ordering::Relaxed);
    }
    Ok(CacheVictim { block: CacheVictim::NO_ANSWER })
}

/// `spindle_cache_victims` during a raise is the raising cache's victim list at that
/// moment (nothing is copied after operations any more); outside a raise it is the idle
/// file system's cache's.
fn exported_victims_are_the_cache_at_the_raise() -> TestResult {
    let accesses = script(true);
    let default = run(DefaultPolicy, &accesses)?;
    EVICTIONS_SEEN.store(0, Ordering::Relaxed);
    VIEW_MISMATCHES.store(0, Ordering::Relaxed);
    let dispatcher = crate::events::dispatcher();
    let binding = dispatcher.install(&CACHE_EVICT, BindingSpec::new("test", handler_fn("test.victims", victims_reader))).map_err(text)?;
    let viewed = run(EventPolicy::whole_cache(), &accesses);
    let _ = dispatcher.uninstall(binding);
    let viewed = viewed?;
    ensure!(viewed.log == default.log, "a handler giving no answer changed the run");
    let (seen, mismatched) = (EVICTIONS_SEEN.load(Ordering::Relaxed), VIEW_MISMATCHES.load(Ordering::Relaxed));
    ensure!(seen > 0, "the script evicted nothing: a useless test");
    ensure!(mismatched == 0, "{mismatched} of {seen} evictions read a victim list that did not begin with their candidates");
    // Outside a raise: the file system's cache (mounted by the call below if needed), once
    // the read-ahead strand is done with it.
    crate::services::fs::settle_read_ahead();
    let (_, expected, _) = crate::services::fs::cache_state(64, None).map_err(text)?;
    use spindle_abi::host::domains::Cache as _;
    let mut victims = [0u8; 64 * spindle_abi::event::CacheBlockEntry::SIZE];
    let listed = crate::ext::glue::KernelFunctions.cache_victims(&mut victims);
    let expected: Vec<u64> = expected.iter().map(|info| info.block).collect();
    ensure!(!expected.is_empty(), "the file system's cache holds nothing: a useless check");
    ensure!(entry_blocks(&victims, listed) == expected, "outside a raise: {:?}, the cache lists {expected:?}", entry_blocks(&victims, listed));
    // The counters and a file's blocks, as the file system reports them.
    crate::services::fs::write_file("/cache-exported", &[7u8; 3 * 4096 + 5]).map_err(text)?;
    crate::services::fs::settle_read_ahead();
    let (_, _, file) = crate::services::fs::cache_state(0, Some("/cache-exported")).map_err(text)?;
    let file = file.ok_or("no per-file state")?;
    let status = crate::services::fs::status().map_err(text)?;
    let mut words = [0u8; 9 * 8];
    let copied = crate::ext::glue::KernelFunctions.cache_counters(&mut words);
    let blocks = crate::ext::glue::KernelFunctions.cache_file_blocks(u64::from(file.inode));
    crate::services::fs::unlink("/cache-exported").map_err(text)?;
    let value = |index: usize| u64::from_le_bytes(words[index * 8..index * 8 + 8].try_into().unwrap_or_default());
    let counters = status.cache;
    let expected = [counters.hits, counters.misses, counters.prefetches, counters.prefetch_hits, counters.prefetch_unused, counters.evictions, counters.writebacks, counters.write_errors, counters.rejections.iter().sum()];
    ensure!(copied == 9, "cache_counters copied {copied} values");
    ensure!((0..9).map(value).eq(expected), "cache_counters {:?}, the file system reports {expected:?}", (0..9).map(value).collect::<Vec<_>>());
    ensure!(file.resident == 4 && blocks == file.resident | file.dirty << 32, "cache_file_blocks {blocks:#x}, the file system reports {file:?}");
    Ok(())
}

/// Files each recording handler saw, one bit per file id below 64.
static SEEN_A: AtomicU64 = AtomicU64::new(0);
static SEEN_B: AtomicU64 = AtomicU64::new(0);

fn record(seen: &AtomicU64, file: u32) {
    seen.fetch_or(1u64 << file.min(63), Ordering::Relaxed);
}

/// Two owners assigned to two files: each binding (on `cache.Enqueue` and
/// `cache.ReadAhead`) sees only its file's events, and both see some.
fn per_file_bindings_see_only_their_file() -> TestResult {
    SEEN_A.store(0, Ordering::Relaxed);
    SEEN_B.store(0, Ordering::Relaxed);
    cache_events::assign("test.file-a", Some(FILE));
    cache_events::assign("test.file-b", Some(OTHER));
    let dispatcher = crate::events::dispatcher();
    let none = |_: &CacheEnqueue| Ok(CachePlacement { place: CachePlacement::NO_ANSWER, level: 0 });
    let bindings = [
        dispatcher
            .install(&CACHE_ENQUEUE, BindingSpec::new("test.file-a", handler_fn("test.a", move |args: &CacheEnqueue| {
                record(&SEEN_A, args.file);
                none(args)
            })))
            .map_err(text)?,
        dispatcher
            .install(&CACHE_ENQUEUE, BindingSpec::new("test.file-b", handler_fn("test.b", move |args: &CacheEnqueue| {
                record(&SEEN_B, args.file);
                none(args)
            })))
            .map_err(text)?,
        dispatcher
            .install(&CACHE_READ_AHEAD, BindingSpec::new("test.file-a", handler_fn("test.a", |args: &CacheReadAhead| {
                record(&SEEN_A, args.file + 32);
                Ok(CachePrefetch { first: 0, count: CachePrefetch::NO_ANSWER })
            })))
            .map_err(text)?,
        dispatcher
            .install(&CACHE_READ_AHEAD, BindingSpec::new("test.file-b", handler_fn("test.b", |args: &CacheReadAhead| {
                record(&SEEN_B, args.file + 32);
                Ok(CachePrefetch { first: 0, count: CachePrefetch::NO_ANSWER })
            })))
            .map_err(text)?,
    ];
    let outcome = run(EventPolicy::whole_cache(), &script(true));
    for binding in bindings {
        let _ = dispatcher.uninstall(binding);
    }
    outcome?;
    let (a, b) = (SEEN_A.load(Ordering::Relaxed), SEEN_B.load(Ordering::Relaxed));
    let only = |file: u32| 1u64 << file | 1u64 << (file + 32);
    ensure!(a == only(FILE), "the binding for file {FILE} saw files {a:#x} (expected {:#x})", only(FILE));
    ensure!(b == only(OTHER), "the binding for file {OTHER} saw files {b:#x} (expected {:#x})", only(OTHER));
    Ok(())
}

/// The reference for [`per_file_extension_in_every_technology`]: application read-ahead of
/// `count` for [`OTHER`] only, the default for every other file.
struct OtherFileReadAhead {
    count: u32,
}

impl Policy for OtherFileReadAhead {
    fn read_ahead(&mut self, event: &ReadAheadEvent, _cache: &Cache) -> Option<Prefetch> {
        (event.file == OTHER).then(|| spindle_service_bcache::app_read_ahead(self.count, event))
    }
}

/// `readahead_app` assigned to [`OTHER`] with the application's count 2 (a hint): reads of
/// [`OTHER`] prefetch 2 blocks, reads of [`FILE`] keep the default read-ahead — in every
/// technology, as the reference says.
fn per_file_extension_in_every_technology() -> TestResult {
    let accesses = script(true);
    let expected = run(OtherFileReadAhead { count: 2 }, &accesses)?;
    ensure!(expected != run(DefaultPolicy, &accesses)?, "the per-file reference reads like the default (a useless test)");
    ensure!(expected != run(AppReadAhead { count: 2 }, &accesses)?, "the per-file reference reads like the whole-cache one (a useless test)");
    cache_events::assign("readahead_app", Some(OTHER));
    cache_events::set_hint(OTHER, CacheHint::READ_AHEAD_COUNT, Some(2));
    for preference in TECHNOLOGIES {
        let trace = with_extension("readahead_app", preference, || run(EventPolicy::whole_cache(), &accesses))?;
        ensure!(trace == expected, "readahead_app ({}) for file {OTHER}: {trace:?}\n  the reference {expected:?}", preference.label());
    }
    Ok(())
}

/// `readahead_app` assigned to process 7 (guard `process == 7`): the calls process 7 makes
/// read ahead as the application rule says (the extension's default count, 4), process 8's
/// keep the kernel's default — in every technology. A per-process scope on `lock.Grant`
/// (whose record names no process) is refused at load with that reason.
fn per_process_extension_in_every_technology() -> TestResult {
    let accesses = script(false);
    cache_events::set_hint(FILE, CacheHint::READ_AHEAD_COUNT, None);
    let app = run(AppReadAhead { count: 4 }, &accesses)?;
    let default = run(DefaultPolicy, &accesses)?;
    ensure!(app != default, "the application rule reads like the default (a useless test)");
    cache_events::assign_scope("readahead_app", Some(cache_events::Scope::Process(7)));
    let mut outcome = Ok(());
    for preference in TECHNOLOGIES {
        let traces = with_extension("readahead_app", preference, || {
            Ok((run(EventPolicy::whole_cache().on_behalf_of(7), &accesses)?, run(EventPolicy::whole_cache().on_behalf_of(8), &accesses)?))
        });
        let checked = traces.and_then(|(seven, eight)| {
            ensure!(seven == app, "readahead_app ({}) for process 7: {seven:?}\n  the reference {app:?}", preference.label());
            ensure!(eight == default, "readahead_app ({}) bound to process 7 changed process 8's reads: {eight:?}", preference.label());
            Ok(())
        });
        if let Err(error) = checked {
            outcome = Err(error);
            break;
        }
    }
    cache_events::assign_scope("readahead_app", None);
    outcome?;
    cache_events::assign_scope("lockgrant_fifo", Some(cache_events::Scope::Process(7)));
    let refused = ext::load("lockgrant_fifo", Preference::BuiltIn);
    cache_events::assign_scope("lockgrant_fifo", None);
    match refused {
        Ok(_) => {
            let _ = ext::unload("lockgrant_fifo");
            Err(String::from("lockgrant_fifo loaded with a per-process scope (lock.Grant has no process field)"))
        }
        Err(error) => {
            let words = alloc::format!("{error}");
            ensure!(words.contains("process field"), "the refusal does not say why: {words}");
            Ok(())
        }
    }
}

/// Loads `cache_faulty` as `preference`, runs `accesses` through a whole-cache
/// [`EventPolicy`], unloads it; the trace and the extension's state at the end.
fn run_faulty(preference: Preference, accesses: &[Access]) -> Result<(Trace, Option<ext::ExtensionState>), String> {
    let extension = ext::load("cache_faulty", preference).map_err(|error| alloc::format!("loading cache_faulty ({}): {error}", preference.label()))?;
    let technology = extension.technology;
    drop(extension);
    let trace = run(EventPolicy::whole_cache(), accesses);
    let state = ext::find("cache_faulty").map(|extension| extension.state.lock().clone());
    let server = ext::user::serving_pid("cache_faulty");
    ext::unload("cache_faulty").map_err(text)?;
    if let Some(pid) = server {
        ensure!(crate::proc::wait_until_reaped(pid, 200), "cache_faulty {technology}: serving process {pid} did not end after the unload");
    }
    crate::events::quiescent();
    crate::events::reclaim();
    Ok((trace.map_err(|error| alloc::format!("cache_faulty {technology}: {error}"))?, state))
}

/// `cache_faulty` in every technology: its invalid answers on all four events (a level
/// that does not exist, a victim that is no candidate, a write-back mask beyond the
/// offered blocks, a prefetch past the end) are each refused and counted, and the cache
/// serves exactly as with nothing bound; a handler that panics or loops on a trigger file
/// is killed for it and the cache goes on with its defaults, the run again the default's.
fn faulty_policy_is_contained_in_every_technology() -> TestResult {
    let accesses = script(false);
    let default = run(DefaultPolicy, &accesses)?;
    for preference in TECHNOLOGIES {
        let before: Vec<u64> = EVENT_NAMES[..4].iter().map(|event| faults(event)).collect();
        let (trace, state) = run_faulty(preference, &accesses)?;
        let after: Vec<u64> = EVENT_NAMES[..4].iter().map(|event| faults(event)).collect();
        let label = preference.label();
        ensure!(trace.log == default.log && trace.victims == default.victims, "cache_faulty ({label}) changed the run: {trace:?}\n  the default {default:?}");
        for (index, event) in EVENT_NAMES[..4].iter().enumerate() {
            ensure!(after[index] > before[index], "cache_faulty ({label}): no answer to {event} was refused");
        }
        ensure!(!matches!(state, Some(ext::ExtensionState::Killed(_))), "cache_faulty ({label}) was killed for refused answers: {state:?}");
        for (file, reason) in [(cache_faulty::PANIC_FILE, "panicked"), (cache_faulty::LOOP_FILE, "overran budget")] {
            // First, before three refused answers trip the binding's circuit breaker.
            let mut triggered = accesses.clone();
            triggered.insert(0, Access::Read(file, 0));
            let expected = run(DefaultPolicy, &triggered)?;
            let (trace, state) = run_faulty(preference, &triggered)?;
            ensure!(trace.log == expected.log, "cache_faulty ({label}) on file {file}: the run differs from the default's: {trace:?}");
            ensure!(
                matches!(&state, Some(ext::ExtensionState::Killed(why)) if why.contains(reason)),
                "cache_faulty ({label}) on file {file}: state {state:?}, expected a kill for {reason:?}"
            );
        }
    }
    Ok(())
}

/// A grant as the lock tests compare them.
type Granted = (u64, u32, bool);

/// The scripted lock sequence on byte 0 of one file (owners 1–6): readers hold, a writer
/// waits, more readers arrive (FRP lets them in ahead of the writer, FIFO queues them),
/// unlocks in turn; the grants in order as (request, owner, answered by the policy).
fn lock_script(policy: &mut dyn GrantPolicy) -> Result<Vec<Granted>, String> {
    let mut table = LockTable::new(LockConfig::DEFAULT).map_err(text)?;
    let byte = ByteRange::with_length(0, 1).map_err(text)?;
    let mut grants: Vec<Granted> = Vec::new();
    let mut note = |grant: &spindle_service_locks::Grant| grants.push((grant.request, grant.owner, grant.decision == Decision::Answer));
    let mut now = 0;
    for (owner, kind) in [(1, LockKind::Read), (2, LockKind::Write), (3, LockKind::Read), (4, LockKind::Read), (5, LockKind::Write), (6, LockKind::Read)] {
        now += 10;
        let outcome = table.request(1, owner, kind, byte, true, now, policy);
        outcome.granted.iter().for_each(&mut note);
        match outcome.result.map_err(|error| alloc::format!("owner {owner}: {error:?}"))? {
            Requested::Granted(grant) => note(&grant),
            Requested::Queued { .. } => {}
        }
    }
    // Each owner unlocks in turn until nothing is held or waits (a writer granted late
    // unlocks in a later pass).
    for _ in 0..6 {
        for owner in 1..=6 {
            now += 10;
            for grant in table.unlock(1, owner, byte, now, policy).map_err(|error| alloc::format!("unlock {owner}: {error:?}"))? {
                note(&grant);
            }
        }
    }
    ensure!(table.waiting(1).is_empty(), "requests still waiting at the end: {:?}", table.waiting(1));
    Ok(grants)
}

/// `lockgrant_fifo`, in every technology, grants in the order of the lock service's FIFO,
/// which differs from FRP's on the script, every grant answered by the extension.
fn lockgrant_fifo_matches_fifo_in_every_technology() -> TestResult {
    let fifo = lock_script(&mut spindle_service_locks::Policy::Fifo)?;
    let frp = lock_script(&mut spindle_service_locks::Policy::Frp)?;
    let order = |grants: &[Granted]| grants.iter().map(|&(_, owner, _)| owner).collect::<Vec<u32>>();
    ensure!(order(&fifo) != order(&frp), "FIFO and FRP grant alike on the script (a useless test): {fifo:?}");
    ensure!(order(&lock_script(&mut EventGrantPolicy::new())?) == order(&frp), "with nothing bound the event policy is not FRP");
    for preference in TECHNOLOGIES {
        let grants = with_extension("lockgrant_fifo", preference, || lock_script(&mut EventGrantPolicy::new()))?;
        ensure!(grants == fifo, "lockgrant_fifo ({}): {grants:?}, FIFO {fifo:?}", preference.label());
    }
    Ok(())
}

fn garbage_grant(_: &LockGrant) -> Result<LockGrantChoice, HandlerFault> {
    Ok(LockGrantChoice { request: 0xdead_beef })
}

/// A `lock.Grant` handler naming no request: refused (a fault), and the grants are FRP's.
fn broken_lock_answers_fall_back_to_frp() -> TestResult {
    let frp = lock_script(&mut spindle_service_locks::Policy::Frp)?;
    let before = faults("lock.Grant");
    let binding = crate::events::dispatcher().install(&LOCK_GRANT, BindingSpec::new("test", handler_fn("test.garbage", garbage_grant))).map_err(text)?;
    let grants = lock_script(&mut EventGrantPolicy::new());
    let _ = crate::events::dispatcher().uninstall(binding);
    let grants = grants?;
    ensure!(grants == frp, "garbage answers changed the grants: {grants:?}, FRP {frp:?}");
    ensure!(faults("lock.Grant") > before, "no answer was refused");
    Ok(())
}

/// Loading, running and unloading `evict_mru` (built in and Wasm) and `lockgrant_fifo`
/// again and again gives back every byte of the heap.
fn policy_rounds_leave_no_heap_behind() -> TestResult {
    let accesses = script(false);
    let round = || -> TestResult {
        for preference in [Preference::BuiltIn, Preference::Wasm] {
            with_extension("evict_mru", preference, || run(EventPolicy::whole_cache(), &accesses))?;
            with_extension("lockgrant_fifo", preference, || lock_script(&mut EventGrantPolicy::new()))?;
        }
        Ok(())
    };
    let usage = || {
        crate::sched::sleep_ticks(1);
        crate::events::quiescent();
        crate::events::reclaim();
        crate::mm::heap::stats().allocated_bytes
    };
    round()?;
    let before = usage();
    for _ in 0..5 {
        round()?;
    }
    let after = usage();
    ensure!(after == before, "after 5 rounds the heap has {after} bytes allocated (was {before}: {:+})", after as i64 - before as i64);
    Ok(())
}
