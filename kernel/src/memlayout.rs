//! The QEMU `virt` machine's physical memory map, as fallbacks and sanity limits.
//!
//! Spindle reads device addresses from the device tree; these constants are used only
//! before the device tree is parsed (early console) or when it lacks a node.

/// Where OpenSBI loads the kernel (and where `kernel.ld` links it).
pub const KERNEL_BASE: usize = 0x8020_0000;
/// Start of RAM on `virt` (OpenSBI occupies the first 2 MiB).
pub const RAM_BASE: usize = 0x8000_0000;
/// The NS16550A UART used as console before the device tree is read.
pub const DEFAULT_UART_BASE: usize = 0x1000_0000;
/// The `sifive_test` finisher device (pass/fail exit for QEMU).
pub const DEFAULT_TEST_DEVICE_BASE: usize = 0x10_0000;
/// Size of the MMIO window mapped for small devices.
pub const SMALL_DEVICE_WINDOW: usize = 0x1000;
