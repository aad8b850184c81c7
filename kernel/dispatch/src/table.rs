//! `EventTable`: one event's bindings, the plan raises follow, and the raise itself.
//!
//! Design: the authoritative binding list lives behind a writer lock and changes only on
//! install, uninstall, replace and settings changes. Each change compiles the list into an
//! immutable [`Plan`] (ordered bindings, declarative-guard indexes, the single-binding fast
//! path if it applies) and publishes it through an [`Rcu`] cell. A raise reads the current
//! plan with one load and follows it to the end, so it sees exactly one binding set: a
//! replacement is one publication, so a raise runs the old binding or the new one, never
//! both and never neither. Raises take no lock; handlers may raise, install and uninstall
//! re-entrantly.
//!
//! Limitations: a binding disabled by the circuit breaker stays in the plan (skipped by a
//! flag check) until it is uninstalled or re-enabled; retired plans (and the bindings only
//! they hold) are freed after a grace period (see `rcu`), by the next change to the event or
//! by [`EventTable::reclaim`], never during a raise.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{Event, EventDescriptor, EventRecord};

use crate::asynchronous::{StartedLane, start_lane};
use crate::binding::{AtomicCounters, BindingCore, DISABLED, Parts};
use crate::combiner::{Accumulate, Combiner, PerAccumulator, Step};
use crate::error::{InstallError, UpdateError};
use crate::guard::{
    BitSet, CandidateList, DeclarativeGuard, FieldIndex, FieldTest, MAX_BINDINGS_PER_EVENT, Position, PredicateGuard,
};
use crate::handler::{BindingId, BindingSpec, HandlerFault, Mode};
use crate::introspect::{EventSnapshot, Fault};
use crate::platform::Platform;
use crate::primary::{InstallRequest, PrimaryModule};
use crate::rcu::{Garbage, Harts, Rcu};

/// What a raise follows: an immutable compilation of the binding list.
pub(crate) struct Plan<A: EventRecord, R: EventRecord> {
    /// The binding of the fast path: set when `single` is and accounting is off.
    fast: Option<Arc<BindingCore<A, R>>>,
    /// Set when there is exactly one binding, sync, without guards, and the primary module
    /// does not validate results.
    single: Option<Arc<BindingCore<A, R>>>,
    /// Set when there is exactly one binding, bounded and without guards (validation and
    /// accounting allowed): the mode every loaded extension runs in. Such a raise skips
    /// the general loop (see `raise_single_bounded`).
    single_bounded: Option<Arc<BindingCore<A, R>>>,
    /// All bindings, in the order they run; a binding's position is its index here.
    bindings: Vec<Arc<BindingCore<A, R>>>,
    /// Positions of bindings without a key guard, in order: candidates for every raise.
    unindexed: CandidateList,
    /// One index per argument field that some binding's key guard tests; each answer
    /// includes the unindexed bindings, so with one index its answer is the candidate list.
    indexes: Vec<FieldIndex>,
    /// Whether to read the instruction counter around each handler call.
    account_instructions: bool,
    /// Neither instruction accounting nor result validation: a sync binding's handler is
    /// called inline by the general path, and its `Ok` result used as it is.
    plain: bool,
    /// `plain`, and some binding is plain too (see `BindingCore::plain`): a raise whose
    /// only candidate is such a binding takes the fast path after the index lookup.
    single_candidate_fast: bool,
    /// Some binding is bounded: a raise whose only candidate is one may take the single
    /// bounded binding's way (`raise_one_candidate`).
    bounded_candidates: bool,
}

impl<A: EventRecord, R: EventRecord> Default for Plan<A, R> {
    fn default() -> Self {
        Plan {
            fast: None,
            single: None,
            single_bounded: None,
            bindings: Vec::new(),
            unindexed: CandidateList::default(),
            indexes: Vec::new(),
            account_instructions: false,
            plain: true,
            single_candidate_fast: false,
            bounded_candidates: false,
        }
    }
}

impl<A: EventRecord, R: EventRecord> Plan<A, R> {
    /// Compiles an ordered binding list.
    fn compile(bindings: &[Arc<BindingCore<A, R>>], account_instructions: bool, validates_results: bool) -> Self {
        let single = match bindings {
            [only] if only.mode == Mode::Sync && only.is_unguarded() && !validates_results => Some(only.clone()),
            _ => None,
        };
        let single_bounded = match bindings {
            [only] if matches!(only.mode, Mode::Bounded { .. }) && only.is_unguarded() => Some(only.clone()),
            _ => None,
        };
        let mut unindexed = BitSet::EMPTY;
        let mut keyed_fields: Vec<usize> = Vec::new();
        for (position, binding) in bindings.iter().enumerate() {
            match binding.key {
                Some(key) => keyed_fields.push(key.field),
                None => unindexed.insert(position),
            }
        }
        keyed_fields.sort_unstable();
        keyed_fields.dedup();
        let indexes = keyed_fields
            .iter()
            .map(|&field| {
                let keys: Vec<(usize, u64, u64)> = bindings
                    .iter()
                    .enumerate()
                    .filter_map(|(position, binding)| {
                        binding.key.filter(|key| key.field == field).map(|key| (position, key.low, key.high))
                    })
                    .collect();
                FieldIndex::build(field, &keys, unindexed)
            })
            .collect();
        let plain = !account_instructions && !validates_results;
        Plan {
            fast: if account_instructions { None } else { single.clone() },
            single,
            single_bounded,
            bindings: bindings.to_vec(),
            unindexed: unindexed.candidate_list(),
            indexes,
            account_instructions,
            plain,
            single_candidate_fast: plain && bindings.iter().any(|binding| binding.plain),
            bounded_candidates: bindings.iter().any(|binding| matches!(binding.mode, Mode::Bounded { .. })),
        }
    }
}

/// The authoritative state, behind the writer lock.
struct TableState<A: EventRecord, R: EventRecord> {
    /// Installed bindings in run order.
    bindings: Vec<Arc<BindingCore<A, R>>>,
    /// Next binding serial (also the next installation sequence number).
    next_serial: u64,
    /// Whether plans count instructions.
    account_instructions: bool,
}

/// A checked, authorised installation waiting for the writer lock.
struct Approved<A: EventRecord, R: EventRecord> {
    spec: BindingSpec<A, R>,
    mode: Mode,
    declarative: Vec<(DeclarativeGuard, bool)>,
    predicates: Vec<PredicateGuard<A>>,
    imposed_predicates: usize,
    /// For an async binding: its started lane and the runner to point at the binding.
    lane: Option<StartedLane<A, R>>,
}

/// One event registered with the dispatcher: raise it here, bind to it here.
///
/// The kernel service that owns the event keeps the `Arc<EventTable>` that
/// [`Dispatcher::register`](crate::Dispatcher::register) returned and calls
/// [`raise`](Self::raise) on it.
pub struct EventTable<A: EventRecord, R: EventRecord> {
    plans: Rcu<Plan<A, R>>,
    descriptor: EventDescriptor,
    owner: String,
    primary: Arc<dyn PrimaryModule<A, R>>,
    combiner: Combiner<R>,
    /// The general path's loop compiled for `combiner`.
    general_loop: GeneralLoop<A, R>,
    validates_results: bool,
    breaker_threshold: u32,
    platform: Platform,
    state: spin::Mutex<TableState<A, R>>,
    /// Totals of removed bindings (shared with every binding, which adds to it).
    removed_totals: Arc<AtomicCounters>,
    /// Raises that took the general loop and ran at least one binding. Every raise is
    /// counted once: here, in `defaulted` (no binding ran), or as a fast invocation of the
    /// binding it ran (the single binding, or the single candidate after the index); so
    /// the fast path needs no per-event counter and the others one atomic add each.
    general_raises: AtomicU64,
    /// Raises in which no binding ran (the raiser got the default result).
    defaulted: AtomicU64,
    guard_evaluations: AtomicU64,
}

impl<A: EventRecord, R: EventRecord> EventTable<A, R> {
    /// A table with no bindings; asks the primary module for its combiner and settings.
    pub(crate) fn new(
        event: &Event<A, R>,
        primary: Arc<dyn PrimaryModule<A, R>>,
        platform: Platform,
        harts: Arc<Harts>,
    ) -> Self {
        let combiner = primary.combiner();
        EventTable {
            plans: Rcu::new(Plan::default(), harts),
            descriptor: event.descriptor(),
            owner: String::from(primary.name()),
            combiner,
            general_loop: combiner.instance::<GeneralLoopOf<A, R>>(),
            validates_results: primary.validates_results(),
            breaker_threshold: primary.breaker_threshold(),
            primary,
            platform,
            state: spin::Mutex::new(TableState {
                bindings: Vec::new(),
                next_serial: 1,
                account_instructions: true,
            }),
            removed_totals: Arc::new(AtomicCounters::default()),
            general_raises: AtomicU64::new(0),
            defaulted: AtomicU64::new(0),
            guard_evaluations: AtomicU64::new(0),
        }
    }

    /// The event's descriptor (id, name, fingerprint, records).
    pub fn descriptor(&self) -> EventDescriptor {
        self.descriptor
    }

    /// Raises the event: runs the bindings whose guards hold, in order, and returns their
    /// combined result (the primary module's default if none runs).
    ///
    /// Never blocks and never allocates except for a `Vote` with many distinct results.
    /// Must not be called on a hart that is offline (see `Dispatcher::hart_offline`).
    #[inline]
    pub fn raise(&self, args: &A) -> R {
        // FAST PATH: one sync binding, no guards, no result validation, instruction
        // accounting off, binding healthy. Cost before the handler's body: one load of the
        // plan pointer (plus the acquire fence), a load and test of `fast`, a load and test
        // of the binding's health word, and one indirect *tail* call into
        // `ErasedHandler::raise_fast`, monomorphised for the handler type, which adds one
        // relaxed atomic (the invocation counter) and a test of the handler's result.
        // Nothing happens after the call, so this function needs no stack frame.
        // docs/dispatcher.md has the measured instruction counts.
        let plan = self.plans.read();
        if let Some(binding) = &plan.fast
            // Zero means "enabled, no fault streak"; anything else goes the general way,
            // which knows how to reset a streak.
            && binding.health.load(Ordering::Relaxed) == 0
        {
            return binding.handler.raise_fast(binding, self, args);
        }
        // The bounded fast path: one bounded binding without guards, the mode every loaded
        // extension runs in (validation and accounting are handled in it).
        if let Some(binding) = &plan.single_bounded
            && binding.health.load(Ordering::Relaxed) == 0
        {
            return binding.handler.raise_bounded(binding, self, plan.account_instructions, args);
        }
        self.raise_slow(plan, args)
    }

    /// Whether the current plan has any binding: lets a raiser that would only get the
    /// default skip the raise (and building its arguments). One load and a length test;
    /// a raise made right after may still see a binding installed meanwhile, or none.
    #[inline]
    pub fn has_bindings(&self) -> bool {
        // The plan reference does not outlive this expression, so no quiescent state can
        // be reported while it is held.
        !self.plans.read().bindings.is_empty()
    }

    /// Whether a raise of `args` now could run a handler: some binding exists and, when
    /// bindings are indexed on one field, the index names a candidate for `args` (residual
    /// guards are not evaluated: `true` may still run nothing). For a raiser that must
    /// prepare something only handlers read (the buffer cache lends itself to
    /// `spindle_cache_victims`): on `false` it takes the default without raising, which is
    /// counted as a defaulted raise — what the raise would have done.
    #[inline]
    pub fn would_run(&self, args: &A) -> bool {
        let plan = self.plans.read();
        let candidates = match plan.indexes.as_slice() {
            _ if plan.bindings.is_empty() => false,
            [] => true,
            [index] => !index.lookup(args.field(index.field)).is_empty(),
            _ => true,
        };
        if !candidates {
            self.defaulted.fetch_add(1, Ordering::Relaxed);
        }
        candidates
    }

    /// Everything but the fast path: picks the path for the plan, so that each path's
    /// code is only as large as it needs (a raise with no binding is one counter and a
    /// tail call to the primary module, with no stack frame).
    #[inline(never)]
    fn raise_slow(&self, plan: &Plan<A, R>, args: &A) -> R {
        if plan.bindings.is_empty() {
            self.defaulted.fetch_add(1, Ordering::Relaxed);
            return self.primary.default_result(args);
        }
        if let Some(binding) = &plan.single
            && binding.health.load(Ordering::Relaxed) == 0
        {
            return self.raise_single_accounted(binding, args);
        }
        let candidates = match plan.indexes.as_slice() {
            [] => &plan.unindexed[..],
            // Each index's lists include the unindexed bindings.
            [index] => index.lookup(args.field(index.field)),
            several => return self.raise_several_indexes(plan, several, args),
        };
        match candidates {
            // No candidate: the default, as with no binding at all.
            [] => {
                self.defaulted.fetch_add(1, Ordering::Relaxed);
                return self.primary.default_result(args);
            }
            // FAST PATH AFTER THE INDEX: the only candidate needs nothing but a call (sync,
            // no guard left to check, no accounting or validation, healthy), so it runs as
            // the single binding of the fast path does; with one contribution every
            // combiner returns it unchanged. This is the common case of declarative
            // dispatch (`port == k`): 64 such bindings cost what one costs.
            [only] if plan.single_candidate_fast => {
                if let Some(binding) = plan.bindings.get(usize::from(*only))
                    && binding.plain
                    && binding.health.load(Ordering::Relaxed) == 0
                {
                    return binding.handler.raise_fast(binding, self, args);
                }
            }
            // Some binding is bounded (a loaded extension's, guarded): if the only
            // candidate is one, its other guards, then the single bounded binding's way.
            [only] if plan.bounded_candidates => return self.raise_one_candidate(plan, *only, args),
            _ => {}
        }
        self.raise_candidates(plan, candidates, args)
    }

    /// A raise whose index lookup left one candidate, in a plan with bounded bindings:
    /// [`Self::raise_one_bounded_candidate`], else the general loop. Out of line, so that
    /// `raise_slow`'s other paths keep their small frame (inlined, a raise with no binding
    /// cost 37 → 51 instructions and one with a predicate guard 143 → 204).
    #[inline(never)]
    fn raise_one_candidate(&self, plan: &Plan<A, R>, position: Position, args: &A) -> R {
        match self.raise_one_bounded_candidate(plan, position, args) {
            Some(result) => result,
            None => self.raise_candidates(plan, core::slice::from_ref(&position), args),
        }
    }

    /// A raise whose index lookup left one candidate, a healthy bounded binding: its
    /// remaining guards are checked (and counted) as the general loop does; if they fail
    /// the raise defaults, else the binding runs as the single bounded binding does
    /// ([`ErasedHandler::raise_bounded`]: one fast invocation, the result validated where
    /// it is returned). With one contribution every combiner returns it unchanged, so the
    /// result is the general loop's. `None`: not such a candidate (the general loop runs).
    #[inline]
    fn raise_one_bounded_candidate(&self, plan: &Plan<A, R>, position: Position, args: &A) -> Option<R> {
        let binding = plan.bindings.get(usize::from(position))?;
        if !matches!(binding.mode, Mode::Bounded { .. }) || binding.health.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let mut evaluations = 0u64;
        let hold = binding.other_guards_hold(args, &mut evaluations);
        if evaluations != 0 {
            self.guard_evaluations.fetch_add(evaluations, Ordering::Relaxed);
        }
        if !hold {
            binding.counters.guard_rejections.fetch_add(1, Ordering::Relaxed);
            self.defaulted.fetch_add(1, Ordering::Relaxed);
            return Some(self.primary.default_result(args));
        }
        Some(binding.handler.raise_bounded(binding, self, plan.account_instructions, args))
    }

    /// The general path when more than one field is indexed: the candidates are the union
    /// of each index's answer.
    #[inline(never)]
    fn raise_several_indexes(&self, plan: &Plan<A, R>, indexes: &[FieldIndex], args: &A) -> R {
        let mut union = BitSet::EMPTY;
        for index in indexes {
            union.insert_all(index.lookup(args.field(index.field)));
        }
        let mut candidates = [0; MAX_BINDINGS_PER_EVENT];
        let mut count = 0;
        for (slot, position) in candidates.iter_mut().zip(union.members()) {
            *slot = position;
            count += 1;
        }
        if count == 1 && plan.bounded_candidates {
            return self.raise_one_candidate(plan, candidates[0], args);
        }
        self.raise_candidates(plan, &candidates[..count], args)
    }

    /// The general path over `candidates`: the loop compiled for the event's combiner.
    #[inline(always)]
    fn raise_candidates(&self, plan: &Plan<A, R>, candidates: &[Position], args: &A) -> R {
        (self.general_loop)(self, plan, candidates, args)
    }

    /// The fast path with instruction accounting on: two more indirect calls (the
    /// counter) and one more atomic add.
    #[inline(never)]
    fn raise_single_accounted(&self, binding: &BindingCore<A, R>, args: &A) -> R {
        binding.counters.fast_invocations.fetch_add(1, Ordering::Relaxed);
        let start = (self.platform.instruction_counter)();
        let outcome = binding.handler.invoke(args);
        let spent = (self.platform.instruction_counter)().wrapping_sub(start);
        binding.counters.instructions.fetch_add(spent, Ordering::Relaxed);
        match outcome {
            Ok(result) => result,
            Err(fault) => self.fault_contribution(binding, Fault::Handler(fault), args),
        }
    }

    /// The general path's loop: guards, modes, validation, combining; compiled once per
    /// accumulator type (see `Combiner::instance`).
    ///
    /// Per raise: one counter, and the default result only if it is needed. Per
    /// candidate: a byte of the candidate list, the health word and the residual guards;
    /// per binding that runs, its invocation counter, the handler call and the combiner's
    /// step. Accounting, bounded mode, validation and faults are handled out of line.
    #[inline(always)]
    fn raise_general<C: Accumulate<R>>(&self, plan: &Plan<A, R>, candidates: &[Position], args: &A) -> R {
        let mut accumulator = C::start(&self.combiner);
        // Not cached: it is needed at most once per raise except after a fault (and
        // `FirstNonDefault` keeps its own copy), and a cache would hold registers all along.
        let mut default = || self.primary.default_result(args);
        let mut evaluations = 0u64;
        for &position in candidates {
            let Some(binding) = plan.bindings.get(usize::from(position)) else { continue };
            if binding.health.load(Ordering::Relaxed) & DISABLED != 0 {
                continue;
            }
            if !binding.other_guards_hold(args, &mut evaluations) {
                binding.counters.guard_rejections.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if binding.mode == Mode::Async {
                // Queued for the binding's worker; contributes no result.
                Self::queue_async(binding, args);
                continue;
            }
            binding.counters.general_invocations.fetch_add(1, Ordering::Relaxed);
            let outcome = if plan.plain && binding.mode == Mode::Sync {
                binding.handler.invoke(args)
            } else {
                self.run_special(binding, args, plan.account_instructions)
            };
            let contribution = match outcome {
                Ok(result) if plan.plain => {
                    binding.record_success();
                    result
                }
                outcome => match self.settle(binding, outcome, args) {
                    Some(result) => result,
                    None => default(),
                },
            };
            if accumulator.push(contribution, &mut default) == Step::Stop {
                break;
            }
        }
        if evaluations != 0 {
            self.guard_evaluations.fetch_add(evaluations, Ordering::Relaxed);
        }
        let raises = if accumulator.is_empty() { &self.defaulted } else { &self.general_raises };
        raises.fetch_add(1, Ordering::Relaxed);
        accumulator.finish(&mut default)
    }

    /// Queues an invocation of an async binding (out of line: rare, and it keeps the raise
    /// loop small). Never blocks; a full queue drops the invocation and counts it.
    #[inline(never)]
    fn queue_async(binding: &BindingCore<A, R>, args: &A) {
        if let Some(lane) = &binding.async_lane {
            lane.enqueue(args);
        }
    }

    /// A binding's contribution when its result must be validated or it faulted: the
    /// result if it is valid, else `None` (the default; the fault is recorded).
    #[inline(never)]
    fn settle(&self, binding: &BindingCore<A, R>, outcome: Result<R, HandlerFault>, args: &A) -> Option<R> {
        let fault = match outcome {
            Ok(result) => match self.validate(args, &result) {
                Ok(()) => {
                    binding.record_success();
                    return Some(result);
                }
                Err(fault) => fault,
            },
            Err(fault) => Fault::Handler(fault),
        };
        binding.record_fault(fault, self.breaker_threshold);
        None
    }

    /// Records a fast-path fault and returns the default result in the binding's place.
    #[cold]
    #[inline(never)]
    pub(crate) fn fault_contribution(&self, binding: &BindingCore<A, R>, fault: Fault, args: &A) -> R {
        binding.record_fault(fault, self.breaker_threshold);
        self.primary.default_result(args)
    }

    /// Runs one binding's handler in its mode, counting instructions if asked: the general
    /// path's way for a bounded binding or with instruction accounting, out of line so that
    /// the common case keeps the raise loop small.
    #[inline(never)]
    fn run_special(&self, binding: &BindingCore<A, R>, args: &A, account: bool) -> Result<R, HandlerFault> {
        if let Mode::Bounded { .. } = binding.mode {
            return self.run_bounded(binding, args, account);
        }
        let start = if account { (self.platform.instruction_counter)() } else { 0 };
        let outcome = binding.handler.invoke(args);
        if account {
            let spent = (self.platform.instruction_counter)().wrapping_sub(start);
            binding.counters.instructions.fetch_add(spent, Ordering::Relaxed);
        }
        outcome
    }

    /// The single bounded binding's raise after its handler ran (`ErasedHandler::
    /// raise_bounded`, monomorphised per handler type, runs it and counts instructions if
    /// asked): validates the result if the primary module does, and answers a fault or a
    /// rejected result with the default. The raise counts as one fast invocation of the
    /// binding, as a fast-path raise does.
    ///
    /// A valid result is returned here, without `settle`. This path is entered only with a
    /// zero health word, so a fault streak can exist here only if another hart began one
    /// meanwhile: any success clears it (one load and test), so the breaker counts only
    /// faults that were consecutive. (The sync fast paths, `raise_fast` and the accounted
    /// single binding, do not: their handlers are trusted built-in code, and the check
    /// would sit on the 1-binding raise. With one hart, as the kernel runs now, neither
    /// race can happen.) A rejected result or a fault goes to
    /// [`Self::fault_contribution`], out of line.
    #[inline]
    pub(crate) fn finish_single_bounded(&self, binding: &BindingCore<A, R>, outcome: Result<R, HandlerFault>, args: &A) -> R {
        let result = match outcome {
            Ok(result) => result,
            Err(fault) => return self.fault_contribution(binding, Fault::Handler(fault), args),
        };
        if self.validates_results
            && let Err(rejection) = self.primary.validate_result(args, &result)
        {
            return self.fault_contribution(binding, Fault::InvalidResult(rejection), args);
        }
        binding.record_success();
        result
    }

    /// Runs a binding's handler under the platform's bounded executor with its budget,
    /// adding the instructions it took to the binding's counter if `account` (the general
    /// path's way; the single bounded binding's raise hands the executor a function
    /// instead, [`Self::run_bounded_raw`]).
    fn run_bounded(&self, binding: &BindingCore<A, R>, args: &A, account: bool) -> Result<R, HandlerFault> {
        // Installation refuses bounded bindings when there is no executor.
        let Some(executor) = self.platform.bounded_executor else {
            return Err(HandlerFault::Unavailable);
        };
        let mut result = None;
        let mut body = || {
            result = Some(binding.handler.invoke(args)?);
            Ok(())
        };
        let outcome = if account {
            let mut spent = 0;
            let outcome = executor.run_bounded_counted(binding.budget, binding.prepared_budget, self.platform.instruction_counter, &mut spent, &mut body);
            binding.counters.instructions.fetch_add(spent, Ordering::Relaxed);
            outcome
        } else {
            executor.run_bounded(binding.budget, binding.prepared_budget, &mut body)
        };
        // An executor that claims success without running the body is a platform bug: a
        // fault rather than an invented result.
        outcome.and_then(|()| result.ok_or(HandlerFault::Unavailable))
    }

    /// Runs `function(data)` (the single bounded binding's handler, see
    /// `ErasedHandler::raise_bounded`) under the platform's bounded executor with the
    /// binding's budget, adding the instructions it took to the binding's counter if
    /// `account`.
    ///
    /// # Safety
    ///
    /// Calling `function(data)` once, on this hart, before this returns, must be sound.
    #[inline(always)]
    pub(crate) unsafe fn run_bounded_raw(&self, binding: &BindingCore<A, R>, account: bool, function: unsafe extern "C" fn(*mut u8), data: *mut u8) -> Result<(), HandlerFault> {
        // Installation refuses bounded bindings when there is no executor.
        let Some(executor) = self.platform.bounded_executor else {
            return Err(HandlerFault::Unavailable);
        };
        let mut spent = 0;
        // SAFETY: this function's own contract, passed on.
        let outcome = unsafe { executor.run_bounded_raw(binding.budget, binding.prepared_budget, self.platform.instruction_counter, account.then_some(&mut spent), function, data) };
        if account {
            binding.counters.instructions.fetch_add(spent, Ordering::Relaxed);
        }
        outcome
    }

    /// Asks the primary module to validate a result, if it validates results.
    #[inline]
    fn validate(&self, args: &A, result: &R) -> Result<(), Fault> {
        if !self.validates_results {
            return Ok(());
        }
        self.primary.validate_result(args, result).map_err(Fault::InvalidResult)
    }

    /// Installs a binding. Checks it, asks the primary module, then publishes a plan with it.
    ///
    /// Errors: [`InstallError::AsyncUnsupported`] (no async executor),
    /// `AsyncWorkerUnavailable`, `BoundedUnsupported`, `ZeroBudget`,
    /// `UnknownField`, `EmptyRange` (bad request); `Refused` (primary module said no);
    /// `TooManyBindings`.
    pub fn install(&self, spec: BindingSpec<A, R>) -> Result<BindingId, InstallError> {
        let approved = self.approve(spec, None)?;
        self.commit(approved, None)
    }

    /// Atomically replaces binding `old` with a new one: every raise runs either `old` or
    /// the new binding, never both and never neither. The new binding gets a new id and
    /// fresh counters, and keeps `old`'s place among bindings of equal order.
    ///
    /// Errors: as [`install`](Self::install), plus `UnknownBinding` if `old` is not
    /// installed on this event.
    pub fn replace(&self, old: BindingId, spec: BindingSpec<A, R>) -> Result<BindingId, InstallError> {
        if old.event != self.descriptor.id {
            return Err(InstallError::UnknownBinding(old));
        }
        let approved = self.approve(spec, Some(old))?;
        self.commit(approved, Some(old))
    }

    /// Checks a request and asks the primary module, without holding any lock (the
    /// primary module may call back into the dispatcher).
    fn approve(&self, spec: BindingSpec<A, R>, replacing: Option<BindingId>) -> Result<Approved<A, R>, InstallError> {
        self.check_mode(spec.mode)?;
        check_guards::<A>(&spec.declarative_guards)?;
        let description = spec.handler.describe();
        let request = InstallRequest {
            owner: &spec.owner,
            handler: &description,
            mode: spec.mode,
            order: spec.order,
            declarative_guards: &spec.declarative_guards,
            predicate_guards: &spec.predicate_guards,
            replacing,
        };
        let authorization = self.primary.authorize(&request).map_err(InstallError::Refused)?;
        check_guards::<A>(&authorization.imposed_declarative_guards)?;
        let mode = match (spec.mode, authorization.budget_cap) {
            // An async binding stays async; the cap bounds each run on its worker.
            (Mode::Async, _) => Mode::Async,
            (_, None) => spec.mode,
            (Mode::Bounded { budget }, Some(cap)) => Mode::Bounded { budget: budget.min(cap) },
            (_, Some(cap)) => Mode::Bounded { budget: cap },
        };
        self.check_mode(mode)?;
        let declarative = authorization
            .imposed_declarative_guards
            .iter()
            .map(|guard| (*guard, true))
            .chain(spec.declarative_guards.iter().map(|guard| (*guard, false)))
            .collect();
        let imposed_predicates = authorization.imposed_predicate_guards.len();
        let mut predicates = authorization.imposed_predicate_guards;
        predicates.extend(spec.predicate_guards.iter().cloned());
        let lane = match mode {
            Mode::Async => Some(self.start_async_lane(&spec, authorization.budget_cap, &description)?),
            _ => None,
        };
        Ok(Approved { spec, mode, declarative, predicates, imposed_predicates, lane })
    }

    /// Starts the worker of a new async binding (before the writer lock is taken: the
    /// platform may allocate a strand). Its budget is the smaller of the installer's and
    /// the primary module's cap.
    fn start_async_lane(
        &self,
        spec: &BindingSpec<A, R>,
        cap: Option<u64>,
        description: &crate::handler::HandlerDescription,
    ) -> Result<StartedLane<A, R>, InstallError> {
        let Some(executor) = &self.platform.async_executor else {
            return Err(InstallError::AsyncUnsupported);
        };
        let budget = match (spec.async_budget, cap) {
            (Some(requested), Some(cap)) => Some(requested.min(cap)),
            (requested, cap) => requested.or(cap),
        };
        match budget {
            Some(0) => return Err(InstallError::ZeroBudget),
            Some(_) if self.platform.bounded_executor.is_none() => return Err(InstallError::BoundedUnsupported),
            _ => {}
        }
        let name = alloc::format!("async {} {}", self.descriptor.name, description.name);
        start_lane(
            executor.as_ref(),
            budget,
            self.platform.bounded_executor,
            self.platform.instruction_counter,
            self.breaker_threshold,
            name,
        )
        .ok_or(InstallError::AsyncWorkerUnavailable)
    }

    /// Whether this dispatcher can run a binding in `mode`.
    fn check_mode(&self, mode: Mode) -> Result<(), InstallError> {
        match mode {
            Mode::Sync => Ok(()),
            Mode::Async if self.platform.async_executor.is_none() => Err(InstallError::AsyncUnsupported),
            Mode::Async => Ok(()),
            Mode::Bounded { budget: 0 } => Err(InstallError::ZeroBudget),
            Mode::Bounded { .. } if self.platform.bounded_executor.is_none() => Err(InstallError::BoundedUnsupported),
            Mode::Bounded { .. } => Ok(()),
        }
    }

    /// Adds an approved binding (removing `replacing`, if given) and publishes.
    fn commit(&self, approved: Approved<A, R>, replacing: Option<BindingId>) -> Result<BindingId, InstallError> {
        let mut state = self.state.lock();
        let mut bindings = state.bindings.clone();
        let mut removed = None;
        let sequence = match replacing {
            Some(old) => {
                let position = bindings
                    .iter()
                    .position(|binding| binding.id == old)
                    .ok_or(InstallError::UnknownBinding(old))?;
                let old_binding = bindings.remove(position);
                let sequence = old_binding.sequence;
                removed = Some(old_binding);
                sequence
            }
            None => state.next_serial,
        };
        if bindings.len() >= MAX_BINDINGS_PER_EVENT {
            return Err(InstallError::TooManyBindings);
        }
        let id = BindingId { event: self.descriptor.id, serial: state.next_serial };
        let (async_lane, runner) = match approved.lane {
            Some((lane, runner)) => (Some(lane), Some(runner)),
            None => (None, None),
        };
        let binding = Arc::new(BindingCore::new(Parts {
            id,
            sequence,
            owner: approved.spec.owner,
            handler: approved.spec.handler,
            mode: approved.mode,
            prepared_budget: match (approved.mode, &self.platform.bounded_executor) {
                (Mode::Bounded { budget }, Some(executor)) => executor.prepare(budget),
                _ => 0,
            },
            requested_mode: approved.spec.mode,
            order: approved.spec.order,
            declarative: approved.declarative,
            predicates: approved.predicates,
            imposed_predicates: approved.imposed_predicates,
            removed_totals: self.removed_totals.clone(),
            async_lane,
        }));
        if let Some(runner) = runner {
            runner.binding.call_once(|| Arc::downgrade(&binding));
        }
        let key = binding.sort_key();
        let position = bindings.partition_point(|existing| existing.sort_key() <= key);
        bindings.insert(position, binding);
        let garbage = self.publish(&state, &bindings);
        state.bindings = bindings;
        state.next_serial += 1;
        if let Some(old_binding) = &removed {
            old_binding.retire();
        }
        drop(state);
        // Retired plans (and with them, possibly, the replaced binding and its handler)
        // are dropped here, outside the lock: a handler's destructor may call back in.
        drop(garbage);
        drop(removed);
        Ok(id)
    }

    /// Compiles and publishes a plan for `bindings`; returns the freed plans to drop.
    fn publish(&self, state: &TableState<A, R>, bindings: &[Arc<BindingCore<A, R>>]) -> Garbage<Plan<A, R>> {
        let plan = Plan::compile(bindings, state.account_instructions, self.validates_results);
        self.plans.publish(plan)
    }

    /// Uninstalls a binding. Raises already running it may finish; no later raise runs it.
    /// Its handler is dropped after the grace period (see [`reclaim`](Self::reclaim)).
    ///
    /// Errors: `UnknownBinding` if it is not installed here.
    pub fn uninstall(&self, id: BindingId) -> Result<(), UpdateError> {
        match self.remove_where(|binding| binding.id == id) {
            0 => Err(UpdateError::UnknownBinding(id)),
            _ => Ok(()),
        }
    }

    /// Uninstalls every binding installed by `owner` (e.g. an extension being killed);
    /// returns how many there were.
    pub fn uninstall_owner(&self, owner: &str) -> usize {
        self.remove_where(|binding| binding.owner == owner)
    }

    /// Removes the bindings matching `condition` with one publication.
    fn remove_where(&self, condition: impl Fn(&BindingCore<A, R>) -> bool) -> usize {
        let mut state = self.state.lock();
        let (removed, kept): (Vec<_>, Vec<_>) = state.bindings.iter().cloned().partition(|binding| condition(binding));
        if removed.is_empty() {
            return 0;
        }
        let garbage = self.publish(&state, &kept);
        state.bindings = kept;
        for binding in &removed {
            binding.retire();
        }
        drop(state);
        drop(garbage);
        removed.len()
    }

    /// Re-enables a binding the circuit breaker disabled and clears its fault streak.
    ///
    /// Errors: `UnknownBinding` if it is not installed here.
    pub fn enable(&self, id: BindingId) -> Result<(), UpdateError> {
        let state = self.state.lock();
        let binding = state.bindings.iter().find(|binding| binding.id == id).ok_or(UpdateError::UnknownBinding(id))?;
        binding.reset_breaker();
        Ok(())
    }

    /// Turns per-binding instruction accounting (two counter reads per handler call) on or
    /// off. On by default; off gives the bare fast path.
    pub fn set_instruction_accounting(&self, on: bool) {
        let mut state = self.state.lock();
        state.account_instructions = on;
        let bindings = state.bindings.clone();
        let garbage = self.publish(&state, &bindings);
        drop(state);
        drop(garbage);
    }

    /// Frees retired plans whose grace period has ended (and the bindings and handlers
    /// only they held). Changes to the event do this too; `Dispatcher::reclaim` does it for
    /// every event, and is what to call after reporting quiescent states.
    pub fn reclaim(&self) {
        drop(self.plans.reclaim());
    }

    /// How many bindings are installed.
    pub fn binding_count(&self) -> usize {
        self.state.lock().bindings.len()
    }

    /// A snapshot of the event, its bindings (in run order) and their counters.
    pub fn snapshot(&self) -> EventSnapshot {
        let state = self.state.lock();
        EventSnapshot {
            id: self.descriptor.id,
            name: self.descriptor.name,
            declaration: self.descriptor.declaration,
            fingerprint: self.descriptor.fingerprint,
            owner: self.owner.clone(),
            combiner: self.combiner.name(),
            instruction_accounting: state.account_instructions,
            counter_unit: self.platform.counter_unit,
            raises: self.raises(&state),
            defaulted: self.defaulted.load(Ordering::Relaxed),
            guard_evaluations: self.guard_evaluations.load(Ordering::Relaxed),
            removed: self.removed_totals.load().public(),
            retired_plans: self.plans.retired_count(),
            bindings: state.bindings.iter().map(|binding| binding.snapshot()).collect(),
        }
    }
}

impl<A: EventRecord, R: EventRecord> EventTable<A, R> {
    /// Raises so far: general-path raises (those that ran a binding and those that
    /// defaulted) plus every fast invocation, of installed and of removed bindings (each
    /// fast-path raise is one fast invocation of the single binding).
    fn raises(&self, state: &TableState<A, R>) -> u64 {
        let fast = |binding: &Arc<BindingCore<A, R>>| binding.counters.fast_invocations.load(Ordering::Relaxed);
        let installed: u64 = state.bindings.iter().map(fast).sum();
        let general = self.general_raises.load(Ordering::Relaxed) + self.defaulted.load(Ordering::Relaxed);
        general + installed + self.removed_totals.load().fast_invocations
    }
}

/// The general path's loop for one accumulator type.
type GeneralLoop<A, R> = fn(&EventTable<A, R>, &Plan<A, R>, &[Position], &A) -> R;

/// Instantiates the general path's loop per accumulator type (see `Combiner::instance`).
struct GeneralLoopOf<A, R>(PhantomData<(A, R)>);

impl<A: EventRecord, R: EventRecord> PerAccumulator<R> for GeneralLoopOf<A, R> {
    type Instance = GeneralLoop<A, R>;

    fn instance<C: Accumulate<R>>() -> GeneralLoop<A, R> {
        |table, plan, candidates, args| table.raise_general::<C>(plan, candidates, args)
    }
}

/// Checks that declarative guards name existing fields and can hold.
fn check_guards<A: EventRecord>(guards: &[DeclarativeGuard]) -> Result<(), InstallError> {
    for guard in guards {
        if guard.field >= A::FIELDS.len() {
            return Err(InstallError::UnknownField { field: guard.field, field_count: A::FIELDS.len() });
        }
        if let FieldTest::InRange { low, high } = guard.test
            && low > high
        {
            return Err(InstallError::EmptyRange { field: guard.field });
        }
    }
    Ok(())
}
