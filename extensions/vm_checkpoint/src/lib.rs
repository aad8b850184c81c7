//! `vm_checkpoint`: an incremental copy-on-write checkpoint, the Appel & Li client of the
//! translation service's `vm.ProtectionFault` (Li's concurrent checkpointing, as an
//! extension in any technology).
//!
//! A program maps a region of 2 × N pages: N pages of data, then N pages for the snapshot.
//! It traps the region to this extension (`vm_trap`) and takes a checkpoint by protecting
//! the data half read-only (`protN`). The first store to a data page faults; the handler
//! copies the page as it was into the same place of the snapshot half
//! (`spindle_vm_copy_page`, the page `N` pages further on — `spindle_vm_region_pages` gives
//! the region's size) and answers PROTECT read-write for that page, so the store runs
//! again and later stores to it do not fault. The snapshot half then holds exactly the
//! pages written since the checkpoint, as they were at it: the program can roll back by
//! copying them back. Anything else (a load, a copy the kernel refuses) is declined, and
//! the default (the process is killed for the protection violation) applies.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{TranslationAnswer, TranslationRecord, VM_PROTECTION_FAULT};

spindle_abi::extension! {
    name: "vm_checkpoint",
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

/// Where `page`'s snapshot goes in a region of `region_pages` pages: half the region
/// further on; `None` for a region too small to hold a snapshot half.
pub fn snapshot_of(page: u64, region_pages: u64) -> Option<u64> {
    let half = region_pages / 2;
    (half > 0).then(|| page + half * PAGE_SIZE)
}

/// The answer once the page was saved (`saved`): unprotect it; else decline.
pub fn answer(record: &TranslationRecord, saved: bool) -> TranslationAnswer {
    if !saved {
        return TranslationAnswer::default();
    }
    TranslationAnswer::unprotect_page(record.page())
}

/// `vm.ProtectionFault`: save the page to the snapshot half, then unprotect it.
fn protection_fault(record: &TranslationRecord) -> TranslationAnswer {
    if record.access != TranslationRecord::WRITE {
        return answer(record, false);
    }
    let pages = spindle_abi::host::vm_region_pages(record.space, record.region);
    let saved = snapshot_of(record.page(), pages).is_some_and(|snapshot| spindle_abi::host::vm_copy_page(record.space, record.page(), snapshot) == 1);
    answer(record, saved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_is_half_the_region_further_on() {
        assert_eq!(snapshot_of(0x14_0000_3000, 16), Some(0x14_0000_3000 + 8 * PAGE_SIZE));
        assert_eq!(snapshot_of(0x14_0000_0000, 1), None);
        assert_eq!(snapshot_of(0x14_0000_0000, 0), None);
    }

    #[test]
    fn unprotects_once_saved_and_declines_otherwise() {
        let record = TranslationRecord { space: 3, address: 0x14_0000_1234, access: TranslationRecord::WRITE, region: 1 };
        let unprotect = answer(&record, true);
        assert_eq!((unprotect.action, unprotect.page, unprotect.count, unprotect.protection), (TranslationAnswer::PROTECT, 0x14_0000_1000, 1, 3));
        assert_eq!(answer(&record, false).action, TranslationAnswer::DECLINE);
        // On the host the kernel functions answer 0: nothing is saved, so it declines.
        assert_eq!(protection_fault(&record).action, TranslationAnswer::DECLINE);
        let load = TranslationRecord { access: TranslationRecord::READ, ..record };
        assert_eq!(protection_fault(&load).action, TranslationAnswer::DECLINE);
        assert_eq!(spindle_extension().domains, ["vm"]);
    }
}
