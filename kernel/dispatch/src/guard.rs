//! Guards: which raises a binding is interested in.
//!
//! Two kinds. *Declarative* guards are data (`args.field == value`, `low <= args.field <=
//! high`, `args.field & mask == value`), so the dispatcher can index them: when the binding
//! set changes it builds, per argument field, a table that maps a field value to the list
//! of bindings whose equality or range guard it satisfies ([`FieldIndex`]): a hash table
//! when every key on the field is an equality, else sorted interval boundaries. A raise
//! then costs one hash probe (or one binary search) per indexed field, however many
//! bindings there are. *Predicate* guards are code (a Rust closure today; a Wasm function
//! or an upcall later) and are evaluated one by one, in order.
//!
//! A binding runs only if all its guards hold. Each binding has at most one *key* guard
//! (its first equality guard, else its first range guard) that goes into the index; its
//! other declarative guards and all its predicates are checked after the index lookup.
//!
//! Limitations: mask guards are never indexed (they are checked directly, which is still
//! cheap); values compare as unsigned `u64`; an event can have at most
//! [`MAX_BINDINGS_PER_EVENT`] bindings because candidate lists hold one-byte positions. An
//! index holds a candidate list per distinct key value (per interval segment for ranges),
//! each including the unkeyed bindings, so its size is quadratic in the worst case: about
//! 25 KiB per indexed field with equality keys, 140 KiB with 256 overlapping ranges.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::{self, Write as _};

use spindle_abi::event::{EventRecord, FieldDesc};

/// The most bindings one event can have (candidate lists hold one-byte positions).
pub const MAX_BINDINGS_PER_EVENT: usize = 256;
/// Words in a [`BitSet`].
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
    shared: Arc<SharedGuard<A>>,
}

/// A predicate guard's description and code, shared by its clones.
struct SharedGuard<A> {
    description: Box<str>,
    /// Boxed rather than an `Arc<dyn Guard>`: calling through an `Arc<dyn _>` must first
    /// find the value using the alignment stored in the vtable (four more instructions
    /// per evaluation on RISC-V), a `Box` points at its value.
    guard: Box<dyn Guard<A>>,
}

/// A guard shared by its creator (see [`PredicateGuard::from_guard`]), called through it.
struct ForwardedGuard<A>(Arc<dyn Guard<A>>);

impl<A> Guard<A> for ForwardedGuard<A> {
    fn holds(&self, args: &A) -> bool {
        self.0.holds(args)
    }
}

impl<A: 'static> PredicateGuard<A> {
    /// A guard from a closure, described by `description` (e.g. `"frame owned by caller"`).
    pub fn new(description: &str, predicate: impl Fn(&A) -> bool + Send + Sync + 'static) -> Self {
        let guard = Box::new(predicate);
        PredicateGuard { shared: Arc::new(SharedGuard { description: Box::from(description), guard }) }
    }

    /// A guard from any [`Guard`] implementation (e.g. a Wasm function).
    pub fn from_guard(description: &str, guard: Arc<dyn Guard<A>>) -> Self {
        let guard = Box::new(ForwardedGuard(guard));
        PredicateGuard { shared: Arc::new(SharedGuard { description: Box::from(description), guard }) }
    }
}

impl<A> PredicateGuard<A> {
    /// Whether the guard holds for `args`.
    #[inline]
    pub fn holds(&self, args: &A) -> bool {
        self.shared.guard.holds(args)
    }

    /// The guard's description.
    pub fn description(&self) -> &str {
        &self.shared.description
    }
}

impl<A> Clone for PredicateGuard<A> {
    fn clone(&self) -> Self {
        PredicateGuard { shared: self.shared.clone() }
    }
}

impl<A> fmt::Debug for PredicateGuard<A> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_tuple("PredicateGuard").field(&self.description()).finish()
    }
}

/// A binding's position in a plan's ordered binding list, as candidate lists hold it: one
/// byte, since an event has at most [`MAX_BINDINGS_PER_EVENT`] bindings.
pub(crate) type Position = u8;
const _: () = assert!(MAX_BINDINGS_PER_EVENT <= Position::MAX as usize + 1);

/// The bindings a raise must consider, in run order.
///
/// A list rather than a bit set because walking it is what a raise does: one byte load per
/// candidate, where a bit set costs a find-first-set (a multiply and a table lookup on
/// RISC-V without Zbb) and a loop over its words, and keeps more registers busy.
pub(crate) type CandidateList = Box<[Position]>;

/// A set of binding positions, for building candidate lists.
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

    /// Adds every member of `list`.
    pub(crate) fn insert_all(&mut self, list: &[Position]) {
        for &position in list {
            self.insert(usize::from(position));
        }
    }

    /// The members in ascending order.
    pub(crate) fn members(&self) -> impl Iterator<Item = Position> + '_ {
        self.words.iter().enumerate().flat_map(|(word_index, &word)| {
            let mut bits = word;
            core::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // Below MAX_BINDINGS_PER_EVENT, so it fits (asserted above).
                Some((word_index * 64 + bit) as Position)
            })
        })
    }

    /// The members as a candidate list.
    pub(crate) fn candidate_list(&self) -> CandidateList {
        self.members().collect()
    }
}

/// Multiplier of the exact-value index's hash (2^64 / golden ratio: Fibonacci hashing,
/// which spreads consecutive keys such as ports or ids over the whole table).
const FIBONACCI_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// How a [`FieldIndex`] maps a field value to its candidate list.
#[derive(Debug)]
enum Segments {
    /// Every key is a single value: an open-addressing hash table (linear probing, at
    /// most half full) from value to candidate list. A slot with an empty list is free
    /// (a key's list is never empty: it holds the key's own binding).
    Exact {
        slots: Box<[(u64, CandidateList)]>,
        /// `64 - log2(slots.len())`: the hash is the top bits of `value * FIBONACCI`.
        shift: u32,
    },
    /// Some key is a range: sorted, distinct interval boundaries (`low` and `high + 1` of
    /// every key). No boundary falls inside `starts[i - 1] .. starts[i]`, so all its values
    /// are accepted by the same keys: `lists[i - 1]` is its candidate list. Values below
    /// `starts[0]` have the base list. One binary search per lookup.
    Intervals { starts: Box<[u64]>, lists: Box<[CandidateList]> },
}

/// The index over one argument field: maps a field value to the candidate list of a
/// raise with that value, i.e. the bindings whose key guard on that field accepts it
/// plus a fixed *base* (the plan's bindings without a key, candidates for every raise),
/// in run order.
///
/// Folding the base into every list when the index is built means that a raise on an
/// event with one indexed field walks the looked-up list as it is. Equality keys (the
/// common case: `port == k`, a command's fingerprint) are found by hashing, in constant
/// time however many there are; ranges by binary search. Built in O(lists × bindings)
/// when the binding set changes.
#[derive(Debug)]
pub(crate) struct FieldIndex {
    /// The argument field this index is keyed on.
    pub(crate) field: usize,
    segments: Segments,
    /// The candidate list of values no key accepts.
    base: CandidateList,
}

impl FieldIndex {
    /// Builds the index for `field` from `(position, low, high)` key intervals, with
    /// `base` in every answer.
    pub(crate) fn build(field: usize, keys: &[(usize, u64, u64)], base: BitSet) -> FieldIndex {
        let list_of = |accepts: &dyn Fn(u64, u64) -> bool| {
            let mut set = base;
            for &(position, low, high) in keys {
                if accepts(low, high) {
                    set.insert(position);
                }
            }
            set.candidate_list()
        };
        let segments = if keys.iter().all(|&(_, low, high)| low == high) {
            let mut values: Vec<u64> = keys.iter().map(|&(_, value, _)| value).collect();
            values.sort_unstable();
            values.dedup();
            let capacity = (values.len() * 2).next_power_of_two().max(2);
            let mut slots: Box<[(u64, CandidateList)]> = (0..capacity).map(|_| (0, CandidateList::default())).collect();
            let shift = 64 - capacity.trailing_zeros();
            for &value in &values {
                let mut slot = exact_slot(value, shift);
                while !slots[slot].1.is_empty() {
                    slot = (slot + 1) & (capacity - 1);
                }
                slots[slot] = (value, list_of(&|low, _| low == value));
            }
            Segments::Exact { slots, shift }
        } else {
            let mut starts: Vec<u64> = keys
                .iter()
                .flat_map(|&(_, low, high)| [Some(low), high.checked_add(1)])
                .flatten()
                .collect();
            starts.sort_unstable();
            starts.dedup();
            let lists = starts.iter().map(|&start| list_of(&|low, high| low <= start && start <= high)).collect();
            Segments::Intervals { starts: starts.into_boxed_slice(), lists }
        };
        FieldIndex { field, segments, base: base.candidate_list() }
    }

    /// The candidate list for a raise whose field has `value`: the base and the bindings
    /// whose key guard on this field accepts `value`, in run order.
    #[inline]
    pub(crate) fn lookup(&self, value: u64) -> &[Position] {
        match &self.segments {
            Segments::Exact { slots, shift } => {
                let mask = slots.len() - 1;
                let mut slot = exact_slot(value, *shift);
                // Terminates: the table is at most half full.
                loop {
                    match slots.get(slot) {
                        // A free slot: no key has this value.
                        Some((_, list)) if list.is_empty() => break &self.base,
                        Some((key, list)) if *key == value => break list,
                        Some(_) => slot = (slot + 1) & mask,
                        None => break &self.base,
                    }
                }
            }
            Segments::Intervals { starts, lists } => {
                let segment = starts.partition_point(|&start| start <= value);
                segment.checked_sub(1).and_then(|segment| lists.get(segment)).unwrap_or(&self.base)
            }
        }
    }
}

/// The home slot of `value` in an exact-value table of `2^(64 - shift)` slots.
#[inline]
fn exact_slot(value: u64, shift: u32) -> usize {
    (value.wrapping_mul(FIBONACCI_MULTIPLIER) >> shift) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[Position]) -> Vec<usize> {
        list.iter().map(|&position| usize::from(position)).collect()
    }

    #[test]
    fn bit_set_iterates_in_order_across_words() {
        let mut set = BitSet::EMPTY;
        for position in [200, 3, 64, 0, 255, 1000] {
            set.insert(position);
        }
        assert_eq!(members(&set.candidate_list()), [0, 3, 64, 200, 255]);
        let mut union = BitSet::EMPTY;
        union.insert(1);
        union.insert_all(&set.candidate_list());
        assert_eq!(members(&union.candidate_list()), [0, 1, 3, 64, 200, 255]);
    }

    #[test]
    fn exact_index_hashes_equality_keys() {
        let mut base = BitSet::EMPTY;
        base.insert(2);
        // Two bindings on 7, one on 0, one on u64::MAX, and the unkeyed binding 2.
        let keys = [(0, 7, 7), (1, 0, 0), (3, 7, 7), (4, u64::MAX, u64::MAX)];
        let index = FieldIndex::build(1, &keys, base);
        assert!(matches!(index.segments, Segments::Exact { .. }));
        assert_eq!(members(index.lookup(7)), [0, 2, 3]);
        assert_eq!(members(index.lookup(0)), [1, 2]);
        assert_eq!(members(index.lookup(u64::MAX)), [2, 4]);
        assert_eq!(members(index.lookup(8)), [2], "no key: the base alone");
    }

    #[test]
    fn exact_index_agrees_with_direct_evaluation() {
        // Many keys, some shared, some colliding in the table; every value looked up.
        for count in [1usize, 2, 3, 64, 200] {
            let keys: Vec<(usize, u64, u64)> = (0..count)
                .map(|position| {
                    let value = (position as u64 * 7919) % 150 * (1 << 40);
                    (position, value, value)
                })
                .collect();
            let index = FieldIndex::build(0, &keys, BitSet::EMPTY);
            for value in (0..160).map(|value| value * (1 << 40)).chain([1, u64::MAX]) {
                let expected: Vec<usize> =
                    keys.iter().filter(|&&(_, key, _)| key == value).map(|&(position, _, _)| position).collect();
                assert_eq!(members(index.lookup(value)), expected, "{count} keys, value {value}");
            }
        }
    }

    #[test]
    fn index_maps_equalities_and_overlapping_ranges() {
        let keys = [(0, 7, 7), (1, 5, 10), (2, 10, u64::MAX), (3, 0, 0)];
        let index = FieldIndex::build(4, &keys, BitSet::EMPTY);
        assert!(matches!(index.segments, Segments::Intervals { .. }));
        assert_eq!(members(index.lookup(0)), [3]);
        assert_eq!(members(index.lookup(4)), Vec::<usize>::new());
        assert_eq!(members(index.lookup(5)), [1]);
        assert_eq!(members(index.lookup(7)), [0, 1]);
        assert_eq!(members(index.lookup(8)), [1]);
        assert_eq!(members(index.lookup(10)), [1, 2]);
        assert_eq!(members(index.lookup(u64::MAX)), [2]);
    }

    #[test]
    fn index_answers_include_the_base_set() {
        let mut base = BitSet::EMPTY;
        base.insert(1);
        let index = FieldIndex::build(0, &[(0, 5, 5), (2, 7, 9)], base);
        assert!(matches!(index.segments, Segments::Intervals { .. }));
        assert_eq!(members(index.lookup(0)), [1], "below every boundary");
        assert_eq!(members(index.lookup(5)), [0, 1]);
        assert_eq!(members(index.lookup(6)), [1], "between keys");
        assert_eq!(members(index.lookup(8)), [1, 2]);
        assert_eq!(members(index.lookup(u64::MAX)), [1], "above every key");
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
        let index = FieldIndex::build(0, &keys, BitSet::EMPTY);
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
