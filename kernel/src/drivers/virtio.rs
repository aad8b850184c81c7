//! Virtio over MMIO: finding devices in the device tree, handing each to one driver, and
//! the `virtio-drivers` crate's [`Hal`] on top of the kernel's frame allocator.
//!
//! QEMU `virt` has eight virtio-mmio slots, listed in the device tree as `virtio,mmio`
//! nodes whether or not a device sits in them; an empty slot reads device id 0. The
//! header registers read here (magic, version, device id) identify a slot's device
//! without touching its state, so probing never resets a device another driver owns.
//! [`claim`] gives a slot's transport to exactly one driver for the life of the kernel.
//!
//! DMA: RAM is identity-mapped, so DMA pages come straight from
//! [`crate::mm::frame::allocate_zeroed`] with physical address == kernel address; the
//! [`FrameRun`]s are kept in a registry until the crate gives them back in `dma_dealloc`.
//! Buffers the crate shares with a device (heap, strand stacks) are translated through the
//! kernel page table.
//!
//! Interrupts are each driver's business: the slot's PLIC source is in the device tree
//! (`devicetree::interrupt_of`), and `virtio_blk` registers it; the console polls.
//!
//! Limitations: no bounce buffers — every kernel buffer is
//! physically contiguous (heap and frames are identity-mapped runs, each strand stack is
//! one frame run), and sharing one that is not is a kernel bug, reported by a panic.

use alloc::vec::Vec;
use core::fmt;
use core::ptr::NonNull;

use virtio_drivers::transport::DeviceType;
use virtio_drivers::transport::mmio::{MmioError, MmioTransport, VirtIOHeader};
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

use crate::arch::PAGE_SIZE;
use crate::arch::csr::without_interrupts;
use crate::mm::frame::{self, FrameRun};

/// The device-tree `compatible` string of a virtio-mmio slot.
pub const VIRTIO_MMIO_COMPATIBLE: &str = "virtio,mmio";
/// The first header register: the magic value "virt" (little-endian).
const MAGIC_REGISTER: usize = 0x000;
/// The transport version register (1 = legacy, 2 = modern).
const VERSION_REGISTER: usize = 0x004;
/// The device id register (0 = empty slot; virtio spec §5 numbers the device types).
const DEVICE_ID_REGISTER: usize = 0x008;
/// "virt" read as a little-endian 32-bit word.
const MAGIC_VALUE: u32 = 0x7472_6976;
/// Smallest window that holds the header (registers up to 0x100; config space follows).
const HEADER_WINDOW: usize = 0x100;

/// A virtio-mmio register window found in the device tree. Only this module makes them,
/// from `virtio,mmio` nodes, whose windows `mm::kernel_space` maps as device memory.
#[derive(Clone, Copy, Debug)]
struct Window {
    base: usize,
    size: usize,
}

impl Window {
    fn read_register(self, offset: usize) -> u32 {
        debug_assert!(offset + 4 <= HEADER_WINDOW && offset.is_multiple_of(4));
        // SAFETY: `self` is a `virtio,mmio` window of >= HEADER_WINDOW bytes (`windows`), which
        // `mm::kernel_space` maps read-write, identity, before any driver runs; `offset` is an aligned
        // header register inside it, and reading identification registers has no device side effect.
        unsafe { ((self.base + offset) as *const u32).read_volatile() }
    }
}

fn windows() -> impl Iterator<Item = Window> {
    crate::devicetree::devices()
        .filter(|device| device.compatible == VIRTIO_MMIO_COMPATIBLE && device.size >= HEADER_WINDOW)
        .map(|device| Window { base: device.base, size: device.size })
}

/// One virtio-mmio slot and what sits in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Physical (= kernel) address of the register window.
    pub base: usize,
    /// Size of the register window.
    pub size: usize,
    /// Virtio device id (spec §5): 2 = block, 3 = console, …; 0 = empty slot.
    pub device_id: u32,
    /// Transport version: 1 = legacy, 2 = modern.
    pub version: u32,
}

/// Every virtio-mmio slot of the device tree whose header carries the virtio magic.
pub fn slots() -> impl Iterator<Item = Slot> {
    windows().filter(|window| window.read_register(MAGIC_REGISTER) == MAGIC_VALUE).map(|window| Slot {
        base: window.base,
        size: window.size,
        device_id: window.read_register(DEVICE_ID_REGISTER),
        version: window.read_register(VERSION_REGISTER),
    })
}

/// Why a device could not be claimed.
#[derive(Debug)]
pub enum VirtioError {
    /// No unclaimed slot holds a device of this type.
    NoDevice(DeviceType),
    /// The slot's header was refused by the transport (bad version, too small…).
    Transport(MmioError),
    /// The device failed to initialise.
    Device(virtio_drivers::Error),
}

impl fmt::Display for VirtioError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VirtioError::NoDevice(device_type) => write!(formatter, "no unclaimed virtio-mmio {device_type:?} device"),
            VirtioError::Transport(error) => write!(formatter, "virtio-mmio transport: {error}"),
            VirtioError::Device(error) => write!(formatter, "virtio device: {error}"),
        }
    }
}

/// Base addresses of the slots already given to a driver.
static CLAIMED: spin::Mutex<Vec<usize>> = spin::Mutex::new(Vec::new());

/// Gives the first unclaimed slot holding a `device_type` device to the caller, as a
/// transport that lives as long as the kernel. Each slot is handed out at most once.
///
/// Errors: [`VirtioError::NoDevice`] if no unclaimed slot has such a device,
/// [`VirtioError::Transport`] if its header is refused.
pub fn claim(device_type: DeviceType) -> Result<(Slot, MmioTransport<'static>), VirtioError> {
    let wanted = device_type as u32;
    let slot = without_interrupts(|| {
        let mut claimed = CLAIMED.lock();
        let slot = slots().find(|slot| slot.device_id == wanted && !claimed.contains(&slot.base))?;
        claimed.push(slot.base);
        Some(slot)
    })
    .ok_or(VirtioError::NoDevice(device_type))?;
    let header = NonNull::new(slot.base as *mut VirtIOHeader).ok_or(VirtioError::NoDevice(device_type))?;
    // `slot` is a device-tree `virtio,mmio` window; device windows are never unmapped.
    // SAFETY: `mm::kernel_space` maps it read-write for the kernel's life, page-aligned (so aligned
    // for the header); `slot.size`, its device-tree size, covers the config space; `slot` is newly
    // in CLAIMED, so no other transport for it exists or will be made: the access is unique.
    let transport = unsafe { MmioTransport::new(header, slot.size) }.map_err(VirtioError::Transport)?;
    Ok((slot, transport))
}

/// The kernel's implementation of the `virtio-drivers` platform interface.
pub struct KernelHal;

/// DMA frame runs lent to `virtio-drivers`, kept alive until `dma_dealloc` returns them.
static DMA_REGIONS: spin::Mutex<Vec<FrameRun>> = spin::Mutex::new(Vec::new());

/// Status `dma_dealloc` returns for success (the crate asserts on it).
const DEALLOC_OK: i32 = 0;
/// Status `dma_dealloc` returns for a region it never lent out.
const DEALLOC_UNKNOWN_REGION: i32 = -1;

/// The physical address a device must use for `buffer`, which must be mapped and
/// physically contiguous (every kernel buffer is; see the module notes).
fn physical_address_of(buffer: NonNull<[u8]>) -> PhysAddr {
    let start = buffer.cast::<u8>().as_ptr() as usize;
    let Some(root) = crate::mm::kernel_space::root() else {
        return start as PhysAddr; // paging is off: physical == virtual
    };
    let translate = |address: usize| root.translate(address).map(|(physical, _)| physical);
    let physical_start = translate(start).expect("virtio: a DMA buffer is not mapped (kernel bug)");
    let end = start + buffer.len();
    let mut page = crate::mm::align_down(start) + PAGE_SIZE;
    while page < end {
        assert!(translate(page) == Some(physical_start + (page - start)), "virtio: DMA buffer {start:#x}..{end:#x} is not physically contiguous (kernel bug)");
        page += PAGE_SIZE;
    }
    physical_start as PhysAddr
}

// SAFETY: `dma_alloc` returns zeroed, page-aligned frames taken from the frame allocator,
// owned by DMA_REGIONS until `dma_dealloc`, so nothing else aliases them; RAM is
// identity-mapped read-write, so the returned pointer is valid for the whole run.
// `mmio_phys_to_virt` returns the identity address of device memory the caller vouches
// for. `share` returns the physical address of the very memory given (no copies), found
// through the kernel page table; memory is cache-coherent under QEMU, so `unshare` has
// nothing to do.
unsafe impl Hal for KernelHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let Some(run) = frame::allocate_zeroed(pages) else {
            return (0, NonNull::dangling()); // `Dma::new` turns a zero address into DmaError
        };
        let Some(pointer) = NonNull::new(run.address() as *mut u8) else {
            return (0, NonNull::dangling());
        };
        let physical = run.address() as PhysAddr;
        without_interrupts(|| DMA_REGIONS.lock().push(run));
        (physical, pointer)
    }

    unsafe fn dma_dealloc(paddr: PhysAddr, _vaddr: NonNull<u8>, pages: usize) -> i32 {
        let run = without_interrupts(|| {
            let mut regions = DMA_REGIONS.lock();
            let position = regions.iter().position(|run| run.address() as PhysAddr == paddr && run.count() == pages)?;
            Some(regions.swap_remove(position))
        });
        match run {
            Some(run) => {
                drop(run); // back to the frame allocator
                DEALLOC_OK
            }
            None => DEALLOC_UNKNOWN_REGION,
        }
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        // Device memory is identity-mapped; only the PCI transport calls this.
        NonNull::new(paddr as usize as *mut u8).expect("virtio: MMIO region at address 0")
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        physical_address_of(buffer)
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}
