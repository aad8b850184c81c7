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
//!
//! Above RAM and devices, [`DYNAMIC_REGION`] holds what the kernel maps after boot
//! (strand stacks, extension images). Its root-table slots get their level-1 tables at
//! boot, so every later kernel mapping lands below a root entry that already exists:
//! process address spaces copy the kernel's root entries once ([`share_with`]) and still
//! see every kernel mapping made afterwards, so traps from user mode run kernel code
//! without switching `satp`. The kernel makes no new root entries after boot.

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

/// Virtual addresses the kernel maps after boot: strand stacks (`mm::stack`, from
/// `0x30_0000_0000`) and native extension images (from `0x31_0000_0000`), up to the end of
/// the Sv39 lower half. Its 64 root slots get level-1 tables at boot (64 frames).
pub const DYNAMIC_REGION: core::ops::Range<usize> = 0x30_0000_0000..crate::arch::sv39::LOWER_HALF_END;

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
    for slot in DYNAMIC_REGION.step_by(crate::arch::sv39::GIGAPAGE_SIZE) {
        root.prepare_root_slot(slot, &mut PermanentFrames)?;
    }
    // SAFETY: the table maps the kernel image (text executable), its data, bss, boot
    // stacks, all free RAM (heap and frames), the device-tree blob and every device
    // window the kernel uses, so execution continues seamlessly after the switch.
    unsafe { root.activate() };
    KERNEL_ROOT.call_once(|| root);
    KERNEL_ROOT_PAGE.store(root.physical_address() / PAGE_SIZE, core::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// The kernel root table's page number once paging is on (0 before): what [`activate`]
/// reads on every address-space switch, a plain load where [`KERNEL_ROOT`]'s `Once` costs
/// an acquire fence.
static KERNEL_ROOT_PAGE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// The kernel page table.
pub fn root() -> Option<PageTableRoot> {
    KERNEL_ROOT.get().copied()
}

/// Makes `user_root` map everything the kernel maps (sharing the kernel's root entries,
/// which are global and not user-accessible), keeping the root slots `user_slots` for the
/// process. Fails with a slot the kernel itself uses, if `user_slots` holds one.
pub fn share_with(user_root: PageTableRoot, user_slots: core::ops::Range<usize>) -> Result<(), usize> {
    let kernel = root().ok_or(usize::MAX)?;
    user_root.share_root_entries(kernel, user_slots)
}

/// Activates the root table at physical address `root_address` on this hart (0 means the
/// kernel's own), unless it is already active. Called by the scheduler when a strand
/// gains the hart.
///
/// A non-zero `root_address` must be a root prepared with [`share_with`] and not freed
/// while any strand may activate it (process address spaces switch back to 0 before
/// they are dropped).
#[inline]
pub fn activate(root_address: usize) {
    let kernel = KERNEL_ROOT_PAGE.load(core::sync::atomic::Ordering::Relaxed);
    if kernel == 0 {
        return;
    }
    let wanted = if root_address == 0 { kernel } else { root_address / PAGE_SIZE };
    if crate::arch::csr::satp() & crate::arch::csr::SATP_PPN_MASK != wanted {
        crate::arch::hart::current().satp_writes.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        // `wanted` is the kernel root or, by this function's contract, a live root prepared
        // with `share_with`, whose entries outside the user slots are the kernel's.
        // SAFETY: the kernel makes no root entries after boot (module documentation), so
        // either root maps the running code, every stack and all kernel memory.
        unsafe { crate::arch::csr::write_satp_sv39(wanted) };
    }
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
