//! The built-in technology: extension crates linked into the kernel image.
//!
//! The kernel reads an extension's declaration (`spindle_extension()`) directly and
//! installs each binding as a Rust handler calling the extension's function — no
//! marshalling, no dynamic linking: the baseline the other technologies are measured
//! against. Containment is the same as for every technology: the binding is bounded by
//! the extension's budget (the dispatcher's bounded executor), and a fault kills the
//! extension (the handler's `faulted` hook).

use alloc::string::String;
use alloc::sync::{Arc, Weak};


use spindle_abi::event::{Event, EventRecord};
use spindle_abi::extension::{BindingDecl, ExtensionDecl, GuardDecl};
use spindle_dispatch::{BindingId, BindingSpec, DeclarativeGuard, Handler, HandlerDescription, HandlerFault, Mode, Technology};

use super::{ExtensionError, LoadedExtension};

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));


/// A built-in extension's handler: calls the function (bounded by the dispatcher).
struct BuiltinHandler<A: EventRecord, R: EventRecord> {
    function: fn(&A) -> R,
    name: &'static str,
    extension: Weak<LoadedExtension>,
}

impl<A: EventRecord, R: EventRecord> Handler<A, R> for BuiltinHandler<A, R> {
    /// Calls the function; the binding is bounded, so the dispatcher's bounded executor
    /// supplies the budget and the recovery point.
    fn invoke(&self, args: &A) -> Result<R, HandlerFault> {
        Ok((self.function)(args))
    }

    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::BuiltIn, name: String::from(self.name) }
    }

    /// Containment: a fault (panic, trap, overrun) kills the extension.
    fn faulted(&self, fault: &HandlerFault) {
        if let Some(extension) = self.extension.upgrade() {
            super::kill(&extension, *fault, self.name);
        }
    }
}

/// Converts a declared guard into the dispatcher's.
pub fn dispatcher_guard(guard: &GuardDecl) -> DeclarativeGuard {
    match *guard {
        GuardDecl::Equals { field, value } => DeclarativeGuard::equals(field, value),
        GuardDecl::InRange { field, low, high } => DeclarativeGuard::in_range(field, low, high),
        GuardDecl::Mask { field, mask, value } => DeclarativeGuard::mask(field, mask, value),
    }
}

fn install_typed<A: EventRecord, R: EventRecord>(
    event: &'static Event<A, R>,
    declaration: &ExtensionDecl,
    binding: &dyn BindingDecl,
    extension: &Arc<LoadedExtension>,
    installer: &mut super::Installer,
) -> Result<BindingId, ExtensionError> {
    let function = *binding
        .handler_as_any()
        .downcast_ref::<fn(&A) -> R>()
        .ok_or(ExtensionError::Install { event: event.name(), reason: String::from("handler type does not match the event") })?;
    let budget = crate::time::budget_from_micros(declaration.budget_microseconds);
    let handler = Arc::new(BuiltinHandler {
        function,
        name: binding.handler_name(),
        extension: Arc::downgrade(extension),
    });
    let mut spec = BindingSpec::new(declaration.name, handler).mode(Mode::Bounded { budget });
    for guard in binding.guards() {
        spec = spec.when(dispatcher_guard(guard));
    }
    installer.install(event, spec).map_err(|error| ExtensionError::Install { event: event.name(), reason: alloc::format!("{error}") })
}

fn install_binding(
    declaration: &ExtensionDecl,
    binding: &dyn BindingDecl,
    extension: &Arc<LoadedExtension>,
    installer: &mut super::Installer,
) -> Result<BindingId, ExtensionError> {
    let visitor = InstallBinding { declaration, binding, extension, installer };
    spindle_abi::event::visit_event(binding.event().id, visitor).unwrap_or_else(|_| Err(ExtensionError::UnknownEvent(binding.event().name)))
}

/// Installs one binding, typed by the event its declaration names.
struct InstallBinding<'a> {
    declaration: &'a ExtensionDecl,
    binding: &'a dyn BindingDecl,
    extension: &'a Arc<LoadedExtension>,
    installer: &'a mut super::Installer,
}

impl spindle_abi::event::EventVisitor for InstallBinding<'_> {
    type Output = Result<BindingId, ExtensionError>;
    fn visit<A: EventRecord, R: EventRecord>(self, event: &'static Event<A, R>) -> Self::Output {
        install_typed(event, self.declaration, self.binding, self.extension, self.installer)
    }
}

/// Installs every binding of a built-in extension; on any refusal, removes the ones
/// already installed and reports the refusal.
pub fn install(declaration: &'static ExtensionDecl, installer: &mut super::Installer) -> Result<Arc<LoadedExtension>, ExtensionError> {
    installer.admit(declaration.name)?;
    let provenance = super::introspect::Provenance {
        budget_microseconds: declaration.budget_microseconds,
        memory_quota_bytes: declaration.memory_quota_bytes,
        domains: declaration.domains.iter().map(|domain| String::from(*domain)).collect(),
        artifact: None,
    };
    let extension = Arc::new(LoadedExtension::new(declaration.name, declaration.version, super::Technology::BuiltIn, provenance, None));
    super::install_all(&extension, declaration.bindings, |binding| install_binding(declaration, *binding, &extension, installer))?;
    Ok(extension)
}
