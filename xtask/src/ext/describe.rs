//! The describe step without running extension code on the builder's machine.
//!
//! The manifest comes from the crate's `extension!` declaration, which only the compiled
//! crate can report. `#![no_std]` and `#![forbid(unsafe_code)]` do not stop a crate from
//! saying `extern crate std;` and calling `std::process::Command` in safe code, so the
//! builder never runs the extension natively: the generated describe crate
//! ([`super::glue::describe`]) is a `wasm32-unknown-unknown` module whose one export,
//! [`DESCRIBE_EXPORT`], writes the declaration as text into its linear memory, and
//! [`run`] executes it under `wasmi` — bounded fuel, a memory limit, and every import a
//! trap — so nothing it does can reach files, processes or the network.
//!
//! The text is a list of `key=LENGTH:VALUE\n` records (the length in bytes makes it
//! immune to a newline inside a value): `name`, `version`, `budget_microseconds`,
//! `memory_quota_bytes` once each, then `domain` and `event` (one per binding) repeated.
//! [`manifest`] turns it into a [`Manifest`] and checks it round-trips through the
//! loader's own parser.

use spindle_loader::Manifest;
use wasmi::{Linker, Module, Store, StoreLimits, StoreLimitsBuilder, Val};

/// The describe module's one export: `() -> i64`, the text's offset in linear memory
/// (high 32 bits) and its length (low 32 bits).
pub const DESCRIBE_EXPORT: &str = "spindle_describe";
/// Fuel for the describe call (one unit per instruction): formatting a declaration takes
/// a few thousand; a loop is cut off quickly.
const DESCRIBE_FUEL: u64 = 50_000_000;
/// Largest linear memory the describe module may have or grow to.
const DESCRIBE_MEMORY_LIMIT: usize = 16 * 1024 * 1024;

/// Runs the describe module `bytes` in the sandbox and returns its text.
///
/// Errors: the module does not validate, imports anything but kernel functions (which
/// trap if called), runs out of fuel or memory, traps, or its text is not UTF-8 or lies
/// outside its memory.
pub fn run(bytes: &[u8]) -> Result<String, String> {
    let engine = super::wasm_check::engine();
    let module = Module::new(&engine, bytes).map_err(|error| format!("the describe module does not validate: {error}"))?;
    let limits = StoreLimitsBuilder::new().memory_size(DESCRIBE_MEMORY_LIMIT).instances(1).memories(1).trap_on_grow_failure(true).build();
    let mut store = Store::new(&engine, limits);
    store.limiter(|limits: &mut StoreLimits| limits);
    store.set_fuel(DESCRIBE_FUEL).map_err(|error| error.to_string())?;
    let mut linker = Linker::<StoreLimits>::new(&engine);
    for import in module.imports() {
        let known = import.module() == spindle_abi::wasm::WASM_IMPORT_MODULE
            && spindle_abi::host::KERNEL_FUNCTIONS.iter().any(|function| function.name == import.name());
        let Some(ty) = import.ty().func().filter(|_| known) else {
            return Err(format!("the describe module imports `{}.{}`, which is not a kernel function", import.module(), import.name()));
        };
        let name = import.name().to_string();
        linker
            .func_new(import.module(), import.name(), ty.clone(), move |_caller, _arguments: &[Val], _results: &mut [Val]| {
                Err(wasmi::Error::new(format!("the declaration called the kernel function `{name}` while being described")))
            })
            .map_err(|error| error.to_string())?;
    }
    let instance = linker.instantiate_and_start(&mut store, &module).map_err(|error| format!("the describe module does not start: {error}"))?;
    let describe = instance
        .get_typed_func::<(), i64>(&store, DESCRIBE_EXPORT)
        .map_err(|error| format!("the describe module has no `{DESCRIBE_EXPORT}: () -> i64` export: {error}"))?;
    let packed = describe.call(&mut store, ()).map_err(|error| format!("describing the declaration failed: {error}"))? as u64;
    let memory = instance.get_memory(&store, spindle_abi::wasm::MEMORY_EXPORT).ok_or("the describe module exports no memory")?;
    let (offset, length) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
    let text = memory
        .data(&store)
        .get(offset..offset.saturating_add(length))
        .ok_or_else(|| format!("the description ({length} bytes at {offset}) lies outside the module's memory"))?;
    String::from_utf8(text.to_vec()).map_err(|_| "the description is not UTF-8".to_string())
}

/// The records of a description, in order.
fn records(text: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut records = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after_key) = rest.split_once('=').ok_or_else(|| format!("a description record without `=`: {rest:?}"))?;
        let (length, after_length) = after_key.split_once(':').ok_or_else(|| format!("record `{key}` has no length"))?;
        let length: usize = length.parse().map_err(|_| format!("record `{key}` has the length {length:?}"))?;
        let value = after_length.get(..length).ok_or_else(|| format!("record `{key}` is cut short"))?;
        rest = after_length[length..].strip_prefix('\n').ok_or_else(|| format!("record `{key}` does not end its line"))?;
        records.push((key, value));
    }
    Ok(records)
}

/// The manifest a description states (events once each, in binding order), checked by the
/// loader's parser ([`Manifest::parse`] of its canonical text must give it back).
///
/// Errors: a malformed description, a missing, repeated or unknown key, a number that is
/// not one, a budget outside 1 ..= `MAX_BUDGET_MICROSECONDS` ([`super::check_budget`]), or
/// a manifest the loader would refuse (its error).
pub fn manifest(text: &str) -> Result<Manifest, String> {
    let mut single: [(&str, Option<&str>); 4] = [("name", None), ("version", None), ("budget_microseconds", None), ("memory_quota_bytes", None)];
    let (mut domains, mut events) = (Vec::new(), Vec::<String>::new());
    for (key, value) in records(text)? {
        match key {
            "domain" => domains.push(value.to_string()),
            "event" if !events.iter().any(|event| event == value) => events.push(value.to_string()),
            "event" => {}
            _ => {
                let slot = single.iter_mut().find(|(name, _)| *name == key).ok_or_else(|| format!("unknown description key `{key}`"))?;
                if slot.1.replace(value).is_some() {
                    return Err(format!("description key `{key}` given twice"));
                }
            }
        }
    }
    let value = |index: usize| single[index].1.ok_or_else(|| format!("the description has no `{}`", single[index].0));
    let number = |index: usize| value(index)?.parse::<u64>().map_err(|_| format!("`{}` is not a number: {:?}", single[index].0, single[index].1));
    let manifest = Manifest {
        name: value(0)?.to_string(),
        version: value(1)?.to_string(),
        entry: spindle_abi::native::BINDING_COUNT_SYMBOL.to_string(),
        events,
        domains,
        budget_microseconds: number(2)?,
        memory_quota_bytes: number(3)?,
    };
    super::check_budget(manifest.budget_microseconds, "the extension! declaration's budget_microseconds")?;
    let parsed = Manifest::parse(&manifest.to_text()).map_err(|error| error.to_string())?;
    if parsed != manifest {
        return Err(format!("the declaration does not survive the manifest's text form (a value has a character its key does not allow): {manifest:?}"));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module whose describe export returns `text` from a data segment, with `extra`
    /// added inside the module (imports, functions, a start function).
    fn module(text: &str, extra: &str, body: &str) -> Vec<u8> {
        let escaped: String = text.bytes().map(|byte| format!("\\{byte:02x}")).collect();
        let length = text.len();
        wat::parse_str(format!(
            r#"(module {extra}
                 (memory (export "memory") 1)
                 (data (i32.const 1024) "{escaped}")
                 (func (export "spindle_describe") (result i64) {body} (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {length}))))"#
        ))
        .unwrap()
    }

    const HELLO: &str = "name=5:hello\nversion=5:0.1.0\nbudget_microseconds=5:20000\nmemory_quota_bytes=5:65536\ndomain=7:console\ndomain=5:clock\nevent=12:console.Line\nevent=12:console.Line\n";

    #[test]
    fn a_description_becomes_the_manifest() {
        let text = run(&module(HELLO, "", "")).unwrap();
        let manifest = manifest(&text).unwrap();
        assert_eq!(manifest.name, "hello");
        assert_eq!(manifest.events, ["console.Line"]);
        assert_eq!(manifest.domains, ["console", "clock"]);
        assert_eq!((manifest.budget_microseconds, manifest.memory_quota_bytes), (20_000, 65_536));
        assert_eq!(manifest.entry, spindle_abi::native::BINDING_COUNT_SYMBOL);
    }

    #[test]
    fn the_sandbox_stops_loops_foreign_imports_and_kernel_calls() {
        eprintln!("loop");
        let looping = run(&module(HELLO, "", "(loop $again (br $again))")).unwrap_err();
        assert!(looping.contains("describing the declaration failed") && looping.contains("fuel"), "{looping}");
        eprintln!("foreign");
        let foreign = run(&module(HELLO, r#"(import "env" "system" (func))"#, "")).unwrap_err();
        assert!(foreign.contains("`env.system`"), "{foreign}");
        eprintln!("kernel");
        let kernel = run(&module(HELLO, r#"(import "spindle" "spindle_clock_ticks" (func $ticks (result i64)))"#, "(drop (call $ticks))")).unwrap_err();
        assert!(kernel.contains("spindle_clock_ticks"), "{kernel}");
        eprintln!("greedy");
        let greedy = run(&module(HELLO, "", "(drop (memory.grow (i32.const 1024)))")).unwrap_err();
        assert!(greedy.contains("describing the declaration failed"), "{greedy}");
        eprintln!("start");
        let starting = run(&module(HELLO, "(func $spin (loop $again (br $again))) (start $spin)", "")).unwrap_err();
        assert!(starting.contains("does not start"), "{starting}");
    }

    #[test]
    fn malformed_descriptions_are_refused() {
        let cases = [
            ("", "has no `name`"),
            ("name=3:abc\n", "has no `version`"),
            ("name=9:abc\n", "cut short"),
            ("name=3:abcd\n", "does not end its line"),
            (&HELLO.replace("name=5:hello", "name=5:hello\nname=5:again"), "given twice"),
            (&HELLO.replace("name=5:hello", "colour=3:red"), "unknown description key `colour`"),
            (&HELLO.replace("budget_microseconds=5:20000", "budget_microseconds=3:ten"), "is not a number"),
            (&HELLO.replace("name=5:hello", "name=11:hello\nevil="), "evil"),
            (&HELLO.replace("budget_microseconds=5:20000", "budget_microseconds=1:0"), "budget_microseconds is 0 us; a handler's budget must be 1 ..= 1000000 us"),
            (&HELLO.replace("budget_microseconds=5:20000", "budget_microseconds=7:1000001"), "is 1000001 us; a handler's budget must be 1 ..= 1000000 us (MAX_BUDGET_MICROSECONDS"),
        ];
        for (text, expected) in cases {
            let error = manifest(text).unwrap_err();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
