//! Fault injection (a test hook): a plan of device errors the block service consults for
//! each request it takes off the queue.
//!
//! A [`FaultPlan`] holds up to [`MAX_FAULTS`] rules ([`Fault`]). Each rule names which
//! requests it hits ([`FaultTarget`]: any request, reads only, writes only, or a request
//! covering one sector) and how many of them ([`Fault::count`]). When the service is about
//! to start a request it asks [`FaultPlan::take`]: the first rule (in the order they were
//! injected) that matches the request and still has a count left is used up by one, and the
//! request fails as a device error *without reaching the device*, so its data — a write's
//! new bytes, a read's destination — is never touched. Later requests, once the rules are
//! used up, work as before.
//!
//! The plan only decides; the kernel delivers the failure (as the device's I/O error) and
//! counts it. Nothing here allocates: the rules live in a fixed array.

use core::fmt;

/// Most rules a plan holds at once.
pub const MAX_FAULTS: usize = 8;

/// Which requests a [`Fault`] hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// Every request.
    Any,
    /// Reads only.
    Reads,
    /// Writes only.
    Writes,
    /// A request whose blocks include this one (read or write).
    Sector(u64),
}

impl FaultTarget {
    /// Whether a request of `blocks` blocks from `start_block` (a write if `write`) is hit.
    pub fn matches(self, start_block: u64, blocks: u32, write: bool) -> bool {
        match self {
            FaultTarget::Any => true,
            FaultTarget::Reads => !write,
            FaultTarget::Writes => write,
            FaultTarget::Sector(sector) => sector >= start_block && sector - start_block < u64::from(blocks),
        }
    }
}

impl fmt::Display for FaultTarget {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultTarget::Any => formatter.write_str("any request"),
            FaultTarget::Reads => formatter.write_str("reads"),
            FaultTarget::Writes => formatter.write_str("writes"),
            FaultTarget::Sector(sector) => write!(formatter, "requests covering sector {sector}"),
        }
    }
}

/// One rule: the next `count` requests matching `target` fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Which requests it hits.
    pub target: FaultTarget,
    /// How many more it hits (a rule with 0 left is gone).
    pub count: u32,
}

/// Why [`FaultPlan::inject`] refused a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectError {
    /// A rule that hits no request (count 0).
    ZeroCount,
    /// The plan holds [`MAX_FAULTS`] rules already.
    Full,
}

impl fmt::Display for InjectError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InjectError::ZeroCount => formatter.write_str("a fault must hit at least one request (count 0)"),
            InjectError::Full => write!(formatter, "the fault plan is full ({MAX_FAULTS} rules pending)"),
        }
    }
}

impl core::error::Error for InjectError {}

/// The pending device errors of one disk, and how many were delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    rules: [Option<Fault>; MAX_FAULTS],
    injected: u64,
}

impl FaultPlan {
    /// An empty plan: no request fails.
    pub const fn new() -> FaultPlan {
        FaultPlan { rules: [None; MAX_FAULTS], injected: 0 }
    }

    /// Adds a rule after the pending ones: the next `count` requests matching `target`
    /// fail.
    ///
    /// Errors: [`InjectError::ZeroCount`], [`InjectError::Full`]; the plan is unchanged.
    pub fn inject(&mut self, target: FaultTarget, count: u32) -> Result<(), InjectError> {
        if count == 0 {
            return Err(InjectError::ZeroCount);
        }
        let slot = self.rules.iter_mut().find(|slot| slot.is_none()).ok_or(InjectError::Full)?;
        *slot = Some(Fault { target, count });
        self.compact();
        Ok(())
    }

    /// Whether the request of `blocks` blocks from `start_block` (a write if `write`) fails:
    /// uses up one count of the first pending rule that matches it (oldest rule first).
    pub fn take(&mut self, start_block: u64, blocks: u32, write: bool) -> bool {
        let Some(slot) = self.rules.iter_mut().find(|slot| slot.is_some_and(|fault| fault.target.matches(start_block, blocks, write))) else {
            return false;
        };
        if let Some(fault) = slot {
            fault.count -= 1;
            if fault.count == 0 {
                *slot = None;
            }
        }
        self.compact();
        self.injected += 1;
        true
    }

    /// Removes every pending rule (the count of delivered errors stays).
    pub fn clear(&mut self) {
        self.rules = [None; MAX_FAULTS];
    }

    /// The pending rules, oldest first.
    pub fn pending(&self) -> impl Iterator<Item = Fault> + '_ {
        self.rules.iter().flatten().copied()
    }

    /// Requests still to fail under the pending rules.
    pub fn armed(&self) -> u64 {
        self.pending().map(|fault| u64::from(fault.count)).sum()
    }

    /// Requests failed by the plan so far.
    pub fn injected(&self) -> u64 {
        self.injected
    }

    /// Moves the pending rules to the front, keeping their order.
    fn compact(&mut self) {
        let mut next = 0;
        for index in 0..MAX_FAULTS {
            if let Some(fault) = self.rules[index].take() {
                self.rules[next] = Some(fault);
                next += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::string::ToString;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn an_empty_plan_fails_nothing() {
        let mut plan = FaultPlan::new();
        assert!(!plan.take(0, 1, false));
        assert!(!plan.take(100, 8, true));
        assert_eq!((plan.armed(), plan.injected()), (0, 0));
    }

    #[test]
    fn the_next_n_requests_fail_then_requests_work() {
        let mut plan = FaultPlan::new();
        plan.inject(FaultTarget::Any, 3).unwrap();
        assert_eq!(plan.armed(), 3);
        let outcomes: Vec<bool> = (0..5).map(|index| plan.take(index * 8, 8, index % 2 == 0)).collect();
        assert_eq!(outcomes, [true, true, true, false, false]);
        assert_eq!((plan.armed(), plan.injected()), (0, 3));
        assert_eq!(plan.pending().count(), 0);
    }

    #[test]
    fn targets_match_only_their_requests() {
        assert!(FaultTarget::Reads.matches(5, 1, false) && !FaultTarget::Reads.matches(5, 1, true));
        assert!(FaultTarget::Writes.matches(5, 1, true) && !FaultTarget::Writes.matches(5, 1, false));
        let sector = FaultTarget::Sector(100);
        assert!(sector.matches(100, 1, false), "the first block");
        assert!(sector.matches(96, 8, true), "a block inside the request");
        assert!(!sector.matches(92, 8, false), "ends at 99");
        assert!(!sector.matches(101, 8, false), "starts after it");
        assert!(!FaultTarget::Sector(u64::MAX).matches(u64::MAX - 1, 1, false), "no overflow at the end of the range");
    }

    #[test]
    fn a_sector_rule_waits_for_its_request() {
        let mut plan = FaultPlan::new();
        plan.inject(FaultTarget::Sector(4096), 1).unwrap();
        assert!(!plan.take(0, 8, true));
        assert!(!plan.take(4097, 1, false));
        assert!(plan.take(4096, 1, true));
        assert!(!plan.take(4096, 1, true), "used up after one");
        assert_eq!(plan.injected(), 1);
    }

    #[test]
    fn the_oldest_matching_rule_is_used_first() {
        let mut plan = FaultPlan::new();
        plan.inject(FaultTarget::Writes, 1).unwrap();
        plan.inject(FaultTarget::Any, 1).unwrap();
        // A read skips the writes rule and uses the second.
        assert!(plan.take(0, 1, false));
        assert_eq!(plan.pending().collect::<Vec<_>>(), [Fault { target: FaultTarget::Writes, count: 1 }]);
        assert!(!plan.take(0, 1, false));
        assert!(plan.take(0, 1, true));
        assert_eq!(plan.armed(), 0);
    }

    #[test]
    fn bad_rules_are_refused_and_the_plan_is_bounded() {
        let mut plan = FaultPlan::new();
        assert_eq!(plan.inject(FaultTarget::Any, 0), Err(InjectError::ZeroCount));
        for sector in 0..MAX_FAULTS as u64 {
            plan.inject(FaultTarget::Sector(sector), 2).unwrap();
        }
        assert_eq!(plan.inject(FaultTarget::Any, 1), Err(InjectError::Full));
        assert_eq!(plan.armed(), 2 * MAX_FAULTS as u64);
        // Using one rule up makes room, and the new rule goes last.
        assert!(plan.take(0, 1, false) && plan.take(0, 1, false));
        plan.inject(FaultTarget::Any, 1).unwrap();
        assert_eq!(plan.pending().last(), Some(Fault { target: FaultTarget::Any, count: 1 }));
        assert_eq!(plan.pending().next(), Some(Fault { target: FaultTarget::Sector(1), count: 2 }));
        assert!(InjectError::Full.to_string().contains("8 rules"));
        plan.clear();
        assert_eq!((plan.armed(), plan.injected()), (0, 2));
        assert!(!plan.take(0, 1, false));
    }
}
