//! Byte ranges and lock kinds, and the conflict rule.
//!
//! A [`Range`] is the half-open interval `[start, end)` of byte offsets, never empty. An
//! end of `u64::MAX` means "to the end of the file, however long it grows" (POSIX's
//! `l_len == 0`); the byte at offset `u64::MAX` itself can therefore not be named, which
//! no file reaches. Ranges are only made by the checked constructors, so every `Range` a
//! function receives is valid: an untrusted caller's numbers are checked once, where the
//! range is made ([`RangeError`]).
//!
//! Two locks conflict when they belong to different owners, their ranges overlap, and at
//! least one of them is a [`LockKind::Write`] ([`conflicts`]). Locks of the same owner never
//! conflict with each other.

use core::fmt;

/// A process that owns locks (the kernel's process id).
pub type OwnerId = u32;

/// The shared (`Read`) or exclusive (`Write`) kind of a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum LockKind {
    /// Shared: any number of owners may hold overlapping read locks.
    Read = 0,
    /// Exclusive: no other owner may hold an overlapping lock of either kind.
    Write = 1,
}

impl LockKind {
    /// Both kinds, `Read` first.
    pub const ALL: [LockKind; 2] = [LockKind::Read, LockKind::Write];

    /// `read` or `write`.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Read => "read",
            LockKind::Write => "write",
        }
    }

    /// The kind with the wire code `code` (0 read, 1 write), if any.
    pub fn from_code(code: u8) -> Option<LockKind> {
        match code {
            0 => Some(LockKind::Read),
            1 => Some(LockKind::Write),
            _ => None,
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A non-empty half-open byte range `[start, end)`; `end == u64::MAX` means "to the end
/// of the file".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Range {
    start: u64,
    end: u64,
}

/// Why numbers do not make a [`Range`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeError {
    /// `end <= start` (or a length of 0): the range holds no byte.
    Empty {
        /// The first offset asked for.
        start: u64,
        /// The end asked for (for a length, `start + length` as far as it goes).
        end: u64,
    },
    /// `start + length` does not fit in 64 bits.
    Overflow {
        /// The first offset asked for.
        start: u64,
        /// The length asked for.
        length: u64,
    },
}

impl RangeError {
    /// The reason in words.
    pub fn reason(self) -> &'static str {
        match self {
            RangeError::Empty { .. } => "the range is empty",
            RangeError::Overflow { .. } => "the range's end overflows 64 bits",
        }
    }
}

impl fmt::Display for RangeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeError::Empty { start, end } => {
                write!(formatter, "the range [{start}, {end}) is empty")
            }
            RangeError::Overflow { start, length } => {
                write!(formatter, "the range of {length} bytes from {start} ends past 2^64")
            }
        }
    }
}

impl core::error::Error for RangeError {}

impl Range {
    /// The whole file, `[0, end of file)`.
    pub const WHOLE: Range = Range { start: 0, end: u64::MAX };

    /// `[start, end)`. Errors: [`RangeError::Empty`] when `end <= start`.
    pub const fn new(start: u64, end: u64) -> Result<Range, RangeError> {
        if end <= start { Err(RangeError::Empty { start, end }) } else { Ok(Range { start, end }) }
    }

    /// `length` bytes from `start`. Errors: [`RangeError::Empty`] for a length of 0 (use
    /// [`Range::to_end`] for POSIX's "to the end of the file"), [`RangeError::Overflow`]
    /// when the end does not fit in 64 bits. An end of exactly `u64::MAX` is "to the end".
    pub const fn with_length(start: u64, length: u64) -> Result<Range, RangeError> {
        match start.checked_add(length) {
            Some(end) => Range::new(start, end),
            None => Err(RangeError::Overflow { start, length }),
        }
    }

    /// From `start` to the end of the file. Errors: [`RangeError::Empty`] for
    /// `start == u64::MAX`.
    pub const fn to_end(start: u64) -> Result<Range, RangeError> {
        Range::new(start, u64::MAX)
    }

    /// The first byte.
    pub const fn start(self) -> u64 {
        self.start
    }

    /// One past the last byte (`u64::MAX`: to the end of the file).
    pub const fn end(self) -> u64 {
        self.end
    }

    /// Whether the range runs to the end of the file.
    pub const fn is_to_end(self) -> bool {
        self.end == u64::MAX
    }

    /// Bytes covered (`u64::MAX - start` for a range to the end of the file).
    pub const fn len(self) -> u64 {
        self.end - self.start
    }

    /// Never: a `Range` holds at least one byte (for symmetry with [`Range::len`]).
    pub const fn is_empty(self) -> bool {
        false
    }

    /// Whether the two ranges share a byte.
    pub const fn overlaps(self, other: Range) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// Whether the two ranges share a byte or are adjacent (one ends where the other
    /// starts): locks of one owner and kind on such ranges merge into one.
    pub const fn touches(self, other: Range) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    /// Whether `other` lies entirely inside this range.
    pub const fn contains(self, other: Range) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// The smallest range covering both (meaningful when they touch).
    pub fn union(self, other: Range) -> Range {
        Range { start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    /// The parts of this range outside `cut`: the part before it and the part after it,
    /// each `None` when empty.
    pub fn minus(self, cut: Range) -> (Option<Range>, Option<Range>) {
        let before = (self.start < cut.start).then(|| Range { start: self.start, end: self.end.min(cut.start) });
        let after = (cut.end < self.end).then(|| Range { start: self.start.max(cut.end), end: self.end });
        (before.filter(|range| range.start < range.end), after.filter(|range| range.start < range.end))
    }
}

impl fmt::Display for Range {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_to_end() { write!(formatter, "[{}, EOF)", self.start) } else { write!(formatter, "[{}, {})", self.start, self.end) }
    }
}

/// Whether a lock (`owner`, `kind`, `range`) conflicts with another
/// (`other_owner`, `other_kind`, `other_range`): different owners, overlapping ranges, and
/// at least one write.
pub fn conflicts(owner: OwnerId, kind: LockKind, range: Range, other_owner: OwnerId, other_kind: LockKind, other_range: Range) -> bool {
    owner != other_owner && (kind == LockKind::Write || other_kind == LockKind::Write) && range.overlaps(other_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: u64, end: u64) -> Range {
        Range::new(start, end).unwrap()
    }

    #[test]
    fn ranges_are_checked_when_made() {
        assert_eq!(Range::new(5, 5), Err(RangeError::Empty { start: 5, end: 5 }));
        assert_eq!(Range::new(6, 5), Err(RangeError::Empty { start: 6, end: 5 }));
        assert_eq!(Range::with_length(3, 0), Err(RangeError::Empty { start: 3, end: 3 }));
        assert_eq!(Range::with_length(u64::MAX, 1), Err(RangeError::Overflow { start: u64::MAX, length: 1 }));
        assert_eq!(Range::with_length(2, u64::MAX), Err(RangeError::Overflow { start: 2, length: u64::MAX }));
        assert_eq!(Range::with_length(1, u64::MAX - 1), Ok(Range::to_end(1).unwrap()), "an end of u64::MAX is to the end");
        assert_eq!(Range::to_end(u64::MAX), Err(RangeError::Empty { start: u64::MAX, end: u64::MAX }));
        assert_eq!(Range::with_length(10, 4).map(|range| (range.start(), range.end(), range.len())), Ok((10, 14, 4)));
        assert!(Range::WHOLE.is_to_end() && !range(0, 1).is_to_end());
        assert_eq!(alloc::format!("{}", RangeError::Empty { start: 5, end: 5 }), "the range [5, 5) is empty");
        assert_eq!(
            alloc::format!("{}", RangeError::Overflow { start: u64::MAX, length: 1 }),
            "the range of 1 bytes from 18446744073709551615 ends past 2^64"
        );
        assert_eq!(alloc::format!("{} {}", range(1, 2), Range::to_end(7).unwrap()), "[1, 2) [7, EOF)");
    }

    #[test]
    fn overlap_touch_and_cut() {
        assert!(range(0, 10).overlaps(range(9, 20)));
        assert!(!range(0, 10).overlaps(range(10, 20)), "half-open: adjacent ranges do not overlap");
        assert!(range(0, 10).touches(range(10, 20)) && !range(0, 10).touches(range(11, 20)));
        assert!(range(0, 10).contains(range(2, 3)) && !range(0, 10).contains(range(5, 11)));
        assert_eq!(range(0, 10).minus(range(3, 5)), (Some(range(0, 3)), Some(range(5, 10))));
        assert_eq!(range(0, 10).minus(range(0, 5)), (None, Some(range(5, 10))));
        assert_eq!(range(0, 10).minus(range(5, 20)), (Some(range(0, 5)), None));
        assert_eq!(range(3, 4).minus(Range::WHOLE), (None, None));
        assert_eq!(range(0, 10).union(range(10, 12)), range(0, 12));
    }

    #[test]
    fn the_conflict_rule() {
        use LockKind::{Read, Write};
        let (a, b) = (range(0, 10), range(5, 15));
        assert!(!conflicts(1, Read, a, 2, Read, b), "readers share");
        assert!(conflicts(1, Read, a, 2, Write, b) && conflicts(1, Write, a, 2, Read, b) && conflicts(1, Write, a, 2, Write, b));
        assert!(!conflicts(1, Write, a, 1, Write, b), "one owner never conflicts with itself");
        assert!(!conflicts(1, Write, range(0, 5), 2, Write, range(5, 6)), "disjoint ranges never conflict");
        assert_eq!(LockKind::from_code(1), Some(Write));
        assert_eq!(LockKind::from_code(2), None);
    }
}
