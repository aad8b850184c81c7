//! The stream graft of Small & Seltzer '96 (§3.2, §5.5: an MD5 fingerprint of 1 MiB read
//! from disk), measured as every technology in one run (group `graft-md5`).
//!
//! Workload: the 1 MiB [`workload`] (`md5::workload`, a fixed-seed generator) read
//! through [`crate::services::blockpath`] as 256 blocks of 4 KiB: 256 raises of `block.ReadFilter`,
//! each copying its block into the graft's memory through `spindle_block_read`, then one
//! `block.ReadDone` answering the digest. A row is the instructions of one whole 1 MiB
//! fingerprint ([`FINGERPRINTS`] measured); every digest is compared with the kernel's own
//! MD5 of the file (the `md5` crate's algorithm called directly — checked on the host
//! against RFC 1321's vectors, and against the host's `md5sum` by `cargo xtask test`), and
//! any wrong digest or rejected answer withholds the row and fails the benchmark.
//!
//! Rows: `md5-builtin`, `md5-native`, `md5-wasm` (the bench runs a second kernel build for
//! Wasm with unaligned scalar loads); `md5-c-reference` (the C graft through bounded
//! bindings, like the built-in one); `md5-direct` (the Rust graft's handlers called
//! without the dispatcher, still copying through `spindle_block_read`); `read-4k-copy`
//! (one `spindle_block_read` of a 4 KiB block into a kernel buffer: the copy every
//! technology pays per block, destination check included).

use alloc::format;
use alloc::string::String;

use spindle_abi::event::{Digest, ReadBlock, ReadDone};
// Used only by the C reference's rows (absent when clang could not build it).
#[cfg(not(spindle_no_c_reference))]
use spindle_abi::event::{BLOCK_READ_DONE, BLOCK_READ_FILTER, FilterVerdict};
#[cfg(not(spindle_no_c_reference))]
use spindle_dispatch::{BindingSpec, Mode, handler_fn};

use super::{measure, report};
use crate::services::blockpath as block;
use crate::ext::{self, Preference};

/// Bytes of the workload read through the block path (1 MiB).
pub const WORKLOAD_BYTES: usize = md5::workload::BYTES;

/// The workload: [`WORKLOAD_BYTES`] of `md5::workload`'s deterministic bytes, generated
/// on first use (the benchmark's data, passed to the block path as the source it reads).
pub fn workload() -> &'static [u8] {
    static WORKLOAD: spin::Once<alloc::boxed::Box<[u8]>> = spin::Once::new();
    WORKLOAD.call_once(|| {
        let mut bytes = alloc::vec![0u8; WORKLOAD_BYTES].into_boxed_slice();
        md5::workload::fill(0, &mut bytes);
        bytes
    })
}

/// 1 MiB fingerprints per row.
pub const FINGERPRINTS: u64 = 3;
/// The benchmark group.
pub const GROUP: &str = "graft-md5";
/// Extension measured.
const EXTENSION: &str = "md5";
/// Copies measured for `read-4k-copy`.
const COPIES: u64 = 1000;

/// The C reference (`extensions/md5/c/md5.c`, compiled by clang and linked in by
/// kernel/build.rs): the same stream filter, unprotected.
#[cfg(not(spindle_no_c_reference))]
pub mod c {
    unsafe extern "C" {
        fn spindle_c_md5_filter(request: u64, offset: u64, length: u64) -> u64;
        fn spindle_c_md5_done(request: u64, first: *mut u64, second: *mut u64) -> u64;
    }

    /// `block.ReadFilter` in C: the bytes consumed.
    pub fn filter(block: &spindle_abi::event::ReadBlock) -> u64 {
        // SAFETY: takes integers; the C code copies at most 4 KiB (it checks `length`) into
        // its own stack buffer through the kernel's `spindle_block_read`, and writes only its
        // own statics.
        unsafe { spindle_c_md5_filter(block.request, block.offset, block.length) }
    }

    /// `block.ReadDone` in C: the digest, or the default (no digest).
    pub fn done(done: &spindle_abi::event::ReadDone) -> spindle_abi::event::Digest {
        let (mut first, mut second) = (0u64, 0u64);
        // SAFETY: both pointers are to live local u64s the C code writes once each.
        let bytes = unsafe { spindle_c_md5_done(done.request, &mut first, &mut second) };
        if bytes == 0 && done.length != 0 {
            return spindle_abi::event::Digest::default();
        }
        spindle_abi::event::Digest { request: done.request, bytes, first, second }
    }
}

/// The reference fingerprint of the file (the `md5` crate's algorithm, called directly).
pub fn expected() -> [u8; 16] {
    md5::Md5::digest(workload())
}

/// A digest as lowercase hex (as `md5sum` prints it).
pub fn hex(digest: &[u8; 16]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// One fingerprint of the whole file through the event path; the digest if it is right.
pub fn fingerprint() -> Option<[u8; 16]> {
    let outcome = block::read_through_filters(workload(), 0, WORKLOAD_BYTES as u64);
    outcome.digest.filter(|_| outcome.consumed == outcome.bytes)
}

/// Measures [`FINGERPRINTS`] fingerprints through the kernel dispatcher; `None` (and a
/// message) when a digest is wrong or an answer was rejected.
fn measure_workload(name: &str, expected: &[u8; 16]) -> Option<u64> {
    let rejections = block::rejections();
    let mut wrong = 0u64;
    super::align_to_tick();
    let cost = measure(FINGERPRINTS, |_| {
        if fingerprint().as_ref() != Some(expected) {
            wrong += 1;
        }
    });
    let rejected = block::rejections() - rejections;
    if wrong > 0 || rejected > 0 {
        crate::println!("bench: FAILED {GROUP} {name}: {wrong} of {FINGERPRINTS} digests wrong, {rejected} answers rejected; row withheld");
        return None;
    }
    Some(cost)
}

/// Installs the C graft on both read events as bounded bindings with the `md5` crate's
/// budget; runs `body` and uninstalls them. `None` if the bindings were refused.
#[cfg(not(spindle_no_c_reference))]
pub fn with_c_bindings<T>(body: impl FnOnce() -> T) -> Option<T> {
    let budget = crate::time::budget_from_micros(md5::spindle_extension().budget_microseconds);
    let dispatcher = crate::events::dispatcher();
    let filter = BindingSpec::new("bench", handler_fn("bench.c-md5-filter", |block: &ReadBlock| Ok(FilterVerdict { consumed: c::filter(block) })))
        .mode(Mode::Bounded { budget });
    let done = BindingSpec::new("bench", handler_fn("bench.c-md5-done", |done: &ReadDone| Ok::<Digest, _>(c::done(done)))).mode(Mode::Bounded { budget });
    let bindings = (dispatcher.install(&BLOCK_READ_FILTER, filter), dispatcher.install(&BLOCK_READ_DONE, done));
    let result = match &bindings {
        (Ok(_), Ok(_)) => Some(body()),
        (Err(error), _) | (_, Err(error)) => {
            crate::println!("bench: FAILED installing the C md5 bindings: {error}");
            None
        }
    };
    for binding in [bindings.0, bindings.1].into_iter().flatten() {
        let _ = dispatcher.uninstall(binding);
    }
    result
}

#[cfg(not(spindle_no_c_reference))]
fn c_reference(expected: &[u8; 16]) -> bool {
    match with_c_bindings(|| measure_workload("md5-c-reference", expected)) {
        Some(Some(cost)) => {
            report(GROUP, "md5-c-reference", FINGERPRINTS, cost);
            true
        }
        _ => false,
    }
}

#[cfg(spindle_no_c_reference)]
fn c_reference(_: &[u8; 16]) -> bool {
    crate::println!("bench: {GROUP} C reference missing (kernel built without clang; see kernel/build.rs)");
    true
}

/// Fingerprints the file once through the event path with `graft` bound (loaded and
/// unloaded around it); errors say why it could not run.
pub fn read_with(graft: super::Graft) -> Result<block::ReadOutcome, String> {
    match graft {
        super::Graft::Extension(preference) => {
            ext::load(EXTENSION, preference).map_err(|error| format!("{error}"))?;
            let outcome = block::read_through_filters(workload(), 0, WORKLOAD_BYTES as u64);
            ext::unload(EXTENSION).map_err(|error| format!("{error}"))?;
            Ok(outcome)
        }
        #[cfg(not(spindle_no_c_reference))]
        super::Graft::CReference => {
            with_c_bindings(|| block::read_through_filters(workload(), 0, WORKLOAD_BYTES as u64)).ok_or_else(|| String::from("the C bindings were refused"))
        }
        #[cfg(spindle_no_c_reference)]
        super::Graft::CReference => Err(String::from("this kernel was built without clang: no C reference")),
    }
}

/// Fingerprints the 1 MiB on the disk at [`super::blockio::MD5_DISK_OFFSET`] through the
/// event path (read from the device) with `graft` bound; errors say why it could not run.
pub fn read_disk_with(graft: super::Graft) -> Result<block::ReadOutcome, String> {
    let read = || block::read_disk_through_filters(super::blockio::MD5_DISK_OFFSET, super::blockio::MD5_BYTES).map_err(|error| format!("{error}"));
    match graft {
        super::Graft::Extension(preference) => {
            ext::load(EXTENSION, preference).map_err(|error| format!("{error}"))?;
            let outcome = read();
            ext::unload(EXTENSION).map_err(|error| format!("{error}"))?;
            outcome
        }
        #[cfg(not(spindle_no_c_reference))]
        super::Graft::CReference => with_c_bindings(read).ok_or_else(|| String::from("the C bindings were refused"))?,
        #[cfg(spindle_no_c_reference)]
        super::Graft::CReference => Err(String::from("this kernel was built without clang: no C reference")),
    }
}

/// The Rust graft's handlers called directly (no dispatcher): one fingerprint.
fn direct_fingerprint() -> Digest {
    let length = WORKLOAD_BYTES as u64;
    let request = block::begin_read(workload(), 0, length);
    let mut offset = 0;
    while offset < length {
        md5::filter_block(&core::hint::black_box(ReadBlock { request, offset, length: block::BLOCK_SIZE }));
        offset += block::BLOCK_SIZE;
    }
    let digest = md5::finish_request(&core::hint::black_box(ReadDone { request, length }));
    block::end_read(request);
    digest
}

/// Runs the group's rows; false if any technology computed a wrong digest.
pub fn run() -> bool {
    let mut clean = true;
    let expected = expected();
    crate::println!("bench: {GROUP} workload: {} bytes in {}-byte blocks, md5 {}", WORKLOAD_BYTES, block::BLOCK_SIZE, hex(&expected));

    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        let name = format!("md5-{}", preference.label());
        if let Err(error) = ext::load(EXTENSION, preference) {
            crate::println!("bench: FAILED loading {EXTENSION} ({name}): {error}");
            clean = false;
            continue;
        }
        let hardware = super::HardwareEvents::now();
        let cost = measure_workload(&name, &expected);
        super::HardwareEvents::report_since(hardware, GROUP, &name, FINGERPRINTS);
        let _ = ext::unload(EXTENSION);
        crate::events::quiescent();
        crate::events::reclaim();
        match cost {
            Some(cost) => report(GROUP, &name, FINGERPRINTS, cost),
            None => clean = false,
        }
    }

    let mut wrong = 0u64;
    let direct = measure(FINGERPRINTS, |_| {
        if direct_fingerprint().bytes() != expected {
            wrong += 1;
        }
    });
    if wrong == 0 {
        report(GROUP, "md5-direct", FINGERPRINTS, direct);
    } else {
        crate::println!("bench: FAILED {GROUP} md5-direct: {wrong} digests wrong");
        clean = false;
    }

    clean &= c_reference(&expected);

    // The kernel's copy of one 4 KiB block into a kernel buffer, through the kernel
    // function every technology calls (destination check included).
    use spindle_abi::host::RawBytesMut;
    let mut buffer = alloc::vec![0u8; block::BLOCK_SIZE as usize];
    let blocks = WORKLOAD_BYTES as u64 / block::BLOCK_SIZE;
    let request = block::begin_read(workload(), 0, WORKLOAD_BYTES as u64);
    let mut short = 0u64;
    let copy = measure(COPIES, |index| {
        let offset = (index % blocks) * block::BLOCK_SIZE;
        if crate::ext::glue::exports::block_read(request, offset, RawBytesMut { pointer: buffer.as_mut_ptr(), length: buffer.len() }) != block::BLOCK_SIZE {
            short += 1;
        }
    });
    block::end_read(request);
    if short == 0 {
        report(GROUP, "read-4k-copy", COPIES, copy);
    } else {
        crate::println!("bench: FAILED {GROUP} read-4k-copy: {short} copies short");
        clean = false;
    }
    clean
}
