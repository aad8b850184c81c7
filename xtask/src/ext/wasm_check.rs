//! Checking a built Wasm extension before it is packed.
//!
//! The module must validate and compile under the kernel's `wasmi` configuration, import
//! only kernel functions (`spindle_abi::host::KERNEL_FUNCTIONS`, module `"spindle"`) of
//! the domains its manifest names — Wasm modules never import the arena functions, their
//! heap is their linear memory —, export the functions of
//! `spindle_abi::wasm::EXPORTED_FUNCTIONS` and its memory and no other function, and
//! declare an initial memory within its quota. Finally it is instantiated with stand-in
//! kernel functions and described (binding count and every binding's description), so a
//! module the builder packs is one the kernel can load.

use std::fmt;

use spindle_abi::native::{BINDING_COUNT_SYMBOL, BINDING_INFO_SYMBOL};
use spindle_abi::wasm::{EXCHANGE_SYMBOL, EXPORTED_FUNCTIONS, MEMORY_EXPORT, WASM_IMPORT_MODULE, WASM_PAGE_SIZE};
use spindle_loader::Manifest;
use wasmi::{Config, Engine, ExternType, Linker, Module, Store, Val};

use super::domains::DomainError;

/// Kernel functions a Wasm module may not import: its heap is its own linear memory.
pub use spindle_abi::wasm::NATIVE_ONLY_FUNCTIONS as NOT_FOR_WASM;
/// Fuel for the trial describe calls (the kernel allows the same).
const DESCRIBE_FUEL: u64 = 10_000_000;

/// Why a module was refused.
#[derive(Debug)]
pub enum WasmCheckError {
    /// `wasmi` refused to validate or compile it.
    Invalid(String),
    /// An import from another module than `"spindle"`, or not a function.
    ForeignImport(String),
    /// An import that is not a kernel function available to Wasm.
    UnknownImport(String),
    /// An import from a domain the manifest does not name.
    DomainNotDeclared {
        /// The symbol.
        symbol: String,
        /// Its domain.
        domain: &'static str,
    },
    /// A contract export is missing or has the wrong kind.
    MissingExport(&'static str),
    /// A function export outside the contract.
    UnexpectedExport(String),
    /// The initial memory is above the quota.
    InitialMemoryAboveQuota {
        /// Bytes of initial memory.
        bytes: u64,
        /// The manifest's quota.
        quota: u64,
    },
    /// The trial instantiation or describe calls failed.
    Trial(String),
}

impl fmt::Display for WasmCheckError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WasmCheckError::Invalid(error) => write!(formatter, "the kernel's wasmi would refuse the module: {error}"),
            WasmCheckError::ForeignImport(import) => write!(formatter, "the module imports `{import}`, which is not a function of module `{WASM_IMPORT_MODULE}`"),
            WasmCheckError::UnknownImport(symbol) => {
                write!(formatter, "the module imports `{symbol}`, which is not a kernel function available to Wasm extensions")
            }
            WasmCheckError::DomainNotDeclared { symbol, domain } => write!(
                formatter,
                "the module imports `{symbol}` of domain `{domain}`, which the extension's declared `domains` does not name"
            ),
            WasmCheckError::MissingExport(symbol) => write!(formatter, "the module does not export `{symbol}` (or exports it with the wrong kind)"),
            WasmCheckError::UnexpectedExport(symbol) => write!(formatter, "the module exports the function `{symbol}`, which is not in the Wasm contract"),
            WasmCheckError::InitialMemoryAboveQuota { bytes, quota } => {
                write!(formatter, "the module's initial memory ({bytes} bytes: static data and shadow stack) is above its memory quota ({quota} bytes)")
            }
            WasmCheckError::Trial(message) => write!(formatter, "a trial instantiation failed: {message}"),
        }
    }
}

/// What the checks found, for the summary.
#[derive(Debug)]
pub struct WasmReport {
    /// Imports with their domains.
    pub imports: Vec<(String, &'static str)>,
    /// Initial linear memory in bytes.
    pub initial_memory: u64,
    /// Bindings the module describes.
    pub bindings: usize,
}

/// The engine configuration the kernel uses (fuel metering on, eager compilation).
pub fn engine() -> Engine {
    let mut config = Config::default();
    config.consume_fuel(true).compilation_mode(wasmi::CompilationMode::Eager);
    Engine::new(&config)
}

/// Runs every check on `module` for an extension with `manifest`, first adding to the
/// manifest's domains those of the glue's imports (`glue_imports`) the module imports.
///
/// Errors: the first [`WasmCheckError`] found.
pub fn check(bytes: &[u8], manifest: &mut Manifest, glue_imports: &[&str]) -> Result<WasmReport, WasmCheckError> {
    let engine = engine();
    let module = Module::new(&engine, bytes).map_err(|error| WasmCheckError::Invalid(error.to_string()))?;
    let names: Vec<String> = module.imports().map(|import| import.name().to_string()).collect();
    super::domains::add_glue_domains(manifest, names.iter().map(String::as_str), glue_imports);
    for import in module.imports() {
        if import.module() != WASM_IMPORT_MODULE || import.ty().func().is_none() {
            return Err(WasmCheckError::ForeignImport(format!("{}.{}", import.module(), import.name())));
        }
    }
    // The one domain check of every technology; the arena functions are native-only.
    let imports = super::domains::check(names.iter().map(String::as_str), manifest, NOT_FOR_WASM).map_err(|error| match error {
        DomainError::Unknown { symbol } => WasmCheckError::UnknownImport(symbol),
        DomainError::NotDeclared { symbol, domain } => WasmCheckError::DomainNotDeclared { symbol, domain },
    })?;
    for symbol in EXPORTED_FUNCTIONS {
        if !matches!(module.get_export(symbol), Some(ExternType::Func(_))) {
            return Err(WasmCheckError::MissingExport(symbol));
        }
    }
    let Some(ExternType::Memory(memory)) = module.get_export(MEMORY_EXPORT) else {
        return Err(WasmCheckError::MissingExport(MEMORY_EXPORT));
    };
    for export in module.exports() {
        if matches!(export.ty(), ExternType::Func(_)) && !EXPORTED_FUNCTIONS.contains(&export.name()) {
            return Err(WasmCheckError::UnexpectedExport(export.name().to_string()));
        }
    }
    let initial_memory = memory.minimum() * WASM_PAGE_SIZE as u64;
    let quota = manifest.memory_quota_bytes.div_ceil(WASM_PAGE_SIZE as u64) * WASM_PAGE_SIZE as u64;
    if initial_memory > quota {
        return Err(WasmCheckError::InitialMemoryAboveQuota { bytes: initial_memory, quota: manifest.memory_quota_bytes });
    }
    let bindings = trial(&engine, &module).map_err(WasmCheckError::Trial)?;
    Ok(WasmReport { imports, initial_memory, bindings })
}

/// Instantiates `module` with stand-ins for its imports (returning zeros; the panic
/// import traps) and calls the describe exports.
fn trial(engine: &Engine, module: &Module) -> Result<usize, String> {
    let mut store = Store::new(engine, ());
    store.set_fuel(DESCRIBE_FUEL).map_err(|error| error.to_string())?;
    let mut linker = Linker::<()>::new(engine);
    for import in module.imports() {
        let Some(ty) = import.ty().func() else { continue };
        let traps = import.name() == "spindle_extension_panic";
        let zeros: Vec<Val> = ty.results().iter().map(|result| Val::default_for_ty(*result)).collect();
        linker
            .func_new(import.module(), import.name(), ty.clone(), move |_caller, _arguments: &[Val], results: &mut [Val]| {
                if traps {
                    return Err(wasmi::Error::new("the extension panicked while describing itself"));
                }
                results.clone_from_slice(&zeros);
                Ok(())
            })
            .map_err(|error| error.to_string())?;
    }
    let instance = linker.instantiate_and_start(&mut store, module).map_err(|error| error.to_string())?;
    let count = instance.get_typed_func::<(), i32>(&store, BINDING_COUNT_SYMBOL).map_err(|error| error.to_string())?;
    let info = instance.get_typed_func::<(i32, i32), i32>(&store, BINDING_INFO_SYMBOL).map_err(|error| error.to_string())?;
    let exchange = instance.get_typed_func::<(), i32>(&store, EXCHANGE_SYMBOL).map_err(|error| error.to_string())?;
    let bindings = count.call(&mut store, ()).map_err(|error| error.to_string())?;
    let buffer = exchange.call(&mut store, ()).map_err(|error| error.to_string())?;
    for index in 0..bindings {
        let code = info.call(&mut store, (index, buffer)).map_err(|error| error.to_string())?;
        if code != 0 {
            return Err(format!("describing binding {index} returned error code {code}"));
        }
    }
    usize::try_from(bindings).map_err(|_| format!("binding count {bindings}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(domains: &[&str], quota: u64) -> Manifest {
        Manifest {
            name: "fixture".into(),
            version: "0.1.0".into(),
            entry: BINDING_COUNT_SYMBOL.into(),
            events: Vec::new(),
            domains: domains.iter().map(|domain| domain.to_string()).collect(),
            budget_microseconds: 1,
            memory_quota_bytes: quota,
        }
    }

    #[test]
    fn garbage_and_foreign_modules_are_refused() {
        assert!(matches!(check(b"\0asm garbage", &mut manifest(&[], 65536), &[]), Err(WasmCheckError::Invalid(_))));
        let foreign = wat::parse_str(r#"(module (import "env" "f" (func)))"#).unwrap();
        assert!(matches!(check(&foreign, &mut manifest(&[], 65536), &[]), Err(WasmCheckError::ForeignImport(_))));
        let ungranted = wat::parse_str(r#"(module (import "spindle" "spindle_clock_ticks" (func (result i64))))"#).unwrap();
        let error = check(&ungranted, &mut manifest(&["console"], 65536), &[]).unwrap_err();
        assert!(matches!(&error, WasmCheckError::DomainNotDeclared { symbol, .. } if symbol == "spindle_clock_ticks"), "{error}");
        let arena = wat::parse_str(r#"(module (import "spindle" "spindle_extension_alloc" (func (param i32 i32) (result i32))))"#).unwrap();
        assert!(matches!(check(&arena, &mut manifest(&["extension"], 65536), &[]), Err(WasmCheckError::UnknownImport(_))));
        let no_exports = wat::parse_str(r#"(module (memory 1))"#).unwrap();
        assert!(matches!(check(&no_exports, &mut manifest(&[], 65536), &[]), Err(WasmCheckError::MissingExport(_))));
    }
}
