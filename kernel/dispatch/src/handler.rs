//! Handlers, faults, and the description of a binding to install.
//!
//! A handler is a trait object, [`Handler<A, R>`], so every technology plugs in the same
//! way: a built-in Rust handler implements it directly (its fields are the SPIN *closure*,
//! the per-installation context), and the native, Wasm and user-level runtimes will each
//! provide an adapter that marshals the plain-record arguments and turns a panic, trap,
//! fuel exhaustion or upcall timeout into a [`HandlerFault`].
//!
//! A [`BindingSpec`] is what an installer asks for: handler, guards, [`Mode`] and
//! [`Order`]. The event's primary module sees it before anything is installed.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use spindle_abi::event::{EventId, EventRecord};

use crate::binding::{ErasedHandler, SharedHandler};

use crate::guard::{DeclarativeGuard, PredicateGuard};

/// How a handler was built and where it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Technology {
    /// Rust compiled into the kernel.
    BuiltIn,
    /// A signed, dynamically linked native extension.
    Native,
    /// A WebAssembly module run by the kernel's interpreter.
    Wasm,
    /// A handler in a user-mode process, reached by an upcall.
    UserLevel,
}

impl fmt::Display for Technology {
    /// The word listings use: `built-in`, `native`, `wasm`, `user-level`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Technology::BuiltIn => "built-in",
            Technology::Native => "native",
            Technology::Wasm => "wasm",
            Technology::UserLevel => "user-level",
        })
    }
}

/// What introspection shows about a handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerDescription {
    /// The handler's technology.
    pub technology: Technology,
    /// A short human-readable name, e.g. `"hotlist.evict"`.
    pub name: String,
}

/// Why a handler invocation produced no usable result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerFault {
    /// The handler panicked and was caught at a recovery point.
    Panicked,
    /// The handler trapped: a CPU exception (`scause`), a Wasm trap code, or a user
    /// process fault.
    Trapped {
        /// Technology-specific trap cause.
        cause: u64,
    },
    /// The handler ran past its budget and was aborted (timer, fuel, upcall timeout).
    Overrun {
        /// The budget it had, in nanoseconds of guest time (instructions under an exact
        /// clock; a Wasm handler's fuel units).
        budget: u64,
    },
    /// The technology could not decode the handler's result into the result record.
    MalformedResult,
    /// The handler could not be run (its extension is gone, or a bounded executor did
    /// not run it).
    Unavailable,
}

impl fmt::Display for HandlerFault {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandlerFault::Panicked => write!(formatter, "panicked"),
            HandlerFault::Trapped { cause } => write!(formatter, "trapped (cause {cause:#x})"),
            HandlerFault::Overrun { budget } => write!(formatter, "overran budget of {}", BudgetSpan(*budget)),
            HandlerFault::MalformedResult => write!(formatter, "returned a malformed result"),
            HandlerFault::Unavailable => write!(formatter, "unavailable"),
        }
    }
}

/// A procedure of the event's type.
///
/// `invoke` is called with no dispatcher lock held, possibly on several harts at once and
/// possibly re-entrantly (a handler may raise events, including its own, and may install
/// or uninstall bindings).
pub trait Handler<A, R>: Send + Sync {
    /// Handles one raise; `Err` makes the dispatcher count a fault and use the event's
    /// default result for this handler's contribution.
    fn invoke(&self, args: &A) -> Result<R, HandlerFault>;

    /// What introspection shows about this handler.
    fn describe(&self) -> HandlerDescription;

    /// Called after an invocation of this handler faulted — including an overrun caught
    /// by the bounded executor, which the handler itself never sees return — once the
    /// dispatcher has recorded the fault, outside the invocation's budget. Technologies
    /// use it for containment (killing the extension); the default does nothing.
    fn faulted(&self, _fault: &HandlerFault) {}
}

/// A built-in handler made from a name and a closure; see [`handler_fn`].
pub struct FnHandler<F> {
    name: &'static str,
    function: F,
}

impl<A, R, F> Handler<A, R> for FnHandler<F>
where
    F: Fn(&A) -> Result<R, HandlerFault> + Send + Sync,
{
    #[inline]
    fn invoke(&self, args: &A) -> Result<R, HandlerFault> {
        (self.function)(args)
    }

    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::BuiltIn, name: String::from(self.name) }
    }
}

/// A built-in handler from a closure (whatever it captures is its per-installation context).
pub fn handler_fn<A, R, F>(name: &'static str, function: F) -> Arc<FnHandler<F>>
where
    F: Fn(&A) -> Result<R, HandlerFault> + Send + Sync + 'static,
{
    Arc::new(FnHandler { name, function })
}

/// How a binding's handler runs relative to the raiser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the raiser's context, to completion.
    Sync,
    /// In a worker of its own (the kernel: a strand per binding): the raise queues a copy of
    /// the arguments and returns at once; the handler contributes no result. Bounded by
    /// [`BindingSpec::async_budget`] and the primary module's cap, if any. Needs the
    /// platform's async executor (else `InstallError::AsyncUnsupported`).
    Async,
    /// In the raiser's context under the platform's bounded executor: a handler that runs
    /// past `budget` instructions is aborted and the event's default is used instead.
    Bounded {
        /// Instructions the handler may execute per invocation.
        budget: u64,
    },
}

/// A budget (nanoseconds of guest time) written for people: `100 us`, `1500 ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetSpan(pub u64);

impl fmt::Display for BudgetSpan {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1_000 && self.0.is_multiple_of(1_000) {
            write!(formatter, "{} us", self.0 / 1_000)
        } else {
            write!(formatter, "{} ns", self.0)
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Sync => write!(formatter, "sync"),
            Mode::Async => write!(formatter, "async"),
            Mode::Bounded { budget } => write!(formatter, "bounded({})", BudgetSpan(*budget)),
        }
    }
}

/// Where a binding runs relative to the event's other bindings.
///
/// Bindings run `First` ones, then `Priority` ones from the highest priority down, then
/// `Last` ones. Ties: among `First`, the newest installation runs first; among equal
/// priorities and among `Last`, the oldest runs first (so the newest `Last` really is last).
/// A replacement keeps the replaced binding's place among its ties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Before every `Priority` and `Last` binding.
    First,
    /// Between `First` and `Last`; higher values run earlier.
    Priority(i32),
    /// After every other binding.
    Last,
}

impl Default for Order {
    /// `Priority(0)`.
    fn default() -> Self {
        Order::Priority(0)
    }
}

impl Order {
    /// Sort key: ascending keys run earlier. `sequence` is the installation number.
    pub(crate) fn sort_key(self, sequence: u64) -> (u8, i64, u64) {
        match self {
            Order::First => (0, 0, u64::MAX - sequence),
            Order::Priority(priority) => (1, -i64::from(priority), sequence),
            Order::Last => (2, 0, sequence),
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Order::First => write!(formatter, "first"),
            Order::Priority(priority) => write!(formatter, "priority({priority})"),
            Order::Last => write!(formatter, "last"),
        }
    }
}

/// Names one installed binding: the event it is bound to and a number unique within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindingId {
    /// The event the binding is installed on.
    pub event: EventId,
    /// Unique among the event's bindings, never reused.
    pub serial: u64,
}

impl fmt::Display for BindingId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}.{}", self.event, self.serial)
    }
}

/// A request to install a handler: the handler and how it should be bound.
pub struct BindingSpec<A: EventRecord, R: EventRecord> {
    /// Who installs it (an extension's name); used for authorisation, introspection and
    /// removing all of an extension's bindings when it is killed.
    pub owner: String,
    /// The handler, set by [`BindingSpec::new`].
    pub(crate) handler: Box<dyn ErasedHandler<A, R>>,
    /// Declarative guards, all of which must hold.
    pub declarative_guards: Vec<DeclarativeGuard>,
    /// Predicate guards, evaluated in order after the declarative ones.
    pub predicate_guards: Vec<PredicateGuard<A>>,
    /// How the handler runs.
    pub mode: Mode,
    /// Where it runs among the event's bindings.
    pub order: Order,
    /// For an async binding: the budget (instructions) of each run on its worker, before
    /// the primary module's cap; `None` with no cap runs it unbounded.
    pub async_budget: Option<u64>,
}

impl<A: EventRecord, R: EventRecord> BindingSpec<A, R> {
    /// A sync, unguarded binding of `handler` at `Priority(0)`. The binding holds a clone
    /// of the `Arc` until it is uninstalled and the grace period after that has passed.
    /// Pass a concrete `Arc<MyHandler>` (not `Arc<dyn Handler>`) on hot events: the fast
    /// path then inlines `MyHandler::invoke` instead of making a second indirect call.
    pub fn new<H>(owner: &str, handler: Arc<H>) -> Self
    where
        H: Handler<A, R> + ?Sized + 'static,
    {
        BindingSpec {
            owner: String::from(owner),
            handler: Box::new(SharedHandler(handler)),
            declarative_guards: Vec::new(),
            predicate_guards: Vec::new(),
            mode: Mode::Sync,
            order: Order::default(),
            async_budget: None,
        }
    }

    /// What introspection will show about the handler.
    pub fn describe_handler(&self) -> HandlerDescription {
        self.handler.describe()
    }

    /// Adds a declarative guard.
    pub fn when(mut self, guard: DeclarativeGuard) -> Self {
        self.declarative_guards.push(guard);
        self
    }

    /// Adds a predicate guard.
    pub fn guard(mut self, guard: PredicateGuard<A>) -> Self {
        self.predicate_guards.push(guard);
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the budget of an async binding's runs (ignored for other modes; use
    /// `Mode::Bounded` there).
    pub fn async_budget(mut self, budget: u64) -> Self {
        self.async_budget = Some(budget);
        self
    }

    /// Sets the order.
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }
}
