//! The memory maps in one place: the QEMU `virt` machine's physical map (fallbacks and
//! sanity limits) and the kernel's virtual layout.
//!
//! Physical: Spindle reads device addresses from the device tree; these constants are
//! used only before the device tree is parsed (early console) or when it lacks a node.
//!
//! Virtual (the Sv39 lower half, `0 .. 0x40_0000_0000`, shared by every address space):
//!
//! | range | what |
//! |---|---|
//! | `0x8000_0000 ..` RAM end, device windows below it | identity-mapped RAM and devices |
//! | [`USER_REGION_START`] `..` [`USER_REGION_END`] | a user process's own mappings |
//! | [`STACK_REGION_BASE`] `+` [`STACK_REGION_SIZE`] | strand stacks, each after a guard page |
//! | [`EXTENSION_REGION_BASE`] `+` [`EXTENSION_REGION_SIZE`] | native extension slots (image, guard, arena, guard) |

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

pub use spindle_process::layout::{USER_REGION_END, USER_REGION_START};

/// Start of the virtual region holding strand stacks (above RAM and devices, never used by
/// user address spaces).
pub const STACK_REGION_BASE: usize = 0x30_0000_0000;
/// Bytes reserved for strand stacks.
pub const STACK_REGION_SIZE: usize = 0x1_0000_0000;
/// Start of the virtual region where native extension images and arenas are mapped.
pub const EXTENSION_REGION_BASE: usize = 0x31_0000_0000;
/// Bytes reserved for native extension slots.
pub const EXTENSION_REGION_SIZE: usize = 0x1_0000_0000;
/// End of the Sv39 lower half (the top of what one root-table half maps).
pub const SV39_LOWER_HALF_END: usize = 0x40_0000_0000;

// The regions do not overlap each other or RAM, and fit in the lower half.
const _: () = assert!(RAM_BASE < USER_REGION_START && USER_REGION_END <= STACK_REGION_BASE);
const _: () = assert!(STACK_REGION_BASE + STACK_REGION_SIZE <= EXTENSION_REGION_BASE);
const _: () = assert!(EXTENSION_REGION_BASE + EXTENSION_REGION_SIZE <= SV39_LOWER_HALF_END);
