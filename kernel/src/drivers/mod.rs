//! Device drivers: the interrupt controller, and the glue between the `virtio-drivers`
//! crate and the kernel.
//!
//! [`plic`] routes device interrupts to the handlers drivers register (the trap vector
//! calls it for supervisor external interrupts). [`virtio`] finds virtio-mmio devices in
//! the device tree, hands each to at most one driver, and implements the crate's `Hal`
//! with the kernel's frame allocator. [`virtio_console`] drives a virtio console port as
//! a byte channel to the host (used by [`crate::hotload`]); [`virtio_blk`] drives the disk,
//! with requests completed by interrupt (see `docs/storage.md`).
//!
//! [`init`] sets up the PLIC and the disk at boot and prints one line for each.
//!
//! Limitations: the virtio console is polled.

#[allow(unsafe_code)]
pub mod plic;
#[allow(unsafe_code)]
pub mod virtio;
#[allow(unsafe_code)]
pub mod virtio_blk;
pub mod virtio_console;

/// Sets up the PLIC (external interrupts on this hart) and the disk, printing
/// `[boot] plic …` and `[boot] disk virtio-blk: N sectors (X MiB)` or `[boot] disk: none
/// (…)`. Neither is required: without a PLIC there is no disk, and without a disk the
/// kernel runs on. Called once, after paging, the heap and the scheduler are up.
pub fn init() {
    match plic::init() {
        Ok(info) => crate::println!("[boot] plic at {:#x}: {} sources, hart context {}", info.base, info.sources, info.context),
        Err(error) => crate::println!("[boot] plic: off ({error}); no device interrupts"),
    }
    match virtio_blk::init() {
        Ok(disk) => crate::println!(
            "[boot] disk virtio-blk: {} sectors ({} MiB){} at {:#x}, irq {}",
            disk.sectors,
            (disk.sectors * virtio_blk::SECTOR_SIZE as u64) >> 20,
            if disk.read_only { ", read-only" } else { "" },
            disk.slot.base,
            disk.interrupt
        ),
        Err(error) => crate::println!("[boot] disk: none ({error})"),
    }
}
