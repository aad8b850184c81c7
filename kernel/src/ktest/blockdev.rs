//! Tests of the disk (`drivers::virtio_blk`) and the PLIC: what is written reads back,
//! one sector at a time and in multi-sector requests, also from several strands at once
//! with every request completing exactly once; refusals (past the end, bad length, full
//! virtqueue) are specific errors and never reach the device; a waiting strand is blocked
//! while other strands run; the completion hook stands between the device and the waiter;
//! callback requests are called once each; the disk's interrupts are claimed and
//! completed at the PLIC.
//!
//! Every test machine has a fresh sparse 2 GiB disk of its own (`cargo xtask test`); each
//! test uses its own range of sectors, and the data depends on a per-run seed, so nothing
//! a test reads can have been left by another test or an earlier run.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{KernelTest, TestResult};
use super::text;
use crate::arch::csr::without_interrupts;
use crate::drivers::plic;
use crate::drivers::virtio_blk::{
    self, BlockError, Completion, DiskInfo, MAX_REQUEST_BYTES, Refused, Request, SECTOR_SIZE, Token,
};
use crate::ensure;
use crate::sched::{self, Priority, Strand, StrandState};

/// The disk tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "blockdev::disk_is_present", run: disk_is_present },
    KernelTest { name: "blockdev::written_sectors_read_back", run: written_sectors_read_back },
    KernelTest { name: "blockdev::multi_sector_request", run: multi_sector_request },
    KernelTest { name: "blockdev::strands_in_parallel_each_request_completes_once", run: strands_in_parallel },
    KernelTest { name: "blockdev::full_virtqueue_is_refused_with_the_request", run: full_virtqueue_is_refused },
    KernelTest { name: "blockdev::past_the_end_and_bad_lengths_are_refused", run: past_the_end_is_refused },
    KernelTest { name: "blockdev::waiting_strand_is_blocked_while_others_run", run: waiting_strand_is_blocked },
    KernelTest { name: "blockdev::completion_hook_holds_completions_until_delivered", run: completion_hook_holds_completions },
    KernelTest { name: "blockdev::callback_requests_are_called_once_each", run: callback_requests_are_called_once },
    KernelTest { name: "blockdev::interrupts_are_claimed_and_completed", run: interrupts_are_claimed_and_completed },
];

/// First sector of each test's own range.
const MULTI_SECTOR_BASE: u64 = 8_192;
const PARALLEL_BASE: u64 = 16_384;
const QUEUE_FULL_BASE: u64 = 20_480;
const BLOCKED_BASE: u64 = 24_576;
const HOOK_BASE: u64 = 26_624;
const CALLBACK_BASE: u64 = 27_648;
const INTERRUPT_BASE: u64 = 28_672;
/// The disk must be larger than every range above.
const SECTORS_USED: u64 = 32_768;
/// Longest a test waits for something to arrive by interrupt (2 s).
const ARRIVAL_TICKS: u64 = 2 * crate::param::TICKS_PER_SECOND;

fn disk() -> Result<DiskInfo, String> {
    virtio_blk::info().ok_or_else(|| String::from("no disk: `cargo xtask` gives every test machine one"))
}

/// A seed that differs from run to run (instructions retired so far).
fn seed() -> u64 {
    crate::arch::csr::instret() as u64 | 1
}

/// 512 pseudo-random bytes for `sector` under `seed` (xorshift64).
fn sector_pattern(seed: u64, sector: u64) -> Vec<u8> {
    let mut state = (seed ^ sector.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    let mut bytes = Vec::with_capacity(SECTOR_SIZE);
    while bytes.len() < SECTOR_SIZE {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes
}

/// The patterns of `sectors` sectors from `first` on, end to end.
fn pattern(seed: u64, first: u64, sectors: u64) -> Vec<u8> {
    (first..first + sectors).flat_map(|sector| sector_pattern(seed, sector)).collect()
}

fn disk_is_present() -> TestResult {
    let info = disk()?;
    ensure!(info.sectors > SECTORS_USED, "disk of {} sectors, the tests need {SECTORS_USED}", info.sectors);
    ensure!(virtio_blk::capacity() == Some(info.sectors), "capacity {:?} vs info {}", virtio_blk::capacity(), info.sectors);
    ensure!(!info.read_only, "the test disk is read-only");
    ensure!(crate::devicetree::interrupt_of(info.slot.base) == Some(info.interrupt), "interrupt {} is not the slot's", info.interrupt);
    Ok(())
}

fn written_sectors_read_back() -> TestResult {
    let info = disk()?;
    let seed = seed();
    let sectors = [0, 1, 7, 100, 4_096, info.sectors - 1];
    for &sector in &sectors {
        virtio_blk::write(sector, &sector_pattern(seed, sector)).map_err(|error| alloc::format!("write {sector}: {error}"))?;
    }
    for &sector in &sectors {
        let mut buffer = [0u8; SECTOR_SIZE];
        virtio_blk::read(sector, &mut buffer).map_err(|error| alloc::format!("read {sector}: {error}"))?;
        ensure!(buffer[..] == sector_pattern(seed, sector)[..], "sector {sector} read back differs");
    }
    // Overwriting one sector leaves its neighbours alone.
    virtio_blk::write(1, &sector_pattern(!seed, 1)).map_err(text)?;
    for (sector, expected) in [(0, sector_pattern(seed, 0)), (1, sector_pattern(!seed, 1)), (7, sector_pattern(seed, 7))] {
        let mut buffer = [0u8; SECTOR_SIZE];
        virtio_blk::read(sector, &mut buffer).map_err(text)?;
        ensure!(buffer[..] == expected[..], "after overwriting sector 1, sector {sector} differs");
    }
    // A token is collected once.
    let token = virtio_blk::submit(Request::read(0, 1)).map_err(|refused| text(refused.error))?;
    virtio_blk::wait(token).map_err(text)?;
    ensure!(virtio_blk::wait(token).err() == Some(BlockError::UnknownToken(token)), "a token was collected twice");
    Ok(())
}

fn multi_sector_request() -> TestResult {
    const SECTORS: u64 = 64;
    let seed = seed();
    let data = pattern(seed, MULTI_SECTOR_BASE, SECTORS);
    let token = virtio_blk::submit(Request::write(MULTI_SECTOR_BASE, data.clone())).map_err(|refused| text(refused.error))?;
    let written = virtio_blk::wait(token).map_err(text)?;
    ensure!(written.result.is_ok(), "write: {:?}", written.result);
    ensure!(written.token == token && written.sector == MULTI_SECTOR_BASE, "completion {:?} at {}", written.token, written.sector);
    ensure!(written.buffer == data, "the write's buffer did not come back unchanged");
    let token = virtio_blk::submit(Request::read(MULTI_SECTOR_BASE, SECTORS as usize)).map_err(|refused| text(refused.error))?;
    let read = virtio_blk::wait(token).map_err(text)?;
    ensure!(read.result.is_ok(), "read: {:?}", read.result);
    ensure!(read.buffer == data, "the 64-sector read differs from the 64-sector write");
    // Each sector landed where it belongs.
    for sector in [MULTI_SECTOR_BASE, MULTI_SECTOR_BASE + 1, MULTI_SECTOR_BASE + 33, MULTI_SECTOR_BASE + SECTORS - 1] {
        let mut buffer = [0u8; SECTOR_SIZE];
        virtio_blk::read(sector, &mut buffer).map_err(text)?;
        ensure!(buffer[..] == sector_pattern(seed, sector)[..], "sector {sector} of the multi-sector write differs");
    }
    Ok(())
}

/// Submits every request of `requests` (waiting for room), then waits for each; returns
/// the completions in submission order.
fn submit_all_then_wait(requests: Vec<Request>) -> Result<Vec<Completion>, String> {
    let mut tokens = Vec::new();
    for request in requests {
        let sector = request.sector;
        let token = virtio_blk::submit_waiting_for_room(request).map_err(|refused| alloc::format!("submit {sector}: {}", refused.error))?;
        tokens.push(token);
    }
    let mut completions = Vec::new();
    for token in tokens {
        let completion = virtio_blk::wait(token).map_err(text)?;
        if completion.token != token {
            return Err(alloc::format!("waited for {token:?}, got {:?}", completion.token));
        }
        completion.result.map_err(|error| alloc::format!("sector {}: {error}", completion.sector))?;
        completions.push(completion);
    }
    Ok(completions)
}

fn strands_in_parallel() -> TestResult {
    const STRANDS: u64 = 4;
    const REQUESTS: u64 = 64;
    let seed = seed();
    let before = virtio_blk::stats();
    let tokens: Arc<spin::Mutex<Vec<Token>>> = Arc::new(spin::Mutex::new(Vec::new()));
    let failures: Arc<spin::Mutex<Vec<String>>> = Arc::new(spin::Mutex::new(Vec::new()));
    let mut strands = Vec::new();
    for index in 0..STRANDS {
        let (tokens, failures) = (tokens.clone(), failures.clone());
        let first = PARALLEL_BASE + index * REQUESTS;
        let body = move || {
            let writes = (first..first + REQUESTS).map(|sector| Request::write(sector, sector_pattern(seed, sector))).collect();
            let reads = (first..first + REQUESTS).map(|sector| Request::read(sector, 1)).collect();
            let outcome = submit_all_then_wait(writes).and_then(|written| {
                let read = submit_all_then_wait(reads)?;
                for completion in &read {
                    if completion.buffer != sector_pattern(seed, completion.sector) {
                        return Err(alloc::format!("sector {} read back differs", completion.sector));
                    }
                }
                Ok(written.into_iter().chain(read).map(|completion| completion.token).collect::<Vec<_>>())
            });
            without_interrupts(|| match outcome {
                Ok(mine) => tokens.lock().extend(mine),
                Err(error) => failures.lock().push(alloc::format!("strand {index}: {error}")),
            });
        };
        strands.push(sched::spawn("test-disk", Priority::NORMAL, body).map_err(text)?);
    }
    for strand in &strands {
        strand.join();
    }
    let failures = without_interrupts(|| failures.lock().clone());
    ensure!(failures.is_empty(), "{}", failures.join("; "));
    let mut tokens = without_interrupts(|| tokens.lock().clone());
    let total = STRANDS * REQUESTS * 2;
    ensure!(tokens.len() as u64 == total, "{} completions for {total} requests", tokens.len());
    tokens.sort();
    tokens.dedup();
    ensure!(tokens.len() as u64 == total, "only {} distinct tokens among {total} completions", tokens.len());
    let after = virtio_blk::stats();
    ensure!(after.submitted - before.submitted == total, "submitted {} (want {total})", after.submitted - before.submitted);
    ensure!(after.completed - before.completed == total, "completed {} (want {total})", after.completed - before.completed);
    ensure!(after.delivered - before.delivered == total, "delivered {} (want {total})", after.delivered - before.delivered);
    ensure!(after.failed == before.failed && after.unexpected == before.unexpected, "failed/unexpected: {before:?} -> {after:?}");
    ensure!(after.in_flight == 0, "{} requests still in flight", after.in_flight);
    Ok(())
}

fn full_virtqueue_is_refused() -> TestResult {
    const ATTEMPTS: u64 = 64;
    let seed = seed();
    let before = virtio_blk::stats();
    // With interrupts off no completion is taken off the virtqueue, so it must fill up.
    let (tokens, refused) = without_interrupts(|| {
        let mut tokens = Vec::new();
        for sector in QUEUE_FULL_BASE..QUEUE_FULL_BASE + ATTEMPTS {
            match virtio_blk::submit(Request::write(sector, sector_pattern(seed, sector))) {
                Ok(token) => tokens.push(token),
                Err(refused) => return (tokens, Some(refused)),
            }
        }
        (tokens, None)
    });
    let accepted = tokens.len() as u64;
    // Interrupts are on again: collect what was accepted before judging.
    let completions: Result<Vec<Completion>, BlockError> = tokens.iter().map(|&token| virtio_blk::wait(token)).collect();
    let Some(Refused { error, request }) = refused else {
        return Err(alloc::format!("{ATTEMPTS} requests accepted with no completion taken: the virtqueue never filled"));
    };
    ensure!(error == BlockError::QueueFull, "refused with {error:?}, not QueueFull");
    let refused_sector = QUEUE_FULL_BASE + accepted;
    ensure!(request.sector == refused_sector && request.buffer == sector_pattern(seed, refused_sector), "the refused request did not come back intact");
    ensure!((1..=16).contains(&accepted), "{accepted} requests fitted a 16-entry virtqueue");
    let after = virtio_blk::stats();
    ensure!(after.queue_full == before.queue_full + 1, "queue-full count {} -> {}", before.queue_full, after.queue_full);
    ensure!(after.submitted - before.submitted == accepted, "submitted {} for {accepted} accepted", after.submitted - before.submitted);
    let completions = completions.map_err(text)?;
    ensure!(completions.iter().all(|completion| completion.result.is_ok()), "an accepted request failed");
    // The refused request goes through once there is room.
    let token = virtio_blk::submit(request).map_err(|refused| text(refused.error))?;
    ensure!(virtio_blk::wait(token).map_err(text)?.result.is_ok(), "the retried request failed");
    let mut buffer = [0u8; SECTOR_SIZE];
    virtio_blk::read(refused_sector, &mut buffer).map_err(text)?;
    ensure!(buffer[..] == sector_pattern(seed, refused_sector)[..], "the retried write did not land");
    Ok(())
}

fn past_the_end_is_refused() -> TestResult {
    let capacity = disk()?.sectors;
    let before = virtio_blk::stats();
    for (sector, sectors) in [(capacity, 1), (capacity - 1, 2), (capacity + 100, 8), (u64::MAX, 1), (u64::MAX - 1, 4)] {
        match virtio_blk::submit(Request::read(sector, sectors as usize)) {
            Err(Refused { error: BlockError::PastEnd { sector: at, sectors: count, capacity: reported }, request })
                if at == sector && count == sectors && reported == capacity && request.buffer.len() as u64 == sectors * SECTOR_SIZE as u64 => {}
            Err(refused) => return Err(alloc::format!("{sectors} sector(s) at {sector}: refused with {:?}", refused.error)),
            Ok(token) => return Err(alloc::format!("{sectors} sector(s) at {sector} past the end were accepted ({token:?})")),
        }
    }
    let past_end = BlockError::PastEnd { sector: capacity, sectors: 1, capacity };
    ensure!(virtio_blk::read(capacity, &mut [0; SECTOR_SIZE]) == Err(past_end), "blocking read past the end");
    ensure!(virtio_blk::write(capacity, &[0; SECTOR_SIZE]) == Err(past_end), "blocking write past the end");
    for length in [0, 100, SECTOR_SIZE + 1, MAX_REQUEST_BYTES + SECTOR_SIZE] {
        let request = Request { buffer: alloc::vec![0; length], ..Request::read(0, 0) };
        match virtio_blk::submit(request) {
            Err(Refused { error: BlockError::BadLength(reported), .. }) if reported == length => {}
            other => return Err(alloc::format!("length {length}: {:?}", other.map_err(|refused| refused.error))),
        }
    }
    let after = virtio_blk::stats();
    ensure!(after.submitted == before.submitted, "a refused request reached the device");
    ensure!(after.refused - before.refused == 11, "refusals counted {} (want 11)", after.refused - before.refused);
    // The last sector itself is inside.
    let mut buffer = [0u8; SECTOR_SIZE];
    virtio_blk::read(capacity - 1, &mut buffer).map_err(|error| alloc::format!("the last sector: {error}"))?;
    Ok(())
}

fn waiting_strand_is_blocked() -> TestResult {
    // Transfers until enough waits have blocked (a busy host can finish a request before
    // the waiter looks — guest time stands still while QEMU is descheduled — and then there
    // is nothing to wait for), at most MAX_TRANSFERS.
    const TRANSFERS: u64 = 8;
    const MAX_TRANSFERS: u64 = 256;
    const BLOCKED_WANTED: u64 = 4;
    static PROGRESS: AtomicU64 = AtomicU64::new(0);
    static STOP: AtomicBool = AtomicBool::new(false);
    static SAW_WAITER_BLOCKED: AtomicBool = AtomicBool::new(false);
    PROGRESS.store(0, Ordering::SeqCst);
    STOP.store(false, Ordering::SeqCst);
    SAW_WAITER_BLOCKED.store(false, Ordering::SeqCst);
    let seed = seed();
    let before = virtio_blk::stats();
    // The spinner outranks every other strand but the waiter, so it has the hart whenever
    // the waiter has given it up, and only then. Both wait for the go (the spinner would
    // otherwise starve this strand); the waiter stops the spinner when it is done.
    let waiter_cell: Arc<spin::Once<Arc<Strand>>> = Arc::new(spin::Once::new());
    let watched = waiter_cell.clone();
    let spinner = sched::spawn("test-disk-spinner", Priority::new(5), move || {
        sched::block_current();
        while !STOP.load(Ordering::SeqCst) {
            PROGRESS.fetch_add(1, Ordering::SeqCst);
            if watched.get().is_some_and(|waiter| waiter.state() == StrandState::Blocked) {
                SAW_WAITER_BLOCKED.store(true, Ordering::SeqCst);
            }
            core::hint::spin_loop();
        }
    })
    .map_err(text)?;
    let during_io: Arc<spin::Mutex<Result<u64, String>>> = Arc::new(spin::Mutex::new(Ok(0)));
    let outcome = during_io.clone();
    let waiter = sched::spawn("test-disk-waiter", Priority::new(6), move || {
        sched::block_current();
        let mut progress = 0;
        let blocked_before = virtio_blk::stats().blocked_waits;
        let result = (0..MAX_TRANSFERS).take_while(|&index| index < TRANSFERS || virtio_blk::stats().blocked_waits - blocked_before < BLOCKED_WANTED).try_for_each(|index| {
            let sector = BLOCKED_BASE + index % TRANSFERS;
            let data = sector_pattern(seed, sector);
            let mut buffer = [0u8; SECTOR_SIZE];
            let started = PROGRESS.load(Ordering::SeqCst);
            virtio_blk::write(sector, &data).map_err(text)?;
            virtio_blk::read(sector, &mut buffer).map_err(text)?;
            progress += PROGRESS.load(Ordering::SeqCst) - started;
            if buffer[..] != data[..] {
                return Err(alloc::format!("sector {sector} read back differs"));
            }
            Ok(())
        });
        STOP.store(true, Ordering::SeqCst);
        without_interrupts(|| *outcome.lock() = result.map(|()| progress));
    })
    .map_err(text)?;
    waiter_cell.call_once(|| waiter.clone());
    sched::unblock(&spinner);
    sched::unblock(&waiter);
    waiter.join();
    spinner.join();
    let during_io = without_interrupts(|| during_io.lock().clone())?;
    let after = virtio_blk::stats();
    let blocked = after.blocked_waits - before.blocked_waits;
    ensure!(during_io > 0, "the spinner made no progress during the transfers ({blocked} waits blocked): the waiter held the hart");
    ensure!(SAW_WAITER_BLOCKED.load(Ordering::SeqCst), "the spinner never saw the waiter blocked");
    ensure!(blocked > 0, "no wait blocked");
    Ok(())
}

/// Completions the hook of [`completion_hook_holds_completions`] holds back.
static HELD: spin::Mutex<Vec<Completion>> = spin::Mutex::new(Vec::new());

/// The test's completion hook (interrupt context): keeps every completion.
fn hold(completion: Completion) {
    HELD.lock().push(completion);
}

/// Removes the test's hook however the test ends, so later requests are delivered.
struct HookGuard;

impl Drop for HookGuard {
    fn drop(&mut self) {
        virtio_blk::set_completion_hook(None);
        let held = without_interrupts(|| core::mem::take(&mut *HELD.lock()));
        held.into_iter().for_each(virtio_blk::deliver);
    }
}

fn completion_hook_holds_completions() -> TestResult {
    let seed = seed();
    let data = sector_pattern(seed, HOOK_BASE);
    let before = virtio_blk::stats();
    let replaced = virtio_blk::set_completion_hook(Some(hold));
    let guard = HookGuard;
    ensure!(replaced.is_none(), "a completion hook was already installed");
    let token = virtio_blk::submit(Request::write(HOOK_BASE, data.clone())).map_err(|refused| text(refused.error))?;
    let deadline = crate::time::ticks() + ARRIVAL_TICKS;
    while without_interrupts(|| HELD.lock().is_empty()) {
        ensure!(crate::time::ticks() < deadline, "the hook got no completion in 2 s");
        sched::sleep_ticks(1);
    }
    let held = virtio_blk::stats();
    ensure!(held.completed == before.completed + 1, "completed {} -> {}", before.completed, held.completed);
    ensure!(held.delivered == before.delivered, "delivered while the hook held the completion");
    virtio_blk::set_completion_hook(None);
    let completion = without_interrupts(|| HELD.lock().pop()).ok_or("the held completion vanished")?;
    ensure!(completion.token == token && completion.buffer == data, "the hook got {:?} for {token:?}", completion.token);
    drop(guard);
    virtio_blk::deliver(completion);
    let done = virtio_blk::wait(token).map_err(text)?;
    ensure!(done.result.is_ok() && done.token == token, "after delivery: {:?} {:?}", done.token, done.result);
    ensure!(virtio_blk::stats().delivered == before.delivered + 1, "delivered count");
    Ok(())
}

/// What the callback of [`callback_requests_are_called_once`] saw.
static CALLED: spin::Mutex<Vec<(Token, bool)>> = spin::Mutex::new(Vec::new());

fn note_completion(completion: Completion) {
    CALLED.lock().push((completion.token, completion.result.is_ok()));
}

fn callback_requests_are_called_once() -> TestResult {
    const REQUESTS: u64 = 8;
    without_interrupts(|| CALLED.lock().clear());
    let mut tokens = Vec::new();
    for sector in CALLBACK_BASE..CALLBACK_BASE + REQUESTS {
        let request = Request::read(sector, 1).calling(note_completion);
        tokens.push(virtio_blk::submit_waiting_for_room(request).map_err(|refused| text(refused.error))?);
    }
    let deadline = crate::time::ticks() + ARRIVAL_TICKS;
    while without_interrupts(|| CALLED.lock().len() as u64) < REQUESTS {
        ensure!(crate::time::ticks() < deadline, "{} of {REQUESTS} callbacks in 2 s", without_interrupts(|| CALLED.lock().len()));
        sched::sleep_ticks(1);
    }
    sched::sleep_ticks(2); // a duplicate call would arrive meanwhile
    let mut called = without_interrupts(|| CALLED.lock().clone());
    ensure!(called.iter().all(|(_, ok)| *ok), "a callback request failed");
    called.sort();
    let called: Vec<Token> = called.into_iter().map(|(token, _)| token).collect();
    tokens.sort();
    ensure!(called == tokens, "callbacks for {called:?}, requests {tokens:?}");
    ensure!(virtio_blk::wait(tokens[0]).err() == Some(BlockError::UnknownToken(tokens[0])), "a callback request could be waited for");
    Ok(())
}

fn interrupts_are_claimed_and_completed() -> TestResult {
    let plic_before = plic::stats();
    let disk_before = virtio_blk::stats();
    let seed = seed();
    virtio_blk::write(INTERRUPT_BASE, &sector_pattern(seed, INTERRUPT_BASE)).map_err(text)?;
    let mut buffer = [0u8; SECTOR_SIZE];
    virtio_blk::read(INTERRUPT_BASE, &mut buffer).map_err(text)?;
    let plic_after = plic::stats();
    let disk_after = virtio_blk::stats();
    let claims = plic_after.claims - plic_before.claims;
    ensure!(claims > 0, "no PLIC claim for two requests");
    ensure!(plic_after.completions - plic_before.completions == claims, "{claims} claims, {} completions", plic_after.completions - plic_before.completions);
    ensure!(plic_after.unhandled == plic_before.unhandled, "a claimed source had no handler");
    ensure!(disk_after.interrupts > disk_before.interrupts, "the disk's handler did not run");
    ensure!(disk_after.completed - disk_before.completed == 2, "completed {}", disk_after.completed - disk_before.completed);
    Ok(())
}
