//! Host tests of the regions, fault classification, answer checks, the Appel & Li
//! primitives and the swap area.

use alloc::string::ToString;
use alloc::vec::Vec;

use spindle_service_frames::{FrameTable, Owner};

use crate::*;

const SPACE: u64 = 7;
const HEAP: u64 = 0x14_0000_0000;
const CODE: u64 = 0x10_0000_0000;
const PAGER: Owner = Owner::ExtensionArena(3);

/// A table with an anonymous read-write heap of 16 pages, a managed read-write region
/// of 8 pages (trapped by `PAGER`) right after a guard page, and read-execute code.
fn regions() -> (RegionTable, RegionId, RegionId, RegionId) {
    let mut table = RegionTable::new(SPACE);
    let heap = table.add(HEAP, 16 * PAGE_SIZE, Protection::READ_WRITE, RegionKind::Anonymous).unwrap();
    let managed = table.add(HEAP + 17 * PAGE_SIZE, 8 * PAGE_SIZE, Protection::READ_WRITE, RegionKind::Managed).unwrap();
    let code = table.add(CODE, 4 * PAGE_SIZE, Protection::READ_EXECUTE, RegionKind::FileBacked).unwrap();
    table.trap(managed, Trap { owner: PAGER, handler: 11 }).unwrap();
    (table, heap, managed, code)
}

fn managed_page(index: u64) -> u64 {
    HEAP + (17 + index) * PAGE_SIZE
}

// ---- regions ------------------------------------------------------------------------

#[test]
fn user_window_agrees_with_the_process_layout() {
    assert_eq!(USER_START, spindle_process::layout::USER_REGION_START as u64);
    assert_eq!(USER_END, spindle_process::layout::USER_REGION_END as u64);
    assert_eq!(PAGE_SIZE, spindle_process::layout::PAGE_SIZE as u64);
}

#[test]
fn protections_decode_and_compare() {
    assert_eq!(Protection::from_bits(3), Ok(Protection::READ_WRITE));
    assert_eq!(Protection::from_bits(2), Err(RegionError::BadProtection(2)), "write without read");
    assert_eq!(Protection::from_bits(8), Err(RegionError::BadProtection(8)));
    assert_eq!(Protection::from_bits(u64::MAX), Err(RegionError::BadProtection(u64::MAX)));
    assert!(Protection::READ.within(Protection::READ_WRITE));
    assert!(Protection::NONE.within(Protection::READ));
    assert!(!Protection::READ_WRITE.within(Protection::READ_EXECUTE));
    assert_eq!(Protection::READ_EXECUTE.bits(), 5);
}

#[test]
fn regions_are_checked_when_added() {
    let (mut table, heap, managed, code) = regions();
    assert_eq!((heap, managed, code), (1, 2, 3), "ids from 1");
    let rw = Protection::READ_WRITE;
    let anon = RegionKind::Anonymous;
    assert_eq!(table.add(HEAP + 1, PAGE_SIZE, rw, anon), Err(RegionError::Misaligned(HEAP + 1)));
    assert_eq!(table.add(HEAP, 100, rw, anon), Err(RegionError::Misaligned(100)));
    assert_eq!(table.add(0x18_0000_0000, 0, rw, anon), Err(RegionError::Empty));
    assert_eq!(table.add(0x8000_0000, PAGE_SIZE, rw, anon), Err(RegionError::NotUserAddress(0x8000_0000)), "a kernel address");
    assert!(matches!(table.add(USER_END - PAGE_SIZE, 2 * PAGE_SIZE, rw, anon), Err(RegionError::NotUserAddress(_))));
    assert!(matches!(table.add(USER_END - PAGE_SIZE, u64::MAX - 4095, rw, anon), Err(RegionError::NotUserAddress(_))), "wraps around");
    assert_eq!(table.add(HEAP + 15 * PAGE_SIZE, 2 * PAGE_SIZE, rw, anon), Err(RegionError::Overlaps(heap)));
    assert_eq!(table.add(HEAP - PAGE_SIZE, 2 * PAGE_SIZE, rw, anon), Err(RegionError::Overlaps(heap)));
    assert_eq!(table.add(HEAP + 16 * PAGE_SIZE, PAGE_SIZE, rw, anon), Ok(4), "the guard page fits exactly");
    assert_eq!(table.containing(HEAP + 16 * PAGE_SIZE + 5).map(|region| region.id), Some(4));
    assert_eq!(table.containing(HEAP - 1), None);
    assert_eq!(table.region(managed).unwrap().pages(), 8);
    let removed = table.remove(4).unwrap();
    assert_eq!(removed.start, HEAP + 16 * PAGE_SIZE);
    assert_eq!(table.remove(4), Err(RegionError::NoSuchRegion(4)));
    assert_eq!(table.regions().map(|region| region.id).collect::<Vec<_>>(), [code, heap, managed], "address order");
    assert_eq!(RegionError::Overlaps(1).to_string(), "the region overlaps region 1");
}

#[test]
fn region_count_is_bounded() {
    let mut table = RegionTable::new(1);
    for index in 0..MAX_REGIONS as u64 {
        table.add(HEAP + index * PAGE_SIZE, PAGE_SIZE, Protection::READ, RegionKind::Anonymous).unwrap();
    }
    assert_eq!(table.add(0x18_0000_0000, PAGE_SIZE, Protection::READ, RegionKind::Anonymous), Err(RegionError::TooManyRegions));
}

// ---- classification -----------------------------------------------------------------

#[test]
fn faults_are_classified() {
    let (mut table, heap, managed, code) = regions();
    table.prot1(HEAP + 2 * PAGE_SIZE, Protection::READ).unwrap();
    table.prot1(HEAP + 3 * PAGE_SIZE, Protection::NONE).unwrap();
    let rw = Pte::mapped(Protection::READ_WRITE);
    let ro = Pte::mapped(Protection::READ);
    use AccessKind::{Execute, Read, Write};
    use FaultClass::{BadAddress, PageNotPresent, ProtectionFault, Spurious};
    #[rustfmt::skip]
    let cases: [(u64, AccessKind, Pte, FaultClass, Option<RegionId>); 17] = [
        // address                       access   PTE          class            region
        (HEAP + 8,                       Read,    Pte::ABSENT, PageNotPresent,  Some(heap)),
        (HEAP + 8,                       Write,   Pte::ABSENT, PageNotPresent,  Some(heap)),
        (HEAP + 8,                       Execute, Pte::ABSENT, ProtectionFault, Some(heap)),
        (HEAP + 8,                       Write,   ro,          ProtectionFault, Some(heap)), // PTE narrower (copy-on-write)
        (HEAP + 8,                       Write,   rw,          Spurious,        Some(heap)),
        (HEAP + 2 * PAGE_SIZE,           Read,    ro,          Spurious,        Some(heap)),
        (HEAP + 2 * PAGE_SIZE + 4,       Write,   ro,          ProtectionFault, Some(heap)), // prot1 READ
        (HEAP + 2 * PAGE_SIZE,           Write,   Pte::ABSENT, ProtectionFault, Some(heap)), // protected and absent
        (HEAP + 3 * PAGE_SIZE,           Read,    Pte::ABSENT, ProtectionFault, Some(heap)), // prot1 NONE
        (HEAP + 16 * PAGE_SIZE,          Read,    Pte::ABSENT, BadAddress,      None),       // the guard page
        (managed_page(7) + 4095,         Write,   Pte::ABSENT, PageNotPresent,  Some(managed)),
        (managed_page(8),                Read,    Pte::ABSENT, BadAddress,      None),
        (CODE,                           Execute, Pte::ABSENT, PageNotPresent,  Some(code)),
        (CODE,                           Write,   Pte::ABSENT, ProtectionFault, Some(code)),
        (0x8020_0000,                    Read,    rw,          BadAddress,      None),       // a kernel address
        (USER_END,                       Read,    Pte::ABSENT, BadAddress,      None),
        (u64::MAX,                       Write,   Pte::ABSENT, BadAddress,      None),
    ];
    for (address, access, pte, class, region) in cases {
        let fault = classify(&table, address, access, pte);
        assert_eq!((fault.class, fault.region), (class, region), "{address:#x} {access:?} {pte:?}");
        assert_eq!(fault.page, address - address % PAGE_SIZE);
        assert_eq!(fault.space, SPACE);
        assert_eq!(fault.record().region, region.unwrap_or(0));
    }
}

#[test]
fn records_carry_the_guardable_fields() {
    let (table, _, managed, _) = regions();
    let fault = classify(&table, managed_page(1) + 12, AccessKind::Execute, Pte::ABSENT);
    assert_eq!(fault.record(), TranslationRecord { space: SPACE, address: managed_page(1) + 12, access: 2, region: managed });
    assert!(fault.raises_event());
    assert_eq!(fault.class.event_name(), Some("vm.ProtectionFault"));
    assert_eq!(FaultClass::Spurious.event_name(), None);
    for access in AccessKind::ALL {
        assert_eq!(AccessKind::decode(access.encode()), Some(access));
    }
    assert_eq!(AccessKind::decode(3), None);
    let untrapped = classify(&table, HEAP, AccessKind::Read, Pte::ABSENT);
    assert!(!untrapped.raises_event(), "no handler on the anonymous heap");
}

// ---- answers ------------------------------------------------------------------------

struct World {
    regions: RegionTable,
    frames: FrameTable,
    granted: u64,
    heap: RegionId,
}

fn world() -> World {
    let (regions, heap, _, _) = regions();
    let mut frames = FrameTable::new(0x8_0000, 32).unwrap();
    let granted = frames.allocate(PAGER).unwrap();
    World { regions, frames, granted, heap }
}

fn map(page: u64, frame: u64) -> Answer {
    Answer::Map { page, frame, protection: Protection::READ_WRITE }
}

#[test]
fn a_valid_map_is_granted() {
    let w = world();
    let fault = classify(&w.regions, managed_page(2) + 8, AccessKind::Write, Pte::ABSENT);
    let expected = Outcome::Map { page: managed_page(2), frame: w.granted, protection: Protection::READ_WRITE };
    assert_eq!(check_answer(&w.regions, &w.frames, &fault, PAGER, map(managed_page(2), w.granted)), Ok(expected));
    let read_only = Answer::Map { page: managed_page(2), frame: w.granted, protection: Protection::READ };
    let read_fault = classify(&w.regions, managed_page(2), AccessKind::Read, Pte::ABSENT);
    assert!(check_answer(&w.regions, &w.frames, &read_fault, PAGER, read_only).is_ok(), "a read fault may be mapped read-only");
}

#[test]
fn a_map_is_capped_at_the_pages_own_protection() {
    let mut w = world();
    let page = managed_page(4);
    w.regions.prot1(page, Protection::READ).unwrap();
    // A read of the untouched read-only page: the pager's read-write answer maps it
    // read-only, so a later store still faults.
    let read = classify(&w.regions, page, AccessKind::Read, Pte::ABSENT);
    assert_eq!((read.class, read.protection), (FaultClass::PageNotPresent, Some(Protection::READ)));
    let expected = Outcome::Map { page, frame: w.granted, protection: Protection::READ };
    assert_eq!(check_answer(&w.regions, &w.frames, &read, PAGER, map(page, w.granted)), Ok(expected));
    // A store to it is a protection fault, which no map resolves (the pager unprotects).
    let write = classify(&w.regions, page, AccessKind::Write, Pte::ABSENT);
    assert_eq!(write.class, FaultClass::ProtectionFault);
    assert_eq!(check_answer(&w.regions, &w.frames, &write, PAGER, map(page, w.granted)), Err(AnswerRejection::Unresolved));
    // Pages the call did not narrow still get the answer's protection.
    let other = classify(&w.regions, managed_page(5), AccessKind::Read, Pte::ABSENT);
    let full = Outcome::Map { page: managed_page(5), frame: w.granted, protection: Protection::READ_WRITE };
    assert_eq!(check_answer(&w.regions, &w.frames, &other, PAGER, map(managed_page(5), w.granted)), Ok(full));
}

#[test]
fn every_bad_map_is_rejected_with_its_reason() {
    let mut w = world();
    let fault = classify(&w.regions, managed_page(2), AccessKind::Write, Pte::ABSENT);
    let other = w.frames.allocate(Owner::AddressSpace(9)).unwrap();
    let kernel = w.frames.allocate(Owner::Kernel).unwrap();
    let mapped = w.frames.allocate(PAGER).unwrap();
    w.frames.map(mapped, SPACE, managed_page(5)).unwrap();
    let free = 0x8_0000 + 31;
    let page = managed_page(2);
    let cases = [
        (map(0x8020_0000, w.granted), AnswerRejection::KernelAddress),
        (map(page + 8, w.granted), AnswerRejection::Misaligned),
        (map(HEAP, w.granted), AnswerRejection::OutsideRegion),
        (map(managed_page(3), w.granted), AnswerRejection::Unresolved),
        (Answer::Map { page, frame: w.granted, protection: Protection::READ }, AnswerRejection::Unresolved),
        (Answer::Map { page, frame: w.granted, protection: Protection::READ_EXECUTE }, AnswerRejection::AboveRegion),
        (map(page, 0x1234), AnswerRejection::NotAFrame),
        (map(page, kernel), AnswerRejection::KernelFrame),
        (map(page, other), AnswerRejection::NotGranted),
        (map(page, free), AnswerRejection::NotGranted),
        (map(page, mapped), AnswerRejection::FrameMapped),
    ];
    for (answer, rejection) in cases {
        assert_eq!(check_answer(&w.regions, &w.frames, &fault, PAGER, answer), Err(rejection), "{answer:?}");
        let resolution = resolve(&w.regions, &w.frames, &fault, Some(answer));
        assert_eq!(resolution, Resolution { outcome: Outcome::Kill(KillCause::NoPager), rejected: Some(rejection) });
    }
    let present = classify(&w.regions, page, AccessKind::Write, Pte::mapped(Protection::READ));
    assert_eq!(check_answer(&w.regions, &w.frames, &present, PAGER, map(page, w.granted)), Err(AnswerRejection::PagePresent));
    let bad = classify(&w.regions, 0x18_0000_0000, AccessKind::Read, Pte::ABSENT);
    assert_eq!(check_answer(&w.regions, &w.frames, &bad, PAGER, map(page, w.granted)), Err(AnswerRejection::NoRegion));
    assert!(AnswerRejection::NotGranted.to_string().contains("handler's owner"));
}

/// `apply_checked` records a `CheckedChange` without checking it again only while the
/// table's generation is the one it was checked at: a region removed, or added again in
/// its place with less access, or its kind changed, makes the same change checked (and
/// refused) afresh; so does another table, however alike.
#[test]
fn a_checked_change_is_checked_again_after_the_regions_change() {
    let (mut table, heap, _, _) = regions();
    let change = table.check_change(HEAP + PAGE_SIZE, 2, Protection::READ_WRITE).unwrap();
    assert_eq!(*change.change(), table.check_protect(HEAP + PAGE_SIZE, 2, Protection::READ_WRITE).unwrap());
    table.remove(heap).unwrap();
    assert_eq!(table.apply_checked(&change), Err(PrimitiveError::NoRegion(HEAP + PAGE_SIZE)));
    let again = table.add(HEAP, 16 * PAGE_SIZE, Protection::READ, RegionKind::Anonymous).unwrap();
    assert_ne!(again, heap);
    assert_eq!(table.apply_checked(&change), Err(PrimitiveError::AboveRegion(Protection::READ_WRITE)));
    assert_eq!(table.protected_pages(), 0, "nothing recorded");
    // Checked now, applied now: recorded; applied again: the same record.
    let change = table.check_change(HEAP + PAGE_SIZE, 2, Protection::NONE).unwrap();
    table.apply_checked(&change).unwrap();
    table.apply_checked(&change).unwrap();
    assert_eq!(table.protected_pages(), 2);
    assert_eq!(table.protection_of(HEAP + 2 * PAGE_SIZE), Some(Protection::NONE));
    // Its kind changed afterwards (the region became the image): checked again, refused.
    let back = table.check_change(HEAP + PAGE_SIZE, 2, Protection::READ).unwrap();
    table.set_kind(again, RegionKind::FileBacked).unwrap();
    assert_eq!(table.apply_checked(&back), Err(PrimitiveError::Image(again)), "an image's pages are not the program's to protect");
    assert_eq!(table.protection_of(HEAP + 2 * PAGE_SIZE), Some(Protection::NONE), "still the old record");
    // Two tables built alike: a change checked by one is checked again by the other.
    let (mut first, ..) = regions();
    let (mut second, second_heap, ..) = regions();
    let checked = first.check_change(HEAP, 1, Protection::READ).unwrap();
    second.set_kind(second_heap, RegionKind::FileBacked).unwrap();
    assert_eq!(second.apply_checked(&checked), Err(PrimitiveError::Image(second_heap)), "not the table that checked it");
    first.apply_checked(&checked).unwrap();
    assert_eq!(first.protection_of(HEAP), Some(Protection::READ));
}

/// A fault keeps the page's own protection where it has one, and the default outcome
/// maps the page with it.
#[test]
fn a_fault_keeps_the_pages_own_protection() {
    let (mut table, ..) = regions();
    table.prot_n(HEAP + PAGE_SIZE, 1, Protection::READ).unwrap();
    let own = classify(&table, HEAP + PAGE_SIZE + 8, AccessKind::Read, Pte::ABSENT);
    assert_eq!(own.protection, Some(Protection::READ));
    assert_eq!(default_outcome(&own), Outcome::DemandZero { page: HEAP + PAGE_SIZE, protection: Protection::READ });
    let regions = classify(&table, HEAP, AccessKind::Read, Pte::ABSENT);
    assert_eq!(default_outcome(&regions), Outcome::DemandZero { page: HEAP, protection: Protection::READ_WRITE });
    assert_eq!(classify(&table, 0x20_0000_0000, AccessKind::Read, Pte::ABSENT).protection, None, "in no region");
}

#[test]
fn protection_answers_are_checked() {
    let mut w = world();
    let page = managed_page(2);
    w.regions.prot_n(managed_page(0), 8, Protection::NONE).unwrap();
    let fault = classify(&w.regions, page, AccessKind::Write, Pte::mapped(Protection::READ_WRITE));
    assert_eq!(fault.class, FaultClass::ProtectionFault);
    let protect = |page, count, protection| Answer::Protect { page, count, protection };
    let ok = check_answer(&w.regions, &w.frames, &fault, PAGER, protect(page, 2, Protection::READ_WRITE)).unwrap();
    let Outcome::Protect(checked) = ok else { panic!("{ok:?}") };
    let change = *checked.change();
    assert_eq!((change.start, change.count), (page, 2));
    assert_eq!(w.regions.protection_of(page), Some(Protection::NONE), "checking records nothing");
    w.regions.apply(&change).unwrap();
    let stale = ProtChange { region: 1, ..change };
    assert_eq!(w.regions.apply(&stale), Err(PrimitiveError::NoSuchRegion(1)), "the pages are not in region 1");
    let wild = ProtChange { start: u64::MAX - 4095, ..change };
    assert_eq!(w.regions.apply(&wild), Err(PrimitiveError::NotUserAddress(u64::MAX - 4095)));
    assert_eq!(w.regions.protection_of(page + PAGE_SIZE), Some(Protection::READ_WRITE));
    let cases = [
        (protect(page, 0, Protection::READ_WRITE), AnswerRejection::BadRange),
        (protect(page, 7, Protection::READ_WRITE), AnswerRejection::BadRange),
        (protect(page, u64::MAX, Protection::READ_WRITE), AnswerRejection::BadRange),
        (protect(page, 1, Protection::READ), AnswerRejection::Unresolved),
        (protect(page + PAGE_SIZE, 1, Protection::READ_WRITE), AnswerRejection::Unresolved),
        (protect(page, 1, Protection::READ_EXECUTE), AnswerRejection::AboveRegion),
        (protect(HEAP, 1, Protection::READ_WRITE), AnswerRejection::OutsideRegion),
    ];
    for (answer, rejection) in cases {
        assert_eq!(check_answer(&w.regions, &w.frames, &fault, PAGER, answer), Err(rejection), "{answer:?}");
    }
}

#[test]
fn declines_and_defaults() {
    let w = world();
    let code = classify(&w.regions, CODE, AccessKind::Read, Pte::ABSENT);
    let cases = [
        (classify(&w.regions, HEAP, AccessKind::Write, Pte::ABSENT), Outcome::DemandZero { page: HEAP, protection: Protection::READ_WRITE }),
        (classify(&w.regions, HEAP, AccessKind::Execute, Pte::ABSENT), Outcome::Kill(KillCause::ProtectionViolation)),
        (classify(&w.regions, managed_page(0), AccessKind::Read, Pte::ABSENT), Outcome::Kill(KillCause::NoPager)),
        (code, Outcome::Fill { page: CODE, protection: Protection::READ_EXECUTE }),
        (classify(&w.regions, 0, AccessKind::Read, Pte::ABSENT), Outcome::Kill(KillCause::BadAddress)),
        (classify(&w.regions, HEAP, AccessKind::Read, Pte::mapped(Protection::READ_WRITE)), Outcome::Retry),
    ];
    for (fault, outcome) in cases {
        assert_eq!(default_outcome(&fault), outcome, "{fault:?}");
        assert_eq!(check_answer(&w.regions, &w.frames, &fault, PAGER, Answer::Decline), Ok(outcome));
        assert_eq!(resolve(&w.regions, &w.frames, &fault, None), Resolution { outcome, rejected: None });
    }
    // No trap on the heap: an answer is ignored, not checked.
    let heap_fault = classify(&w.regions, HEAP, AccessKind::Write, Pte::ABSENT);
    let ignored = resolve(&w.regions, &w.frames, &heap_fault, Some(map(HEAP, 0)));
    assert_eq!(ignored, Resolution { outcome: Outcome::DemandZero { page: HEAP, protection: Protection::READ_WRITE }, rejected: None });
    assert_eq!(w.heap, heap_fault.region.unwrap());
    assert!(KillCause::NoPager.to_string().contains("managed region"));
}

// ---- Appel & Li ---------------------------------------------------------------------

#[test]
fn dirty_answers_from_the_pte_after_checks() {
    let (table, ..) = regions();
    let written = Pte { present: true, readable: true, writable: true, executable: false, accessed: true, dirty: true };
    let clean = Pte { dirty: false, ..written };
    assert_eq!(table.dirty(HEAP, written), Ok(true));
    assert_eq!(table.dirty(HEAP, clean), Ok(false));
    assert_eq!(table.dirty(HEAP, Pte { present: false, ..written }), Ok(false), "not present: clean");
    assert_eq!(table.dirty(HEAP + 8, written), Err(PrimitiveError::Misaligned(HEAP + 8)));
    assert_eq!(table.dirty(0x8020_0000, written), Err(PrimitiveError::NotUserAddress(0x8020_0000)));
    assert_eq!(table.dirty(HEAP + 16 * PAGE_SIZE, written), Err(PrimitiveError::NoRegion(HEAP + 16 * PAGE_SIZE)));
}

#[test]
fn prot1_protn_unprotn() {
    let (mut table, heap, ..) = regions();
    let change = table.prot1(HEAP + PAGE_SIZE, Protection::READ).unwrap();
    assert_eq!(change, ProtChange { region: heap, start: HEAP + PAGE_SIZE, count: 1, protection: Protection::READ });
    assert_eq!(table.protection_of(HEAP + PAGE_SIZE + 100), Some(Protection::READ));
    assert_eq!(table.protection_of(HEAP), Some(Protection::READ_WRITE));
    table.prot_n(HEAP, 16, Protection::NONE).unwrap();
    assert_eq!(table.protected_pages(), 16);
    assert_eq!(table.protection_of(HEAP + 15 * PAGE_SIZE), Some(Protection::NONE));
    let change = table.unprot_n(HEAP + 4 * PAGE_SIZE, 4).unwrap();
    assert_eq!(change.protection, Protection::READ_WRITE, "unprotN restores the region's protection");
    assert_eq!(table.protected_pages(), 12);
    assert_eq!(table.protection_of(HEAP + 5 * PAGE_SIZE), Some(Protection::READ_WRITE));
    table.unprot_n(HEAP, 16).unwrap();
    assert_eq!(table.protected_pages(), 0, "back to the region's protection: nothing recorded");
}

#[test]
fn primitive_arguments_are_checked() {
    let (mut table, heap, ..) = regions();
    assert_eq!(table.prot1(HEAP + 1, Protection::READ), Err(PrimitiveError::Misaligned(HEAP + 1)));
    assert_eq!(table.prot1(0x8000_0000, Protection::READ), Err(PrimitiveError::NotUserAddress(0x8000_0000)));
    assert_eq!(table.prot1(HEAP + 16 * PAGE_SIZE, Protection::READ), Err(PrimitiveError::NoRegion(HEAP + 16 * PAGE_SIZE)));
    assert_eq!(table.prot1(HEAP, Protection::READ_EXECUTE), Err(PrimitiveError::AboveRegion(Protection::READ_EXECUTE)));
    assert_eq!(table.prot_n(HEAP, 0, Protection::READ), Err(PrimitiveError::BadCount(0)));
    assert_eq!(table.prot_n(HEAP, MAX_PROT_PAGES + 1, Protection::READ), Err(PrimitiveError::BadCount(MAX_PROT_PAGES + 1)));
    assert_eq!(table.prot_n(HEAP, 17, Protection::READ), Err(PrimitiveError::CrossesRegion { start: HEAP, count: 17 }));
    assert_eq!(table.prot_n(HEAP + 15 * PAGE_SIZE, 2, Protection::READ), Err(PrimitiveError::CrossesRegion { start: HEAP + 15 * PAGE_SIZE, count: 2 }));
    assert_eq!(table.unprot_n(HEAP, MAX_PROT_PAGES), Err(PrimitiveError::CrossesRegion { start: HEAP, count: MAX_PROT_PAGES }));
    assert_eq!(table.protected_pages(), 0, "a refused call records nothing");
    assert_eq!(table.region(heap).unwrap().protection, Protection::READ_WRITE);
    assert!(PrimitiveError::BadCount(0).to_string().contains("1 to 65536"));
}

#[test]
fn an_image_region_is_not_the_programs_to_protect_or_trap() {
    let (mut table, _, _, code) = regions();
    let mine = Trap { owner: Owner::AddressSpace(SPACE), handler: 1 };
    assert_eq!(table.prot1(CODE, Protection::READ), Err(PrimitiveError::Image(code)));
    assert_eq!(table.prot_n(CODE, 2, Protection::NONE), Err(PrimitiveError::Image(code)));
    assert_eq!(table.unprot_n(CODE, 1), Err(PrimitiveError::Image(code)));
    assert_eq!(table.check_protect(CODE, 1, Protection::READ), Err(PrimitiveError::Image(code)));
    assert_eq!(table.trap(code, mine), Err(PrimitiveError::Image(code)));
    assert_eq!(table.protected_pages(), 0, "nothing recorded");
    // Its faults: a missing page is filled; a store into code is a protection fault.
    let store = classify(&table, CODE + PAGE_SIZE, AccessKind::Write, Pte::ABSENT);
    assert_eq!(store.class, FaultClass::ProtectionFault);
    assert_eq!(default_outcome(&store), Outcome::Kill(KillCause::ProtectionViolation));
    let fetch = classify(&table, CODE + PAGE_SIZE + 12, AccessKind::Execute, Pte::ABSENT);
    assert_eq!(default_outcome(&fetch), Outcome::Fill { page: CODE + PAGE_SIZE, protection: Protection::READ_EXECUTE });
    assert!(PrimitiveError::Image(code).to_string().contains("image"));
}

#[test]
fn trap_registration() {
    let (mut table, heap, managed, _) = regions();
    let mine = Trap { owner: Owner::AddressSpace(SPACE), handler: 1 };
    assert_eq!(table.trap(heap, mine), Ok(None));
    assert_eq!(table.trap(heap, Trap { handler: 2, ..mine }), Ok(Some(mine)), "the same owner replaces its handler");
    let theirs = Trap { owner: PAGER, handler: 11 };
    assert_eq!(table.trap(managed, mine), Err(PrimitiveError::AlreadyTrapped(theirs)));
    assert_eq!(table.trap(99, mine), Err(PrimitiveError::NoSuchRegion(99)));
    assert_eq!(table.untrap(managed, Owner::AddressSpace(SPACE)), Err(PrimitiveError::NotTrapped(managed)));
    assert_eq!(table.untrap(managed, PAGER), Ok(theirs));
    assert_eq!(table.untrap(managed, PAGER), Err(PrimitiveError::NotTrapped(managed)));
    assert_eq!(table.trap(managed, mine), Ok(None), "free again");
    let fault = classify(&table, HEAP, AccessKind::Read, Pte::ABSENT);
    assert_eq!(fault.trap, Some(Trap { handler: 2, ..mine }), "the fault goes to the region's handler");
}

#[test]
fn removing_a_region_drops_its_page_protections() {
    let (mut table, heap, _, _) = regions();
    table.prot_n(HEAP, 4, Protection::READ).unwrap();
    table.prot_n(managed_page(0), 2, Protection::NONE).unwrap();
    table.remove(heap).unwrap();
    assert_eq!(table.protected_pages(), 2);
    assert_eq!(table.protection_of(HEAP), None);
}

// ---- swap ---------------------------------------------------------------------------

#[test]
fn swap_area_is_checked() {
    assert_eq!(SwapArea::new(0, 0).err(), Some(SwapError::BadSize(0)));
    assert_eq!(SwapArea::new(0, MAX_SLOTS + 1).err(), Some(SwapError::BadSize(MAX_SLOTS + 1)));
    assert_eq!(SwapArea::new(u64::MAX - 8, 2).err(), Some(SwapError::BadPlacement(u64::MAX - 8)));
    let area = SwapArea::new(1000, 70).unwrap();
    assert_eq!(area.sector(0), Ok(1000));
    assert_eq!(area.sector(69), Ok(1000 + 69 * SECTORS_PER_SLOT));
    assert_eq!(area.sector(70), Err(SwapError::OutOfRange(70)));
}

#[test]
fn swap_slots_allocate_free_and_detect_double_frees() {
    let mut area = SwapArea::new(0, 70).unwrap();
    let slots: Vec<Slot> = (0..70).map(|_| area.allocate().unwrap()).collect();
    assert_eq!(slots, (0..70).collect::<Vec<_>>(), "every slot once, none past the end");
    assert_eq!(area.allocate(), Err(SwapError::Full));
    assert_eq!((area.used(), area.free_slots()), (70, 0));
    area.free(65).unwrap();
    assert_eq!(area.free(65), Err(SwapError::DoubleFree(65)));
    assert_eq!(area.free(70), Err(SwapError::OutOfRange(70)));
    assert_eq!(area.free(u64::MAX), Err(SwapError::OutOfRange(u64::MAX)));
    assert_eq!(area.is_allocated(65), Ok(false));
    assert_eq!(area.allocate(), Ok(65));
    area.free(3).unwrap();
    assert_eq!(area.allocate(), Ok(3), "the search wraps around");
    assert!(SwapError::DoubleFree(3).to_string().contains("already free"));
}

#[test]
fn swap_random_sequence_never_duplicates_a_slot() {
    let mut area = SwapArea::new(8, 200).unwrap();
    let mut held: Vec<Slot> = Vec::new();
    let mut state = 0x1234_5678_u64;
    for _ in 0..5000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if !state.is_multiple_of(3) {
            match area.allocate() {
                Ok(slot) => {
                    assert!(!held.contains(&slot), "slot {slot} given twice");
                    held.push(slot);
                }
                Err(error) => assert_eq!((error, held.len()), (SwapError::Full, 200)),
            }
        } else if !held.is_empty() {
            let slot = held.swap_remove((state % held.len() as u64) as usize);
            area.free(slot).unwrap();
            assert_eq!(area.free(slot), Err(SwapError::DoubleFree(slot)));
        }
        assert_eq!(area.used(), held.len() as u64);
    }
}

#[test]
fn a_region_can_be_marked_managed() {
    let (mut table, heap, _, _) = regions();
    assert_eq!(table.set_kind(heap, RegionKind::Managed), Ok(RegionKind::Anonymous));
    let fault = classify(&table, HEAP, AccessKind::Read, Pte::ABSENT);
    assert_eq!(default_outcome(&fault), Outcome::Kill(KillCause::NoPager));
    assert_eq!(table.set_kind(99, RegionKind::Managed), Err(RegionError::NoSuchRegion(99)));
}

/// `check_change_in` takes only a region of its own table that contains the page, and
/// then answers what `check_change` answers.
#[test]
fn a_change_in_a_known_region_is_checked_as_any() {
    let (table, heap, managed, code) = regions();
    let (other, ..) = regions();
    let region = |id| table.region(id).unwrap();
    for (id, page, count, protection) in [
        (heap, HEAP + PAGE_SIZE, 2, Protection::READ),
        (heap, HEAP + 15 * PAGE_SIZE, 2, Protection::READ),
        (managed, managed_page(0), 8, Protection::NONE),
        (managed, managed_page(0), 0, Protection::NONE),
        (heap, HEAP, 1, Protection::READ_EXECUTE),
        (code, CODE, 1, Protection::READ),
    ] {
        let known = table.check_change_in(region(id), page, count, protection).map(|checked| *checked.change());
        assert_eq!(known, table.check_protect(page, count, protection), "region {id}, {count} pages from {page:#x}");
    }
    let copy = *region(heap);
    assert_eq!(table.check_change_in(&copy, HEAP, 1, Protection::READ).map(|_| ()), Err(PrimitiveError::NoRegion(HEAP)), "a copy is not the table's");
    assert_eq!(table.check_change_in(other.region(heap).unwrap(), HEAP, 1, Protection::READ).map(|_| ()), Err(PrimitiveError::NoRegion(HEAP)), "nor another table's");
    assert_eq!(table.check_change_in(region(managed), HEAP, 1, Protection::READ).map(|_| ()), Err(PrimitiveError::NoRegion(HEAP)), "the page is not in it");
    assert_eq!(table.check_change_in(region(heap), HEAP + 1, 1, Protection::READ).map(|_| ()), Err(PrimitiveError::NoRegion(HEAP + 1)));
}

/// A `FrameLookup` answers as the frame table does, and only a `Map` answer asks it.
#[test]
fn frames_are_looked_up_only_for_a_map() {
    let mut w = world();
    let asked = core::cell::Cell::new(0);
    let lookup = FrameLookup(|frame| {
        asked.set(asked.get() + 1);
        w.frames.info(frame)
    });
    let fault = classify(&w.regions, managed_page(2), AccessKind::Write, Pte::ABSENT);
    let answer = map(managed_page(2), w.granted);
    assert_eq!(check_answer(&w.regions, &lookup, &fault, PAGER, answer), check_answer(&w.regions, &w.frames, &fault, PAGER, answer));
    assert_eq!(asked.get(), 1);
    let stranger = map(managed_page(2), w.granted + 1);
    assert_eq!(check_answer(&w.regions, &lookup, &fault, PAGER, stranger), Err(AnswerRejection::NotGranted));
    assert_eq!(asked.get(), 2);
    w.regions.prot_n(managed_page(0), 8, Protection::READ).unwrap();
    let protection_fault = classify(&w.regions, managed_page(2), AccessKind::Write, Pte::mapped(Protection::READ));
    let unprotect = Answer::Protect { page: managed_page(2), count: 1, protection: Protection::READ_WRITE };
    assert!(matches!(resolve(&w.regions, &lookup, &protection_fault, Some(unprotect)).outcome, Outcome::Protect(_)));
    assert_eq!(asked.get(), 2, "a protection answer looks no frame up");
}

/// Tables made with unique ids never hand out one id twice, across tables; a plain table
/// counts from 1.
#[test]
fn unique_region_ids_are_unique_across_tables() {
    let mut first = RegionTable::with_unique_ids(1);
    let mut second = RegionTable::with_unique_ids(2);
    let mut ids = Vec::new();
    for index in 0..8u64 {
        let start = HEAP + index * 2 * PAGE_SIZE;
        ids.push(first.add(start, PAGE_SIZE, Protection::READ_WRITE, RegionKind::Anonymous).unwrap());
        ids.push(second.add(start, PAGE_SIZE, Protection::READ_WRITE, RegionKind::Anonymous).unwrap());
    }
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "an id handed out twice: {ids:?}");
    assert!(!ids.contains(&0), "0 means no region");
    assert!(first.region(ids[0]).is_some() && second.region(ids[1]).is_some() && first.region(ids[1]).is_none());
    let mut plain = RegionTable::new(3);
    assert_eq!(plain.add(HEAP, PAGE_SIZE, Protection::READ, RegionKind::Anonymous), Ok(1));
}
