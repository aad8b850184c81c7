//! `diskstat [wait COMPLETED [queue]]`: the disk's exported state, as user space sees it
//! through the `disk_state` system call (Infokernel-style: the queue, the arm's position
//! and the block service's counters).
//!
//! Without arguments it prints the state once: the arm's cylinder, the counters (requests,
//! modelled seek distance and busy time, mean and p99 response) and one line per queued
//! request (id, sector, cylinder, arrival).
//!
//! `wait COMPLETED` reads the state again and again (yielding in between) until at least
//! COMPLETED requests have completed, checking every copy for consistency — the counts
//! add up (submitted = completed + queued + on the device), counters never go back,
//! queue entries are in submission order, arrived before the copy, and lie on the disk —
//! then prints the last copy. It expects a modelled disk (busy time must grow). With
//! `queue` it also requires one copy with requests queued. Gives up after 5 s of guest
//! time.
//!
//! Exit status: 0 the state was read (and, with `wait`, was consistent and changed); 2 timed
//! out; 3 inconsistent (the reason is printed); 4 no queue seen with `queue`; 1 bad
//! arguments; 100 + the error code when the call fails (116: the machine has no disk).

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use spindle_runtime::arch::{self, DiskQueueEntry, DiskState, Error};
use spindle_runtime::{Arguments, println};

spindle_runtime::entry!(main);

/// Bytes of a copy: the header and 256 entries (the kernel's default queue).
const BUFFER_BYTES: usize = DiskState::SIZE + 256 * DiskQueueEntry::SIZE;
/// How long `wait` waits, guest ns.
const WAIT_NS: u64 = 5_000_000_000;

fn main(arguments: &Arguments) -> i32 {
    let mut buffer = [0u8; BUFFER_BYTES];
    match arguments.get(0) {
        None => match read(&mut buffer) {
            Ok((state, length)) => {
                print(&state, &buffer[..length]);
                0
            }
            Err(status) => status,
        },
        Some("wait") => {
            let Some(target) = arguments.get(1).and_then(|word| word.parse::<u64>().ok()) else {
                println!("diskstat: usage: diskstat [wait COMPLETED [queue]]");
                return 1;
            };
            let need_queue = arguments.get(2) == Some("queue");
            wait(&mut buffer, target, need_queue)
        }
        Some(other) => {
            println!("diskstat: unknown mode {other:?}; usage: diskstat [wait COMPLETED [queue]]");
            1
        }
    }
}

/// One copy of the state: the header and the bytes copied. Errors: the exit status.
fn read(buffer: &mut [u8]) -> Result<(DiskState, usize), i32> {
    let total = match arch::disk_state(buffer) {
        Ok(total) => total,
        Err(error) => {
            println!("diskstat: disk_state failed: {error}{}", if error == Error::NoDevice { " (the machine has no disk)" } else { "" });
            return Err(100 + error.code() as i32);
        }
    };
    let length = total.min(buffer.len());
    let Some(state) = DiskState::from_bytes(&buffer[..length]) else {
        println!("diskstat: the state ({total} bytes) has no valid header");
        return Err(3);
    };
    if state.total_bytes() != total as u64 {
        println!("diskstat: the call returned {total} bytes, the header says {}", state.total_bytes());
        return Err(3);
    }
    Ok((state, length))
}

/// Milliseconds with three decimals, or `-`.
struct Millis(u64);

impl core::fmt::Display for Millis {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0 == DiskState::NO_VALUE {
            formatter.write_str("-")
        } else {
            write!(formatter, "{}.{:03} ms", self.0 / 1_000_000, self.0 / 1_000 % 1_000)
        }
    }
}

fn print(state: &DiskState, bytes: &[u8]) {
    println!(
        "disk: at {}, arm over cylinder {} of {}, {} sectors; {} queued (room for {}), {} on the device",
        Millis(state.now_ns),
        state.head_cylinder,
        state.cylinders,
        state.capacity_sectors,
        state.queued,
        state.queue_capacity,
        state.on_device
    );
    println!(
        "  requests: {} submitted, {} dispatched, {} completed, {} refused (queue full), {} device errors, {} answered by disk.Schedule, {} starvation overrides",
        state.submitted, state.dispatched, state.completed, state.refused_full, state.device_errors, state.answered, state.starvation_overrides
    );
    println!(
        "  modelled: seek {} cylinders, busy {}, response mean {}, p99 {}",
        state.seek_cylinders,
        Millis(state.busy_ns),
        Millis(state.mean_response_ns),
        Millis(state.p99_response_ns)
    );
    let shown = state.entries(bytes).count();
    if shown > 0 {
        println!("  queue (oldest first): id sector cylinder arrival");
        for entry in state.entries(bytes) {
            println!("    {} {} {} {}", entry.id, entry.sector, entry.cylinder, Millis(entry.arrival_ns));
        }
    }
    if (shown as u64) < state.queued {
        println!("  ({} more not copied)", state.queued - shown as u64);
    }
}

/// Why a copy of the state is inconsistent, if it is (alone, or after `previous`).
fn inconsistency(state: &DiskState, bytes: &[u8], previous: Option<&DiskState>) -> Option<&'static str> {
    if state.submitted != state.completed + state.queued + state.on_device {
        return Some("submitted != completed + queued + on the device");
    }
    if state.dispatched != state.completed + state.on_device {
        return Some("dispatched != completed + on the device");
    }
    if state.queued > state.queue_capacity || state.on_device > 1 {
        return Some("more queued than the queue holds, or two requests on the device");
    }
    if state.head_cylinder >= state.cylinders {
        return Some("the arm is past the last cylinder");
    }
    if state.completed > 0 && (state.mean_response_ns == DiskState::NO_VALUE || state.p99_response_ns == DiskState::NO_VALUE) {
        return Some("requests completed but no response time");
    }
    let mut last: Option<DiskQueueEntry> = None;
    for entry in state.entries(bytes) {
        if entry.arrival_ns > state.now_ns || entry.sector >= state.capacity_sectors || entry.cylinder >= state.cylinders {
            return Some("a queued request arrived after the copy or lies off the disk");
        }
        if let Some(last) = last
            && (entry.id <= last.id || entry.arrival_ns < last.arrival_ns)
        {
            return Some("the queue is not in submission order");
        }
        last = Some(entry);
    }
    if let Some(previous) = previous {
        let grew = |now: u64, before: u64| now >= before;
        let counters = [
            (state.now_ns, previous.now_ns),
            (state.submitted, previous.submitted),
            (state.completed, previous.completed),
            (state.dispatched, previous.dispatched),
            (state.seek_cylinders, previous.seek_cylinders),
            (state.busy_ns, previous.busy_ns),
        ];
        if !counters.iter().all(|&(now, before)| grew(now, before)) {
            return Some("a counter went back");
        }
    }
    None
}

fn wait(buffer: &mut [u8], target: u64, need_queue: bool) -> i32 {
    let (first, length) = match read(buffer) {
        Ok(copy) => copy,
        Err(status) => return status,
    };
    if let Some(reason) = inconsistency(&first, &buffer[..length], None) {
        println!("diskstat: inconsistent state: {reason}");
        print(&first, &buffer[..length]);
        return 3;
    }
    let mut previous = first;
    let mut saw_queue = false;
    loop {
        let (state, length) = match read(buffer) {
            Ok(copy) => copy,
            Err(status) => return status,
        };
        let bytes = &buffer[..length];
        if let Some(reason) = inconsistency(&state, bytes, Some(&previous)) {
            println!("diskstat: inconsistent state: {reason}");
            print(&state, bytes);
            return 3;
        }
        saw_queue |= state.entries(bytes).next().is_some();
        if state.completed >= target {
            print(&state, bytes);
            if state.busy_ns <= first.busy_ns {
                println!("diskstat: {} requests completed but the modelled busy time did not grow", state.completed - first.completed);
                return 3;
            }
            if need_queue && !saw_queue {
                println!("diskstat: no copy had a request queued");
                return 4;
            }
            println!("diskstat: {} requests completed while watching; every copy consistent", state.completed - first.completed);
            return 0;
        }
        if state.now_ns.saturating_sub(first.now_ns) > WAIT_NS {
            println!("diskstat: timed out: {} of {target} requests completed", state.completed);
            print(&state, bytes);
            return 2;
        }
        previous = state;
        arch::yield_now();
    }
}
