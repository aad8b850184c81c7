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
pub(crate) struct Accumulator<R> {
    combiner: Combiner<R>,
    value: Option<R>,
    /// Only a vote needs a tally; other combiners never pay for initialising one.
    tally: Option<Tally<R>>,
}

impl<R: Copy + Ord> Accumulator<R> {
    /// An empty accumulator for `combiner`.
    #[inline]
    pub(crate) fn new(combiner: Combiner<R>) -> Self {
        let tally = matches!(combiner, Combiner::Vote).then(Tally::new);
        Accumulator { combiner, value: None, tally }
    }

    /// Adds one binding's contribution; `default` yields the event's default result.
    pub(crate) fn push(&mut self, contribution: R, default: &mut impl FnMut() -> R) -> Step {
        match self.combiner {
            Combiner::Last => self.value = Some(contribution),
            Combiner::First => {
                self.value = Some(contribution);
                return Step::Stop;
            }
            Combiner::FirstNonDefault => {
                if contribution != default() {
                    self.value = Some(contribution);
                    return Step::Stop;
                }
            }
            Combiner::All { fold } => {
                self.value = Some(match self.value {
                    Some(accumulated) => fold(accumulated, contribution),
                    None => contribution,
                });
            }
            Combiner::Min => self.value = Some(self.value.map_or(contribution, |value| value.min(contribution))),
            Combiner::Max => self.value = Some(self.value.map_or(contribution, |value| value.max(contribution))),
            Combiner::Vote => {
                if let Some(tally) = &mut self.tally {
                    tally.add(contribution);
                }
            }
        }
        Step::Continue
    }

    /// The combined result; `default` if nothing decided it.
    pub(crate) fn finish(self, default: &mut impl FnMut() -> R) -> R {
        match self.combiner {
            Combiner::Vote => self.tally.and_then(|tally| tally.winner()).unwrap_or_else(default),
            _ => self.value.unwrap_or_else(default),
        }
    }
}

/// Vote counts, in order of first appearance.
struct Tally<R> {
    inline: [Option<(R, u32)>; VOTE_CANDIDATES],
    spilled: Vec<(R, u32)>,
}

impl<R: Copy + Ord> Tally<R> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: u64 = 100;

    fn combine(combiner: Combiner<u64>, contributions: &[u64]) -> (u64, usize) {
        let mut accumulator = Accumulator::new(combiner);
        let mut default = || DEFAULT;
        let mut consumed = 0;
        for &contribution in contributions {
            consumed += 1;
            if accumulator.push(contribution, &mut default) == Step::Stop {
                break;
            }
        }
        (accumulator.finish(&mut default), consumed)
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
