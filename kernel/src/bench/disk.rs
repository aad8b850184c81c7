//! Disk scheduling (Seltzer '95: disk scheduling as a graft), group `disk`.
//!
//! Workload: `streams` streams (strands), each reading [`READS_PER_STREAM`] random 4 KiB
//! blocks (8 sectors, 4 KiB-aligned) spread over the whole modelled disk (all 1,962
//! cylinders of the HP 97560: the benchmark machine's disk image is larger than the model),
//! one read outstanding per stream — so up to `streams` requests queue while one is on the
//! disk. The addresses come from a fixed-seed generator per stream, so every run reads the
//! same blocks. Time is the HP 97560 model's (`services::disk`): under `-icount …
//! sleep=off` every run gives the same times.
//!
//! Queue depths [`SHALLOW_STREAMS`] and [`STREAMS`]: a seek-reducing policy gains with the
//! depth of the queue (Seltzer, Chen and Ousterhout, "Disk Scheduling Revisited", 1990), and
//! on this drive the gain is bounded — 2.2 ms controller overhead, 7.5 ms mean rotational
//! latency and 1.7 ms transfer stay whatever the order, so even seek-free service would be
//! about 2× FIFO. At the shallow depths FIFO and the built-in SSTF and C-LOOK run; at
//! [`STREAMS`] (where `cargo xtask bench` decides its goals) also every technology:
//! FIFO (nothing bound to `disk.Schedule`), then `disksched_sstf` and `disksched_clook` as
//! each technology. Each run prints one line:
//!
//! `bench disk <policy> <technology> <streams> <requests> <elapsed_ns> <busy_ns>
//! <mean_response_ns> <p99_response_ns> <seek_cylinders> <decisions> <decision_instructions>`
//!
//! (`cargo xtask bench` parses it; docs/benchmark-report.md). A run whose reads fail, or
//! that does not serve every request exactly once, prints `bench FAILED disk …` and makes
//! the benchmark fail.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::ext::Preference;
use crate::sched::{self, Priority};
use crate::services::disk;

/// Concurrent streams of the deepest run, where every technology runs (the queue holds
/// 256).
pub const STREAMS: u64 = 192;
/// Shallower queues, run with the built-in policies only.
pub const SHALLOW_STREAMS: [u64; 2] = [16, 64];
/// Reads each stream makes.
pub const READS_PER_STREAM: u64 = 8;
/// The maximum wait the benchmark runs with: longer than any run, so the starvation bound
/// never overrides a policy here (the service's default, 2 s, would turn SSTF and C-LOOK
/// back into FIFO for the far requests of this deep queue; `disk::*` tests cover the bound).
pub const MAX_WAIT_NS: u64 = 600_000_000_000;
/// Sectors per read (4 KiB).
const SECTORS: u64 = 8;

/// The sector of read `index` of stream `stream`: a 4 KiB-aligned block anywhere on a disk
/// of `capacity` sectors (a 64-bit linear congruential generator per stream).
fn sector_of(stream: u64, index: u64, capacity: u64) -> u64 {
    let mut state = stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x2545_f491_4f6c_dd1d;
    for _ in 0..=index {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    }
    ((state >> 20) % (capacity / SECTORS)) * SECTORS
}

/// Runs the workload once with whatever is bound to `disk.Schedule`; returns the line's
/// numbers, or why the run failed.
pub(crate) fn run_once(policy: &str, technology: &str, streams: u64, capacity: u64) -> Result<(), alloc::string::String> {
    disk::configure("hp97560", MAX_WAIT_NS)?;
    let failures = Arc::new(AtomicU64::new(0));
    let mut strands = Vec::new();
    // Above `NORMAL` (the benchmark or console strand, the async workers, the hot-load
    // server) and below the disk service's `HIGHEST`: a stream runs as soon as it is
    // spawned, submits and blocks, so the first requests queue in stream order, and no
    // busy `NORMAL` strand (the hot-load server of `cargo xtask qemu`) starves the streams.
    let stream_priority = Priority::new(Priority::HIGHEST.level() as u8 - 2);
    // The start gate: every stream runs up to it as soon as it is spawned (it outranks
    // this strand, which yields to it) and blocks there; the gate then opens for the
    // streams in stream order. So the first requests queue in stream order whatever the
    // phase of the timer tick, and the order of service is the same in every run of a
    // policy (without the gate a completion could overtake a stream spawned after a tick:
    // the order then depended on when in the tick period the run started).
    let open = Arc::new(AtomicBool::new(false));
    let arrived = Arc::new(AtomicU64::new(0));
    for stream in 0..streams {
        let (failures, open, arrived) = (failures.clone(), open.clone(), arrived.clone());
        let body = move || {
            arrived.fetch_add(1, Ordering::AcqRel);
            while !open.load(Ordering::Acquire) {
                sched::block_current();
            }
            let mut buffer = alloc::vec![0u8; (SECTORS * 512) as usize];
            for index in 0..READS_PER_STREAM {
                if disk::read(sector_of(stream, index, capacity), &mut buffer).is_err() {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        strands.push(sched::spawn("bench-disk", stream_priority, body).map_err(|error| alloc::format!("{error:?}"))?);
        sched::yield_now();
    }
    let at_gate = arrived.load(Ordering::Acquire);
    // Elapsed time counts from the gate: the spawning is not the disk's work.
    let started = crate::time::now_ns();
    open.store(true, Ordering::Release);
    for strand in &strands {
        sched::unblock(strand);
    }
    if at_gate != streams {
        for strand in &strands {
            strand.join();
        }
        return Err(alloc::format!("only {at_gate} of {streams} streams reached the start gate before it opened"));
    }
    for strand in &strands {
        strand.join();
    }
    let elapsed = crate::time::now_ns() - started;
    let stats = disk::stats().ok_or("no disk service")?;
    let requests = streams * READS_PER_STREAM;
    let failed = failures.load(Ordering::Relaxed);
    if failed != 0 || stats.completed != requests || stats.queue.dispatched != requests || stats.queued != 0 {
        return Err(alloc::format!("{failed} reads failed; {} completed, {} dispatched of {requests}", stats.completed, stats.queue.dispatched));
    }
    crate::println!(
        "bench disk {policy} {technology} {streams} {requests} {elapsed} {} {} {} {} {} {}",
        stats.busy_ns,
        stats.mean_response_ns.unwrap_or(0),
        stats.p99_response_ns.unwrap_or(0),
        stats.seek_cylinders,
        stats.decisions,
        stats.decision_instructions
    );
    crate::println!("disk order digest {policy} {technology} {streams}: {:016x}", stats.order_digest);
    Ok(())
}

/// The disk the benchmark reads: the device, clamped to the HP 97560 model's capacity.
pub(crate) fn capacity() -> Option<u64> {
    let device = crate::drivers::virtio_blk::capacity().filter(|_| disk::stats().is_some())?;
    Some(device.min(spindle_service_disk::model::Parameters::hp97560().geometry().capacity_blocks()))
}

/// Runs every configuration; false if one failed (the benchmark then fails).
pub fn run() -> bool {
    let Some(capacity) = capacity() else {
        crate::println!("bench: disk group skipped: the machine has no disk");
        return true;
    };
    let mut clean = true;
    let mut outcome = |policy: &str, technology: &str, result: Result<(), alloc::string::String>| {
        if let Err(error) = result {
            crate::println!("bench FAILED disk {policy} {technology}: {error}");
            clean = false;
        }
    };
    for streams in SHALLOW_STREAMS {
        outcome("fifo", "none", run_once("fifo", "none", streams, capacity));
        for policy in ["sstf", "clook"] {
            let name = alloc::format!("disksched_{policy}");
            let result = super::with_extension(&name, Preference::BuiltIn, || run_once(policy, "builtin", streams, capacity));
            outcome(policy, "builtin", result);
        }
    }
    outcome("fifo", "none", run_once("fifo", "none", STREAMS, capacity));
    for policy in ["sstf", "clook"] {
        let name = alloc::format!("disksched_{policy}");
        for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
            let technology = crate::bench::Graft::Extension(preference).name();
            let result = super::with_extension(&name, preference, || run_once(policy, technology, STREAMS, capacity));
            outcome(policy, technology, result);
        }
    }
    let _ = disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS);
    clean
}
