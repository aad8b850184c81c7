//! `ubench`: user-space microbenchmarks (SPIN's protected-communication table) and the
//! service they call.
//!
//! - `ubench` measures, from user space, instructions per operation (`rdinstret`, an
//!   empty loop subtracted) of a procedure call, a null system call (`getpid`) and a
//!   cross-address-space call (`service_call` to the echo service of a child it starts),
//!   checking every answer, and prints them as `bench row user-space NAME ITERATIONS
//!   MILLI-INSTRUCTIONS` lines for `cargo xtask bench`. Exits 0, or 1 if an answer was
//!   wrong or the child could not be reached. U-mode runs with interrupts on, so a timer
//!   tick that lands in a measured loop is counted (deterministic under `-icount`; at
//!   most one tick, ≈ 0.2 instructions per operation, in these loops).
//! - `ubench serve NAME [echo|loop|fault|panic|exit]` offers service NAME whose entry answers
//!   `argument + 1` (echo), loops forever, overflows its stack, panics, or exits — the last four
//!   for the kernel's containment tests. It returns only when the service is withdrawn.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::hint::black_box;

use spindle_glue::upcall::glue;
use spindle_runtime::arch::{self, AnonymousRegion, Error};
use spindle_runtime::{Arguments, println};

spindle_runtime::entry!(main);

/// Operations per measured row.
const ITERATIONS: u64 = 10_000;
/// The service the measurement calls.
const ECHO_SERVICE: &str = "ubench-echo";
/// Bytes of the stack service calls run on.
const SERVICE_STACK_BYTES: usize = 16 * 1024;

fn main(arguments: &Arguments) -> i32 {
    match (arguments.get(0), arguments.get(1)) {
        (Some("serve"), Some(name)) => serve(name, arguments.get(2).unwrap_or("echo")),
        (None, _) => measure_all(),
        _ => {
            println!("usage: ubench | ubench serve NAME [echo|loop|fault|panic|exit]");
            2
        }
    }
}

/// Instructions retired by `body` over `iterations` runs.
fn count(iterations: u64, body: &mut dyn FnMut(u64)) -> u64 {
    let start = arch::instructions_retired();
    for index in 0..iterations {
        body(index);
    }
    arch::instructions_retired() - start
}

/// Milli-instructions per operation of `body`, the same loop with an empty body subtracted.
fn per_operation(body: &mut dyn FnMut(u64)) -> u64 {
    let empty = count(ITERATIONS, &mut |index| {
        black_box(index);
    });
    let full = count(ITERATIONS, body);
    full.saturating_sub(empty) * 1000 / ITERATIONS
}

fn row(name: &str, milli: u64) {
    println!("bench row user-space {name} {ITERATIONS} {milli}");
}

#[inline(never)]
fn add_one(value: u64) -> u64 {
    value.wrapping_add(1)
}

fn measure_all() -> i32 {
    let function: fn(u64) -> u64 = black_box(add_one);
    row("procedure-call", per_operation(&mut |index| {
        black_box(function(index));
    }));
    row("null-syscall", per_operation(&mut |_| {
        black_box(arch::getpid());
    }));
    let Ok(server) = arch::spawn("ubench serve ubench-echo") else {
        println!("ubench: cannot start the echo server");
        return 1;
    };
    // Wait until the server has registered (it runs when this process yields).
    let mut attempts = 0;
    while glue::service_call(ECHO_SERVICE, 0) == Err(Error::NotFound) && attempts < 10_000 {
        arch::yield_now();
        attempts += 1;
    }
    let mut wrong = 0u64;
    let milli = per_operation(&mut |index| {
        let argument = index as usize;
        if glue::service_call(ECHO_SERVICE, argument) != Ok(argument + 1) {
            wrong += 1;
        }
    });
    let _ = arch::kill(server);
    let _ = arch::wait(server);
    if wrong > 0 {
        println!("ubench: FAILED cross-address-space-call: {wrong} of {ITERATIONS} answers wrong; row withheld");
        return 1;
    }
    row("cross-address-space-call", milli);
    0
}

/// The echo service's entry: answers `argument + 1`.
extern "C" fn echo(argument: usize) -> ! {
    glue::service_return(argument.wrapping_add(1))
}

/// A service entry that never returns (the kernel's deadline must end it).
extern "C" fn endless(argument: usize) -> ! {
    let mut value = argument;
    loop {
        value = black_box(value.wrapping_add(1));
    }
}

/// A service entry that faults: unbounded recursion runs off the bottom of its stack
/// into unmapped memory (a store page fault in U-mode).
extern "C" fn faulting(argument: usize) -> ! {
    glue::service_return(recurse(argument))
}

#[allow(unconditional_recursion, reason = "the point: run off the end of the stack")]
fn recurse(depth: usize) -> usize {
    let frame = black_box([depth; 64]);
    recurse(frame[depth % 64].wrapping_add(1)).wrapping_add(frame[0])
}

/// A service entry that panics (an out-of-bounds index): the runtime's panic handler
/// exits, which the kernel treats as a failed call.
extern "C" fn panicking(argument: usize) -> ! {
    let table = black_box([1usize, 2, 3]);
    glue::service_return(table[argument.wrapping_add(3)])
}

/// A service entry that exits the process from inside the call.
extern "C" fn exiting(_argument: usize) -> ! {
    arch::exit(7)
}

fn serve(name: &str, mode: &str) -> i32 {
    let entry: extern "C" fn(usize) -> ! = match mode {
        "echo" => echo,
        "loop" => endless,
        "fault" => faulting,
        "panic" => panicking,
        "exit" => exiting,
        _ => {
            println!("ubench serve: unknown mode {mode}");
            return 2;
        }
    };
    let Ok(stack) = AnonymousRegion::map(SERVICE_STACK_BYTES) else {
        println!("ubench serve: cannot map a stack");
        return 1;
    };
    let error = glue::service_register(name, entry, stack.address() + stack.len());
    println!("ubench serve {name}: service ended: {error}");
    1
}
