//! System calls for the shell: console input, extension management, introspection,
//! memory protection and kernel console commands.
//!
//! (Being written: every call answers `NoSuchCall` until implemented.)

use alloc::sync::Arc;

use spindle_abi::syscall::Error;

use super::Arguments;
use crate::proc::{AddressSpace, Process};

/// `read(handle, pointer, length)`.
pub fn read(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `ext_load(pointer, length, technology)`.
pub fn ext_load(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `ext_unload(pointer, length)`.
pub fn ext_unload(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `ext_list(pointer, length)`.
pub fn ext_list(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `events(pointer, length)`.
pub fn events(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `processes(pointer, length)`.
pub fn processes(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `last_error(pointer, length)`.
pub fn last_error(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `protect(address, length, access)`.
pub fn protect(_process: &Arc<Process>, _space: &mut AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}

/// `kernel_command(pointer, length)`.
pub fn kernel_command(_process: &Arc<Process>, _space: &AddressSpace, _arguments: Arguments) -> Result<usize, Error> {
    Err(Error::NoSuchCall)
}
