//! Loading the real RISC-V shared object in `fixtures/` and checking relocated values,
//! plus every specific refusal, provoked by patching the fixture.

mod common;

use common::*;
use spindle_loader::{
    Definition, ElfError, ElfObject, LoadError, PAGE_SIZE, Permissions, RelocationKind, SymbolKind,
    SymbolLookupError, load_into,
};

/// Where the tests "map" the image (a kernel-half Sv39 address).
const LOAD_BASE: u64 = 0xffff_ffc0_4000_0000;
/// `R_RISCV_TLS_TPREL64`, a type the loader refuses.
const R_RISCV_TLS_TPREL64: u64 = 11;

fn parse(elf: &[u8]) -> Result<ElfObject<'_>, ElfError> {
    ElfObject::parse(elf, MAX_IMAGE)
}

/// Loads `elf` at [`LOAD_BASE`]; returns the image and the loaded description.
fn load(elf: &ElfObject<'_>) -> (Vec<u8>, spindle_loader::LoadedImage) {
    let mut image = vec![0xcc; elf.image_size() as usize];
    let loaded = load_into(elf, &mut image, LOAD_BASE, &mut host_resolver).expect("fixture loads");
    (image, loaded)
}

/// The image word at runtime `address`.
fn word_at(image: &[u8], address: u64) -> u64 {
    read_u64(image, (address - LOAD_BASE) as usize)
}

#[test]
fn the_fixture_parses() {
    let elf = parse(FIXTURE).unwrap();
    assert_eq!(elf.image_start(), 0);
    assert_eq!(elf.image_size(), 4 * PAGE_SIZE);
    assert_eq!(elf.load_alignment(), PAGE_SIZE);
    let permissions: Vec<Permissions> = elf
        .segments()
        .iter()
        .map(|segment| segment.permissions)
        .collect();
    assert_eq!(
        permissions,
        [
            Permissions::READ,
            Permissions::READ_EXECUTE,
            Permissions::READ_WRITE,
            Permissions::READ_WRITE
        ]
    );
    let bss = &elf.segments()[2];
    assert!(
        bss.memory_size > bss.file_size,
        "the RELRO segment is padded with zeros"
    );

    let mut imports: Vec<&str> = elf.imports().map(|symbol| symbol.name).collect();
    imports.sort_unstable();
    assert_eq!(imports, [IMPORT_STORED, IMPORT_CALLED]);
    let mut exports: Vec<&str> = elf.exports().map(|symbol| symbol.name).collect();
    exports.sort_unstable();
    assert_eq!(
        exports,
        [
            "FIXTURE_GREETING",
            "FIXTURE_HOOK",
            "FIXTURE_TABLE",
            "fixture_handle",
            "fixture_init"
        ]
    );
    let init = elf.export("fixture_init").unwrap();
    assert_eq!(
        (init.kind, init.definition),
        (SymbolKind::Function, Definition::Defined)
    );
    assert!(
        elf.export(IMPORT_CALLED).is_none(),
        "imports are not exports"
    );

    let mut kinds: Vec<RelocationKind> = elf
        .relocations()
        .iter()
        .map(|relocation| relocation.kind)
        .collect();
    kinds.sort_by_key(|kind| *kind as u8);
    assert_eq!(
        kinds,
        [
            RelocationKind::Relative,
            RelocationKind::Relative,
            RelocationKind::Relative,
            RelocationKind::Absolute64,
            RelocationKind::JumpSlot
        ]
    );
}

#[test]
fn relative_relocations_point_into_the_image() {
    let elf = parse(FIXTURE).unwrap();
    let (image, loaded) = load(&elf);

    // FIXTURE_TABLE = [&FIRST, &SECOND]: two rebased pointers to the constants.
    let table = loaded.symbol("FIXTURE_TABLE").unwrap();
    assert_eq!(
        table,
        LOAD_BASE + elf.export("FIXTURE_TABLE").unwrap().value
    );
    let first = word_at(&image, table);
    let second = word_at(&image, table + 8);
    assert!(first >= LOAD_BASE && first < LOAD_BASE + loaded.size());
    assert_eq!(word_at(&image, first), 0x1111_2222_3333_4444);
    assert_eq!(word_at(&image, second), 0x5555_6666_7777_8888);

    // FIXTURE_GREETING: &str = (pointer, length).
    let greeting = loaded.symbol("FIXTURE_GREETING").unwrap();
    let pointer = word_at(&image, greeting);
    let length = word_at(&image, greeting + 8);
    let start = (pointer - LOAD_BASE) as usize;
    assert_eq!(
        &image[start..start + length as usize],
        b"hello from a native extension"
    );
}

#[test]
fn imports_are_resolved_into_the_data_word_and_the_plt_slot() {
    let elf = parse(FIXTURE).unwrap();
    let (image, loaded) = load(&elf);
    // R_RISCV_64 against spindle_host_add, in FIXTURE_HOOK.
    assert_eq!(
        word_at(&image, loaded.symbol("FIXTURE_HOOK").unwrap()),
        ADD_ADDRESS
    );
    // R_RISCV_JUMP_SLOT against spindle_host_log, in .got.plt.
    let slot = elf
        .relocations()
        .iter()
        .find(|relocation| relocation.kind == RelocationKind::JumpSlot)
        .unwrap();
    assert_eq!(elf.symbols()[slot.symbol as usize].name, IMPORT_CALLED);
    assert_eq!(read_u64(&image, slot.image_offset as usize), LOG_ADDRESS);
    assert_eq!(loaded.relocations_applied(), 5);
    assert_eq!(loaded.imports_resolved(), 2);
}

#[test]
fn the_resolver_is_asked_once_per_import() {
    let elf = parse(FIXTURE).unwrap();
    let mut asked = Vec::new();
    let mut image = vec![0; elf.image_size() as usize];
    let mut resolver = |name: &str| {
        asked.push(name.to_string());
        host_resolver(name)
    };
    load_into(&elf, &mut image, LOAD_BASE, &mut resolver).unwrap();
    asked.sort();
    assert_eq!(asked, [IMPORT_STORED, IMPORT_CALLED]);
}

#[test]
fn segments_are_copied_and_bss_and_gaps_zeroed() {
    let elf = parse(FIXTURE).unwrap();
    let (image, _) = load(&elf);
    let relocated: Vec<u64> = elf
        .relocations()
        .iter()
        .map(|relocation| relocation.image_offset)
        .collect();
    for segment in elf.segments() {
        let start = segment.image_offset as usize;
        let file = &FIXTURE
            [segment.file_offset as usize..(segment.file_offset + segment.file_size) as usize];
        for (index, byte) in file.iter().enumerate() {
            let offset = (start + index) as u64;
            let in_relocated_word = relocated
                .iter()
                .any(|word| offset >= *word && offset < word + 8);
            if !in_relocated_word {
                assert_eq!(
                    image[start + index],
                    *byte,
                    "byte at image offset {offset:#x}"
                );
            }
        }
        let bss = &image[start + file.len()..start + segment.memory_size as usize];
        assert!(bss.iter().all(|byte| *byte == 0), "bss is zeroed");
    }
    // The gap between the first segment's end and the second page holds no segment.
    let first = &elf.segments()[0];
    let gap_start = (first.image_offset + first.memory_size) as usize;
    assert!(
        image[gap_start..PAGE_SIZE as usize]
            .iter()
            .all(|byte| *byte == 0),
        "the 0xcc fill is gone"
    );
}

#[test]
fn mappings_are_w_xor_x_with_relro_read_only() {
    let elf = parse(FIXTURE).unwrap();
    let (_, loaded) = load(&elf);
    let summary: Vec<(u64, u64, Permissions)> = loaded
        .mappings()
        .iter()
        .map(|mapping| {
            (
                mapping.address - LOAD_BASE,
                mapping.size,
                mapping.permissions,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (0, PAGE_SIZE, Permissions::READ),
            (PAGE_SIZE, PAGE_SIZE, Permissions::READ_EXECUTE),
            (2 * PAGE_SIZE, PAGE_SIZE, Permissions::READ), // PT_GNU_RELRO: written only by relocation
            (3 * PAGE_SIZE, PAGE_SIZE, Permissions::READ_WRITE), // .got.plt
        ]
    );
    for mapping in loaded.mappings() {
        assert_eq!(mapping.image_offset, mapping.address - LOAD_BASE);
        assert!(!(mapping.permissions.write && mapping.permissions.execute));
    }
}

#[test]
fn entry_and_handler_functions_are_found() {
    let elf = parse(FIXTURE).unwrap();
    let (_, loaded) = load(&elf);
    let init = loaded.function("fixture_init").unwrap();
    assert_eq!(init, LOAD_BASE + elf.export("fixture_init").unwrap().value);
    assert!(loaded.function("fixture_handle").is_ok());
    assert_eq!(
        loaded.function("FIXTURE_TABLE"),
        Err(SymbolLookupError::NotAFunction {
            name: "FIXTURE_TABLE".into()
        })
    );
    assert_eq!(
        loaded.function("missing"),
        Err(SymbolLookupError::NotFound {
            name: "missing".into()
        })
    );
    assert_eq!(loaded.symbol(IMPORT_CALLED), None);
}

#[test]
fn an_unresolved_import_fails_naming_the_symbol() {
    let elf = parse(FIXTURE).unwrap();
    let mut image = vec![0; elf.image_size() as usize];
    let mut resolver = |name: &str| {
        if name == IMPORT_CALLED {
            Ok(LOG_ADDRESS)
        } else {
            Err("not granted")
        }
    };
    let error = load_into(&elf, &mut image, LOAD_BASE, &mut resolver).unwrap_err();
    assert_eq!(
        error,
        LoadError::Unresolved {
            symbol: IMPORT_STORED.into(),
            error: "not granted"
        }
    );
    assert_eq!(
        error.to_string(),
        "cannot resolve import `spindle_host_add`: not granted"
    );
}

#[test]
fn bad_buffers_and_bases_are_refused_before_writing() {
    let elf = parse(FIXTURE).unwrap();
    let mut small = vec![0xcc; elf.image_size() as usize - 1];
    assert_eq!(
        load_into(&elf, &mut small, LOAD_BASE, &mut host_resolver),
        Err(LoadError::BufferTooSmall {
            needed: elf.image_size(),
            provided: elf.image_size() - 1
        })
    );
    assert!(small.iter().all(|byte| *byte == 0xcc));
    let mut image = vec![0; elf.image_size() as usize];
    assert_eq!(
        load_into(&elf, &mut image, LOAD_BASE + 8, &mut host_resolver),
        Err(LoadError::MisalignedLoadBase {
            load_base: LOAD_BASE + 8,
            alignment: PAGE_SIZE
        })
    );
    let top = u64::MAX - PAGE_SIZE + 1;
    assert_eq!(
        load_into(&elf, &mut image, top, &mut host_resolver),
        Err(LoadError::AddressOverflow { load_base: top })
    );
    // A larger buffer is fine; only the image's bytes are used.
    let mut large = vec![0; elf.image_size() as usize + 100];
    assert!(load_into(&elf, &mut large, LOAD_BASE, &mut host_resolver).is_ok());
}

#[test]
fn the_fixture_loads_at_other_bases() {
    let elf = parse(FIXTURE).unwrap();
    for base in [0, 0x8040_0000, 0x1_0000_0000] {
        let mut image = vec![0; elf.image_size() as usize];
        let loaded = load_into(&elf, &mut image, base, &mut host_resolver).unwrap();
        let table = loaded.symbol("FIXTURE_TABLE").unwrap();
        let first = read_u64(&image, (table - base) as usize);
        assert_eq!(
            read_u64(&image, (first - base) as usize),
            0x1111_2222_3333_4444
        );
    }
}

// ---- refusals ------------------------------------------------------------------------

#[test]
fn truncated_elf() {
    assert_eq!(
        parse(&FIXTURE[..0]).unwrap_err(),
        ElfError::Truncated {
            what: "file header"
        }
    );
    assert_eq!(
        parse(&FIXTURE[..63]).unwrap_err(),
        ElfError::Truncated {
            what: "file header"
        }
    );
    assert_eq!(
        parse(&FIXTURE[..100]).unwrap_err(),
        ElfError::Truncated {
            what: "program headers"
        }
    );
    // Cut inside the last PT_LOAD's file bytes.
    let last = elf_end_of_segments();
    assert_eq!(
        parse(&FIXTURE[..last - 1]).unwrap_err(),
        ElfError::Truncated {
            what: "segment data"
        }
    );
    // Every prefix is refused or (past the loaded bytes) accepted, never a panic.
    for length in 0..FIXTURE.len() {
        let result = parse(&FIXTURE[..length]);
        assert_eq!(result.is_ok(), length >= last, "prefix of {length} bytes");
    }
}

/// The end of the last PT_LOAD's bytes in the file.
fn elf_end_of_segments() -> usize {
    (0..program_header_count(FIXTURE))
        .map(|index| program_header(FIXTURE, index))
        .filter(|&header| read_u32(FIXTURE, header) == 1)
        .map(|header| (read_u64(FIXTURE, header + 8) + read_u64(FIXTURE, header + 32)) as usize)
        .max()
        .unwrap()
}

fn patched(patch: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut elf = FIXTURE.to_vec();
    patch(&mut elf);
    elf
}

#[test]
fn wrong_identification_or_machine() {
    assert_eq!(
        parse(&patched(|elf| elf[0] = 0)).unwrap_err(),
        ElfError::NotElf
    );
    assert_eq!(
        parse(&patched(|elf| elf[4] = 1)).unwrap_err(),
        ElfError::NotElf64 { class: 1 }
    );
    assert_eq!(
        parse(&patched(|elf| elf[5] = 2)).unwrap_err(),
        ElfError::NotLittleEndian
    );
    assert_eq!(
        parse(&patched(|elf| elf[6] = 0)).unwrap_err(),
        ElfError::UnsupportedElfVersion { found: 0 }
    );
    assert_eq!(
        parse(&patched(|elf| elf[16] = 2)).unwrap_err(),
        ElfError::NotSharedObject { found: 2 }
    );
    // EM_X86_64 = 62.
    let x86 = patched(|elf| elf[18..20].copy_from_slice(&62u16.to_le_bytes()));
    assert_eq!(
        parse(&x86).unwrap_err(),
        ElfError::WrongMachine { found: 62 }
    );
    assert_eq!(
        parse(&x86).unwrap_err().to_string(),
        "ELF machine 62 is not RISC-V"
    );
    assert_eq!(
        parse(&patched(|elf| elf[54] = 32)).unwrap_err(),
        ElfError::BadHeader {
            what: "e_phentsize"
        }
    );
}

#[test]
fn unsupported_relocation_type() {
    let slot = dynamic_target(FIXTURE, DT_JMPREL);
    let offset = read_u64(FIXTURE, slot);
    for (kind, name) in [
        (R_RISCV_TLS_TPREL64, "TLS_TPREL64"),
        (4, "COPY"),
        (1, "R_RISCV_32"),
    ] {
        let elf = patched(|elf| {
            let info = read_u64(elf, slot + 8);
            write_u64(elf, slot + 8, (info & !0xffff_ffff) | kind);
        });
        assert_eq!(
            parse(&elf).unwrap_err(),
            ElfError::UnsupportedRelocation {
                kind: kind as u32,
                offset
            },
            "{name}"
        );
    }
}

#[test]
fn relocation_targets_and_symbols_are_checked() {
    let rela = dynamic_target(FIXTURE, DT_RELA);
    // Target beyond every segment.
    let elf = patched(|elf| write_u64(elf, rela, 0x10_0000));
    assert_eq!(
        parse(&elf).unwrap_err(),
        ElfError::RelocationOutOfImage { offset: 0x10_0000 }
    );
    // Target straddling the end of the last segment.
    let elf = patched(|elf| write_u64(elf, rela, 0x3630 - 4));
    assert_eq!(
        parse(&elf).unwrap_err(),
        ElfError::RelocationOutOfImage { offset: 0x3630 - 4 }
    );
    // A RELATIVE relocation naming a symbol, and a symbol index past the table.
    let original = read_u64(FIXTURE, rela);
    let elf = patched(|elf| write_u64(elf, rela + 8, (1 << 32) | 3));
    assert_eq!(
        parse(&elf).unwrap_err(),
        ElfError::BadRelocationSymbol {
            offset: original,
            symbol: 1
        }
    );
    let elf = patched(|elf| write_u64(elf, rela + 8, (99 << 32) | 2));
    assert_eq!(
        parse(&elf).unwrap_err(),
        ElfError::BadRelocationSymbol {
            offset: original,
            symbol: 99
        }
    );
}

#[test]
fn oversized_segment_and_image() {
    // The RELRO segment (program header 3) is 0xb20 bytes in memory.
    assert_eq!(
        ElfObject::parse(FIXTURE, 0x800).unwrap_err(),
        ElfError::SegmentTooLarge {
            index: 3,
            size: 0xb20,
            max: 0x800
        }
    );
    assert_eq!(
        ElfObject::parse(FIXTURE, 3 * PAGE_SIZE).unwrap_err(),
        ElfError::ImageTooLarge {
            size: 4 * PAGE_SIZE,
            max: 3 * PAGE_SIZE
        }
    );
    let huge = patched(|elf| write_u64(elf, program_header(FIXTURE, 4) + 40, 1 << 40));
    assert_eq!(
        parse(&huge).unwrap_err(),
        ElfError::SegmentTooLarge {
            index: 4,
            size: 1 << 40,
            max: MAX_IMAGE
        }
    );
    assert!(ElfObject::parse(FIXTURE, 4 * PAGE_SIZE).is_ok());
}

#[test]
fn segment_checks() {
    // Writable + executable text (PF_R | PF_W | PF_X).
    let wx = patched(|elf| write_u32(elf, program_header(FIXTURE, 2) + 4, 7));
    assert_eq!(
        parse(&wx).unwrap_err(),
        ElfError::WritableAndExecutable { index: 2 }
    );
    // The text segment moved onto the first segment's page.
    let overlap = patched(|elf| {
        let header = program_header(FIXTURE, 2);
        let moved = read_u64(elf, header + 16) - PAGE_SIZE;
        write_u64(elf, header + 16, moved);
    });
    assert_eq!(
        parse(&overlap).unwrap_err(),
        ElfError::SegmentsOverlap {
            first: 1,
            second: 2
        }
    );
    // p_filesz > p_memsz.
    let inverted = patched(|elf| write_u64(elf, program_header(FIXTURE, 4) + 32, 0x100));
    assert_eq!(
        parse(&inverted).unwrap_err(),
        ElfError::BadSegment {
            index: 4,
            what: "p_filesz exceeds p_memsz"
        }
    );
    // Alignment that is not a power of two.
    let misaligned = patched(|elf| write_u64(elf, program_header(FIXTURE, 1) + 48, 0x1800));
    assert!(matches!(
        parse(&misaligned).unwrap_err(),
        ElfError::BadSegment { index: 1, .. }
    ));
    // A PT_TLS segment (turn PT_GNU_STACK, header 7, into one).
    let tls = patched(|elf| write_u32(elf, program_header(FIXTURE, 7), 7));
    assert_eq!(
        parse(&tls).unwrap_err(),
        ElfError::UnsupportedSegment { kind: 7 }
    );
    // No PT_DYNAMIC.
    let no_dynamic = patched(|elf| write_u32(elf, program_header(FIXTURE, 5), 4));
    assert_eq!(parse(&no_dynamic).unwrap_err(), ElfError::MissingDynamic);
    // No PT_LOAD at all.
    let no_load = patched(|elf| {
        for index in 1..=4 {
            write_u32(elf, program_header(FIXTURE, index), 4);
        }
    });
    assert_eq!(parse(&no_load).unwrap_err(), ElfError::NoLoadableSegments);
}

#[test]
fn dynamic_table_checks() {
    // DT_HASH turned into DT_NEEDED (1): the object would need another library.
    let hash = dynamic_entry(FIXTURE, DT_HASH);
    let needed = patched(|elf| write_u64(elf, hash, 1));
    assert_eq!(
        parse(&needed).unwrap_err(),
        ElfError::UnsupportedDynamicTag { tag: 1 }
    );
    // DT_HASH turned into DT_INIT_ARRAY (25): initialisers are not run, so refused.
    let init = patched(|elf| write_u64(elf, hash, 25));
    assert_eq!(
        parse(&init).unwrap_err(),
        ElfError::UnsupportedDynamicTag { tag: 25 }
    );
    // DT_RELAENT (9) of the wrong size.
    let entry_size = dynamic_entry(FIXTURE, 9);
    let bad_entry = patched(|elf| write_u64(elf, entry_size + 8, 16));
    assert_eq!(
        parse(&bad_entry).unwrap_err(),
        ElfError::BadDynamic {
            what: "DT_RELAENT is not 24"
        }
    );
    // A relocation table pointing past the file.
    let jmprel = dynamic_entry(FIXTURE, DT_JMPREL);
    let far = patched(|elf| write_u64(elf, jmprel + 8, 0x10_0000));
    assert_eq!(
        parse(&far).unwrap_err(),
        ElfError::AddressNotInFile {
            what: "relocation table",
            address: 0x10_0000
        }
    );
    // No DT_NULL: overwrite the terminator (the last entry) with DT_DEBUG (21).
    let mut terminator = dynamic_table(FIXTURE);
    while read_u64(FIXTURE, terminator) != 0 {
        terminator += 16;
    }
    let dynamic_end = terminator + 16;
    let unterminated = patched(|elf| {
        for entry in (terminator..dynamic_end).step_by(16) {
            write_u64(elf, entry, 21);
        }
    });
    assert_eq!(
        parse(&unterminated).unwrap_err(),
        ElfError::BadDynamic {
            what: "no DT_NULL terminator"
        }
    );
}

#[test]
fn symbols_are_counted_from_the_gnu_hash_table_too() {
    // DT_HASH turned into DT_DEBUG (21, ignored): the count comes from DT_GNU_HASH.
    let hash = dynamic_entry(FIXTURE, DT_HASH);
    let gnu_only = patched(|elf| write_u64(elf, hash, 21));
    let with_both = parse(FIXTURE).unwrap();
    let gnu = parse(&gnu_only).unwrap();
    assert_eq!(gnu.symbols(), with_both.symbols());
    assert_eq!(gnu.symbols().len(), 8);
}

#[test]
fn symbol_checks() {
    let symbol_table = dynamic_target(FIXTURE, 6); // DT_SYMTAB
    let init_symbol = symbol_table + 3 * 24;
    assert_eq!(parse(FIXTURE).unwrap().symbols()[3].name, "fixture_init");
    // Name offset past DT_STRTAB.
    let elf = patched(|elf| write_u32(elf, init_symbol, 0xffff));
    assert_eq!(
        parse(&elf).unwrap_err(),
        ElfError::BadSymbol {
            index: 3,
            what: "name outside DT_STRTAB"
        }
    );
    // STT_TLS (6) with global binding (1 << 4).
    let elf = patched(|elf| elf[init_symbol + 4] = (1 << 4) | 6);
    assert!(matches!(
        parse(&elf).unwrap_err(),
        ElfError::BadSymbol { index: 3, .. }
    ));
    // A definition outside the image.
    let elf = patched(|elf| write_u64(elf, init_symbol + 8, 0x10_0000));
    assert_eq!(
        parse(&elf).unwrap_err(),
        ElfError::BadSymbol {
            index: 3,
            what: "defined outside the image"
        }
    );
}
