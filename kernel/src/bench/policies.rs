//! Per-file policies on the file system (group `policies`): Seltzer '95's read-ahead (§4.3,
//! Table 4) and lock-granting (§4.4, Fig. 3) experiments, Arpaci-Dusseau et al.'s
//! PinRange (Infokernel, SOSP '03), cache_ext-style replacement (MRU on a looping scan, LFU
//! on Zipfian reads) and what a bound policy costs the cached read path.
//!
//! Time is guest time under `-icount … sleep=off` with the disk service's HP 97560 model,
//! so every run repeats. The file system's cache, read-ahead strand and lock service are
//! the kernel's own (`services::fs`, `services::locks`); the policies are the extensions
//! `readahead_app`, `lockgrant_fifo`, `evict_pinrange`, `evict_mru` and `evict_lfu`, bound
//! to one file (`policy::bind_to_file`: a guard on its inode) as every technology.
//!
//! **Computation** (the gunzip reader's and the lock holders' 15 ms) is modelled time: the
//! strand waits until the guest clock has advanced by the amount — asleep for whole timer
//! ticks, then spinning for the rest — rather than running that many instructions, which
//! under `-icount` would cost the host as much time as the guest (minutes per run). For the
//! disk, which works while the program computes, the two are the same; the hart is free
//! meanwhile for the read-ahead strand and the disk service, as it would be between a busy
//! program's time slices. CPU utilisation is therefore computation ÷ elapsed; the time inside
//! the read calls (`read_ns`) is waiting plus the calls' own work, which cannot be told
//! apart here: under `-icount … sleep=off` `instret` also counts the guest time an idle
//! hart skips, so it measures time, not work (a cached 32 KiB read costs about 0.2 ms, the
//! `overhead` runs' 23,500 instructions per 4 KiB).
//!
//! Lines (`cargo xtask bench` parses them; docs/benchmark-report.md):
//!
//! ```text
//! bench policies readahead <policy> <technology> <count> <bytes> <reads> <compute_ns> <elapsed_ns> <read_ns> <disk_reads> <prefetches>
//! bench policies locks <policy> <technology> <write_percent> <reads> <writes> <elapsed_ns> <read_mean_ns> <write_mean_ns> <read_wait_mean_ns> <write_wait_mean_ns> <write_max_ns>
//! bench policies pinrange <policy> <technology> <queries> <elapsed_ns> <blocks_read> <disk_reads>
//! bench policies scan <policy> <technology> <scans> <blocks_read> <disk_reads> <elapsed_ns>
//! bench policies zipf <policy> <technology> <reads> <blocks_read> <disk_reads> <elapsed_ns>
//! bench policies overhead <policy> <technology> <iterations> <instructions_per_read ×1000>
//! ```
//!
//! A run that fails prints `bench FAILED policies …` and fails the benchmark.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_abi::event::CacheHint;
use spindle_service_locks::LockKind;

use crate::ext::Preference;
use crate::sched::{self, Priority};
use crate::services::{cache_events, disk, fs, locks, policy};

/// The directory the group's files live in.
const DIRECTORY: &str = "/bench";
/// The read-ahead experiment's file.
const STREAM_FILE: &str = "/bench/stream";
/// The lock experiment's file of records.
const RECORDS_FILE: &str = "/bench/records";
/// The PinRange, scan and Zipf experiments' file.
const INDEX_FILE: &str = "/bench/index";
/// Another file (the overhead experiment binds policies to it).
const OTHER_FILE: &str = "/bench/other";
/// File-system block.
const BLOCK: u64 = 4096;
/// The every-technology order.
const TECHNOLOGIES: [Preference; 4] = [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User];
/// Nanoseconds per timer tick.
const TICK_NS: u64 = 1_000_000_000 / crate::param::TICKS_PER_SECOND;

// --- Read-ahead (Seltzer '95 §4.3) ------------------------------------------------------

/// The gunzip-like reader's file: 8 MiB.
pub const STREAM_BYTES: u64 = 8 << 20;
/// Bytes per read call (gunzip's 32 KiB).
pub const READ_BYTES: usize = 32 * 1024;
/// Modelled computation after each read, ns: four times the time a 32 KiB read takes
/// without read-ahead on the model (135 ms: eight 4 KiB blocks, each a request that waits
/// most of a revolution), so that waiting for the disk is about 20 % of the elapsed time
/// (the paper's gunzip without read-ahead: 79 % CPU).
pub const READ_COMPUTE_NS: u64 = 540_000_000;
/// The readahead_app counts of the native sweep (4 KiB blocks; the paper's 8 KiB blocks 0,
/// 1, 2, 4, 8 are our 0, 2, 4, 8, 16).
pub const SWEEP_COUNTS: [u64; 7] = [0, 1, 2, 4, 8, 12, 16];
/// The count every technology runs at (one 32 KiB read ahead: the paper's best, 4 × 8 KiB).
pub const TECHNOLOGY_COUNT: u64 = 8;

// --- Locks (Seltzer '95 §4.4) -----------------------------------------------------------

/// The record file: 32 MiB.
pub const RECORDS_BYTES: u64 = 32 << 20;
/// Bytes per record.
pub const RECORD_BYTES: usize = 8192;
/// Concurrent workers (the paper's level of multiprogramming, 4).
pub const WORKERS: u32 = 4;
/// Lock operations per worker and run.
pub const LOCK_ITERATIONS: u32 = 100;
/// Computation while holding the lock, ns (the paper's 15 ms).
pub const HOLD_COMPUTE_NS: u64 = 15_000_000;
/// The write percentages (Fig. 3).
pub const WRITE_PERCENTS: [u64; 6] = [5, 10, 20, 30, 40, 50];
/// The write percentage every technology runs at.
pub const TECHNOLOGY_WRITE_PERCENT: u64 = 5;
/// The cache the lock runs mount (buffers): records come from the disk.
pub const LOCK_CACHE_BLOCKS: usize = 64;
/// Modelled time after which a lock run counts as stalled (a run takes about 18 s).
const STALLED_NS: u64 = 300_000_000_000;
/// Owners of the workers' locks: `OWNER_BASE + 1 ..= OWNER_BASE + WORKERS` (far from
/// process ids, whose exit would release an owner's locks).
const OWNER_BASE: u32 = 0x7000_0000;

// --- PinRange, scan, Zipf ---------------------------------------------------------------

/// The cache of the PinRange, scan and Zipf runs (buffers: 1 MiB).
pub const SMALL_CACHE_BLOCKS: usize = 256;
/// The index file: 4 MiB, 1,024 blocks.
pub const INDEX_BLOCKS: u64 = 1024;
/// Index tree: root (block 0), [`INNER`] inner nodes, [`LEAVES`] leaves; then data.
const INNER: u64 = 12;
/// Leaves of the index tree (16 per inner node).
const LEAVES: u64 = 192;
/// Blocks of the index (pinned): root, inner nodes, leaves.
pub const INDEX_TREE_BLOCKS: u64 = 1 + INNER + LEAVES;
/// Queries before the measured ones (the cache fills).
pub const WARM_QUERIES: u64 = 500;
/// Measured queries.
pub const QUERIES: u64 = 2000;
/// The looping scan's file: 1.5 × the cache.
pub const SCAN_BLOCKS: u64 = SMALL_CACHE_BLOCKS as u64 * 3 / 2;
/// Measured scans (after one that fills the cache).
pub const SCANS: u64 = 4;
/// Zipfian reads before the measured ones.
pub const WARM_ZIPF_READS: u64 = 1000;
/// Measured Zipfian reads.
pub const ZIPF_READS: u64 = 4000;

// --- Overhead ---------------------------------------------------------------------------

/// Cached 4 KiB reads per overhead measurement.
pub const OVERHEAD_ITERATIONS: u64 = 10_000;

/// A 64-bit generator (splitmix64): the same sequence from the same seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (bound > 0; the modulo bias is negligible here).
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// Waits until guest time has advanced by `ns` (modelled computation): asleep for whole
/// ticks while more than one remains, then spinning.
pub fn compute(ns: u64) {
    let deadline = crate::time::now_ns() + ns;
    loop {
        let now = crate::time::now_ns();
        if now >= deadline {
            return;
        }
        if deadline - now > TICK_NS {
            sched::sleep_ticks(1);
        } else {
            core::hint::spin_loop();
        }
    }
}

fn text(error: impl core::fmt::Display) -> String {
    format!("{error}")
}

/// `path` with `bytes` of a pattern (each 8 bytes its offset, xor a seed), written once.
fn make_file(path: &str, bytes: u64, seed: u64) -> Result<(), String> {
    if fs::stat(path).is_ok_and(|stat| stat.size == bytes) {
        return Ok(());
    }
    let file = fs::open(path, fs::OpenMode { write: true, create: true, truncate: true, ..fs::OpenMode::default() }).map_err(text)?;
    let mut chunk = alloc::vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    while offset < bytes {
        let length = (bytes - offset).min(chunk.len() as u64) as usize;
        for (index, word) in chunk[..length].chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&((offset + index as u64 * 8) ^ seed).to_le_bytes());
        }
        let written = fs::write(&file, &chunk[..length]).map_err(text)?;
        if written != length {
            return Err(format!("{path}: short write at {offset}"));
        }
        offset += length as u64;
    }
    fs::sync().map_err(text)
}

/// Loads `name` as `preference` for the file at `path` only, runs `body`, unloads it
/// (waiting for a user-level server to be reaped) and forgets the assignment.
fn with_bound<T>(path: &str, name: &str, preference: Preference, body: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    policy::bind_to_file(path, name, preference).map_err(|error| format!("binding {name} ({}) to {path}: {error}", preference.label()))?;
    let result = body();
    fs::settle_read_ahead();
    let unloaded = policy::unbind(name);
    crate::events::quiescent();
    crate::events::reclaim();
    unloaded.map_err(|error| format!("unloading {name}: {error}"))?;
    result
}

/// The disk's block reads so far.
fn disk_reads() -> Result<u64, String> {
    Ok(fs::status().map_err(text)?.disk_reads)
}

// --- Read-ahead -------------------------------------------------------------------------

/// One read-ahead run's numbers.
struct StreamRun {
    reads: u64,
    elapsed_ns: u64,
    read_ns: u64,
    disk_reads: u64,
    prefetches: u64,
}

/// What the reader strand hands back: (reads, elapsed ns, ns inside the read calls).
type ReaderOutcome = Option<Result<(u64, u64, u64), String>>;

/// The gunzip-like reader: a strand at `NORMAL` reads the stream file 32 KiB at a time
/// from a cold cache, computing `compute_ns` after each read, and checks what it read.
fn stream_once(compute_ns: u64) -> Result<StreamRun, String> {
    fs::remount(fs::DEFAULT_CACHE_BLOCKS).map_err(text)?;
    let file = fs::open(STREAM_FILE, fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
    let disk_before = disk_reads()?;
    let outcome: Arc<spin::Mutex<ReaderOutcome>> = Arc::new(spin::Mutex::new(None));
    let slot = outcome.clone();
    let reader = sched::spawn("bench-gunzip", Priority::NORMAL, move || {
        let result = (|| -> Result<(u64, u64, u64), String> {
            let mut buffer = alloc::vec![0u8; READ_BYTES];
            let (mut reads, mut in_reads, mut offset) = (0u64, 0u64, 0u64);
            let started = crate::time::now_ns();
            loop {
                let before = crate::time::now_ns();
                let count = fs::read(&file, &mut buffer).map_err(text)?;
                in_reads += crate::time::now_ns() - before;
                if count == 0 {
                    break;
                }
                let first = u64::from_le_bytes(buffer[..8].try_into().unwrap_or_default());
                if first != offset ^ 1 {
                    return Err(format!("read at {offset} returned the data of {}", first ^ 1));
                }
                offset += count as u64;
                reads += 1;
                compute(compute_ns);
            }
            Ok((reads, crate::time::now_ns() - started, in_reads))
        })();
        crate::arch::csr::without_interrupts(|| *slot.lock() = Some(result));
    })
    .map_err(|error| format!("{error:?}"))?;
    reader.join();
    let result = crate::arch::csr::without_interrupts(|| outcome.lock().take()).ok_or("the reader left no result")?;
    let (reads, elapsed_ns, read_ns) = result?;
    fs::settle_read_ahead();
    let status = fs::status().map_err(text)?;
    if reads != STREAM_BYTES / READ_BYTES as u64 {
        return Err(format!("{reads} reads of {} expected", STREAM_BYTES / READ_BYTES as u64));
    }
    Ok(StreamRun { reads, elapsed_ns, read_ns, disk_reads: status.disk_reads - disk_before, prefetches: status.cache.prefetches })
}

fn print_stream(policy: &str, technology: &str, count: u64, compute_ns: u64, run: &StreamRun) {
    crate::println!(
        "bench policies readahead {policy} {technology} {count} {STREAM_BYTES} {} {compute_ns} {} {} {} {}",
        run.reads, run.elapsed_ns, run.read_ns, run.disk_reads, run.prefetches
    );
}

/// One run with `readahead_app` bound (already) and its count set to `count`.
fn stream_app(technology: &str, count: u64, compute_ns: u64) -> Result<(), String> {
    let inode = fs::inode_of(STREAM_FILE).map_err(text)?;
    cache_events::set_hint(inode, CacheHint::READ_AHEAD_COUNT, Some(count));
    let run = stream_once(compute_ns);
    cache_events::set_hint(inode, CacheHint::READ_AHEAD_COUNT, None);
    let policy = if count == 0 { "none" } else { "app" };
    print_stream(policy, technology, count, compute_ns, &run?);
    Ok(())
}

/// The read-ahead experiment: the default rule, `readahead_app` native at every count of
/// the sweep (0 = none), and every other technology at [`TECHNOLOGY_COUNT`].
fn readahead_runs(outcome: &mut impl FnMut(&str, Result<(), String>)) {
    let default = stream_once(READ_COMPUTE_NS).map(|run| print_stream("default", "none", 0, READ_COMPUTE_NS, &run));
    outcome("readahead default", default);
    for preference in TECHNOLOGIES {
        let technology = crate::bench::Graft::Extension(preference).name();
        let result = with_bound(STREAM_FILE, "readahead_app", preference, || {
            if preference == Preference::Default {
                for count in SWEEP_COUNTS {
                    stream_app(technology, count, READ_COMPUTE_NS)?;
                }
                Ok(())
            } else {
                stream_app(technology, TECHNOLOGY_COUNT, READ_COMPUTE_NS)
            }
        });
        outcome(&format!("readahead {technology}"), result);
    }
}

// --- Locks ------------------------------------------------------------------------------

/// What the workers measured.
#[derive(Default)]
struct LockTotals {
    reads: u64,
    writes: u64,
    read_ns: u64,
    write_ns: u64,
    read_wait_ns: u64,
    write_wait_ns: u64,
    write_max_ns: u64,
    last_done_ns: u64,
    failure: Option<String>,
}

/// One lock run: [`WORKERS`] strands, each [`LOCK_ITERATIONS`] times: lock byte 0 of the
/// record file (write with `write_percent` % probability, else read; waiting), read a
/// random 8 KiB record, compute 15 ms, unlock. Latency = request to unlock (the paper's
/// operation time); wait = request to grant.
fn locks_once(policy: &str, technology: &str, write_percent: u64) -> Result<(), String> {
    fs::remount(LOCK_CACHE_BLOCKS).map_err(text)?;
    let inode = fs::inode_of(RECORDS_FILE).map_err(text)?;
    let totals = Arc::new(spin::Mutex::new(LockTotals::default()));
    let byte_zero = locks::range(0, 1).map_err(|error| format!("{error:?}"))?;
    let started = crate::time::now_ns();
    let mut workers = Vec::new();
    for worker in 1..=WORKERS {
        let totals = totals.clone();
        let body = move || {
            let mut random = Random(write_percent.wrapping_mul(0x1000) ^ u64::from(worker).wrapping_mul(0x5851_f42d_4c95_7f2d));
            let owner = OWNER_BASE + worker;
            let result = (|| -> Result<(), String> {
                let file = fs::open(RECORDS_FILE, fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
                let mut record = alloc::vec![0u8; RECORD_BYTES];
                let records = RECORDS_BYTES / RECORD_BYTES as u64;
                for _ in 0..LOCK_ITERATIONS {
                    let write = random.below(100) < write_percent;
                    let index = random.below(records);
                    let kind = if write { LockKind::Write } else { LockKind::Read };
                    let asked = crate::time::now_ns();
                    locks::lock(inode, owner, kind, byte_zero, true, &|| false).map_err(|error| format!("lock: {error:?}"))?;
                    let granted = crate::time::now_ns();
                    fs::seek(&file, (index * RECORD_BYTES as u64) as i64, fs::Whence::Start).map_err(text)?;
                    let count = fs::read(&file, &mut record).map_err(text)?;
                    let first = u64::from_le_bytes(record[..8].try_into().unwrap_or_default());
                    if count != RECORD_BYTES || first != (index * RECORD_BYTES as u64) ^ 2 {
                        return Err(format!("record {index}: {count} bytes, first word {first:#x}"));
                    }
                    compute(HOLD_COMPUTE_NS);
                    locks::unlock(inode, owner, byte_zero).map_err(|error| format!("unlock: {error:?}"))?;
                    let done = crate::time::now_ns();
                    crate::arch::csr::without_interrupts(|| {
                        let mut totals = totals.lock();
                        if write {
                            totals.writes += 1;
                            totals.write_ns += done - asked;
                            totals.write_wait_ns += granted - asked;
                            totals.write_max_ns = totals.write_max_ns.max(done - asked);
                        } else {
                            totals.reads += 1;
                            totals.read_ns += done - asked;
                            totals.read_wait_ns += granted - asked;
                        }
                        totals.last_done_ns = totals.last_done_ns.max(done);
                    });
                }
                Ok(())
            })();
            if let Err(error) = result {
                let _ = locks::unlock(inode, owner, byte_zero);
                crate::arch::csr::without_interrupts(|| {
                    totals.lock().failure.get_or_insert(error);
                });
            }
        };
        workers.push(sched::spawn("bench-locker", Priority::NORMAL, body).map_err(|error| format!("{error:?}"))?);
    }
    // A watchdog instead of a plain join: a run that stalls says where (the lock table,
    // the workers, the disk) and fails, rather than hanging the benchmark.
    while !workers.iter().all(|worker| worker.is_finished()) {
        sched::sleep_ticks(crate::param::TICKS_PER_SECOND);
        if crate::time::now_ns() - started > STALLED_NS {
            let states: Vec<String> = workers.iter().map(|worker| format!("{:?}", worker.state())).collect();
            let done = crate::arch::csr::without_interrupts(|| {
                let totals = totals.lock();
                totals.reads + totals.writes
            });
            let disk = disk::stats().map(|stats| format!("{} completed, {} queued", stats.completed, stats.queued)).unwrap_or_default();
            return Err(format!(
                "stalled: {done} operations done after {} s; workers {states:?}; disk {disk}; lock table {:?}",
                STALLED_NS / 1_000_000_000,
                locks::describe(inode)
            ));
        }
    }
    let totals = crate::arch::csr::without_interrupts(|| core::mem::take(&mut *totals.lock()));
    if let Some(failure) = totals.failure {
        return Err(failure);
    }
    // From the start to the last unlock (the watchdog's polling is not the run's time).
    let elapsed = totals.last_done_ns.saturating_sub(started);
    let mean = |sum: u64, count: u64| sum.checked_div(count).unwrap_or(0);
    crate::println!(
        "bench policies locks {policy} {technology} {write_percent} {} {} {elapsed} {} {} {} {} {}",
        totals.reads,
        totals.writes,
        mean(totals.read_ns, totals.reads),
        mean(totals.write_ns, totals.writes),
        mean(totals.read_wait_ns, totals.reads),
        mean(totals.write_wait_ns, totals.writes),
        totals.write_max_ns
    );
    Ok(())
}

/// The lock experiment: FRP (nothing bound) and `lockgrant_fifo` native at every write
/// percentage, the other technologies at [`TECHNOLOGY_WRITE_PERCENT`]. Read-ahead is off
/// for the record file (`readahead_app` with count 0, built in) so a record read is its
/// two blocks and nothing more.
fn lock_runs(outcome: &mut impl FnMut(&str, Result<(), String>)) {
    let inode = match fs::inode_of(RECORDS_FILE) {
        Ok(inode) => inode,
        Err(error) => return outcome("locks", Err(text(error))),
    };
    cache_events::set_hint(inode, CacheHint::READ_AHEAD_COUNT, Some(0));
    let result = with_bound(RECORDS_FILE, "readahead_app", Preference::BuiltIn, || {
        for percent in WRITE_PERCENTS {
            locks_once("frp", "none", percent).map_err(|error| format!("frp {percent}%: {error}"))?;
        }
        for preference in TECHNOLOGIES {
            let technology = crate::bench::Graft::Extension(preference).name();
            with_bound(RECORDS_FILE, "lockgrant_fifo", preference, || {
                if preference == Preference::Default {
                    for percent in WRITE_PERCENTS {
                        locks_once("fifo", technology, percent).map_err(|error| format!("fifo {technology} {percent}%: {error}"))?;
                    }
                    Ok(())
                } else {
                    locks_once("fifo", technology, TECHNOLOGY_WRITE_PERCENT).map_err(|error| format!("fifo {technology}: {error}"))
                }
            })?;
        }
        Ok(())
    });
    cache_events::set_hint(inode, CacheHint::READ_AHEAD_COUNT, None);
    outcome("locks", result);
}

// --- Block reads for PinRange, scan, Zipf ----------------------------------------------

/// Reads file block `block` of `file` (4 KiB) and checks it.
fn read_block(file: &fs::OpenFile, block: u64, buffer: &mut [u8]) -> Result<(), String> {
    fs::seek(file, (block * BLOCK) as i64, fs::Whence::Start).map_err(text)?;
    let count = fs::read(file, buffer).map_err(text)?;
    let first = u64::from_le_bytes(buffer[..8].try_into().unwrap_or_default());
    if count != BLOCK as usize || first != (block * BLOCK) ^ 3 {
        return Err(format!("block {block}: {count} bytes, first word {first:#x}"));
    }
    Ok(())
}

/// Blocks read and disk reads of a measured phase, and its guest time.
struct Phase {
    blocks: u64,
    disk_reads: u64,
    elapsed_ns: u64,
}

/// Runs `body` (which returns how many blocks it read) and measures it.
fn phase(body: impl FnOnce() -> Result<u64, String>) -> Result<Phase, String> {
    let disk_before = disk_reads()?;
    let started = crate::time::now_ns();
    let blocks = body()?;
    let elapsed_ns = crate::time::now_ns() - started;
    fs::settle_read_ahead();
    Ok(Phase { blocks, disk_reads: disk_reads()? - disk_before, elapsed_ns })
}

/// The index lookups of Infokernel's PinRange experiment, from a cold 1 MiB cache: each
/// query reads the root (block 0), one of 12 inner nodes, one of 192 leaves (the index: the
/// file's first 205 blocks) and one random data block of the other 819; the first
/// [`WARM_QUERIES`] are not measured.
fn pinrange_once(policy: &str, technology: &str) -> Result<(), String> {
    fs::remount(SMALL_CACHE_BLOCKS).map_err(text)?;
    let file = fs::open(INDEX_FILE, fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
    let mut buffer = alloc::vec![0u8; BLOCK as usize];
    let mut random = Random(0x1d3a);
    let query = |random: &mut Random, buffer: &mut [u8]| -> Result<u64, String> {
        let leaf = random.below(LEAVES);
        let data = INDEX_TREE_BLOCKS + random.below(INDEX_BLOCKS - INDEX_TREE_BLOCKS);
        for block in [0, 1 + leaf / (LEAVES / INNER), 1 + INNER + leaf, data] {
            read_block(&file, block, buffer)?;
        }
        Ok(4)
    };
    for _ in 0..WARM_QUERIES {
        query(&mut random, &mut buffer)?;
    }
    let measured = phase(|| {
        let mut blocks = 0;
        for _ in 0..QUERIES {
            blocks += query(&mut random, &mut buffer)?;
        }
        Ok(blocks)
    })?;
    crate::println!("bench policies pinrange {policy} {technology} {QUERIES} {} {} {}", measured.elapsed_ns, measured.blocks, measured.disk_reads);
    Ok(())
}

/// A looping sequential scan of the first [`SCAN_BLOCKS`] blocks (1.5 × the cache), block
/// by block, from a cold cache: one scan to fill it, then [`SCANS`] measured.
fn scan_once(policy: &str, technology: &str) -> Result<(), String> {
    fs::remount(SMALL_CACHE_BLOCKS).map_err(text)?;
    let file = fs::open(INDEX_FILE, fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
    let mut buffer = alloc::vec![0u8; BLOCK as usize];
    for block in 0..SCAN_BLOCKS {
        read_block(&file, block, &mut buffer)?;
    }
    let measured = phase(|| {
        for _ in 0..SCANS {
            for block in 0..SCAN_BLOCKS {
                read_block(&file, block, &mut buffer)?;
            }
        }
        Ok(SCANS * SCAN_BLOCKS)
    })?;
    crate::println!("bench policies scan {policy} {technology} {SCANS} {} {} {}", measured.blocks, measured.disk_reads, measured.elapsed_ns);
    Ok(())
}

/// Zipfian point reads (s = 1) over the file's 1,024 blocks, from a cold cache: rank `k`'s
/// weight is 2³² ÷ k, and ranks are spread over the file (rank k at block 389·k mod 1024).
fn zipf_once(policy: &str, technology: &str) -> Result<(), String> {
    fs::remount(SMALL_CACHE_BLOCKS).map_err(text)?;
    let file = fs::open(INDEX_FILE, fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
    let mut buffer = alloc::vec![0u8; BLOCK as usize];
    let mut cumulative = Vec::with_capacity(INDEX_BLOCKS as usize);
    let mut total = 0u64;
    for rank in 1..=INDEX_BLOCKS {
        total += (1u64 << 32) / rank;
        cumulative.push(total);
    }
    let mut random = Random(0x21bf);
    let read = |random: &mut Random, buffer: &mut [u8]| -> Result<(), String> {
        let pick = random.below(total);
        let rank = cumulative.partition_point(|&sum| sum <= pick) as u64;
        read_block(&file, (rank * 389) % INDEX_BLOCKS, buffer)
    };
    for _ in 0..WARM_ZIPF_READS {
        read(&mut random, &mut buffer)?;
    }
    let measured = phase(|| {
        for _ in 0..ZIPF_READS {
            read(&mut random, &mut buffer)?;
        }
        Ok(ZIPF_READS)
    })?;
    crate::println!("bench policies zipf {policy} {technology} {ZIPF_READS} {} {} {}", measured.blocks, measured.disk_reads, measured.elapsed_ns);
    Ok(())
}

/// One replacement experiment's run, given the policy and technology words it prints.
type ReplacementRun = fn(&str, &str) -> Result<(), String>;

/// PinRange, scan and Zipf: each without a replacement policy (LRU), then with its
/// extension bound to the file as every technology. Read-ahead is off for the file
/// (`readahead_app` with count 0, built in): every block the cache holds was asked for.
fn replacement_runs(outcome: &mut impl FnMut(&str, Result<(), String>)) {
    let inode = match fs::inode_of(INDEX_FILE) {
        Ok(inode) => inode,
        Err(error) => return outcome("replacement", Err(text(error))),
    };
    cache_events::set_hint(inode, CacheHint::READ_AHEAD_COUNT, Some(0));
    cache_events::set_hint(inode, CacheHint::PIN_FIRST, Some(0));
    cache_events::set_hint(inode, CacheHint::PIN_END, Some(INDEX_TREE_BLOCKS));
    let experiments: [(&str, &str, ReplacementRun); 3] =
        [("pinrange", "evict_pinrange", pinrange_once), ("scan", "evict_mru", scan_once), ("zipf", "evict_lfu", zipf_once)];
    let result = with_bound(INDEX_FILE, "readahead_app", Preference::BuiltIn, || {
        for (experiment, extension, run) in experiments {
            let policy = extension.trim_start_matches("evict_");
            outcome(&format!("{experiment} lru"), run("lru", "none"));
            for preference in TECHNOLOGIES {
                let technology = crate::bench::Graft::Extension(preference).name();
                let result = with_bound(INDEX_FILE, extension, preference, || run(policy, technology));
                outcome(&format!("{experiment} {policy} {technology}"), result);
            }
        }
        Ok(())
    });
    for hint in [CacheHint::READ_AHEAD_COUNT, CacheHint::PIN_FIRST, CacheHint::PIN_END] {
        cache_events::set_hint(inode, hint, None);
    }
    outcome("replacement", result);
}

// --- Overhead ---------------------------------------------------------------------------

/// Instructions per cached 4 KiB read (block 0 of the index file, resident) ×1000, with
/// whatever is bound.
fn overhead_once(policy: &str, technology: &str) -> Result<(), String> {
    // A fresh cache: what earlier runs left in it (which blocks, how many) changes the
    // lookup's instruction count, and must not differ between the bench's two boots.
    fs::remount(fs::DEFAULT_CACHE_BLOCKS).map_err(text)?;
    let file = fs::open(INDEX_FILE, fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
    let mut buffer = alloc::vec![0u8; BLOCK as usize];
    read_block(&file, 0, &mut buffer)?;
    fs::settle_read_ahead();
    let mut failed = None;
    let milli = crate::bench::measure(OVERHEAD_ITERATIONS, |_| {
        if let Err(error) = read_block(&file, 0, &mut buffer) {
            failed.get_or_insert(error);
        }
    });
    if let Some(error) = failed {
        return Err(error);
    }
    crate::println!("bench policies overhead {policy} {technology} {OVERHEAD_ITERATIONS} {milli}");
    Ok(())
}

/// The cached read path with nothing bound, then with `readahead_app` and `evict_mru`
/// bound to another file (every technology): the guard `file == other` filters every
/// raise of the measured file's reads.
fn overhead_runs(outcome: &mut impl FnMut(&str, Result<(), String>)) {
    outcome("overhead none", overhead_once("none", "none"));
    for extension in ["readahead_app", "evict_mru"] {
        for preference in TECHNOLOGIES {
            let technology = crate::bench::Graft::Extension(preference).name();
            let result = with_bound(OTHER_FILE, extension, preference, || overhead_once(&format!("{extension}-other"), technology));
            outcome(&format!("overhead {extension} {technology}"), result);
        }
    }
}

// --- The group --------------------------------------------------------------------------

/// Writes the group's files (once) and starts the disk model afresh.
fn prepare() -> Result<(), String> {
    match fs::mkdir(DIRECTORY) {
        Ok(()) | Err(fs::FsCallError::Fs(spindle_service_fs::FsError::Exists)) => {}
        Err(error) => return Err(text(error)),
    }
    make_file(STREAM_FILE, STREAM_BYTES, 1)?;
    make_file(RECORDS_FILE, RECORDS_BYTES, 2)?;
    make_file(INDEX_FILE, INDEX_BLOCKS * BLOCK, 3)?;
    make_file(OTHER_FILE, BLOCK, 4)?;
    fs::settle_read_ahead();
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)
}

/// Which experiments [`run_experiments`] runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// Seltzer '95 §4.3.
    ReadAhead,
    /// Seltzer '95 §4.4.
    Locks,
    /// PinRange, scan and Zipf.
    Replacement,
    /// The cached read path.
    Overhead,
}

impl Experiment {
    /// Every experiment, in run order (the instruction counts first, on a file system in
    /// the state the group's preparation leaves).
    pub const ALL: [Experiment; 4] = [Experiment::Overhead, Experiment::ReadAhead, Experiment::Locks, Experiment::Replacement];

    /// The console word.
    pub fn word(self) -> &'static str {
        match self {
            Experiment::ReadAhead => "readahead",
            Experiment::Locks => "locks",
            Experiment::Replacement => "replacement",
            Experiment::Overhead => "overhead",
        }
    }
}

/// Runs `experiments`; false if one failed (each failure printed as `bench FAILED
/// policies …`).
pub fn run_experiments(experiments: &[Experiment]) -> bool {
    let mut clean = true;
    let mut outcome = |what: &str, result: Result<(), String>| {
        if let Err(error) = result {
            crate::println!("bench FAILED policies {what}: {error}");
            clean = false;
        }
    };
    if let Err(error) = prepare() {
        outcome("prepare", Err(error));
        return false;
    }
    for experiment in experiments {
        match experiment {
            Experiment::ReadAhead => readahead_runs(&mut outcome),
            Experiment::Locks => lock_runs(&mut outcome),
            Experiment::Replacement => replacement_runs(&mut outcome),
            Experiment::Overhead => overhead_runs(&mut outcome),
        }
    }
    let _ = fs::remount(fs::DEFAULT_CACHE_BLOCKS);
    clean
}

/// Runs the group; false if a run failed.
pub fn run() -> bool {
    if disk::stats().is_none() || fs::status().is_err() {
        crate::println!("bench: policies group skipped: the machine has no file system");
        return true;
    }
    run_experiments(&Experiment::ALL)
}
