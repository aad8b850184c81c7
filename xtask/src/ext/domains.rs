//! The one domain check of every technology: each kernel function a built extension
//! reaches must be in `spindle_abi::host::KERNEL_FUNCTIONS` (and available to the
//! technology), and its domain must be one the manifest names — the `domains` of the
//! `extension!` declaration, plus those the builder's own glue needs ([`add_glue_domains`]).
//!
//! What "reaches" means per technology: a native shared object's dynamic imports
//! ([`super::artifact`]), a Wasm module's imports from module `"spindle"`
//! ([`super::wasm_check`]), and a user-level program's defined kernel-function symbols
//! ([`user_program_kernel_functions`]): the user-level ABI implements each kernel function
//! as an `#[inline(never)]` system-call wrapper, so the linker keeps exactly those the
//! program calls.

use std::fmt;

use object::{Object as _, ObjectSymbol as _};
use spindle_abi::host::{KERNEL_FUNCTIONS, KernelFunction};
use spindle_loader::Manifest;

/// Why a kernel function an extension reaches is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainError {
    /// Not a kernel function (or not one this technology may use).
    Unknown {
        /// The symbol.
        symbol: String,
    },
    /// A kernel function of a domain the manifest does not name.
    NotDeclared {
        /// The symbol.
        symbol: String,
        /// Its domain.
        domain: &'static str,
    },
}

impl fmt::Display for DomainError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainError::Unknown { symbol } => write!(formatter, "`{symbol}` is not a kernel function (spindle_abi::host::KERNEL_FUNCTIONS)"),
            DomainError::NotDeclared { symbol, domain } => {
                write!(formatter, "it calls `{symbol}` of domain `{domain}`, which the extension! declaration's `domains` does not name")
            }
        }
    }
}

/// The kernel function called `symbol`, with its index in the table.
pub fn kernel_function(symbol: &str) -> Option<(usize, &'static KernelFunction)> {
    KERNEL_FUNCTIONS.iter().enumerate().find(|(_, function)| function.name == symbol)
}

/// Domains of the kernel functions among `symbols` that the glue itself calls, which the
/// manifest must grant even though the extension's declaration does not name them (the
/// panic handler's `spindle_extension_panic`, the arena allocator's functions).
pub fn glue_domains<'a>(symbols: impl Iterator<Item = &'a str>, glue_imports: &[&str]) -> Vec<&'static str> {
    let mut domains = Vec::new();
    for symbol in symbols.filter(|symbol| glue_imports.contains(symbol)) {
        if let Some((_, function)) = kernel_function(symbol)
            && !domains.contains(&function.domain)
        {
            domains.push(function.domain);
        }
    }
    domains
}

/// Appends to the manifest's domains those of [`glue_domains`] it does not name yet.
pub fn add_glue_domains<'a>(manifest: &mut Manifest, symbols: impl Iterator<Item = &'a str>, glue_imports: &[&str]) {
    for domain in glue_domains(symbols, glue_imports) {
        if !manifest.domains.iter().any(|declared| declared == domain) {
            manifest.domains.push(domain.to_string());
        }
    }
}

/// Checks every symbol an extension reaches: a kernel function not in `unavailable`, of a
/// domain `manifest` names. Returns each with its domain, in order.
///
/// Errors: the first [`DomainError`].
pub fn check<'a>(symbols: impl IntoIterator<Item = &'a str>, manifest: &Manifest, unavailable: &[&str]) -> Result<Vec<(String, &'static str)>, DomainError> {
    let mut checked = Vec::new();
    for symbol in symbols {
        let (_, function) = kernel_function(symbol)
            .filter(|(_, function)| !unavailable.contains(&function.name))
            .ok_or_else(|| DomainError::Unknown { symbol: symbol.to_string() })?;
        if !manifest.domains.iter().any(|domain| domain == function.domain) {
            return Err(DomainError::NotDeclared { symbol: symbol.to_string(), domain: function.domain });
        }
        checked.push((symbol.to_string(), function.domain));
    }
    Ok(checked)
}

/// The kernel functions a user-level program calls: the defined function symbols of its
/// symbol table that are kernel functions (see the module documentation), sorted.
///
/// Errors: the program is not an ELF file with a symbol table.
pub fn user_program_kernel_functions(program: &[u8]) -> Result<Vec<String>, String> {
    let file = object::File::parse(program).map_err(|error| format!("not an ELF program: {error}"))?;
    if file.symbol_table().is_none() {
        return Err("the program has no symbol table, so the kernel functions it calls cannot be found".into());
    }
    let mut names: Vec<String> = file
        .symbols()
        .filter(|symbol| symbol.is_definition() && symbol.kind() == object::SymbolKind::Text)
        .filter_map(|symbol| symbol.name().ok().filter(|name| kernel_function(name).is_some()).map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(domains: &[&str]) -> Manifest {
        Manifest {
            name: "fixture".into(),
            version: "0.1.0".into(),
            entry: spindle_abi::native::BINDING_COUNT_SYMBOL.into(),
            events: Vec::new(),
            domains: domains.iter().map(|domain| domain.to_string()).collect(),
            budget_microseconds: 1,
            memory_quota_bytes: 4096,
        }
    }

    #[test]
    fn kernel_functions_need_their_domain() {
        let granted = manifest(&["console", "clock"]);
        assert_eq!(
            check(["spindle_console_write", "spindle_clock_ticks"], &granted, &[]).unwrap(),
            [("spindle_console_write".to_string(), "console"), ("spindle_clock_ticks".to_string(), "clock")]
        );
        assert_eq!(
            check(["spindle_console_write", "spindle_mm_lru_length"], &granted, &[]),
            Err(DomainError::NotDeclared { symbol: "spindle_mm_lru_length".into(), domain: "mm" })
        );
        assert_eq!(check(["printf"], &granted, &[]), Err(DomainError::Unknown { symbol: "printf".into() }));
        let arena = manifest(&["extension"]);
        assert_eq!(check(["spindle_extension_alloc"], &arena, &["spindle_extension_alloc"]), Err(DomainError::Unknown { symbol: "spindle_extension_alloc".into() }));
        let error = DomainError::NotDeclared { symbol: "spindle_mm_lru_length".into(), domain: "mm" }.to_string();
        assert!(error.contains("`spindle_mm_lru_length` of domain `mm`"), "{error}");
    }

    #[test]
    fn glue_domains_are_added_once() {
        let mut granted = manifest(&["console"]);
        add_glue_domains(&mut granted, ["spindle_extension_panic", "spindle_console_write", "spindle_extension_alloc"].into_iter(), &["spindle_extension_panic", "spindle_extension_alloc"]);
        assert_eq!(granted.domains, ["console", "extension"]);
    }

    #[test]
    fn a_program_without_symbols_is_refused() {
        assert!(user_program_kernel_functions(b"\x7fELF garbage").is_err());
    }
}
