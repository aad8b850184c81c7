//! Introspection: plain snapshots of events, bindings and their counters.
//!
//! Snapshots are owned values (no references into the dispatcher), taken on the slow path
//! under the event's writer lock, so a console `events` command or a system call can format
//! or copy them at leisure. `Display` on [`EventSnapshot`] prints the text the console shows.
//!
//! Limitations: counters are read one by one with relaxed loads while raises may be
//! running, so a snapshot is not an instant. Counters of an uninstalled binding are folded
//! into [`EventSnapshot::removed`] when it is uninstalled, and whatever raises still running
//! it add afterwards is folded in when its last plan is reclaimed; until then `removed`
//! may lag by those in-flight increments.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use spindle_abi::event::EventId;
use spindle_abi::fingerprint::Fingerprint;

use crate::handler::{BindingId, HandlerDescription, HandlerFault, Mode, Order};
use crate::primary::ResultRejection;

/// Activity counters of one binding (or totals over several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Times the handler was called.
    pub invocations: u64,
    /// Times the binding was a candidate for a raise but one of its guards said no.
    /// Bindings ruled out by the declarative index are not counted (that is the index's point).
    pub guard_rejections: u64,
    /// Instructions spent inside the handler (only while instruction accounting is on).
    pub instructions: u64,
    /// Invocations that faulted or returned a result the primary module rejected.
    pub faults: u64,
    /// Faults that were budget overruns (also counted in `faults`).
    pub overruns: u64,
}

impl Counters {
    /// Subtracts `other` from `self`, counter by counter (wrapping).
    pub fn subtract(&mut self, other: &Counters) {
        self.invocations = self.invocations.wrapping_sub(other.invocations);
        self.guard_rejections = self.guard_rejections.wrapping_sub(other.guard_rejections);
        self.instructions = self.instructions.wrapping_sub(other.instructions);
        self.faults = self.faults.wrapping_sub(other.faults);
        self.overruns = self.overruns.wrapping_sub(other.overruns);
    }

    /// Adds `other` to `self`, counter by counter.
    pub fn add(&mut self, other: &Counters) {
        self.invocations = self.invocations.wrapping_add(other.invocations);
        self.guard_rejections = self.guard_rejections.wrapping_add(other.guard_rejections);
        self.instructions = self.instructions.wrapping_add(other.instructions);
        self.faults = self.faults.wrapping_add(other.faults);
        self.overruns = self.overruns.wrapping_add(other.overruns);
    }
}

/// One fault as recorded for introspection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The handler itself faulted.
    Handler(HandlerFault),
    /// The handler returned a result its primary module rejected.
    InvalidResult(ResultRejection),
}

impl fmt::Display for Fault {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Handler(fault) => write!(formatter, "{fault}"),
            Fault::InvalidResult(rejection) => write!(formatter, "{rejection}"),
        }
    }
}

/// Why the circuit breaker disabled a binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DisabledReason {
    /// Consecutive faults when the breaker tripped.
    pub consecutive_faults: u32,
    /// The fault that tripped it.
    pub fault: Fault,
}

/// How a guard is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardKind {
    /// A declarative guard served by the dispatcher's index (costs nothing per binding).
    Indexed,
    /// A declarative guard checked directly after the index lookup.
    Declarative,
    /// Code, evaluated in order.
    Predicate,
}

/// One guard of a binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardSnapshot {
    /// The guard as text (`port == 7`, or a predicate's description).
    pub text: String,
    /// Whether the primary module imposed it (rather than the installer asking for it).
    pub imposed: bool,
    /// How it is evaluated.
    pub kind: GuardKind,
}

/// The queue of an async binding as seen by introspection (its handler's runs are the
/// binding's invocations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncSnapshot {
    /// Invocations raises queued.
    pub queued: u64,
    /// Invocations dropped: the queue was full, the binding was disabled, or it went away.
    pub dropped: u64,
    /// Invocations waiting for the worker now.
    pub pending: u64,
    /// The worker's identity (the kernel: its strand id).
    pub worker: u64,
    /// The handler's budget per invocation, if bounded.
    pub budget: Option<u64>,
}

/// One binding as seen by introspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingSnapshot {
    /// The binding's id.
    pub id: BindingId,
    /// Who installed it.
    pub owner: String,
    /// The handler's own description.
    pub handler: HandlerDescription,
    /// The mode it runs in (after the primary module's budget cap).
    pub mode: Mode,
    /// The mode the installer asked for.
    pub requested_mode: Mode,
    /// Its order among the event's bindings.
    pub order: Order,
    /// Its guards: imposed ones first, then the installer's.
    pub guards: Vec<GuardSnapshot>,
    /// Its counters.
    pub counters: Counters,
    /// Faults since its last successful invocation.
    pub consecutive_faults: u32,
    /// Set if the circuit breaker disabled it.
    pub disabled: Option<DisabledReason>,
    /// Its most recent fault, if any.
    pub last_fault: Option<Fault>,
    /// Its queue and worker, for an async binding.
    pub asynchronous: Option<AsyncSnapshot>,
}

/// One event as seen by introspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSnapshot {
    /// The event's id.
    pub id: EventId,
    /// The event's name.
    pub name: &'static str,
    /// The event's canonical declaration text.
    pub declaration: &'static str,
    /// The event's signature fingerprint.
    pub fingerprint: Fingerprint,
    /// The primary module's name.
    pub owner: String,
    /// The result combiner's name.
    pub combiner: &'static str,
    /// Whether handler instructions are being counted.
    pub instruction_accounting: bool,
    /// What the per-binding `instructions` counter counts (the platform's
    /// `counter_unit`: `instructions` when exact).
    pub counter_unit: &'static str,
    /// Times the event was raised.
    pub raises: u64,
    /// Raises in which no binding ran, so the default handler answered.
    pub defaulted: u64,
    /// Guards evaluated one by one (predicates and non-indexed declarative guards).
    pub guard_evaluations: u64,
    /// Totals of bindings that have been uninstalled or replaced.
    pub removed: Counters,
    /// Retired binding plans waiting for a grace period (see `Dispatcher::quiescent`).
    pub retired_plans: usize,
    /// The installed bindings, in the order they run.
    pub bindings: Vec<BindingSnapshot>,
}

impl EventSnapshot {
    /// Counters summed over installed and removed bindings.
    pub fn totals(&self) -> Counters {
        let mut totals = self.removed;
        for binding in &self.bindings {
            totals.add(&binding.counters);
        }
        totals
    }

    /// The installed binding with `id`, if any.
    pub fn binding(&self, id: BindingId) -> Option<&BindingSnapshot> {
        self.bindings.iter().find(|binding| binding.id == id)
    }
}

impl fmt::Display for EventSnapshot {
    /// The console's `events` listing for this event: one header line, then one line per
    /// binding and one per guard.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            formatter,
            "{:>3} {} owner={} combiner={} raises={} defaulted={} guard-evals={} accounting={}",
            self.id,
            self.name,
            self.owner,
            self.combiner,
            self.raises,
            self.defaulted,
            self.guard_evaluations,
            if self.instruction_accounting { "on" } else { "off" },
        )?;
        for binding in &self.bindings {
            let counters = &binding.counters;
            write!(
                formatter,
                "    {} {} {:?}:{} {} {} calls={} rejected={} {}={} faults={} overruns={}",
                binding.id,
                binding.owner,
                binding.handler.technology,
                binding.handler.name,
                binding.mode,
                binding.order,
                counters.invocations,
                counters.guard_rejections,
                self.counter_unit,
                counters.instructions,
                counters.faults,
                counters.overruns,
            )?;
            if let Some(lane) = &binding.asynchronous {
                write!(formatter, " queued={} dropped={} pending={} worker=#{}", lane.queued, lane.dropped, lane.pending, lane.worker)?;
                if let Some(budget) = lane.budget {
                    write!(formatter, " budget={}", crate::handler::BudgetSpan(budget))?;
                }
            }
            if let Some(reason) = &binding.disabled {
                write!(formatter, " DISABLED after {} faults: {}", reason.consecutive_faults, reason.fault)?;
            }
            writeln!(formatter)?;
            for guard in &binding.guards {
                let kind = match guard.kind {
                    GuardKind::Indexed => "indexed",
                    GuardKind::Declarative => "declarative",
                    GuardKind::Predicate => "predicate",
                };
                let imposed = if guard.imposed { " (imposed)" } else { "" };
                writeln!(formatter, "        when {} [{kind}]{imposed}", guard.text)?;
            }
        }
        Ok(())
    }
}
