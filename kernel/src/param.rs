//! Kernel tunables, each with the reason for its value.

/// Timer interrupts per second: 100 Hz (10 ms) gives responsive consoles and budgets
/// without measurable overhead under QEMU.
pub const TICKS_PER_SECOND: u64 = 100;
/// Size of the kernel heap carved out of RAM at boot. 32 MiB holds the dispatcher,
/// extension images and `wasmi` engines comfortably in the default 256 MiB machine.
pub const KERNEL_HEAP_SIZE: usize = 32 * 1024 * 1024;
/// In test mode, a test running longer than this (in seconds of guest time) is failed
/// by the kernel's watchdog as hung; the host's timeout catches hangs with interrupts off.
pub const TEST_WATCHDOG_SECONDS: u64 = 20;
/// Longest console line accepted (longer input is rejected with a message).
pub const CONSOLE_LINE_MAX: usize = 512;
/// Most console command lines accepted from the boot arguments.
pub const SCRIPT_LINES_MAX: usize = 64;
/// Size of each strand's kernel stack. `wasmi` runs in release builds with 256 KiB.
pub const STRAND_STACK_SIZE: usize = 256 * 1024;
/// Timer ticks a strand runs before the scheduler preempts it for an equal-priority one.
pub const TIME_SLICE_TICKS: u64 = 2;
/// Where the file system lives on the disk: from byte 1 GiB on (to the disk's end, or the
/// superblock's size). Below it: the block path's 1 GiB logical disk and the benchmarks'
/// extents. `cargo xtask fs mkfs` and the disk images xtask builds use the same offset.
pub const FS_REGION_START: u64 = 1 << 30;
/// Bytes of swap at the end of the disk (the translation service pages out to it; the file
/// system's region ends before it). 16 MiB = 4,096 pages: the disk model's 1.3 GiB leave
/// room for it after the 256 MiB file system xtask puts at 1 GiB.
pub const SWAP_BYTES: u64 = 16 << 20;
/// Free frames below which memory is under pressure: a process taking a frame for a page
/// first pages out one of its own (self-paging; `mem low-water N` changes it). 1,024 frames
/// (4 MiB) of the default machine's ≈ 53,000 free: reached only when memory really runs out.
pub const LOW_WATER_FRAMES: u64 = 1024;
