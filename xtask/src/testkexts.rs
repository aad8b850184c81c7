//! Deliberately broken `.kext` files for the kernel's bad-input tests, made from a real
//! one (`hello`) and signed with the real key, so each reaches exactly the check it is
//! meant to fail: ABI fingerprint, ELF parsing, relocation types, segment sizes, domain
//! grants, the memory quota, and the signature itself (an unsigned native payload). They go only into the
//! test image's boot bundle, under names starting with `test-`.

use std::path::Path;

use spindle_loader::pack::pack;
use spindle_loader::{Container, Kind, Manifest};

use crate::Result;

/// `PT_LOAD` and `PT_DYNAMIC` program-header types.
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
/// `DT_JMPREL`: address of the PLT relocations.
const DT_JMPREL: u64 = 23;
/// `R_RISCV_COPY`, a relocation type the loader does not support.
const R_RISCV_COPY: u64 = 4;

fn read_u16(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}
fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}
fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}
fn write_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// File offsets of the program headers of a 64-bit ELF.
fn program_headers(elf: &[u8]) -> Vec<usize> {
    let table = read_u64(elf, 0x20) as usize;
    let entry_size = read_u16(elf, 0x36) as usize;
    let count = read_u16(elf, 0x38) as usize;
    (0..count).map(|index| table + index * entry_size).collect()
}

/// Translates a link-time address into a file offset through the PT_LOAD segments.
fn file_offset_of(elf: &[u8], address: u64) -> Option<usize> {
    program_headers(elf).into_iter().filter(|&header| read_u32(elf, header) == PT_LOAD).find_map(|header| {
        let (offset, virtual_address, file_size) = (read_u64(elf, header + 8), read_u64(elf, header + 16), read_u64(elf, header + 32));
        (address >= virtual_address && address < virtual_address + file_size).then(|| (offset + address - virtual_address) as usize)
    })
}

/// Patches the first PLT relocation's type to `R_RISCV_COPY`.
fn with_unsupported_relocation(elf: &[u8]) -> Result<Vec<u8>> {
    let mut patched = elf.to_vec();
    let dynamic = program_headers(elf).into_iter().find(|&header| read_u32(elf, header) == PT_DYNAMIC).ok_or("hello.so has no PT_DYNAMIC")?;
    let (mut entry, end) = (read_u64(elf, dynamic + 8) as usize, (read_u64(elf, dynamic + 8) + read_u64(elf, dynamic + 32)) as usize);
    while entry + 16 <= end {
        if read_u64(elf, entry) == DT_JMPREL {
            let table = file_offset_of(elf, read_u64(elf, entry + 8)).ok_or("DT_JMPREL outside the file")?;
            let info = read_u64(elf, table + 8);
            write_u64(&mut patched, table + 8, (info & !0xffff_ffff) | R_RISCV_COPY);
            return Ok(patched);
        }
        entry += 16;
    }
    Err("hello.so has no PLT relocations to patch".into())
}

/// Makes the first PT_LOAD segment claim 64 MiB in memory.
fn with_oversized_segment(elf: &[u8]) -> Result<Vec<u8>> {
    let mut patched = elf.to_vec();
    let header = program_headers(elf).into_iter().find(|&header| read_u32(elf, header) == PT_LOAD).ok_or("no PT_LOAD")?;
    write_u64(&mut patched, header + 40, 64 * 1024 * 1024);
    Ok(patched)
}

/// Builds the `test-*` entries from `hello`'s `.kext`.
pub fn build(hello_kext: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let bytes = std::fs::read(hello_kext).map_err(|error| format!("cannot read {}: {error}", hello_kext.display()))?;
    let container = Container::parse(&bytes).map_err(|error| format!("{}: {error}", hello_kext.display()))?;
    let manifest = container.manifest().map_err(|error| error.to_string())?;
    let payload = container.payload().to_vec();
    let key = crate::ext::signing_key()?;
    let abi = spindle_abi::abi_fingerprint().0;
    let signed = |abi: u64, manifest: &Manifest, payload: &[u8]| {
        pack(Kind::Native, abi, manifest, payload, Some(&key)).map_err(|error| format!("packing a test kext: {error}"))
    };
    let mut without_clock = manifest.clone();
    without_clock.domains.retain(|domain| domain != "clock");
    // Above the kernel's largest arena (8 MiB).
    let huge_quota = Manifest { memory_quota_bytes: 1 << 30, ..manifest.clone() };
    Ok(vec![
        ("test-bad-abi".into(), signed(abi ^ 1, &manifest, &payload)?),
        ("test-not-elf".into(), signed(abi, &manifest, b"this payload is text, not an ELF shared object")?),
        ("test-bad-relocation".into(), signed(abi, &manifest, &with_unsupported_relocation(&payload)?)?),
        ("test-oversized-segment".into(), signed(abi, &manifest, &with_oversized_segment(&payload)?)?),
        ("test-ungranted-import".into(), signed(abi, &without_clock, &payload)?),
        ("test-huge-quota".into(), signed(abi, &huge_quota, &payload)?),
        (
            "test-unsigned".into(),
            pack(Kind::Native, abi, &manifest, &payload, None).map_err(|error| format!("packing a test kext: {error}"))?,
        ),
    ])
}

/// A manifest for the hand-written Wasm test modules.
fn wasm_test_manifest(name: &str, domains: &[&str]) -> Manifest {
    Manifest {
        name: name.into(),
        version: "0.0.1".into(),
        entry: spindle_abi::native::BINDING_COUNT_SYMBOL.into(),
        events: vec!["bench.Probe".into()],
        domains: domains.iter().map(|domain| domain.to_string()).collect(),
        budget_microseconds: 1_000,
        memory_quota_bytes: 64 * 1024,
    }
}

/// The Wasm contract's exports around a module body: one `bench.Probe` binding on
/// `key == key` whose handler is `$handle` (`(param $value i64) (result i64)`).
fn contract_module(body: &str, key: u64) -> String {
    let probe = spindle_abi::event::BENCH_PROBE.descriptor();
    format!(
        r#"(module
  {body}
  (memory (export "memory") 1)
  (func (export "spindle_extension_binding_count") (result i32) (i32.const 1))
  (func (export "spindle_extension_exchange") (result i32) (i32.const 1024))
  ;; BindingInfo: event id, 1 guard, fingerprint, record sizes, guard Equals(field 0, key).
  (func (export "spindle_extension_binding_info") (param $index i32) (param $out i32) (result i32)
    (i32.store (local.get $out) (i32.const {id}))
    (i32.store offset=4 (local.get $out) (i32.const 1))
    (i64.store offset=8 (local.get $out) (i64.const {fingerprint}))
    (i64.store offset=16 (local.get $out) (i64.const {arguments}))
    (i64.store offset=24 (local.get $out) (i64.const {result}))
    (i32.store offset=32 (local.get $out) (i32.const 1))
    (i32.store offset=36 (local.get $out) (i32.const 0))
    (i64.store offset=40 (local.get $out) (i64.const {key}))
    (i32.const 0))
  ;; invoke: result.value = handle(arguments.value)
  (func (export "spindle_extension_invoke") (param $index i32) (param $arguments i32) (param $arguments_length i32) (param $result i32) (param $result_length i32) (result i32)
    (i64.store (local.get $result) (call $handle (i64.load offset=8 (local.get $arguments))))
    (i32.const 0)))"#,
        id = probe.id.0,
        fingerprint = probe.fingerprint.0 as i64,
        arguments = probe.arguments.size,
        result = probe.result.size,
    )
}

/// Probe key the grow-memory test module binds.
pub const WASM_GROW_KEY: u64 = 9;
/// Probe key the endless-loop test module binds (`kernel/src/ktest/leaks.rs`).
pub const WASM_LOOP_KEY: u64 = 10;

/// A module with one `clock.Tick` binding (no guard) whose handler loops forever: the
/// event's primary module caps its budget far below the manifest's.
fn tick_loop_module() -> String {
    let tick = spindle_abi::event::CLOCK_TICK.descriptor();
    format!(
        r#"(module
  (memory (export "memory") 1)
  (func (export "spindle_extension_binding_count") (result i32) (i32.const 1))
  (func (export "spindle_extension_exchange") (result i32) (i32.const 1024))
  ;; BindingInfo: event id, no guard, fingerprint, record sizes.
  (func (export "spindle_extension_binding_info") (param $index i32) (param $out i32) (result i32)
    (i32.store (local.get $out) (i32.const {id}))
    (i32.store offset=4 (local.get $out) (i32.const 0))
    (i64.store offset=8 (local.get $out) (i64.const {fingerprint}))
    (i64.store offset=16 (local.get $out) (i64.const {arguments}))
    (i64.store offset=24 (local.get $out) (i64.const {result}))
    (i32.const 0))
  (func (export "spindle_extension_invoke") (param $index i32) (param $arguments i32) (param $arguments_length i32) (param $result i32) (param $result_length i32) (result i32)
    (loop $again (br $again))
    (i32.const 0)))"#,
        id = tick.id.0,
        fingerprint = tick.fingerprint.0 as i64,
        arguments = tick.arguments.size,
        result = tick.result.size,
    )
}

/// Builds the `test-wasm-*` entries: hand-written modules (unsigned, kind Wasm) that
/// each reach one refusal or containment path of the kernel's Wasm loader.
pub fn build_wasm() -> Result<Vec<(String, Vec<u8>)>> {
    let abi = spindle_abi::abi_fingerprint().0;
    let unsigned = |name: &str, domains: &[&str], module: &[u8]| {
        pack(Kind::Wasm, abi, &wasm_test_manifest(name, domains), module, None).map_err(|error| format!("packing {name}: {error}"))
    };
    let text = |source: &str| wat::parse_str(source).map_err(|error| format!("a Wasm test module does not assemble: {error}"));
    let answer = "(func $handle (param $value i64) (result i64) (i64.mul (local.get $value) (i64.const 2)))";
    let mut invalid = b"\0asm\x01\0\0\0".to_vec();
    invalid.extend_from_slice(b"\x01\xff\xff\xff\xff\x0f garbage");
    let endless = "(func $handle (param $value i64) (result i64) (loop $again (br $again)) (i64.const 0))";
    // A small budget (50 µs: 50,000 units of fuel), so running out of fuel is quick.
    let short_budget = Manifest { budget_microseconds: 50, ..wasm_test_manifest("test-wasm-loop", &[]) };
    // The budget of `faulty` (10 ms), far above `clock.Tick`'s cap.
    let tick_manifest = Manifest { events: vec!["clock.Tick".into()], budget_microseconds: 10_000, ..wasm_test_manifest("test-wasm-tick-loop", &[]) };
    let pack_unsigned = |name: &str, manifest: &Manifest, module: &[u8]| {
        pack(Kind::Wasm, abi, manifest, module, None).map_err(|error| format!("packing {name}: {error}"))
    };
    Ok(vec![
        ("test-wasm-loop".into(), pack_unsigned("test-wasm-loop", &short_budget, &text(&contract_module(endless, WASM_LOOP_KEY))?)?),
        ("test-wasm-tick-loop".into(), pack_unsigned("test-wasm-tick-loop", &tick_manifest, &text(&tick_loop_module())?)?),
        ("test-wasm-invalid".into(), unsigned("test-wasm-invalid", &[], &invalid)?),
        (
            "test-wasm-ungranted-import".into(),
            unsigned(
                "test-wasm-ungranted-import",
                &["console"],
                &text(&contract_module(&format!(r#"(import "spindle" "spindle_clock_ticks" (func $ticks (result i64))) {answer}"#), 1))?,
            )?,
        ),
        (
            "test-wasm-unknown-import".into(),
            unsigned(
                "test-wasm-unknown-import",
                &["console"],
                &text(&contract_module(&format!(r#"(import "spindle" "spindle_no_such_function" (func)) {answer}"#), 1))?,
            )?,
        ),
        (
            "test-wasm-foreign-import".into(),
            unsigned("test-wasm-foreign-import", &[], &text(&contract_module(&format!(r#"(import "env" "abort" (func)) {answer}"#), 1))?)?,
        ),
        (
            "test-wasm-start-loops".into(),
            unsigned("test-wasm-start-loops", &[], &text(&contract_module(&format!("(func $spin (loop $again (br $again))) (start $spin) {answer}"), 1))?)?,
        ),
        (
            "test-wasm-initial-memory".into(),
            unsigned("test-wasm-initial-memory", &[], &text(&contract_module(answer, 1).replacen("(memory (export \"memory\") 1)", "(memory (export \"memory\") 16)", 1))?)?,
        ),
        (
            // Grows its memory one page at a time, forever: past the limit, the grow traps.
            "test-wasm-grows-memory".into(),
            unsigned(
                "test-wasm-grows-memory",
                &[],
                &text(&contract_module(
                    "(func $handle (param $value i64) (result i64) (loop $again (drop (memory.grow (i32.const 1))) (br $again)) (i64.const 0))",
                    WASM_GROW_KEY,
                ))?,
            )?,
        ),
    ])
}
