//! Result combiners: how the results of several bindings become the one the raiser gets.
//!
//! The primary module picks one per event. Bindings contribute in order; a binding that
//! faults contributes the event's default result. If no binding runs at all, the raiser
//! gets the default result whatever the combiner. With exactly one contribution every
//! combiner returns it unchanged (which is what lets the single-binding fast path skip
//! combining).
//!
//! `First` and `FirstNonDefault` stop the raise early: later bindings do not run.
//! Limitation: `Vote` keeps its tally on the stack for up to [`VOTE_CANDIDATES`] distinct
//! results and allocates beyond that.

use alloc::vec::Vec;

/// Distinct results a vote tallies without allocating.
pub const VOTE_CANDIDATES: usize = 16;

/// How an event's results are combined.
#[derive(Clone, Copy, Debug)]
pub enum Combiner<R> {
    /// Every binding runs; the last contribution wins (SPIN's default: procedure-call
    /// semantics).
    Last,
    /// Only the first binding that passes its guards runs; its contribution wins.
    First,
    /// Bindings run until one contributes something other than the default result; that
    /// contribution wins, and the default if none does (e.g. "who claims this line?").
    FirstNonDefault,
    /// Every binding runs; contributions are folded in order with `fold`, starting from
    /// the first contribution.
    All {
        /// Folds the accumulated value with the next contribution.
        fold: fn(R, R) -> R,
    },
    /// Every binding runs; the smallest contribution wins.
    Min,
    /// Every binding runs; the largest contribution wins.
    Max,
    /// Every binding runs; the contribution returned most often wins, ties going to the
    /// value that was returned first.
    Vote,
}

impl<R> Default for Combiner<R> {
    /// [`Combiner::Last`].
    fn default() -> Self {
        Combiner::Last
    }
}

impl<R> Combiner<R> {
    /// The combiner's name for introspection.
    pub fn name(&self) -> &'static str {
        match self {
            Combiner::Last => "last",
            Combiner::First => "first",
            Combiner::FirstNonDefault => "first-non-default",
            Combiner::All { .. } => "all",
            Combiner::Min => "min",
            Combiner::Max => "max",
            Combiner::Vote => "vote",
        }
    }
}

/// Whether a raise should go on to the next binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Run the next binding.
    Continue,
    /// The result is decided.
    Stop,
}

/// Combines contributions during one raise.
///
/// One implementation per combiner, and the raise loop is monomorphised for each (see
/// [`Combiner::instance`]), so the loop carries only its own combiner's state and step.
/// Why: a single accumulator for every combiner had to be initialised with room for a
/// vote's tally, and moved, on every raise (most of the ~480 instructions a raise with no
/// binding once cost), and dispatched on the combiner at every contribution.
pub(crate) trait Accumulate<R>: Sized {
    /// An empty accumulator for `combiner` (one this type was chosen for).
    fn start(combiner: &Combiner<R>) -> Self;

    /// Adds one binding's contribution; `default` computes the event's default result
    /// (each call asks the primary module again).
    fn push(&mut self, contribution: R, default: &mut impl FnMut() -> R) -> Step;

    /// The combined result; `default` if nothing decided it.
    fn finish(self, default: &mut impl FnMut() -> R) -> R;

    /// Whether nothing has been pushed yet (no binding ran). Asked instead of keeping a
    /// separate flag in the raise loop.
    fn is_empty(&self) -> bool;
}

/// Code generic over the accumulator type (the raise loop), instantiated for one
/// combiner by [`Combiner::instance`].
pub(crate) trait PerAccumulator<R> {
    /// What an instantiation is (the raise loop's: a function pointer).
    type Instance;

    /// The instantiation for accumulators of type `C`.
    fn instance<C: Accumulate<R>>() -> Self::Instance;
}

impl<R: Copy + Ord> Combiner<R> {
    /// `U` instantiated for this combiner's accumulator type. Chosen once (when an event
    /// is registered), so a raise calls its loop through one function pointer instead of
    /// dispatching on the combiner.
    pub(crate) fn instance<U: PerAccumulator<R>>(&self) -> U::Instance {
        match self {
            Combiner::Last => U::instance::<LastWins<R>>(),
            Combiner::First => U::instance::<FirstWins<R>>(),
            Combiner::FirstNonDefault => U::instance::<FirstNonDefaultWins<R>>(),
            Combiner::All { .. } | Combiner::Min | Combiner::Max => U::instance::<Folded<R>>(),
            Combiner::Vote => U::instance::<Tally<R>>(),
        }
    }
}

/// `Combiner::Last`: the latest contribution.
struct LastWins<R>(Option<R>);

impl<R> Accumulate<R> for LastWins<R> {
    #[inline]
    fn start(_combiner: &Combiner<R>) -> Self {
        LastWins(None)
    }

    #[inline]
    fn push(&mut self, contribution: R, _default: &mut impl FnMut() -> R) -> Step {
        self.0 = Some(contribution);
        Step::Continue
    }

    #[inline]
    fn finish(self, default: &mut impl FnMut() -> R) -> R {
        self.0.unwrap_or_else(default)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// `Combiner::First`: the first contribution, which ends the raise.
struct FirstWins<R>(Option<R>);

impl<R> Accumulate<R> for FirstWins<R> {
    #[inline]
    fn start(_combiner: &Combiner<R>) -> Self {
        FirstWins(None)
    }

    #[inline]
    fn push(&mut self, contribution: R, _default: &mut impl FnMut() -> R) -> Step {
        self.0 = Some(contribution);
        Step::Stop
    }

    #[inline]
    fn finish(self, default: &mut impl FnMut() -> R) -> R {
        self.0.unwrap_or_else(default)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// `Combiner::FirstNonDefault`: the first contribution other than the default, which
/// ends the raise. Asks for the default once per raise and keeps it.
struct FirstNonDefaultWins<R> {
    default: Option<R>,
    value: Option<R>,
}

impl<R: Copy + PartialEq> Accumulate<R> for FirstNonDefaultWins<R> {
    #[inline]
    fn start(_combiner: &Combiner<R>) -> Self {
        FirstNonDefaultWins { default: None, value: None }
    }

    #[inline]
    fn push(&mut self, contribution: R, default: &mut impl FnMut() -> R) -> Step {
        if contribution == *self.default.get_or_insert_with(default) {
            return Step::Continue;
        }
        self.value = Some(contribution);
        Step::Stop
    }

    #[inline]
    fn finish(self, default: &mut impl FnMut() -> R) -> R {
        self.value.or(self.default).unwrap_or_else(default)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        // Every push asks for the default first.
        self.default.is_none()
    }
}

/// `Combiner::All`, `Min` and `Max`: contributions folded in order, starting from the
/// first.
struct Folded<R> {
    fold: fn(R, R) -> R,
    value: Option<R>,
}

impl<R: Copy + Ord> Accumulate<R> for Folded<R> {
    /// Chosen for `All`, `Min` and `Max` only.
    #[inline]
    fn start(combiner: &Combiner<R>) -> Self {
        let fold = match *combiner {
            Combiner::All { fold } => fold,
            Combiner::Min => R::min,
            _ => R::max,
        };
        Folded { fold, value: None }
    }

    #[inline]
    fn push(&mut self, contribution: R, _default: &mut impl FnMut() -> R) -> Step {
        self.value = Some(match self.value {
            Some(accumulated) => (self.fold)(accumulated, contribution),
            None => contribution,
        });
        Step::Continue
    }

    #[inline]
    fn finish(self, default: &mut impl FnMut() -> R) -> R {
        self.value.unwrap_or_else(default)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.value.is_none()
    }
}

/// `Combiner::Vote`: counts, in order of first appearance.
struct Tally<R> {
    inline: [Option<(R, u32)>; VOTE_CANDIDATES],
    spilled: Vec<(R, u32)>,
}

impl<R: Copy + Ord> Tally<R> {
    /// An empty tally.
    fn new() -> Self {
        Tally { inline: [None; VOTE_CANDIDATES], spilled: Vec::new() }
    }

    fn add(&mut self, vote: R) {
        for entry in self.inline.iter_mut() {
            match entry {
                Some((candidate, count)) if *candidate == vote => {
                    *count += 1;
                    return;
                }
                Some(_) => {}
                None => {
                    *entry = Some((vote, 1));
                    return;
                }
            }
        }
        match self.spilled.iter_mut().find(|(candidate, _)| *candidate == vote) {
            Some((_, count)) => *count += 1,
            None => self.spilled.push((vote, 1)),
        }
    }

    fn winner(&self) -> Option<R> {
        let mut best: Option<(R, u32)> = None;
        for &(candidate, count) in self.inline.iter().flatten().chain(self.spilled.iter()) {
            if best.is_none_or(|(_, best_count)| count > best_count) {
                best = Some((candidate, count));
            }
        }
        best.map(|(candidate, _)| candidate)
    }
}

impl<R: Copy + Ord> Accumulate<R> for Tally<R> {
    #[inline]
    fn start(_combiner: &Combiner<R>) -> Self {
        Tally::new()
    }

    #[inline]
    fn push(&mut self, contribution: R, _default: &mut impl FnMut() -> R) -> Step {
        self.add(contribution);
        Step::Continue
    }

    #[inline]
    fn finish(self, default: &mut impl FnMut() -> R) -> R {
        self.winner().unwrap_or_else(default)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.inline[0].is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: u64 = 100;

    /// Feeds contributions in order until the accumulator says stop; returns the result
    /// and how many contributions were consumed.
    struct Feed;

    impl PerAccumulator<u64> for Feed {
        type Instance = fn(&Combiner<u64>, &[u64]) -> (u64, usize);

        fn instance<C: Accumulate<u64>>() -> Self::Instance {
            |combiner, contributions| {
                let mut accumulator = C::start(combiner);
                let mut default = || DEFAULT;
                assert!(accumulator.is_empty());
                let mut consumed = 0;
                for &contribution in contributions {
                    consumed += 1;
                    let step = accumulator.push(contribution, &mut default);
                    assert!(!accumulator.is_empty());
                    if step == Step::Stop {
                        break;
                    }
                }
                (accumulator.finish(&mut default), consumed)
            }
        }
    }

    fn combine(combiner: Combiner<u64>, contributions: &[u64]) -> (u64, usize) {
        combiner.instance::<Feed>()(&combiner, contributions)
    }

    #[test]
    fn each_combiner_follows_its_rule() {
        let contributions = [5, 100, 3, 9, 3];
        assert_eq!(combine(Combiner::Last, &contributions), (3, 5));
        assert_eq!(combine(Combiner::First, &contributions), (5, 1));
        assert_eq!(combine(Combiner::FirstNonDefault, &[100, 100, 7, 8]), (7, 3));
        assert_eq!(combine(Combiner::All { fold: |a, b| a + b }, &contributions), (120, 5));
        assert_eq!(combine(Combiner::Min, &contributions), (3, 5));
        assert_eq!(combine(Combiner::Max, &contributions), (100, 5));
        assert_eq!(combine(Combiner::Vote, &contributions), (3, 5));
    }

    #[test]
    fn nothing_decided_yields_default() {
        for combiner in [Combiner::Last, Combiner::First, Combiner::FirstNonDefault, Combiner::Min, Combiner::Vote] {
            assert_eq!(combine(combiner, &[]).0, DEFAULT, "{}", combiner.name());
        }
        assert_eq!(combine(Combiner::FirstNonDefault, &[DEFAULT, DEFAULT]), (DEFAULT, 2));
    }

    #[test]
    fn vote_ties_go_to_first_returned_and_spill_past_inline_capacity() {
        assert_eq!(combine(Combiner::Vote, &[4, 2, 2, 4]).0, 4);
        let mut many: Vec<u64> = (0..40).collect();
        many.extend([33, 33]);
        assert_eq!(combine(Combiner::Vote, &many).0, 33);
    }
}
