//! The black-box graft of Small & Seltzer '96 (§3.3, §5.6: a logical disk over 262,144
//! writes), measured as every technology in one run (group `graft-logdisk`).
//!
//! Workload (`logdisk::workload`): 262,144 writes — the number of blocks of the 1 GiB disk
//! of 4 KiB blocks, as in the paper, whose logical disk has no cleaner — 80 % of them to
//! 20 % of the blocks, from a fixed-seed generator, precomputed so the measured loop only
//! loads the next block number. Each row formats the disk (`block.Format`), then raises
//! `block.Write` once per write through the kernel dispatcher; the primary module
//! validates every answer against its shadow map and records it. The logical disk fills
//! its log front to back, so write `i` must land on physical block `i`: any other answer,
//! a rejection or a refused write withholds the row and fails the benchmark. After the
//! run the logical disk's own map is checked (`block.MapLookup` for every block of the
//! disk, [`block::verify_map`]).
//!
//! A row is instructions per write, averaged over the run. Rows: `write-builtin`,
//! `write-native`, `write-wasm` (over the first [`WASM_WRITES`] writes: see its doc),
//! `write-c-reference` (the C graft through bounded bindings), `write-direct` (the Rust
//! graft called without the dispatcher, no validation), `dispatch-1-bounded-binding` (a
//! bounded binding answering in place, through the same validating primary module).

use alloc::vec::Vec;

use spindle_abi::event::{BLOCK_WRITE, BlockWrite, DiskFormat, Placement};
// Used only by the C reference's rows (absent when clang could not build it).
#[cfg(not(spindle_no_c_reference))]
use spindle_abi::event::{BLOCK_FORMAT, BLOCK_MAP_LOOKUP, MapLookup};
use spindle_dispatch::{BindingSpec, Mode, handler_fn};

use super::{measure, report};
use crate::services::blockpath as block;
use crate::ext::{self, Preference};

/// The benchmark group.
pub const GROUP: &str = "graft-logdisk";
/// Writes per row: the whole workload.
pub const WRITES: usize = logdisk::workload::WRITES;
/// Writes measured for the Wasm row: the whole workload too (a run of 262,144 Wasm
/// writes plus the 262,144 look-ups that verify the map takes a few seconds of host time
/// under `-icount`; lower this, and say so in the row's name, if it ever gets too slow).
pub const WASM_WRITES: usize = WRITES;
/// Extension measured.
const EXTENSION: &str = "logdisk";

/// The C reference (`extensions/logdisk/c/logdisk.c`, compiled by clang and linked in by
/// kernel/build.rs): the same logical disk, unprotected.
#[cfg(not(spindle_no_c_reference))]
pub mod c {
    unsafe extern "C" {
        fn spindle_c_logdisk_format(blocks: u64, segment_blocks: u64);
        fn spindle_c_logdisk_write(logical: u64) -> u64;
        fn spindle_c_logdisk_look_up(logical: u64) -> u64;
    }

    /// Resets the C logical disk.
    pub fn format(blocks: u64, segment_blocks: u64) {
        // SAFETY: takes integers and writes only the C file's statics (its loop is bounded
        // by the map's size).
        unsafe { spindle_c_logdisk_format(blocks, segment_blocks) }
    }

    /// The C graft's placement for a write of `logical`.
    pub fn write(logical: u64) -> u64 {
        // SAFETY: takes an integer; the C code bounds-checks it against the map and writes
        // only its own statics.
        unsafe { spindle_c_logdisk_write(logical) }
    }

    /// Where the C map says `logical` lives.
    pub fn look_up(logical: u64) -> u64 {
        // SAFETY: takes an integer the C code bounds-checks; reads only its own statics.
        unsafe { spindle_c_logdisk_look_up(logical) }
    }
}

/// The workload's logical block numbers, in order.
pub fn workload() -> Vec<u32> {
    logdisk::workload::Writes::default().take(WRITES).map(|logical| logical as u32).collect()
}

/// Formats, then writes `writes` through the dispatcher, checking each placement with
/// `expected(index, logical)`; returns the cost per write (×1000) and the number of
/// wrong answers, rejections and refused writes together.
fn run_writes(writes: &[u32], expected: impl Fn(u64, u64) -> u64) -> (u64, u64) {
    block::format();
    let (rejections, refused) = (block::rejections(), block::refused_writes());
    let mut wrong = 0u64;
    super::align_to_tick();
    let cost = measure(writes.len() as u64, |index| {
        let logical = u64::from(writes[index as usize]);
        if block::write(logical) != Ok(expected(index, logical)) {
            wrong += 1;
        }
    });
    (cost, wrong + (block::rejections() - rejections) + (block::refused_writes() - refused))
}

/// Measures a logical disk bound to the block events over `writes`, then verifies its map;
/// `None` (and a message) on any wrong answer or map mismatch.
fn measure_logical_disk(name: &str, writes: &[u32]) -> Option<u64> {
    let (cost, problems) = run_writes(writes, |index, _| index);
    if problems > 0 {
        crate::println!("bench: FAILED {GROUP} {name}: {problems} of {} writes misplaced, rejected or refused; row withheld", writes.len());
        return None;
    }
    match block::verify_map() {
        Ok(mapped) => {
            crate::println!("bench: {GROUP} {name}: map verified, {mapped} logical blocks mapped to their latest write");
            Some(cost)
        }
        Err(mismatch) => {
            crate::println!("bench: FAILED {GROUP} {name}: map differs at {mismatch:?}; row withheld");
            None
        }
    }
}

/// What a run of the workload's first writes with one graft bound produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadRun {
    /// Writes raised.
    pub writes: u64,
    /// Writes not placed at the log head (answer `i` for write `i`), rejected or refused.
    pub problems: u64,
    /// The map check over the logical blocks written and the first [`SAMPLE_BLOCKS`]
    /// blocks: the number of them mapped, or the first mismatch.
    pub map: Result<u64, block::MapMismatch>,
}

/// Blocks at the start of the disk that [`run_with`] also checks (mostly never written:
/// the map must not claim them).
pub const SAMPLE_BLOCKS: u64 = 1024;

/// Formats the disk and runs the workload's first `count` writes with `graft` bound
/// (loaded and unloaded around it), then checks the map of the blocks involved.
pub fn run_with(graft: super::Graft, count: usize) -> Result<WorkloadRun, alloc::string::String> {
    let writes: Vec<u32> = logdisk::workload::Writes::default().take(count.min(WRITES)).map(|logical| logical as u32).collect();
    let body = || {
        let (_, problems) = run_writes(&writes, |index, _| index);
        let mut checked: Vec<u64> = writes.iter().map(|&logical| u64::from(logical)).chain(0..SAMPLE_BLOCKS).collect();
        checked.sort_unstable();
        checked.dedup();
        let map = block::verify_map_of(checked);
        WorkloadRun { writes: writes.len() as u64, problems, map }
    };
    let outcome = match graft {
        super::Graft::Extension(preference) => {
            ext::load(EXTENSION, preference).map_err(|error| alloc::format!("{error}"))?;
            let outcome = body();
            ext::unload(EXTENSION).map_err(|error| alloc::format!("{error}"))?;
            outcome
        }
        #[cfg(not(spindle_no_c_reference))]
        super::Graft::CReference => with_c_bindings(body).ok_or_else(|| alloc::string::String::from("the C bindings were refused"))?,
        #[cfg(spindle_no_c_reference)]
        super::Graft::CReference => return Err(alloc::string::String::from("this kernel was built without clang: no C reference")),
    };
    block::format();
    Ok(outcome)
}

/// The bounded budget every bench binding of this group gets: the `logdisk` crate's.
fn budget() -> u64 {
    crate::time::budget_from_micros(logdisk::spindle_extension().budget_microseconds)
}

/// Installs the C graft on the three logical-disk events as bounded bindings with the
/// `logdisk` crate's budget, runs `body`, uninstalls them; `None` if they were refused.
#[cfg(not(spindle_no_c_reference))]
pub fn with_c_bindings<T>(body: impl FnOnce() -> T) -> Option<T> {
    let dispatcher = crate::events::dispatcher();
    let budget = budget();
    let bindings = [
        dispatcher.install(&BLOCK_FORMAT, BindingSpec::new("bench", handler_fn("bench.c-logdisk-format", |disk: &DiskFormat| {
            c::format(disk.blocks, disk.segment_blocks);
            Ok(())
        })).mode(Mode::Bounded { budget })),
        dispatcher.install(&BLOCK_WRITE, BindingSpec::new("bench", handler_fn("bench.c-logdisk-write", |write: &BlockWrite| {
            Ok(Placement { physical: c::write(write.logical) })
        })).mode(Mode::Bounded { budget })),
        dispatcher.install(&BLOCK_MAP_LOOKUP, BindingSpec::new("bench", handler_fn("bench.c-logdisk-look-up", |lookup: &MapLookup| {
            Ok(Placement { physical: c::look_up(lookup.logical) })
        })).mode(Mode::Bounded { budget })),
    ];
    let result = match bindings.iter().find_map(|binding| binding.as_ref().err()) {
        Some(error) => {
            crate::println!("bench: FAILED installing the C logdisk bindings: {error}");
            None
        }
        None => Some(body()),
    };
    for binding in bindings.into_iter().flatten() {
        let _ = dispatcher.uninstall(binding);
    }
    result
}

#[cfg(not(spindle_no_c_reference))]
fn c_reference(writes: &[u32]) -> bool {
    match with_c_bindings(|| measure_logical_disk("write-c-reference", writes)) {
        Some(Some(cost)) => {
            report(GROUP, "write-c-reference", writes.len() as u64, cost);
            true
        }
        _ => false,
    }
}

#[cfg(spindle_no_c_reference)]
fn c_reference(_: &[u32]) -> bool {
    crate::println!("bench: {GROUP} C reference missing (kernel built without clang; see kernel/build.rs)");
    true
}

/// Runs the group's rows; false if any technology answered wrongly.
pub fn run() -> bool {
    let mut clean = true;
    let writes = workload();
    let hot = writes.iter().filter(|&&logical| logdisk::workload::is_hot(u64::from(logical))).count();
    crate::println!(
        "bench: {GROUP} workload: {WRITES} writes on {} blocks of {} bytes, {}-block segments, {hot} writes to the {} hot blocks",
        block::DISK_BLOCKS,
        block::BLOCK_SIZE,
        block::SEGMENT_BLOCKS,
        logdisk::workload::HOT_BLOCKS
    );

    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        let name = alloc::format!("write-{}", preference.label());
        let measured = if preference == Preference::Wasm { &writes[..WASM_WRITES] } else { &writes[..] };
        if let Err(error) = ext::load(EXTENSION, preference) {
            crate::println!("bench: FAILED loading {EXTENSION} ({name}): {error}");
            clean = false;
            continue;
        }
        let started = crate::time::now();
        let hardware = super::HardwareEvents::now();
        let cost = measure_logical_disk(&name, measured);
        super::HardwareEvents::report_since(hardware, GROUP, &name, measured.len() as u64);
        crate::println!("bench: {GROUP} {name}: {} timer ticks of guest time", crate::time::now() - started);
        let _ = ext::unload(EXTENSION);
        crate::events::quiescent();
        crate::events::reclaim();
        match cost {
            Some(cost) => report(GROUP, &name, measured.len() as u64, cost),
            None => clean = false,
        }
    }

    // The Rust graft with no dispatcher and no validation: the built-in crate's own disk.
    logdisk::format(&DiskFormat { blocks: block::DISK_BLOCKS, segment_blocks: block::SEGMENT_BLOCKS });
    let mut wrong = 0u64;
    let direct = measure(WRITES as u64, |index| {
        let placed = logdisk::place_write(&core::hint::black_box(BlockWrite { logical: u64::from(writes[index as usize]) }));
        if placed.physical != index {
            wrong += 1;
        }
    });
    if wrong == 0 {
        report(GROUP, "write-direct", WRITES as u64, direct);
    } else {
        crate::println!("bench: FAILED {GROUP} write-direct: {wrong} writes misplaced");
        clean = false;
    }

    clean &= c_reference(&writes);

    // Dispatch alone: one bounded binding answering in place (always valid: a block's home
    // only ever holds that block), through the same validating primary module.
    let spec = BindingSpec::new("bench", handler_fn("bench.in-place", |write: &BlockWrite| Ok(Placement { physical: write.logical })))
        .mode(Mode::Bounded { budget: budget() });
    match crate::events::dispatcher().install(&BLOCK_WRITE, spec) {
        Ok(binding) => {
            let (cost, problems) = run_writes(&writes, |_, logical| logical);
            if problems == 0 {
                report(GROUP, "dispatch-1-bounded-binding", WRITES as u64, cost);
            } else {
                crate::println!("bench: FAILED {GROUP} dispatch-1-bounded-binding: {problems} writes misplaced, rejected or refused");
                clean = false;
            }
            let _ = crate::events::dispatcher().uninstall(binding);
        }
        Err(error) => {
            crate::println!("bench: FAILED installing the dispatch binding: {error}");
            clean = false;
        }
    }
    block::format();
    clean
}
