//! Exported symbols and imports, and the macros that tie their signature text to Rust types.
//!
//! A symbol's fingerprint is `fingerprint_of(name ++ signature)`, where the signature is
//! the stringified Rust type (`"fn(u64, u64) -> u64"`). [`export!`](crate::export) takes
//! the type as tokens, coerces the function to that type (a compile error if they differ)
//! and stringifies the *same* tokens, so the text cannot disagree with the function.
//! [`import!`](crate::import) builds the importer's side in `const` context, and
//! [`typed_fn!`](crate::typed_fn) gets a callable function pointer back out of a symbol.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::sync::Arc;
use core::any::Any;
use core::fmt;

use spindle_abi::{Fingerprint, fingerprint_of};

use crate::error::SymbolError;

/// The fingerprint of a symbol called `name` with signature text `signature`:
/// `fingerprint_of(name ++ signature)` (no separator).
///
/// The macros compute the same value in `const` context with `concat!`.
pub fn symbol_fingerprint(name: &str, signature: &str) -> Fingerprint {
    let mut text = String::with_capacity(name.len() + signature.len());
    text.push_str(name);
    text.push_str(signature);
    fingerprint_of(&text)
}

/// One exported, typed symbol of a domain.
#[derive(Clone)]
pub struct Symbol {
    /// The name importers ask for.
    name: Cow<'static, str>,
    /// The stringified Rust type of the symbol.
    signature: Cow<'static, str>,
    /// `fingerprint_of(name ++ signature)`.
    fingerprint: Fingerprint,
    /// The code address, patched into importers by the loader.
    address: usize,
    /// The function value itself, for typed in-kernel use; `None` for symbols known only
    /// by address.
    function: Option<Arc<dyn Any + Send + Sync>>,
}

impl Symbol {
    /// A symbol known only by its address (for example, exported by a native extension
    /// or generated from an `abi/` declaration). It can be resolved and linked against,
    /// but [`typed`](Symbol::typed) returns [`SymbolError::NotTyped`].
    pub fn from_address(
        name: impl Into<Cow<'static, str>>,
        signature: impl Into<Cow<'static, str>>,
        address: usize,
    ) -> Symbol {
        let name = name.into();
        let signature = signature.into();
        let fingerprint = symbol_fingerprint(&name, &signature);
        Symbol {
            name,
            signature,
            fingerprint,
            address,
            function: None,
        }
    }

    /// Used by [`export!`](crate::export), which guarantees that `signature` is the text
    /// of `F` and `address` is `function`'s address. Call the macro instead.
    #[doc(hidden)]
    pub fn __from_typed_function<F: Any + Send + Sync + Copy>(
        name: &'static str,
        signature: &'static str,
        address: usize,
        function: F,
    ) -> Symbol {
        Symbol {
            name: Cow::Borrowed(name),
            signature: Cow::Borrowed(signature),
            fingerprint: symbol_fingerprint(name, signature),
            address,
            function: Some(Arc::new(function)),
        }
    }

    /// The symbol's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The symbol's signature text.
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// The symbol's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The symbol's code address.
    pub fn address(&self) -> usize {
        self.address
    }

    /// Whether the symbol carries a typed function value (was made with
    /// [`export!`](crate::export)).
    pub fn is_typed(&self) -> bool {
        self.function.is_some()
    }

    /// Whether `self` and `other` are the same export (same name, fingerprint and
    /// address), as when two domains being combined share a symbol.
    pub fn same_export(&self, other: &Symbol) -> bool {
        self.name == other.name
            && self.fingerprint == other.fingerprint
            && self.address == other.address
    }

    /// The function as a value of type `F`, whose type text is `signature`. Use
    /// [`typed_fn!`](crate::typed_fn), which passes the same tokens as both.
    ///
    /// Errors: [`SymbolError::FingerprintMismatch`] if `name ++ signature` does not
    /// fingerprint like the export; [`SymbolError::NotTyped`] for an address-only symbol;
    /// [`SymbolError::TypeMismatch`] if the function is not an `F` (the text matched but
    /// the type given does not).
    pub fn typed<F: Any + Copy>(&self, signature: &str) -> Result<F, SymbolError> {
        let requested = symbol_fingerprint(&self.name, signature);
        if requested != self.fingerprint {
            return Err(SymbolError::FingerprintMismatch {
                name: String::from(self.name()),
                expected: requested,
                found: self.fingerprint,
            });
        }
        let function = self
            .function
            .as_ref()
            .ok_or_else(|| SymbolError::NotTyped {
                name: String::from(self.name()),
            })?;
        (**function)
            .downcast_ref::<F>()
            .copied()
            .ok_or_else(|| SymbolError::TypeMismatch {
                name: String::from(self.name()),
            })
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Symbol")
            .field("name", &self.name)
            .field("signature", &self.signature)
            .field("fingerprint", &format_args!("{:#018x}", self.fingerprint.0))
            .field("address", &format_args!("{:#x}", self.address))
            .field("typed", &self.is_typed())
            .finish()
    }
}

/// One symbol an importer needs: its name and the fingerprint it was built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Import<'name> {
    /// The symbol's name.
    pub name: &'name str,
    /// The fingerprint the importer expects.
    pub fingerprint: Fingerprint,
}

impl<'name> Import<'name> {
    /// An import with a precomputed fingerprint (as read from an extension's metadata,
    /// or built by [`import!`](crate::import)).
    pub const fn new(name: &'name str, fingerprint: Fingerprint) -> Import<'name> {
        Import { name, fingerprint }
    }

    /// An import of `name` with signature text `signature`.
    pub fn with_signature(name: &'name str, signature: &str) -> Import<'name> {
        Import {
            name,
            fingerprint: symbol_fingerprint(name, signature),
        }
    }
}

/// Exports a kernel function as a typed [`Symbol`]:
/// `export!("name", function, fn(Args..) -> Result)`.
///
/// The function is coerced to the given fn-pointer type, so a signature that does not
/// match the function is a compile error; the fingerprint is computed from the same
/// tokens, so the text cannot lie.
///
/// ```
/// fn add(left: u64, right: u64) -> u64 { left + right }
/// let symbol = spindle_domain::export!("add", add, fn(u64, u64) -> u64);
/// assert_eq!(symbol.signature(), "fn(u64, u64) -> u64");
/// ```
///
/// ```compile_fail,E0308
/// fn add(left: u64, right: u64) -> u64 { left + right }
/// let symbol = spindle_domain::export!("add", add, fn(u32, u64) -> u64);
/// ```
#[macro_export]
macro_rules! export {
    ($name:literal, $function:expr, $signature:ty $(,)?) => {{
        let function: $signature = $function;
        $crate::Symbol::__from_typed_function(
            $name,
            ::core::stringify!($signature),
            function as usize,
            function,
        )
    }};
}

/// Declares an import in `const` context: `import!("name", fn(Args..) -> Result)`
/// gives an [`Import`] whose fingerprint matches `export!` with the same tokens.
///
/// ```
/// use spindle_domain::{Import, import};
/// const IMPORTS: &[Import<'static>] = &[import!("add", fn(u64, u64) -> u64)];
/// assert_eq!(IMPORTS[0].name, "add");
/// ```
#[macro_export]
macro_rules! import {
    ($name:literal, $signature:ty $(,)?) => {
        $crate::Import::new(
            $name,
            $crate::__private::fingerprint_of(::core::concat!(
                $name,
                ::core::stringify!($signature)
            )),
        )
    };
}

/// Gets a callable function out of a [`Symbol`]: `typed_fn!(symbol, fn(Args..) -> Result)`
/// evaluates to `Result<fn(..) -> .., SymbolError>`, checking both the fingerprint of the
/// type text and the Rust type itself.
///
/// ```
/// fn double(value: u64) -> u64 { value * 2 }
/// let symbol = spindle_domain::export!("double", double, fn(u64) -> u64);
/// let function = spindle_domain::typed_fn!(symbol, fn(u64) -> u64).unwrap();
/// assert_eq!(function(21), 42);
/// assert!(spindle_domain::typed_fn!(symbol, fn(u32) -> u64).is_err());
/// ```
#[macro_export]
macro_rules! typed_fn {
    ($symbol:expr, $signature:ty $(,)?) => {
        $crate::Symbol::typed::<$signature>(&$symbol, ::core::stringify!($signature))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(left: u64, right: u64) -> u64 {
        left + right
    }

    #[test]
    fn export_derives_text_and_fingerprint_from_the_type() {
        let symbol = crate::export!("add", add, fn(u64, u64) -> u64);
        assert_eq!(symbol.name(), "add");
        assert_eq!(symbol.signature(), "fn(u64, u64) -> u64");
        assert_eq!(
            symbol.fingerprint(),
            fingerprint_of("addfn(u64, u64) -> u64")
        );
        assert_eq!(symbol.address(), add as fn(u64, u64) -> u64 as usize);
        assert!(symbol.is_typed());
    }

    #[test]
    fn import_macro_matches_export_and_runtime_helper() {
        let symbol = crate::export!("add", add, fn(u64, u64) -> u64);
        const IMPORT: Import<'static> = crate::import!("add", fn(u64, u64) -> u64);
        assert_eq!(IMPORT.fingerprint, symbol.fingerprint());
        assert_eq!(Import::with_signature("add", "fn(u64, u64) -> u64"), IMPORT);
        assert_ne!(
            crate::import!("add", fn(u64, u32) -> u64).fingerprint,
            symbol.fingerprint()
        );
    }

    #[test]
    fn typed_access_returns_a_callable_function() {
        let symbol = crate::export!("add", add, fn(u64, u64) -> u64);
        let function =
            crate::typed_fn!(symbol, fn(u64, u64) -> u64).expect("same type as exported");
        assert_eq!(function(40, 2), 42);
    }

    #[test]
    fn typed_access_with_other_signature_text_is_a_fingerprint_mismatch() {
        let symbol = crate::export!("add", add, fn(u64, u64) -> u64);
        assert_eq!(
            crate::typed_fn!(symbol, fn(u64) -> u64).err(),
            Some(SymbolError::FingerprintMismatch {
                name: String::from("add"),
                expected: fingerprint_of("addfn(u64) -> u64"),
                found: symbol.fingerprint(),
            })
        );
    }

    #[test]
    fn typed_access_checks_the_rust_type_not_only_the_text() {
        let symbol = crate::export!("add", add, fn(u64, u64) -> u64);
        // Right text, wrong Rust type: the downcast catches it.
        assert_eq!(
            symbol
                .typed::<fn(u32, u32) -> u32>("fn(u64, u64) -> u64")
                .err(),
            Some(SymbolError::TypeMismatch {
                name: String::from("add")
            })
        );
    }

    #[test]
    fn address_only_symbols_are_not_typed() {
        let symbol = Symbol::from_address("add", "fn(u64, u64) -> u64", 0x8020_1000);
        assert_eq!(
            symbol.fingerprint(),
            crate::import!("add", fn(u64, u64) -> u64).fingerprint
        );
        assert_eq!(
            crate::typed_fn!(symbol, fn(u64, u64) -> u64).err(),
            Some(SymbolError::NotTyped {
                name: String::from("add")
            })
        );
    }

    #[test]
    fn closures_without_captures_can_be_exported() {
        let symbol = crate::export!("triple", |value: u64| value * 3, fn(u64) -> u64);
        assert_eq!(
            crate::typed_fn!(symbol, fn(u64) -> u64).map(|function| function(5)),
            Ok(15)
        );
    }
}
