//! Tests of the file-system service (`services::fs`): files through the buffer cache and
//! back from a cold cache, a cache smaller than the file (dirty blocks written back
//! before their buffers are reused), the specific errors, the file-system system calls
//! from a user program (`fstest check`), programs and extensions loaded from the file
//! system, open files closed by a process's exit leak nothing, and a corrupt superblock is
//! refused with its reason (never a panic) and the file system mounts again once repaired.
//!
//! They work in `/ktest` of the machine's file system (xtask gives every test machine's
//! disk one, with the image's `bin/` and `ext/`).

use alloc::string::String;
use alloc::vec::Vec;

use spindle_abi::syscall::Error;

use super::{KernelTest, TestResult};
use super::text;
use crate::ensure;
use crate::services::fs::{self, FsCallError};

/// The file-system tests.
pub const TESTS: &[KernelTest] = &[
    KernelTest { name: "fs::file_round_trips_through_a_cold_cache", run: file_round_trips_through_a_cold_cache },
    KernelTest { name: "fs::cache_smaller_than_the_file_loses_nothing", run: cache_smaller_than_the_file_loses_nothing },
    KernelTest { name: "fs::errors_are_specific", run: errors_are_specific },
    KernelTest { name: "fs::cached_reads_allocate_nothing", run: cached_reads_allocate_nothing },
    KernelTest { name: "fs::per_process_policy_from_a_program_ends_with_it", run: per_process_policy_from_a_program_ends_with_it },
    KernelTest { name: "fs::user_program_uses_the_file_calls", run: user_program_uses_the_file_calls },
    KernelTest { name: "fs::programs_and_extensions_load_from_files", run: programs_and_extensions_load_from_files },
    KernelTest { name: "fs::open_files_of_exited_processes_leak_nothing", run: open_files_of_exited_processes_leak_nothing },
    KernelTest { name: "fs::corrupt_superblock_is_refused_then_repaired", run: corrupt_superblock_is_refused_then_repaired },
    KernelTest { name: "fs::corrupt_root_inode_is_confined", run: corrupt_root_inode_is_confined },
    KernelTest { name: "fs::per_file_read_ahead_policy_in_every_technology", run: per_file_read_ahead_policy_in_every_technology },
    KernelTest { name: "fs::lock_grant_order_frp_then_fifo_in_every_technology", run: lock_grant_order_frp_then_fifo_in_every_technology },
];

/// `length` bytes of `seed`'s pattern.
fn pattern(seed: u64, length: usize) -> Vec<u8> {
    (0..length).map(|index| ((index as u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8).collect()
}

/// Makes `/ktest` (if missing).
fn work_directory() -> TestResult {
    match fs::mkdir("/ktest") {
        Ok(()) | Err(FsCallError::Fs(spindle_service_fs::FsError::Exists)) => Ok(()),
        Err(error) => Err(alloc::format!("mkdir /ktest: {error}")),
    }
}

/// Writes a 300 KiB file (direct and indirect blocks), reads it back, mounts again (a
/// cold cache: every block from the disk) and reads it again.
fn file_round_trips_through_a_cold_cache() -> TestResult {
    work_directory()?;
    let data = pattern(1, 300 * 1024 + 17);
    fs::write_file("/ktest/round", &data).map_err(text)?;
    ensure!(fs::read_file("/ktest/round").map_err(text)? == data, "the file read back differs (warm cache)");
    fs::remount(fs::DEFAULT_CACHE_BLOCKS).map_err(text)?;
    let before = fs::status().map_err(text)?;
    // Read as a program would: 32 KiB at a time (the read-ahead rule sees a sequence).
    let file = fs::open("/ktest/round", fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
    let mut read = Vec::new();
    let mut chunk = alloc::vec![0u8; 32 * 1024];
    loop {
        let count = fs::read(&file, &mut chunk).map_err(text)?;
        if count == 0 {
            break;
        }
        read.extend_from_slice(&chunk[..count]);
    }
    drop(file);
    ensure!(read == data, "the file read back differs (cold cache)");
    fs::settle_read_ahead();
    let after = fs::status().map_err(text)?;
    let blocks = data.len().div_ceil(4096) as u64;
    ensure!(
        after.disk_reads - before.disk_reads >= blocks,
        "a cold read of {blocks} blocks read only {} blocks from the disk",
        after.disk_reads - before.disk_reads
    );
    ensure!(after.cache.prefetches > before.cache.prefetches, "a sequential read prefetched nothing: {:?}", after.cache);
    fs::unlink("/ktest/round").map_err(text)?;
    Ok(())
}

/// A read of resident blocks (an inode, an indirect pointer, file data) copies straight
/// out of the cache's buffers: no heap allocation on the path, whole or partial blocks,
/// so its cost does not depend on the heap's state.
fn cached_reads_allocate_nothing() -> TestResult {
    work_directory()?;
    let data = pattern(7, 80 * 1024);
    fs::write_file("/ktest/resident", &data).map_err(text)?;
    let file = fs::open("/ktest/resident", fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
    let mut buffer = alloc::vec![0u8; 4096];
    // One pass first: every block resident, the read-ahead done.
    for offset in (0..data.len()).step_by(4096) {
        fs::seek(&file, offset as i64, fs::Whence::Start).map_err(text)?;
        fs::read(&file, &mut buffer).map_err(text)?;
    }
    fs::settle_read_ahead();
    let before = crate::mm::heap::allocations();
    // Whole blocks, a block past the direct ones (through the indirect block), and a part
    // spanning two blocks.
    for (offset, length) in [(0usize, 4096usize), (60 * 1024, 4096), (4000, 200)] {
        fs::seek(&file, offset as i64, fs::Whence::Start).map_err(text)?;
        let count = fs::read(&file, &mut buffer[..length]).map_err(text)?;
        ensure!(buffer[..count] == data[offset..offset + length], "the read at {offset} differs");
    }
    let allocations = crate::mm::heap::allocations() - before;
    drop(file);
    fs::unlink("/ktest/resident").map_err(text)?;
    ensure!(allocations == 0, "three cached reads allocated {allocations} times");
    Ok(())
}

/// With a 32-buffer cache, a 512 KiB file (128 blocks) is written and read back: the
/// dirty blocks are written back as their buffers are needed, and every byte survives,
/// also after mounting again.
fn cache_smaller_than_the_file_loses_nothing() -> TestResult {
    work_directory()?;
    fs::remount(32).map_err(text)?;
    let outcome = (|| -> TestResult {
        let data = pattern(2, 512 << 10);
        fs::write_file("/ktest/large", &data).map_err(text)?;
        super::progress();
        let status = fs::status().map_err(text)?;
        ensure!(status.cache.evictions > 0 && status.cache_blocks == 32, "no evictions with a 32-buffer cache: {:?}", status.cache);
        ensure!(fs::read_file("/ktest/large").map_err(text)? == data, "the file read back differs (small cache)");
        super::progress();
        fs::remount(32).map_err(text)?;
        ensure!(fs::read_file("/ktest/large").map_err(text)? == data, "the file read back differs (after mounting again)");
        fs::unlink("/ktest/large").map_err(text)
    })();
    fs::remount(fs::DEFAULT_CACHE_BLOCKS).map_err(text)?;
    outcome?;
    let report = fs::check().map_err(text)?;
    ensure!(!report.has_errors(), "the file system does not check clean:\n{report}");
    Ok(())
}

/// Each misuse gets its own error, as the system calls report it.
fn errors_are_specific() -> TestResult {
    work_directory()?;
    let code = |result: Result<(), FsCallError>| result.err().map(|error| error.code());
    ensure!(code(fs::mkdir("/ktest")) == Some(Error::Exists), "mkdir of an existing directory");
    ensure!(code(fs::read_file("/ktest/missing").map(drop)) == Some(Error::NotFound), "reading a missing file");
    ensure!(code(fs::read_file("/ktest").map(drop)) == Some(Error::IsADirectory), "reading a directory as a file");
    fs::write_file("/ktest/file", b"x").map_err(text)?;
    ensure!(code(fs::list("/ktest/file").map(drop)) == Some(Error::NotADirectory), "listing a file");
    ensure!(code(fs::read_file("/ktest/file/below").map(drop)) == Some(Error::NotADirectory), "a path through a file");
    fs::mkdir("/ktest/full").map_err(text)?;
    fs::write_file("/ktest/full/inside", b"y").map_err(text)?;
    ensure!(code(fs::unlink("/ktest/full")) == Some(Error::NotEmpty), "removing a non-empty directory");
    let long = alloc::format!("/ktest/{}", "n".repeat(200));
    ensure!(code(fs::write_file(&long, b"z")) == Some(Error::BadArgument), "a name too long");
    let write_only = fs::open("/ktest/file", fs::OpenMode { write: true, ..fs::OpenMode::default() }).map_err(text)?;
    ensure!(fs::read(&write_only, &mut [0u8; 4]) == Err(FsCallError::NotPermitted), "reading a file opened for writing only");
    // An open file cannot be removed (its inode could be reused under the handle).
    ensure!(code(fs::unlink("/ktest/file")) == Some(Error::Busy), "removing an open file");
    drop(write_only);
    for path in ["/ktest/full/inside", "/ktest/full", "/ktest/file"] {
        fs::unlink(path).map_err(|error| alloc::format!("rm {path}: {error}"))?;
    }
    Ok(())
}

/// Runs `command_line` as a child of the kernel; its exit status.
fn run(command_line: &str) -> Result<spindle_abi::syscall::ExitStatus, String> {
    use crate::proc::{self, Grants, Parent};
    let process = proc::spawn(command_line, Parent::Kernel, Grants::NONE).map_err(|error| alloc::format!("spawn {command_line:?}: {error}"))?;
    proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("wait for {command_line:?}: {error:?}"))
}

/// `fstest policy`: a program binds `readahead_app` to its own calls with the system call,
/// sees it listed for a process, reads a file with it; when it exits the kernel unloads
/// the policy and forgets its scope — and doing so 3 times leaves no heap behind.
fn per_process_policy_from_a_program_ends_with_it() -> TestResult {
    use crate::proc::{self, Grants, Parent};
    work_directory()?;
    fs::write_file("/ktest/policy", &pattern(3, 64 * 1024)).map_err(text)?;
    let grants = Grants { extension_loader: true, ..Grants::NONE };
    let once = |technology: &str| -> TestResult {
        let command = alloc::format!("fstest policy /ktest/policy {technology}");
        let process = proc::spawn(&command, Parent::Kernel, grants).map_err(|error| alloc::format!("spawn {command}: {error}"))?;
        let status = proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("wait for {command}: {error:?}"))?;
        ensure!(status.is_success(), "{command} ended {status} (its output is above)");
        if let Some(server) = crate::ext::user::serving_pid("readahead_app") {
            ensure!(proc::wait_until_reaped(server, 200), "{command}: the policy's server {server} did not end");
        }
        ensure!(crate::ext::find("readahead_app").is_none(), "{command}: readahead_app is still loaded after its process ended");
        ensure!(crate::services::cache_events::scope_of("readahead_app").is_none(), "{command}: the process scope outlived the process");
        Ok(())
    };
    let outcome = super::leaks::repeat("fstest policy (bind to itself, exit)", || once("native")).and_then(|()| once("user"));
    fs::unlink("/ktest/policy").map_err(text)?;
    outcome
}

/// `fstest check`: every file-system call from user space, and its errors.
fn user_program_uses_the_file_calls() -> TestResult {
    let status = run("fstest check")?;
    ensure!(status.is_success(), "fstest check ended {status} (its output is above)");
    Ok(())
}

/// `run /bin/hello` and `ext load /ext/hello.kext` (and the Wasm one) work from files.
fn programs_and_extensions_load_from_files() -> TestResult {
    let status = run("/bin/hello 7")?;
    ensure!(status == spindle_abi::syscall::ExitStatus::Exited(7), "/bin/hello 7 ended {status}");
    let missing = run("/bin/missing");
    ensure!(missing.is_err(), "a missing program file started: {missing:?}");
    for (path, technology) in [("/ext/hello.kext", "native"), ("/ext/hello.wasm", "wasm")] {
        let bytes = fs::read_file(path).map_err(text)?;
        let extension = crate::ext::load_kext_bytes(&bytes).map_err(|error| alloc::format!("load {path}: {error}"))?;
        let label = alloc::format!("{}", extension.technology);
        crate::ext::unload("hello").map_err(|error| alloc::format!("unload hello: {error}"))?;
        ensure!(label == technology, "{path} loaded as {label}, not {technology}");
    }
    Ok(())
}

/// A process that opens files and exits without closing them gives every byte back
/// (its capability table, and with it the open files, goes with it).
fn open_files_of_exited_processes_leak_nothing() -> TestResult {
    super::leaks::repeat("fstest open /README (exit without close)", || {
        let status = run("fstest open /README")?;
        ensure!(status.is_success(), "fstest open ended {status}");
        Ok(())
    })
}

/// The superblock's sector overwritten: mounting is refused with the reason (the checksum
/// or magic), reads answer `NoDevice`; written back, it mounts again.
fn corrupt_superblock_is_refused_then_repaired() -> TestResult {
    use crate::services::disk;
    fs::sync().map_err(text)?;
    let sector = crate::param::FS_REGION_START / disk::SECTOR_SIZE as u64;
    let mut original = alloc::vec![0u8; disk::SECTOR_SIZE];
    disk::read(sector, &mut original).map_err(text)?;
    let mut damaged = original.clone();
    damaged[40] ^= 0x5a;
    damaged[100] ^= 0xff;
    disk::write(sector, &damaged).map_err(text)?;
    let refused = fs::remount(fs::DEFAULT_CACHE_BLOCKS);
    let read = fs::read_file("/README");
    disk::write(sector, &original).map_err(text)?;
    let repaired = fs::remount(fs::DEFAULT_CACHE_BLOCKS);
    match refused {
        Err(FsCallError::NotMounted(why)) => ensure!(why.contains("superblock") || why.contains("checksum"), "refused, but for {why:?}"),
        other => return Err(alloc::format!("a damaged superblock mounted: {other:?}")),
    }
    ensure!(read.as_ref().err().map(FsCallError::code) == Some(Error::NoDevice), "a read without a file system gave {read:?}");
    repaired.map_err(|error| alloc::format!("the repaired file system does not mount: {error}"))?;
    ensure!(!fs::read_file("/README").map_err(text)?.is_empty(), "/README is empty after the repair");
    Ok(())
}

/// Resident blocks of the file at `path` in the cache.
fn resident(path: &str) -> Result<u64, String> {
    let (_, _, file) = fs::cache_state(0, Some(path)).map_err(text)?;
    Ok(file.ok_or("no file line")?.resident)
}

/// `readahead_app` bound to one file (`setpolicy`) with the application's count 8
/// (`cache_hint`), in every technology: after a cold mount, the first 4 KiB read of that
/// file brings 1 + 8 blocks into the cache; the same read of another file, under the
/// default rule (nothing on a first read), brings 1. Unbound, the file is back to 1.
fn per_file_read_ahead_policy_in_every_technology() -> TestResult {
    use crate::ext::Preference;
    use spindle_abi::event::CacheHint;
    work_directory()?;
    fs::write_file("/ktest/app", &pattern(3, 64 * 4096)).map_err(text)?;
    fs::write_file("/ktest/other", &pattern(4, 64 * 4096)).map_err(text)?;
    let app = fs::inode_of("/ktest/app").map_err(text)?;
    crate::services::cache_events::set_hint(app, CacheHint::READ_AHEAD_COUNT, Some(8));
    let first_read = |path: &str| -> Result<u64, String> {
        let file = fs::open(path, fs::OpenMode { read: true, ..fs::OpenMode::default() }).map_err(text)?;
        fs::read(&file, &mut [0u8; 4096]).map_err(text)?;
        fs::settle_read_ahead();
        resident(path)
    };
    let outcome = (|| -> TestResult {
        for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
            crate::services::policy::bind_to_file("/ktest/app", "readahead_app", preference).map_err(text)?;
            let bound = crate::services::policy::bound_to_file("/ktest/app").map_err(text)?;
            let result = (|| -> TestResult {
                ensure!(bound.len() == 1 && bound[0].0 == "readahead_app", "getpolicy /ktest/app: {bound:?}");
                fs::remount(fs::DEFAULT_CACHE_BLOCKS).map_err(text)?;
                let with_policy = first_read("/ktest/app")?;
                let without = first_read("/ktest/other")?;
                ensure!(with_policy == 9, "{}: the bound file has {with_policy} blocks resident after its first read, expected 1 + 8", preference.label());
                ensure!(without == 1, "{}: the other file has {without} blocks resident after its first read, expected 1 (the default prefetches nothing yet)", preference.label());
                Ok(())
            })();
            crate::services::policy::unbind("readahead_app").map_err(|error| alloc::format!("unload readahead_app: {error}"))?;
            result?;
            super::progress();
        }
        fs::remount(fs::DEFAULT_CACHE_BLOCKS).map_err(text)?;
        ensure!(first_read("/ktest/app")? == 1, "unbound, the file still prefetches on its first read");
        Ok(())
    })();
    crate::services::cache_events::clear_hints(app);
    fs::unlink("/ktest/app").map_err(text)?;
    fs::unlink("/ktest/other").map_err(text)?;
    outcome
}

/// The scripted sequence of Seltzer '95 §4.4 on a file, owners being strands: R1 holds a
/// read lock; W2 asks for a write lock and waits; R3 asks for a read lock. Under FRP (the
/// default) R3 is granted at once, before W2; with `lockgrant_fifo` bound to the file
/// (`setpolicy`, every technology) R3 waits behind W2. Returns the grant order.
fn lock_script() -> Result<Vec<u32>, String> {
    use crate::services::locks;
    use alloc::sync::Arc;
    use spindle_service_locks::LockKind;
    let file = fs::inode_of("/ktest/locked").map_err(text)?;
    let order: Arc<spin::Mutex<Vec<u32>>> = Arc::new(spin::Mutex::new(Vec::new()));
    let whole = locks::range(0, 0).map_err(|error| alloc::format!("{error:?}"))?;
    let record = |order: &Arc<spin::Mutex<Vec<u32>>>, owner: u32| crate::arch::csr::without_interrupts(|| order.lock().push(owner));
    locks::lock(file, 1, LockKind::Read, whole, true, &|| false).map_err(|error| alloc::format!("R1: {error:?}"))?;
    record(&order, 1);
    let mut strands = Vec::new();
    for (owner, kind) in [(2u32, LockKind::Write), (3, LockKind::Read)] {
        let order = order.clone();
        let strand = crate::sched::spawn("test-lock", crate::sched::Priority::NORMAL, move || {
            if locks::lock(file, owner, kind, whole, true, &|| false).is_ok() {
                crate::arch::csr::without_interrupts(|| order.lock().push(owner));
                // Hold it a little, then let the next one in.
                crate::sched::sleep_ticks(2);
                let _ = locks::unlock(file, owner, whole);
            }
        })
        .map_err(|error| alloc::format!("{error:?}"))?;
        strands.push(strand);
        // Let it reach the table before the next arrives.
        crate::sched::sleep_ticks(1);
    }
    crate::sched::sleep_ticks(1);
    locks::unlock(file, 1, whole).map_err(|error| alloc::format!("unlock R1: {error:?}"))?;
    for strand in &strands {
        strand.join();
    }
    Ok(crate::arch::csr::without_interrupts(|| order.lock().clone()))
}

fn lock_grant_order_frp_then_fifo_in_every_technology() -> TestResult {
    use crate::ext::Preference;
    work_directory()?;
    fs::write_file("/ktest/locked", b"record").map_err(text)?;
    let frp = lock_script()?;
    ensure!(frp == [1, 3, 2], "FRP granted in the order {frp:?}, expected [1, 3, 2] (the reader first)");
    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        crate::services::policy::bind_to_file("/ktest/locked", "lockgrant_fifo", preference).map_err(text)?;
        let fifo = lock_script();
        crate::services::policy::unbind("lockgrant_fifo").map_err(|error| alloc::format!("unload lockgrant_fifo: {error}"))?;
        let fifo = fifo?;
        ensure!(fifo == [1, 2, 3], "{}: lockgrant_fifo granted in the order {fifo:?}, expected [1, 2, 3] (arrival order)", preference.label());
    }
    fs::unlink("/ktest/locked").map_err(text)?;
    Ok(())
}

/// The root directory's inode overwritten with garbage on the disk: the file system still
/// mounts (the superblock is fine), and every call that needs the root answers `Corrupt`
/// naming the inode — no panic, no hang; restored, everything works again.
fn corrupt_root_inode_is_confined() -> TestResult {
    use crate::services::disk;
    use spindle_service_fs::{BLOCK_BYTES, INODE_BYTES, ROOT_INODE, Superblock};
    fs::sync().map_err(text)?;
    let start = crate::param::FS_REGION_START / disk::SECTOR_SIZE as u64;
    let sectors_per_block = (BLOCK_BYTES / disk::SECTOR_SIZE) as u64;
    let mut block = [0u8; BLOCK_BYTES];
    disk::read(start, &mut block).map_err(text)?;
    let superblock = Superblock::decode(&block).map_err(|error| alloc::format!("superblock: {error:?}"))?;
    let table = start + superblock.inode_start * sectors_per_block;
    let mut original = [0u8; BLOCK_BYTES];
    disk::read(table, &mut original).map_err(text)?;
    let mut damaged = original;
    let root = ROOT_INODE as usize * INODE_BYTES;
    for (offset, byte) in damaged[root..root + INODE_BYTES].iter_mut().enumerate() {
        *byte = 0xa5 ^ offset as u8;
    }
    disk::write(table, &damaged).map_err(text)?;
    let mounted = fs::remount(fs::DEFAULT_CACHE_BLOCKS);
    let listed = fs::list("/").map(|entries| entries.len());
    let read = fs::read_file("/README").map(|bytes| bytes.len());
    disk::write(table, &original).map_err(text)?;
    fs::remount(fs::DEFAULT_CACHE_BLOCKS).map_err(|error| alloc::format!("the repaired file system does not mount: {error}"))?;
    mounted.map_err(|error| alloc::format!("a damaged inode (not the superblock) stopped the mount: {error}"))?;
    for (what, result) in [("ls /", listed), ("cat /README", read)] {
        match result {
            Err(error) => ensure!(error.code() == Error::Corrupt, "{what} with a corrupt root inode gave {error} ({:?}), not Corrupt", error.code()),
            Ok(count) => return Err(alloc::format!("{what} with a corrupt root inode succeeded ({count})")),
        }
    }
    ensure!(!fs::list("/").map_err(text)?.is_empty(), "after the repair / is empty");
    Ok(())
}
