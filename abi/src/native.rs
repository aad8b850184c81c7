//! The C-ABI contract between the kernel's loader and a native extension's glue.
//!
//! The trusted builder (`cargo xtask ext build`) wraps an extension crate in a generated
//! glue crate that exports exactly these symbols (and nothing else) from the shared
//! object; the glue's functions are one-line calls to the helpers here, so the contract
//! lives in one place:
//!
//! | symbol | signature | meaning |
//! |---|---|---|
//! | [`BINDING_COUNT_SYMBOL`] | `extern "C" fn() -> usize` | number of bindings |
//! | [`BINDING_INFO_SYMBOL`] | `extern "C" fn(index: usize, out: *mut BindingInfo) -> i32` | describe binding `index`; 0 or an [`ErrorCode`] |
//! | [`INVOKE_SYMBOL`] | `extern "C" fn(index: usize, arguments: *const u8, arguments_length: usize, result: *mut u8, result_length: usize) -> i32` | run binding `index`'s handler on encoded records; 0 or an [`ErrorCode`] |
//!
//! Records travel encoded as [`crate::extension::encode`] lays them out. The glue's panic
//! handler calls the kernel's `spindle_extension_panic`, which never returns.

use crate::extension::{ExtensionDecl, GuardDecl, MarshalError};

/// Exported symbol: binding count.
pub const BINDING_COUNT_SYMBOL: &str = "spindle_extension_binding_count";
/// Exported symbol: binding description.
pub const BINDING_INFO_SYMBOL: &str = "spindle_extension_binding_info";
/// Exported symbol: handler invocation.
pub const INVOKE_SYMBOL: &str = "spindle_extension_invoke";
/// Every symbol a native extension exports (the builder's version script lists these).
pub const EXPORTED_SYMBOLS: &[&str] = &[BINDING_COUNT_SYMBOL, BINDING_INFO_SYMBOL, INVOKE_SYMBOL];

/// Most guards one binding may declare.
pub const MAX_GUARDS: usize = 8;

/// Guard kinds in [`RawGuard::kind`].
pub mod guard_kind {
    /// `field == a`.
    pub const EQUALS: u32 = 1;
    /// `a <= field <= b`.
    pub const IN_RANGE: u32 = 2;
    /// `field & a == b`.
    pub const MASK: u32 = 3;
}

/// A declarative guard in C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawGuard {
    /// One of [`guard_kind`].
    pub kind: u32,
    /// Field index in the argument record.
    pub field: u32,
    /// First operand (value, low bound or mask).
    pub a: u64,
    /// Second operand (high bound or masked value; 0 for equality).
    pub b: u64,
}

impl RawGuard {
    /// Converts a declared guard.
    pub fn from_decl(guard: &GuardDecl) -> RawGuard {
        match *guard {
            GuardDecl::Equals { field, value } => RawGuard { kind: guard_kind::EQUALS, field: field as u32, a: value, b: 0 },
            GuardDecl::InRange { field, low, high } => RawGuard { kind: guard_kind::IN_RANGE, field: field as u32, a: low, b: high },
            GuardDecl::Mask { field, mask, value } => RawGuard { kind: guard_kind::MASK, field: field as u32, a: mask, b: value },
        }
    }

    /// Converts back; `None` for an unknown kind.
    pub fn to_decl(&self) -> Option<GuardDecl> {
        let field = self.field as usize;
        match self.kind {
            guard_kind::EQUALS => Some(GuardDecl::Equals { field, value: self.a }),
            guard_kind::IN_RANGE => Some(GuardDecl::InRange { field, low: self.a, high: self.b }),
            guard_kind::MASK => Some(GuardDecl::Mask { field, mask: self.a, value: self.b }),
            _ => None,
        }
    }
}

/// One binding described in C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BindingInfo {
    /// The event's id.
    pub event_id: u32,
    /// Number of valid entries in `guards`.
    pub guard_count: u32,
    /// The event's fingerprint (the loader refuses a binding whose fingerprint differs
    /// from the kernel's declaration of that event id).
    pub event_fingerprint: u64,
    /// Size of the argument record in bytes.
    pub arguments_size: u64,
    /// Size of the result record in bytes.
    pub result_size: u64,
    /// The guards.
    pub guards: [RawGuard; MAX_GUARDS],
    /// The binding's direct entry (used for native extensions only; 0 from Wasm and C,
    /// ignored for user-level ones): the address of
    /// [`direct_entry`](crate::extension::direct_entry) made for the binding's handler,
    /// which the kernel calls with [`direct_context`](Self::direct_context) and pointers
    /// to the records themselves instead of marshalling them through
    /// [`INVOKE_SYMBOL`]. The loader uses it only if it lies in the image's executable
    /// mapping; 0 makes it marshal.
    pub direct_entry: u64,
    /// What the direct entry is passed first: the address of the binding's
    /// [`Direct`](crate::extension::Direct) (its handler, in the declaration).
    pub direct_context: u64,
}

impl BindingInfo {
    /// Size of the `#[repr(C)]` description in bytes (the same on every target).
    pub const SIZE: usize = core::mem::size_of::<BindingInfo>();

    /// Reads a description laid out as the `#[repr(C)]` struct in little-endian memory (a
    /// Wasm module's linear memory); `None` if `bytes` is shorter than [`Self::SIZE`].
    pub fn from_bytes(bytes: &[u8]) -> Option<BindingInfo> {
        let bytes = bytes.get(..Self::SIZE)?;
        let u32_at = |offset: usize| u32::from_le_bytes([bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3]]);
        let u64_at = |offset: usize| u64::from(u32_at(offset)) | (u64::from(u32_at(offset + 4)) << 32);
        let mut info = BindingInfo {
            event_id: u32_at(0),
            guard_count: u32_at(4),
            event_fingerprint: u64_at(8),
            arguments_size: u64_at(16),
            result_size: u64_at(24),
            guards: [RawGuard::default(); MAX_GUARDS],
            direct_entry: u64_at(core::mem::offset_of!(BindingInfo, direct_entry)),
            direct_context: u64_at(core::mem::offset_of!(BindingInfo, direct_context)),
        };
        let guard_size = core::mem::size_of::<RawGuard>();
        for (index, guard) in info.guards.iter_mut().enumerate() {
            let base = core::mem::offset_of!(BindingInfo, guards) + index * guard_size;
            *guard = RawGuard { kind: u32_at(base), field: u32_at(base + 4), a: u64_at(base + 8), b: u64_at(base + 16) };
        }
        Some(info)
    }
}

/// Error codes returned by the exported functions.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// No binding has this index.
    NoSuchBinding = -1,
    /// A buffer was too small for a record.
    BufferTooSmall = -2,
    /// A record's bytes were not valid.
    BadValue = -3,
    /// The binding declares more than [`MAX_GUARDS`] guards.
    TooManyGuards = -4,
    /// A null pointer was passed.
    NullPointer = -5,
}

impl ErrorCode {
    /// Decodes a returned code (`None` for 0 or an unknown code).
    pub fn from_code(code: i32) -> Option<ErrorCode> {
        [ErrorCode::NoSuchBinding, ErrorCode::BufferTooSmall, ErrorCode::BadValue, ErrorCode::TooManyGuards, ErrorCode::NullPointer]
            .into_iter()
            .find(|error| *error as i32 == code)
    }
}

/// Glue helper for [`BINDING_COUNT_SYMBOL`].
pub fn binding_count(declaration: &ExtensionDecl) -> usize {
    declaration.bindings.len()
}

/// Glue helper for [`BINDING_INFO_SYMBOL`] (the glue converts the out-pointer).
pub fn binding_info(declaration: &ExtensionDecl, index: usize) -> Result<BindingInfo, ErrorCode> {
    let binding = declaration.bindings.get(index).ok_or(ErrorCode::NoSuchBinding)?;
    let declared = binding.guards();
    if declared.len() > MAX_GUARDS {
        return Err(ErrorCode::TooManyGuards);
    }
    let event = binding.event();
    let mut info = BindingInfo {
        event_id: event.id.0,
        guard_count: declared.len() as u32,
        event_fingerprint: event.fingerprint.0,
        arguments_size: event.arguments.size as u64,
        result_size: event.result.size as u64,
        guards: [RawGuard::default(); MAX_GUARDS],
        direct_entry: 0,
        direct_context: 0,
    };
    // Only where addresses are the kernel's: a wasm32 function "address" is a table index.
    #[cfg(not(target_arch = "wasm32"))]
    {
        let (entry, context) = binding.direct_entry();
        (info.direct_entry, info.direct_context) = (entry as u64, context as u64);
    }
    for (slot, guard) in info.guards.iter_mut().zip(declared) {
        *slot = RawGuard::from_decl(guard);
    }
    Ok(info)
}

/// Glue helper for [`INVOKE_SYMBOL`] (the glue turns pointers into slices).
/// Goes through the declaration's generated [`ExtensionDecl::invoke`] when it has one (each
/// handler a direct call), else through the binding's trait object.
#[inline]
pub fn invoke(declaration: &ExtensionDecl, index: usize, arguments: &[u8], result: &mut [u8]) -> Result<(), ErrorCode> {
    let outcome = match declaration.invoke {
        Some(invoke) => invoke(index, arguments, result).ok_or(ErrorCode::NoSuchBinding)?,
        None => declaration.bindings.get(index).ok_or(ErrorCode::NoSuchBinding)?.invoke_bytes(arguments, result),
    };
    outcome.map_err(error_code)
}

/// [`invoke`] on records in 8-byte-aligned words (the glue checked the buffers' alignment
/// and that their lengths are whole words): through [`ExtensionDecl::invoke_words`];
/// `None` if the declaration has none (a hand-written one: use [`invoke`]).
#[inline]
pub fn invoke_words(declaration: &ExtensionDecl, index: usize, arguments: &[u64], result: &mut [u64]) -> Option<Result<(), ErrorCode>> {
    let invoke = declaration.invoke_words?;
    Some(invoke(index, arguments, result).ok_or(ErrorCode::NoSuchBinding).and_then(|outcome| outcome.map_err(error_code)))
}

fn error_code(error: MarshalError) -> ErrorCode {
    match error {
        MarshalError::BufferTooSmall { .. } => ErrorCode::BufferTooSmall,
        MarshalError::BadValue => ErrorCode::BadValue,
    }
}
