//! Primary modules: the owner of each event.
//!
//! As in SPIN, the core service that declares an event is its *primary module*. It supplies
//! the default handler (the result when no binding contributes, and the stand-in for a
//! binding that faults), authorises or refuses every installation with a specific reason,
//! may impose guards and a time budget on the bindings it accepts, chooses the result
//! combiner, and may validate every result before the raiser sees it (VINO-style: a bad
//! result counts as a fault of the binding that produced it).
//!
//! The dispatcher calls `authorize` with no lock held, so a primary module may inspect
//! the dispatcher (e.g. take a snapshot) while deciding. Limitation: the installer's
//! identity (`InstallRequest::owner`) is whatever the caller claims; the extension loader
//! is expected to fill it in, and capability checks belong there.

use alloc::vec::Vec;
use core::fmt;

use crate::combiner::Combiner;
use crate::guard::{DeclarativeGuard, PredicateGuard};
use crate::handler::{BindingId, HandlerDescription, Mode, Order};

/// Consecutive faults after which a binding is disabled unless the primary module says
/// otherwise (see [`PrimaryModule::breaker_threshold`]).
pub const DEFAULT_BREAKER_THRESHOLD: u32 = 3;

/// The owner of an event.
pub trait PrimaryModule<A, R>: Send + Sync {
    /// The module's name, shown as the event's owner (e.g. `"clock"`).
    fn name(&self) -> &str;

    /// The default handler: the event's result when no binding runs, and the stand-in
    /// contribution of a binding that faults or returns an invalid result.
    fn default_result(&self, args: &A) -> R;

    /// How results of several bindings combine. Asked once, at registration.
    fn combiner(&self) -> Combiner<R> {
        Combiner::Last
    }

    /// Authorises or refuses an installation (or a replacement, see
    /// [`InstallRequest::replacing`]). An accepted request may come back with guards and
    /// a budget the binding must obey. The default lets anyone bind, unbounded by the
    /// module (the binding's own mode still applies).
    fn authorize(&self, request: &InstallRequest<'_, A>) -> Result<Authorization<A>, Refusal> {
        let _ = request;
        Ok(Authorization::allow())
    }

    /// Whether [`validate_result`](Self::validate_result) must be called on every result.
    /// Asked once, at registration; `false` (the default) keeps the single-binding fast path.
    fn validates_results(&self) -> bool {
        false
    }

    /// Checks one binding's result before it is used. `Err` counts as a fault of that
    /// binding and the default result is used in its place.
    fn validate_result(&self, args: &A, result: &R) -> Result<(), ResultRejection> {
        let _ = (args, result);
        Ok(())
    }

    /// Consecutive faults after which a binding is disabled (circuit breaker); 0 never
    /// disables. Asked once, at registration.
    fn breaker_threshold(&self) -> u32 {
        DEFAULT_BREAKER_THRESHOLD
    }
}

/// What a primary module sees of an installation request.
pub struct InstallRequest<'a, A> {
    /// Who is installing (an extension's name).
    pub owner: &'a str,
    /// The handler to install: its technology and name.
    pub handler: &'a HandlerDescription,
    /// The requested mode (an `Async` request reaches the primary module only when the
    /// platform can run async bindings).
    pub mode: Mode,
    /// The requested order.
    pub order: Order,
    /// The installer's own declarative guards.
    pub declarative_guards: &'a [DeclarativeGuard],
    /// The installer's own predicate guards.
    pub predicate_guards: &'a [PredicateGuard<A>],
    /// The binding this request would replace atomically, if it is a replacement.
    pub replacing: Option<BindingId>,
}

/// A primary module's consent, with the constraints it imposes on the binding.
///
/// Imposed guards are evaluated before the installer's own guards, so extension guard code
/// never sees a raise its primary module did not allow it to see.
pub struct Authorization<A> {
    /// Declarative guards added to the binding.
    pub imposed_declarative_guards: Vec<DeclarativeGuard>,
    /// Predicate guards added to the binding, evaluated before the installer's predicates.
    pub imposed_predicate_guards: Vec<PredicateGuard<A>>,
    /// If set, the binding runs bounded with at most this budget: a `Sync` request becomes
    /// `Bounded { budget: cap }`, a larger `Bounded` budget is lowered to `cap`.
    pub budget_cap: Option<u64>,
}

impl<A> Authorization<A> {
    /// Consent without constraints.
    pub fn allow() -> Self {
        Authorization {
            imposed_declarative_guards: Vec::new(),
            imposed_predicate_guards: Vec::new(),
            budget_cap: None,
        }
    }

    /// Adds an imposed declarative guard.
    pub fn impose(mut self, guard: DeclarativeGuard) -> Self {
        self.imposed_declarative_guards.push(guard);
        self
    }

    /// Adds an imposed predicate guard.
    pub fn impose_predicate(mut self, guard: PredicateGuard<A>) -> Self {
        self.imposed_predicate_guards.push(guard);
        self
    }

    /// Caps the binding's budget (forcing bounded mode).
    pub fn cap_budget(mut self, budget: u64) -> Self {
        self.budget_cap = Some(budget);
        self
    }
}

/// Why a primary module refused an installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The installer may not handle this event at all.
    NotPermitted,
    /// The installer must narrow the binding with a guard (e.g. to its own resources).
    GuardRequired,
    /// The requested mode is not allowed for this installer.
    ModeNotAllowed,
    /// The requested order is not allowed (e.g. only the owner may run `First`).
    OrderNotAllowed,
    /// The installer already has as many bindings as the module allows.
    QuotaExceeded,
    /// The request would replace a binding the installer does not own.
    NotOwner,
    /// A reason specific to this module.
    Other(&'static str),
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotPermitted => write!(formatter, "not permitted to handle this event"),
            Refusal::GuardRequired => write!(formatter, "a guard is required"),
            Refusal::ModeNotAllowed => write!(formatter, "mode not allowed"),
            Refusal::OrderNotAllowed => write!(formatter, "order not allowed"),
            Refusal::QuotaExceeded => write!(formatter, "binding quota exceeded"),
            Refusal::NotOwner => write!(formatter, "binding belongs to someone else"),
            Refusal::Other(reason) => write!(formatter, "{reason}"),
        }
    }
}

/// Why a primary module rejected a handler's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultRejection {
    /// What was wrong, e.g. `"volunteered frame not owned by the handler's domain"`.
    pub reason: &'static str,
}

impl fmt::Display for ResultRejection {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "invalid result: {}", self.reason)
    }
}
