//! Helpers shared by the integration tests: the fixture, keys, and raw ELF patching.
#![allow(dead_code)] // each test binary uses a different subset

use spindle_loader::Manifest;
use spindle_loader::pack::{SigningKey, signing_key_from_seed};

/// The real RISC-V shared object built by `fixtures/build-fixture.sh`.
pub const FIXTURE: &[u8] = include_bytes!("../fixtures/native-extension.so");
/// Generous image limit for the fixture (its image is 16 KiB).
pub const MAX_IMAGE: u64 = 1 << 20;
/// The ABI fingerprint the tests' "kernel" expects.
pub const ABI: u64 = 0x5350_494e_444c_4531;
/// The import the fixture calls through the PLT.
pub const IMPORT_CALLED: &str = "spindle_host_log";
/// The import whose address the fixture stores in `FIXTURE_HOOK`.
pub const IMPORT_STORED: &str = "spindle_host_add";
/// Runtime addresses the test resolver hands out.
pub const LOG_ADDRESS: u64 = 0xffff_ffc0_0020_1000;
pub const ADD_ADDRESS: u64 = 0xffff_ffc0_0020_2000;

/// The builder's key (deterministic).
pub fn builder_key() -> SigningKey {
    signing_key_from_seed(&[0x5a; 32])
}

/// Some other key.
pub fn other_key() -> SigningKey {
    signing_key_from_seed(&[0xa5; 32])
}

/// The fixture's manifest.
pub fn fixture_manifest() -> Manifest {
    Manifest::parse(
        "name = fixture\nversion = 0.1.0\nentry = fixture_init\nevents = mm.Reclaim\n\
         domains = host\nbudget_us = 250\nmemory_bytes = 65536\n",
    )
    .unwrap()
}

/// A resolver that knows the fixture's two imports.
pub fn host_resolver(name: &str) -> Result<u64, String> {
    match name {
        IMPORT_CALLED => Ok(LOG_ADDRESS),
        IMPORT_STORED => Ok(ADD_ADDRESS),
        other => Err(format!("no domain exports {other}")),
    }
}

pub fn read_u16(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes(bytes[offset..offset + 2].try_into().unwrap())
}

pub fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap())
}

pub fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap())
}

pub fn write_u32(bytes: &mut [u8], offset: usize, value: u32) {
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

pub fn write_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// File offset of program header `index` (ELF64: `e_phoff` at 32, 56-byte entries).
pub fn program_header(elf: &[u8], index: usize) -> usize {
    read_u64(elf, 32) as usize + index * 56
}

/// Number of program headers (`e_phnum` at 56).
pub fn program_header_count(elf: &[u8]) -> usize {
    read_u16(elf, 56) as usize
}

/// File offset of the first entry of the dynamic table (`PT_DYNAMIC`'s `p_offset`).
pub fn dynamic_table(elf: &[u8]) -> usize {
    (0..program_header_count(elf))
        .map(|index| program_header(elf, index))
        .find(|&header| read_u32(elf, header) == 2)
        .map(|header| read_u64(elf, header + 8) as usize)
        .expect("fixture has PT_DYNAMIC")
}

/// File offset of the dynamic entry with `tag`.
pub fn dynamic_entry(elf: &[u8], tag: u64) -> usize {
    let mut entry = dynamic_table(elf);
    loop {
        match read_u64(elf, entry) {
            0 => panic!("no dynamic tag {tag}"),
            found if found == tag => return entry,
            _ => entry += 16,
        }
    }
}

/// File offset of what the dynamic entry `tag` points at. The fixture's tables live in
/// its first segment, whose addresses equal file offsets (checked).
pub fn dynamic_target(elf: &[u8], tag: u64) -> usize {
    let first_load = program_header(elf, 1);
    assert_eq!(
        read_u32(elf, first_load),
        1,
        "program header 1 is the first PT_LOAD"
    );
    assert_eq!(
        read_u64(elf, first_load + 8),
        read_u64(elf, first_load + 16),
        "offset == vaddr"
    );
    read_u64(elf, dynamic_entry(elf, tag) + 8) as usize
}

pub const DT_HASH: u64 = 4;
pub const DT_JMPREL: u64 = 23;
pub const DT_RELA: u64 = 7;
