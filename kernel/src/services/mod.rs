//! Core services, each wired into the kernel by one file here; each service's policy lives
//! in a host-tested crate under `kernel/services/` (docs/architecture.md).
//!
//! | service | policy crate | events | kernel functions |
//! |---|---|---|---|
//! | [`frames`] (physical memory; a synthetic reclaim queue until virtual memory lands) | `spindle-service-frames` | `mm.Reclaim`, `mm.HotListSet` | domain `mm` |
//! | [`blockpath`] (the block path; in memory until the storage service lands) | `spindle-service-blockpath` | `block.ReadFilter`, `block.ReadDone`, `block.Write`, `block.MapLookup`, `block.Format` | domain `block` |
//! | [`disk`] (the disk: queue, timing model, scheduling) | `spindle-service-disk` | `disk.Schedule` | domain `disk` |
//! | [`fs`] (the file system over the buffer cache over the disk) | `spindle-service-fs`, `spindle-service-bcache` | (cache events: to come) | — |

pub mod blockpath;
pub mod disk;
pub mod fs;
pub mod frames;

/// Registers every service's events with the kernel dispatcher.
pub fn init() {
    frames::init();
    blockpath::init();
    disk::init();
}
