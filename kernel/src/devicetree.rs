//! The flattened device tree handed over by the firmware: memory, harts, devices and
//! boot arguments.
//!
//! The blob stays where the firmware put it; its range is reserved from the frame
//! allocator so the parsed view can be kept for the life of the kernel.

use core::sync::atomic::{AtomicUsize, Ordering};

use fdt::Fdt;
use spin::Once;

use crate::memlayout::{DEFAULT_TEST_DEVICE_BASE, DEFAULT_UART_BASE};

static DEVICE_TREE: Once<Fdt<'static>> = Once::new();

/// Why the device tree could not be used.
#[derive(Debug)]
pub enum DeviceTreeError {
    /// The address given by the firmware is null or misaligned.
    BadAddress(usize),
    /// The blob failed to parse.
    Parse(fdt::FdtError),
}

impl core::fmt::Display for DeviceTreeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DeviceTreeError::BadAddress(address) => write!(f, "bad device-tree address {address:#x}"),
            DeviceTreeError::Parse(error) => write!(f, "device tree does not parse: {error:?}"),
        }
    }
}

/// Parses the device tree at `address` and keeps it for later queries.
pub fn init(address: usize) -> Result<&'static Fdt<'static>, DeviceTreeError> {
    if address == 0 || !address.is_multiple_of(8) {
        return Err(DeviceTreeError::BadAddress(address));
    }
    // The firmware passes the blob's physical address in a1.
    // SAFETY: the MMU is off (or identity-mapped) so the pointer is valid, and the range is
    // reserved before any frame is handed out, so the blob is never overwritten; `from_ptr`
    // validates the magic and reads the length from the header.
    let tree = unsafe { Fdt::from_ptr(address as *const u8) }.map_err(DeviceTreeError::Parse)?;
    BLOB_ADDRESS.store(address, Ordering::Relaxed);
    Ok(DEVICE_TREE.call_once(|| tree))
}

/// The parsed device tree. Panics if called before [`init`] (a kernel bug).
pub fn get() -> &'static Fdt<'static> {
    DEVICE_TREE.get().expect("device tree used before devicetree::init")
}

/// Physical address range `(start, end)` of the blob itself.
pub fn blob_range() -> (usize, usize) {
    let start = BLOB_ADDRESS.load(Ordering::Relaxed);
    (start, start + get().total_size())
}

static BLOB_ADDRESS: AtomicUsize = AtomicUsize::new(0);

fn first_reg_of(compatible: &[&str]) -> Option<(usize, usize)> {
    let node = get().find_compatible(compatible)?;
    let region = node.reg()?.next()?;
    Some((region.starting_address as usize, region.size.unwrap_or(0)))
}

/// Base of the console UART (`ns16550a`), or the `virt` default.
pub fn uart_base() -> usize {
    first_reg_of(&["ns16550a", "ns16550"]).map_or(DEFAULT_UART_BASE, |(base, _)| base)
}

/// Base of the `sifive_test` finisher device, or the `virt` default.
pub fn test_device_base() -> usize {
    first_reg_of(&["sifive,test1", "sifive,test0"]).map_or(DEFAULT_TEST_DEVICE_BASE, |(base, _)| base)
}

/// The timer frequency in Hz (`timebase-frequency` of `/cpus`), if present.
pub fn timebase_frequency() -> Option<u64> {
    let tree = get();
    let cpus = tree.find_node("/cpus")?;
    let property = cpus.property("timebase-frequency").or_else(|| {
        let first_cpu = cpus.children().next()?;
        first_cpu.property("timebase-frequency")
    })?;
    property.as_usize().map(|value| value as u64)
}

/// Number of harts described.
pub fn hart_count() -> usize {
    get().cpus().count()
}

/// The kernel command line (`/chosen/bootargs`), or "".
pub fn bootargs() -> &'static str {
    get().chosen().bootargs().unwrap_or("")
}

/// Machine model string.
pub fn model() -> &'static str {
    get().root().model()
}

/// A device node with an MMIO window.
pub struct Device {
    /// Node name (e.g. `virtio_mmio@10001000`).
    pub name: &'static str,
    /// First compatible string.
    pub compatible: &'static str,
    /// Register window base.
    pub base: usize,
    /// Register window size.
    pub size: usize,
}

/// Every node with a `compatible` property and a register window, in tree order.
pub fn devices() -> impl Iterator<Item = Device> {
    get().all_nodes().filter_map(|node| {
        let compatible = node.compatible()?.first();
        let region = node.reg()?.next()?;
        if node.name.starts_with("memory") || node.name.starts_with("cpu") {
            return None;
        }
        Some(Device { name: node.name, compatible, base: region.starting_address as usize, size: region.size.unwrap_or(0) })
    })
}

/// RAM regions (start, size).
pub fn memory_regions() -> impl Iterator<Item = (usize, usize)> {
    get()
        .find_all_nodes("/memory")
        .filter_map(|node| node.reg())
        .flatten()
        .map(|region| (region.starting_address as usize, region.size.unwrap_or(0)))
}

/// Reserved ranges (start, size): the header's reservation block and `/reserved-memory`.
pub fn reserved_regions() -> impl Iterator<Item = (usize, usize)> {
    let tree = get();
    let header = tree.memory_reservations().map(|reservation| (reservation.address() as usize, reservation.size()));
    let nodes = tree
        .find_node("/reserved-memory")
        .into_iter()
        .flat_map(|node| node.children())
        .filter_map(|child| child.reg()?.next())
        .map(|region| (region.starting_address as usize, region.size.unwrap_or(0)));
    header.chain(nodes)
}

/// The initial RAM disk (`/chosen/linux,initrd-start` .. `linux,initrd-end`), if QEMU
/// was given one: Spindle's boot bundle of extensions.
pub fn initrd_range() -> Option<(usize, usize)> {
    let chosen = get().find_node("/chosen")?;
    let start = chosen.property("linux,initrd-start")?.as_usize()?;
    let end = chosen.property("linux,initrd-end")?.as_usize()?;
    (end > start).then_some((start, end))
}

/// The ISA string of the first hart (`riscv,isa`), or "".
pub fn isa() -> &'static str {
    get().cpus().next().and_then(|cpu| cpu.property("riscv,isa")).and_then(|property| property.as_str()).unwrap_or("")
}
