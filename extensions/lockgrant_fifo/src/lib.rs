//! `lockgrant_fifo`: strict arrival order for `lock.Grant` (Seltzer et al. '95 §4.4: FIFO
//! lock granting keeps a stream of readers from starving writers).
//!
//! It reads the grantable waiting requests with the `lock` domain's
//! `spindle_lock_candidates` and grants the oldest waiting request (queue position 0) if it
//! is among them; otherwise it declines, so later requests — even compatible readers — wait
//! behind it. The lock service asks again after each grant, so consecutive readers at the
//! head all get in. This is the lock service's reference FIFO, reimplemented on the ABI's
//! records.

#![no_std]
#![forbid(unsafe_code)]

use spindle_abi::event::{LOCK_GRANT, LockCandidateEntry, LockGrant, LockGrantChoice};

spindle_abi::extension! {
    name: "lockgrant_fifo",
    version: "0.1.0",
    budget_microseconds: 200,
    memory_quota_bytes: 16 * 1024,
    domains: ["lock"],
    bindings: [
        LOCK_GRANT => grant,
    ],
}

/// Candidates the policy reads at most (the head, if grantable, is always among the first:
/// candidates come in queue order).
pub const MAX_CANDIDATES: usize = 64;

/// The head of the queue if it is a candidate, else decline.
pub fn choose(mut candidates: impl Iterator<Item = LockCandidateEntry>) -> LockGrantChoice {
    LockGrantChoice { request: candidates.find(|candidate| candidate.position == 0).map_or(LockGrantChoice::DECLINE, |head| head.request) }
}

/// `lock.Grant`: FIFO.
fn grant(_: &LockGrant) -> LockGrantChoice {
    let mut bytes = [0u8; MAX_CANDIDATES * LockCandidateEntry::SIZE];
    choose(LockCandidateEntry::read_candidates(&mut bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(request: u64, position: u32) -> LockCandidateEntry {
        LockCandidateEntry { request, position, sequence: u64::from(position), ..LockCandidateEntry::default() }
    }

    #[test]
    fn only_the_head_is_granted() {
        assert_eq!(choose([entry(7, 1), entry(5, 0)].into_iter()).request, 5);
        assert_eq!(choose([entry(7, 1), entry(8, 2)].into_iter()).request, LockGrantChoice::DECLINE);
        assert_eq!(choose(core::iter::empty()).request, LockGrantChoice::DECLINE);
    }

    #[test]
    fn without_a_kernel_it_declines() {
        assert_eq!(grant(&LockGrant::default()).request, LockGrantChoice::DECLINE);
        assert_eq!(spindle_extension().domains, ["lock"]);
    }
}
