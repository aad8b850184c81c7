//! Validation of a static RISC-V ELF64 executable, everything checked before a byte is
//! copied into a process.
//!
//! [`Executable::parse`] reads the program headers only (section headers may be
//! stripped) and checks: ELF64, little-endian, `EV_CURRENT`, `EM_RISCV`, `ET_EXEC` (static,
//! linked for a fixed address); each `PT_LOAD` with a non-zero memory size has its file
//! bytes inside the file, `filesz <= memsz`, no address overflow, is not writable *and*
//! executable (W^X), grants some access, lies inside
//! [`IMAGE_REGION`](crate::layout::IMAGE_REGION); the `PT_LOAD`s are in address order on
//! disjoint pages (so each page gets one set of permissions); at most
//! [`MAX_SEGMENTS`](crate::layout::MAX_SEGMENTS) of them, spanning at most
//! [`MAX_IMAGE_SIZE`](crate::layout::MAX_IMAGE_SIZE); the entry point lies in an
//! executable segment. `PT_INTERP`, `PT_DYNAMIC` and `PT_TLS` are refused (no dynamic
//! linking, no thread-local storage); other program headers carry nothing the loader
//! needs. Every arithmetic step is checked: a malformed file yields an
//! [`ExecutableError`], never a panic.
//!
//! A loader that reads a program's pages from its file on demand need not read the file
//! whole: [`Executable::header_length`] says how many of its first bytes hold the ELF and
//! program headers, and [`Executable::parse_headers`] checks those bytes with the file's
//! length, exactly as [`Executable::parse`] checks the whole file.
//!
//! `object` (features `read_core`, `elf`, `unaligned`) supplies the ELF structure
//! definitions and bounds-checked reads; the checks on top of it are ours.

use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use object::elf::{self, FileHeader64, ProgramHeader64};
use object::read::elf::{FileHeader as _, ProgramHeader as _};
use object::LittleEndian;

use crate::layout::{IMAGE_REGION, MAX_IMAGE_SIZE, MAX_SEGMENTS, PAGE_SIZE};

const ENDIAN: LittleEndian = LittleEndian;
/// Size of the ELF64 file header.
const FILE_HEADER_SIZE: usize = 64;
/// Size of an ELF64 program header (`e_phentsize`).
const PROGRAM_HEADER_SIZE: u16 = 56;

/// Why an executable was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutableError {
    /// The file ends inside `what`.
    Truncated {
        /// The structure cut short.
        what: &'static str,
    },
    /// No ELF magic.
    NotElf,
    /// Not ELFCLASS64, not little-endian or not `EV_CURRENT`.
    UnsupportedFormat,
    /// `e_type` is not `ET_EXEC` (position-independent executables are not supported).
    NotStaticExecutable {
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
    /// A program header type the kernel cannot honour (`PT_INTERP`, `PT_DYNAMIC`, `PT_TLS`).
    UnsupportedSegment {
        /// Program-header index.
        index: usize,
        /// `p_type`.
        kind: u32,
    },
    /// A `PT_LOAD` segment is malformed.
    BadSegment {
        /// Program-header index.
        index: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// A segment is both writable and executable.
    WritableAndExecutable {
        /// Program-header index.
        index: usize,
    },
    /// A segment lies (partly) outside the image region.
    OutsideImageRegion {
        /// Program-header index.
        index: usize,
        /// Its first address.
        address: u64,
    },
    /// Two segments share a page or are out of address order.
    SegmentsOverlap {
        /// Program-header index of the earlier one.
        first: usize,
        /// Program-header index of the later one.
        second: usize,
    },
    /// More than [`MAX_SEGMENTS`] loadable segments.
    TooManySegments,
    /// The page-rounded segments add up to more than [`MAX_IMAGE_SIZE`].
    ImageTooLarge {
        /// Bytes needed.
        size: u64,
    },
    /// No loadable segment.
    NoLoadableSegments,
    /// The entry point is not inside an executable segment.
    EntryNotExecutable {
        /// `e_entry`.
        entry: u64,
    },
}

impl fmt::Display for ExecutableError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecutableError::Truncated { what } => write!(formatter, "ELF truncated in the {what}"),
            ExecutableError::NotElf => formatter.write_str("not an ELF file"),
            ExecutableError::UnsupportedFormat => formatter.write_str("not a little-endian ELF64 file of the current version"),
            ExecutableError::NotStaticExecutable { found } => {
                write!(formatter, "ELF type {found} is not a static executable (ET_EXEC)")
            }
            ExecutableError::WrongMachine { found } => write!(formatter, "ELF machine {found} is not RISC-V"),
            ExecutableError::BadHeader { what } => write!(formatter, "bad ELF header: {what}"),
            ExecutableError::UnsupportedSegment { index, kind } => {
                write!(formatter, "program header {index} has unsupported type {kind:#x} (static executables only)")
            }
            ExecutableError::BadSegment { index, what } => write!(formatter, "bad segment {index}: {what}"),
            ExecutableError::WritableAndExecutable { index } => write!(formatter, "segment {index} is writable and executable"),
            ExecutableError::OutsideImageRegion { index, address } => write!(
                formatter,
                "segment {index} at {address:#x} is outside the image region {:#x}..{:#x} (link with userspace/user.ld)",
                IMAGE_REGION.start, IMAGE_REGION.end
            ),
            ExecutableError::SegmentsOverlap { first, second } => {
                write!(formatter, "segments {first} and {second} overlap, share a page or are out of order")
            }
            ExecutableError::TooManySegments => write!(formatter, "more than {MAX_SEGMENTS} loadable segments"),
            ExecutableError::ImageTooLarge { size } => write!(formatter, "image needs {size} bytes, at most {MAX_IMAGE_SIZE} allowed"),
            ExecutableError::NoLoadableSegments => formatter.write_str("no loadable segment"),
            ExecutableError::EntryNotExecutable { entry } => write!(formatter, "entry point {entry:#x} is not in an executable segment"),
        }
    }
}

impl core::error::Error for ExecutableError {}

/// Access rights of a segment, from `p_flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentPermissions {
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub execute: bool,
}

impl fmt::Display for SegmentPermissions {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = |set: bool, letter: char| if set { letter } else { '-' };
        write!(formatter, "{}{}{}", flag(self.read, 'r'), flag(self.write, 'w'), flag(self.execute, 'x'))
    }
}

/// One validated `PT_LOAD` segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSegment {
    /// Program-header index (as used in errors).
    pub program_header: usize,
    /// Virtual address of its first byte (`p_vaddr`).
    pub address: usize,
    /// Bytes in memory (`p_memsz`); those past `file_size` are zero.
    pub memory_size: usize,
    /// Where its initialised bytes start in the file (`p_offset`).
    pub file_offset: usize,
    /// Initialised bytes (`p_filesz`).
    pub file_size: usize,
    /// How to map it.
    pub permissions: SegmentPermissions,
}

impl LoadSegment {
    /// The page-aligned virtual range it occupies.
    pub fn pages(&self) -> Range<usize> {
        let start = self.address & !(PAGE_SIZE - 1);
        // Checked in `parse`: the end is inside the image region, so rounding cannot overflow.
        let end = (self.address + self.memory_size).next_multiple_of(PAGE_SIZE);
        start..end
    }

    /// Offset of its first byte within its first page.
    pub fn offset_in_first_page(&self) -> usize {
        self.address % PAGE_SIZE
    }
}

/// A validated static executable.
#[derive(Clone, Debug)]
pub struct Executable<'data> {
    data: &'data [u8],
    entry: usize,
    segments: Vec<LoadSegment>,
}

impl<'data> Executable<'data> {
    /// Validates `data`; see the module documentation for the checks.
    pub fn parse(data: &'data [u8]) -> Result<Executable<'data>, ExecutableError> {
        Executable::parse_headers(data, data.len() as u64)
    }

    /// How many of a file's first bytes (`head`: at least the 64 of the ELF header) its ELF
    /// header and program headers take. Errors: as [`Executable::parse`]'s for the file
    /// header; [`ExecutableError::BadHeader`] for a header table whose end overflows.
    pub fn header_length(head: &[u8]) -> Result<usize, ExecutableError> {
        let header = parse_file_header(head)?;
        let count = u64::from(header.e_phnum(ENDIAN));
        let end = count
            .checked_mul(u64::from(PROGRAM_HEADER_SIZE))
            .and_then(|bytes| bytes.checked_add(header.e_phoff(ENDIAN)))
            .ok_or(ExecutableError::BadHeader { what: "program headers past any file" })?;
        usize::try_from(end.max(FILE_HEADER_SIZE as u64)).map_err(|_| ExecutableError::BadHeader { what: "program headers past any file" })
    }

    /// Validates a program from `head`, its file's first bytes (at least
    /// [`Executable::header_length`] of them), and the file's length `file_length`: the
    /// checks of [`Executable::parse`], with each segment's bytes required inside
    /// `file_length` bytes.
    pub fn parse_headers(data: &'data [u8], file_length: u64) -> Result<Executable<'data>, ExecutableError> {
        let header = parse_file_header(data)?;
        let program_headers = header.program_headers(ENDIAN, data).map_err(|_| ExecutableError::Truncated { what: "program headers" })?;
        let mut segments: Vec<LoadSegment> = Vec::new();
        let mut total: u64 = 0;
        for (index, program_header) in program_headers.iter().enumerate() {
            let kind = program_header.p_type(ENDIAN);
            if kind == elf::PT_INTERP || kind == elf::PT_DYNAMIC || kind == elf::PT_TLS {
                return Err(ExecutableError::UnsupportedSegment { index, kind: kind.0 });
            }
            if kind != elf::PT_LOAD {
                continue; // PT_PHDR, PT_NOTE, PT_GNU_STACK, PT_GNU_RELRO, PT_RISCV_ATTRIBUTES, …
            }
            let Some(segment) = check_load_segment(file_length, index, program_header)? else { continue };
            if segments.len() == MAX_SEGMENTS {
                return Err(ExecutableError::TooManySegments);
            }
            if let Some(previous) = segments.last()
                && segment.pages().start < previous.pages().end
            {
                return Err(ExecutableError::SegmentsOverlap { first: previous.program_header, second: index });
            }
            total += segment.pages().len() as u64;
            if total > MAX_IMAGE_SIZE as u64 {
                return Err(ExecutableError::ImageTooLarge { size: total });
            }
            segments.push(segment);
        }
        if segments.is_empty() {
            return Err(ExecutableError::NoLoadableSegments);
        }
        let entry = header.e_entry(ENDIAN);
        let entry_is_code = segments.iter().any(|segment| {
            segment.permissions.execute && (segment.address as u64..(segment.address + segment.memory_size) as u64).contains(&entry)
        });
        if !entry_is_code {
            return Err(ExecutableError::EntryNotExecutable { entry });
        }
        Ok(Executable { data, entry: entry as usize, segments })
    }

    /// The entry point (`e_entry`).
    pub fn entry(&self) -> usize {
        self.entry
    }

    /// The loadable segments, in address order on disjoint pages.
    pub fn segments(&self) -> &[LoadSegment] {
        &self.segments
    }

    /// A segment's initialised bytes (`file_size` of them), if the bytes parsed hold them
    /// (always after [`Executable::parse`]; after [`Executable::parse_headers`], only if
    /// the head was long enough).
    pub fn file_bytes(&self, segment: &LoadSegment) -> Option<&'data [u8]> {
        self.data.get(segment.file_offset..segment.file_offset + segment.file_size)
    }
}

fn parse_file_header(data: &[u8]) -> Result<&FileHeader64<LittleEndian>, ExecutableError> {
    let ident = data.get(..FILE_HEADER_SIZE).ok_or(ExecutableError::Truncated { what: "file header" })?;
    if ident[..elf::ELFMAG.len()] != elf::ELFMAG {
        return Err(ExecutableError::NotElf);
    }
    let header = FileHeader64::<LittleEndian>::parse(data).map_err(|_| ExecutableError::UnsupportedFormat)?;
    // `parse` accepts either byte order; every field is read little-endian.
    if header.e_ident.data != elf::ELFDATA2LSB {
        return Err(ExecutableError::UnsupportedFormat);
    }
    let file_type = header.e_type(ENDIAN);
    if file_type != elf::ET_EXEC {
        return Err(ExecutableError::NotStaticExecutable { found: file_type.0 });
    }
    let machine = header.e_machine(ENDIAN);
    if machine != elf::EM_RISCV {
        return Err(ExecutableError::WrongMachine { found: machine.0 });
    }
    if header.e_phoff(ENDIAN) == 0 {
        return Err(ExecutableError::BadHeader { what: "no program headers" });
    }
    if header.e_phentsize(ENDIAN) != PROGRAM_HEADER_SIZE {
        return Err(ExecutableError::BadHeader { what: "e_phentsize" });
    }
    Ok(header)
}

/// Checks one `PT_LOAD`; `None` for an empty one (`p_memsz` 0), which maps nothing.
fn check_load_segment(file_length: u64, index: usize, header: &ProgramHeader64<LittleEndian>) -> Result<Option<LoadSegment>, ExecutableError> {
    let bad = |what| ExecutableError::BadSegment { index, what };
    let address = header.p_vaddr(ENDIAN);
    let memory_size = header.p_memsz(ENDIAN);
    let file_offset = header.p_offset(ENDIAN);
    let file_size = header.p_filesz(ENDIAN);
    if memory_size == 0 {
        return Ok(None);
    }
    if file_size > memory_size {
        return Err(bad("p_filesz is larger than p_memsz"));
    }
    let file_end = file_offset.checked_add(file_size).ok_or(bad("file range overflows"))?;
    if file_end > file_length {
        return Err(ExecutableError::Truncated { what: "segment contents" });
    }
    let end = address.checked_add(memory_size).ok_or(bad("address range overflows"))?;
    if address < IMAGE_REGION.start as u64 || end > IMAGE_REGION.end as u64 {
        return Err(ExecutableError::OutsideImageRegion { index, address });
    }
    let flags = header.p_flags(ENDIAN).0;
    let permissions = SegmentPermissions {
        read: flags & elf::PF_R.0 != 0,
        write: flags & elf::PF_W.0 != 0,
        execute: flags & elf::PF_X.0 != 0,
    };
    if permissions.write && permissions.execute {
        return Err(ExecutableError::WritableAndExecutable { index });
    }
    if !permissions.read && !permissions.execute {
        return Err(bad("neither readable nor executable"));
    }
    Ok(Some(LoadSegment {
        program_header: index,
        address: address as usize,
        memory_size: memory_size as usize,
        file_offset: file_offset as usize,
        file_size: file_size as usize,
        permissions,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::IMAGE_BASE;

    /// One program header of a test file.
    #[derive(Clone, Copy)]
    struct Header {
        kind: u32,
        flags: u32,
        offset: u64,
        address: u64,
        file_size: u64,
        memory_size: u64,
    }

    const CODE: Header = Header { kind: 1, flags: 5, offset: 0x1000, address: IMAGE_BASE as u64, file_size: 0x10, memory_size: 0x10 };
    const DATA: Header = Header { kind: 1, flags: 6, offset: 0x2000, address: IMAGE_BASE as u64 + 0x1000, file_size: 8, memory_size: 0x3000 };

    /// A minimal static executable: file header, program headers, then bytes up to 0x3000.
    fn build(headers: &[Header], entry: u64, file_type: u16, machine: u16) -> Vec<u8> {
        let mut file = vec![0u8; 0x3000];
        file[..4].copy_from_slice(b"\x7fELF");
        file[4] = 2; // ELFCLASS64
        file[5] = 1; // little-endian
        file[6] = 1; // EV_CURRENT
        file[16..18].copy_from_slice(&file_type.to_le_bytes());
        file[18..20].copy_from_slice(&machine.to_le_bytes());
        file[20..24].copy_from_slice(&1u32.to_le_bytes());
        file[24..32].copy_from_slice(&entry.to_le_bytes());
        file[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        file[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        file[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        file[56..58].copy_from_slice(&(headers.len() as u16).to_le_bytes());
        for (index, header) in headers.iter().enumerate() {
            let at = 64 + index * 56;
            file[at..at + 4].copy_from_slice(&header.kind.to_le_bytes());
            file[at + 4..at + 8].copy_from_slice(&header.flags.to_le_bytes());
            file[at + 8..at + 16].copy_from_slice(&header.offset.to_le_bytes());
            file[at + 16..at + 24].copy_from_slice(&header.address.to_le_bytes());
            file[at + 24..at + 32].copy_from_slice(&header.address.to_le_bytes());
            file[at + 32..at + 40].copy_from_slice(&header.file_size.to_le_bytes());
            file[at + 40..at + 48].copy_from_slice(&header.memory_size.to_le_bytes());
            file[at + 48..at + 56].copy_from_slice(&0x1000u64.to_le_bytes());
        }
        file[0x1000..0x1010].copy_from_slice(&[0x13; 16]);
        file
    }

    fn parse(headers: &[Header]) -> Result<Vec<LoadSegment>, ExecutableError> {
        let file = build(headers, IMAGE_BASE as u64 + 4, 2, 243);
        Executable::parse(&file).map(|executable| executable.segments().to_vec())
    }

    #[test]
    fn accepts_a_well_formed_executable() {
        let file = build(&[CODE, DATA], IMAGE_BASE as u64 + 4, 2, 243);
        let executable = Executable::parse(&file).unwrap();
        assert_eq!(executable.entry(), IMAGE_BASE + 4);
        let [code, data] = executable.segments() else { panic!("two segments expected") };
        assert_eq!(code.permissions.to_string(), "r-x");
        assert_eq!(data.permissions.to_string(), "rw-");
        assert_eq!(data.pages(), IMAGE_BASE + 0x1000..IMAGE_BASE + 0x4000);
        assert_eq!(executable.file_bytes(code), Some(&[0x13; 16][..]));
        assert_eq!(executable.file_bytes(data).map(<[u8]>::len), Some(8));
    }

    #[test]
    fn headers_alone_are_checked_as_the_whole_file_is() {
        let file = build(&[CODE, DATA], IMAGE_BASE as u64 + 4, 2, 243);
        let length = Executable::header_length(&file).unwrap();
        assert_eq!(length, 64 + 2 * 56, "the ELF header, then two program headers");
        let head = &file[..length];
        let from_head = Executable::parse_headers(head, file.len() as u64).unwrap();
        let whole = Executable::parse(&file).unwrap();
        assert_eq!(from_head.segments(), whole.segments());
        assert_eq!(from_head.entry(), whole.entry());
        assert_eq!(from_head.file_bytes(&whole.segments()[0]), None, "the head does not hold the code");
        // A file shorter than its segments say is refused from its length alone.
        assert_eq!(Executable::parse_headers(head, 0x2004).unwrap_err(), ExecutableError::Truncated { what: "segment contents" });
        // A head cut inside the program headers is refused, not read past.
        assert_eq!(Executable::parse_headers(&file[..length - 1], file.len() as u64).unwrap_err(), ExecutableError::Truncated { what: "program headers" });
        assert_eq!(Executable::header_length(&file[..10]).unwrap_err(), ExecutableError::Truncated { what: "file header" });
        let mut huge = file.clone();
        huge[32..40].copy_from_slice(&u64::MAX.to_le_bytes()); // e_phoff
        assert!(Executable::header_length(&huge).is_err(), "an overflowing header table");
    }

    #[test]
    fn refuses_wrong_kinds_of_file() {
        assert_eq!(Executable::parse(b"\x7fELF").unwrap_err(), ExecutableError::Truncated { what: "file header" });
        assert_eq!(Executable::parse(&[0u8; 128]).unwrap_err(), ExecutableError::NotElf);
        let shared_object = build(&[CODE], IMAGE_BASE as u64, 3, 243);
        assert_eq!(Executable::parse(&shared_object).unwrap_err(), ExecutableError::NotStaticExecutable { found: 3 });
        let x86 = build(&[CODE], IMAGE_BASE as u64, 2, 62);
        assert_eq!(Executable::parse(&x86).unwrap_err(), ExecutableError::WrongMachine { found: 62 });
        let mut big_endian = build(&[CODE], IMAGE_BASE as u64, 2, 243);
        big_endian[5] = 2;
        assert!(Executable::parse(&big_endian).is_err());
    }

    #[test]
    fn enforces_w_xor_x_and_access() {
        let writable_code = Header { flags: 7, ..CODE };
        assert_eq!(parse(&[writable_code]).unwrap_err(), ExecutableError::WritableAndExecutable { index: 0 });
        let no_access = Header { flags: 0, ..DATA };
        assert!(matches!(parse(&[CODE, no_access]).unwrap_err(), ExecutableError::BadSegment { index: 1, .. }));
    }

    #[test]
    fn keeps_segments_inside_the_image_region_and_the_file() {
        let low = Header { address: 0x8020_0000, ..CODE };
        assert!(matches!(parse(&[low]).unwrap_err(), ExecutableError::OutsideImageRegion { index: 0, .. }));
        let past_end = Header { address: IMAGE_REGION.end as u64 - 8, memory_size: 16, file_size: 16, ..CODE };
        assert!(matches!(parse(&[past_end]).unwrap_err(), ExecutableError::OutsideImageRegion { .. }));
        let wrapping = Header { address: u64::MAX - 4, ..CODE };
        assert!(matches!(parse(&[wrapping]).unwrap_err(), ExecutableError::BadSegment { what: "address range overflows", .. }));
        let beyond_file = Header { offset: 0x2ff0, file_size: 0x20, memory_size: 0x20, ..DATA };
        assert_eq!(parse(&[CODE, beyond_file]).unwrap_err(), ExecutableError::Truncated { what: "segment contents" });
        let file_overflow = Header { offset: u64::MAX, ..DATA };
        assert!(matches!(parse(&[CODE, file_overflow]).unwrap_err(), ExecutableError::BadSegment { .. }));
        let too_much_file = Header { file_size: 0x20, memory_size: 0x10, ..CODE };
        assert!(matches!(parse(&[too_much_file]).unwrap_err(), ExecutableError::BadSegment { .. }));
        let huge = Header { memory_size: MAX_IMAGE_SIZE as u64 + 1, ..DATA };
        assert!(matches!(parse(&[CODE, huge]).unwrap_err(), ExecutableError::ImageTooLarge { .. }));
    }

    #[test]
    fn refuses_shared_pages_and_disorder() {
        let sharing = Header { address: IMAGE_BASE as u64 + 0x800, ..DATA };
        assert_eq!(parse(&[CODE, sharing]).unwrap_err(), ExecutableError::SegmentsOverlap { first: 0, second: 1 });
        assert_eq!(parse(&[DATA, CODE]).unwrap_err(), ExecutableError::SegmentsOverlap { first: 0, second: 1 });
    }

    #[test]
    fn refuses_dynamic_linking_tls_and_bad_entry_points() {
        let interpreter = Header { kind: 3, ..CODE };
        assert_eq!(parse(&[interpreter, CODE]).unwrap_err(), ExecutableError::UnsupportedSegment { index: 0, kind: 3 });
        let dynamic = Header { kind: 2, ..DATA };
        assert!(matches!(parse(&[CODE, dynamic]).unwrap_err(), ExecutableError::UnsupportedSegment { kind: 2, .. }));
        let tls = Header { kind: 7, ..DATA };
        assert!(matches!(parse(&[CODE, tls]).unwrap_err(), ExecutableError::UnsupportedSegment { kind: 7, .. }));
        let file = build(&[CODE, DATA], IMAGE_BASE as u64 + 0x1000, 2, 243);
        assert_eq!(Executable::parse(&file).unwrap_err(), ExecutableError::EntryNotExecutable { entry: IMAGE_BASE as u64 + 0x1000 });
        assert_eq!(parse(&[]).unwrap_err(), ExecutableError::NoLoadableSegments);
        let empty = Header { memory_size: 0, file_size: 0, ..DATA };
        assert_eq!(parse(&[CODE, empty]).map(|segments| segments.len()), Ok(1), "empty PT_LOADs are skipped");
    }

    #[test]
    fn never_panics_on_truncations_of_a_good_file() {
        let file = build(&[CODE, DATA], IMAGE_BASE as u64 + 4, 2, 243);
        for length in 0..file.len() {
            let _ = Executable::parse(&file[..length]);
        }
        for position in 0..0x100 {
            for value in [0u8, 0xff, 0x80] {
                let mut corrupted = file.clone();
                corrupted[position] = value;
                let _ = Executable::parse(&corrupted);
            }
        }
    }
}
