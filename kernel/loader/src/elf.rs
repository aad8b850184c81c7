//! Validation of a RISC-V ELF64 shared object, everything checked before a byte is copied.
//!
//! [`ElfObject::parse`] reads the file the way a dynamic loader does — through the program
//! headers and `PT_DYNAMIC`, never the section headers (which may be stripped) — and
//! checks: ELF64, little-endian, `EM_RISCV`, `ET_DYN`; each `PT_LOAD` (file range inside
//! the file, `filesz <= memsz`, power-of-two alignment with `vaddr ≡ offset`, no
//! overflow, not writable *and* executable, not larger than the caller's limit), the
//! `PT_LOAD`s in address order and on disjoint pages (so each page gets one permission),
//! the whole image span under the limit; the dynamic table (terminated, no dependency on
//! other libraries, no initialisers, RELA only, standard entry sizes); the dynamic symbol
//! table (count from `DT_HASH` or `DT_GNU_HASH`, names inside `DT_STRTAB` and UTF-8, no
//! TLS or IFUNC symbols, defined symbols inside the image); and every relocation
//! (supported type, symbol index valid, 8-byte target inside a loaded segment). What
//! remains for [`crate::load_into`] is copying, resolving imports and writing words.
//!
//! `object` (features `read_core`, `elf`, `unaligned`) supplies the ELF structure
//! definitions and bounds-checked reads; every address translation, count and range
//! check on top of it is ours. Every arithmetic step is checked: a malformed file yields
//! an [`ElfError`], never a panic.

use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use object::elf::{self, Dyn64, FileHeader64, ProgramHeader64, Rela64, Sym64};
use object::read::elf::{Dyn as _, FileHeader as _, ProgramHeader as _, Rela as _, Sym as _};
use object::{LittleEndian, ReadRef as _};

use crate::relocation::{RelocationKind, WORD_SIZE};

/// The page size the kernel maps extensions with (Sv39 base pages).
pub const PAGE_SIZE: u64 = 4096;
/// Largest `p_align` accepted (a 2 MiB Sv39 megapage).
pub const MAX_SEGMENT_ALIGNMENT: u64 = 2 * 1024 * 1024;

const ENDIAN: LittleEndian = LittleEndian;
/// Size of the ELF64 file header.
const FILE_HEADER_SIZE: usize = 64;
/// Size of an ELF64 program header (`e_phentsize`).
const PROGRAM_HEADER_SIZE: u16 = 56;
/// Size of an `Elf64_Dyn`.
const DYNAMIC_ENTRY_SIZE: u64 = 16;
/// Size of an `Elf64_Rela` (`DT_RELAENT`).
const RELA_ENTRY_SIZE: u64 = 24;
/// Size of an `Elf64_Sym` (`DT_SYMENT`).
const SYMBOL_ENTRY_SIZE: u64 = 24;
/// Size of a `DT_HASH` / `DT_GNU_HASH` word.
const HASH_WORD_SIZE: u64 = 4;
/// Size of a `DT_GNU_HASH` Bloom filter word on ELF64.
const BLOOM_WORD_SIZE: u64 = 8;

/// Why an ELF file was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElfError {
    /// The file ends before `what` does.
    Truncated {
        /// The structure that is cut short.
        what: &'static str,
    },
    /// No ELF magic.
    NotElf,
    /// Not ELFCLASS64.
    NotElf64 {
        /// `e_ident[EI_CLASS]`.
        class: u8,
    },
    /// Not little-endian.
    NotLittleEndian,
    /// `e_ident[EI_VERSION]` is not `EV_CURRENT`.
    UnsupportedElfVersion {
        /// The version byte.
        found: u8,
    },
    /// `e_type` is not `ET_DYN`.
    NotSharedObject {
        /// `e_type`.
        found: u16,
    },
    /// `e_machine` is not `EM_RISCV`.
    WrongMachine {
        /// `e_machine`.
        found: u16,
    },
    /// A file-header field has an impossible value.
    BadHeader {
        /// Which field.
        what: &'static str,
    },
    /// A `PT_LOAD` segment is malformed.
    BadSegment {
        /// Its index among the program headers.
        index: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// A `PT_LOAD` segment's memory size exceeds the caller's limit.
    SegmentTooLarge {
        /// Its index among the program headers.
        index: usize,
        /// `p_memsz`.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The page-rounded span of all segments exceeds the caller's limit.
    ImageTooLarge {
        /// The span in bytes.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A segment asks to be both writable and executable (W^X).
    WritableAndExecutable {
        /// Its index among the program headers.
        index: usize,
    },
    /// Two `PT_LOAD` segments share a page or are out of address order.
    SegmentsOverlap {
        /// Program-header index of the earlier segment.
        first: usize,
        /// Program-header index of the later segment.
        second: usize,
    },
    /// No `PT_LOAD` segment with a non-zero memory size.
    NoLoadableSegments,
    /// A program header type the loader cannot honour (`PT_INTERP`, `PT_TLS`).
    UnsupportedSegment {
        /// `p_type`.
        kind: u32,
    },
    /// No `PT_DYNAMIC` segment.
    MissingDynamic,
    /// The dynamic table is malformed.
    BadDynamic {
        /// What is wrong.
        what: &'static str,
    },
    /// A dynamic tag the loader cannot honour (`DT_NEEDED`, `DT_REL`, `DT_RELR`,
    /// initialisers and finalisers).
    UnsupportedDynamicTag {
        /// `d_tag`.
        tag: i64,
    },
    /// A dynamic-table address is not backed by file bytes of a `PT_LOAD` segment.
    AddressNotInFile {
        /// The table it points at.
        what: &'static str,
        /// The link-time address.
        address: u64,
    },
    /// A dynamic symbol is malformed.
    BadSymbol {
        /// Its index in the dynamic symbol table.
        index: u32,
        /// What is wrong.
        what: &'static str,
    },
    /// A relocation type other than `R_RISCV_RELATIVE`, `R_RISCV_64`,
    /// `R_RISCV_JUMP_SLOT` (or `R_RISCV_NONE`).
    UnsupportedRelocation {
        /// `r_type`.
        kind: u32,
        /// `r_offset` (link-time address of the target).
        offset: u64,
    },
    /// A relocation's 8-byte target is not inside a loaded segment.
    RelocationOutOfImage {
        /// `r_offset`.
        offset: u64,
    },
    /// A relocation names a symbol that does not exist, or names one when its type uses
    /// none (or none when its type needs one).
    BadRelocationSymbol {
        /// `r_offset`.
        offset: u64,
        /// The symbol index.
        symbol: u32,
    },
}

impl fmt::Display for ElfError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElfError::Truncated { what } => write!(formatter, "ELF truncated in the {what}"),
            ElfError::NotElf => write!(formatter, "not an ELF file"),
            ElfError::NotElf64 { class } => write!(formatter, "not ELF64 (class {class})"),
            ElfError::NotLittleEndian => write!(formatter, "ELF is not little-endian"),
            ElfError::UnsupportedElfVersion { found } => {
                write!(formatter, "ELF version {found} unsupported")
            }
            ElfError::NotSharedObject { found } => {
                write!(
                    formatter,
                    "ELF type {found} is not a shared object (ET_DYN)"
                )
            }
            ElfError::WrongMachine { found } => {
                write!(formatter, "ELF machine {found} is not RISC-V")
            }
            ElfError::BadHeader { what } => write!(formatter, "bad ELF header: {what}"),
            ElfError::BadSegment { index, what } => {
                write!(formatter, "bad segment {index}: {what}")
            }
            ElfError::SegmentTooLarge { index, size, max } => {
                write!(
                    formatter,
                    "segment {index} is {size} bytes, at most {max} allowed"
                )
            }
            ElfError::ImageTooLarge { size, max } => {
                write!(formatter, "image spans {size} bytes, at most {max} allowed")
            }
            ElfError::WritableAndExecutable { index } => {
                write!(formatter, "segment {index} is writable and executable")
            }
            ElfError::SegmentsOverlap { first, second } => {
                write!(
                    formatter,
                    "segments {first} and {second} overlap or share a page"
                )
            }
            ElfError::NoLoadableSegments => write!(formatter, "no loadable segment"),
            ElfError::UnsupportedSegment { kind } => {
                write!(formatter, "unsupported segment type {kind:#x}")
            }
            ElfError::MissingDynamic => write!(formatter, "no PT_DYNAMIC segment"),
            ElfError::BadDynamic { what } => write!(formatter, "bad dynamic table: {what}"),
            ElfError::UnsupportedDynamicTag { tag } => {
                write!(formatter, "unsupported dynamic tag {tag:#x}")
            }
            ElfError::AddressNotInFile { what, address } => {
                write!(
                    formatter,
                    "{what} at {address:#x} is not in a loaded part of the file"
                )
            }
            ElfError::BadSymbol { index, what } => {
                write!(formatter, "bad dynamic symbol {index}: {what}")
            }
            ElfError::UnsupportedRelocation { kind, offset } => {
                write!(
                    formatter,
                    "unsupported relocation type {kind} at {offset:#x}"
                )
            }
            ElfError::RelocationOutOfImage { offset } => {
                write!(
                    formatter,
                    "relocation at {offset:#x} is outside the loaded segments"
                )
            }
            ElfError::BadRelocationSymbol { offset, symbol } => {
                write!(
                    formatter,
                    "relocation at {offset:#x} has bad symbol index {symbol}"
                )
            }
        }
    }
}

impl core::error::Error for ElfError {}

/// Access rights of a segment or mapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Permissions {
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub execute: bool,
}

impl Permissions {
    /// Read-only.
    pub const READ: Permissions = Permissions {
        read: true,
        write: false,
        execute: false,
    };
    /// Read and write.
    pub const READ_WRITE: Permissions = Permissions {
        read: true,
        write: true,
        execute: false,
    };
    /// Read and execute.
    pub const READ_EXECUTE: Permissions = Permissions {
        read: true,
        write: false,
        execute: true,
    };

    fn from_flags(flags: u32) -> Permissions {
        Permissions {
            read: flags & elf::PF_R.0 != 0,
            write: flags & elf::PF_W.0 != 0,
            execute: flags & elf::PF_X.0 != 0,
        }
    }
}

impl fmt::Display for Permissions {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = |set: bool, letter: char| if set { letter } else { '-' };
        write!(
            formatter,
            "{}{}{}",
            flag(self.read, 'r'),
            flag(self.write, 'w'),
            flag(self.execute, 'x')
        )
    }
}

/// One `PT_LOAD` segment, as found in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Index among the program headers (as used in errors).
    pub program_header: usize,
    /// Link-time address of its first byte (`p_vaddr`).
    pub link_address: u64,
    /// Offset of its first byte within the image.
    pub image_offset: u64,
    /// Where its initialised bytes start in the file (`p_offset`).
    pub file_offset: u64,
    /// Initialised bytes (`p_filesz`); the rest up to `memory_size` is zero (bss).
    pub file_size: u64,
    /// Bytes in memory (`p_memsz`).
    pub memory_size: u64,
    /// Permissions from `p_flags`.
    pub permissions: Permissions,
}

/// A page-aligned region of the image and the permissions to map it with once relocated.
///
/// Mappings are disjoint and in address order; pages of the image span they do not
/// cover hold no segment and should stay unmapped. Pages inside `PT_GNU_RELRO` are
/// read-only here: they are written only by relocation, before mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Virtual address of the first byte: link-time in [`ElfObject::mappings`], runtime
    /// in [`crate::LoadedImage::mappings`].
    pub address: u64,
    /// Offset of the first byte within the image buffer (page-aligned).
    pub image_offset: u64,
    /// Size in bytes (a multiple of [`PAGE_SIZE`]).
    pub size: u64,
    /// How to map it.
    pub permissions: Permissions,
}

/// What a dynamic symbol is, from `st_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    /// `STT_FUNC`: code.
    Function,
    /// `STT_OBJECT`: data.
    Object,
    /// `STT_NOTYPE`, `STT_SECTION`, `STT_FILE` (imports are usually untyped).
    Untyped,
}

/// Where a dynamic symbol's value comes from, from `st_shndx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Definition {
    /// `SHN_UNDEF`: an import, resolved by the caller's resolver.
    Undefined,
    /// Defined in this object: the value is a link-time address inside the image.
    Defined,
    /// `SHN_ABS`: the value is an absolute number, not relocated.
    Absolute,
}

/// A dynamic symbol's binding, from `st_info`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binding {
    /// `STB_LOCAL`: not visible outside the object.
    Local,
    /// `STB_GLOBAL`.
    Global,
    /// `STB_WEAK`.
    Weak,
}

/// One entry of the dynamic symbol table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynamicSymbol<'data> {
    /// Index in the table.
    pub index: u32,
    /// The name (UTF-8, borrowed from the file).
    pub name: &'data str,
    /// `st_value`: a link-time address for [`Definition::Defined`].
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `st_type`.
    pub kind: SymbolKind,
    /// `st_bind`.
    pub binding: Binding,
    /// `st_shndx`.
    pub definition: Definition,
}

impl DynamicSymbol<'_> {
    /// Whether another module may link against it: defined (or absolute) and global or weak.
    pub fn is_export(&self) -> bool {
        self.definition != Definition::Undefined && self.binding != Binding::Local
    }

    /// Whether it must be supplied by the resolver.
    pub fn is_import(&self) -> bool {
        self.index != 0 && self.definition == Definition::Undefined
    }
}

/// One validated dynamic relocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// Its type.
    pub kind: RelocationKind,
    /// Offset of the 8-byte target within the image.
    pub image_offset: u64,
    /// Index of its symbol in the dynamic symbol table (0: none).
    pub symbol: u32,
    /// `r_addend`.
    pub addend: i64,
}

/// A validated RISC-V ELF shared object, ready for [`crate::load_into`].
#[derive(Clone, Debug)]
pub struct ElfObject<'data> {
    data: &'data [u8],
    image_start: u64,
    image_size: u64,
    alignment: u64,
    segments: Vec<Segment>,
    mappings: Vec<Mapping>,
    symbols: Vec<DynamicSymbol<'data>>,
    relocations: Vec<Relocation>,
}

impl<'data> ElfObject<'data> {
    /// Validates `data` as a loadable shared object whose image (page-rounded span of its
    /// segments) is at most `max_image_size` bytes. See the module documentation for the
    /// checks; each failure is a specific [`ElfError`].
    pub fn parse(data: &'data [u8], max_image_size: u64) -> Result<ElfObject<'data>, ElfError> {
        let header = parse_file_header(data)?;
        let program_headers =
            header
                .program_headers(ENDIAN, data)
                .map_err(|_| ElfError::Truncated {
                    what: "program headers",
                })?;
        let layout = Layout::from_program_headers(data, program_headers, max_image_size)?;
        let dynamic = DynamicInfo::read(data, &layout)?;
        let symbols = read_symbols(data, &layout, &dynamic)?;
        let relocations = read_relocations(data, &layout, &dynamic, symbols.len())?;
        let mappings = layout.mappings();
        Ok(ElfObject {
            data,
            image_start: layout.image_start,
            image_size: layout.image_size,
            alignment: layout.alignment,
            segments: layout.segments,
            mappings,
            symbols,
            relocations,
        })
    }

    /// The file the object was parsed from.
    pub fn data(&self) -> &'data [u8] {
        self.data
    }

    /// Link-time address of the image's first byte (page-aligned; 0 for lld output).
    pub fn image_start(&self) -> u64 {
        self.image_start
    }

    /// Size of the image buffer [`crate::load_into`] needs (a multiple of [`PAGE_SIZE`]).
    pub fn image_size(&self) -> u64 {
        self.image_size
    }

    /// Alignment the load base must have: the largest `p_align`, at least [`PAGE_SIZE`].
    pub fn load_alignment(&self) -> u64 {
        self.alignment
    }

    /// The `PT_LOAD` segments, in address order (empty ones left out).
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The page-granular mappings at link-time addresses (see [`Mapping`]).
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// The whole dynamic symbol table (index 0, the null symbol, included).
    pub fn symbols(&self) -> &[DynamicSymbol<'data>] {
        &self.symbols
    }

    /// The undefined symbols the resolver must supply.
    pub fn imports(&self) -> impl Iterator<Item = &DynamicSymbol<'data>> {
        self.symbols.iter().filter(|symbol| symbol.is_import())
    }

    /// The defined global or weak symbols.
    pub fn exports(&self) -> impl Iterator<Item = &DynamicSymbol<'data>> {
        self.symbols.iter().filter(|symbol| symbol.is_export())
    }

    /// The exported symbol called `name`, if any.
    pub fn export(&self, name: &str) -> Option<&DynamicSymbol<'data>> {
        self.exports().find(|symbol| symbol.name == name)
    }

    /// Every dynamic relocation (`DT_RELA` then `DT_JMPREL`), validated.
    pub fn relocations(&self) -> &[Relocation] {
        &self.relocations
    }
}

/// Checks the identification bytes and the file header fields we rely on.
fn parse_file_header(data: &[u8]) -> Result<&FileHeader64<LittleEndian>, ElfError> {
    let ident = data.get(..FILE_HEADER_SIZE).ok_or(ElfError::Truncated {
        what: "file header",
    })?;
    if ident[..elf::ELFMAG.len()] != elf::ELFMAG {
        return Err(ElfError::NotElf);
    }
    let header = FileHeader64::<LittleEndian>::parse(data).map_err(|_| {
        let class = ident[4];
        if class != elf::ELFCLASS64.0 {
            ElfError::NotElf64 { class }
        } else if ident[5] != elf::ELFDATA2LSB.0 {
            ElfError::NotLittleEndian
        } else {
            ElfError::UnsupportedElfVersion { found: ident[6] }
        }
    })?;
    // `parse` accepts either byte order; we read with a fixed little-endian `ENDIAN`.
    if header.e_ident.data != elf::ELFDATA2LSB {
        return Err(ElfError::NotLittleEndian);
    }
    let file_type = header.e_type(ENDIAN);
    if file_type != elf::ET_DYN {
        return Err(ElfError::NotSharedObject { found: file_type.0 });
    }
    let machine = header.e_machine(ENDIAN);
    if machine != elf::EM_RISCV {
        return Err(ElfError::WrongMachine { found: machine.0 });
    }
    if header.e_phoff(ENDIAN) != 0 && header.e_phentsize(ENDIAN) != PROGRAM_HEADER_SIZE {
        return Err(ElfError::BadHeader {
            what: "e_phentsize",
        });
    }
    Ok(header)
}

/// The loadable segments and the image they span.
struct Layout {
    segments: Vec<Segment>,
    image_start: u64,
    image_size: u64,
    alignment: u64,
    /// `PT_DYNAMIC`: file offset and size.
    dynamic: Option<(u64, u64)>,
    /// `PT_GNU_RELRO`: link-time address range.
    relro: Option<Range<u64>>,
}

impl Layout {
    fn from_program_headers(
        data: &[u8],
        program_headers: &[ProgramHeader64<LittleEndian>],
        max_image_size: u64,
    ) -> Result<Layout, ElfError> {
        let mut segments: Vec<Segment> = Vec::new();
        let mut dynamic = None;
        let mut relro = None;
        let mut alignment = PAGE_SIZE;
        for (index, program_header) in program_headers.iter().enumerate() {
            let kind = program_header.p_type(ENDIAN);
            if kind == elf::PT_LOAD {
                let Some(segment) =
                    check_load_segment(data, index, program_header, max_image_size)?
                else {
                    continue;
                };
                alignment = alignment.max(program_header.p_align(ENDIAN));
                if let Some(previous) = segments.last() {
                    // Compare whole pages: each page gets exactly one set of permissions.
                    let previous_end = page_end(previous.link_address, previous.memory_size)
                        .ok_or(ElfError::BadSegment {
                            index: previous.program_header,
                            what: "end overflows",
                        })?;
                    if page_start(segment.link_address) < previous_end {
                        return Err(ElfError::SegmentsOverlap {
                            first: previous.program_header,
                            second: index,
                        });
                    }
                }
                segments.push(segment);
            } else if kind == elf::PT_DYNAMIC {
                if dynamic.is_some() {
                    return Err(ElfError::BadDynamic {
                        what: "two PT_DYNAMIC segments",
                    });
                }
                dynamic = Some((
                    program_header.p_offset(ENDIAN),
                    program_header.p_filesz(ENDIAN),
                ));
            } else if kind == elf::PT_GNU_RELRO {
                let start = program_header.p_vaddr(ENDIAN);
                let end = start.checked_add(program_header.p_memsz(ENDIAN)).ok_or(
                    ElfError::BadSegment {
                        index,
                        what: "PT_GNU_RELRO end overflows",
                    },
                )?;
                relro = Some(start..end);
            } else if kind == elf::PT_INTERP || kind == elf::PT_TLS {
                return Err(ElfError::UnsupportedSegment { kind: kind.0 });
            }
            // Other types (PT_PHDR, PT_NOTE, PT_GNU_STACK, PT_RISCV_ATTRIBUTES, ...) carry
            // nothing the loader needs.
        }
        let (first, last) = match (segments.first(), segments.last()) {
            (Some(first), Some(last)) => (first, last),
            _ => return Err(ElfError::NoLoadableSegments),
        };
        let image_start = page_start(first.link_address);
        let image_end =
            page_end(last.link_address, last.memory_size).ok_or(ElfError::BadSegment {
                index: last.program_header,
                what: "end overflows",
            })?;
        let image_size = image_end - image_start; // segments are in order, so end > start
        if image_size > max_image_size {
            return Err(ElfError::ImageTooLarge {
                size: image_size,
                max: max_image_size,
            });
        }
        for segment in &mut segments {
            segment.image_offset = segment.link_address - image_start;
        }
        Ok(Layout {
            segments,
            image_start,
            image_size,
            alignment,
            dynamic,
            relro,
        })
    }

    /// The file bytes backing `length` bytes at link-time `address`, which must lie in the
    /// initialised part of one `PT_LOAD` segment.
    fn file_bytes<'data>(
        &self,
        data: &'data [u8],
        address: u64,
        length: u64,
        what: &'static str,
    ) -> Result<&'data [u8], ElfError> {
        let not_in_file = ElfError::AddressNotInFile { what, address };
        let end = address
            .checked_add(length)
            .ok_or_else(|| not_in_file.clone())?;
        let segment = self
            .segments
            .iter()
            .find(|segment| {
                address >= segment.link_address && end - segment.link_address <= segment.file_size
            })
            .ok_or_else(|| not_in_file.clone())?;
        let offset = segment.file_offset + (address - segment.link_address); // within file_size
        data.read_bytes_at(offset, length).map_err(|_| not_in_file)
    }

    /// Whether the 8 bytes at link-time `address` lie inside one segment's memory.
    fn contains_word(&self, address: u64) -> bool {
        let Some(end) = address.checked_add(WORD_SIZE) else {
            return false;
        };
        self.segments.iter().any(|segment| {
            address >= segment.link_address && end - segment.link_address <= segment.memory_size
        })
    }

    /// Whether `address` lies inside the image span.
    fn in_image(&self, address: u64) -> bool {
        address >= self.image_start && address - self.image_start < self.image_size
    }

    /// Page-granular mappings; `PT_GNU_RELRO` pages of writable segments become read-only.
    fn mappings(&self) -> Vec<Mapping> {
        let mut mappings: Vec<Mapping> = Vec::new();
        for segment in &self.segments {
            let start = page_start(segment.link_address);
            // Cannot overflow: checked in `from_program_headers`.
            let end = page_end(segment.link_address, segment.memory_size).unwrap_or(start);
            let read_only_pages = match &self.relro {
                Some(relro) if segment.permissions.write => {
                    self.relro_pages(segment, relro, start..end)
                }
                _ => start..start,
            };
            let mut push = |range: Range<u64>, permissions: Permissions| {
                if range.start < range.end {
                    mappings.push(Mapping {
                        address: range.start,
                        image_offset: range.start - self.image_start,
                        size: range.end - range.start,
                        permissions,
                    });
                }
            };
            let read_only = Permissions {
                write: false,
                ..segment.permissions
            };
            push(start..read_only_pages.start, segment.permissions);
            push(read_only_pages.clone(), read_only);
            push(read_only_pages.end..end, segment.permissions);
        }
        mappings
    }

    /// The whole pages of `pages` (a segment's page range) that hold only RELRO bytes of
    /// this segment (no other segment shares its pages, see `from_program_headers`).
    fn relro_pages(&self, segment: &Segment, relro: &Range<u64>, pages: Range<u64>) -> Range<u64> {
        let segment_end = segment.link_address.saturating_add(segment.memory_size);
        let start = relro.start.max(segment.link_address);
        let end = relro.end.min(segment_end);
        if start >= end {
            return pages.start..pages.start;
        }
        // A partial page at either end may be kept read-only only if the segment has no
        // non-RELRO bytes on it.
        let first = if start == segment.link_address {
            page_start(start)
        } else {
            page_up(start)
        };
        let last = if end == segment_end {
            page_end(end, 0).unwrap_or(pages.end)
        } else {
            page_start(end)
        };
        let first = first.clamp(pages.start, pages.end);
        let last = last.clamp(first, pages.end);
        first..last
    }
}

/// Validates one `PT_LOAD`; `None` for an empty one (nothing to load).
fn check_load_segment(
    data: &[u8],
    index: usize,
    program_header: &ProgramHeader64<LittleEndian>,
    max_image_size: u64,
) -> Result<Option<Segment>, ElfError> {
    let bad = |what| ElfError::BadSegment { index, what };
    let link_address = program_header.p_vaddr(ENDIAN);
    let file_offset = program_header.p_offset(ENDIAN);
    let file_size = program_header.p_filesz(ENDIAN);
    let memory_size = program_header.p_memsz(ENDIAN);
    let align = program_header.p_align(ENDIAN);
    let permissions = Permissions::from_flags(program_header.p_flags(ENDIAN).0);
    if file_size > memory_size {
        return Err(bad("p_filesz exceeds p_memsz"));
    }
    if memory_size > max_image_size {
        return Err(ElfError::SegmentTooLarge {
            index,
            size: memory_size,
            max: max_image_size,
        });
    }
    let file_end = file_offset
        .checked_add(file_size)
        .ok_or(bad("file range overflows"))?;
    if file_end > data.len() as u64 {
        return Err(ElfError::Truncated {
            what: "segment data",
        });
    }
    if memory_size == 0 {
        return Ok(None);
    }
    if page_end(link_address, memory_size).is_none() {
        return Err(bad("address range overflows"));
    }
    if align > 1 {
        if !align.is_power_of_two() || align > MAX_SEGMENT_ALIGNMENT {
            return Err(bad("p_align is not a power of two up to 2 MiB"));
        }
        if link_address % align != file_offset % align {
            return Err(bad("p_vaddr and p_offset disagree modulo p_align"));
        }
    }
    if permissions.write && permissions.execute {
        return Err(ElfError::WritableAndExecutable { index });
    }
    Ok(Some(Segment {
        program_header: index,
        link_address,
        image_offset: 0, // set once the image start is known
        file_offset,
        file_size,
        memory_size,
        permissions,
    }))
}

const fn page_start(address: u64) -> u64 {
    address & !(PAGE_SIZE - 1)
}

/// The page-aligned end of `length` bytes at `address`, if it does not overflow.
const fn page_end(address: u64, length: u64) -> Option<u64> {
    match address.checked_add(length) {
        Some(end) => end.checked_next_multiple_of(PAGE_SIZE),
        None => None,
    }
}

/// `address` rounded up to a page (saturating at the last page).
fn page_up(address: u64) -> u64 {
    address
        .checked_next_multiple_of(PAGE_SIZE)
        .unwrap_or(page_start(u64::MAX))
}

/// The dynamic-table entries the loader uses.
#[derive(Default)]
struct DynamicInfo {
    rela: Option<u64>,
    rela_size: Option<u64>,
    jump_relocations: Option<u64>,
    jump_relocations_size: Option<u64>,
    symbol_table: Option<u64>,
    string_table: Option<u64>,
    string_table_size: Option<u64>,
    hash: Option<u64>,
    gnu_hash: Option<u64>,
}

impl DynamicInfo {
    fn read(data: &[u8], layout: &Layout) -> Result<DynamicInfo, ElfError> {
        let (offset, size) = layout.dynamic.ok_or(ElfError::MissingDynamic)?;
        let count = (size / DYNAMIC_ENTRY_SIZE) as usize;
        let entries: &[Dyn64<LittleEndian>] =
            data.read_slice_at(offset, count)
                .map_err(|_| ElfError::Truncated {
                    what: "dynamic table",
                })?;
        let mut info = DynamicInfo::default();
        let mut terminated = false;
        for entry in entries {
            let tag = entry.d_tag(ENDIAN);
            let value = entry.d_val(ENDIAN);
            let slot = match tag {
                elf::DT_NULL => {
                    terminated = true;
                    break;
                }
                elf::DT_RELA => &mut info.rela,
                elf::DT_RELASZ => &mut info.rela_size,
                elf::DT_JMPREL => &mut info.jump_relocations,
                elf::DT_PLTRELSZ => &mut info.jump_relocations_size,
                elf::DT_SYMTAB => &mut info.symbol_table,
                elf::DT_STRTAB => &mut info.string_table,
                elf::DT_STRSZ => &mut info.string_table_size,
                elf::DT_HASH => &mut info.hash,
                elf::DT_GNU_HASH => &mut info.gnu_hash,
                elf::DT_RELAENT => {
                    check_entry_size(value, RELA_ENTRY_SIZE, "DT_RELAENT is not 24")?;
                    continue;
                }
                elf::DT_SYMENT => {
                    check_entry_size(value, SYMBOL_ENTRY_SIZE, "DT_SYMENT is not 24")?;
                    continue;
                }
                elf::DT_PLTREL => {
                    if value != elf::DT_RELA.0 as u64 {
                        return Err(ElfError::BadDynamic {
                            what: "DT_PLTREL is not DT_RELA",
                        });
                    }
                    continue;
                }
                elf::DT_NEEDED
                | elf::DT_REL
                | elf::DT_RELSZ
                | elf::DT_RELENT
                | elf::DT_RELR
                | elf::DT_RELRSZ
                | elf::DT_INIT
                | elf::DT_FINI
                | elf::DT_INIT_ARRAY
                | elf::DT_FINI_ARRAY
                | elf::DT_PREINIT_ARRAY => {
                    return Err(ElfError::UnsupportedDynamicTag { tag: tag.0 });
                }
                // DT_FLAGS, DT_TEXTREL, DT_RELACOUNT, DT_PLTGOT, DT_SONAME, versioning, ...:
                // nothing the loader needs.
                _ => continue,
            };
            if slot.replace(value).is_some() {
                return Err(ElfError::BadDynamic {
                    what: "a tag appears twice",
                });
            }
        }
        if !terminated {
            return Err(ElfError::BadDynamic {
                what: "no DT_NULL terminator",
            });
        }
        Ok(info)
    }
}

fn check_entry_size(value: u64, expected: u64, what: &'static str) -> Result<(), ElfError> {
    if value == expected {
        Ok(())
    } else {
        Err(ElfError::BadDynamic { what })
    }
}

/// A table given by an address tag and a size tag: both or neither.
fn table_range(
    address: Option<u64>,
    size: Option<u64>,
    what: &'static str,
) -> Result<Option<(u64, u64)>, ElfError> {
    match (address, size) {
        (Some(address), Some(size)) => Ok(Some((address, size))),
        (None, None) => Ok(None),
        _ => Err(ElfError::BadDynamic { what }),
    }
}

/// The number of dynamic symbols, from `DT_HASH` (`nchain`) or else `DT_GNU_HASH`.
fn symbol_count(data: &[u8], layout: &Layout, dynamic: &DynamicInfo) -> Result<u64, ElfError> {
    if let Some(hash) = dynamic.hash {
        let words = layout.file_bytes(data, hash, 2 * HASH_WORD_SIZE, "DT_HASH")?;
        return Ok(u64::from(word32(words, 1)));
    }
    let Some(gnu_hash) = dynamic.gnu_hash else {
        return Err(ElfError::BadDynamic {
            what: "DT_SYMTAB without DT_HASH or DT_GNU_HASH",
        });
    };
    // Header: nbuckets, symoffset, bloom_size, bloom_shift; then the Bloom filter, the
    // buckets, and the chains of hash values (the last of a chain has bit 0 set).
    let header = layout.file_bytes(data, gnu_hash, 4 * HASH_WORD_SIZE, "DT_GNU_HASH")?;
    let bucket_count = u64::from(word32(header, 0));
    let symbol_offset = u64::from(word32(header, 1));
    let bloom_size = u64::from(word32(header, 2));
    let buckets_address = bloom_size
        .checked_mul(BLOOM_WORD_SIZE)
        .and_then(|bloom_bytes| gnu_hash.checked_add(4 * HASH_WORD_SIZE + bloom_bytes))
        .ok_or(ElfError::BadDynamic {
            what: "DT_GNU_HASH overflows",
        })?;
    let buckets_bytes = bucket_count
        .checked_mul(HASH_WORD_SIZE)
        .ok_or(ElfError::BadDynamic {
            what: "DT_GNU_HASH overflows",
        })?;
    let buckets = layout.file_bytes(data, buckets_address, buckets_bytes, "DT_GNU_HASH buckets")?;
    let highest = buckets
        .chunks_exact(4)
        .map(|bucket| word32(bucket, 0))
        .max()
        .unwrap_or(0);
    let highest = u64::from(highest);
    if highest < symbol_offset {
        // Every bucket is empty: only the unhashed symbols before `symoffset` exist.
        return Ok(symbol_offset);
    }
    let chains_address = buckets_address + buckets_bytes; // file_bytes checked the range
    // Walk the chain holding the highest symbol to its end; each step reads further into
    // the file, so a missing terminator ends in `AddressNotInFile`.
    let mut index = highest;
    loop {
        let chain_address = (index - symbol_offset)
            .checked_mul(HASH_WORD_SIZE)
            .and_then(|offset| chains_address.checked_add(offset))
            .ok_or(ElfError::BadDynamic {
                what: "DT_GNU_HASH overflows",
            })?;
        let chain = layout.file_bytes(data, chain_address, HASH_WORD_SIZE, "DT_GNU_HASH chains")?;
        if word32(chain, 0) & 1 == 1 {
            return index.checked_add(1).ok_or(ElfError::BadDynamic {
                what: "DT_GNU_HASH overflows",
            });
        }
        index += 1; // cannot overflow: the address computation above would fail first
    }
}

/// The little-endian 32-bit word `index` of `bytes` (callers read whole words).
fn word32(bytes: &[u8], index: usize) -> u32 {
    let mut word = [0; 4];
    if let Some(source) = bytes.get(index * 4..index * 4 + 4) {
        word.copy_from_slice(source);
    }
    u32::from_le_bytes(word)
}

fn read_symbols<'data>(
    data: &'data [u8],
    layout: &Layout,
    dynamic: &DynamicInfo,
) -> Result<Vec<DynamicSymbol<'data>>, ElfError> {
    let Some(symbol_table) = dynamic.symbol_table else {
        return Ok(Vec::new());
    };
    let (string_address, string_size) = table_range(
        dynamic.string_table,
        dynamic.string_table_size,
        "DT_STRTAB and DT_STRSZ must come together",
    )?
    .ok_or(ElfError::BadDynamic {
        what: "DT_SYMTAB without DT_STRTAB",
    })?;
    let strings = layout.file_bytes(data, string_address, string_size, "DT_STRTAB")?;
    let count = symbol_count(data, layout, dynamic)?;
    let table_size = count
        .checked_mul(SYMBOL_ENTRY_SIZE)
        .ok_or(ElfError::BadDynamic {
            what: "symbol table size overflows",
        })?;
    let table_bytes = layout.file_bytes(data, symbol_table, table_size, "DT_SYMTAB")?;
    let entries: &[Sym64<LittleEndian>] = table_bytes
        .read_slice_at(0, count as usize) // fits: the bytes exist
        .map_err(|_| ElfError::Truncated {
            what: "dynamic symbol table",
        })?;
    let mut symbols = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let index = u32::try_from(index).map_err(|_| ElfError::BadDynamic {
            what: "too many symbols",
        })?;
        symbols.push(check_symbol(index, entry, strings, layout)?);
    }
    Ok(symbols)
}

fn check_symbol<'data>(
    index: u32,
    entry: &Sym64<LittleEndian>,
    strings: &'data [u8],
    layout: &Layout,
) -> Result<DynamicSymbol<'data>, ElfError> {
    let bad = |what| ElfError::BadSymbol { index, what };
    let name_offset = entry.st_name(ENDIAN) as usize;
    let name_bytes = strings
        .get(name_offset..)
        .ok_or(bad("name outside DT_STRTAB"))?;
    let name_length = name_bytes
        .iter()
        .position(|byte| *byte == 0)
        .ok_or(bad("name not terminated"))?;
    let name =
        core::str::from_utf8(&name_bytes[..name_length]).map_err(|_| bad("name is not UTF-8"))?;
    let symbol_type = entry.st_type();
    let kind = if symbol_type == elf::STT_FUNC {
        SymbolKind::Function
    } else if symbol_type == elf::STT_OBJECT {
        SymbolKind::Object
    } else if symbol_type == elf::STT_NOTYPE
        || symbol_type == elf::STT_SECTION
        || symbol_type == elf::STT_FILE
    {
        SymbolKind::Untyped
    } else {
        // STT_TLS, STT_GNU_IFUNC, STT_COMMON and the like: nothing the kernel can give.
        return Err(bad("unsupported symbol type (TLS, IFUNC, common)"));
    };
    let symbol_binding = entry.st_bind();
    let binding = if symbol_binding == elf::STB_LOCAL {
        Binding::Local
    } else if symbol_binding == elf::STB_GLOBAL {
        Binding::Global
    } else if symbol_binding == elf::STB_WEAK {
        Binding::Weak
    } else {
        return Err(bad("unsupported binding"));
    };
    let section = entry.st_shndx(ENDIAN);
    let value = entry.st_value(ENDIAN);
    let definition = if section == elf::SHN_UNDEF {
        Definition::Undefined
    } else if section == elf::SHN_ABS {
        Definition::Absolute
    } else if section == elf::SHN_COMMON {
        return Err(bad("common symbol"));
    } else {
        // Defined relative to a section; section headers are not read, so only the address
        // is checked.
        if index != 0 && !layout.in_image(value) {
            return Err(bad("defined outside the image"));
        }
        Definition::Defined
    };
    Ok(DynamicSymbol {
        index,
        name,
        value,
        size: entry.st_size(ENDIAN),
        kind,
        binding,
        definition,
    })
}

fn read_relocations(
    data: &[u8],
    layout: &Layout,
    dynamic: &DynamicInfo,
    symbol_count: usize,
) -> Result<Vec<Relocation>, ElfError> {
    let tables = [
        table_range(
            dynamic.rela,
            dynamic.rela_size,
            "DT_RELA and DT_RELASZ must come together",
        )?,
        table_range(
            dynamic.jump_relocations,
            dynamic.jump_relocations_size,
            "DT_JMPREL and DT_PLTRELSZ must come together",
        )?,
    ];
    let mut relocations = Vec::new();
    for (address, size) in tables.into_iter().flatten() {
        if size % RELA_ENTRY_SIZE != 0 {
            return Err(ElfError::BadDynamic {
                what: "relocation table size is not a multiple of 24",
            });
        }
        let bytes = layout.file_bytes(data, address, size, "relocation table")?;
        let entries: &[Rela64<LittleEndian>] = bytes
            .read_slice_at(0, (size / RELA_ENTRY_SIZE) as usize)
            .map_err(|_| ElfError::Truncated {
                what: "relocation table",
            })?;
        for entry in entries {
            relocations.push(check_relocation(entry, layout, symbol_count)?);
        }
    }
    Ok(relocations)
}

fn check_relocation(
    entry: &Rela64<LittleEndian>,
    layout: &Layout,
    symbol_count: usize,
) -> Result<Relocation, ElfError> {
    let offset = entry.r_offset(ENDIAN);
    let relocation_type = entry.r_type(ENDIAN, false).0;
    let symbol = entry.r_sym(ENDIAN, false);
    let kind =
        RelocationKind::from_type(relocation_type).ok_or(ElfError::UnsupportedRelocation {
            kind: relocation_type,
            offset,
        })?;
    if kind != RelocationKind::None && !layout.contains_word(offset) {
        return Err(ElfError::RelocationOutOfImage { offset });
    }
    let symbol_valid = match kind {
        RelocationKind::None => true,
        RelocationKind::Relative => symbol == 0,
        RelocationKind::Absolute64 => (symbol as usize) < symbol_count,
        RelocationKind::JumpSlot => symbol != 0 && (symbol as usize) < symbol_count,
    };
    if !symbol_valid {
        return Err(ElfError::BadRelocationSymbol { offset, symbol });
    }
    Ok(Relocation {
        kind,
        image_offset: offset.wrapping_sub(layout.image_start), // in the image: checked above
        symbol,
        addend: entry.r_addend(ENDIAN),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_arithmetic() {
        assert_eq!(page_start(0x24e0), 0x2000);
        assert_eq!(page_end(0x24e0, 0xb20), Some(0x3000));
        assert_eq!(page_end(0x24e0, 0xb21), Some(0x4000));
        assert_eq!(page_end(u64::MAX - 10, 5), None);
        assert_eq!(page_end(u64::MAX - 10, 20), None);
        assert_eq!(page_up(0x1001), 0x2000);
        assert_eq!(page_up(u64::MAX), page_start(u64::MAX));
    }

    #[test]
    fn permissions_from_flags_and_display() {
        let flags = elf::PF_R.0 | elf::PF_X.0;
        assert_eq!(Permissions::from_flags(flags), Permissions::READ_EXECUTE);
        assert_eq!(Permissions::READ_WRITE.to_string(), "rw-");
    }

    #[test]
    fn word32_reads_little_endian_and_tolerates_short_input() {
        assert_eq!(word32(&[1, 0, 0, 0, 2, 0, 0, 0], 1), 2);
        assert_eq!(word32(&[1, 2], 0), 0);
    }

    fn layout_with(segments: Vec<Segment>, relro: Option<Range<u64>>) -> Layout {
        Layout {
            segments,
            image_start: 0,
            image_size: 0x4000,
            alignment: PAGE_SIZE,
            dynamic: None,
            relro,
        }
    }

    fn segment(link_address: u64, memory_size: u64, permissions: Permissions) -> Segment {
        Segment {
            program_header: 0,
            link_address,
            image_offset: link_address,
            file_offset: link_address,
            file_size: memory_size,
            memory_size,
            permissions,
        }
    }

    #[test]
    fn relro_pages_become_read_only() {
        // The lld layout: RELRO is a whole segment ending on a page boundary.
        let layout = layout_with(
            vec![
                segment(0x24e0, 0xb20, Permissions::READ_WRITE),
                segment(0x3618, 0x18, Permissions::READ_WRITE),
            ],
            Some(0x24e0..0x3000),
        );
        let mappings = layout.mappings();
        assert_eq!(mappings.len(), 2);
        assert_eq!(
            (
                mappings[0].address,
                mappings[0].size,
                mappings[0].permissions
            ),
            (0x2000, 0x1000, Permissions::READ)
        );
        assert_eq!(
            (
                mappings[1].address,
                mappings[1].size,
                mappings[1].permissions
            ),
            (0x3000, 0x1000, Permissions::READ_WRITE)
        );
    }

    #[test]
    fn relro_sharing_a_page_with_data_stays_writable() {
        // RELRO covers 0x1000..0x2800 of a segment that goes on to 0x3000: the page at
        // 0x2000 also holds writable data.
        let layout = layout_with(
            vec![segment(0x1000, 0x2000, Permissions::READ_WRITE)],
            Some(0x1000..0x2800),
        );
        let mappings = layout.mappings();
        assert_eq!(mappings.len(), 2);
        assert_eq!(
            (
                mappings[0].address,
                mappings[0].size,
                mappings[0].permissions
            ),
            (0x1000, 0x1000, Permissions::READ)
        );
        assert_eq!(
            (
                mappings[1].address,
                mappings[1].size,
                mappings[1].permissions
            ),
            (0x2000, 0x1000, Permissions::READ_WRITE)
        );
    }

    #[test]
    fn file_bytes_only_from_initialised_segment_data() {
        let mut bss = segment(0x1000, 0x100, Permissions::READ_WRITE);
        bss.file_size = 0x10;
        let layout = layout_with(vec![bss], None);
        let data = [7u8; 0x1100];
        assert_eq!(layout.file_bytes(&data, 0x1008, 8, "t").unwrap(), &[7; 8]);
        assert_eq!(
            layout.file_bytes(&data, 0x1010, 8, "t"),
            Err(ElfError::AddressNotInFile {
                what: "t",
                address: 0x1010
            })
        );
        assert!(layout.file_bytes(&data, u64::MAX, 2, "t").is_err());
        assert!(layout.contains_word(0x10f8));
        assert!(!layout.contains_word(0x10f9));
        assert!(!layout.contains_word(u64::MAX - 3));
    }
}
