//! The user address space (Sv39 lower half).
//!
//! | range | what |
//! |---|---|
//! | `0x0` .. `0x10_0000_0000` | not user space: the kernel's identity map of devices and RAM lives here (global, not user-accessible) |
//! | `0x10_0000_0000` .. `0x10_4000_0000` | the program image, as linked (`userspace/user.ld` links at [`IMAGE_BASE`]) |
//! | `0x14_0000_0000` .. `0x18_0000_0000` | anonymous mappings (`map_anonymous`), each followed by an unmapped guard page |
//! | [`STACK_GUARD`] .. [`STACK_BOTTOM`] | the stack's guard page (never mapped) |
//! | [`STACK_BOTTOM`] .. [`STACK_TOP`] | the user stack ([`STACK_SIZE`]) |
//! | [`STACK_TOP`] .. `0x20_0000_0000` | one unmapped page |
//! | `0x20_0000_0000` .. `0x40_0000_0000` | not user space: kernel strand stacks, extension images (shared, not user-accessible) |
//!
//! User space is whole top-level (1 GiB) page-table slots ([`USER_ROOT_SLOTS`]) that the
//! kernel never uses, so each process's root table can share the kernel's top-level
//! entries for every other slot: traps need no `satp` switch to run kernel code.

use core::ops::Range;

/// Size of a base page.
pub const PAGE_SIZE: usize = 4096;
/// Bytes mapped by one top-level (root) page-table entry in Sv39.
pub const ROOT_SLOT_SIZE: usize = 1 << 30;

/// First user-space address.
pub const USER_REGION_START: usize = 0x10_0000_0000;
/// One past the last user-space address.
pub const USER_REGION_END: usize = 0x20_0000_0000;
/// The top-level page-table slots user space occupies; every other slot is the kernel's.
pub const USER_ROOT_SLOTS: Range<usize> = USER_REGION_START / ROOT_SLOT_SIZE..USER_REGION_END / ROOT_SLOT_SIZE;

/// Where programs are linked (must match `userspace/user.ld`).
pub const IMAGE_BASE: usize = USER_REGION_START;
/// Every `PT_LOAD` segment must lie inside this range.
pub const IMAGE_REGION: Range<usize> = IMAGE_BASE..IMAGE_BASE + ROOT_SLOT_SIZE;
/// Largest program image (page-rounded sum of its segments).
pub const MAX_IMAGE_SIZE: usize = 16 * 1024 * 1024;
/// Most `PT_LOAD` segments an executable may have.
pub const MAX_SEGMENTS: usize = 16;

/// Anonymous mappings are placed inside this range.
pub const ANONYMOUS_REGION: Range<usize> = 0x14_0000_0000..0x18_0000_0000;

/// One past the highest stack address: the initial stack pointer (16-byte aligned).
pub const STACK_TOP: usize = USER_REGION_END - PAGE_SIZE;
/// Size of the user stack.
pub const STACK_SIZE: usize = 64 * 1024;
/// Lowest stack address.
pub const STACK_BOTTOM: usize = STACK_TOP - STACK_SIZE;
/// Start of the unmapped guard page below the stack: an overflow faults here.
pub const STACK_GUARD: usize = STACK_BOTTOM - PAGE_SIZE;

// The layout's invariants, checked at compile time: user space is whole root slots of
// the Sv39 lower half, and the image, anonymous and stack regions are inside it, disjoint
// and in this order.
const _: () = {
    assert!(USER_REGION_START.is_multiple_of(ROOT_SLOT_SIZE) && USER_REGION_END.is_multiple_of(ROOT_SLOT_SIZE));
    assert!(USER_REGION_END <= 1 << 38);
    assert!(IMAGE_REGION.start >= USER_REGION_START && IMAGE_REGION.end <= ANONYMOUS_REGION.start);
    assert!(ANONYMOUS_REGION.end <= STACK_GUARD);
    assert!(STACK_TOP < USER_REGION_END && STACK_TOP.is_multiple_of(16));
};

/// Rounds `address` down to a page boundary.
pub const fn page_floor(address: usize) -> usize {
    address & !(PAGE_SIZE - 1)
}

/// Rounds `address` up to a page boundary; `None` on overflow.
pub const fn page_ceil(address: usize) -> Option<usize> {
    match address.checked_add(PAGE_SIZE - 1) {
        Some(sum) => Some(sum & !(PAGE_SIZE - 1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_space_is_root_slots_64_to_128() {
        assert_eq!(USER_ROOT_SLOTS, 64..128);
    }

    #[test]
    fn the_user_linker_script_links_at_the_image_base() {
        let script = include_str!("../../../userspace/user.ld");
        let expected = alloc::format!("IMAGE_BASE = {IMAGE_BASE:#x};");
        assert!(script.contains(&expected), "userspace/user.ld must say `{expected}`");
    }

    #[test]
    fn page_rounding() {
        assert_eq!(page_floor(0x1fff), 0x1000);
        assert_eq!(page_ceil(0x1001), Some(0x2000));
        assert_eq!(page_ceil(0x1000), Some(0x1000));
        assert_eq!(page_ceil(usize::MAX), None);
    }
}
