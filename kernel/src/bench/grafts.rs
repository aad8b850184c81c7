//! The prioritization graft of Small & Seltzer '96 (§3.1, §5.4: VM page eviction with a
//! hot list), measured as every technology in one run (group `graft-hotlist`).
//!
//! Workload (deterministic, the same for every technology): the synthetic LRU queue of
//! [`crate::services::frames`] (1,024 frames, head = least recently used); a hot list of 64
//! frames — the 8 frames at the queue's head (positions 0–7) and 56 frames spread through
//! it (positions 16·k, k = 1..=56) — set through `mm.HotListSet`; candidates visit every
//! queue position once per 1,024 raises in the order `position = (i · 37) mod 1024`, so
//! exactly 1 candidate in 16 is hot (the paper: about 1 in 781 — raised here so the LRU
//! walk is exercised). A cold candidate costs one walk of the whole 64-entry list (the
//! paper's measured case); a hot one then walks the queue from its head: positions 0–7
//! are hot, so it volunteers position 8 after 9 more list walks.
//!
//! Each row raises `mm.Reclaim` [`ITERATIONS`] times through the kernel dispatcher (the
//! primary module validates every answer) and compares every volunteered frame with
//! [`crate::services::frames::reference_choice`]; any mismatch or rejection withholds the row
//! and fails the benchmark. Rows: the graft built in, native and Wasm (the bench runs a
//! second kernel build for Wasm with unaligned scalar loads), the graft function called
//! directly without the dispatcher, the dispatch cost (a bounded binding answering the
//! candidate, through the same validating primary module) and a page fault taken and
//! recovered in the kernel (a load from an unmapped page under a recovery point — the
//! trap, cause decoding, recovery and return, plus the page-table walk that checks the
//! address: a lower bound on a real fault, which would also allocate a frame and read the
//! page), which `xtask bench` divides by each graft row for the break-even column.

use alloc::vec::Vec;

use spindle_abi::event::{MM_RECLAIM, ReclaimCandidate, Volunteer};
use spindle_dispatch::{BindingSpec, Mode, handler_fn};

use super::{measure, report};
use crate::services::frames as mm;
use crate::ext::{self, Preference};

/// Raises per row (≥ 1,000; four passes over the candidate sequence).
pub const ITERATIONS: u64 = 4096;
/// The benchmark group.
pub const GROUP: &str = "graft-hotlist";
/// Extension measured.
const EXTENSION: &str = "hotlist";
/// An unmapped kernel address (the null page) for the page-fault row.
const UNMAPPED_ADDRESS: usize = 0x8;

/// The C reference (`extensions/hotlist/c/hotlist.c`, compiled by clang and linked in by
/// kernel/build.rs): the same graft over a linked list of structs, unprotected.
#[cfg(not(spindle_no_c_reference))]
mod c {
    unsafe extern "C" {
        pub fn spindle_c_hotlist_clear();
        pub fn spindle_c_hotlist_set(slot: u64, frame: u64);
        pub fn spindle_c_hotlist_reclaim(candidate: u64) -> u64;
    }

    /// Empties the C hot list.
    pub fn clear() {
        // SAFETY: the C function only writes the C file's own statics.
        unsafe { spindle_c_hotlist_clear() }
    }

    /// Sets one slot of the C hot list (out-of-range slots are ignored by the C code).
    pub fn set(slot: u64, frame: u64) {
        // SAFETY: the C function bounds-checks `slot` and only writes its own statics.
        unsafe { spindle_c_hotlist_set(slot, frame) }
    }

    /// The C graft's answer for `candidate`.
    pub fn reclaim(candidate: u64) -> u64 {
        // SAFETY: reads the C file's statics (a list it built itself, every walk ends at a
        // null `next`) and calls the kernel's `mm` functions, which take integers only.
        unsafe { spindle_c_hotlist_reclaim(candidate) }
    }
}

/// The C reference rows: the C graft called directly and through a bounded binding (like
/// the built-in Rust graft); false if it answered wrongly.
#[cfg(not(spindle_no_c_reference))]
fn c_reference(expected: &[u64]) -> bool {
    c::clear();
    for slot in 0..spindle_abi::event::HotListEntry::SLOTS {
        c::set(slot, mm::lru_frame(hot_position(slot)));
    }
    set_hot_list();
    let mut clean = true;
    let mut wrong = 0u64;
    let direct = measure(ITERATIONS, |index| {
        if c::reclaim(candidate(index)) != expected[(index % mm::LRU_FRAMES) as usize] {
            wrong += 1;
        }
    });
    if wrong == 0 {
        report(GROUP, "c-reference-direct-call", ITERATIONS, direct);
    } else {
        crate::println!("bench: FAILED graft-hotlist c-reference-direct-call: {wrong} answers differ");
        clean = false;
    }
    let budget = crate::time::budget_from_micros(hotlist::spindle_extension().budget_microseconds);
    let spec = BindingSpec::new("bench", handler_fn("bench.c-hotlist", |args: &ReclaimCandidate| Ok(Volunteer { frame: c::reclaim(args.candidate_frame) })))
        .mode(Mode::Bounded { budget });
    match crate::events::dispatcher().install(&MM_RECLAIM, spec) {
        Ok(binding) => {
            match measure_workload("reclaim-c-reference", expected) {
                Some(cost) => report(GROUP, "reclaim-c-reference", ITERATIONS, cost),
                None => clean = false,
            }
            let _ = crate::events::dispatcher().uninstall(binding);
        }
        Err(error) => {
            crate::println!("bench: FAILED installing the C reference binding: {error}");
            clean = false;
        }
    }
    mm::clear_hot();
    c::clear();
    clean
}

#[cfg(spindle_no_c_reference)]
fn c_reference(_: &[u64]) -> bool {
    crate::println!("bench: graft-hotlist C reference missing (kernel built without clang; see kernel/build.rs)");
    true
}

/// Queue position of hot-list slot `slot`.
fn hot_position(slot: u64) -> u64 {
    if slot < 8 { slot } else { 16 * (slot - 7) }
}

/// The `index`-th candidate frame of the workload.
pub fn candidate(index: u64) -> u64 {
    mm::lru_frame((index * 37) % mm::LRU_FRAMES)
}

/// Sets the workload's hot list (mirror and bound handlers), after clearing it.
pub fn set_hot_list() {
    mm::clear_hot();
    for slot in 0..spindle_abi::event::HotListEntry::SLOTS {
        mm::set_hot(slot as usize, mm::lru_frame(hot_position(slot)));
    }
}

/// Expected answers for one pass over the candidates (index mod [`mm::LRU_FRAMES`]).
pub fn expected() -> Vec<u64> {
    (0..mm::LRU_FRAMES).map(|index| mm::reference_choice(candidate(index))).collect()
}

/// Loads `hotlist` as `preference`, sets the hot list, raises the workload once and
/// returns the answers (for the in-kernel test), unloading afterwards.
pub fn answers(preference: Preference) -> Result<Vec<u64>, alloc::string::String> {
    ext::load(EXTENSION, preference).map_err(|error| alloc::format!("{error}"))?;
    set_hot_list();
    let answers = (0..mm::LRU_FRAMES).map(|index| mm::reclaim(candidate(index))).collect();
    mm::clear_hot();
    ext::unload(EXTENSION).map_err(|error| alloc::format!("{error}"))?;
    Ok(answers)
}

/// Measures the workload through the kernel dispatcher; `None` (and a message) when an
/// answer differs from the reference or was rejected.
fn measure_workload(name: &str, expected: &[u64]) -> Option<u64> {
    let rejections = mm::rejections();
    let mut wrong = 0u64;
    super::align_to_tick();
    let cost = measure(ITERATIONS, |index| {
        let chosen = mm::reclaim(candidate(index));
        if chosen != expected[(index % mm::LRU_FRAMES) as usize] {
            wrong += 1;
        }
    });
    let rejected = mm::rejections() - rejections;
    if wrong > 0 || rejected > 0 {
        crate::println!("bench: FAILED graft-hotlist {name}: {wrong} of {ITERATIONS} answers differ from the reference, {rejected} rejected; row withheld");
        return None;
    }
    Some(cost)
}

/// Runs the graft rows; false if any technology answered wrongly.
pub fn run() -> bool {
    let mut clean = true;
    set_hot_list();
    let expected = expected();
    let hot = (0..mm::LRU_FRAMES).filter(|&index| mm::is_hot(candidate(index))).count();
    crate::println!("bench: graft-hotlist workload: {hot} of {} candidates hot, {ITERATIONS} raises per row", mm::LRU_FRAMES);
    mm::clear_hot();

    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        let name = alloc::format!("reclaim-{}", preference.label());
        if let Err(error) = ext::load(EXTENSION, preference) {
            crate::println!("bench: FAILED loading {EXTENSION} ({name}): {error}");
            clean = false;
            continue;
        }
        set_hot_list();
        let hardware = super::HardwareEvents::now();
        let cost = measure_workload(&name, &expected);
        super::HardwareEvents::report_since(hardware, GROUP, &name, ITERATIONS);
        if preference == Preference::BuiltIn {
            // The same graft function with no dispatcher in between (the built-in's list is
            // the one just filled through mm.HotListSet).
            let mut wrong = 0u64;
            let direct = measure(ITERATIONS, |index| {
                let chosen = hotlist::reclaim(&core::hint::black_box(ReclaimCandidate { candidate_frame: candidate(index), owner: 0 }));
                if chosen.frame != expected[(index % mm::LRU_FRAMES) as usize] {
                    wrong += 1;
                }
            });
            if wrong == 0 {
                report(GROUP, "graft-direct-call", ITERATIONS, direct);
            } else {
                crate::println!("bench: FAILED graft-hotlist graft-direct-call: {wrong} answers differ");
                clean = false;
            }
        }
        mm::clear_hot();
        let _ = ext::unload(EXTENSION);
        crate::events::quiescent();
        crate::events::reclaim();
        match cost {
            Some(cost) => report(GROUP, &name, ITERATIONS, cost),
            None => clean = false,
        }
    }

    // Dispatch alone: one bounded binding that answers the candidate, through the same
    // validating primary module and the same budget as the built-in graft.
    let budget = crate::time::budget_from_micros(hotlist::spindle_extension().budget_microseconds);
    let spec = BindingSpec::new(
        "bench",
        handler_fn("bench.take-candidate", |args: &ReclaimCandidate| Ok(Volunteer { frame: args.candidate_frame })),
    )
    .mode(Mode::Bounded { budget });
    match crate::events::dispatcher().install(&MM_RECLAIM, spec) {
        Ok(binding) => {
            let identity: Vec<u64> = (0..mm::LRU_FRAMES).map(candidate).collect();
            if let Some(cost) = measure_workload("dispatch-1-bounded-binding", &identity) {
                report(GROUP, "dispatch-1-bounded-binding", ITERATIONS, cost);
            } else {
                clean = false;
            }
            let _ = crate::events::dispatcher().uninstall(binding);
        }
        Err(error) => {
            crate::println!("bench: FAILED installing the dispatch binding: {error}");
            clean = false;
        }
    }

    clean &= c_reference(&expected);

    // A page fault taken and recovered in the kernel (lower bound; see the module doc).
    let mut missed = 0u64;
    let hardware = super::HardwareEvents::now();
    let fault = measure(1000, |_| {
        if crate::mm::kernel_space::probe_unmapped_load(core::hint::black_box(UNMAPPED_ADDRESS)).is_err() {
            missed += 1;
        }
    });
    if missed == 0 {
        super::HardwareEvents::report_since(hardware, GROUP, "page-fault-caught", 1000);
        report(GROUP, "page-fault-caught", 1000, fault);
    } else {
        crate::println!("bench: FAILED page-fault row: {missed} loads did not fault");
        clean = false;
    }
    clean
}
