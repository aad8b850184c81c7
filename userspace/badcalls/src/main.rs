//! `badcalls`: calls every system call with bad pointers, lengths, handles and ids and
//! checks that each returns the error `spindle_abi::syscall` documents (and that the
//! good calls around them still work). Prints every mismatch and a summary, and exits
//! with the number of mismatches (0 = the kernel kept its contract).
//!
//! Most calls go through the runtime's safe wrappers (the kernel only reads through
//! their pointers). The calls that let the kernel *write* or *unmap* at a raw address are
//! `unsafe`; they live in [`raw`], the only place this crate allows `unsafe`, and are made
//! only with addresses the kernel must refuse.

#![no_std]
#![no_main]
#![deny(unsafe_code)]

use core::fmt::Debug;

use spindle_runtime::arch::{
    self, AnonymousRegion, CONSOLE, Error, ExitStatus, KillCause, MAX_ANONYMOUS_REGIONS, MAX_COMMAND_LINE, MAX_MAP_LENGTH,
    MAX_SLEEP_TICKS, MAX_WRITE_LENGTH, PAGE_SIZE, Syscall,
};
use spindle_runtime::{Arguments, println};

spindle_runtime::entry!(main);

/// Inside user space but never mapped: between the anonymous-mapping region and the
/// stack (kernel/process/src/layout.rs).
const UNMAPPED: usize = 0x1c_0000_0000;
/// The kernel image: mapped in every address space, but not user-accessible.
const KERNEL_TEXT: usize = 0x8020_0000;
/// Kernel strand stacks: mapped, not user-accessible.
const KERNEL_STACKS: usize = 0x30_0000_0000;

/// Raw calls at addresses the kernel must refuse (the only `unsafe` in this program).
#[allow(unsafe_code)]
mod raw {
    use super::{Error, Syscall, arch};

    /// `arguments(address, length)`: the kernel would write the command line there.
    pub fn arguments_into(address: usize, length: usize) -> Result<usize, Error> {
        // SAFETY: called only with ranges the kernel must refuse (read-only, unmapped,
        // kernel or wrapping) or with length 0 (nothing is written); if the kernel wrote
        // anyway, the check fails and the program reports it.
        unsafe { arch::call(Syscall::Arguments, [address, length, 0, 0, 0, 0]) }
    }

    /// `unmap(address, length)`.
    pub fn unmap(address: usize, length: usize) -> Result<usize, Error> {
        // SAFETY: called only with ranges the kernel must refuse (misaligned, partial,
        // unmapped, not anonymous); a live `AnonymousRegion` is never unmapped here.
        unsafe { arch::call(Syscall::Unmap, [address, length, 0, 0, 0, 0]) }
    }

    /// A call by raw number.
    pub fn number(number: usize) -> Result<usize, Error> {
        // SAFETY: called only with numbers no system call has, so nothing happens.
        unsafe { arch::call_number(number, [0; 6]) }
    }
}

/// Counts checks and mismatches.
#[derive(Default)]
struct Checker {
    checks: u32,
    failures: u32,
}

impl Checker {
    /// Checks that `got` is `Ok` (when `expected` is `None`) or exactly `Err(expected)`.
    fn expect<T: Debug>(&mut self, what: &str, got: Result<T, Error>, expected: Option<Error>) -> Option<T> {
        self.checks += 1;
        let matches = match (&got, expected) {
            (Ok(_), None) => true,
            (Err(error), Some(wanted)) => *error == wanted,
            _ => false,
        };
        if !matches {
            self.failures += 1;
            match expected {
                None => println!("badcalls: FAIL {what}: got {got:?}, expected success"),
                Some(wanted) => println!("badcalls: FAIL {what}: got {got:?}, expected {wanted:?}"),
            }
        }
        got.ok()
    }

    /// Checks a condition.
    fn holds(&mut self, what: &str, condition: bool) {
        self.checks += 1;
        if !condition {
            self.failures += 1;
            println!("badcalls: FAIL {what}");
        }
    }
}

fn main(arguments: &Arguments) -> i32 {
    let mut check = Checker::default();
    let pid = arch::getpid();
    check.holds("getpid is not 0", pid != 0);
    let on_stack = [0u8; 16];
    let stack_address = on_stack.as_ptr() as usize;
    let code: fn(&Arguments) -> i32 = main;
    let code_address = code as usize;

    for number in [Syscall::ALL.len(), 999, usize::MAX] {
        check.expect("unknown call number", raw::number(number), Some(Error::NoSuchCall));
    }
    write_calls(&mut check, stack_address);
    spawn_calls(&mut check);
    process_calls(&mut check, pid);
    time_calls(&mut check);
    memory_calls(&mut check, code_address, stack_address);
    argument_calls(&mut check, arguments, code_address);

    println!("badcalls: {} checks, {} failed", check.checks, check.failures);
    check.failures as i32
}

fn write_calls(check: &mut Checker, stack_address: usize) {
    let text = b"badcalls: write works\n";
    let written = check.expect("write(console, text)", arch::write(CONSOLE, text), None);
    check.holds("write returns the length", written == Some(text.len()));
    for handle in [0, 2, 7, usize::MAX] {
        check.expect("write to a handle that does not exist", arch::write(handle, b"x"), Some(Error::BadHandle));
    }
    check.expect("write(null)", arch::write_from_address(CONSOLE, 0, 1), Some(Error::BadAddress));
    check.expect("write(kernel text)", arch::write_from_address(CONSOLE, KERNEL_TEXT, 16), Some(Error::BadAddress));
    check.expect("write(kernel stacks)", arch::write_from_address(CONSOLE, KERNEL_STACKS, 16), Some(Error::BadAddress));
    check.expect("write(unmapped user page)", arch::write_from_address(CONSOLE, UNMAPPED, 1), Some(Error::BadAddress));
    check.expect("write(wrapping range)", arch::write_from_address(CONSOLE, usize::MAX - 4, 16), Some(Error::BadLength));
    let too_long = MAX_WRITE_LENGTH + 1;
    check.expect("write(above the limit)", arch::write_from_address(CONSOLE, stack_address, too_long), Some(Error::BadLength));
    // Starts on the stack, runs past its top into the unmapped page above it.
    check.expect("write(stack past its top)", arch::write_from_address(CONSOLE, stack_address, 3 * PAGE_SIZE), Some(Error::BadAddress));
    check.holds("write(null, 0) writes nothing", arch::write_from_address(CONSOLE, 0, 0) == Ok(0));
}

fn spawn_calls(check: &mut Checker) {
    check.expect("spawn(null)", arch::spawn_from_address(0, 5), Some(Error::BadAddress));
    check.expect("spawn(kernel text)", arch::spawn_from_address(KERNEL_TEXT, 5), Some(Error::BadAddress));
    check.expect("spawn(\"\")", arch::spawn(""), Some(Error::BadLength));
    static LONG: [u8; MAX_COMMAND_LINE + 1] = [b'a'; MAX_COMMAND_LINE + 1];
    check.expect("spawn(too long)", arch::spawn_from_address(LONG.as_ptr() as usize, LONG.len()), Some(Error::BadLength));
    static NOT_UTF8: [u8; 4] = [b'h', 0xff, 0xfe, b'i'];
    check.expect("spawn(not UTF-8)", arch::spawn_from_address(NOT_UTF8.as_ptr() as usize, NOT_UTF8.len()), Some(Error::BadArgument));
    check.expect("spawn(only spaces)", arch::spawn("   "), Some(Error::BadArgument));
    check.expect("spawn(no such program)", arch::spawn("no-such-program"), Some(Error::NoSuchProgram));
    check.expect("spawn(path outside bin/)", arch::spawn("../hello"), Some(Error::NoSuchProgram));
}

fn process_calls(check: &mut Checker, pid: usize) {
    if let Some(child) = check.expect("spawn(hello 7)", arch::spawn("hello 7"), None) {
        check.holds("a child's pid differs from ours", child != pid);
        let status = check.expect("wait(child)", arch::wait(child), None);
        check.holds("the child's status is 7", status == Some(ExitStatus::Exited(7)));
        check.expect("wait(reaped child)", arch::wait(child), Some(Error::NoSuchProcess));
        check.expect("kill(reaped child)", arch::kill(child), Some(Error::NoSuchProcess));
    }
    if let Some(spinner) = check.expect("spawn(spin 0)", arch::spawn("spin 0 1000000"), None) {
        check.expect("kill(child)", arch::kill(spinner), None);
        let status = check.expect("wait(killed child)", arch::wait(spinner), None);
        check.holds("a killed child's status says so", status == Some(ExitStatus::Killed(KillCause::Request)));
    }
    check.expect("wait(self)", arch::wait(pid), Some(Error::NotPermitted));
    check.expect("kill(self)", arch::kill(pid), Some(Error::NotPermitted));
    for bad in [0, usize::MAX, pid + 100_000] {
        check.expect("wait(no such pid)", arch::wait(bad), Some(Error::NoSuchProcess));
        check.expect("kill(no such pid)", arch::kill(bad), Some(Error::NoSuchProcess));
    }
}

fn time_calls(check: &mut Checker) {
    check.expect("sleep_ticks(0)", arch::sleep_ticks(0), None);
    check.expect("sleep_ticks(2)", arch::sleep_ticks(2), None);
    let too_long = MAX_SLEEP_TICKS + 1;
    check.expect("sleep_ticks(above the limit)", arch::sleep_ticks(too_long), Some(Error::BadArgument));
    check.expect("sleep_ticks(usize::MAX)", arch::sleep_ticks(usize::MAX), Some(Error::BadArgument));
    arch::yield_now();
    check.holds("event_count is positive", arch::event_count() > 0);
}

fn memory_calls(check: &mut Checker, code_address: usize, stack_address: usize) {
    let max = MAX_MAP_LENGTH;
    for length in [0, max + 1, usize::MAX] {
        check.expect("map_anonymous(bad length)", AnonymousRegion::map(length).map(|region| region.address()), Some(Error::BadLength));
    }
    let Some(mut region) = check.expect("map_anonymous(page + 1)", AnonymousRegion::map(PAGE_SIZE + 1), None) else { return };
    check.holds("the mapping is two pages", region.len() == 2 * PAGE_SIZE);
    check.holds("the mapping is page-aligned", region.address().is_multiple_of(PAGE_SIZE));
    let memory = region.as_mut_slice();
    check.holds("fresh memory is zeroed", memory.iter().all(|&byte| byte == 0));
    memory.fill(0xa5);
    check.holds("the memory keeps what is written", memory.iter().all(|&byte| byte == 0xa5));
    let address = region.address();
    check.expect("write(anonymous memory)", arch::write_from_address(CONSOLE, address, 0), None);
    check.expect("unmap(misaligned)", raw::unmap(address + 1, 2 * PAGE_SIZE), Some(Error::BadAddress));
    check.expect("unmap(length 0)", raw::unmap(address, 0), Some(Error::BadLength));
    check.expect("unmap(part of a region)", raw::unmap(address, PAGE_SIZE), Some(Error::BadLength));
    check.expect("unmap(inside a region)", raw::unmap(address + PAGE_SIZE, PAGE_SIZE), Some(Error::BadAddress));
    check.expect("unmap(its guard page)", raw::unmap(address + 2 * PAGE_SIZE, PAGE_SIZE), Some(Error::BadAddress));
    check.expect("unmap(program text)", raw::unmap(code_address & !(PAGE_SIZE - 1), PAGE_SIZE), Some(Error::NotPermitted));
    check.expect("unmap(stack)", raw::unmap(stack_address & !(PAGE_SIZE - 1), PAGE_SIZE), Some(Error::NotPermitted));
    check.expect("unmap(unmapped)", raw::unmap(UNMAPPED, PAGE_SIZE), Some(Error::BadAddress));
    check.expect("unmap(kernel)", raw::unmap(KERNEL_TEXT, PAGE_SIZE), Some(Error::BadAddress));
    drop(region);
    check.expect("write(unmapped anonymous memory)", arch::write_from_address(CONSOLE, address, 1), Some(Error::BadAddress));
    check.expect("unmap(twice)", raw::unmap(address, 2 * PAGE_SIZE), Some(Error::BadAddress));

    // The quota: two largest mappings use it up.
    let first = check.expect("map_anonymous(largest)", AnonymousRegion::map(max), None);
    let second = check.expect("map_anonymous(largest, again)", AnonymousRegion::map(max), None);
    check.expect("map_anonymous(over the quota)", AnonymousRegion::map(PAGE_SIZE).map(|region| region.address()), Some(Error::NoMemory));
    drop((first, second));
    // The region count.
    let mut regions: [Option<AnonymousRegion>; MAX_ANONYMOUS_REGIONS] = [const { None }; MAX_ANONYMOUS_REGIONS];
    for slot in regions.iter_mut() {
        *slot = check.expect("map_anonymous(one page)", AnonymousRegion::map(PAGE_SIZE), None);
    }
    check.expect("map_anonymous(one region too many)", AnonymousRegion::map(PAGE_SIZE).map(|region| region.address()), Some(Error::TooMany));
    drop(regions);
    check.expect("map_anonymous(after unmapping all)", AnonymousRegion::map(PAGE_SIZE).map(|region| region.address()), None);
}

fn argument_calls(check: &mut Checker, arguments: &Arguments, code_address: usize) {
    let mut buffer = [0u8; 64];
    let length = check.expect("arguments(buffer)", arch::arguments(&mut buffer), None);
    check.holds("arguments returns the command line", length == Some(arguments.line().len()) && buffer.starts_with(b"badcalls"));
    let mut short = [0u8; 3];
    let total = check.expect("arguments(short buffer)", arch::arguments(&mut short), None);
    check.holds("a short buffer gets a prefix and the full length", &short == b"bad" && total == length);
    let read_only = "read-only data".as_ptr() as usize;
    check.expect("arguments(read-only data)", raw::arguments_into(read_only, 4), Some(Error::BadAddress));
    check.expect("arguments(program text)", raw::arguments_into(code_address, 4), Some(Error::BadAddress));
    check.expect("arguments(null)", raw::arguments_into(0, 4), Some(Error::BadAddress));
    check.expect("arguments(kernel)", raw::arguments_into(KERNEL_TEXT, 4), Some(Error::BadAddress));
    check.expect("arguments(unmapped)", raw::arguments_into(UNMAPPED, 4), Some(Error::BadAddress));
    check.expect("arguments(wrapping)", raw::arguments_into(usize::MAX - 2, 8), Some(Error::BadLength));
    check.holds("arguments(null, 0) returns the length", raw::arguments_into(0, 0).ok() == length);
}
