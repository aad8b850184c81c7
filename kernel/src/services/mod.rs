//! Core services, each wired into the kernel by one file here; each service's policy lives
//! in a host-tested crate under `kernel/services/` (docs/architecture.md).
//!
//! | service | policy crate | events | kernel functions |
//! |---|---|---|---|
//! | [`frames`] (physical memory; a synthetic reclaim queue until virtual memory lands) | `spindle-service-frames` | `mm.Reclaim`, `mm.HotListSet` | domain `mm` |
//! | [`blockpath`] (the block path: the block grafts on reads from and writes to the disk) | `spindle-service-blockpath` | `block.ReadFilter`, `block.ReadDone`, `block.Write`, `block.MapLookup`, `block.Format` | domain `block` |
//! | [`disk`] (the disk: queue, timing model, scheduling) | `spindle-service-disk` | `disk.Schedule` | domain `disk` |
//! | [`fs`] (the file system over the buffer cache over the disk; its cache decides through [`cache_events`]) | `spindle-service-fs`, `spindle-service-bcache` | — (raises `cache.*` through `cache_events`) | — |
//! | [`locks`] (byte-range locks; granting through [`lock_events`]) | `spindle-service-locks` | — (raises `lock.Grant`) | — |
//! | [`policy`] (a policy extension bound to one file) | — | — | — |
//! | [`cache_events`] (the buffer cache's decision points; the cache is its owner's) | `spindle-service-bcache` | `cache.Enqueue`, `cache.Evict`, `cache.Writeback`, `cache.ReadAhead` | domain `cache` |
//! | [`lock_events`] (the byte-range lock tables' granting decision) | `spindle-service-locks` | `lock.Grant` | domain `lock` |
//! | [`vm`] (translation: user page faults in `vm_map` regions, demand-zero, pagers; the regions are the address space's) | `spindle-service-vm`, `spindle-service-frames` | `vm.PageNotPresent`, `vm.ProtectionFault`, `vm.BadAddress` | domain `vm` |

pub mod blockpath;
pub mod cache_events;
pub mod disk;
pub mod fs;
pub mod locks;
pub mod policy;
pub mod frames;
pub mod lock_events;
pub mod vm;

/// Registers every service's events with the kernel dispatcher.
pub fn init() {
    frames::init();
    blockpath::init();
    disk::init();
    cache_events::init();
    lock_events::init();
    vm::init();
}
