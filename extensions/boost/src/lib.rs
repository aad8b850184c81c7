//! `boost`: a scheduling policy as an extension (SPIN's application-specific schedulers).
//!
//! It answers `sched.Unblock` for strands woken from a plain wait (`StrandBlock::WAIT`: a
//! reply, a lock, an I/O completion — not sleeps or joins, selected by an indexed
//! declarative guard on `reason`): the strand runs [`BOOST_LEVELS`] priority levels above
//! its own (at most the highest) until it next gives up the hart, and takes the hart at
//! once if that outranks the strand that woke it. The classic interactive boost: a strand
//! that waited for an event reacts before the compute-bound strands of its level.
//!
//! The scheduler validates the answer (`1..=7`, `preempt` 0 or 1) and uses its default
//! for anything else; the budget is the scheduler's cap or the manifest's, whichever is
//! lower. Limitation: the boost is per wake-up, not decayed over time, and every strand
//! is boosted alike (no per-strand opt-in).

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{SCHED_UNBLOCK, StrandBlock, StrandUnblock, UnblockDecision};

spindle_abi::extension! {
    name: "boost",
    version: "0.1.0",
    budget_microseconds: 20,
    memory_quota_bytes: 4096,
    domains: [],
    bindings: [
        SCHED_UNBLOCK when [reason == (StrandBlock::WAIT as u64)] => boost,
    ],
}

/// Priority levels a woken strand is raised by.
pub const BOOST_LEVELS: u32 = 2;

/// The decision for a strand woken from a wait: its priority plus [`BOOST_LEVELS`]
/// (capped at the highest), preempting the waker if it now outranks it.
fn boost(unblock: &StrandUnblock) -> UnblockDecision {
    let priority = unblock.priority.saturating_add(BOOST_LEVELS).min(StrandUnblock::HIGHEST);
    UnblockDecision { priority, preempt: 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(priority: u32) -> StrandUnblock {
        StrandUnblock { strand: 9, blocked_ticks: 0, priority, reason: StrandBlock::WAIT, running_priority: 3 }
    }

    #[test]
    fn boosts_by_two_levels_and_preempts() {
        assert_eq!(boost(&woken(3)), UnblockDecision { priority: 5, preempt: 1 });
    }

    #[test]
    fn never_boosts_past_the_highest_level() {
        assert_eq!(boost(&woken(6)).priority, StrandUnblock::HIGHEST);
        assert_eq!(boost(&woken(StrandUnblock::HIGHEST)).priority, StrandUnblock::HIGHEST);
    }

    #[test]
    fn binds_only_waits() {
        let declaration = spindle_extension();
        assert_eq!(declaration.bindings.len(), 1);
        assert_eq!(declaration.bindings[0].event().name, "sched.Unblock");
        assert_eq!(
            declaration.bindings[0].guards(),
            &[spindle_abi::extension::GuardDecl::Equals {
                field: spindle_abi::event::field_index(
                    <StrandUnblock as spindle_abi::event::EventRecord>::FIELDS,
                    "reason"
                )
                .unwrap(),
                value: u64::from(StrandBlock::WAIT)
            }]
        );
    }
}
