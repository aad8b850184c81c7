//! `disksched_clook`: C-LOOK for `disk.Schedule` (Seltzer '95 §3: disk scheduling as a
//! graft).
//!
//! The arm sweeps towards higher cylinders only: the next request is the one with the
//! lowest cylinder at or beyond the arm's (lowest first sector, then oldest, among equals);
//! past the last one the arm returns to the lowest queued cylinder. The queue is read with
//! the `disk` domain's `spindle_disk_queue`; the order is the block service's built-in
//! C-LOOK reference's, so every technology can be checked against it. It sees at most
//! [`MAX_ENTRIES`] requests (the oldest).

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{DISK_SCHEDULE, DiskQueueEntry, DiskSchedule, ScheduleChoice};

spindle_abi::extension! {
    name: "disksched_clook",
    version: "0.1.0",
    budget_microseconds: 200,
    memory_quota_bytes: 16 * 1024,
    domains: ["disk"],
    bindings: [
        DISK_SCHEDULE => schedule,
    ],
}

/// Queue entries the policy reads at most.
pub const MAX_ENTRIES: usize = 128;

/// The entry to serve next with the arm over `head_cylinder`.
pub fn choose(entries: impl Iterator<Item = DiskQueueEntry> + Clone, head_cylinder: u64) -> Option<DiskQueueEntry> {
    let sweep = |entry: &DiskQueueEntry| (entry.cylinder, entry.sector, entry.arrival_ns, entry.id);
    entries.clone().filter(|entry| entry.cylinder >= head_cylinder).min_by_key(sweep).or_else(|| entries.min_by_key(sweep))
}

/// `disk.Schedule`: the next request of the sweep, or no choice when the queue cannot be read.
fn schedule(args: &DiskSchedule) -> ScheduleChoice {
    let mut bytes = [0u8; MAX_ENTRIES * DiskQueueEntry::SIZE];
    let entries = DiskQueueEntry::read_queue(&mut bytes);
    ScheduleChoice { request: choose(entries, args.head_cylinder).map_or(ScheduleChoice::NONE, |entry| entry.id) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, cylinder: u64, sector: u64) -> DiskQueueEntry {
        DiskQueueEntry { id, sector, cylinder, arrival_ns: id }
    }

    #[test]
    fn sweeps_up_then_wraps_to_the_lowest() {
        let queue = [entry(1, 900, 900_000), entry(2, 120, 120_500), entry(3, 80, 80_000), entry(4, 120, 120_100)];
        assert_eq!(choose(queue.into_iter(), 100).map(|entry| entry.id), Some(4), "cylinder 120, lower sector first");
        assert_eq!(choose(queue.into_iter(), 121).map(|entry| entry.id), Some(1));
        assert_eq!(choose(queue.into_iter(), 901).map(|entry| entry.id), Some(3), "past the last: back to the lowest");
        assert_eq!(choose(core::iter::empty::<DiskQueueEntry>(), 5), None);
    }

    #[test]
    fn without_a_kernel_the_queue_is_empty_and_there_is_no_choice() {
        let args = DiskSchedule { queued: 3, head_cylinder: 0, oldest: 1, now_ns: 0 };
        assert_eq!(schedule(&args).request, ScheduleChoice::NONE);
        assert_eq!(spindle_extension().domains, ["disk"]);
    }
}
