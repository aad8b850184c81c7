//! Guards: which raises a binding is interested in.
//!
//! Two kinds. *Declarative* guards are data (`args.field == value`, `low <= args.field <=
//! high`, `args.field & mask == value`), so the dispatcher can index them: when the binding
//! set changes it builds, per argument field, a sorted table of interval boundaries that
//! maps a field value to the set of bindings whose equality or range guard it satisfies
//! ([`FieldIndex`]). A raise then costs one binary search per indexed field, however many
//! bindings there are. *Predicate* guards are code (a Rust closure today; a Wasm function
//! or an upcall later) and are evaluated one by one, in order.
//!
//! A binding runs only if all its guards hold. Each binding has at most one *key* guard
//! (its first equality guard, else its first range guard) that goes into the index; its
//! other declarative guards and all its predicates are checked after the index lookup.
//!
//! Limitations: mask guards are never indexed (they are checked directly, which is still
//! cheap); values compare as unsigned `u64`; an event can have at most
//! [`MAX_BINDINGS_PER_EVENT`] bindings because candidate sets are fixed-size bit sets.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::{self, Write as _};

use spindle_abi::event::{EventRecord, FieldDesc};

/// The most bindings one event can have (candidate sets are bit sets of this width).
pub const MAX_BINDINGS_PER_EVENT: usize = 256;
/// Words in a candidate bit set.
const SET_WORDS: usize = MAX_BINDINGS_PER_EVENT / 64;

/// The test a declarative guard applies to one argument field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldTest {
    /// `field == value`.
    Equals(u64),
    /// `low <= field <= high` (both inclusive, unsigned).
    InRange {
        /// Smallest accepted value.
        low: u64,
        /// Largest accepted value.
        high: u64,
    },
    /// `field & mask == value`.
    Mask {
        /// Bits of the field that are tested.
        mask: u64,
        /// Required value of those bits.
        value: u64,
    },
}

/// A guard the dispatcher understands and indexes: a test on one argument field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeclarativeGuard {
    /// Index of the tested field in the argument record's `FIELDS` table.
    pub field: usize,
    /// The test.
    pub test: FieldTest,
}

impl DeclarativeGuard {
    /// `args.field == value`.
    pub const fn equals(field: usize, value: u64) -> Self {
        DeclarativeGuard { field, test: FieldTest::Equals(value) }
    }

    /// `low <= args.field <= high`.
    pub const fn in_range(field: usize, low: u64, high: u64) -> Self {
        DeclarativeGuard { field, test: FieldTest::InRange { low, high } }
    }

    /// `args.field & mask == value`.
    pub const fn mask(field: usize, mask: u64, value: u64) -> Self {
        DeclarativeGuard { field, test: FieldTest::Mask { mask, value } }
    }

    /// Whether the guard holds for `args`.
    #[inline]
    pub fn holds<A: EventRecord>(&self, args: &A) -> bool {
        let value = args.field(self.field);
        match self.test {
            FieldTest::Equals(expected) => value == expected,
            FieldTest::InRange { low, high } => low <= value && value <= high,
            FieldTest::Mask { mask, value: expected } => value & mask == expected,
        }
    }

    /// The interval of values the guard accepts, if it is one (equality, range, or a mask
    /// covering every bit); such a guard can be indexed.
    pub(crate) fn interval(&self) -> Option<(u64, u64)> {
        match self.test {
            FieldTest::Equals(value) => Some((value, value)),
            FieldTest::InRange { low, high } => Some((low, high)),
            FieldTest::Mask { mask: u64::MAX, value } => Some((value, value)),
            FieldTest::Mask { .. } => None,
        }
    }

    /// The guard as text, naming the field from `fields` (e.g. `port == 7`).
    pub fn describe(&self, fields: &[FieldDesc]) -> String {
        let mut text = String::new();
        let name = fields.get(self.field).map_or("?", |field| field.name);
        // Writing to a String cannot fail.
        let _ = match self.test {
            FieldTest::Equals(value) => write!(text, "{name} == {}", Number(value)),
            FieldTest::InRange { low, high } => {
                write!(text, "{} <= {name} <= {}", Number(low), Number(high))
            }
            FieldTest::Mask { mask, value } => write!(text, "{name} & {mask:#x} == {value:#x}"),
        };
        text
    }
}

/// Prints small numbers in decimal and large ones (addresses, hashes) in hex.
struct Number(u64);

impl fmt::Display for Number {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        const DECIMAL_LIMIT: u64 = 1 << 20;
        if self.0 < DECIMAL_LIMIT { write!(formatter, "{}", self.0) } else { write!(formatter, "{:#x}", self.0) }
    }
}

/// Code that decides whether a binding wants a raise. Closures implement it; later
/// technologies (a Wasm guard function, a user-level guard) implement it directly.
pub trait Guard<A>: Send + Sync {
    /// Whether the guarded handler should run for `args`.
    fn holds(&self, args: &A) -> bool;
}

impl<A, F> Guard<A> for F
where
    F: Fn(&A) -> bool + Send + Sync,
{
    fn holds(&self, args: &A) -> bool {
        self(args)
    }
}

/// A predicate guard with a description for introspection. Cheap to clone, so a primary
/// module can impose the same guard on many bindings.
pub struct PredicateGuard<A> {
    description: Arc<str>,
    guard: Arc<dyn Guard<A>>,
}

impl<A: 'static> PredicateGuard<A> {
    /// A guard from a closure, described by `description` (e.g. `"frame owned by caller"`).
    pub fn new(description: &str, predicate: impl Fn(&A) -> bool + Send + Sync + 'static) -> Self {
        PredicateGuard { description: Arc::from(description), guard: Arc::new(predicate) }
    }

    /// A guard from any [`Guard`] implementation (e.g. a Wasm function).
    pub fn from_guard(description: &str, guard: Arc<dyn Guard<A>>) -> Self {
        PredicateGuard { description: Arc::from(description), guard }
    }
}

impl<A> PredicateGuard<A> {
    /// Whether the guard holds for `args`.
    #[inline]
    pub fn holds(&self, args: &A) -> bool {
        self.guard.holds(args)
    }

    /// The guard's description.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl<A> Clone for PredicateGuard<A> {
    fn clone(&self) -> Self {
        PredicateGuard { description: self.description.clone(), guard: self.guard.clone() }
    }
}

impl<A> fmt::Debug for PredicateGuard<A> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_tuple("PredicateGuard").field(&self.description).finish()
    }
}

/// A set of binding positions (indices into a plan's ordered binding list).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BitSet {
    words: [u64; SET_WORDS],
}

impl BitSet {
    /// The empty set.
    pub(crate) const EMPTY: BitSet = BitSet { words: [0; SET_WORDS] };

    /// Adds `position` (< [`MAX_BINDINGS_PER_EVENT`]; larger positions are ignored).
    pub(crate) fn insert(&mut self, position: usize) {
        if let Some(word) = self.words.get_mut(position / 64) {
            *word |= 1 << (position % 64);
        }
    }

    /// Adds every member of `other`, looking only at the first `used_words` words.
    #[inline]
    pub(crate) fn union_with(&mut self, other: &BitSet, used_words: usize) {
        for (word, other_word) in self.words.iter_mut().zip(&other.words).take(used_words) {
            *word |= *other_word;
        }
    }

    /// The members in ascending order, looking only at the first `used_words` words.
    #[inline]
    pub(crate) fn members(self, used_words: usize) -> Members {
        Members { words: self.words, word: 0, used_words: used_words.min(SET_WORDS) }
    }

    /// Words needed for positions `0..count`.
    pub(crate) fn words_for(count: usize) -> usize {
        count.div_ceil(64).min(SET_WORDS)
    }
}

/// Iterator over a [`BitSet`]'s members, ascending.
pub(crate) struct Members {
    words: [u64; SET_WORDS],
    word: usize,
    used_words: usize,
}

impl Iterator for Members {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.word < self.used_words {
            let bits = self.words[self.word];
            if bits != 0 {
                self.words[self.word] = bits & (bits - 1);
                return Some(self.word * 64 + bits.trailing_zeros() as usize);
            }
            self.word += 1;
        }
        None
    }
}

/// The index over one argument field: maps a field value to the bindings whose key
/// guard on that field accepts it.
///
/// `starts` holds every interval boundary (each key guard's `low` and `high + 1`),
/// sorted and distinct; segment `i` is `starts[i] .. starts[i + 1]` and no boundary falls
/// inside it, so all its values are accepted by the same bindings, `members[i]`. Values
/// below `starts[0]` match nothing. Built in O(boundaries × bindings) when the binding set
/// changes; looked up with one binary search.
#[derive(Debug, Default)]
pub(crate) struct FieldIndex {
    /// The argument field this index is keyed on.
    pub(crate) field: usize,
    starts: Vec<u64>,
    members: Vec<BitSet>,
}

impl FieldIndex {
    /// Builds the index for `field` from `(position, low, high)` key intervals.
    pub(crate) fn build(field: usize, keys: &[(usize, u64, u64)]) -> FieldIndex {
        let mut starts: Vec<u64> = keys
            .iter()
            .flat_map(|&(_, low, high)| [Some(low), high.checked_add(1)])
            .flatten()
            .collect();
        starts.sort_unstable();
        starts.dedup();
        let members = starts
            .iter()
            .map(|&start| {
                let mut set = BitSet::EMPTY;
                for &(position, low, high) in keys {
                    if low <= start && start <= high {
                        set.insert(position);
                    }
                }
                set
            })
            .collect();
        FieldIndex { field, starts, members }
    }

    /// The bindings whose key guard on this field accepts `value`.
    #[inline]
    pub(crate) fn lookup(&self, value: u64) -> &BitSet {
        let segment = self.starts.partition_point(|&start| start <= value);
        match segment.checked_sub(1) {
            Some(segment) => self.members.get(segment).unwrap_or(&BitSet::EMPTY),
            None => &BitSet::EMPTY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(set: &BitSet) -> Vec<usize> {
        set.members(SET_WORDS).collect()
    }

    #[test]
    fn bit_set_iterates_in_order_across_words() {
        let mut set = BitSet::EMPTY;
        for position in [200, 3, 64, 0, 255, 1000] {
            set.insert(position);
        }
        assert_eq!(members(&set), [0, 3, 64, 200, 255]);
        assert_eq!(set.members(1).collect::<Vec<_>>(), [0, 3], "only the used words");
        assert_eq!(BitSet::words_for(65), 2);
    }

    #[test]
    fn index_maps_equalities_and_overlapping_ranges() {
        let keys = [(0, 7, 7), (1, 5, 10), (2, 10, u64::MAX), (3, 0, 0)];
        let index = FieldIndex::build(4, &keys);
        assert_eq!(members(index.lookup(0)), [3]);
        assert_eq!(members(index.lookup(4)), Vec::<usize>::new());
        assert_eq!(members(index.lookup(5)), [1]);
        assert_eq!(members(index.lookup(7)), [0, 1]);
        assert_eq!(members(index.lookup(8)), [1]);
        assert_eq!(members(index.lookup(10)), [1, 2]);
        assert_eq!(members(index.lookup(u64::MAX)), [2]);
    }

    #[test]
    fn index_agrees_with_direct_evaluation() {
        // Pseudo-random intervals, checked exhaustively over a small value range.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % 64
        };
        let keys: Vec<(usize, u64, u64)> = (0..40)
            .map(|position| {
                let (a, b) = (next(), next());
                (position, a.min(b), a.max(b))
            })
            .collect();
        let index = FieldIndex::build(0, &keys);
        for value in 0..70 {
            let expected: Vec<usize> = keys
                .iter()
                .filter(|&&(_, low, high)| low <= value && value <= high)
                .map(|&(position, _, _)| position)
                .collect();
            assert_eq!(members(index.lookup(value)), expected, "value {value}");
        }
    }

    #[test]
    fn declarative_guards_evaluate_and_describe() {
        spindle_abi::declare_records! {
            /// Test arguments.
            struct Packet {
                /// A port.
                port: u64,
                /// Some flags.
                flags: u32,
            }
        }
        let packet = Packet { port: 7, flags: 0b1010 };
        assert!(DeclarativeGuard::equals(0, 7).holds(&packet));
        assert!(!DeclarativeGuard::equals(0, 8).holds(&packet));
        assert!(DeclarativeGuard::in_range(0, 7, 9).holds(&packet));
        assert!(!DeclarativeGuard::in_range(0, 8, 9).holds(&packet));
        assert!(DeclarativeGuard::mask(1, 0b1000, 0b1000).holds(&packet));
        assert!(!DeclarativeGuard::mask(1, 0b0100, 0b0100).holds(&packet));
        assert_eq!(DeclarativeGuard::equals(0, 7).describe(Packet::FIELDS), "port == 7");
        assert_eq!(DeclarativeGuard::in_range(0, 1, 1 << 40).describe(Packet::FIELDS), "1 <= port <= 0x10000000000");
        assert_eq!(DeclarativeGuard::mask(1, 8, 8).describe(Packet::FIELDS), "flags & 0x8 == 0x8");
        assert_eq!(DeclarativeGuard::mask(1, u64::MAX, 3).interval(), Some((3, 3)));
        assert_eq!(DeclarativeGuard::mask(1, 1, 1).interval(), None);
    }
}
