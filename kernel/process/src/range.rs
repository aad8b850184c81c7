//! The first check of a user pointer/length pair: inside the user region, no
//! wrap-around, under the call's limit. The kernel then checks every page the range
//! touches against the caller's page table ([`PageAccess::permits`]) before copying.

use core::ops::Range;

use spindle_abi::syscall::Error;

use crate::layout::{PAGE_SIZE, USER_REGION_END, USER_REGION_START, page_floor};

/// What a system call does with a user range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageAccess {
    /// The kernel reads it (input: `write`'s bytes, `spawn`'s command line).
    Read,
    /// The kernel writes it (output: `arguments`' buffer).
    Write,
}

impl PageAccess {
    /// Whether a page whose leaf entry has these bits may be accessed this way on the
    /// user's behalf: it must be valid and user-accessible, and readable (for
    /// [`PageAccess::Read`]) or writable (for [`PageAccess::Write`]).
    pub const fn permits(self, valid: bool, user: bool, readable: bool, writable: bool) -> bool {
        valid
            && user
            && match self {
                PageAccess::Read => readable,
                PageAccess::Write => writable,
            }
    }
}

/// Checks `address`/`length` as a system-call argument.
///
/// Returns the byte range, which is empty for `length` 0 (then `address` is not checked:
/// there is nothing to access). Errors: [`Error::BadLength`] if `length` is above
/// `max_length` or the range wraps around; [`Error::BadAddress`] if any byte lies outside
/// the user region.
pub fn user_range(address: usize, length: usize, max_length: usize) -> Result<Range<usize>, Error> {
    if length > max_length {
        return Err(Error::BadLength);
    }
    let end = address.checked_add(length).ok_or(Error::BadLength)?;
    if length == 0 {
        return Ok(address..address);
    }
    if address < USER_REGION_START || end > USER_REGION_END {
        return Err(Error::BadAddress);
    }
    Ok(address..end)
}

/// The page addresses a non-empty byte range touches, in order.
pub fn pages(range: &Range<usize>) -> impl Iterator<Item = usize> + use<> {
    let first = page_floor(range.start);
    let end = if range.is_empty() { first } else { range.end };
    (first..end).step_by(PAGE_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 64 * 1024;

    #[test]
    fn accepts_ranges_inside_user_space() {
        assert_eq!(user_range(USER_REGION_START, 1, LIMIT), Ok(USER_REGION_START..USER_REGION_START + 1));
        assert_eq!(user_range(USER_REGION_END - 10, 10, LIMIT), Ok(USER_REGION_END - 10..USER_REGION_END));
        assert_eq!(user_range(USER_REGION_START + 5, LIMIT, LIMIT).map(|range| range.len()), Ok(LIMIT));
    }

    #[test]
    fn empty_ranges_check_no_address() {
        assert_eq!(user_range(0, 0, LIMIT), Ok(0..0));
        assert_eq!(user_range(usize::MAX, 0, LIMIT), Ok(usize::MAX..usize::MAX));
        assert_eq!(pages(&(5..5)).count(), 0);
    }

    #[test]
    fn refuses_lengths_over_the_limit_and_wrapping_ranges() {
        assert_eq!(user_range(USER_REGION_START, LIMIT + 1, LIMIT), Err(Error::BadLength));
        assert_eq!(user_range(usize::MAX - 3, 8, LIMIT), Err(Error::BadLength));
        assert_eq!(user_range(USER_REGION_START, usize::MAX, usize::MAX), Err(Error::BadLength));
    }

    #[test]
    fn refuses_ranges_outside_user_space() {
        assert_eq!(user_range(0, 1, LIMIT), Err(Error::BadAddress));
        assert_eq!(user_range(0x8020_0000, 16, LIMIT), Err(Error::BadAddress), "the kernel image");
        assert_eq!(user_range(USER_REGION_START - 1, 2, LIMIT), Err(Error::BadAddress), "straddles the start");
        assert_eq!(user_range(USER_REGION_END - 1, 2, LIMIT), Err(Error::BadAddress), "straddles the end");
        assert_eq!(user_range(0x30_0000_0000, 8, LIMIT), Err(Error::BadAddress), "kernel strand stacks");
    }

    #[test]
    fn lists_every_page_touched() {
        let start = USER_REGION_START + PAGE_SIZE - 1;
        let touched: Vec<usize> = pages(&(start..start + 2)).collect();
        assert_eq!(touched, [USER_REGION_START, USER_REGION_START + PAGE_SIZE]);
        assert_eq!(pages(&(USER_REGION_START..USER_REGION_START + PAGE_SIZE)).count(), 1);
    }

    #[test]
    fn page_permissions() {
        assert!(PageAccess::Read.permits(true, true, true, false));
        assert!(!PageAccess::Read.permits(true, false, true, true), "kernel page");
        assert!(!PageAccess::Read.permits(false, true, true, true), "invalid entry");
        assert!(!PageAccess::Read.permits(true, true, false, false), "execute-only page");
        assert!(PageAccess::Write.permits(true, true, true, true));
        assert!(!PageAccess::Write.permits(true, true, true, false), "read-only page");
    }
}
