//! The lock service's granting decision as an event: `lock.Grant` (docs/buffer-cache.md).
//!
//! The lock tables are the policy crate's ([`spindle_service_locks::LockTable`]); whoever
//! owns one (the file-system service) passes an [`EventGrantPolicy`], which implements the
//! crate's [`GrantPolicy`] by raising `lock.Grant`: with nothing bound it answers its
//! fallback reference policy at once; otherwise it publishes the candidates for the `lock`
//! domain's `spindle_lock_candidates` ([`LockCandidateEntry`]), raises outside every lock of
//! this module (raises are serialised by a gate, so the list a handler reads is its
//! raise's), and maps the answer back ([`LockGrantChoice::NO_ANSWER`]: the fallback).
//!
//! The primary module rejects an answer that names no candidate, or that declines while
//! nothing is held and something could be granted (a fault of the binding, which
//! contributes `NO_ANSWER`); the table validates the answer again
//! ([`spindle_service_locks::validate`]) and counts what it refuses.
//!
//! Per-file policies: `file` is a guardable field of the record; `cache_events::assign`
//! (one table for both services) makes the primary module impose `file == F` on an owner's
//! bindings.

use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_abi::event::{LOCK_GRANT, LockCandidateEntry, LockGrant, LockGrantChoice};
use spindle_dispatch::{Authorization, Combiner, EventTable, InstallRequest, PrimaryModule, Refusal, ResultRejection};
use spindle_service_locks::{Candidate, GrantChoice, GrantPolicy, GrantQuery, LockKind, Policy, Trigger, choose};

use crate::arch::csr::without_interrupts;

static TABLE: spin::Once<Arc<EventTable<LockGrant, LockGrantChoice>>> = spin::Once::new();
/// The candidates of the raise in progress (what `spindle_lock_candidates` copies).
static CANDIDATES: spin::Mutex<Vec<LockCandidateEntry>> = spin::Mutex::new(Vec::new());
/// Serialises raises (one candidate list at a time).
static GATE: spin::Mutex<()> = spin::Mutex::new(());

/// Registers `lock.Grant` with its primary module (at boot, from `services::init`).
pub fn init() {
    let dispatcher = crate::events::dispatcher();
    TABLE.call_once(|| dispatcher.register(&LOCK_GRANT, Arc::new(GrantModule)).expect("lock.Grant registered twice"));
}

/// A candidate as the `lock` domain copies it out.
pub fn entry(candidate: &Candidate) -> LockCandidateEntry {
    LockCandidateEntry {
        request: candidate.request,
        start: candidate.start,
        end: candidate.end,
        sequence: candidate.sequence,
        waited_ns: candidate.waited_ns,
        owner: candidate.owner,
        kind: match candidate.kind {
            LockKind::Read => LockCandidateEntry::READ,
            LockKind::Write => LockCandidateEntry::WRITE,
        },
        position: candidate.position,
        overtakes: u32::from(candidate.overtakes),
    }
}

/// The `lock.Grant` record of `query`.
pub fn record(query: &GrantQuery) -> LockGrant {
    LockGrant {
        now_ns: query.now_ns,
        arriving: query.arriving,
        file: query.file,
        trigger: match query.trigger {
            Trigger::Arrival => LockGrant::ARRIVAL,
            Trigger::Release => LockGrant::RELEASE,
            Trigger::Cancel => LockGrant::CANCEL,
        },
        waiting: query.waiting,
        holders: query.holders,
    }
}

/// `lock.Grant`'s primary module.
struct GrantModule;

impl PrimaryModule<LockGrant, LockGrantChoice> for GrantModule {
    fn name(&self) -> &str {
        "lock"
    }

    fn default_result(&self, _: &LockGrant) -> LockGrantChoice {
        LockGrantChoice { request: LockGrantChoice::NO_ANSWER }
    }

    fn combiner(&self) -> Combiner<LockGrantChoice> {
        Combiner::FirstNonDefault
    }

    fn authorize(&self, request: &InstallRequest<'_, LockGrant>) -> Result<Authorization<LockGrant>, Refusal> {
        // One assignment table for the cache's events and this one: a policy extension
        // bound to a file is bound for all of them (`cache_events::assign`).
        super::cache_events::authorize_for_file(request)
    }

    fn validates_results(&self) -> bool {
        true
    }

    fn validate_result(&self, args: &LockGrant, result: &LockGrantChoice) -> Result<(), ResultRejection> {
        if result.request == LockGrantChoice::NO_ANSWER {
            return Ok(());
        }
        let (candidate, any) = without_interrupts(|| {
            let candidates = CANDIDATES.lock();
            (candidates.iter().any(|candidate| candidate.request == result.request), !candidates.is_empty())
        });
        if result.request == LockGrantChoice::DECLINE {
            return if args.holders == 0 && any {
                Err(ResultRejection { reason: "declined while nothing is held and requests could be granted" })
            } else {
                Ok(())
            };
        }
        if candidate { Ok(()) } else { Err(ResultRejection { reason: "names no grantable waiting request" }) }
    }
}

/// A [`GrantPolicy`] that raises `lock.Grant` (see the module documentation); `fallback`
/// answers when nothing is bound or no binding answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventGrantPolicy {
    /// The reference policy used without an answer (the lock service's default: FRP).
    pub fallback: Policy,
}

impl Default for EventGrantPolicy {
    fn default() -> Self {
        EventGrantPolicy::new()
    }
}

impl EventGrantPolicy {
    /// `lock.Grant` with FRP as the fallback.
    pub const fn new() -> EventGrantPolicy {
        EventGrantPolicy { fallback: Policy::Frp }
    }

    /// `lock.Grant` with `fallback` as the fallback (use the table's `default_policy`).
    pub const fn with_fallback(fallback: Policy) -> EventGrantPolicy {
        EventGrantPolicy { fallback }
    }
}

impl GrantPolicy for EventGrantPolicy {
    fn choose(&mut self, query: &GrantQuery, candidates: &[Candidate]) -> GrantChoice {
        let Some(table) = TABLE.get().filter(|table| table.has_bindings()) else {
            return choose(self.fallback, candidates);
        };
        let args = record(query);
        let mut entries: Option<Vec<LockCandidateEntry>> = Some(candidates.iter().map(entry).collect());
        let answer = loop {
            if let Some(_gate) = GATE.try_lock() {
                without_interrupts(|| *CANDIDATES.lock() = entries.take().unwrap_or_default());
                let answer = crate::events::raise(table, &args);
                without_interrupts(|| CANDIDATES.lock().clear());
                break answer;
            }
            crate::sched::yield_now();
        };
        if answer.request == LockGrantChoice::NO_ANSWER { choose(self.fallback, candidates) } else { GrantChoice { request: answer.request } }
    }
}

/// Domain `lock` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Lock for crate::ext::glue::KernelFunctions {
    /// The candidates of the `lock.Grant` raise being answered.
    fn lock_candidates(&self, destination: &mut [u8]) -> u64 {
        without_interrupts(|| {
            let candidates = CANDIDATES.lock();
            let mut copied = 0;
            for (chunk, candidate) in destination.chunks_exact_mut(LockCandidateEntry::SIZE).zip(candidates.iter()) {
                chunk.copy_from_slice(&candidate.to_bytes());
                copied += 1;
            }
            copied
        })
    }
}
