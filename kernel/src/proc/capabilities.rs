//! What a process may do: its capability table (`spindle_capability::CapabilityTable`)
//! and the grants it was spawned with.
//!
//! Every process's table holds, from its spawn:
//!
//! | entry | object | rights | who gets it |
//! |---|---|---|---|
//! | console | [`ConsoleDevice`] | `READ \| WRITE` | every process |
//! | console commands | [`ConsoleDevice`] | `INVOKE` | [`Grants::console_commands`] |
//! | extension loading | [`ExtensionLoading`] | `INVOKE` | [`Grants::extension_loader`] |
//! | each open file | `services::fs::OpenFile` | `READ` and/or `WRITE` as opened | `open` |
//!
//! **Handle numbering.** Table handles pack a table tag, a generation and an index
//! (64 bits), so they are not small numbers. User space names the console with the
//! well-known number `spindle_abi::syscall::CONSOLE` (1), which the kernel maps to the
//! process's console entry and validates through the table on every use (a stale or
//! wrong-typed entry is `BadHandle`). The two privileges are not passed as handles: the
//! calls that need them (`ext_*`, `kernel_command`) look up the caller's entry and refuse
//! with `NotPermitted` when it is missing. `spawn`'s `flags` copy an entry into the child
//! only if the caller holds it.
//!
//! Open files are the one kind of entry user space names by its raw table handle (what
//! `open` returns; `read`, `write`, `seek`, `fsync` and `close` take it): a forged or stale
//! number fails the table's checks (`BadHandle`).
//!
//! Limitations: the privileges are never revoked while a process lives.

use alloc::sync::Arc;

use spindle_abi::syscall::{CONSOLE, Error, SPAWN_CONSOLE, SPAWN_EXTENSION_LOADER};
use spindle_capability::{CapabilityTable, Handle, KernelObject, ObjectKind, Rights};

use crate::services::fs::OpenFile;

/// Entries a process table can hold: up to three privileges and the open files.
const TABLE_CAPACITY: usize = 32;

/// The kernel console as a capability object (reading, writing, running commands).
pub struct ConsoleDevice;

impl KernelObject for ConsoleDevice {
    const KIND: ObjectKind = ObjectKind::Console;
}

/// The extension registry as a capability object (loading, unloading, listing).
pub struct ExtensionLoading;

impl KernelObject for ExtensionLoading {
    const KIND: ObjectKind = ObjectKind::ExtensionLoader;
}

/// The privileges a new process gets beyond the console.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// May load, unload and list extensions (`ext_load`, `ext_unload`, `ext_list`).
    pub extension_loader: bool,
    /// May run kernel console commands (`kernel_command`).
    pub console_commands: bool,
}

impl Grants {
    /// Only the console.
    pub const NONE: Grants = Grants { extension_loader: false, console_commands: false };
    /// Every privilege (the user shell the kernel starts at boot).
    pub const ALL: Grants = Grants { extension_loader: true, console_commands: true };

    /// Decodes `spawn`'s `flags` ([`SPAWN_EXTENSION_LOADER`] | [`SPAWN_CONSOLE`]).
    ///
    /// Errors: [`Error::BadArgument`] for unknown bits.
    pub fn from_spawn_flags(flags: usize) -> Result<Grants, Error> {
        if flags & !(SPAWN_EXTENSION_LOADER | SPAWN_CONSOLE) != 0 {
            return Err(Error::BadArgument);
        }
        Ok(Grants { extension_loader: flags & SPAWN_EXTENSION_LOADER != 0, console_commands: flags & SPAWN_CONSOLE != 0 })
    }

    /// Whether every privilege in `other` is also in `self`.
    pub fn contains(self, other: Grants) -> bool {
        (self.extension_loader || !other.extension_loader) && (self.console_commands || !other.console_commands)
    }
}

/// A process's capability table and the handles of its well-known entries.
pub struct ProcessCapabilities {
    table: CapabilityTable,
    console: Handle,
    console_commands: Option<Handle>,
    extension_loader: Option<Handle>,
}

impl ProcessCapabilities {
    /// A fresh table holding the console and what `grants` name.
    ///
    /// Errors: [`Error::NoMemory`] if the table cannot take the entries (it always can:
    /// its capacity is larger than three).
    pub fn new(grants: Grants) -> Result<ProcessCapabilities, Error> {
        let table = CapabilityTable::new(TABLE_CAPACITY);
        let full = |_| Error::NoMemory;
        let console = table.insert(Arc::new(ConsoleDevice), Rights::READ | Rights::WRITE).map_err(full)?;
        let console_commands =
            if grants.console_commands { Some(table.insert(Arc::new(ConsoleDevice), Rights::INVOKE).map_err(full)?) } else { None };
        let extension_loader =
            if grants.extension_loader { Some(table.insert(Arc::new(ExtensionLoading), Rights::INVOKE).map_err(full)?) } else { None };
        Ok(ProcessCapabilities { table, console, console_commands, extension_loader })
    }

    /// Checks a user-supplied console handle for `needed` (`READ` for `read`, `WRITE`
    /// for `write`): only [`CONSOLE`] names one, and its entry must validate.
    ///
    /// Errors: [`Error::BadHandle`].
    pub fn check_console(&self, user_handle: usize, needed: Rights) -> Result<(), Error> {
        if user_handle != CONSOLE {
            return Err(Error::BadHandle);
        }
        self.table.lookup::<ConsoleDevice>(self.console, needed).map(|_| ()).map_err(|_| Error::BadHandle)
    }

    /// Whether the process holds a valid extension-loading entry.
    pub fn may_load_extensions(&self) -> bool {
        self.extension_loader.is_some_and(|handle| self.table.lookup::<ExtensionLoading>(handle, Rights::INVOKE).is_ok())
    }

    /// Whether the process holds a valid console-command entry.
    pub fn may_run_console_commands(&self) -> bool {
        self.console_commands.is_some_and(|handle| self.table.lookup::<ConsoleDevice>(handle, Rights::INVOKE).is_ok())
    }

    /// The privileges it holds (what it may pass on to a child).
    pub fn grants(&self) -> Grants {
        Grants { extension_loader: self.may_load_extensions(), console_commands: self.may_run_console_commands() }
    }

    /// Enters `file` (an open file) with `rights` (`READ`, `WRITE` as it was opened);
    /// returns the raw handle user space names it by (never [`CONSOLE`]).
    ///
    /// Errors: [`Error::TooMany`] (the table is full).
    pub fn insert_file(&self, file: Arc<OpenFile>, rights: Rights) -> Result<usize, Error> {
        let handle = self.table.insert(file, rights).map_err(|_| Error::TooMany)?;
        Ok(handle.raw() as usize)
    }

    /// The open file `user_handle` names, if it carries `needed`.
    ///
    /// Errors: [`Error::BadHandle`] (not a live file entry of this table),
    /// [`Error::NotPermitted`] (a file entry without `needed`).
    pub fn file(&self, user_handle: usize, needed: Rights) -> Result<Arc<OpenFile>, Error> {
        match self.table.lookup::<OpenFile>(Handle::from_raw(user_handle as u64), needed) {
            Ok(file) => Ok(file),
            Err(spindle_capability::CapError::InsufficientRights { .. }) => Err(Error::NotPermitted),
            Err(_) => Err(Error::BadHandle),
        }
    }

    /// Removes the open file `user_handle` names (closing it).
    ///
    /// Errors: [`Error::BadHandle`] (not a live file entry of this table).
    pub fn close_file(&self, user_handle: usize) -> Result<(), Error> {
        let handle = Handle::from_raw(user_handle as u64);
        let info = self.table.info(handle).map_err(|_| Error::BadHandle)?;
        if info.kind != ObjectKind::File {
            return Err(Error::BadHandle);
        }
        self.table.remove(handle).map(drop).map_err(|_| Error::BadHandle)
    }

    /// Live entries (for introspection).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the table is empty (never: the console is always there).
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}
