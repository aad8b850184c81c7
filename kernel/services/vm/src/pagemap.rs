//! A map from page addresses to values (the kernel's: each resident page's frame), in
//! chunks of [`CHUNK_PAGES`] consecutive pages: a tree of chunks by address, and inside a
//! chunk an array indexed by the page. Adding the page after others of its chunk — what a
//! demand-zero fault does — is a tree lookup of the chunk and one store, where a tree of
//! pages moves entries within a node (and splits it) through `memmove`.
//!
//! Keys are page-aligned addresses. A chunk holds a slot per page (a `Box`ed array of
//! 32 slots: 768 bytes for the kernel's frame runs, one 1 KiB heap block), and goes when
//! its last page does.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use core::ops::Range;

use crate::region::PAGE_SIZE;

/// Pages per chunk (128 KiB of address space).
pub const CHUNK_PAGES: usize = 32;

/// Bytes of address space per chunk.
const CHUNK_BYTES: u64 = CHUNK_PAGES as u64 * PAGE_SIZE;

/// The pages of one chunk that have a value (the array alone on the heap), and how many do.
struct Chunk<V> {
    slots: Box<[Option<V>; CHUNK_PAGES]>,
    used: usize,
}

/// Values by page-aligned address (see the module documentation).
pub struct PageMap<V> {
    /// Chunks by their first page's address.
    chunks: BTreeMap<u64, Chunk<V>>,
    len: usize,
}

impl<V> Default for PageMap<V> {
    fn default() -> Self {
        PageMap::new()
    }
}

impl<V: core::fmt::Debug> core::fmt::Debug for PageMap<V> {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.debug_map().entries(self.iter()).finish()
    }
}

/// The chunk holding `page`, and the page's slot in it.
fn place(page: u64) -> (u64, usize) {
    debug_assert!(page.is_multiple_of(PAGE_SIZE), "page map key {page:#x} is not page-aligned");
    (page - page % CHUNK_BYTES, ((page % CHUNK_BYTES) / PAGE_SIZE) as usize)
}

impl<V> PageMap<V> {
    /// No pages.
    pub const fn new() -> PageMap<V> {
        PageMap { chunks: BTreeMap::new(), len: 0 }
    }

    /// Pages with a value.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no page has a value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value of `page`.
    pub fn get(&self, page: &u64) -> Option<&V> {
        let (chunk, slot) = place(*page);
        self.chunks.get(&chunk)?.slots[slot].as_ref()
    }

    /// Whether `page` has a value.
    pub fn contains_key(&self, page: &u64) -> bool {
        self.get(page).is_some()
    }

    /// Gives `page` `value`; returns the value it had.
    pub fn insert(&mut self, page: u64, value: V) -> Option<V> {
        let (start, slot) = place(page);
        let chunk = self.chunks.entry(start).or_insert_with(|| Chunk { slots: Box::new(core::array::from_fn(|_| None)), used: 0 });
        let previous = chunk.slots[slot].replace(value);
        if previous.is_none() {
            chunk.used += 1;
            self.len += 1;
        }
        previous
    }

    /// Takes `page`'s value away.
    pub fn remove(&mut self, page: &u64) -> Option<V> {
        let (start, slot) = place(*page);
        let chunk = self.chunks.get_mut(&start)?;
        let value = chunk.slots[slot].take()?;
        chunk.used -= 1;
        self.len -= 1;
        if chunk.used == 0 {
            self.chunks.remove(&start);
        }
        Some(value)
    }

    /// Every page with a value, in address order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.chunks.iter().flat_map(|(&start, chunk)| Self::pages_of(start, chunk))
    }

    /// Every page with a value, in address order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(page, _)| page)
    }

    /// The pages with a value in `range` (addresses), in address order.
    pub fn range(&self, range: Range<u64>) -> impl Iterator<Item = (u64, &V)> + '_ {
        let first_chunk = range.start - range.start % CHUNK_BYTES;
        let end = range.end;
        let start = range.start;
        self.chunks
            .range(first_chunk..end.max(first_chunk))
            .flat_map(|(&chunk, values)| Self::pages_of(chunk, values))
            .filter(move |&(page, _)| start <= page && page < end)
    }

    /// The pages of the chunk starting at `start` that have a value.
    fn pages_of(start: u64, chunk: &Chunk<V>) -> impl Iterator<Item = (u64, &V)> + '_ {
        chunk.slots.iter().enumerate().filter_map(move |(slot, value)| value.as_ref().map(|value| (start + slot as u64 * PAGE_SIZE, value)))
    }

    /// Every page's value, the map emptied (in address order).
    pub fn into_values(self) -> impl Iterator<Item = V> {
        self.chunks.into_values().flat_map(|chunk| chunk.slots.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    const BASE: u64 = 0x14_0000_0000;

    /// The map against a `BTreeMap` of pages under random inserts and removes across chunk
    /// boundaries: every answer, the order, ranges and the length agree, and empty chunks
    /// go.
    #[test]
    fn agrees_with_a_tree_of_pages() {
        let mut next = crate::runs::tests::numbers(0x1234_5678_9abc_def1);
        let mut map = PageMap::new();
        let mut model = BTreeMap::new();
        for round in 0..4000u64 {
            let page = BASE + next(300) * PAGE_SIZE;
            if next(3) == 0 {
                assert_eq!(map.remove(&page), model.remove(&page));
            } else {
                assert_eq!(map.insert(page, round), model.insert(page, round));
            }
            assert_eq!(map.len(), model.len());
            assert_eq!(map.get(&page), model.get(&page));
            assert_eq!(map.contains_key(&(page + PAGE_SIZE)), model.contains_key(&(page + PAGE_SIZE)));
            if round % 97 == 0 {
                let ours: Vec<(u64, u64)> = map.iter().map(|(page, &value)| (page, value)).collect();
                let theirs: Vec<(u64, u64)> = model.iter().map(|(&page, &value)| (page, value)).collect();
                assert_eq!(ours, theirs);
                let (low, high) = (BASE + next(300) * PAGE_SIZE, BASE + next(300) * PAGE_SIZE);
                let ours: Vec<u64> = map.range(low..high).map(|(page, _)| page).collect();
                let theirs: Vec<u64> = model.range(low..high.max(low)).map(|(&page, _)| page).collect();
                assert_eq!(ours, theirs, "range {low:#x}..{high:#x}");
                assert!(map.chunks.values().all(|chunk| chunk.used > 0 && chunk.used == chunk.slots.iter().flatten().count()));
            }
        }
        let keys: Vec<u64> = map.keys().collect();
        assert_eq!(keys, model.keys().copied().collect::<Vec<_>>());
        let values: Vec<u64> = map.into_values().collect();
        assert_eq!(values, model.into_values().collect::<Vec<_>>());
    }

    #[test]
    fn the_last_page_of_a_chunk_takes_the_chunk_with_it() {
        let mut map = PageMap::new();
        let last = BASE + (CHUNK_PAGES as u64 - 1) * PAGE_SIZE;
        map.insert(BASE, 'a');
        map.insert(last, 'b');
        map.insert(last + PAGE_SIZE, 'c');
        assert_eq!(map.chunks.len(), 2, "the page after the last is the next chunk's");
        assert_eq!(map.remove(&BASE), Some('a'));
        assert_eq!(map.remove(&last), Some('b'));
        assert_eq!(map.chunks.len(), 1);
        assert_eq!(map.remove(&last), None);
        assert_eq!(map.len(), 1);
        assert!(!map.is_empty());
        assert_eq!(map.range(0..u64::MAX).count(), 1);
        assert_eq!(map.range(last..last).count(), 0, "an empty range");
    }
}
