//! Tests of the block grafts on the real I/O path (`services::blockpath` over
//! `services::disk`): the MD5 stream filter on reads from the device in every technology,
//! the logical disk's writes landing where it placed them and read back by content (the
//! whole 262,144-write workload), writes gathered into runs, bad input refused, a wrong
//! map reported instead of returning another block's data, and no heap kept.


use spindle_abi::event::{BLOCK_MAP_LOOKUP, MapLookup, Placement};
use spindle_dispatch::{BindingSpec, handler_fn};

use super::{KernelTest, TestResult};
use super::text;
use crate::bench::blockio::{self, MD5_BYTES, MD5_DISK_OFFSET};
use crate::bench::stream;
use crate::ensure;
use crate::ext::Preference;
use crate::services::blockpath::{self as block, BLOCK_SIZE, BlockIoError, WriteError};
use crate::services::disk;

/// The block-path I/O tests.
pub const TESTS: &[KernelTest] = &[
    KernelTest { name: "blockio::md5_of_disk_bytes_in_every_technology", run: md5_of_disk_bytes_in_every_technology },
    KernelTest { name: "blockio::reads_see_writes_before_and_after_sync", run: reads_see_writes_before_and_after_sync },
    KernelTest { name: "blockio::in_place_writes_read_back_by_content", run: in_place_writes_read_back_by_content },
    KernelTest { name: "blockio::logdisk_whole_workload_reads_back_by_content", run: logdisk_whole_workload_reads_back_by_content },
    KernelTest { name: "blockio::bad_input_is_refused", run: bad_input_is_refused },
    KernelTest { name: "blockio::a_wrong_map_is_an_error_not_data", run: a_wrong_map_is_an_error_not_data },
    KernelTest { name: "blockio::write_read_cycles_keep_no_heap", run: write_read_cycles_keep_no_heap },
];

/// The digest of the workload read from the device equals the kernel's MD5 of the bytes
/// written there, built in, native, Wasm and user-level; 256 filter calls each consuming
/// a whole block; with nothing bound no digest.
fn md5_of_disk_bytes_in_every_technology() -> TestResult {
    blockio::write_md5_workload()?;
    let expected = stream::expected();
    let plain = block::read_disk_through_filters(MD5_DISK_OFFSET, MD5_BYTES).map_err(text)?;
    ensure!(plain.digest.is_none() && plain.consumed == 0, "nothing bound, yet {plain:?}");
    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        let outcome = crate::bench::with_extension("md5", preference, || block::read_disk_through_filters(MD5_DISK_OFFSET, MD5_BYTES).map_err(text))?;
        ensure!(
            outcome.digest == Some(expected) && outcome.consumed == MD5_BYTES && outcome.bytes == MD5_BYTES,
            "{}: digest {:?}, {} of {} bytes consumed; expected {}",
            preference.label(),
            outcome.digest.map(|digest| stream::hex(&digest)),
            outcome.consumed,
            outcome.bytes,
            stream::hex(&expected)
        );
    }
    // A read that is not the workload gives another digest (the filter saw the device's bytes).
    let shifted = crate::bench::with_extension("md5", Preference::Default, || block::read_disk_through_filters(MD5_DISK_OFFSET + 4096, MD5_BYTES).map_err(text))?;
    ensure!(shifted.digest.is_some() && shifted.digest != Some(expected), "a read 4 KiB further on gave {:?}", shifted.digest);
    Ok(())
}

/// A block written is read back while still held in the write run, and from the device
/// after `sync` (checked there sector by sector with the disk service directly).
fn reads_see_writes_before_and_after_sync() -> TestResult {
    disk::configure("none", disk::DEFAULT_MAX_WAIT_NS)?;
    block::format();
    let mut data = alloc::vec![0u8; BLOCK_SIZE as usize];
    let mut read = alloc::vec![0u8; BLOCK_SIZE as usize];
    blockio::stamp(77, 1, &mut data);
    let writes = block::device_writes();
    let physical = block::write_block(77, &data).map_err(text)?;
    ensure!(physical == 77, "nothing bound: placed at {physical}, not in place");
    ensure!(block::device_writes() == writes, "a single block was written out before a sync");
    ensure!(block::read_block(77, &mut read).map_err(text)? == Some(77) && read == data, "the held block read back differently");
    // The next block extends the run; a distant one writes the run out as one request.
    blockio::stamp(78, 1, &mut data);
    block::write_block(78, &data).map_err(text)?;
    blockio::stamp(5000, 1, &mut data);
    block::write_block(5000, &data).map_err(text)?;
    ensure!(block::device_writes() == writes + 1, "blocks 77 and 78 took {} device writes, expected 1", block::device_writes() - writes);
    block::sync().map_err(text)?;
    ensure!(block::device_writes() == writes + 2, "sync did not write out block 5000");
    for logical in [77u64, 78, 5000] {
        blockio::stamp(logical, 1, &mut data);
        disk::read(logical * 8, &mut read).map_err(text)?;
        ensure!(read == data, "the device's block {logical} is not what was written");
        ensure!(block::read_block(logical, &mut read).map_err(text)? == Some(logical) && read == data, "block {logical} read back differently");
    }
    ensure!(block::read_block(79, &mut read).map_err(text)?.is_none() && read.iter().all(|&byte| byte == 0), "an unwritten block read as written");
    block::format();
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)
}

/// 4,096 writes of the workload in place (nothing bound): one device write each (random
/// blocks do not gather), every block read back with its latest version.
fn in_place_writes_read_back_by_content() -> TestResult {
    let run = blockio::write_workload(4096, "none", super::progress)?;
    ensure!(run.device_writes >= 4000, "{} writes became {} device writes: random blocks should not gather", run.writes, run.device_writes);
    let checked = blockio::read_back(&run.versions, super::progress)?;
    let written = run.versions.iter().filter(|&&version| version != 0).count() as u64;
    ensure!(checked == written && written > 3000, "{checked} blocks checked of {written} written");
    block::format();
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)
}

/// The paper's whole run through the `logdisk` graft on the device: 262,144 stamped writes
/// become 16,384 whole-segment writes (every segment full), the graft's map matches every
/// accepted write, and every logical block written reads back (through that map) with its
/// latest version's bytes.
fn logdisk_whole_workload_reads_back_by_content() -> TestResult {
    let result = crate::bench::with_extension("logdisk", Preference::Default, || {
        let run = blockio::write_workload(logdisk::workload::WRITES, "none", super::progress)?;
        let segments = block::DISK_BLOCKS / block::SEGMENT_BLOCKS;
        ensure!(run.device_writes == segments, "{} writes became {} device writes, expected {segments} segments", run.writes, run.device_writes);
        let mapped = block::verify_map().map_err(|mismatch| alloc::format!("map differs: {mismatch:?}"))?;
        let checked = blockio::read_back(&run.versions, super::progress)?;
        ensure!(checked == mapped && checked > 90_000, "{checked} blocks read back, {mapped} mapped");
        Ok(())
    });
    block::format();
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    result
}

/// Each bad request gets its own error and touches nothing.
fn bad_input_is_refused() -> TestResult {
    let mut block = alloc::vec![0u8; BLOCK_SIZE as usize];
    let capacity = crate::drivers::virtio_blk::capacity().ok_or("no disk")? * 512;
    for (start, length) in [(1u64, 512u64), (capacity - 512, 1024), (u64::MAX - 511, 1024)] {
        let outcome = block::read_disk_through_filters(start, length);
        ensure!(outcome == Err(BlockIoError::BadRange { start, length }), "read of {start}+{length}: {outcome:?}");
    }
    let short = block::write_block(3, &block[..100]);
    ensure!(short == Err(BlockIoError::BadBlockLength(100)), "a 100-byte block: {short:?}");
    let outside = block::write_block(block::DISK_BLOCKS, &block);
    ensure!(outside == Err(BlockIoError::Write(WriteError::OutOfRange)), "a block past the disk: {outside:?}");
    let outside = block::read_block(block::DISK_BLOCKS, &mut block);
    ensure!(outside == Err(BlockIoError::Write(WriteError::OutOfRange)), "reading a block past the disk: {outside:?}");
    let long = block::read_block(0, &mut alloc::vec![0u8; 8192]);
    ensure!(long == Err(BlockIoError::BadBlockLength(8192)), "an 8 KiB buffer: {long:?}");
    Ok(())
}

/// A logical disk whose map names the wrong block gets an error naming the block, not the
/// other block's data.
fn a_wrong_map_is_an_error_not_data() -> TestResult {
    disk::configure("none", disk::DEFAULT_MAX_WAIT_NS)?;
    block::format();
    let mut data = alloc::vec![0u8; BLOCK_SIZE as usize];
    for logical in [10u64, 11] {
        blockio::stamp(logical, 1, &mut data);
        block::write_block(logical, &data).map_err(text)?;
    }
    let dispatcher = crate::events::dispatcher();
    let liar = BindingSpec::new("test", handler_fn("test.wrong-map", |lookup: &MapLookup| Ok(Placement { physical: lookup.logical + 1 })));
    let binding = dispatcher.install(&BLOCK_MAP_LOOKUP, liar).map_err(text)?;
    let outcome = block::read_block(10, &mut data);
    let _ = dispatcher.uninstall(binding);
    block::format();
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    ensure!(matches!(outcome, Err(BlockIoError::Map(mismatch)) if mismatch.logical == 10 && mismatch.answered == Some(11) && mismatch.expected == Some(10)), "got {outcome:?}");
    ensure!(text(outcome.unwrap_err()).contains("maps block 10"), "the error does not name the block");
    Ok(())
}

/// Write, sync, read-back and format cycles (and disk reads through the filters) give the
/// kernel heap back exactly.
fn write_read_cycles_keep_no_heap() -> TestResult {
    let cycle = || -> TestResult {
        let run = blockio::write_workload(64, "none", || {})?;
        blockio::read_back(&run.versions, super::progress)?;
        block::read_disk_through_filters(MD5_DISK_OFFSET, 256 * 1024).map_err(text)?;
        block::format();
        Ok(())
    };
    cycle()?;
    // What earlier tests left to be freed later (a reaped process's last references,
    // retired dispatch plans) goes first, as `leaks::usage` does.
    let settled = || {
        crate::sched::sleep_ticks(1);
        crate::events::quiescent();
        crate::events::reclaim();
        crate::mm::heap::stats().allocated_bytes
    };
    let before = settled();
    for _ in 0..10 {
        cycle()?;
    }
    let after = settled();
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    ensure!(after == before, "10 cycles: heap {after} bytes allocated, was {before} ({:+})", after as i64 - before as i64);
    Ok(())
}
