//! `fstest check | durable PATH SEED | verify PATH SEED | open PATH`: the file-system calls from user
//! space.
//!
//! - `check`: writes, reads back, seeks, stats, lists and removes files and directories
//!   under `/fstest`, and checks that bad uses get their documented errors (a closed or
//!   forged handle, a file opened read-only written to, a directory opened for writing, a
//!   missing path, a non-empty directory removed, lock flags and ranges). Exits 0 if everything held, else 1
//!   after printing what did not.
//! - `durable PATH SEED`: writes [`DURABLE_BYTES`] bytes of SEED's pattern to PATH, calls
//!   `fsync`, prints `fstest: fsync returned`, then spins until it is killed (the test
//!   kills the machine right then).
//! - `verify PATH SEED`: reads PATH and exits 0 if it holds exactly SEED's pattern.
//! - `open PATH`: opens PATH three times and exits without closing it.
//! - `policy PATH [native|user]`: binds `readahead_app` (native by default) to its own file-system calls
//!   (`setpolicy_process`), checks that `getpolicy` lists it for a process and that a second
//!   binding is refused, reads PATH through, and exits (the kernel unloads the policy).

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use spindle_runtime::arch::{self, Error, FileStat, LOCK_READ, LOCK_WAIT, LOCK_WRITE, OPEN_APPEND, OPEN_CREATE, OPEN_READ, OPEN_TRUNCATE, OPEN_WRITE, SEEK_END, SEEK_START};
use spindle_runtime::{Arguments, println};

spindle_runtime::entry!(main);

/// Bytes `durable` writes: 50 blocks and a bit, so data, an indirect block and the inode
/// all have to reach the disk.
const DURABLE_BYTES: usize = 50 * 4096 + 123;

fn main(arguments: &Arguments) -> i32 {
    match (arguments.get(0), arguments.get(1), arguments.get(2)) {
        (Some("check"), None, None) => check(),
        (Some("durable"), Some(path), Some(seed)) => durable(path, seed.parse().unwrap_or(0)),
        (Some("verify"), Some(path), Some(seed)) => verify(path, seed.parse().unwrap_or(0)),
        (Some("open"), Some(path), None) => {
            // Opens PATH three times and exits without closing (the leak test).
            for _ in 0..3 {
                if let Err(error) = arch::open(path, OPEN_READ) {
                    println!("fstest: cannot open {path}: {error}");
                    return 1;
                }
            }
            0
        }
        (Some("policy"), Some(path), technology) => match technology {
            None | Some("native") => policy(path, arch::Technology::Default),
            Some("user") => policy(path, arch::Technology::User),
            Some(other) => {
                println!("fstest policy: unknown technology {other} (native or user)");
                2
            }
        },
        _ => {
            println!("usage: fstest check | durable PATH SEED | verify PATH SEED | open PATH | policy PATH [native|user]");
            2
        }
    }
}

/// `policy PATH`: a per-process policy bound by the program itself.
fn policy(path: &str, technology: arch::Technology) -> i32 {
    let mut check = Checker { failures: 0 };
    let bound = arch::setpolicy_process(0, "readahead_app", technology);
    check.expect("setpolicy_process(0, readahead_app) binds it", bound.is_ok());
    let mut listing = [0u8; 512];
    match arch::getpolicy("", &mut listing) {
        Ok(length) => {
            let text = core::str::from_utf8(&listing[..length.min(listing.len())]).unwrap_or("");
            check.expect("getpolicy lists readahead_app bound to a process", text.lines().any(|line| line.starts_with("readahead_app\t") && line.contains("\tprocess ")));
        }
        Err(error) => check.expect(alloc_free_message("getpolicy", error), false),
    }
    check.expect_error("a second binding", arch::setpolicy_process(0, "readahead_app", technology), Error::Refused);
    check.expect_error("a binding to no process", arch::setpolicy_process(999_999, "evict_mru", arch::Technology::Default), Error::NotFound);
    match arch::open(path, OPEN_READ) {
        Ok(handle) => {
            let mut buffer = [0u8; 4096];
            let mut total = 0;
            while let Ok(count @ 1..) = arch::read(handle, &mut buffer) {
                total += count;
            }
            check.expect("the file reads through with the policy bound", total > 0);
            let _ = arch::close(handle);
        }
        Err(error) => check.expect(alloc_free_message("open", error), false),
    }
    if check.failures == 0 { 0 } else { 1 }
}

/// Byte `index` of SEED's pattern.
fn pattern(seed: u64, index: usize) -> u8 {
    let mixed = (index as u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0x2545_f491_4f6c_dd1d);
    (mixed >> 56) as u8
}

/// Counts failed expectations and prints each.
struct Checker {
    failures: u32,
}

impl Checker {
    fn expect(&mut self, what: &str, held: bool) {
        if !held {
            self.failures += 1;
            println!("fstest: FAILED: {what}");
        }
    }

    fn expect_error<T: core::fmt::Debug>(&mut self, what: &str, result: Result<T, Error>, wanted: Error) {
        match result {
            Err(error) if error == wanted => {}
            other => {
                self.failures += 1;
                println!("fstest: FAILED: {what}: got {other:?}, wanted Err({wanted:?})");
            }
        }
    }
}

fn check() -> i32 {
    let mut check = Checker { failures: 0 };
    // A clean slate (a previous run may have left its directory).
    let _ = arch::unlink("/fstest/sub/deep");
    let _ = arch::unlink("/fstest/sub");
    let _ = arch::unlink("/fstest/data");
    let _ = arch::unlink("/fstest");
    check.expect("mkdir /fstest", arch::mkdir("/fstest").is_ok());
    check.expect_error("mkdir of an existing directory", arch::mkdir("/fstest"), Error::Exists);
    // Write 3 blocks and a half of a pattern in odd-sized pieces, read it back.
    let Ok(handle) = arch::open("/fstest/data", OPEN_READ | OPEN_WRITE | OPEN_CREATE | OPEN_TRUNCATE) else {
        println!("fstest: FAILED: cannot create /fstest/data");
        return 1;
    };
    let total = 3 * 4096 + 2048;
    let mut chunk = [0u8; 1000];
    let mut written = 0;
    while written < total {
        let count = chunk.len().min(total - written);
        for (offset, byte) in chunk[..count].iter_mut().enumerate() {
            *byte = pattern(7, written + offset);
        }
        match arch::write(handle, &chunk[..count]) {
            Ok(done) if done == count => written += done,
            other => {
                check.expect("write returns the count", false);
                println!("fstest: write gave {other:?}");
                break;
            }
        }
    }
    check.expect("seek to the start", arch::seek(handle, 0, SEEK_START) == Ok(0));
    let mut read_back = 0;
    let mut buffer = [0u8; 4096];
    let mut same = true;
    loop {
        match arch::read(handle, &mut buffer) {
            Ok(0) => break,
            Ok(count) => {
                same &= buffer[..count].iter().enumerate().all(|(offset, &byte)| byte == pattern(7, read_back + offset));
                read_back += count;
            }
            Err(error) => {
                println!("fstest: read failed: {error}");
                break;
            }
        }
    }
    check.expect("the file reads back whole", read_back == total);
    check.expect("the file reads back byte for byte", same);
    check.expect("seek to the end gives the size", arch::seek(handle, 0, SEEK_END) == Ok(total as u64));
    check.expect_error("seek before the start", arch::seek(handle, -1, SEEK_START), Error::BadArgument);
    check.expect_error("seek with an unknown origin", arch::seek(handle, 0, 9), Error::BadArgument);
    check.expect("fsync", arch::fsync(handle).is_ok());
    match arch::stat("/fstest/data") {
        Ok(stat) => check.expect("stat: a file of the written size", stat.kind == FileStat::FILE && stat.size == total as u64 && stat.links == 1),
        Err(error) => check.expect(alloc_free_message("stat", error), false),
    }
    check.expect("close", arch::close(handle).is_ok());
    check.expect_error("read through a closed handle", arch::read(handle, &mut buffer), Error::BadHandle);
    check.expect_error("close twice", arch::close(handle), Error::BadHandle);
    check.expect_error("a forged handle", arch::read(0x1234_5678, &mut buffer), Error::BadHandle);
    // Rights: a read-only handle cannot write; a write-only one cannot read.
    if let Ok(reader) = arch::open("/fstest/data", OPEN_READ) {
        check.expect_error("write to a read-only file", arch::write(reader, b"x"), Error::NotPermitted);
        let _ = arch::close(reader);
    } else {
        check.expect("open for reading", false);
    }
    // Byte-range locks: a process's own locks never conflict; bad flags and ranges refused.
    if let Ok(locker) = arch::open("/fstest/data", OPEN_READ) {
        check.expect("lock bytes 0..100 for writing", arch::lock(locker, 0, 100, LOCK_WRITE).is_ok());
        check.expect("re-lock part of it for reading (the owner's own lock)", arch::lock(locker, 10, 10, LOCK_READ | LOCK_WAIT).is_ok());
        check.expect_error("lock with unknown flags", arch::lock(locker, 0, 1, 0x40), Error::BadArgument);
        check.expect_error("lock an overflowing range", arch::lock(locker, u64::MAX - 1, 10, LOCK_WRITE), Error::BadArgument);
        check.expect("unlock everything", arch::unlock(locker, 0, 0).is_ok());
        let _ = arch::close(locker);
        check.expect_error("lock through a closed handle", arch::lock(locker, 0, 1, LOCK_WRITE), Error::BadHandle);
    } else {
        check.expect("open for locking", false);
    }
    if let Ok(appender) = arch::open("/fstest/data", OPEN_WRITE | OPEN_APPEND) {
        check.expect_error("read from a write-only file", arch::read(appender, &mut buffer), Error::NotPermitted);
        check.expect("append", arch::write(appender, b"tail") == Ok(4));
        let _ = arch::close(appender);
        check.expect("append grows the file", arch::stat("/fstest/data").map(|stat| stat.size) == Ok(total as u64 + 4));
    } else {
        check.expect("open for appending", false);
    }
    // Errors of paths and kinds.
    check.expect_error("open a missing file", arch::open("/fstest/missing", OPEN_READ), Error::NotFound);
    check.expect_error("open a directory for writing", arch::open("/fstest", OPEN_WRITE), Error::IsADirectory);
    check.expect_error("open with no access", arch::open("/fstest/data", OPEN_CREATE), Error::BadArgument);
    check.expect_error("a path through a file", arch::open("/fstest/data/x", OPEN_READ), Error::NotADirectory);
    check.expect_error("an empty path", arch::open("", OPEN_READ), Error::BadLength);
    // Directories: nested, listed, removed in order.
    check.expect("mkdir nested", arch::mkdir("/fstest/sub").is_ok() && arch::mkdir("/fstest/sub/deep").is_ok());
    let mut listing = [0u8; 1024];
    match arch::readdir("/fstest", &mut listing) {
        Ok(length) => {
            let text = core::str::from_utf8(&listing[..length.min(listing.len())]).unwrap_or("");
            check.expect("readdir lists the file and the directory", text.contains("f\t") && text.contains("\tdata\n") && text.contains("d\t") && text.contains("\tsub\n"));
        }
        Err(error) => check.expect(alloc_free_message("readdir", error), false),
    }
    check.expect_error("readdir of a file", arch::readdir("/fstest/data", &mut listing), Error::NotADirectory);
    check.expect_error("remove a non-empty directory", arch::unlink("/fstest/sub"), Error::NotEmpty);
    check.expect("remove in order", arch::unlink("/fstest/sub/deep").is_ok() && arch::unlink("/fstest/sub").is_ok());
    if let Ok(open) = arch::open("/fstest/data", OPEN_READ) {
        check.expect_error("remove an open file", arch::unlink("/fstest/data"), Error::Busy);
        let _ = arch::close(open);
    }
    check.expect("remove the file", arch::unlink("/fstest/data").is_ok());
    check.expect_error("the removed file is gone", arch::stat("/fstest/data"), Error::NotFound);
    check.expect("remove the directory", arch::unlink("/fstest").is_ok());
    if check.failures == 0 {
        println!("fstest: every check held");
        0
    } else {
        println!("fstest: {} check(s) failed", check.failures);
        1
    }
}

/// "WHAT failed: ERROR" without allocating.
fn alloc_free_message(what: &str, error: Error) -> &'static str {
    println!("fstest: {what} failed: {error}");
    "a call failed (above)"
}

fn durable(path: &str, seed: u64) -> i32 {
    let handle = match arch::open(path, OPEN_WRITE | OPEN_CREATE | OPEN_TRUNCATE) {
        Ok(handle) => handle,
        Err(error) => {
            println!("fstest: cannot create {path}: {error}");
            return 1;
        }
    };
    let mut chunk = [0u8; 4096];
    let mut written = 0;
    while written < DURABLE_BYTES {
        let count = chunk.len().min(DURABLE_BYTES - written);
        for (offset, byte) in chunk[..count].iter_mut().enumerate() {
            *byte = pattern(seed, written + offset);
        }
        match arch::write(handle, &chunk[..count]) {
            Ok(done) if done == count => written += done,
            other => {
                println!("fstest: write to {path} gave {other:?}");
                return 1;
            }
        }
    }
    if let Err(error) = arch::fsync(handle) {
        println!("fstest: fsync failed: {error}");
        return 1;
    }
    println!("fstest: fsync returned");
    // Nothing more is written: the machine is killed while this spins.
    loop {
        arch::yield_now();
    }
}

fn verify(path: &str, seed: u64) -> i32 {
    let handle = match arch::open(path, OPEN_READ) {
        Ok(handle) => handle,
        Err(error) => {
            println!("fstest: cannot open {path}: {error}");
            return 1;
        }
    };
    let mut buffer = [0u8; 4096];
    let mut total = 0;
    loop {
        match arch::read(handle, &mut buffer) {
            Ok(0) => break,
            Ok(count) => {
                if let Some(offset) = (0..count).find(|&offset| buffer[offset] != pattern(seed, total + offset)) {
                    println!("fstest: {path} differs at byte {}", total + offset);
                    return 1;
                }
                total += count;
            }
            Err(error) => {
                println!("fstest: read of {path} failed: {error}");
                return 1;
            }
        }
    }
    if total != DURABLE_BYTES {
        println!("fstest: {path} has {total} bytes, expected {DURABLE_BYTES}");
        return 1;
    }
    println!("fstest: verified {total} bytes of {path}");
    0
}
