//! `scan_barrier`: the handler Appel & Li's `Appel1` benchmark measures (SPIN SOSP '95
//! Table 4: "fault on a protected page, resolve it in the handler, and protect another page
//! in the handler"), as a concurrent collector's scan barrier would use it.
//!
//! The collector keeps the pages it has not scanned yet protected. A load or store to such
//! a page faults (`vm.ProtectionFault`); the handler "scans" it and lets the mutator in by
//! unprotecting it (the answer: PROTECT, one page, read-write), and moves the barrier on by
//! protecting the page after it read-only (`spindle_vm_protect`, queued by the kernel and
//! applied after the answer). At the region's end the kernel refuses that change and counts
//! it (`refused` in `vmstat`), as it does any refused change. An access that is neither a
//! load nor a store (an instruction fetch) is declined: the default (the process is killed
//! for the protection violation) applies.
//!
//! Which faults it sees is the kernel's business: a program traps its region to this
//! extension (`vm_trap`), and the kernel imposes guards on the address space and region.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{TranslationAnswer, TranslationRecord, VM_PROTECTION_FAULT};

spindle_abi::extension! {
    name: "scan_barrier",
    version: "0.1.0",
    budget_microseconds: 500,
    memory_quota_bytes: 16 * 1024,
    domains: ["vm"],
    bindings: [
        VM_PROTECTION_FAULT => protection_fault,
    ],
}

/// Bytes in a page.
pub const PAGE_SIZE: u64 = 4096;

/// The page the barrier moves on to after `page`: the next one.
pub fn next_page(page: u64) -> u64 {
    page.wrapping_add(PAGE_SIZE)
}

/// The answer for `record`: unprotect the faulting page (read-write) for a load or a
/// store; decline anything else.
pub fn answer(record: &TranslationRecord) -> TranslationAnswer {
    if record.access != TranslationRecord::READ && record.access != TranslationRecord::WRITE {
        return TranslationAnswer::default();
    }
    TranslationAnswer::unprotect_page(record.page())
}

/// `vm.ProtectionFault`: protect the next page read-only, unprotect this one.
fn protection_fault(record: &TranslationRecord) -> TranslationAnswer {
    let answer = answer(record);
    if answer.action == TranslationAnswer::PROTECT {
        // Refused (0) past the region's end or when the kernel's queue is full: the barrier
        // then simply stops there.
        let _ = spindle_abi::host::vm_protect(record.space, next_page(record.page()), 1, u64::from(TranslationAnswer::READ));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unprotects_the_faulting_page_and_moves_on() {
        let record = TranslationRecord { space: 3, address: 0x14_0000_1234, access: TranslationRecord::WRITE, region: 1 };
        let unprotect = protection_fault(&record);
        assert_eq!((unprotect.action, unprotect.page, unprotect.count, unprotect.protection), (TranslationAnswer::PROTECT, 0x14_0000_1000, 1, 3));
        assert_eq!(next_page(record.page()), 0x14_0000_2000);
        let load = TranslationRecord { access: TranslationRecord::READ, ..record };
        assert_eq!(answer(&load).action, TranslationAnswer::PROTECT);
        let fetch = TranslationRecord { access: TranslationRecord::EXECUTE, ..record };
        assert_eq!(answer(&fetch).action, TranslationAnswer::DECLINE);
        assert_eq!(spindle_extension().domains, ["vm"]);
    }
}
