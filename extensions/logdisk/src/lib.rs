//! `logdisk`: the black-box graft of Small & Seltzer '96 (§3.3, §5.6): a logical disk
//! (de Jonge et al. '93) that turns random block writes into sequential segment writes.
//!
//! Bound to `block.Write { logical } -> Placement { physical }`: every write goes to the
//! log head, the next free block of the current segment (segments of
//! `segment_blocks` = 16 blocks = 64 KiB are filled in order, so the disk sees whole
//! segments written sequentially), and the logical→physical map remembers it
//! (`block.MapLookup` reads the map back). `block.Format` resets the map and the log.
//!
//! As in the paper there is no cleaner: the log is written once, front to back. A disk of
//! N blocks takes N writes (the benchmark: 262,144 writes on a 1 GiB disk of 4 KiB blocks,
//! exactly the paper's run); after that every write answers [`Placement::NONE`] (log full)
//! and the block service refuses it. A cleaner would reclaim segments whose blocks were
//! all overwritten; see `docs/extension-cost-plan.md`.
//!
//! The map is a `static` array of [`CAPACITY_BLOCKS`] `u32` entries (1 MiB: physical
//! block + 1, 0 = unmapped) of relaxed atomics — interior mutability without `unsafe`,
//! which compile to plain loads and stores. It lives in the extension's static data: the
//! kernel's image built in, a zero-filled segment of the native image, the module's
//! initial linear memory in Wasm (so the manifest's quota covers it).

#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spindle_abi::event::{BLOCK_FORMAT, BLOCK_MAP_LOOKUP, BLOCK_WRITE, BlockWrite, DiskFormat, MapLookup, Placement};

spindle_abi::extension! {
    name: "logdisk",
    version: "0.1.0",
    budget_microseconds: 10_000,
    memory_quota_bytes: 2 * 1024 * 1024,
    domains: [],
    bindings: [
        BLOCK_WRITE => place_write,
        BLOCK_MAP_LOOKUP => look_up,
        BLOCK_FORMAT => format,
    ],
}

/// Largest disk the map covers: 1 GiB of 4 KiB blocks.
pub const CAPACITY_BLOCKS: usize = 262_144;
/// Blocks per segment when the disk was never formatted (64 KiB of 4 KiB blocks).
pub const DEFAULT_SEGMENT_BLOCKS: u64 = 16;

/// A logical disk: the map, the disk's geometry and the log head.
pub struct LogicalDisk {
    /// `physical + 1` for each logical block; 0: never written.
    map: [AtomicU32; CAPACITY_BLOCKS],
    /// Blocks on the disk (at most [`CAPACITY_BLOCKS`]).
    blocks: AtomicU64,
    /// Blocks per segment.
    segment_blocks: AtomicU64,
    /// The segment being filled.
    segment: AtomicU64,
    /// Blocks of it already written.
    fill: AtomicU64,
}

impl Default for LogicalDisk {
    fn default() -> Self {
        Self::new()
    }
}

impl LogicalDisk {
    /// An empty logical disk of [`CAPACITY_BLOCKS`] blocks and 16-block segments.
    pub const fn new() -> Self {
        LogicalDisk {
            map: [const { AtomicU32::new(0) }; CAPACITY_BLOCKS],
            blocks: AtomicU64::new(CAPACITY_BLOCKS as u64),
            segment_blocks: AtomicU64::new(DEFAULT_SEGMENT_BLOCKS),
            segment: AtomicU64::new(0),
            fill: AtomicU64::new(0),
        }
    }

    /// Forgets every mapping and restarts the log at block 0 of a disk of `blocks` blocks
    /// (clamped to [`CAPACITY_BLOCKS`]) in segments of `segment_blocks` (at least 1).
    pub fn format(&self, blocks: u64, segment_blocks: u64) {
        for entry in &self.map {
            entry.store(0, Ordering::Relaxed);
        }
        self.blocks.store(blocks.min(CAPACITY_BLOCKS as u64), Ordering::Relaxed);
        self.segment_blocks.store(segment_blocks.max(1), Ordering::Relaxed);
        self.segment.store(0, Ordering::Relaxed);
        self.fill.store(0, Ordering::Relaxed);
    }

    /// Places a write of `logical` at the log head and maps it there; [`Placement::NONE`]
    /// for a block outside the disk or when the log is full.
    pub fn write(&self, logical: u64) -> u64 {
        let blocks = self.blocks.load(Ordering::Relaxed);
        let Some(entry) = self.map.get(logical as usize).filter(|_| logical < blocks) else { return Placement::NONE };
        let segment_blocks = self.segment_blocks.load(Ordering::Relaxed);
        let (mut segment, mut fill) = (self.segment.load(Ordering::Relaxed), self.fill.load(Ordering::Relaxed));
        if fill == segment_blocks {
            // The segment is complete (a real logical disk writes it out now): open the next.
            segment += 1;
            fill = 0;
        }
        let physical = segment * segment_blocks + fill;
        if physical >= blocks {
            return Placement::NONE;
        }
        self.segment.store(segment, Ordering::Relaxed);
        self.fill.store(fill + 1, Ordering::Relaxed);
        entry.store(physical as u32 + 1, Ordering::Relaxed);
        physical
    }

    /// Where `logical` lives; [`Placement::NONE`] if it was never written (or is outside
    /// the map).
    pub fn look_up(&self, logical: u64) -> u64 {
        match self.map.get(logical as usize).map(|entry| entry.load(Ordering::Relaxed)) {
            Some(0) | None => Placement::NONE,
            Some(stored) => u64::from(stored) - 1,
        }
    }
}

/// This extension instance's logical disk.
static DISK: LogicalDisk = LogicalDisk::new();

/// `block.Write`: the physical block for this write.
pub fn place_write(write: &BlockWrite) -> Placement {
    Placement { physical: DISK.write(write.logical) }
}

/// `block.MapLookup`: where a logical block lives.
pub fn look_up(lookup: &MapLookup) -> Placement {
    Placement { physical: DISK.look_up(lookup.logical) }
}

/// `block.Format`: reset the map and the log.
pub fn format(disk: &DiskFormat) {
    DISK.format(disk.blocks, disk.segment_blocks);
}

/// The benchmark's workload: random writes, 80 % of them to 20 % of the blocks.
pub mod workload {
    /// Writes in the workload: one per block of the disk, as in the paper (no cleaner).
    pub const WRITES: usize = super::CAPACITY_BLOCKS;
    /// The generator's fixed seed.
    pub const SEED: u64 = 0x4c44_2d53_5049_4e44;
    /// Percentage of writes that go to the hot blocks.
    pub const HOT_PERCENT: u64 = 80;
    /// Hot blocks: 20 % of the disk.
    pub const HOT_BLOCKS: u64 = super::CAPACITY_BLOCKS as u64 / 5;
    /// An odd multiplier: `rank · SPREAD mod blocks` is a bijection on a power-of-two disk,
    /// so the hot blocks are spread over the whole disk rather than packed at its start.
    const SPREAD: u64 = 0x9e37_79b1;

    /// The write stream: Marsaglia's xorshift64 from [`SEED`].
    #[derive(Clone, Debug)]
    pub struct Writes {
        state: u64,
    }

    impl Default for Writes {
        fn default() -> Self {
            Writes { state: SEED }
        }
    }

    impl Writes {
        fn next_random(&mut self) -> u64 {
            let mut value = self.state;
            value ^= value << 13;
            value ^= value >> 7;
            value ^= value << 17;
            self.state = value;
            value
        }
    }

    impl Iterator for Writes {
        type Item = u64;

        /// The next logical block written (never ends).
        fn next(&mut self) -> Option<u64> {
            let blocks = super::CAPACITY_BLOCKS as u64;
            let random = self.next_random();
            let rank = if (random >> 32) % 100 < HOT_PERCENT {
                (random & 0xffff_ffff) % HOT_BLOCKS
            } else {
                HOT_BLOCKS + (random & 0xffff_ffff) % (blocks - HOT_BLOCKS)
            };
            Some(rank.wrapping_mul(SPREAD) % blocks)
        }
    }

    /// Whether `logical` is one of the hot blocks.
    pub fn is_hot(logical: u64) -> bool {
        // SPREAD is odd, so its inverse modulo the power-of-two disk size undoes the spread.
        let blocks = super::CAPACITY_BLOCKS as u64;
        let mut inverse = 1u64;
        for _ in 0..6 {
            inverse = inverse.wrapping_mul(2u64.wrapping_sub(SPREAD.wrapping_mul(inverse)));
        }
        logical.wrapping_mul(inverse) % blocks < HOT_BLOCKS
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn writes_fill_segments_in_order_and_map_to_the_latest() {
        // Statics: a 1 MiB map would crowd a test thread's stack.
        static DISK: LogicalDisk = LogicalDisk::new();
        let disk = &DISK;
        disk.format(64, 16);
        let logicals = [5u64, 9, 5, 63, 0, 5];
        let placed: Vec<u64> = logicals.iter().map(|&logical| disk.write(logical)).collect();
        assert_eq!(placed, [0, 1, 2, 3, 4, 5], "sequential at the log head");
        assert_eq!(disk.look_up(5), 5, "the latest write of block 5");
        assert_eq!(disk.look_up(9), 1);
        assert_eq!(disk.look_up(7), Placement::NONE, "never written");
        assert_eq!(disk.write(64), Placement::NONE, "outside the disk");
        assert_eq!(disk.look_up(1 << 40), Placement::NONE);
    }

    #[test]
    fn log_fills_exactly_once_then_refuses() {
        static DISK: LogicalDisk = LogicalDisk::new();
        let disk = &DISK;
        disk.format(40, 16);
        for index in 0..40u64 {
            assert_eq!(disk.write(index % 7), index, "segment {} block {}", index / 16, index % 16);
        }
        assert_eq!(disk.write(3), Placement::NONE, "no cleaner: the log is full");
        assert_eq!(disk.look_up(3), 38);
        disk.format(40, 16);
        assert_eq!(disk.look_up(3), Placement::NONE, "format forgets the map");
        assert_eq!(disk.write(3), 0);
        disk.format(1 << 40, 0);
        assert_eq!(disk.write(CAPACITY_BLOCKS as u64 - 1), 0, "clamped to the map; segments of at least one block");
        assert_eq!(disk.write(CAPACITY_BLOCKS as u64), Placement::NONE);
    }

    #[test]
    fn workload_is_skewed_80_20() {
        let writes: Vec<u64> = workload::Writes::default().take(workload::WRITES).collect();
        assert!(writes.iter().all(|&logical| logical < CAPACITY_BLOCKS as u64));
        let hot = writes.iter().filter(|&&logical| workload::is_hot(logical)).count();
        let share = hot * 1000 / writes.len();
        assert!((790..=810).contains(&share), "{share} per mille of writes are hot");
        let hot_blocks = (0..CAPACITY_BLOCKS as u64).filter(|&logical| workload::is_hot(logical)).count() as u64;
        assert_eq!(hot_blocks, workload::HOT_BLOCKS);
        assert_eq!(writes[..8], workload::Writes::default().take(8).collect::<Vec<_>>()[..], "fixed seed");
    }

    #[test]
    fn handlers_use_the_instance_disk() {
        format(&DiskFormat { blocks: 32, segment_blocks: 16 });
        assert_eq!(place_write(&BlockWrite { logical: 3 }).physical, 0);
        assert_eq!(look_up(&MapLookup { logical: 3 }).physical, 0);
        assert_eq!(spindle_extension().bindings.len(), 3);
    }
}
