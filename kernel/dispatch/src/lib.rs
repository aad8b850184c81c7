//! `spindle-dispatch`: the event dispatcher — routes raised events to guarded handlers.
//!
//! Design (SPIN's model, see `docs/dispatcher.md`): events are declared once in
//! `spindle-abi` as `Event<Args, Result>`. The core service that owns an event registers it
//! with the [`Dispatcher`] as its [`PrimaryModule`] and raises it through the returned
//! [`EventTable`]. Extensions install *bindings* — a [`Handler`] trait object plus guards,
//! a [`Mode`] and an [`Order`] — which the primary module authorises, may constrain, and
//! whose results it combines ([`Combiner`]) and may validate. Bindings can be installed,
//! uninstalled and atomically replaced while the event is being raised on other harts.
//!
//! Features:
//! - lock-free raise: the binding set is an immutable plan read with one load and
//!   reclaimed after a grace period (QSBR read-copy-update, module `rcu`, most of the
//!   crate's `unsafe`; the rest is the single bounded binding's hand-off to the bounded
//!   executor, `BoundedExecutor::run_bounded_raw`); no lock is held across a handler;
//! - single-binding fast path (one sync, unguarded binding: a load, a health check, a
//!   tail call into a per-handler wrapper that counts the invocation and inlines the
//!   handler), also taken after the index lookup when it leaves one such candidate;
//! - declarative guards (`==`, range, mask on an argument field) indexed per field, so 64
//!   bindings keyed on distinct values of one field cost one hash probe;
//! - predicate guards in order, imposed guards first;
//! - faults (panic, trap, overrun, malformed or rejected result) answered with the default
//!   result, counted, and a circuit breaker that disables a binding after N in a row;
//! - per-event and per-binding counters and text-ready snapshots for introspection;
//! - `async` bindings: the raise queues the invocation (bounded queue, drops counted) and
//!   returns; a worker the platform starts (the kernel: a strand per binding) runs it,
//!   bounded and contained like any handler (module `asynchronous`).
//!
//! Example: the console service owns `console.Line`; an extension claims the `hello`
//! command with an indexed guard; the console raises; the shell lists the events.
//!
//! ```
//! use std::sync::Arc;
//! use spindle_abi::event::{CONSOLE_LINE, ConsoleLine, ConsoleVerdict, EventRecord, field_index};
//! use spindle_abi::fingerprint_of;
//! use spindle_dispatch::*;
//!
//! struct Console; // The primary module: default, combiner, authorisation.
//! impl PrimaryModule<ConsoleLine, ConsoleVerdict> for Console {
//!     fn name(&self) -> &str { "console" }
//!     fn default_result(&self, _: &ConsoleLine) -> ConsoleVerdict { ConsoleVerdict::UNCLAIMED }
//!     fn combiner(&self) -> Combiner<ConsoleVerdict> { Combiner::FirstNonDefault }
//!     fn authorize(&self, _: &InstallRequest<'_, ConsoleLine>)
//!         -> Result<Authorization<ConsoleLine>, Refusal> { Ok(Authorization::allow()) }
//! }
//! fn rdinstret() -> u64 { 0 } // The kernel passes a real counter.
//!
//! let dispatcher = Dispatcher::new(Platform::new(rdinstret, 1));
//! let console = dispatcher.register(&CONSOLE_LINE, Arc::new(Console)).unwrap();
//! const COMMAND: usize = field_index(ConsoleLine::FIELDS, "command_fingerprint").unwrap();
//! let hello = handler_fn("hello", |_: &ConsoleLine| Ok(ConsoleVerdict { claimed: 1 }));
//! let guard = DeclarativeGuard::equals(COMMAND, fingerprint_of("hello").0);
//! let id = dispatcher.install(&CONSOLE_LINE, BindingSpec::new("greeter", hello).when(guard)).unwrap();
//! let line = ConsoleLine { length: 5, first_byte: 104, command_fingerprint: fingerprint_of("hello").0, sequence: 1 };
//! assert_eq!(console.raise(&line).claimed, 1);
//! for event in dispatcher.snapshot() { print!("{event}"); } // the `events` command
//! assert_eq!(console.snapshot().binding(id).unwrap().counters.invocations, 1);
//! ```
//!
//! Limitations: async bindings need the platform's async executor (refused without one);
//! platform hooks (instruction counter, bounded executor, async executor, hart count) come
//! from the kernel, which must also report
//! quiescent states or retired plans are never freed; installer identity is the caller's
//! claim (the loader must vouch for it).

#![cfg_attr(not(test), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod asynchronous;
mod binding;
mod combiner;
mod dispatcher;
mod error;
mod guard;
mod handler;
mod introspect;
mod platform;
mod primary;
mod rcu;
mod table;

pub use asynchronous::{ASYNC_QUEUE_CAPACITY, AsyncExecutor, AsyncWork, AsyncWorker};
pub use combiner::{Combiner, VOTE_CANDIDATES};
pub use dispatcher::Dispatcher;
pub use error::{InstallError, RegisterError, UnknownHart, UpdateError};
pub use guard::{DeclarativeGuard, FieldTest, Guard, MAX_BINDINGS_PER_EVENT, PredicateGuard};
pub use handler::{
    BindingId, BindingSpec, BudgetSpan, FnHandler, Handler, HandlerDescription, HandlerFault, Mode, Order, Technology, handler_fn,
};
pub use introspect::{AsyncSnapshot, BindingSnapshot, Counters, DisabledReason, EventSnapshot, Fault, GuardKind, GuardSnapshot};
pub use platform::{BoundedExecutor, Platform, run_function_bounded};
pub use primary::{Authorization, DEFAULT_BREAKER_THRESHOLD, InstallRequest, PrimaryModule, Refusal, ResultRejection};
pub use table::EventTable;
