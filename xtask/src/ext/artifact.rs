//! Checking a linked native extension before it is signed.
//!
//! The shared object must pass the kernel loader's own [`ElfObject::parse`] (structure,
//! segments, dynamic table, only supported relocations), export exactly the symbols of
//! `spindle_abi::native::EXPORTED_SYMBOLS` as functions, and import only kernel functions
//! (`spindle_abi::host::KERNEL_FUNCTIONS`) of the domains its manifest names. Finally it is
//! loaded into a buffer with [`load_into`] — every relocation applied, every import
//! resolved through the manifest's domains — so a file the builder signs is one the kernel
//! can load.

use std::collections::BTreeMap;
use std::fmt;

use spindle_abi::native::EXPORTED_SYMBOLS;
use spindle_loader::{ElfError, ElfObject, Manifest, RelocationKind, SymbolKind, load_into};

use super::domains::{self, DomainError};

/// Link-time base of the trial load (1 GiB: a multiple of every alignment the loader
/// accepts, which is at most 2 MiB).
const TRIAL_LOAD_BASE: u64 = 1 << 30;
/// Where the trial load pretends kernel function `i` lives: `BASE + i * STRIDE`.
const TRIAL_FUNCTION_BASE: u64 = 0xffff_ffc0_0000_0000;
/// Spacing of the pretended kernel function addresses.
const TRIAL_FUNCTION_STRIDE: u64 = 0x100;

/// Why a shared object was refused.
#[derive(Debug)]
pub enum ArtifactError {
    /// The loader's parser refused it.
    Elf(ElfError),
    /// A contract symbol is not exported.
    MissingExport {
        /// The symbol.
        symbol: &'static str,
    },
    /// A symbol outside the contract is exported.
    UnexpectedExport {
        /// The symbol.
        symbol: String,
    },
    /// A contract symbol is exported but is not a function.
    ExportNotAFunction {
        /// The symbol.
        symbol: String,
    },
    /// An import that is not a kernel function.
    UnknownImport {
        /// The symbol.
        symbol: String,
    },
    /// An import from a domain the manifest does not name.
    DomainNotDeclared {
        /// The symbol.
        symbol: String,
        /// Its domain.
        domain: &'static str,
    },
    /// The trial load failed.
    TrialLoad(String),
}

impl fmt::Display for ArtifactError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArtifactError::Elf(error) => write!(formatter, "the kernel's loader would refuse the shared object: {error}"),
            ArtifactError::MissingExport { symbol } => write!(formatter, "the shared object does not export `{symbol}`"),
            ArtifactError::UnexpectedExport { symbol } => {
                write!(formatter, "the shared object exports `{symbol}`, which is not in spindle_abi::native::EXPORTED_SYMBOLS")
            }
            ArtifactError::ExportNotAFunction { symbol } => write!(formatter, "the exported symbol `{symbol}` is not a function"),
            ArtifactError::UnknownImport { symbol } => {
                write!(formatter, "the shared object imports `{symbol}`, which is not a kernel function (spindle_abi::host::KERNEL_FUNCTIONS)")
            }
            ArtifactError::DomainNotDeclared { symbol, domain } => write!(
                formatter,
                "the shared object imports `{symbol}` of domain `{domain}`, which the extension! declaration's `domains` does not name"
            ),
            ArtifactError::TrialLoad(message) => write!(formatter, "a trial load failed: {message}"),
        }
    }
}

/// What the checks found, for the summary.
#[derive(Debug)]
pub struct Report {
    /// Exported symbols.
    pub exports: Vec<String>,
    /// Imported symbols with their domains.
    pub imports: Vec<(String, &'static str)>,
    /// Relocations by kind.
    pub relocations: BTreeMap<&'static str, usize>,
    /// Bytes the image needs in memory.
    pub image_size: u64,
}

impl Report {
    /// Total number of relocations.
    pub fn relocation_count(&self) -> usize {
        self.relocations.values().sum()
    }
}

/// Runs every check on `shared_object` for an extension with `manifest`, first adding to
/// the manifest's domains those of the `glue_imports` the object imports (see
/// [`domains::glue_domains`]); the imports are checked by [`domains::check`], the one domain
/// check of every technology.
///
/// Errors: the first [`ArtifactError`] found, in the order of the variants.
pub fn check(shared_object: &[u8], manifest: &mut Manifest, glue_imports: &[&str]) -> Result<Report, ArtifactError> {
    // The kernel's own limit (its slot layout), not the memory quota: an image and its
    // arena are separate parts of the slot.
    let elf = ElfObject::parse(shared_object, spindle_loader::MAX_NATIVE_IMAGE_SIZE).map_err(ArtifactError::Elf)?;
    domains::add_glue_domains(manifest, elf.imports().map(|symbol| symbol.name), glue_imports);
    for symbol in EXPORTED_SYMBOLS {
        if elf.export(symbol).is_none() {
            return Err(ArtifactError::MissingExport { symbol });
        }
    }
    let mut exports = Vec::new();
    for symbol in elf.exports() {
        if !EXPORTED_SYMBOLS.contains(&symbol.name) {
            return Err(ArtifactError::UnexpectedExport { symbol: symbol.name.to_string() });
        }
        if symbol.kind != SymbolKind::Function {
            return Err(ArtifactError::ExportNotAFunction { symbol: symbol.name.to_string() });
        }
        exports.push(symbol.name.to_string());
    }
    let imports = domains::check(elf.imports().map(|symbol| symbol.name), manifest, &[]).map_err(|error| match error {
        DomainError::Unknown { symbol } => ArtifactError::UnknownImport { symbol },
        DomainError::NotDeclared { symbol, domain } => ArtifactError::DomainNotDeclared { symbol, domain },
    })?;
    let mut relocations = BTreeMap::new();
    for relocation in elf.relocations() {
        let kind = match relocation.kind {
            RelocationKind::None => "none",
            RelocationKind::Relative => "relative",
            RelocationKind::Absolute64 => "64",
            RelocationKind::JumpSlot => "jump-slot",
        };
        *relocations.entry(kind).or_insert(0) += 1;
    }
    trial_load(&elf, manifest)?;
    Ok(Report { exports, imports, relocations, image_size: elf.image_size() })
}

/// Loads the object into a buffer as the kernel would, resolving imports only from the
/// manifest's domains to pretend addresses, and looks up every export as a function.
fn trial_load(elf: &ElfObject<'_>, manifest: &Manifest) -> Result<(), ArtifactError> {
    let size = usize::try_from(elf.image_size()).map_err(|_| ArtifactError::TrialLoad("image too large".into()))?;
    let mut image = vec![0u8; size];
    let mut resolver = |symbol: &str| -> Result<u64, &'static str> {
        match domains::kernel_function(symbol) {
            Some((index, function)) if manifest.domains.iter().any(|domain| domain == function.domain) => {
                Ok(TRIAL_FUNCTION_BASE + index as u64 * TRIAL_FUNCTION_STRIDE)
            }
            Some(_) => Err("not in a domain the manifest names"),
            None => Err("not a kernel function"),
        }
    };
    let loaded = load_into(elf, &mut image, TRIAL_LOAD_BASE, &mut resolver).map_err(|error| ArtifactError::TrialLoad(error.to_string()))?;
    for symbol in EXPORTED_SYMBOLS {
        loaded.function(symbol).map_err(|error| ArtifactError::TrialLoad(error.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(domains: &[&str]) -> Manifest {
        Manifest {
            name: "fixture".into(),
            version: "0.1.0".into(),
            entry: "fixture_init".into(),
            events: Vec::new(),
            domains: domains.iter().map(|domain| domain.to_string()).collect(),
            budget_microseconds: 1,
            memory_quota_bytes: 1 << 20,
        }
    }

    /// The loader's fixture is a real shared object, but not a Spindle extension: it
    /// exports other symbols and imports functions the kernel does not have.
    #[test]
    fn a_foreign_shared_object_is_refused_by_name() {
        let path = crate::kernel_build::workspace_root().join("kernel/loader/tests/fixtures/native-extension.so");
        let bytes = std::fs::read(path).unwrap();
        let error = check(&bytes, &mut manifest(&["console"]), &[]).unwrap_err();
        assert!(matches!(&error, ArtifactError::MissingExport { symbol } if *symbol == EXPORTED_SYMBOLS[0]), "{error}");
        assert!(matches!(check(b"not an ELF file", &mut manifest(&[]), &[]), Err(ArtifactError::Elf(_))));
    }

    /// The image limit is the kernel's slot layout, not the memory quota: a small quota
    /// does not make a normal image "too large" (this refused `boost`, quota 4 KiB).
    #[test]
    fn a_small_quota_does_not_limit_the_image() {
        let path = crate::kernel_build::workspace_root().join("kernel/loader/tests/fixtures/native-extension.so");
        let bytes = std::fs::read(path).unwrap();
        let mut small = Manifest { memory_quota_bytes: 64, ..manifest(&["console"]) };
        let error = check(&bytes, &mut small, &[]).unwrap_err();
        assert!(!matches!(error, ArtifactError::Elf(_)), "refused as ELF: {error}");
    }
}
