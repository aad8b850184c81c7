//! `pager_fill`: a pager for the translation service's `vm.PageNotPresent` (SPIN's external
//! pager, as an extension in any technology).
//!
//! For a missing page it asks the kernel for a frame granted to the faulting address space
//! (`spindle_vm_grant`), writes the page's own address into the frame's first word
//! (`spindle_vm_fill`), so a program can tell the pager's pages from demand-zero ones, and
//! answers MAP, read-write. Without a grant it declines (the default then applies: a
//! managed region's process is killed).
//!
//! As Appel & Li's `trap` handler (`vm.ProtectionFault`) it is a write barrier: a store to
//! a page protected read-only (`prot1`/`protN`) is answered by unprotecting that page
//! (PROTECT, one page, read-write), and the store runs again. It also binds
//! `vm.BadAddress`, an announcement, and does nothing there (tests count the calls).
//!
//! Which faults it sees is the kernel's business: a process that marks its region managed
//! for `pager_fill` (`vm_manage`) has the kernel impose guards on the address space and the
//! region, so two processes' regions stay apart.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{TranslationAnswer, TranslationRecord, VM_BAD_ADDRESS, VM_PAGE_NOT_PRESENT, VM_PROTECTION_FAULT};

spindle_abi::extension! {
    name: "pager_fill",
    version: "0.1.0",
    budget_microseconds: 500,
    memory_quota_bytes: 16 * 1024,
    domains: ["vm"],
    bindings: [
        VM_PAGE_NOT_PRESENT => page_not_present,
        VM_PROTECTION_FAULT => protection_fault,
        VM_BAD_ADDRESS => bad_address,
    ],
}

/// The answer for `record` given the granted frame (0: none).
pub fn answer(record: &TranslationRecord, frame: u64) -> TranslationAnswer {
    if frame == 0 {
        return TranslationAnswer::default();
    }
    TranslationAnswer {
        action: TranslationAnswer::MAP,
        protection: TranslationAnswer::READ | TranslationAnswer::WRITE,
        page: record.page(),
        frame,
        count: 0,
    }
}

/// `vm.PageNotPresent`: a granted frame, its first word the page's address.
fn page_not_present(record: &TranslationRecord) -> TranslationAnswer {
    let frame = spindle_abi::host::vm_grant(record.space);
    if frame != 0 {
        spindle_abi::host::vm_fill(record.space, 0, &record.page().to_le_bytes());
    }
    answer(record, frame)
}

/// `vm.ProtectionFault`: unprotect the faulting page (read-write).
fn protection_fault(record: &TranslationRecord) -> TranslationAnswer {
    TranslationAnswer::unprotect_page(record.page())
}

/// `vm.BadAddress`: an announcement; nothing to do.
fn bad_address(_: &TranslationRecord) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_the_faulting_page_read_write_or_declines() {
        let record = TranslationRecord { space: 3, address: 0x14_0000_1234, access: TranslationRecord::WRITE, region: 1 };
        let mapped = answer(&record, 77);
        assert_eq!((mapped.action, mapped.page, mapped.frame, mapped.protection), (TranslationAnswer::MAP, 0x14_0000_1000, 77, 3));
        assert_eq!(answer(&record, 0).action, TranslationAnswer::DECLINE);
        let unprotect = protection_fault(&record);
        assert_eq!((unprotect.action, unprotect.page, unprotect.count, unprotect.protection), (TranslationAnswer::PROTECT, 0x14_0000_1000, 1, 3));
    }

    #[test]
    fn without_a_kernel_there_is_no_grant() {
        let record = TranslationRecord { space: 3, address: 0x14_0000_1234, access: TranslationRecord::READ, region: 1 };
        assert_eq!(page_not_present(&record).action, TranslationAnswer::DECLINE);
        assert_eq!(spindle_extension().domains, ["vm"]);
    }
}
