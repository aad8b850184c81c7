//! `disksched_sstf`: shortest seek first for `disk.Schedule` (Seltzer '95 §3: disk
//! scheduling as a graft).
//!
//! When the disk falls idle with requests queued, the block service asks which one to
//! serve; this policy reads the queue with the `disk` domain's `spindle_disk_queue` and
//! answers the request whose cylinder is nearest the arm's, the oldest among equals — the
//! same order as the block service's built-in SSTF reference, so every technology can be
//! checked against it. It sees at most [`MAX_ENTRIES`] requests (the oldest); the service
//! still serves the oldest first once it has waited the maximum wait, so SSTF's
//! starvation of far requests is bounded.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{DISK_SCHEDULE, DiskQueueEntry, DiskSchedule, ScheduleChoice};

spindle_abi::extension! {
    name: "disksched_sstf",
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

/// The entry to serve next with the arm over `head_cylinder`: nearest cylinder, then
/// oldest (arrival, then id).
pub fn choose(entries: impl Iterator<Item = DiskQueueEntry>, head_cylinder: u64) -> Option<DiskQueueEntry> {
    entries.min_by_key(|entry| (entry.cylinder.abs_diff(head_cylinder), entry.arrival_ns, entry.id))
}

/// `disk.Schedule`: the nearest request, or no choice when the queue cannot be read.
fn schedule(args: &DiskSchedule) -> ScheduleChoice {
    let mut bytes = [0u8; MAX_ENTRIES * DiskQueueEntry::SIZE];
    let entries = DiskQueueEntry::read_queue(&mut bytes);
    ScheduleChoice { request: choose(entries, args.head_cylinder).map_or(ScheduleChoice::NONE, |entry| entry.id) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, cylinder: u64, arrival_ns: u64) -> DiskQueueEntry {
        DiskQueueEntry { id, sector: cylinder * 1368, cylinder, arrival_ns }
    }

    #[test]
    fn nearest_cylinder_then_oldest() {
        let queue = [entry(1, 900, 10), entry(2, 120, 20), entry(3, 80, 30), entry(4, 120, 5)];
        assert_eq!(choose(queue.into_iter(), 100).map(|entry| entry.id), Some(4), "80 and 120 are both 20 away: the oldest of them first");
        assert_eq!(choose(queue.into_iter(), 85).map(|entry| entry.id), Some(3));
        assert_eq!(choose(queue.into_iter(), 118).map(|entry| entry.id), Some(4), "two at 120: the older (arrival 5) first");
        assert_eq!(choose(queue.into_iter(), 2000).map(|entry| entry.id), Some(1));
        assert_eq!(choose(core::iter::empty(), 5), None);
    }

    #[test]
    fn without_a_kernel_the_queue_is_empty_and_there_is_no_choice() {
        let args = DiskSchedule { queued: 3, head_cylinder: 0, oldest: 1, now_ns: 0 };
        assert_eq!(schedule(&args).request, ScheduleChoice::NONE);
        assert_eq!(spindle_extension().domains, ["disk"]);
    }
}
