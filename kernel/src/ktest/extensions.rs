//! Tests of extensions in the kernel: load → raise → unload, refusals, and containment
//! of a misbehaving extension (panic, overrun, arithmetic fault, allocation past its
//! quota) — the kernel runs on, the event falls back to its default, the reason is kept,
//! and unloading returns every frame (a native extension's arena included).
//!
//! `faulty`'s `KEY_HOARD` is tested only as a native extension: built in, the extension
//! shares the kernel heap and has no quota of its own.

use alloc::sync::Arc;

use super::{KernelTest, TestResult};
use crate::ensure;
use crate::ext::{self, ExtensionError, ExtensionState};

/// The extension tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "ext::builtin_load_raise_unload", run: builtin_load_raise_unload },
    KernelTest { name: "ext::declared_kernel_function_reaches_every_technology", run: declared_kernel_function_reaches_every_technology },
    KernelTest { name: "ext::undeclared_domain_call_kills_with_its_name", run: undeclared_domain_call_kills_with_its_name },
    KernelTest { name: "ext::wasm_ranges_are_carved_disjoint", run: wasm_ranges_are_carved_disjoint },
    KernelTest { name: "ext::load_errors_are_specific", run: load_errors_are_specific },
    KernelTest { name: "ext::panic_kills_extension", run: || contained(faulty::KEY_PANIC, "panicked") },
    KernelTest { name: "ext::overrun_kills_extension", run: || contained(faulty::KEY_LOOP, "overran budget") },
    KernelTest { name: "ext::divide_by_zero_kills_extension", run: || contained(faulty::KEY_DIVIDE, "panicked") },
    KernelTest { name: "ext::stack_overflow_kills_extension", run: || contained(faulty::KEY_RECURSE, "trapped") },
    KernelTest { name: "ext::native_load_raise_unload", run: native_load_raise_unload },
    KernelTest { name: "ext::replace_swaps_bindings_and_technology", run: replace_swaps_bindings_and_technology },
    KernelTest { name: "ext::every_declared_function_is_defined", run: every_declared_function_is_defined },
    KernelTest { name: "ext::name_server_authorises_per_domain", run: name_server_authorises_per_domain },
    KernelTest { name: "ext::native_panic_kills_extension", run: || native_contained(faulty::KEY_PANIC, "panicked") },
    KernelTest { name: "ext::native_overrun_kills_extension", run: || native_contained(faulty::KEY_LOOP, "overran budget") },
    KernelTest { name: "ext::native_stack_overflow_kills_extension", run: || native_contained(faulty::KEY_RECURSE, "trapped") },
    KernelTest { name: "ext::native_bad_inputs_are_refused_without_leaks", run: native_bad_inputs_are_refused_without_leaks },
    KernelTest { name: "ext::arena_allocates_within_quota_and_refuses_bad_frees", run: arena_allocates_within_quota_and_refuses_bad_frees },
    KernelTest { name: "ext::extension_alloc_without_a_caller_is_refused", run: extension_alloc_without_a_caller_is_refused },
    KernelTest { name: "ext::native_allocation_within_quota", run: native_allocation_within_quota },
    KernelTest { name: "ext::native_quota_exhaustion_kills_extension", run: native_quota_exhaustion_kills_extension },
    KernelTest { name: "ext::hotlist_same_answers_in_every_technology", run: hotlist_same_answers_in_every_technology },
    KernelTest { name: "ext::md5_same_digest_in_every_technology", run: md5_same_digest_in_every_technology },
    KernelTest { name: "ext::block_read_answers_are_validated", run: block_read_answers_are_validated },
    KernelTest { name: "ext::logdisk_same_placements_in_every_technology", run: logdisk_same_placements_in_every_technology },
    KernelTest { name: "ext::block_write_answers_are_validated", run: block_write_answers_are_validated },
];

/// The MD5 graft (the `graft-md5` workload: 1 MiB in 4 KiB blocks through
/// `block.ReadFilter`) computes the kernel's reference digest built in, native, Wasm and as
/// the C reference, consuming every byte, with no rejection.
fn md5_same_digest_in_every_technology() -> TestResult {
    use crate::bench::{Graft, stream};
    use crate::services::blockpath as block;
    let expected = stream::expected();
    let rejections = block::rejections();
    for graft in Graft::ALL {
        if cfg!(spindle_no_c_reference) && graft == Graft::CReference {
            continue;
        }
        let outcome = stream::read_with(graft)?;
        ensure!(outcome.bytes == crate::bench::stream::WORKLOAD_BYTES as u64 && outcome.consumed == outcome.bytes, "{graft:?}: consumed {} of {} bytes", outcome.consumed, outcome.bytes);
        ensure!(outcome.digest == Some(expected), "{graft:?}: digest {:?}, expected {}", outcome.digest.map(|digest| stream::hex(&digest)), stream::hex(&expected));
    }
    ensure!(block::rejections() == rejections, "the primary module rejected {} answers", block::rejections() - rejections);
    // Without a filter nothing is consumed and there is no digest.
    let outcome = block::read_through_filters(crate::bench::stream::workload(), 0, crate::bench::stream::WORKLOAD_BYTES as u64);
    ensure!(outcome.consumed == 0 && outcome.digest.is_none(), "unbound read: {outcome:?}");
    Ok(())
}

/// `spindle_block_read` copies only from the active request and only inside it; a filter
/// consuming more than its block and a digest for the wrong request or length are
/// rejected (counted, default used).
fn block_read_answers_are_validated() -> TestResult {
    use spindle_abi::event::{BLOCK_READ_DONE, BLOCK_READ_FILTER, Digest, FilterVerdict, ReadBlock, ReadDone};
    use spindle_dispatch::{BindingSpec, handler_fn};
    use crate::services::blockpath as block;
    let mut buffer = [0u8; 64];
    let request = block::begin_read(crate::bench::stream::workload(), 0, 4096);
    ensure!(block::copy_block(request, 0, &mut buffer) == 64 && buffer[..] == crate::bench::stream::workload()[..64], "the active request was not copied");
    ensure!(block::copy_block(request, 4096 - 32, &mut buffer) == 0, "a copy past the request's end was made");
    ensure!(block::copy_block(request + 1, 0, &mut buffer) == 0, "an inactive request was copied");
    use spindle_abi::host::RawBytesMut;
    let read = |pointer: *mut u8, length: usize| crate::ext::glue::exports::block_read(request, 0, RawBytesMut { pointer, length });
    ensure!(read(core::ptr::null_mut(), 64) == 0, "a null destination was accepted");
    ensure!(read(buffer.as_mut_ptr(), 1 << 20) == 0, "an over-long copy was accepted");
    ensure!(read(buffer.as_mut_ptr(), 64) == 64 && buffer[..] == crate::bench::stream::workload()[..64], "the native export did not copy");
    block::end_read(request);
    ensure!(block::copy_block(request, 0, &mut buffer) == 0, "an ended request was copied");

    let dispatcher = crate::events::dispatcher();
    let greedy = dispatcher
        .install(&BLOCK_READ_FILTER, BindingSpec::new("test", handler_fn("test.greedy", |block: &ReadBlock| Ok(FilterVerdict { consumed: block.length + 1 }))))
        .map_err(|error| alloc::format!("{error}"))?;
    let liar = dispatcher
        .install(&BLOCK_READ_DONE, BindingSpec::new("test", handler_fn("test.liar", |done: &ReadDone| Ok(Digest { request: done.request, bytes: done.length + 1, first: 1, second: 2 }))))
        .map_err(|error| alloc::format!("{error}"))?;
    let rejections = block::rejections();
    let outcome = block::read_through_filters(crate::bench::stream::workload(), 0, 8192);
    let _ = dispatcher.uninstall(greedy);
    let _ = dispatcher.uninstall(liar);
    ensure!(outcome.consumed == 0 && outcome.digest.is_none(), "rejected answers were used: {outcome:?}");
    ensure!(block::rejections() - rejections == 3, "{} rejections counted (expected 2 blocks + 1 digest)", block::rejections() - rejections);
    Ok(())
}

/// The logical-disk graft places the workload's first 4,096 writes at the log head and
/// its map agrees with the kernel's shadow map, built in, native, Wasm and as the C
/// reference, with no rejection.
fn logdisk_same_placements_in_every_technology() -> TestResult {
    use crate::bench::{Graft, blackbox};
    use crate::services::blockpath as block;
    const WRITES: usize = 4096;
    let rejections = block::rejections();
    let mut mapped_counts = alloc::vec::Vec::new();
    for graft in Graft::ALL {
        if cfg!(spindle_no_c_reference) && graft == Graft::CReference {
            continue;
        }
        let run = blackbox::run_with(graft, WRITES)?;
        ensure!(run.writes == WRITES as u64 && run.problems == 0, "{graft:?}: {} of {} writes misplaced, rejected or refused", run.problems, run.writes);
        let mapped = run.map.map_err(|mismatch| alloc::format!("{graft:?}: map differs: {mismatch:?}"))?;
        mapped_counts.push(mapped);
    }
    ensure!(mapped_counts.windows(2).all(|pair| pair[0] == pair[1]) && mapped_counts[0] > 0, "mapped blocks differ: {mapped_counts:?}");
    ensure!(block::rejections() == rejections, "the primary module rejected {} answers", block::rejections() - rejections);
    Ok(())
}

/// A `block.Write` answer outside the disk or on another block's live data is rejected
/// (counted) and the write goes in place; with no binding writes go in place.
fn block_write_answers_are_validated() -> TestResult {
    use spindle_abi::event::{BLOCK_WRITE, BlockWrite, Placement};
    use spindle_dispatch::{BindingSpec, handler_fn};
    use crate::services::blockpath as block;
    block::format();
    let binding = crate::events::dispatcher()
        .install(&BLOCK_WRITE, BindingSpec::new("test", handler_fn("test.stubborn", |write: &BlockWrite| {
            Ok(Placement { physical: if write.logical == 7 { block::DISK_BLOCKS + 3 } else { 5 } })
        })))
        .map_err(|error| alloc::format!("{error}"))?;
    let rejections = block::rejections();
    let placed = [block::write(1), block::write(1), block::write(2), block::write(7), block::write(block::DISK_BLOCKS)];
    let _ = crate::events::dispatcher().uninstall(binding);
    let expected = [Ok(5), Ok(5), Ok(2), Ok(7), Err(block::WriteError::OutOfRange)];
    ensure!(placed == expected, "placements {placed:?}, expected {expected:?}");
    ensure!(block::rejections() - rejections == 2, "{} rejections counted (expected 2)", block::rejections() - rejections);
    ensure!(block::write(3) == Ok(3), "unbound block.Write is not in place");
    // Block 5 holds logical 1: writing logical 5 in place would destroy it.
    ensure!(block::write(5) == Err(block::WriteError::NoSpace), "logical 5 overwrote logical 1's data");
    block::format();
    Ok(())
}

/// The hot-list graft (the `graft-hotlist` benchmark's workload) answers the same frames
/// built in, native, Wasm and user-level, equal to the primary module's reference, with no rejection.
fn hotlist_same_answers_in_every_technology() -> TestResult {
    use crate::bench::grafts;
    use crate::services::frames as mm;
    grafts::set_hot_list();
    let expected = grafts::expected();
    mm::clear_hot();
    let hot = (0..mm::LRU_FRAMES).filter(|&index| expected[index as usize] != grafts::candidate(index)).count();
    ensure!(hot == 64, "{hot} of the workload's candidates are replaced (expected 64: one in 16)");
    let rejections = mm::rejections();
    for preference in [ext::Preference::BuiltIn, ext::Preference::Default, ext::Preference::Wasm, ext::Preference::User] {
        let answers = grafts::answers(preference)?;
        let differing = answers.iter().zip(&expected).filter(|(answer, wanted)| answer != wanted).count();
        ensure!(differing == 0, "{preference:?}: {differing} answers differ from the reference");
    }
    ensure!(mm::rejections() == rejections, "the primary module rejected {} answers", mm::rejections() - rejections);
    // Without a binding the candidate is taken.
    ensure!(mm::reclaim(grafts::candidate(0)) == grafts::candidate(0), "unbound mm.Reclaim changed the candidate");
    Ok(())
}

pub(super) fn bundled(name: &str) -> Result<&'static [u8], alloc::string::String> {
    ext::bundle::payload(name).ok_or_else(|| alloc::format!("`{name}` is not in the boot bundle (run through `cargo xtask test`)"))
}

/// Loads and unloads `name` once, so the extension region's page-table pages (allocated
/// on first use and kept) do not count as a leak in the measurements that follow.
fn warm_up(name: &str) -> TestResult {
    ext::load(name, ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
    ext::unload(name).map_err(|error| alloc::format!("{error}"))
}

fn native_load_raise_unload() -> TestResult {
    warm_up("hello")?;
    let frames_before = crate::mm::frame::stats();
    let extension = ext::load("hello", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
    let technology = extension.technology;
    drop(extension);
    let claimed = crate::events::console::offer_line("hello");
    let listed = ext::list().iter().any(|loaded| loaded.name == "hello");
    ext::unload("hello").map_err(|error| alloc::format!("{error}"))?;
    ensure!(technology == ext::Technology::Native, "loaded as {technology}");
    ensure!(claimed, "the native `hello` did not claim its command");
    ensure!(listed, "not listed while loaded");
    ensure!(!crate::events::console::offer_line("hello"), "still claimed after unload");
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

fn native_contained(key: u64, reason: &str) -> TestResult {
    warm_up("faulty")?;
    let frames_before = crate::mm::frame::stats();
    ext::load("faulty", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
    let technology = ext::find("faulty").map(|extension| extension.technology);
    let outcome = check_contained(key, reason);
    let unloaded = ext::unload("faulty");
    outcome?;
    unloaded.map_err(|error| alloc::format!("{error}"))?;
    ensure!(technology == Some(ext::Technology::Native), "loaded as {technology:?}");
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

/// Ticks [`refused`] waits at most for the counters to hold still before it loads.
const SETTLE_TICKS: usize = 20;

/// Loads `bytes` expecting a refusal whose text contains `expected`, with the frame and
/// heap counters unchanged afterwards.
pub(super) fn refused(what: &str, bytes: &[u8], expected: &str) -> TestResult {
    // Earlier tests' asynchronous teardown (a user-level server being reaped, a worker
    // strand ending) may still free memory on a later tick, which would read as this load
    // giving back what it never took: wait, a tick at a time, until the counters hold still.
    let mut heap_before = crate::mm::heap::stats();
    let mut frames_before = crate::mm::frame::stats();
    for _ in 0..SETTLE_TICKS {
        crate::sched::sleep_ticks(1);
        crate::events::quiescent();
        crate::events::reclaim();
        let (heap, frames) = (crate::mm::heap::stats(), crate::mm::frame::stats());
        if heap.allocated_bytes == heap_before.allocated_bytes && frames == frames_before {
            break;
        }
        (heap_before, frames_before) = (heap, frames);
    }
    let outcome = ext::load_kext_bytes(bytes);
    let message = match &outcome {
        Ok(extension) => alloc::format!("loaded `{}`", extension.name),
        Err(error) => alloc::format!("{error}"),
    };
    if let Ok(extension) = outcome {
        let name = extension.name.clone();
        drop(extension);
        let _ = ext::unload(&name);
        return Err(alloc::format!("{what}: was accepted ({message})"));
    }
    drop(outcome);
    crate::events::quiescent();
    crate::events::reclaim();
    // Measure with the message gone: it was allocated after the first measurement.
    let mentions = message.contains(expected);
    let shown = if mentions { drop(message); None } else { Some(message) };
    let frames_after = crate::mm::frame::stats();
    let heap_after = crate::mm::heap::stats();
    if let Some(message) = shown {
        return Err(alloc::format!("{what}: refused as {message:?}, expected it to mention {expected:?}"));
    }
    ensure!(frames_after == frames_before, "{what}: frames leaked: {:?} -> {:?}", frames_before, frames_after);
    ensure!(heap_after.allocated_bytes == heap_before.allocated_bytes, "{what}: heap {} -> {} bytes", heap_before.allocated_bytes, heap_after.allocated_bytes);
    Ok(())
}

fn native_bad_inputs_are_refused_without_leaks() -> TestResult {
    warm_up("hello")?;
    let hello = bundled("hello")?;
    refused("truncated container", &hello[..hello.len() / 2], "truncated")?;
    refused("truncated header", &hello[..40], "truncated")?;
    let mut tampered = hello.to_vec();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    refused("tampered payload byte", &tampered, "signature")?;
    let mut tampered_manifest = hello.to_vec();
    tampered_manifest[130] ^= 0x20;
    refused("tampered manifest byte", &tampered_manifest, "signature")?;
    refused("not a kext", &[0x5a; 512], "magic")?;
    refused("unsigned native", bundled("test-unsigned")?, "unsigned")?;
    refused("wrong ABI fingerprint", bundled("test-bad-abi")?, "ABI")?;
    refused("payload is not ELF", bundled("test-not-elf")?, "ELF")?;
    refused("unsupported relocation", bundled("test-bad-relocation")?, "relocation")?;
    refused("oversized segment", bundled("test-oversized-segment")?, "segment")?;
    refused("ungranted import", bundled("test-ungranted-import")?, "spindle_clock_ticks")?;
    refused("quota above the largest arena", bundled("test-huge-quota")?, "largest arena")?;
    // A duplicate name is refused before anything is mapped.
    ext::load("hello", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
    let duplicate = refused("duplicate name", hello, "already loaded");
    ext::unload("hello").map_err(|error| alloc::format!("{error}"))?;
    duplicate
}

fn builtin_load_raise_unload() -> TestResult {
    ensure!(!crate::events::console::offer_line("hello"), "`hello` claimed before loading");
    let extension = ext::load("hello", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    ensure!(extension.bindings.lock().len() == 1, "bindings {}", extension.bindings.lock().len());
    ensure!(crate::events::console::offer_line("hello"), "`hello` not claimed after loading");
    ensure!(ext::list().iter().any(|loaded| loaded.name == "hello"), "not listed");
    ext::unload("hello").map_err(|error| alloc::format!("{error}"))?;
    ensure!(!crate::events::console::offer_line("hello"), "`hello` still claimed after unloading");
    ensure!(ext::find("hello").is_none(), "still listed after unloading");
    Ok(())
}

fn load_errors_are_specific() -> TestResult {
    ensure!(matches!(ext::load("no-such-extension", ext::Preference::Default), Err(ExtensionError::Unknown(_))), "unknown name");
    ensure!(matches!(ext::unload("hello"), Err(ExtensionError::NotLoaded(_))), "unload of a not-loaded extension");
    ext::load("hello", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    let twice = ext::load("hello", ext::Preference::BuiltIn);
    let _ = ext::unload("hello");
    ensure!(matches!(twice, Err(ExtensionError::AlreadyLoaded(_))), "loaded twice");
    Ok(())
}

fn contained(key: u64, reason: &str) -> TestResult {
    // One load/unload first: the probe table's first bindings grow its vectors and index
    // once, which is capacity kept, not a leak.
    ext::load("faulty", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    ext::unload("faulty").map_err(|error| alloc::format!("{error}"))?;
    crate::events::quiescent();
    crate::events::reclaim();
    let heap_before = crate::mm::heap::stats();
    ext::load("faulty", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    let outcome = check_contained(key, reason);
    // Unload whatever happened, so one failure does not cascade into the next test.
    let unloaded = ext::unload("faulty");
    outcome?;
    unloaded.map_err(|error| alloc::format!("{error}"))?;
    crate::events::quiescent();
    crate::events::reclaim();
    let heap_after = crate::mm::heap::stats();
    ensure!(
        heap_after.allocated_bytes <= heap_before.allocated_bytes + 512,
        "heap grew from {} to {} bytes",
        heap_before.allocated_bytes,
        heap_after.allocated_bytes
    );
    Ok(())
}

pub(super) fn check_contained(key: u64, reason: &str) -> TestResult {
    let answer = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
    if answer != 42 {
        let mut details = alloc::string::String::new();
        for event in crate::events::dispatcher().snapshot() {
            details.push_str(&alloc::format!("{event}"));
        }
        let state = ext::find("faulty").map(|extension| extension.state.lock().clone());
        return Err(alloc::format!("healthy binding answered {answer}; state {state:?}; dispatcher:\n{details}"));
    }
    let result = crate::events::probe::raise(key, 7);
    ensure!(result == 0, "a misbehaving handler's result {result} was used instead of the default 0");
    let extension = ext::find("faulty").ok_or("killed extension vanished from the list")?;
    let state = extension.state.lock().clone();
    let bindings = extension.bindings.lock().len();
    drop(extension);
    ensure!(matches!(&state, ExtensionState::Killed(text) if text.contains(reason)), "state {state:?}, expected a kill for {reason:?}");
    ensure!(bindings == 0, "{bindings} bindings left after the kill");
    // The healthy binding went with the extension: the event is back to its default.
    ensure!(crate::events::probe::raise(faulty::KEY_ANSWER, 21) == 0, "a killed extension still answers");
    Ok(())
}

/// `spindle_clock_uptime_microseconds` was added by declaring it (abi/src/host.rs) and
/// implementing it (kernel/src/time/clock.rs), nothing else: `faulty` calls it from its
/// built-in, native, Wasm and user-level builds, and each answers the kernel's uptime.
fn declared_kernel_function_reaches_every_technology() -> TestResult {
    for preference in [ext::Preference::BuiltIn, ext::Preference::Default, ext::Preference::Wasm, ext::Preference::User] {
        let extension = ext::load("faulty", preference).map_err(|error| alloc::format!("{error}"))?;
        let technology = extension.technology;
        drop(extension);
        let before = crate::time::uptime_micros();
        let first = crate::events::probe::raise(faulty::KEY_UPTIME, 0);
        let second = crate::events::probe::raise(faulty::KEY_UPTIME, 0);
        let after = crate::time::uptime_micros();
        let state = ext::find("faulty").map(|extension| extension.state.lock().clone());
        let server = ext::user::serving_pid("faulty");
        ext::unload("faulty").map_err(|error| alloc::format!("{error}"))?;
        if let Some(pid) = server {
            ensure!(crate::proc::wait_until_reaped(pid, 200), "serving process {pid} did not end after the unload");
        }
        ensure!(state == Some(ExtensionState::Running), "{technology}: state {state:?}");
        ensure!(before <= first && first <= second && second <= after, "{technology}: uptime {first}, {second} outside [{before}, {after}] us");
        ensure!(first > 0, "{technology}: the call answered 0");
    }
    Ok(())
}

/// A loaded build calling a kernel function of a domain its manifest does not name gets
/// nothing installed for it: the call panics, naming the function and the domain, and the
/// extension is killed (a built-in build shares the kernel's installed domains; a user-level
/// build's message is on the console).
fn undeclared_domain_call_kills_with_its_name() -> TestResult {
    for preference in [ext::Preference::Default, ext::Preference::Wasm, ext::Preference::User] {
        let extension = ext::load("faulty", preference).map_err(|error| alloc::format!("{error}"))?;
        let technology = extension.technology;
        drop(extension);
        // A user-level build prints its panic message itself (the kernel records "panicked").
        let reason = if technology == ext::Technology::UserLevel {
            "panicked"
        } else {
            "panicked: called spindle_mm_lru_length of domain `mm`, which the manifest does not name"
        };
        let outcome = check_contained(faulty::KEY_UNDECLARED, reason);
        let server = ext::user::serving_pid("faulty");
        ext::unload("faulty").map_err(|error| alloc::format!("{error}"))?;
        if let Some(pid) = server {
            ensure!(crate::proc::wait_until_reaped(pid, 200), "serving process {pid} did not end after the unload");
        }
        outcome.map_err(|error| alloc::format!("{technology}: {error}"))?;
    }
    Ok(())
}

/// The generated Wasm definitions lend a call's ranges as disjoint sub-slices of linear
/// memory, in argument order whatever their addresses; overlapping ranges are refused.
fn wasm_ranges_are_carved_disjoint() -> TestResult {
    use crate::ext::glue::{MAX_RANGES, Refusal, carve};
    const _: () = assert!(MAX_RANGES == 4);
    let mut memory: alloc::vec::Vec<u8> = (0..64u8).collect();
    let slices = carve(&mut memory, &[40..48, 8..16, 20..20]).map_err(|error| alloc::format!("{error}"))?;
    let lengths: alloc::vec::Vec<Option<usize>> = slices.iter().map(|slice| slice.as_ref().map(|slice| slice.len())).collect();
    ensure!(lengths == [Some(8), Some(8), Some(0), None], "lengths {lengths:?}");
    ensure!(slices[0].as_ref().is_some_and(|slice| slice[0] == 40) && slices[1].as_ref().is_some_and(|slice| slice[0] == 8), "slices out of order");
    let [first, ..] = slices;
    if let Some(slice) = first {
        slice[0] = 0xaa;
    }
    ensure!(memory[40] == 0xaa, "a write through a carved slice did not reach memory");
    ensure!(carve(&mut memory, &[8..16, 12..20]) == Err(Refusal::Overlapping), "overlapping ranges were lent");
    ensure!(carve(&mut memory, &[0..0, 0..0, 0..0, 0..0, 0..0]) == Err(Refusal::Overlapping), "too many ranges were lent");
    ensure!(carve(&mut memory, &[16..16, 8..24]).is_ok(), "an empty range was taken to overlap");
    Ok(())
}

fn every_declared_function_is_defined() -> TestResult {
    let table = ext::exports::domain_table();
    for function in spindle_abi::host::KERNEL_FUNCTIONS {
        ensure!(table.iter().any(|export| export.name == function.name), "`{}` is declared in abi but not defined", function.name);
    }
    ext::wasm::every_kernel_function_is_defined().map_err(|error| alloc::format!("Wasm: {error}"))
}

fn name_server_authorises_per_domain() -> TestResult {
    use spindle_domain::{Principal, PrincipalId};
    let server = ext::exports::name_server();
    // SAFETY: a trust marker; this test is kernel code minting a test principal.
    let issuer = unsafe { spindle_capability::CapabilityIssuer::new() };
    let stranger = Principal::new(&issuer, PrincipalId::Extension("stranger".into()));
    let refused = server.import(&stranger, &["console"], "stranger");
    ensure!(refused.is_err(), "an extension principal without a grant imported `console`");
    let text = refused.err().map(|error| alloc::format!("{error}")).unwrap_or_default();
    ensure!(text.contains("console") && text.contains("no grant"), "refusal text: {text}");
    let runtime = server.import(&stranger, &["extension"], "stranger").map_err(|error| alloc::format!("{error}"))?;
    ensure!(runtime.symbol("spindle_extension_panic").is_some(), "the always-granted domain lacks its symbol");
    let kernel = ext::exports::loading_principal();
    let combined = server.import(&kernel, &["console", "clock"], "kernel-view").map_err(|error| alloc::format!("{error}"))?;
    ensure!(combined.symbol("spindle_console_write").is_some() && combined.symbol("spindle_clock_ticks").is_some(), "Combine lost a symbol");
    ensure!(combined.symbol("spindle_extension_panic").is_none(), "Combine added a domain that was not asked for");
    Ok(())
}

fn arena_allocates_within_quota_and_refuses_bad_frees() -> TestResult {
    use crate::arch::PAGE_SIZE;
    use ext::arena::{ExtensionArena, FreeError};
    const PAGES: usize = 4;
    let frames_before = crate::mm::frame::stats();
    let frames = crate::mm::frame::allocate_zeroed(PAGES).ok_or("no frames for the test arena")?;
    let start = frames.address();
    // SAFETY: the frames were just allocated for this test and nothing else uses them; RAM
    // is identity-mapped read-write; the arena is released before the frames are freed.
    let arena = unsafe { ExtensionArena::new("test", start, PAGES * PAGE_SIZE) };
    let outcome = (|| -> TestResult {
        let quota = PAGES * PAGE_SIZE;
        let usage = arena.usage().ok_or("arena busy")?;
        ensure!(usage.used_bytes == 0 && usage.quota_bytes == quota, "fresh arena usage {usage:?}");
        let first = arena.allocate(100, 8);
        ensure!(!first.is_null() && (first as usize) >= start && (first as usize) + 100 <= start + quota, "first block at {first:?}");
        let aligned = arena.allocate(64, 1024);
        ensure!(!aligned.is_null() && (aligned as usize).is_multiple_of(1024), "aligned block at {aligned:?}");
        ensure!(arena.allocate(quota, 8).is_null(), "a block as large as the whole arena was handed out while others are live");
        ensure!(arena.allocate(8, 3).is_null(), "an invalid alignment was accepted");
        ensure!(arena.free(first, 100, 3) == Err(FreeError::BadLayout), "bad layout freed");
        ensure!(arena.free((start + quota) as *mut u8, 8, 8) == Err(FreeError::NotInArena), "block past the end freed");
        ensure!(arena.free(core::ptr::null_mut(), 8, 8) == Err(FreeError::NotInArena), "null freed");
        ensure!(arena.free((first as usize + 4) as *mut u8, 100, 8) == Err(FreeError::NotInArena), "misaligned block freed");
        arena.free(first, 100, 8).map_err(|error| alloc::format!("free: {error}"))?;
        arena.free(aligned, 64, 1024).map_err(|error| alloc::format!("free: {error}"))?;
        ensure!(arena.usage().map(|usage| usage.used_bytes) == Some(0), "usage after freeing everything {:?}", arena.usage());
        let whole = arena.allocate(quota, 8);
        ensure!(whole as usize == start, "the whole arena is not one block again after the frees: {whole:?}");
        ensure!(arena.allocate(8, 8).is_null(), "allocated past the quota");
        arena.release();
        ensure!(arena.allocate(8, 8).is_null(), "allocated from a released arena");
        ensure!(arena.free(whole, quota, 8) == Err(FreeError::Released), "freed into a released arena");
        Ok(())
    })();
    arena.release();
    drop(arena);
    drop(frames);
    outcome?;
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

fn extension_alloc_without_a_caller_is_refused() -> TestResult {
    let pointer = ext::exports::spindle_extension_alloc(64, 8);
    ensure!(pointer.is_null(), "kernel code outside an extension got {pointer:?}");
    // Ignored with a warning, not a panic.
    ext::exports::spindle_extension_free(0x1000, 64, 8);
    Ok(())
}

/// Frames the frame table names as extension arenas'.
fn arena_frames() -> u64 {
    crate::services::vm::frames_by_owner().iter().filter(|(owner, _)| matches!(owner, spindle_service_frames::Owner::ExtensionArena(_))).map(|(_, held)| held).sum()
}

fn native_allocation_within_quota() -> TestResult {
    warm_up("faulty")?;
    let frames_before = crate::mm::frame::stats();
    let arenas_before = arena_frames();
    let extension = ext::load("faulty", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
    let arenas_loaded = arena_frames();
    let loaded = extension.memory_usage();
    let sum = crate::events::probe::raise(faulty::KEY_ALLOCATE, 1000);
    let after = extension.memory_usage();
    let state = extension.state.lock().clone();
    drop(extension);
    let unloaded = ext::unload("faulty");
    let arenas_after = arena_frames();
    unloaded.map_err(|error| alloc::format!("{error}"))?;
    ensure!(sum == 500_500, "the sum of 1..=1000 came back as {sum} (state {state:?})");
    ensure!(state == ExtensionState::Running, "state {state:?}");
    let quota = faulty::MEMORY_QUOTA_BYTES as usize;
    ensure!(loaded.is_some_and(|usage| usage.used_bytes == 0 && usage.quota_bytes == quota), "usage after load {loaded:?}");
    let pages = quota.div_ceil(crate::arch::PAGE_SIZE) as u64;
    ensure!(arenas_loaded == arenas_before + pages && arenas_after == arenas_before, "frame table: {arenas_before} arena frames, {arenas_loaded} loaded ({pages} expected more), {arenas_after} unloaded");
    ensure!(after.is_some_and(|usage| usage.used_bytes == 0), "the vector was not freed: usage {after:?}");
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

fn native_quota_exhaustion_kills_extension() -> TestResult {
    warm_up("faulty")?;
    let frames_before = crate::mm::frame::stats();
    ext::load("faulty", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
    let outcome = check_contained(faulty::KEY_HOARD, "memory allocation");
    // The killed extension's chunks are still in its arena: no destructor ran.
    let usage = ext::find("faulty").and_then(|extension| extension.memory_usage());
    let unloaded = ext::unload("faulty");
    outcome?;
    unloaded.map_err(|error| alloc::format!("{error}"))?;
    ensure!(usage.is_some_and(|usage| usage.used_bytes > usage.quota_bytes / 2), "arena usage after the kill {usage:?}");
    // The whole arena came back with the unload.
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}

fn hello_bindings_on_console() -> usize {
    let snapshot = crate::events::console::table().snapshot();
    snapshot.bindings.iter().filter(|binding| binding.owner == "hello").count()
}

fn replace_swaps_bindings_and_technology() -> TestResult {
    // Warm up with two images alive at once (a replace), so the page tables of a second
    // extension slot exist before the frame count is taken.
    ext::load("hello", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
    let warmed = ext::replace("hello", ext::Preference::Default).map(drop).map_err(|error| alloc::format!("{error}"));
    ext::unload("hello").map_err(|error| alloc::format!("{error}"))?;
    warmed?;
    ensure!(matches!(ext::replace("hello", ext::Preference::Default), Err(ExtensionError::NotLoaded(_))), "replaced a not-loaded extension");
    let frames_before = crate::mm::frame::stats();
    let builtin = ext::load("hello", ext::Preference::BuiltIn).map_err(|error| alloc::format!("{error}"))?;
    let old_ids = builtin.bindings.lock().clone();
    let outcome = (|| -> TestResult {
        let native = ext::replace("hello", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
        let new_ids = native.bindings.lock().clone();
        ensure!(native.technology == ext::Technology::Native, "replacement is {}", native.technology);
        ensure!(new_ids.len() == 1 && new_ids != old_ids, "binding ids {old_ids:?} -> {new_ids:?}");
        ensure!(builtin.bindings.lock().is_empty(), "the old version kept bindings");
        ensure!(hello_bindings_on_console() == 1, "{} hello bindings on console.Line", hello_bindings_on_console());
        ensure!(crate::events::console::offer_line("hello"), "the replacement does not claim `hello`");
        ensure!(ext::find("hello").is_some_and(|found| Arc::ptr_eq(&found, &native)), "registry does not hold the new version");
        // And back: native -> native (a fresh instance of the same image).
        let again = ext::replace("hello", ext::Preference::Default).map_err(|error| alloc::format!("{error}"))?;
        ensure!(!Arc::ptr_eq(&again, &native) && hello_bindings_on_console() == 1, "second replace");
        Ok(())
    })();
    let unloaded = ext::unload("hello");
    outcome?;
    unloaded.map_err(|error| alloc::format!("{error}"))?;
    drop(builtin);
    ensure!(hello_bindings_on_console() == 0, "bindings left after unload");
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    Ok(())
}
