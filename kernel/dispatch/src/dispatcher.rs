//! `Dispatcher`: the registry of events, and installation by event declaration.
//!
//! Each core service registers the events it owns, with itself as primary module, and
//! keeps the returned [`EventTable`] to raise them. Extensions (through the loader) install
//! by event declaration: the dispatcher finds the table by id and checks that the
//! installer's `Event<A, R>` has the registered types and fingerprint, so a binding built
//! against a different declaration is refused rather than run with the wrong types.
//! The registry lock is held only to find a table, never while calling a primary module
//! or a handler.
//!
//! The dispatcher also owns the grace-period state of all its events: the kernel reports
//! each hart's quiescent states here ([`Dispatcher::quiescent`]) and calls
//! [`Dispatcher::reclaim`] to free what retired binding plans no hart can still be using.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;

use spindle_abi::event::{Event, EventDescriptor, EventId, EventRecord};

use crate::error::{InstallError, RegisterError, UpdateError};
use crate::handler::{BindingId, BindingSpec};
use crate::introspect::EventSnapshot;
use crate::platform::Platform;
use crate::primary::PrimaryModule;
use crate::rcu::{Harts, UnknownHart};
use crate::table::EventTable;

/// The type-erased operations the registry needs from every table.
trait RegisteredEvent: Send + Sync {
    fn snapshot(&self) -> EventSnapshot;
    fn uninstall(&self, id: BindingId) -> Result<(), UpdateError>;
    fn uninstall_owner(&self, owner: &str) -> usize;
    fn enable(&self, id: BindingId) -> Result<(), UpdateError>;
    fn set_instruction_accounting(&self, on: bool);
    fn reclaim(&self);
}

impl<A: EventRecord, R: EventRecord> RegisteredEvent for EventTable<A, R> {
    fn snapshot(&self) -> EventSnapshot {
        EventTable::snapshot(self)
    }
    fn uninstall(&self, id: BindingId) -> Result<(), UpdateError> {
        EventTable::uninstall(self, id)
    }
    fn uninstall_owner(&self, owner: &str) -> usize {
        EventTable::uninstall_owner(self, owner)
    }
    fn enable(&self, id: BindingId) -> Result<(), UpdateError> {
        EventTable::enable(self, id)
    }
    fn set_instruction_accounting(&self, on: bool) {
        EventTable::set_instruction_accounting(self, on)
    }
    fn reclaim(&self) {
        EventTable::reclaim(self)
    }
}

/// One registered event: its descriptor and the same table, erased two ways.
struct Registered {
    descriptor: EventDescriptor,
    erased: Arc<dyn RegisteredEvent>,
    typed: Arc<dyn Any + Send + Sync>,
}

/// The event dispatcher: every registered event, with its bindings and counters.
pub struct Dispatcher {
    platform: Platform,
    harts: Arc<Harts>,
    events: spin::RwLock<Vec<Registered>>,
}

impl Dispatcher {
    /// A dispatcher with no events, using `platform`'s hooks.
    pub fn new(platform: Platform) -> Self {
        let harts = Arc::new(Harts::new(platform.hart_count));
        Dispatcher { platform, harts, events: spin::RwLock::new(Vec::new()) }
    }

    /// Reports that `hart` is in a quiescent state: it holds nothing it got from a raise.
    /// Cheap (two atomic accesses); frees nothing by itself — see [`reclaim`](Self::reclaim).
    /// Until every online hart has reported after a change, the plans that change retired
    /// (and the handlers only they hold) stay allocated.
    ///
    /// Errors: [`UnknownHart`] if `hart >= hart_count`.
    ///
    /// # Safety
    ///
    /// Call it on `hart` itself (or while `hart` is stopped), at a point where `hart` is
    /// not inside [`EventTable::raise`] at any depth: not from a handler, not from a trap
    /// taken during a raise, not while a raise waits for a user-level upcall. The kernel's
    /// idle and console loops are such points. Reporting from inside a raise lets a
    /// concurrent uninstall free the handler that raise is running.
    pub unsafe fn quiescent(&self, hart: usize) -> Result<(), UnknownHart> {
        // SAFETY: the caller upholds the contract documented above, which is the one
        // `Harts::quiescent` requires.
        unsafe { self.harts.quiescent(hart) }
    }

    /// Stops waiting for `hart` (it is parked or not started) until [`hart_online`].
    ///
    /// Errors: [`UnknownHart`] if `hart >= hart_count`.
    ///
    /// # Safety
    ///
    /// As for [`quiescent`](Self::quiescent); and `hart` must not raise events until
    /// [`hart_online`] has been called for it.
    ///
    /// [`hart_online`]: Self::hart_online
    pub unsafe fn hart_offline(&self, hart: usize) -> Result<(), UnknownHart> {
        // SAFETY: the caller upholds the contract documented above, which is the one
        // `Harts::offline` requires.
        unsafe { self.harts.offline(hart) }
    }

    /// Brings an offline `hart` back; call it on `hart` before it raises. A no-op for a
    /// hart that is online. Errors: [`UnknownHart`] if `hart >= hart_count`.
    pub fn hart_online(&self, hart: usize) -> Result<(), UnknownHart> {
        self.harts.online(hart)
    }

    /// Registers `event` with `primary` as its owner and returns its table, through which
    /// the owner raises it. The primary module's combiner, validation choice and breaker
    /// threshold are read now.
    ///
    /// Errors: `DuplicateId` / `DuplicateName` if an event with the same id or name is
    /// already registered.
    pub fn register<A: EventRecord, R: EventRecord>(
        &self,
        event: &Event<A, R>,
        primary: Arc<dyn PrimaryModule<A, R>>,
    ) -> Result<Arc<EventTable<A, R>>, RegisterError> {
        let descriptor = event.descriptor();
        // Built before taking the registry lock: this asks the primary module for its
        // settings, and a primary module may itself call into the dispatcher.
        let table = Arc::new(EventTable::new(event, primary, self.platform.clone(), self.harts.clone()));
        let mut events = self.events.write();
        for registered in events.iter() {
            if registered.descriptor.id == descriptor.id {
                return Err(RegisterError::DuplicateId(descriptor.id));
            }
            if registered.descriptor.name == descriptor.name {
                return Err(RegisterError::DuplicateName(descriptor.name));
            }
        }
        events.push(Registered { descriptor, erased: table.clone(), typed: table.clone() });
        Ok(table)
    }

    /// The table of a registered event, checked against the caller's declaration.
    ///
    /// Errors: `UnknownEvent` if no event has this id; `SignatureMismatch` if the
    /// registered event has other types or another fingerprint.
    pub fn table<A: EventRecord, R: EventRecord>(
        &self,
        event: &Event<A, R>,
    ) -> Result<Arc<EventTable<A, R>>, InstallError> {
        let (descriptor, typed) = {
            let events = self.events.read();
            let registered = events
                .iter()
                .find(|registered| registered.descriptor.id == event.id())
                .ok_or(InstallError::UnknownEvent(event.id()))?;
            (registered.descriptor, registered.typed.clone())
        };
        let mismatch =
            InstallError::SignatureMismatch { registered: descriptor.fingerprint, requested: event.fingerprint() };
        if descriptor.fingerprint != event.fingerprint() {
            return Err(mismatch);
        }
        typed.downcast::<EventTable<A, R>>().map_err(|_| mismatch)
    }

    /// Installs a binding on `event`; see [`EventTable::install`] for the errors, plus
    /// those of [`table`](Self::table).
    pub fn install<A: EventRecord, R: EventRecord>(
        &self,
        event: &Event<A, R>,
        spec: BindingSpec<A, R>,
    ) -> Result<BindingId, InstallError> {
        self.table(event)?.install(spec)
    }

    /// Atomically replaces binding `old` on `event`; see [`EventTable::replace`].
    pub fn replace<A: EventRecord, R: EventRecord>(
        &self,
        event: &Event<A, R>,
        old: BindingId,
        spec: BindingSpec<A, R>,
    ) -> Result<BindingId, InstallError> {
        self.table(event)?.replace(old, spec)
    }

    /// Uninstalls a binding; see [`EventTable::uninstall`]. Errors: also `UnknownEvent`.
    pub fn uninstall(&self, id: BindingId) -> Result<(), UpdateError> {
        self.erased(id.event)?.uninstall(id)
    }

    /// Re-enables a binding disabled by its circuit breaker; see [`EventTable::enable`].
    pub fn enable(&self, id: BindingId) -> Result<(), UpdateError> {
        self.erased(id.event)?.enable(id)
    }

    /// Turns instruction accounting on or off for one event. Errors: `UnknownEvent`.
    pub fn set_instruction_accounting(&self, event: EventId, on: bool) -> Result<(), UpdateError> {
        self.erased(event)?.set_instruction_accounting(on);
        Ok(())
    }

    /// Uninstalls every binding `owner` installed, on every event (an extension was
    /// killed). Returns how many were removed.
    pub fn uninstall_owner(&self, owner: &str) -> usize {
        self.all_erased().iter().map(|table| table.uninstall_owner(owner)).sum()
    }

    /// A snapshot of every registered event, in id order (the console `events` command).
    pub fn snapshot(&self) -> Vec<EventSnapshot> {
        let mut snapshots: Vec<EventSnapshot> = self.all_erased().iter().map(|table| table.snapshot()).collect();
        snapshots.sort_by_key(|snapshot| snapshot.id);
        snapshots
    }

    /// A snapshot of one event (its bindings and their counters). Errors: `UnknownEvent`.
    pub fn snapshot_event(&self, event: EventId) -> Result<EventSnapshot, UpdateError> {
        Ok(self.erased(event)?.snapshot())
    }

    /// The descriptors of all registered events, in registration order.
    pub fn events(&self) -> Vec<EventDescriptor> {
        self.events.read().iter().map(|registered| registered.descriptor).collect()
    }

    /// Frees the retired plans of every event whose grace period has ended, with the
    /// bindings and handlers only they held. Call it after quiescent states, from a
    /// context where freeing memory is fine.
    pub fn reclaim(&self) {
        for table in self.all_erased() {
            table.reclaim();
        }
    }

    /// The erased table of event `id`.
    fn erased(&self, id: EventId) -> Result<Arc<dyn RegisteredEvent>, UpdateError> {
        let events = self.events.read();
        events
            .iter()
            .find(|registered| registered.descriptor.id == id)
            .map(|registered| registered.erased.clone())
            .ok_or(UpdateError::UnknownEvent(id))
    }

    /// Every erased table, copied out so no registry lock is held while using them.
    fn all_erased(&self) -> Vec<Arc<dyn RegisteredEvent>> {
        self.events.read().iter().map(|registered| registered.erased.clone()).collect()
    }
}
