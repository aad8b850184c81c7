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

/// The first interrupt number of the device node whose register window starts at
/// `base` (its `interrupts` property, one cell: the PLIC's `#interrupt-cells`), if any.
pub fn interrupt_of(base: usize) -> Option<u32> {
    get().all_nodes().find_map(|node| {
        let region = node.reg()?.next()?;
        if region.starting_address as usize != base {
            return None;
        }
        first_cell(node.property("interrupts")?.value)
    })
}

fn first_cell(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// Compatible strings of the platform-level interrupt controller.
pub const PLIC_COMPATIBLE: &[&str] = &["riscv,plic0", "sifive,plic-1.0.0"];
/// The local interrupt number of a supervisor external interrupt (`scause` code 9), as a
/// PLIC context names the hart-local interrupt it drives in `interrupts-extended`.
const SUPERVISOR_EXTERNAL_INTERRUPT: u32 = 9;

/// The PLIC as the device tree describes it.
#[derive(Clone, Debug)]
pub struct PlicDescription {
    /// Register window base.
    pub base: usize,
    /// Register window size.
    pub size: usize,
    /// Highest interrupt source number (`riscv,ndev`); sources are `1..=sources`.
    pub sources: u32,
    /// `(hart id, context number)` of every supervisor-mode context.
    pub supervisor_contexts: alloc::vec::Vec<(usize, usize)>,
}

/// The PLIC, if the tree has one: its window, its number of sources and the context
/// that delivers supervisor external interrupts to each hart. Context `i` is the `i`-th
/// `(phandle, interrupt)` pair of its `interrupts-extended`; the phandle names a hart's
/// `riscv,cpu-intc` node, and interrupt 9 means S-mode (OpenSBI marks the M-mode pairs
/// with `0xffffffff`, which are skipped like every other value).
pub fn plic() -> Option<PlicDescription> {
    let tree = get();
    let node = tree.find_compatible(PLIC_COMPATIBLE)?;
    let region = node.reg()?.next()?;
    let sources = node.property("riscv,ndev").and_then(|property| property.as_usize())? as u32;
    let pairs = node.property("interrupts-extended")?.value;
    let mut supervisor_contexts = alloc::vec::Vec::new();
    for (context, pair) in pairs.chunks_exact(8).enumerate() {
        let (Some(phandle), Some(interrupt)) = (first_cell(&pair[..4]), first_cell(&pair[4..])) else { continue };
        if interrupt != SUPERVISOR_EXTERNAL_INTERRUPT {
            continue;
        }
        if let Some(hart) = hart_of_interrupt_controller(phandle) {
            supervisor_contexts.push((hart, context));
        }
    }
    Some(PlicDescription { base: region.starting_address as usize, size: region.size.unwrap_or(0), sources, supervisor_contexts })
}

/// The hart id (`reg` of the `cpu@N` node) whose local interrupt controller has `phandle`.
fn hart_of_interrupt_controller(phandle: u32) -> Option<usize> {
    let cpus = get().find_node("/cpus")?;
    cpus.children().filter(|cpu| cpu.name.starts_with("cpu@")).find_map(|cpu| {
        let owns = cpu.children().any(|child| {
            child.property("phandle").and_then(|property| first_cell(property.value)) == Some(phandle)
        });
        if !owns {
            return None;
        }
        cpu.property("reg").and_then(|property| property.as_usize())
    })
}
