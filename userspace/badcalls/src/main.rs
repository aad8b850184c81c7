//! `badcalls [loader | load-hello | console]`: calls every system call with bad pointers,
//! lengths, handles and ids and checks that each returns the error `spindle_abi::syscall`
//! documents (and that the good calls around them still work). Prints every mismatch and
//! a summary, and exits with the number of mismatches (0 = the kernel kept its contract).
//!
//! Without arguments it runs unprivileged (as `run badcalls` starts it): the
//! extension calls and `kernel_command` must answer `NotPermitted`, and `spawn` may not
//! pass capabilities it lacks. The other modes need a capability and check the calls
//! behind it:
//!
//! - `loader` (extension-loading capability, e.g. `run -x badcalls loader`): the bad
//!   arguments of `ext_load`/`ext_unload`/`ext_list`, a built-in load, a refused second
//!   load and its `last_error`; then it spawns `badcalls load-hello` passing the
//!   capability, which loads and unloads the native `hello`;
//! - `console` (console capability, `run -c badcalls console`): `kernel_command`.
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
    self, ACCESS_READ, ACCESS_WRITE, AnonymousRegion, CONSOLE, Error, ExitStatus, KillCause, MAX_ANONYMOUS_REGIONS,
    MAX_COMMAND_LINE, MAX_MAP_LENGTH, MAX_NAME, MAX_READ_LENGTH, MAX_SLEEP_TICKS, MAX_WRITE_LENGTH, PAGE_SIZE,
    SPAWN_CONSOLE, SPAWN_EXTENSION_LOADER, Syscall, Technology, DiskState, HwCounters,
};
use spindle_runtime::{Arguments, println};

spindle_runtime::entry!(main);

/// Inside user space but never mapped: between the anonymous-mapping region and the
/// stack (kernel/process/src/layout.rs).
const UNMAPPED: usize = 0x1c_0000_0000;
/// The kernel image: mapped in every address space, but not user-accessible.
const KERNEL_TEXT: usize = 0x8020_0000;
/// One past the user stack's last byte; the page above is unmapped.
const STACK_TOP: usize = 0x1f_ffff_f000;
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

    /// `read(handle, address, length)`: the kernel would write console input there.
    pub fn read_into(handle: usize, address: usize, length: usize) -> Result<usize, Error> {
        // SAFETY: called only with handles, lengths or ranges the kernel must refuse
        // before it writes (or takes input); a wrong acceptance fails the check.
        unsafe { arch::call(Syscall::Read, [handle, address, length, 0, 0, 0]) }
    }

    /// A listing call (`ext_list`, `events`, `processes`, `last_error`, `disk_state`) into a
    /// raw range.
    pub fn listing_into(call: Syscall, address: usize, length: usize) -> Result<usize, Error> {
        // SAFETY: called only with ranges the kernel must refuse (read-only, unmapped,
        // kernel or wrapping) or with length 0 (nothing is written).
        unsafe { arch::call(call, [address, length, 0, 0, 0, 0]) }
    }

    /// `protect(address, length, access)`.
    pub fn protect(address: usize, length: usize, access: usize) -> Result<usize, Error> {
        // SAFETY: called only with requests the kernel must refuse, or on a region no
        // reference points into (its `AnonymousRegion` is forgotten or not yet used).
        unsafe { arch::call(Syscall::Protect, [address, length, access, 0, 0, 0]) }
    }

    /// A call that reads only registers and must be refused in this state
    /// (`upcall_return`, `kernel_function`, `service_return` outside a call).
    pub fn refused_in_this_state(call: Syscall) -> Result<usize, Error> {
        // SAFETY: outside an upcall or a service call these calls do nothing but answer
        // `WrongState`; if one acted, the check fails and the program reports it.
        unsafe { arch::call(call, [0; 6]) }
    }

    /// `upcall_serve(address, length)`.
    pub fn upcall_serve(address: usize, length: usize) -> Result<usize, Error> {
        // SAFETY: the kernel only reads the registration; this process is not a
        // user-level extension, so the call must be refused without blocking.
        unsafe { arch::call(Syscall::UpcallServe, [address, length, 0, 0, 0, 0]) }
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
    match arguments.get(0) {
        None => unprivileged(&mut check, arguments),
        Some("loader") => loader_calls(&mut check),
        Some("load-hello") => load_hello(&mut check),
        Some("console") => console_calls(&mut check),
        Some(other) => {
            println!("badcalls: unknown mode {other:?} (none, loader, load-hello, console)");
            return 1;
        }
    }
    println!("badcalls: {} checks, {} failed", check.checks, check.failures);
    check.failures as i32
}

/// The checks of a process without capabilities.
fn unprivileged(check: &mut Checker, arguments: &Arguments) {
    let pid = arch::getpid();
    check.holds("getpid is not 0", pid != 0);
    let on_stack = [0u8; 16];
    let stack_address = on_stack.as_ptr() as usize;
    let code: fn(&Arguments) -> i32 = main;
    let code_address = code as usize;

    for number in [Syscall::ALL.len(), 999, usize::MAX] {
        check.expect("unknown call number", raw::number(number), Some(Error::NoSuchCall));
    }
    write_calls(check, stack_address);
    spawn_calls(check);
    process_calls(check, pid);
    time_calls(check);
    memory_calls(check, code_address, stack_address);
    argument_calls(check, arguments, code_address);
    read_calls(check, stack_address, code_address);
    privileged_calls_refused(check);
    listing_calls(check, pid, code_address);
    protect_calls(check, code_address, stack_address);
    upcall_calls(check, code_address);
    service_calls(check, code_address);
}

/// Upcall calls from a process that is not a user-level extension.
fn upcall_calls(check: &mut Checker, code_address: usize) {
    use spindle_abi::syscall::UpcallRegistration;
    for call in [Syscall::UpcallReturn, Syscall::KernelFunction, Syscall::ServiceReturn] {
        check.expect("return call outside a call", raw::refused_in_this_state(call), Some(Error::WrongState));
    }
    check.expect("upcall_serve(null)", raw::upcall_serve(0, UpcallRegistration::SIZE), Some(Error::BadAddress));
    check.expect("upcall_serve(short)", raw::upcall_serve(code_address, UpcallRegistration::SIZE - 1), Some(Error::BadLength));
    let Ok(stack) = AnonymousRegion::map(PAGE_SIZE) else {
        check.holds("map a page for the upcall checks", false);
        return;
    };
    let stack_top = stack.address() + stack.len();
    let manifest = "name = probe-user\nversion = 0.1.0\nentry = spindle_extension_binding_count\nevents = bench.Probe\ndomains = console\nbudget_us = 100\nmemory_bytes = 4096\n";
    let infos = [spindle_abi::native::BindingInfo::default(); 1];
    let good = UpcallRegistration {
        manifest: manifest.as_ptr() as u64,
        manifest_length: manifest.len() as u64,
        bindings: infos.as_ptr() as u64,
        binding_count: 1,
        entry: code_address as u64,
        stack_top: stack_top as u64,
    };
    let mut attempt = |what: &str, registration: UpcallRegistration, expected: Error| {
        let pointer = &raw const registration as usize;
        check.expect(what, raw::upcall_serve(pointer, UpcallRegistration::SIZE), Some(expected));
    };
    attempt("upcall_serve(manifest not mapped)", UpcallRegistration { manifest: UNMAPPED as u64, ..good }, Error::BadAddress);
    attempt("upcall_serve(manifest too long)", UpcallRegistration { manifest_length: 1 << 20, ..good }, Error::BadLength);
    attempt("upcall_serve(manifest not a manifest)", UpcallRegistration { manifest_length: 5, ..good }, Error::BadArgument);
    attempt("upcall_serve(no bindings)", UpcallRegistration { binding_count: 0, ..good }, Error::BadArgument);
    attempt("upcall_serve(too many bindings)", UpcallRegistration { binding_count: 17, ..good }, Error::BadArgument);
    attempt("upcall_serve(bindings in kernel memory)", UpcallRegistration { bindings: KERNEL_TEXT as u64, ..good }, Error::BadAddress);
    attempt("upcall_serve(entry unmapped)", UpcallRegistration { entry: UNMAPPED as u64, ..good }, Error::BadArgument);
    attempt("upcall_serve(stack misaligned)", UpcallRegistration { stack_top: stack_top as u64 - 8, ..good }, Error::BadArgument);
    attempt("upcall_serve(stack read-only)", UpcallRegistration { stack_top: code_address as u64 & !15, ..good }, Error::BadArgument);
    attempt("upcall_serve(not started as an extension)", good, Error::NotPermitted);
}

/// The echo service of a `ubench serve` child.
extern "C" fn never_called(_argument: usize) -> ! {
    arch::exit(99)
}

/// Cross-address-space calls: bad names, a call to a real service, a taken name.
fn service_calls(check: &mut Checker, code_address: usize) {
    use spindle_glue::upcall::glue;
    check.expect("service_call(\"\")", glue::service_call("", 0), Some(Error::BadLength));
    check.expect("service_call(no such service)", glue::service_call("badcalls-none", 0), Some(Error::NotFound));
    let long = [b'x'; MAX_NAME + 1];
    let long = core::str::from_utf8(&long).unwrap_or("");
    check.expect("service_call(name too long)", glue::service_call(long, 0), Some(Error::BadLength));
    let Ok(stack) = AnonymousRegion::map(PAGE_SIZE) else {
        check.holds("map a page for the service checks", false);
        return;
    };
    let stack_top = stack.address() + stack.len();
    check.expect("service_register(\"\")", Err::<(), _>(glue::service_register("", never_called, stack_top)), Some(Error::BadLength));
    check.expect("service_register(stack misaligned)", Err::<(), _>(glue::service_register("badcalls-x", never_called, stack_top - 8)), Some(Error::BadArgument));
    check.expect("service_register(stack read-only)", Err::<(), _>(glue::service_register("badcalls-x", never_called, code_address & !15)), Some(Error::BadArgument));
    // A real service in a child: call it, then try to take its name.
    let Some(server) = check.expect("spawn(ubench serve)", arch::spawn("ubench serve badcalls-echo"), None) else { return };
    let mut answer = glue::service_call("badcalls-echo", 41);
    for _ in 0..1000 {
        if answer != Err(Error::NotFound) {
            break;
        }
        arch::yield_now();
        answer = glue::service_call("badcalls-echo", 41);
    }
    check.holds("service_call(badcalls-echo, 41) answers 42", answer == Ok(42));
    check.expect("service_register(taken name)", Err::<(), _>(glue::service_register("badcalls-echo", never_called, stack_top)), Some(Error::Refused));
    check.expect("kill(server)", arch::kill(server), None);
    check.holds("the server ends when killed", arch::wait(server) == Ok(ExitStatus::Killed(KillCause::Request)));
    check.expect("service_call(after its server was killed)", glue::service_call("badcalls-echo", 0), Some(Error::NotFound));
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

fn read_calls(check: &mut Checker, stack_address: usize, code_address: usize) {
    // Only calls the kernel must refuse: a successful read would take the shell's input.
    for handle in [0, 2, 7, usize::MAX] {
        check.expect("read from a handle that does not exist", raw::read_into(handle, 0, 0), Some(Error::BadHandle));
    }
    check.expect("read(length 0)", arch::read(CONSOLE, &mut []), Some(Error::BadLength));
    let mut too_long = [0u8; MAX_READ_LENGTH + 1];
    check.expect("read(above the limit)", arch::read(CONSOLE, &mut too_long), Some(Error::BadLength));
    check.expect("read(wrapping)", raw::read_into(CONSOLE, usize::MAX - 2, 8), Some(Error::BadLength));
    check.expect("read(null)", raw::read_into(CONSOLE, 0, 4), Some(Error::BadAddress));
    check.expect("read(kernel text)", raw::read_into(CONSOLE, KERNEL_TEXT, 4), Some(Error::BadAddress));
    check.expect("read(unmapped)", raw::read_into(CONSOLE, UNMAPPED, 4), Some(Error::BadAddress));
    check.expect("read(program text)", raw::read_into(CONSOLE, code_address, 4), Some(Error::BadAddress));
    let read_only = "read-only data".as_ptr() as usize;
    check.expect("read(read-only data)", raw::read_into(CONSOLE, read_only, 4), Some(Error::BadAddress));
    // The last bytes of the stack and the unmapped page above it.
    check.expect("read(stack past its top)", raw::read_into(CONSOLE, STACK_TOP - 8, 16), Some(Error::BadAddress));
    check.holds("the stack holds the buffer", stack_address < STACK_TOP);
}

fn privileged_calls_refused(check: &mut Checker) {
    check.expect("ext_load without the capability", arch::ext_load("hello", Technology::Default), Some(Error::NotPermitted));
    check.expect("ext_load(null) without the capability", arch::ext_load_from_address(0, 5, 0), Some(Error::NotPermitted));
    check.expect("ext_unload without the capability", arch::ext_unload("hello"), Some(Error::NotPermitted));
    let mut buffer = [0u8; 64];
    check.expect("ext_list without the capability", arch::ext_list(&mut buffer), Some(Error::NotPermitted));
    check.expect("kernel_command without the capability", arch::kernel_command("mem"), Some(Error::NotPermitted));
    check.expect("kernel_command(\"\") without the capability", arch::kernel_command(""), Some(Error::NotPermitted));
    check.expect("spawn passing the extension loader it lacks", arch::spawn_with_flags("hello", SPAWN_EXTENSION_LOADER), Some(Error::NotPermitted));
    check.expect("spawn passing the console it lacks", arch::spawn_with_flags("hello", SPAWN_CONSOLE), Some(Error::NotPermitted));
    check.expect("spawn(unknown flag)", arch::spawn_with_flags("hello", 4), Some(Error::BadArgument));
    check.expect("spawn(every flag bit)", arch::spawn_with_flags("hello", usize::MAX), Some(Error::BadArgument));
    check.expect("spawn(\"\", unknown flag): the text is checked first", arch::spawn_with_flags("", 4), Some(Error::BadLength));
    check.expect("spawn(no such program, no flags)", arch::spawn_with_flags("no-such-program", 0), Some(Error::NoSuchProgram));
}

fn listing_calls(check: &mut Checker, pid: usize, code_address: usize) {
    let mut buffer = [0u8; 4096];
    if let Some(total) = check.expect("events(buffer)", arch::events(&mut buffer), None) {
        let text = core::str::from_utf8(&buffer[..total.min(buffer.len())]).unwrap_or("");
        check.holds("events lists clock.Tick", text.contains("clock.Tick"));
        let mut short = [0u8; 3];
        check.holds("events(short buffer) returns the full length", arch::events(&mut short) == Ok(total));
        check.holds("events(null, 0) returns the full length", raw::listing_into(Syscall::Events, 0, 0) == Ok(total));
    }
    if let Some(total) = check.expect("processes(buffer)", arch::processes(&mut buffer), None) {
        let text = core::str::from_utf8(&buffer[..total.min(buffer.len())]).unwrap_or("");
        let mut own = text.lines().filter(|line| line.split('\t').next() == Some(itoa(pid, &mut [0; 20])));
        let line = own.next().unwrap_or("");
        check.holds("processes lists this process with six fields", line.split('\t').count() == 6 && line.ends_with("badcalls"));
    }
    check.holds("last_error is empty before any refusal", arch::last_error(&mut buffer) == Ok(0));
    check.holds("last_error(unmapped, 16) copies nothing when it is empty", raw::listing_into(Syscall::LastError, UNMAPPED, 16) == Ok(0));
    check.expect("last_error(null, 16): outside user space", raw::listing_into(Syscall::LastError, 0, 16), Some(Error::BadAddress));
    let read_only = "read-only data".as_ptr() as usize;
    if let Some(total) = check.expect("ext_stats(buffer)", arch::ext_stats(&mut buffer), None) {
        let text = core::str::from_utf8(&buffer[..total.min(buffer.len())]).unwrap_or("");
        check.holds("ext_stats is a JSON document naming the clock", text.starts_with("{\"clock\":") && text.ends_with("]}"));
        let mut short = [0u8; 3];
        check.holds("ext_stats(short buffer) returns the full length", arch::ext_stats(&mut short) == Ok(total));
    }
    // `hw_counters`: each call is a trap of its own, so the trap count grows; an empty
    // buffer gets the full length back.
    let (first, second) = (arch::hw_counters(), arch::hw_counters());
    check.holds("hw_counters counts its own trap", matches!((first, second), (Ok(first), Ok(second)) if second.traps > first.traps));
    check.holds("hw_counters(null, 0) returns the full length", raw::listing_into(Syscall::HwCounters, 0, 0) == Ok(HwCounters::SIZE));
    for call in [Syscall::Events, Syscall::Processes, Syscall::ExtStats, Syscall::HwCounters] {
        check.expect("listing(null)", raw::listing_into(call, 0, 16), Some(Error::BadAddress));
        check.expect("listing(kernel)", raw::listing_into(call, KERNEL_TEXT, 16), Some(Error::BadAddress));
        check.expect("listing(unmapped)", raw::listing_into(call, UNMAPPED, 16), Some(Error::BadAddress));
        check.expect("listing(read-only data)", raw::listing_into(call, read_only, 4), Some(Error::BadAddress));
        check.expect("listing(program text)", raw::listing_into(call, code_address, 4), Some(Error::BadAddress));
        check.expect("listing(wrapping)", raw::listing_into(call, usize::MAX - 2, 8), Some(Error::BadLength));
    }
    check.expect("last_error(wrapping)", raw::listing_into(Syscall::LastError, usize::MAX - 2, 8), Some(Error::BadLength));
    disk_state(check, read_only, code_address);
}

/// `disk_state`: a header the whole copy's length agrees with, copy semantics as the
/// listings, and bad buffers refused; without a disk, `NoDevice` whatever the buffer.
fn disk_state(check: &mut Checker, read_only: usize, code_address: usize) {
    let mut buffer = [0u8; 1024];
    let outcome = arch::disk_state(&mut buffer);
    if outcome == Err(Error::NoDevice) {
        check.expect("disk_state(unmapped) without a disk", raw::listing_into(Syscall::DiskState, UNMAPPED, 16), Some(Error::NoDevice));
        return;
    }
    if let Some(total) = check.expect("disk_state(buffer)", outcome, None) {
        let header = DiskState::from_bytes(&buffer[..total.min(buffer.len())]);
        check.holds("disk_state starts with a header whose length agrees", header.is_some_and(|state| state.total_bytes() == total as u64));
        let mut short = [0u8; 3];
        check.holds("disk_state(short buffer) returns at least the header's length", arch::disk_state(&mut short).is_ok_and(|length| length >= DiskState::SIZE));
        check.holds("disk_state(null, 0) returns at least the header's length", raw::listing_into(Syscall::DiskState, 0, 0).is_ok_and(|length| length >= DiskState::SIZE));
    }
    check.expect("disk_state(null)", raw::listing_into(Syscall::DiskState, 0, 16), Some(Error::BadAddress));
    check.expect("disk_state(kernel)", raw::listing_into(Syscall::DiskState, KERNEL_TEXT, 16), Some(Error::BadAddress));
    check.expect("disk_state(kernel stacks)", raw::listing_into(Syscall::DiskState, KERNEL_STACKS, 16), Some(Error::BadAddress));
    check.expect("disk_state(unmapped)", raw::listing_into(Syscall::DiskState, UNMAPPED, 16), Some(Error::BadAddress));
    check.expect("disk_state(read-only data)", raw::listing_into(Syscall::DiskState, read_only, 4), Some(Error::BadAddress));
    check.expect("disk_state(program text)", raw::listing_into(Syscall::DiskState, code_address, 4), Some(Error::BadAddress));
    check.expect("disk_state(wrapping)", raw::listing_into(Syscall::DiskState, usize::MAX - 2, 8), Some(Error::BadLength));
}

/// `number` in decimal, in `buffer`.
fn itoa(mut number: usize, buffer: &mut [u8; 20]) -> &str {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (number % 10) as u8;
        number /= 10;
        if number == 0 {
            break;
        }
    }
    core::str::from_utf8(&buffer[start..]).unwrap_or("")
}

fn protect_calls(check: &mut Checker, code_address: usize, stack_address: usize) {
    let Some(mut region) = check.expect("map_anonymous(two pages)", AnonymousRegion::map(2 * PAGE_SIZE), None) else { return };
    let (address, length) = (region.address(), region.len());
    region.as_mut_slice().fill(b' ');
    check.expect("protect(misaligned)", raw::protect(address + 1, length, ACCESS_READ), Some(Error::BadAddress));
    check.expect("protect(inside the region)", raw::protect(address + PAGE_SIZE, PAGE_SIZE, ACCESS_READ), Some(Error::BadAddress));
    check.expect("protect(unmapped)", raw::protect(UNMAPPED, PAGE_SIZE, ACCESS_READ), Some(Error::BadAddress));
    check.expect("protect(kernel)", raw::protect(KERNEL_TEXT, PAGE_SIZE, ACCESS_READ), Some(Error::BadAddress));
    check.expect("protect(program text)", raw::protect(code_address & !(PAGE_SIZE - 1), PAGE_SIZE, ACCESS_READ), Some(Error::NotPermitted));
    check.expect("protect(stack)", raw::protect(stack_address & !(PAGE_SIZE - 1), PAGE_SIZE, ACCESS_READ), Some(Error::NotPermitted));
    check.expect("protect(length 0)", raw::protect(address, 0, ACCESS_READ), Some(Error::BadLength));
    check.expect("protect(part of the region)", raw::protect(address, PAGE_SIZE, ACCESS_READ), Some(Error::BadLength));
    check.expect("protect(unknown access bits)", raw::protect(address, length, 4), Some(Error::BadArgument));
    check.expect("protect(every access bit)", raw::protect(address, length, usize::MAX), Some(Error::BadArgument));
    // Read-only: the kernel may read it (write), not write it (arguments).
    check.expect("protect(read)", region.protect(ACCESS_READ), None);
    check.expect("write(read-only region)", arch::write_from_address(CONSOLE, address, 1), None);
    check.expect("arguments(read-only region)", raw::arguments_into(address, 4), Some(Error::BadAddress));
    check.holds("a read-only region keeps its bytes", region.as_slice().iter().all(|&byte| byte == b' '));
    // No access: neither.
    check.expect("protect(none)", region.protect(0), None);
    check.expect("write(inaccessible region)", arch::write_from_address(CONSOLE, address, 1), Some(Error::BadAddress));
    check.expect("arguments(inaccessible region)", raw::arguments_into(address, 4), Some(Error::BadAddress));
    // Read-write again (write implies read): the same frames, the same bytes.
    check.expect("protect(write)", region.protect(ACCESS_WRITE), None);
    check.holds("access write reads as read-write", region.access() == ACCESS_READ | ACCESS_WRITE);
    check.holds("the bytes survive protect(none) and back", region.as_mut_slice().iter().all(|&byte| byte == b' '));
    check.expect("arguments(writable again)", raw::arguments_into(address, 4), None);
    // An inaccessible region can still be unmapped.
    check.expect("protect(none), again", region.protect(0), None);
    core::mem::forget(region);
    check.expect("unmap(inaccessible region)", raw::unmap(address, length), None);
    check.expect("protect(unmapped region)", raw::protect(address, length, ACCESS_READ), Some(Error::BadAddress));
}

/// The checks of a process holding the extension-loading capability (`loader`).
fn loader_calls(check: &mut Checker) {
    check.expect("ext_load(\"\")", arch::ext_load("", Technology::Default), Some(Error::BadLength));
    static LONG: [u8; MAX_NAME + 1] = [b'a'; MAX_NAME + 1];
    check.expect("ext_load(too long)", arch::ext_load_from_address(LONG.as_ptr() as usize, LONG.len(), 0), Some(Error::BadLength));
    check.expect("ext_load(wrapping)", arch::ext_load_from_address(usize::MAX - 2, 8, 0), Some(Error::BadLength));
    check.expect("ext_load(null)", arch::ext_load_from_address(0, 5, 0), Some(Error::BadAddress));
    check.expect("ext_load(kernel)", arch::ext_load_from_address(KERNEL_TEXT, 5, 0), Some(Error::BadAddress));
    static NOT_UTF8: [u8; 4] = [b'h', 0xff, 0xfe, b'i'];
    check.expect("ext_load(not UTF-8)", arch::ext_load_from_address(NOT_UTF8.as_ptr() as usize, NOT_UTF8.len(), 0), Some(Error::BadArgument));
    let name = "hello";
    check.expect("ext_load(unknown technology)", arch::ext_load_from_address(name.as_ptr() as usize, name.len(), 4), Some(Error::BadArgument));
    check.expect("ext_load(no such extension)", arch::ext_load("no-such-extension", Technology::Default), Some(Error::NotFound));
    check.expect("ext_load(no such Wasm build)", arch::ext_load("no-such-extension", Technology::Wasm), Some(Error::NotFound));
    check.expect("ext_load(no user-level build)", arch::ext_load("no-such-extension", Technology::User), Some(Error::NotFound));
    // The user-level build of `hello` is a process the kernel starts; it serves until unloaded.
    check.expect("ext_load(hello, user-level)", arch::ext_load("hello", Technology::User), None);
    check.expect("ext_unload(hello, user-level)", arch::ext_unload("hello"), None);
    check.expect("ext_unload(\"\")", arch::ext_unload(""), Some(Error::BadLength));
    check.expect("ext_unload(null)", arch::ext_unload_from_address(0, 5), Some(Error::BadAddress));
    check.expect("ext_unload(not UTF-8)", arch::ext_unload_from_address(NOT_UTF8.as_ptr() as usize, NOT_UTF8.len()), Some(Error::BadArgument));
    check.expect("ext_unload(not loaded)", arch::ext_unload("hello"), Some(Error::NotFound));
    check.expect("kernel_command without the console capability", arch::kernel_command("mem"), Some(Error::NotPermitted));

    check.expect("ext_load(hello, built-in)", arch::ext_load("hello", Technology::BuiltIn), None);
    let mut buffer = [0u8; 1024];
    let listed = arch::ext_list(&mut buffer).map(|total| core::str::from_utf8(&buffer[..total.min(1024)]).unwrap_or("").contains("hello\tbuilt-in\t"));
    check.holds("ext_list shows hello as built-in", listed == Ok(true));
    check.expect("ext_list(null) with a listing to copy", raw::listing_into(Syscall::ExtList, 0, 16), Some(Error::BadAddress));
    check.expect("ext_list(wrapping)", raw::listing_into(Syscall::ExtList, usize::MAX - 2, 8), Some(Error::BadLength));
    check.expect("ext_load(hello) while loaded", arch::ext_load("hello", Technology::Default), Some(Error::Refused));
    let reason = arch::last_error(&mut buffer).map(|total| core::str::from_utf8(&buffer[..total.min(1024)]).unwrap_or("").contains("already loaded"));
    check.holds("last_error explains the refusal", reason == Ok(true));
    check.expect("last_error(null) with a message to copy", raw::listing_into(Syscall::LastError, 0, 16), Some(Error::BadAddress));
    check.expect("ext_unload(hello)", arch::ext_unload("hello"), None);
    check.expect("ext_unload(hello) again", arch::ext_unload("hello"), Some(Error::NotFound));

    check.expect("spawn passing the console it lacks", arch::spawn_with_flags("hello", SPAWN_CONSOLE), Some(Error::NotPermitted));
    if let Some(child) = check.expect("spawn(badcalls load-hello) with the loader", arch::spawn_with_flags("badcalls load-hello", SPAWN_EXTENSION_LOADER), None) {
        let status = check.expect("wait(load-hello child)", arch::wait(child), None);
        check.holds("the privileged child loaded and unloaded hello", status == Some(ExitStatus::Exited(0)));
    }
}

/// A child given the extension loader: loads and unloads the native `hello`.
fn load_hello(check: &mut Checker) {
    check.expect("ext_load(hello)", arch::ext_load("hello", Technology::Default), None);
    let mut buffer = [0u8; 1024];
    let listed = arch::ext_list(&mut buffer).map(|total| core::str::from_utf8(&buffer[..total.min(1024)]).unwrap_or("").contains("hello\tnative\t"));
    check.holds("ext_list shows hello as native", listed == Ok(true));
    check.expect("ext_unload(hello)", arch::ext_unload("hello"), None);
}

/// The checks of a process holding the console capability (`console`).
fn console_calls(check: &mut Checker) {
    check.expect("kernel_command(\"\")", arch::kernel_command(""), Some(Error::BadLength));
    static LONG: [u8; MAX_COMMAND_LINE + 1] = [b'a'; MAX_COMMAND_LINE + 1];
    check.expect("kernel_command(too long)", arch::kernel_command_from_address(LONG.as_ptr() as usize, LONG.len()), Some(Error::BadLength));
    check.expect("kernel_command(null)", arch::kernel_command_from_address(0, 4), Some(Error::BadAddress));
    check.expect("kernel_command(kernel)", arch::kernel_command_from_address(KERNEL_TEXT, 4), Some(Error::BadAddress));
    static NOT_UTF8: [u8; 4] = [b'e', 0xff, 0xfe, b'o'];
    check.expect("kernel_command(not UTF-8)", arch::kernel_command_from_address(NOT_UTF8.as_ptr() as usize, NOT_UTF8.len()), Some(Error::BadArgument));
    check.expect("kernel_command(echo)", arch::kernel_command("echo badcalls: through the kernel console"), None);
    check.expect("kernel_command(unknown)", arch::kernel_command("no-such-command"), Some(Error::Refused));
    let mut buffer = [0u8; 256];
    let reason = arch::last_error(&mut buffer).map(|total| core::str::from_utf8(&buffer[..total.min(256)]).unwrap_or("").contains("unknown command"));
    check.holds("last_error names the unknown command", reason == Ok(true));
    check.expect("ext_load without the extension loader", arch::ext_load("hello", Technology::Default), Some(Error::NotPermitted));
}
