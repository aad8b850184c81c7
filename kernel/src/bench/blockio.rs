//! The block grafts on the real I/O path (group `blockio`): Small & Seltzer's stream and
//! black-box grafts over the disk service (virtio-blk behind the HP 97560 model) instead of
//! the bookkeeping-only harness of `bench::stream` and `bench::blackbox`.
//!
//! - **MD5 on real reads**: the 1 MiB of `md5::workload` is written to the disk at byte
//!   [`MD5_DISK_OFFSET`], then read back through `block.ReadFilter`
//!   ([`block::read_disk_through_filters`]: 64 KiB per device request, each 4 KiB block
//!   filtered as it arrives) — once with nothing bound (the time to read 1 MiB: the
//!   denominator of the paper's "MD5 ÷ disk read" line) and once per technology, whose
//!   digest must equal the kernel's own MD5 of the bytes.
//! - **Logical disk on the model**: the 262,144 skewed writes of `logdisk::workload`, each
//!   a 4 KiB block stamped with its logical block and version ([`stamp`]), written through
//!   [`block::write_block`] in place (nothing bound to `block.Write`) and through the
//!   `logdisk` graft, then [`block::sync`]; the disk's modelled busy time is the number
//!   compared (the paper's point: the graft turns random writes into whole segments).
//!
//! Lines (parsed by `cargo xtask bench`):
//!
//! `bench blockio read <bytes> <elapsed_ns> <busy_ns> <device_requests>`
//! `bench blockio md5 <technology> <bytes> <elapsed_ns> <busy_ns> <instructions>`
//! `bench blockio write <placement> <technology> <writes> <device_writes> <elapsed_ns> <busy_ns> <seek_cylinders>`
//!
//! A run that fails (a wrong digest, a block read back with other data than its latest
//! write, a device error) prints `bench FAILED blockio …` and fails the benchmark.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::ext::Preference;
use crate::services::blockpath as block;
use crate::services::disk;

/// Where the MD5 workload lies on the disk: 256 MiB in (inside the logical disk's 1 GiB,
/// whose runs overwrite it: each MD5 run writes the workload first).
pub const MD5_DISK_OFFSET: u64 = 256 << 20;
/// The MD5 workload's length (1 MiB).
pub const MD5_BYTES: u64 = md5::workload::BYTES as u64;
/// Writes or reads between two calls of a long run's progress callback.
pub const PROGRESS_STEP: usize = 4096;
/// The model the group runs on.
const MODEL: &str = "hp97560";

/// Fills `block` (4 KiB) with the data of version `version` of logical block `logical`:
/// the two numbers, then a pattern derived from both in every 8 bytes, so a block holding
/// another block's or an older version's data differs in every word.
pub fn stamp(logical: u64, version: u32, block: &mut [u8]) {
    let seed = logical.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(version).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    for (index, word) in block.chunks_exact_mut(8).enumerate() {
        let value = match index {
            0 => logical,
            1 => u64::from(version),
            _ => seed ^ (index as u64).wrapping_mul(0x94d0_49bb_1331_11eb),
        };
        word.copy_from_slice(&value.to_le_bytes());
    }
}

/// Writes the MD5 workload to the disk at [`MD5_DISK_OFFSET`] (64 KiB per request).
pub fn write_md5_workload() -> Result<(), String> {
    let bytes = crate::bench::stream::workload();
    for (index, chunk) in bytes.chunks(block::READ_CHUNK_BYTES as usize).enumerate() {
        let sector = (MD5_DISK_OFFSET + index as u64 * block::READ_CHUNK_BYTES) / 512;
        disk::write(sector, chunk).map_err(|error| format!("writing the MD5 workload at sector {sector}: {error}"))?;
    }
    Ok(())
}

/// What one write run of the logical-disk workload did.
pub struct WriteRun {
    /// Writes made.
    pub writes: u64,
    /// Device write requests they became.
    pub device_writes: u64,
    /// Guest time the run took, ns.
    pub elapsed_ns: u64,
    /// The disk's modelled busy time, ns.
    pub busy_ns: u64,
    /// The disk's modelled seek distance, cylinders.
    pub seek_cylinders: u64,
    /// The latest version written of each logical block (0: not written).
    pub versions: Vec<u32>,
}

/// Formats the block path, restarts the disk service's counters (model `model`), then
/// writes the first `count` writes of the logical-disk workload as stamped blocks through
/// whatever is bound to `block.Write`, and syncs. `progress` is called every
/// [`PROGRESS_STEP`] writes.
pub fn write_workload(count: usize, model: &str, progress: fn()) -> Result<WriteRun, String> {
    block::format();
    disk::configure(model, disk::DEFAULT_MAX_WAIT_NS)?;
    let mut versions = alloc::vec![0u32; block::DISK_BLOCKS as usize];
    let mut data = alloc::vec![0u8; block::BLOCK_SIZE as usize];
    let device_writes = block::device_writes();
    let started = crate::time::now_ns();
    let count = count.min(logdisk::workload::WRITES);
    for (index, logical) in logdisk::workload::Writes::default().take(count).enumerate() {
        let version = versions[logical as usize] + 1;
        stamp(logical, version, &mut data);
        block::write_block(logical, &data).map_err(|error| format!("write {index} (logical block {logical}): {error}"))?;
        versions[logical as usize] = version;
        if (index + 1) % PROGRESS_STEP == 0 {
            progress();
        }
    }
    block::sync().map_err(|error| format!("sync: {error}"))?;
    let elapsed_ns = crate::time::now_ns() - started;
    let stats = disk::stats().ok_or("no disk service")?;
    Ok(WriteRun {
        writes: count as u64,
        device_writes: block::device_writes() - device_writes,
        elapsed_ns,
        busy_ns: stats.busy_ns,
        seek_cylinders: stats.seek_cylinders,
        versions,
    })
}

/// Reads back every logical block `versions` says was written (through the logical
/// disk's map) and checks each holds its latest version's data; also that a block never
/// written reads as unwritten. Returns the blocks checked. `progress` is called every
/// [`PROGRESS_STEP`] blocks.
pub fn read_back(versions: &[u32], progress: fn()) -> Result<u64, String> {
    let mut buffer = alloc::vec![0u8; block::BLOCK_SIZE as usize];
    let mut expected = alloc::vec![0u8; block::BLOCK_SIZE as usize];
    let mut checked = 0;
    for (logical, &version) in versions.iter().enumerate() {
        let logical = logical as u64;
        if version == 0 {
            continue;
        }
        block::read_block(logical, &mut buffer).map_err(|error| format!("reading logical block {logical}: {error}"))?;
        stamp(logical, version, &mut expected);
        if buffer != expected {
            let found = (u64::from_le_bytes(buffer[0..8].try_into().unwrap_or([0; 8])), u64::from_le_bytes(buffer[8..16].try_into().unwrap_or([0; 8])));
            return Err(format!("logical block {logical}: expected version {version} of it, found data stamped block {} version {}", found.0, found.1));
        }
        checked += 1;
        if checked % PROGRESS_STEP as u64 == 0 {
            progress();
        }
    }
    if let Some(unwritten) = versions.iter().position(|&version| version == 0) {
        match block::read_block(unwritten as u64, &mut buffer) {
            Ok(None) => {}
            Ok(Some(physical)) => return Err(format!("logical block {unwritten} was never written but reads from physical block {physical}")),
            Err(error) => return Err(format!("reading unwritten logical block {unwritten}: {error}")),
        }
    }
    Ok(checked)
}

/// Reads the MD5 workload from the disk through whatever is bound; returns the outcome,
/// the guest time, the modelled busy time and the instructions it took.
fn timed_md5_read() -> Result<(block::ReadOutcome, u64, u64, u64), String> {
    disk::configure(MODEL, disk::DEFAULT_MAX_WAIT_NS)?;
    let started = crate::time::now_ns();
    let instructions = crate::arch::csr::instret();
    let outcome = block::read_disk_through_filters(MD5_DISK_OFFSET, MD5_BYTES).map_err(|error| format!("{error}"))?;
    let instructions = (crate::arch::csr::instret() - instructions) as u64;
    let elapsed = crate::time::now_ns() - started;
    let busy = disk::stats().ok_or("no disk service")?.busy_ns;
    Ok((outcome, elapsed, busy, instructions))
}

/// The four technologies, by their console words.
const TECHNOLOGIES: [Preference; 4] = [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User];

/// MD5 on real reads: one line for the plain read, one per technology.
fn md5_runs() -> Result<(), String> {
    write_md5_workload()?;
    let expected = crate::bench::stream::expected();
    let (outcome, elapsed, busy, _) = timed_md5_read()?;
    if outcome.digest.is_some() {
        return Err(String::from("a digest was answered with nothing bound"));
    }
    crate::println!("bench blockio read {MD5_BYTES} {elapsed} {busy} {}", MD5_BYTES.div_ceil(block::READ_CHUNK_BYTES));
    for preference in TECHNOLOGIES {
        let technology = crate::bench::Graft::Extension(preference).name();
        let (outcome, elapsed, busy, instructions) = super::with_extension("md5", preference, timed_md5_read)?;
        if outcome.digest != Some(expected) || outcome.consumed != MD5_BYTES {
            return Err(format!("md5 {technology}: digest {:?} of {} consumed bytes, expected {}", outcome.digest.map(|digest| crate::bench::stream::hex(&digest)), outcome.consumed, crate::bench::stream::hex(&expected)));
        }
        crate::println!("bench blockio md5 {technology} {MD5_BYTES} {elapsed} {busy} {instructions}");
    }
    Ok(())
}

/// One logical-disk write run, printed; then the data is read back by content (in place
/// and built in; every technology places the same blocks, so the others check the graft's
/// map against every accepted write instead of reading 97,777 random blocks again).
fn write_run(placement: &str, technology: &str) -> Result<(), String> {
    let run = write_workload(logdisk::workload::WRITES, MODEL, || {})?;
    crate::println!(
        "bench blockio write {placement} {technology} {} {} {} {} {}",
        run.writes, run.device_writes, run.elapsed_ns, run.busy_ns, run.seek_cylinders
    );
    if matches!(technology, "none" | "builtin") {
        read_back(&run.versions, || {}).map(drop)
    } else {
        block::verify_map().map(drop).map_err(|mismatch| format!("the graft's map differs: {mismatch:?}"))
    }
}

/// Runs the group; false if a run failed.
pub fn run() -> bool {
    if disk::stats().is_none() {
        crate::println!("bench: blockio group skipped: the machine has no disk");
        return true;
    }
    let mut clean = true;
    let mut outcome = |what: &str, result: Result<(), String>| {
        if let Err(error) = result {
            crate::println!("bench FAILED blockio {what}: {error}");
            clean = false;
        }
    };
    outcome("md5", md5_runs());
    outcome("write in-place", write_run("in-place", "none"));
    for preference in TECHNOLOGIES {
        let technology = crate::bench::Graft::Extension(preference).name();
        outcome(&format!("write logdisk {technology}"), super::with_extension("logdisk", preference, || write_run("logdisk", technology)));
    }
    block::format();
    let _ = disk::configure(MODEL, disk::DEFAULT_MAX_WAIT_NS);
    clean
}
