//! A small fixed-capacity set of disjoint address ranges (usable before the heap exists).

/// Most disjoint ranges tracked; RAM on `virt` is one region with a few holes.
const CAPACITY: usize = 16;

/// Disjoint, sorted half-open ranges `[start, end)`.
#[derive(Clone)]
pub struct RangeSet {
    ranges: [(usize, usize); CAPACITY],
    length: usize,
}

impl Default for RangeSet {
    fn default() -> Self {
        Self::new()
    }
}

impl RangeSet {
    /// An empty set.
    pub const fn new() -> RangeSet {
        RangeSet { ranges: [(0, 0); CAPACITY], length: 0 }
    }

    /// The ranges, in address order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.ranges[..self.length].iter().copied()
    }

    /// Total bytes covered.
    pub fn total(&self) -> usize {
        self.iter().map(|(start, end)| end - start).sum()
    }

    /// Adds `[start, end)` (must not overlap existing ranges; extra ranges beyond the
    /// capacity are dropped, losing that memory rather than corrupting state).
    pub fn insert(&mut self, start: usize, end: usize) {
        if start >= end || self.length == CAPACITY {
            return;
        }
        let position = self.ranges[..self.length].iter().position(|&(s, _)| s > start).unwrap_or(self.length);
        self.ranges.copy_within(position..self.length, position + 1);
        self.ranges[position] = (start, end);
        self.length += 1;
    }

    /// Removes `[start, end)` from every range it overlaps.
    pub fn remove(&mut self, start: usize, end: usize) {
        let mut result = RangeSet::new();
        for (range_start, range_end) in self.iter() {
            if end <= range_start || start >= range_end {
                result.insert(range_start, range_end);
                continue;
            }
            result.insert(range_start, start.max(range_start).min(range_end));
            result.insert(end.min(range_end).max(range_start), range_end);
        }
        *self = result;
    }

    /// Shrinks every range inward to `alignment` boundaries, dropping empty ones.
    pub fn page_aligned(&self, alignment: usize) -> RangeSet {
        let mut result = RangeSet::new();
        for (start, end) in self.iter() {
            let aligned_start = start.div_ceil(alignment) * alignment;
            let aligned_end = end / alignment * alignment;
            result.insert(aligned_start, aligned_end);
        }
        result
    }

    /// Removes and returns the start of the first aligned block of `size` bytes.
    pub fn take_first_fit(&mut self, size: usize, alignment: usize) -> Option<usize> {
        let (start, _) = self.iter().find(|&(start, end)| {
            let aligned = start.div_ceil(alignment) * alignment;
            aligned + size <= end
        })?;
        let aligned = start.div_ceil(alignment) * alignment;
        self.remove(aligned, aligned + size);
        Some(aligned)
    }
}
