//! `disksched_faulty`: a disk-scheduling policy that misbehaves on request, to test that
//! the dispatcher contains a broken `disk.Schedule` handler and the block service goes on
//! in FIFO order, losing no request.
//!
//! It reads the queue with the `disk` domain's `spindle_disk_queue` and, by the sectors
//! queued:
//!
//! | queued | behaviour |
//! |---|---|
//! | a request at [`PANIC_SECTOR`] | panics (index out of bounds) |
//! | a request at [`LOOP_SECTOR`] | loops forever (overruns its budget) |
//! | neither | answers the newest request (arrival, then id): healthy, and unlike FIFO, so a test sees its answers used |
//!
//! The triggers are sectors a test reads on purpose (odd, near the end of a 1 GiB disk).

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{DISK_SCHEDULE, DiskQueueEntry, DiskSchedule, ScheduleChoice};

spindle_abi::extension! {
    name: "disksched_faulty",
    version: "0.1.0",
    budget_microseconds: 500,
    memory_quota_bytes: 16 * 1024,
    domains: ["disk"],
    bindings: [
        DISK_SCHEDULE => schedule,
    ],
}

/// Queue entries the policy reads at most.
pub const MAX_ENTRIES: usize = 64;
/// A queued request at this sector makes the policy panic.
pub const PANIC_SECTOR: u64 = 2_000_001;
/// A queued request at this sector makes the policy loop forever.
pub const LOOP_SECTOR: u64 = 2_000_003;

/// What the policy does with a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Answer this request (the newest), or [`ScheduleChoice::NONE`] for an empty queue.
    Answer(u64),
    /// Panic.
    Panic,
    /// Loop forever.
    Loop,
}

/// What the policy does with `entries` (pure: the tests check it on the host).
pub fn behaviour(entries: impl Iterator<Item = DiskQueueEntry> + Clone) -> Behaviour {
    if entries.clone().any(|entry| entry.sector == PANIC_SECTOR) {
        return Behaviour::Panic;
    }
    if entries.clone().any(|entry| entry.sector == LOOP_SECTOR) {
        return Behaviour::Loop;
    }
    Behaviour::Answer(entries.max_by_key(|entry| (entry.arrival_ns, entry.id)).map_or(ScheduleChoice::NONE, |entry| entry.id))
}

/// `disk.Schedule`: the newest request, unless a trigger sector is queued.
fn schedule(args: &DiskSchedule) -> ScheduleChoice {
    let mut bytes = [0u8; MAX_ENTRIES * DiskQueueEntry::SIZE];
    match behaviour(DiskQueueEntry::read_queue(&mut bytes)) {
        Behaviour::Answer(request) => ScheduleChoice { request },
        Behaviour::Panic => panic_out_of_bounds(args),
        Behaviour::Loop => loop_forever(args),
    }
}

fn panic_out_of_bounds(args: &DiskSchedule) -> ScheduleChoice {
    let table = [1u64, 2, 3];
    // `queued` is at least 1, so the index is at least 3: out of bounds.
    ScheduleChoice { request: table[core::hint::black_box(args.queued as usize + 2)] }
}

fn loop_forever(args: &DiskSchedule) -> ScheduleChoice {
    let mut value = args.now_ns;
    loop {
        value = core::hint::black_box(value.wrapping_add(1));
        if value == args.now_ns.wrapping_sub(1) && core::hint::black_box(false) {
            return ScheduleChoice { request: value };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, sector: u64, arrival_ns: u64) -> DiskQueueEntry {
        DiskQueueEntry { id, sector, cylinder: sector / 1368, arrival_ns }
    }

    #[test]
    fn answers_the_newest_without_a_trigger() {
        let queue = [entry(1, 100, 10), entry(2, 900, 30), entry(3, 50, 20)];
        assert_eq!(behaviour(queue.into_iter()), Behaviour::Answer(2));
        let tied = [entry(4, 100, 10), entry(5, 100, 10)];
        assert_eq!(behaviour(tied.into_iter()), Behaviour::Answer(5), "equal arrivals: the higher id");
        assert_eq!(behaviour(core::iter::empty()), Behaviour::Answer(ScheduleChoice::NONE));
    }

    #[test]
    fn triggers_pick_the_misbehaviour() {
        assert_eq!(behaviour([entry(1, 100, 10), entry(2, PANIC_SECTOR, 20)].into_iter()), Behaviour::Panic);
        assert_eq!(behaviour([entry(1, LOOP_SECTOR, 10)].into_iter()), Behaviour::Loop);
        assert_eq!(behaviour([entry(1, LOOP_SECTOR, 10), entry(2, PANIC_SECTOR, 20)].into_iter()), Behaviour::Panic, "panic first");
    }

    #[test]
    #[should_panic]
    fn panics_on_request() {
        panic_out_of_bounds(&DiskSchedule { queued: 1, head_cylinder: 0, oldest: 1, now_ns: 0 });
    }

    #[test]
    fn without_a_kernel_the_queue_is_empty() {
        let args = DiskSchedule { queued: 2, head_cylinder: 0, oldest: 1, now_ns: 0 };
        assert_eq!(schedule(&args).request, ScheduleChoice::NONE);
        assert_eq!(spindle_extension().domains, ["disk"]);
    }
}
