//! Kernel object kinds and the trait that makes a Rust type referable by a capability.

use core::any::Any;
use core::fmt;

/// The kinds of kernel object a capability can name.
///
/// One list for the whole kernel so that introspection (the shell, the introspection
/// system call) can print what a handle refers to, and so that a type error can say
/// which kind was expected and which was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ObjectKind {
    /// A physical page frame.
    PhysicalPage,
    /// An address space (translation context).
    AddressSpace,
    /// A range of virtual addresses in some address space.
    VirtualRange,
    /// A schedulable context (kernel thread or a user thread's kernel side).
    Strand,
    /// A user process.
    Process,
    /// An event declared in `abi/`.
    Event,
    /// One installed handler binding of an event.
    Binding,
    /// A domain (named table of exported symbols), or the right to import it.
    Domain,
    /// A loaded extension.
    Extension,
    /// An open file.
    File,
    /// A block device or logical disk.
    BlockDevice,
    /// A byte-range lock.
    Lock,
    /// The kernel console: reading and writing it, and (with `INVOKE`) running its
    /// commands.
    Console,
    /// The extension registry: the right (`INVOKE`) to load, unload and list extensions.
    ExtensionLoader,
}

impl ObjectKind {
    /// A short human-readable name (`"physical page"`).
    pub const fn name(self) -> &'static str {
        match self {
            ObjectKind::PhysicalPage => "physical page",
            ObjectKind::AddressSpace => "address space",
            ObjectKind::VirtualRange => "virtual range",
            ObjectKind::Strand => "strand",
            ObjectKind::Process => "process",
            ObjectKind::Event => "event",
            ObjectKind::Binding => "binding",
            ObjectKind::Domain => "domain",
            ObjectKind::Extension => "extension",
            ObjectKind::File => "file",
            ObjectKind::BlockDevice => "block device",
            ObjectKind::Lock => "lock",
            ObjectKind::Console => "console",
            ObjectKind::ExtensionLoader => "extension loader",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A kernel object type that capabilities can refer to.
///
/// Implemented by the owning service for each of its object types. Implementing it
/// grants nothing: capabilities to the type can still only be minted by a
/// [`CapabilityIssuer`](crate::CapabilityIssuer).
pub trait KernelObject: Any + Send + Sync {
    /// The kind reported in introspection and in [`CapError::WrongType`](crate::CapError).
    const KIND: ObjectKind;
}
