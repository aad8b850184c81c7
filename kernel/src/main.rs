//! Spindle: a SPIN-style extensible kernel for 64-bit RISC-V (QEMU `virt`, OpenSBI, Sv39).
//!
//! Boot order: `arch` entry code (stack, BSS, trap vector) → [`kernel_main`]: per-hart
//! state, FPU, device tree, console, memory (heap, frames, W^X paging), timer tick,
//! interrupt controller and disk, dispatcher, boot bundle, user mode (`proc`), then the
//! mode chosen by the boot arguments: the user shell `spsh` (interactive, or fed a script
//! of console lines), the kernel console (`spindle.shell=kernel`), or the in-kernel tests.
//! See `docs/` and DESIGN.md for the architecture.

#![no_std]
#![no_main]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

extern crate alloc;

pub mod arch;
#[cfg(feature = "bench")]
pub mod bench;
pub mod bootargs;
#[allow(unsafe_code)]
pub mod console;
#[allow(unsafe_code)]
pub mod devicetree;
pub mod drivers;
#[allow(unsafe_code)]
pub mod events;
pub mod ext;
pub mod fault;
pub mod hotload;
#[cfg(feature = "tests")]
pub mod ktest;
pub mod memlayout;
#[allow(unsafe_code)]
pub mod mm;
#[allow(unsafe_code)]
pub mod mmio;
pub mod param;
#[allow(unsafe_code)]
pub mod power;
pub mod proc;
#[allow(unsafe_code)]
pub mod sched;
pub mod services;
pub mod shell;
pub mod syscall;
pub mod time;

use power::{ExitStatus, exit};

/// The first Rust code, entered from `_start` on the boot hart's stack.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn kernel_main(hart_id: usize, device_tree_address: usize) -> ! {
    arch::hart::init_current(hart_id, arch::boot::boot_stack_bottom(hart_id));
    arch::csr::enable_fpu();
    if let Err(error) = arch::boot::check_layout() {
        println!("[boot] {error}");
        exit(ExitStatus::FatalFault);
    }
    if let Err(error) = devicetree::init(device_tree_address) {
        println!("[boot] {error}");
        exit(ExitStatus::FatalFault);
    }
    console::init(devicetree::uart_base());
    power::init(devicetree::test_device_base());
    println!();
    println!("Spindle {} — an extensible kernel (SPIN-style) for RISC-V", env!("CARGO_PKG_VERSION"));
    println!("[boot] hart {hart_id}, {} hart(s), model \"{}\"", devicetree::hart_count(), devicetree::model());
    for (start, size) in devicetree::memory_regions() {
        println!("[boot] memory {:#x}..{:#x} ({} MiB)", start, start + size, size >> 20);
    }
    for device in devicetree::devices().filter(|device| device.compatible != "virtio,mmio") {
        println!("[boot] device {} ({}) at {:#x}", device.name, device.compatible, device.base);
    }
    let virtio_slots = devicetree::devices().filter(|device| device.compatible == "virtio,mmio").count();
    println!("[boot] {virtio_slots} virtio-mmio slots");
    if let Err(error) = mm::init() {
        println!("[boot] memory: {error}");
        exit(ExitStatus::FatalFault);
    }
    let frames = mm::frame::stats();
    println!("[boot] paging on (Sv39, W^X); {} free frames, {} MiB heap", frames.total - frames.allocated,
        mm::heap::stats().total_bytes >> 20);
    time::init(devicetree::timebase_frequency().unwrap_or(0));
    if let Err(error) = sched::init() {
        println!("[boot] scheduler: {error}");
        exit(ExitStatus::FatalFault);
    }
    arch::csr::enable_interrupts();
    println!("[boot] timer at {} Hz (timebase {} Hz, {}); clock {}: {}", param::TICKS_PER_SECOND, time::timebase_hz(),
        if time::uses_sstc() { "stimecmp" } else { "SBI set_timer" }, time::clock_mode().name(), time::clock_mode().budget_meaning());
    drivers::init();
    events::init(sched::async_workers::executor());
    // The clock's and the scheduler's events, raised by services above the dispatcher.
    time::clock::init();
    sched::events::init();
    // Built-in extensions call the kernel functions directly (installed before any runs).
    ext::glue::install_builtin();
    services::init();
    #[cfg(feature = "bench")]
    bench::add_console_commands();
    ext::bundle::init();
    proc::init();
    println!("[boot] dispatcher up: {} events", events::dispatcher().snapshot().len());
    ext::bundle::load_boot_list();
    hotload::init();

    let kernel_console = bootargs::kernel_console_requested(devicetree::bootargs());
    match bootargs::parse(devicetree::bootargs()) {
        #[cfg(feature = "tests")]
        bootargs::Mode::Test { from, only, watchdog_seconds } => ktest::run(from, only, watchdog_seconds),
        #[cfg(feature = "bench")]
        bootargs::Mode::Bench => bench::run(),
        #[cfg(not(feature = "tests"))]
        bootargs::Mode::Test { .. } => {
            println!("[boot] this kernel has no in-kernel tests: `cargo xtask test` builds the test image");
            exit(ExitStatus::Failure)
        }
        #[cfg(not(feature = "bench"))]
        bootargs::Mode::Bench => {
            println!("[boot] this kernel has no benchmarks: `cargo xtask bench` builds the bench image");
            exit(ExitStatus::Failure)
        }
        bootargs::Mode::Script(lines) if kernel_console => shell::run_script(lines),
        bootargs::Mode::Script(lines) => shell::run_script_in_user_shell(lines),
        bootargs::Mode::Interactive if kernel_console => shell::interactive(),
        bootargs::Mode::Interactive => shell::interactive_user_shell(),
    }
}
