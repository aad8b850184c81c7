//! An installed binding: handler, guards, mode, order, counters and circuit-breaker state.
//!
//! A `BindingCore` is immutable after installation except for its atomic counters and
//! health word, and is shared (`Arc`) between the event's authoritative binding list and
//! every published plan that contains it, so a raise still following an old plan can
//! run a binding that has just been uninstalled; the binding is freed when the last plan
//! holding it is reclaimed.
//!
//! The handler is stored as a `Box<dyn ErasedHandler>` around the installer's `Arc<H>`;
//! its `raise_fast` is monomorphised per handler type, so the raise fast path is one
//! indirect (tail) call into code where the handler's own `invoke` is inlined.
//!
//! The health word packs the consecutive-fault count (low 31 bits) and a DISABLED flag
//! (bit 31) so a raise checks both with one load. Fault details are kept behind small
//! spin locks that raises only ever `try_lock` (a raise never waits, even if a console
//! snapshot on the same hart was interrupted while holding one); a contended fault record
//! is skipped, the counters stay exact.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spindle_abi::event::EventRecord;

use crate::asynchronous::AsyncLane;
use crate::guard::{DeclarativeGuard, PredicateGuard};
use crate::handler::{BindingId, Handler, HandlerDescription, HandlerFault, Mode, Order};
use crate::introspect::{BindingSnapshot, Counters, DisabledReason, Fault, GuardKind, GuardSnapshot};
use crate::table::EventTable;

/// Health-word flag: the circuit breaker disabled the binding.
pub(crate) const DISABLED: u32 = 1 << 31;
/// Health-word mask: consecutive faults since the last success.
const CONSECUTIVE_MASK: u32 = DISABLED - 1;

/// Counter values. Invocations are split by path so that an event's raise count can be
/// derived without a per-event counter on the fast path: every fast-path raise is exactly
/// one fast invocation of the event's single binding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CounterValues {
    pub(crate) general_invocations: u64,
    pub(crate) fast_invocations: u64,
    pub(crate) guard_rejections: u64,
    pub(crate) instructions: u64,
    pub(crate) faults: u64,
    pub(crate) overruns: u64,
}

impl CounterValues {
    /// The public view (invocations summed over both paths).
    pub(crate) fn public(&self) -> Counters {
        Counters {
            invocations: self.general_invocations.wrapping_add(self.fast_invocations),
            guard_rejections: self.guard_rejections,
            instructions: self.instructions,
            faults: self.faults,
            overruns: self.overruns,
        }
    }

    /// `self - other`, counter by counter (wrapping).
    fn minus(mut self, other: &CounterValues) -> CounterValues {
        self.general_invocations = self.general_invocations.wrapping_sub(other.general_invocations);
        self.fast_invocations = self.fast_invocations.wrapping_sub(other.fast_invocations);
        self.guard_rejections = self.guard_rejections.wrapping_sub(other.guard_rejections);
        self.instructions = self.instructions.wrapping_sub(other.instructions);
        self.faults = self.faults.wrapping_sub(other.faults);
        self.overruns = self.overruns.wrapping_sub(other.overruns);
        self
    }
}

/// A binding's activity counters, updated with relaxed atomic adds.
#[derive(Default)]
pub(crate) struct AtomicCounters {
    pub(crate) general_invocations: AtomicU64,
    pub(crate) fast_invocations: AtomicU64,
    pub(crate) guard_rejections: AtomicU64,
    pub(crate) instructions: AtomicU64,
    pub(crate) faults: AtomicU64,
    pub(crate) overruns: AtomicU64,
}

impl AtomicCounters {
    /// Adds `values`, counter by counter.
    pub(crate) fn add(&self, values: &CounterValues) {
        self.general_invocations.fetch_add(values.general_invocations, Ordering::Relaxed);
        self.fast_invocations.fetch_add(values.fast_invocations, Ordering::Relaxed);
        self.guard_rejections.fetch_add(values.guard_rejections, Ordering::Relaxed);
        self.instructions.fetch_add(values.instructions, Ordering::Relaxed);
        self.faults.fetch_add(values.faults, Ordering::Relaxed);
        self.overruns.fetch_add(values.overruns, Ordering::Relaxed);
    }

    /// The values now.
    pub(crate) fn load(&self) -> CounterValues {
        CounterValues {
            general_invocations: self.general_invocations.load(Ordering::Relaxed),
            fast_invocations: self.fast_invocations.load(Ordering::Relaxed),
            guard_rejections: self.guard_rejections.load(Ordering::Relaxed),
            instructions: self.instructions.load(Ordering::Relaxed),
            faults: self.faults.load(Ordering::Relaxed),
            overruns: self.overruns.load(Ordering::Relaxed),
        }
    }
}

/// A caller's `Arc<H>`, boxed as a binding's handler.
///
/// Why boxed rather than kept as `Arc<dyn Handler>`: calling through `Arc<dyn _>` must
/// first find the value inside the `Arc` using the alignment stored in the vtable (five
/// instructions on RISC-V), while a `Box` points at its value; and for a concrete `H`,
/// the methods below call `H::invoke` statically, so it is inlined into them.
pub(crate) struct SharedHandler<H: ?Sized>(pub(crate) Arc<H>);

/// A binding's handler as the dispatcher calls it.
pub(crate) trait ErasedHandler<A: EventRecord, R: EventRecord>: Send + Sync {
    /// Calls the handler.
    fn invoke(&self, args: &A) -> Result<R, HandlerFault>;
    /// The handler's description.
    fn describe(&self) -> HandlerDescription;
    /// Tells the handler one of its invocations faulted.
    fn faulted(&self, fault: &HandlerFault);
    /// The rest of the raise fast path, monomorphised per handler type: count the
    /// invocation, call the handler (inlined), answer a fault with the default.
    fn raise_fast(&self, binding: &BindingCore<A, R>, table: &EventTable<A, R>, args: &A) -> R;
    /// The raise of an event whose only binding is bounded and unguarded, monomorphised
    /// per handler type: count the invocation, run the handler (inlined into the body the
    /// executor calls) under the platform's bounded executor with `budget`, then let the
    /// table account, validate and answer a fault (`EventTable::finish_single_bounded`).
    fn raise_bounded(&self, binding: &BindingCore<A, R>, table: &EventTable<A, R>, account: bool, args: &A) -> R;
}

impl<A, R, H> ErasedHandler<A, R> for SharedHandler<H>
where
    A: EventRecord,
    R: EventRecord,
    H: Handler<A, R> + ?Sized,
{
    #[inline]
    fn invoke(&self, args: &A) -> Result<R, HandlerFault> {
        self.0.invoke(args)
    }

    fn faulted(&self, fault: &HandlerFault) {
        self.0.faulted(fault);
    }

    fn describe(&self) -> HandlerDescription {
        self.0.describe()
    }

    #[inline]
    fn raise_fast(&self, binding: &BindingCore<A, R>, table: &EventTable<A, R>, args: &A) -> R {
        binding.counters.fast_invocations.fetch_add(1, Ordering::Relaxed);
        match self.0.invoke(args) {
            Ok(result) => result,
            Err(fault) => table.fault_contribution(binding, Fault::Handler(fault), args),
        }
    }

    #[inline(never)]
    fn raise_bounded(&self, binding: &BindingCore<A, R>, table: &EventTable<A, R>, account: bool, args: &A) -> R {
        binding.counters.fast_invocations.fetch_add(1, Ordering::Relaxed);
        // An executor that claims success without calling the function is a platform bug:
        // the outcome it leaves is a fault rather than an invented result.
        let mut frame = BoundedFrame { handler: &*self.0, args, outcome: Err(HandlerFault::Unavailable) };
        // SAFETY: `run_bounded_frame::<A, R, H>` is made for `frame`'s type, and `frame` is
        // live and used by nothing else until the executor returns.
        let ran = unsafe { table.run_bounded_raw(binding, account, run_bounded_frame::<A, R, H>, (&raw mut frame).cast::<u8>()) };
        // The outcome is read only if the function returned: an abort may have left it
        // half written.
        let outcome = match ran {
            Ok(()) => frame.outcome,
            Err(fault) => Err(fault),
        };
        table.finish_single_bounded(binding, outcome, args)
    }
}

/// What the single bounded binding's raise hands the bounded executor: the handler, its
/// arguments, and the place for its outcome ([`run_bounded_frame`] fills it).
struct BoundedFrame<'a, A, R, H: ?Sized> {
    handler: &'a H,
    args: &'a A,
    outcome: Result<R, HandlerFault>,
}

/// Runs the handler of a [`BoundedFrame`] (the function a bounded executor calls, made for
/// one handler type, so that the handler's `invoke` is inlined here).
///
/// # Safety
///
/// `data` points to a live `BoundedFrame<A, R, H>` that nothing else uses during the call.
unsafe extern "C" fn run_bounded_frame<A, R, H>(data: *mut u8)
where
    A: EventRecord,
    R: EventRecord,
    H: Handler<A, R> + ?Sized,
{
    // SAFETY: the function's contract: `raise_bounded` passes its own frame, of these
    // types, exclusively borrowed until the executor returns.
    let frame = unsafe { &mut *data.cast::<BoundedFrame<'_, A, R, H>>() };
    frame.outcome = frame.handler.invoke(frame.args);
}


/// The guard a binding is indexed by: `low <= args.field <= high`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key {
    pub(crate) field: usize,
    pub(crate) low: u64,
    pub(crate) high: u64,
}

/// Everything `BindingCore::new` needs, already checked and authorised.
pub(crate) struct Parts<A: EventRecord, R: EventRecord> {
    pub(crate) id: BindingId,
    pub(crate) sequence: u64,
    pub(crate) owner: String,
    pub(crate) handler: Box<dyn ErasedHandler<A, R>>,
    pub(crate) mode: Mode,
    /// A bounded binding's budget in the bounded executor's units
    /// (`BoundedExecutor::prepare`); 0 for other modes.
    pub(crate) prepared_budget: u64,
    pub(crate) requested_mode: Mode,
    pub(crate) order: Order,
    /// Imposed declarative guards, then the installer's.
    pub(crate) declarative: Vec<(DeclarativeGuard, bool)>,
    /// Imposed predicate guards, then the installer's.
    pub(crate) predicates: Vec<PredicateGuard<A>>,
    pub(crate) imposed_predicates: usize,
    /// Where the binding's counters go when it is removed (the event's removed totals).
    pub(crate) removed_totals: Arc<AtomicCounters>,
    /// The queue and worker of an async binding.
    pub(crate) async_lane: Option<AsyncLane<A>>,
}

/// An installed binding.
pub(crate) struct BindingCore<A: EventRecord, R: EventRecord> {
    pub(crate) id: BindingId,
    /// Installation number (kept by a replacement), the tie-break of the order.
    pub(crate) sequence: u64,
    pub(crate) owner: String,
    pub(crate) handler: Box<dyn ErasedHandler<A, R>>,
    description: HandlerDescription,
    pub(crate) mode: Mode,
    /// A bounded binding's budget (nanoseconds of guest time; 0 for other modes), and
    /// the same in the bounded executor's units (`Parts::prepared_budget`).
    pub(crate) budget: u64,
    pub(crate) prepared_budget: u64,
    requested_mode: Mode,
    pub(crate) order: Order,
    /// The indexed guard, if any.
    pub(crate) key: Option<Key>,
    /// Position of the key in `declarative`.
    key_position: Option<usize>,
    /// All declarative guards (imposed first) with an "imposed" flag, for introspection.
    declarative: Vec<(DeclarativeGuard, bool)>,
    /// Declarative guards other than the key, checked after the index lookup.
    residual: Vec<DeclarativeGuard>,
    /// Predicate guards, imposed first.
    predicates: Vec<PredicateGuard<A>>,
    imposed_predicates: usize,
    /// Sync, and no guard to check once the index has chosen it (no residual declarative
    /// guard, no predicate): as the only candidate of a raise it can take the fast path.
    pub(crate) plain: bool,
    pub(crate) counters: AtomicCounters,
    /// Consecutive faults and the DISABLED flag.
    pub(crate) health: AtomicU32,
    disabled: spin::Mutex<Option<DisabledReason>>,
    last_fault: spin::Mutex<Option<Fault>>,
    /// The event's removed totals, and what this binding has already added to them.
    removed_totals: Arc<AtomicCounters>,
    folded: spin::Mutex<Option<CounterValues>>,
    /// The queue and worker of an async binding (dropping it stops the worker).
    pub(crate) async_lane: Option<AsyncLane<A>>,
}

impl<A: EventRecord, R: EventRecord> Drop for BindingCore<A, R> {
    /// Raises that read a plan before the binding was removed may have counted after
    /// `retire` folded its counters; add that remainder now that nothing can run it.
    fn drop(&mut self) {
        if let Some(folded) = *self.folded.get_mut() {
            self.removed_totals.add(&self.counters.load().minus(&folded));
        }
    }
}

impl<A: EventRecord, R: EventRecord> BindingCore<A, R> {
    /// Builds a binding; picks its key guard (first equality, else first range).
    pub(crate) fn new(parts: Parts<A, R>) -> Self {
        let is_equality = |guard: &DeclarativeGuard| guard.interval().is_some_and(|(low, high)| low == high);
        let key_position = parts
            .declarative
            .iter()
            .position(|(guard, _)| is_equality(guard))
            .or_else(|| parts.declarative.iter().position(|(guard, _)| guard.interval().is_some()));
        let key = key_position.and_then(|position| {
            let guard = parts.declarative[position].0;
            guard.interval().map(|(low, high)| Key { field: guard.field, low, high })
        });
        let residual: Vec<DeclarativeGuard> = parts
            .declarative
            .iter()
            .enumerate()
            .filter(|&(position, _)| Some(position) != key_position)
            .map(|(_, (guard, _))| *guard)
            .collect();
        let description = parts.handler.describe();
        BindingCore {
            id: parts.id,
            sequence: parts.sequence,
            owner: parts.owner,
            handler: parts.handler,
            description,
            mode: parts.mode,
            budget: match parts.mode {
                Mode::Bounded { budget } => budget,
                _ => 0,
            },
            prepared_budget: parts.prepared_budget,
            requested_mode: parts.requested_mode,
            order: parts.order,
            key,
            key_position,
            declarative: parts.declarative,
            plain: parts.mode == Mode::Sync && residual.is_empty() && parts.predicates.is_empty(),
            residual,
            predicates: parts.predicates,
            imposed_predicates: parts.imposed_predicates,
            counters: AtomicCounters::default(),
            health: AtomicU32::new(0),
            disabled: spin::Mutex::new(None),
            last_fault: spin::Mutex::new(None),
            removed_totals: parts.removed_totals,
            folded: spin::Mutex::new(None),
            async_lane: parts.async_lane,
        }
    }

    /// Called when the binding leaves the event's list: folds its counters into the
    /// event's removed totals (the rest follows when it is dropped).
    pub(crate) fn retire(&self) {
        let counters = self.counters.load();
        let mut folded = self.folded.lock();
        if folded.is_none() {
            self.removed_totals.add(&counters);
            *folded = Some(counters);
        }
    }

    /// The order's sort key; bindings run in ascending key order.
    pub(crate) fn sort_key(&self) -> (u8, i64, u64) {
        self.order.sort_key(self.sequence)
    }

    /// Whether the binding has no guards of any kind (a fast-path requirement).
    pub(crate) fn is_unguarded(&self) -> bool {
        self.declarative.is_empty() && self.predicates.is_empty()
    }

    /// Checks the guards the index did not: residual declarative guards, then predicates
    /// in order (imposed first). Adds the number of guards evaluated to `evaluations`.
    #[inline]
    pub(crate) fn other_guards_hold(&self, args: &A, evaluations: &mut u64) -> bool {
        // Residual declarative guards are rare (a second declarative guard on one binding)
        // and evaluating them inline would keep argument fields in registers all through
        // the raise loop; so they are checked out of line.
        if !self.residual.is_empty() && !self.residual_guards_hold(args, evaluations) {
            return false;
        }
        for (position, guard) in self.predicates.iter().enumerate() {
            if !guard.holds(args) {
                *evaluations += position as u64 + 1;
                return false;
            }
        }
        *evaluations += self.predicates.len() as u64;
        true
    }

    /// The residual declarative guards' part of [`other_guards_hold`](Self::other_guards_hold).
    #[inline(never)]
    fn residual_guards_hold(&self, args: &A, evaluations: &mut u64) -> bool {
        for (position, guard) in self.residual.iter().enumerate() {
            if !guard.holds(args) {
                *evaluations += position as u64 + 1;
                return false;
            }
        }
        *evaluations += self.residual.len() as u64;
        true
    }

    /// Records a fault; trips the breaker after `threshold` consecutive faults (0: never).
    /// Out of line: faults are rare, and inlined this made every raise loop larger.
    #[cold]
    #[inline(never)]
    pub(crate) fn record_fault(&self, fault: Fault, threshold: u32) {
        self.counters.faults.fetch_add(1, Ordering::Relaxed);
        if let Fault::Handler(HandlerFault::Overrun { .. }) = fault {
            self.counters.overruns.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(mut last) = self.last_fault.try_lock() {
            *last = Some(fault);
        }
        // The hook runs once the fault is counted, so that what it sees of the binding
        // (a snapshot kept by containment, say) includes this fault.
        if let Fault::Handler(handler_fault) = &fault {
            self.handler.faulted(handler_fault);
        }
        // Saturating increment of the consecutive count, leaving the flag alone.
        let previous = self
            .health
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |health| {
                Some(if health & CONSECUTIVE_MASK == CONSECUTIVE_MASK { health } else { health + 1 })
            })
            .unwrap_or_else(|health| health);
        let consecutive = (previous & CONSECUTIVE_MASK).saturating_add(1).min(CONSECUTIVE_MASK);
        if threshold != 0 && consecutive >= threshold && previous & DISABLED == 0 {
            let before = self.health.fetch_or(DISABLED, Ordering::Relaxed);
            if before & DISABLED == 0 {
                // We tripped it; record why. `try_lock`: see the module docs.
                if let Some(mut reason) = self.disabled.try_lock() {
                    *reason = Some(DisabledReason { consecutive_faults: consecutive, fault });
                }
            }
        }
    }

    /// Clears the consecutive-fault count after a success, keeping the DISABLED flag.
    #[inline]
    pub(crate) fn record_success(&self) {
        // Load first: the common case (no streak) writes nothing.
        if self.health.load(Ordering::Relaxed) & CONSECUTIVE_MASK != 0 {
            self.health.fetch_and(DISABLED, Ordering::Relaxed);
        }
    }

    /// Re-enables a disabled binding and forgets its fault streak.
    pub(crate) fn reset_breaker(&self) {
        self.health.store(0, Ordering::Relaxed);
        *self.disabled.lock() = None;
    }

    /// The binding as introspection shows it.
    pub(crate) fn snapshot(&self) -> BindingSnapshot {
        let fields = A::FIELDS;
        let mut guards: Vec<GuardSnapshot> = self
            .declarative
            .iter()
            .enumerate()
            .map(|(position, (guard, imposed))| GuardSnapshot {
                text: guard.describe(fields),
                imposed: *imposed,
                kind: if Some(position) == self.key_position { GuardKind::Indexed } else { GuardKind::Declarative },
            })
            .collect();
        guards.extend(self.predicates.iter().enumerate().map(|(position, guard)| GuardSnapshot {
            text: String::from(guard.description()),
            imposed: position < self.imposed_predicates,
            kind: GuardKind::Predicate,
        }));
        let health = self.health.load(Ordering::Relaxed);
        let last_fault = *self.last_fault.lock();
        let disabled = (health & DISABLED != 0).then(|| {
            // The tripping raise may have found the lock busy; fall back to the last fault.
            (*self.disabled.lock()).unwrap_or(DisabledReason {
                consecutive_faults: health & CONSECUTIVE_MASK,
                fault: last_fault.unwrap_or(Fault::Handler(HandlerFault::Unavailable)),
            })
        });
        BindingSnapshot {
            id: self.id,
            owner: self.owner.clone(),
            handler: self.description.clone(),
            mode: self.mode,
            requested_mode: self.requested_mode,
            order: self.order,
            guards,
            counters: self.counters.load().public(),
            consecutive_faults: health & CONSECUTIVE_MASK,
            disabled,
            last_fault,
            asynchronous: self.async_lane.as_ref().map(AsyncLane::snapshot),
        }
    }
}
