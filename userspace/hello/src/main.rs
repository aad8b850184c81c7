//! `hello [STATUS]`: greets from user space (pid, arguments, the number of events in the
//! kernel's dispatcher, the counters it may read) and exits with STATUS (default 0).

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use spindle_runtime::{Arguments, arch, println};

spindle_runtime::entry!(main);

fn main(arguments: &Arguments) -> i32 {
    println!(
        "hello from user space: pid {}, command line {:?}, {} event(s) in the kernel dispatcher",
        arch::getpid(),
        arguments.line(),
        arch::event_count()
    );
    // Counters are readable from U-mode (the kernel sets scounteren); without that these
    // reads trap and the kernel kills the process.
    println!("hello: time {} ticks, {} instructions retired", arch::time(), arch::instructions_retired());
    arguments.get(0).and_then(|word| word.parse().ok()).unwrap_or(0)
}
