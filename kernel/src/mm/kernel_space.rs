//! The kernel's address space: identity mapping of the image (W^X), free RAM and
//! device windows.
//!
//! | range | permissions |
//! |---|---|
//! | `.text` | r-x |
//! | `.rodata` | r-- |
//! | `.data`, `.bss`, boot stacks (guard pages left unmapped) | rw- |
//! | free RAM after the image (heap, frames) | rw- |
//! | device windows from the device tree, up to 8 MiB each | rw- |
//!
//! Firmware memory below the kernel is not mapped, so a stray access to it faults.

use spin::Once;

use crate::arch::boot::{BOOT_STACK_SLOT, boot_stacks_region};
use crate::arch::hart::MAX_HARTS;
use crate::arch::sv39::{MapError, PageTableRoot, PteFlags};
use crate::arch::PAGE_SIZE;
use crate::mm::frame::PermanentFrames;

unsafe extern "C" {
    static __text_start: u8;
    static __text_end: u8;
    static __rodata_start: u8;
    static __rodata_end: u8;
    static __data_start: u8;
}

/// Device windows larger than this are not mapped (PCIe, flash); the PLIC (6 MiB) is.
const LARGEST_DEVICE_WINDOW: usize = 8 * 1024 * 1024;

static KERNEL_ROOT: Once<PageTableRoot> = Once::new();

const READ_EXECUTE: PteFlags = PteFlags::READ.union(PteFlags::EXECUTE).union(PteFlags::GLOBAL);
const READ_ONLY: PteFlags = PteFlags::READ.union(PteFlags::GLOBAL);
const READ_WRITE: PteFlags = PteFlags::READ.union(PteFlags::WRITE).union(PteFlags::GLOBAL);

fn map_identity(root: PageTableRoot, start: usize, end: usize, flags: PteFlags) -> Result<(), MapError> {
    if end > start {
        root.map_range(start, start, end - start, flags, &mut PermanentFrames)?;
    }
    Ok(())
}

/// Builds and activates the kernel page table.
pub fn init() -> Result<(), MapError> {
    let root = PageTableRoot::new(&mut PermanentFrames)?;
    let text = ((&raw const __text_start) as usize, (&raw const __text_end) as usize);
    let rodata = ((&raw const __rodata_start) as usize, (&raw const __rodata_end) as usize);
    let data_start = (&raw const __data_start) as usize;
    let (stacks_start, stacks_end) = boot_stacks_region();
    map_identity(root, text.0, text.1, READ_EXECUTE)?;
    map_identity(root, rodata.0, rodata.1, READ_ONLY)?;
    map_identity(root, data_start, stacks_start, READ_WRITE)?;
    for hart in 0..MAX_HARTS {
        let slot = stacks_start + hart * BOOT_STACK_SLOT;
        map_identity(root, slot + PAGE_SIZE, slot + BOOT_STACK_SLOT, READ_WRITE)?;
    }
    map_identity(root, stacks_end, super::kernel_end(), READ_WRITE)?;
    if let Some(free) = super::boot_free_ranges() {
        for (start, end) in free.iter() {
            map_identity(root, start, end, READ_WRITE)?;
        }
    }
    let (blob_start, blob_end) = crate::devicetree::blob_range();
    map_identity(root, super::align_down(blob_start), super::align_up(blob_end), READ_ONLY)?;
    if let Some((start, end)) = crate::devicetree::initrd_range() {
        map_identity(root, super::align_down(start), super::align_up(end), READ_ONLY)?;
    }
    for device in crate::devicetree::devices() {
        // Large windows (PCIe ECAM and BARs, flash) are not used by the kernel yet.
        if device.size > LARGEST_DEVICE_WINDOW {
            continue;
        }
        let start = super::align_down(device.base);
        let end = super::align_up(device.base + device.size.max(PAGE_SIZE));
        // Devices may share pages (and the DT lists some twice); skip what is mapped.
        for page in (start..end).step_by(PAGE_SIZE) {
            if root.translate(page).is_none() {
                map_identity(root, page, page + PAGE_SIZE, READ_WRITE)?;
            }
        }
    }
    // SAFETY: the table maps the kernel image (text executable), its data, bss, boot
    // stacks, all free RAM (heap and frames), the device-tree blob and every device
    // window the kernel uses, so execution continues seamlessly after the switch.
    unsafe { root.activate() };
    KERNEL_ROOT.call_once(|| root);
    Ok(())
}

/// The kernel page table.
pub fn root() -> Option<PageTableRoot> {
    KERNEL_ROOT.get().copied()
}

/// Loads from `address`, which must not be mapped, under a recovery point, and returns
/// the fault report (used by the `fault` console command and by fault tests).
///
/// Refuses mapped addresses: reading them could disturb devices or kernel state.
pub fn probe_unmapped_load(address: usize) -> Result<crate::arch::trap::FaultReport, &'static str> {
    let root = root().ok_or("paging is not enabled yet")?;
    if root.translate(address).is_some() {
        return Err("address is mapped; only unmapped addresses can be probed");
    }
    let outcome = crate::arch::recovery::catch_faults(|| {
        // SAFETY: `address` is not mapped in the kernel page table (checked above and
        // the kernel does not map pages concurrently), so this load cannot read any
        // memory: it traps, and the armed recovery point turns the trap into an error.
        unsafe { (address as *const u64).read_volatile() }
    });
    match outcome {
        Ok(_) => Err("the load did not fault"),
        Err(report) => Ok(report),
    }
}
