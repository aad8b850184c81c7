//! Copying a validated shared object into an image buffer and relocating it.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::elf::{Definition, ElfObject, Mapping, SymbolKind};
use crate::relocation::{self, OutOfImage};

/// Why [`load_into`] failed. `E` is the resolver's error type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError<E> {
    /// The image buffer is smaller than [`ElfObject::image_size`].
    BufferTooSmall {
        /// Bytes needed.
        needed: u64,
        /// Bytes provided.
        provided: u64,
    },
    /// The load base is not a multiple of [`ElfObject::load_alignment`] (after removing
    /// the image's link-time start).
    MisalignedLoadBase {
        /// The requested base.
        load_base: u64,
        /// The required alignment.
        alignment: u64,
    },
    /// The image would wrap around the end of the address space at this base.
    AddressOverflow {
        /// The requested base.
        load_base: u64,
    },
    /// The resolver could not supply an import (not exported by any granted domain,
    /// fingerprint mismatch, ...).
    Unresolved {
        /// The symbol's name.
        symbol: String,
        /// The resolver's reason.
        error: E,
    },
    /// A relocation would write outside the image (cannot happen for an [`ElfObject`]
    /// the parser accepted; checked again because the write is the last line of defence).
    WriteOutOfImage(OutOfImage),
}

impl<E: fmt::Display> fmt::Display for LoadError<E> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::BufferTooSmall { needed, provided } => {
                write!(
                    formatter,
                    "image buffer is {provided} bytes, {needed} needed"
                )
            }
            LoadError::MisalignedLoadBase {
                load_base,
                alignment,
            } => {
                write!(
                    formatter,
                    "load base {load_base:#x} is not aligned to {alignment:#x}"
                )
            }
            LoadError::AddressOverflow { load_base } => {
                write!(
                    formatter,
                    "image does not fit in the address space at {load_base:#x}"
                )
            }
            LoadError::Unresolved { symbol, error } => {
                write!(formatter, "cannot resolve import `{symbol}`: {error}")
            }
            LoadError::WriteOutOfImage(error) => write!(formatter, "{error}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for LoadError<E> {}

/// An exported symbol at its runtime address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The name.
    pub name: String,
    /// Runtime address (or absolute value).
    pub address: u64,
    /// Size in bytes (`st_size`).
    pub size: u64,
    /// Function, object or untyped.
    pub kind: SymbolKind,
}

/// Why [`LoadedImage::function`] refused a symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymbolLookupError {
    /// No exported symbol has this name.
    NotFound {
        /// The name looked up.
        name: String,
    },
    /// The symbol is not a function (`STT_FUNC`).
    NotAFunction {
        /// The name looked up.
        name: String,
    },
    /// The function's address is not in an executable mapping.
    NotExecutable {
        /// The name looked up.
        name: String,
    },
}

impl fmt::Display for SymbolLookupError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymbolLookupError::NotFound { name } => {
                write!(formatter, "extension exports no `{name}`")
            }
            SymbolLookupError::NotAFunction { name } => {
                write!(formatter, "`{name}` is not a function")
            }
            SymbolLookupError::NotExecutable { name } => {
                write!(formatter, "`{name}` is not in an executable segment")
            }
        }
    }
}

impl core::error::Error for SymbolLookupError {}

/// The result of [`load_into`]: where everything ended up and how to map it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedImage {
    load_base: u64,
    size: u64,
    mappings: Vec<Mapping>,
    exports: Vec<Export>,
    relocations_applied: usize,
    imports_resolved: usize,
}

impl LoadedImage {
    /// Runtime address of the image buffer's first byte.
    pub fn load_base(&self) -> u64 {
        self.load_base
    }

    /// Image size in bytes (a multiple of the page size).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The page-granular mappings at runtime addresses, each with its final permissions
    /// (never writable and executable). Map these, then `fence.i`.
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// The exported symbols at runtime addresses.
    pub fn exports(&self) -> &[Export] {
        &self.exports
    }

    /// The runtime address of the exported symbol `name` (any kind).
    pub fn symbol(&self, name: &str) -> Option<u64> {
        self.exports
            .iter()
            .find(|export| export.name == name)
            .map(|export| export.address)
    }

    /// The runtime address of the exported *function* `name`, checked to be `STT_FUNC`
    /// and inside an executable mapping: use this for the entry symbol and handlers.
    ///
    /// Errors: [`SymbolLookupError::NotFound`], [`SymbolLookupError::NotAFunction`],
    /// [`SymbolLookupError::NotExecutable`].
    pub fn function(&self, name: &str) -> Result<u64, SymbolLookupError> {
        let export = self
            .exports
            .iter()
            .find(|export| export.name == name)
            .ok_or_else(|| SymbolLookupError::NotFound {
                name: name.to_string(),
            })?;
        if export.kind != SymbolKind::Function {
            return Err(SymbolLookupError::NotAFunction {
                name: name.to_string(),
            });
        }
        let executable = self.mappings.iter().any(|mapping| {
            mapping.permissions.execute
                && export.address >= mapping.address
                && export.address - mapping.address < mapping.size
        });
        if !executable {
            return Err(SymbolLookupError::NotExecutable {
                name: name.to_string(),
            });
        }
        Ok(export.address)
    }

    /// How many relocations were applied (`R_RISCV_NONE` not counted).
    pub fn relocations_applied(&self) -> usize {
        self.relocations_applied
    }

    /// How many distinct imports the resolver supplied.
    pub fn imports_resolved(&self) -> usize {
        self.imports_resolved
    }
}

/// Copies `elf` into `image` for execution at `load_base` (the runtime address of
/// `image[0]`), zero-filling bss and gaps, and applies every dynamic relocation.
///
/// `resolver` is called once per distinct imported symbol that a relocation uses, with
/// the symbol's name, and returns its runtime address; the kernel's resolver checks the
/// name against the domains the extension was granted. Symbols the object defines itself
/// resolve to themselves (no interposition). Writes go only to `image`, which is then
/// ready to be mapped with [`LoadedImage::mappings`]; nothing is executed.
///
/// Errors: [`LoadError::BufferTooSmall`], [`LoadError::MisalignedLoadBase`],
/// [`LoadError::AddressOverflow`] (checked before anything is written),
/// [`LoadError::Unresolved`] naming the first import the resolver refused, and
/// [`LoadError::WriteOutOfImage`]. On error, `image` holds partial contents.
pub fn load_into<E>(
    elf: &ElfObject<'_>,
    image: &mut [u8],
    load_base: u64,
    resolver: &mut dyn FnMut(&str) -> Result<u64, E>,
) -> Result<LoadedImage, LoadError<E>> {
    let size = elf.image_size();
    if (image.len() as u64) < size {
        return Err(LoadError::BufferTooSmall {
            needed: size,
            provided: image.len() as u64,
        });
    }
    let alignment = elf.load_alignment();
    let bias = relocation::load_bias(load_base, elf.image_start());
    // The image start is page-aligned, so this also makes `load_base` page-aligned.
    if !bias.is_multiple_of(alignment) {
        return Err(LoadError::MisalignedLoadBase {
            load_base,
            alignment,
        });
    }
    if load_base.checked_add(size).is_none() {
        return Err(LoadError::AddressOverflow { load_base });
    }
    let image = &mut image[..size as usize]; // size <= image.len()

    image.fill(0);
    let data = elf.data();
    for segment in elf.segments() {
        // The parser checked both ranges; `get` keeps a violated invariant from panicking.
        let source = data
            .get(segment.file_offset as usize..(segment.file_offset + segment.file_size) as usize);
        let start = segment.image_offset as usize;
        let destination = image.get_mut(start..start + segment.file_size as usize);
        match (source, destination) {
            (Some(source), Some(destination)) => destination.copy_from_slice(source),
            _ => {
                return Err(LoadError::WriteOutOfImage(OutOfImage {
                    offset: segment.image_offset,
                }));
            }
        }
    }

    let symbols = elf.symbols();
    let mut resolved: Vec<Option<u64>> = alloc::vec![None; symbols.len()];
    let mut imports_resolved = 0;
    let mut relocations_applied = 0;
    for relocation in elf.relocations() {
        let symbol_address = if relocation.kind.uses_symbol() && relocation.symbol != 0 {
            let index = relocation.symbol as usize;
            match resolved.get(index).copied().flatten() {
                Some(address) => address,
                None => {
                    let Some(symbol) = symbols.get(index) else {
                        return Err(LoadError::WriteOutOfImage(OutOfImage {
                            offset: relocation.image_offset,
                        }));
                    };
                    let address = match symbol.definition {
                        Definition::Defined => bias.wrapping_add(symbol.value),
                        Definition::Absolute => symbol.value,
                        Definition::Undefined => {
                            imports_resolved += 1;
                            resolver(symbol.name).map_err(|error| LoadError::Unresolved {
                                symbol: symbol.name.to_string(),
                                error,
                            })?
                        }
                    };
                    if let Some(slot) = resolved.get_mut(index) {
                        *slot = Some(address);
                    }
                    address
                }
            }
        } else {
            0
        };
        if let Some(value) =
            relocation::value(relocation.kind, bias, symbol_address, relocation.addend)
        {
            relocation::write_word(image, relocation.image_offset, value)
                .map_err(LoadError::WriteOutOfImage)?;
            relocations_applied += 1;
        }
    }

    let runtime = |address: u64| bias.wrapping_add(address);
    let mappings = elf
        .mappings()
        .iter()
        .map(|mapping| Mapping {
            address: runtime(mapping.address),
            ..*mapping
        })
        .collect();
    let exports = elf
        .exports()
        .map(|symbol| Export {
            name: symbol.name.to_string(),
            address: match symbol.definition {
                Definition::Absolute => symbol.value,
                _ => runtime(symbol.value),
            },
            size: symbol.size,
            kind: symbol.kind,
        })
        .collect();
    Ok(LoadedImage {
        load_base,
        size,
        mappings,
        exports,
        relocations_applied,
        imports_resolved,
    })
}
