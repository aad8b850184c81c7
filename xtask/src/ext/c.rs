//! Wasm extensions in C: the generated header and the clang build.
//!
//! Any language that compiles to `wasm32` can implement the Wasm contract
//! (`spindle_abi::wasm`). For C, the builder generates `target/spindle/include/spindle.h`
//! from the same declarations as the Rust glue — [`KERNEL_FUNCTIONS`] (as Wasm imports
//! from module `"spindle"`), every event's id, name, fingerprint and records (C structs
//! with `_Static_assert`s on size and field offsets), the binding-description layout, the
//! guard kinds and error codes, and FNV-1a `spindle_fingerprint_of` — so C cannot
//! disagree with Rust about a type without failing to compile or to load.
//!
//! A C extension is a directory under `extensions/` with an `extension.toml` (the
//! manifest: name, version, budget, quota, domains, events, sources) and C sources, no
//! `Cargo.toml`. It is compiled by Debian's `clang` and linked by `wasm-ld` (package
//! `lld`), which xtask installs with `apt-get` when run as root (otherwise it prints the
//! command), then checked and packed exactly like a Rust Wasm extension. The trusted
//! builder's Rust rules do not apply: the Wasm sandbox contains the module, and
//! [`super::wasm_check`] checks its imports, exports and memory.

use std::fs;
use std::path::{Path, PathBuf};

use spindle_abi::event::{EventDescriptor, KERNEL_EVENTS, MEASUREMENT_EVENTS, RecordDescriptor};
use spindle_abi::host::{ArgumentKind, KERNEL_FUNCTIONS, KernelFunction};
use spindle_abi::native::{ErrorCode, MAX_GUARDS, guard_kind};
use spindle_abi::wasm::{ARGUMENTS_OFFSET, EXCHANGE_SIZE, EXPORTED_FUNCTIONS, RESULT_OFFSET, WASM_IMPORT_MODULE, WASM_STACK_SIZE};
use spindle_loader::Manifest;

use super::wasm_check::NOT_FOR_WASM;
use super::write_if_changed;
use crate::Result;
use crate::kernel_build::workspace_root;

/// Debian packages that provide the C compiler and the Wasm linker.
const C_PACKAGES: &[&str] = &["clang", "lld"];

/// A C extension's `extension.toml`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Description {
    name: String,
    version: String,
    budget_us: u64,
    memory_bytes: u64,
    domains: Vec<String>,
    events: Vec<String>,
    sources: Vec<String>,
}

/// A C extension found under `extensions/`.
pub struct CExtension {
    /// What the user named it.
    argument: String,
    /// Its directory (canonical, inside the extensions root).
    directory: PathBuf,
    /// The extensions root it was found under.
    extensions_root: PathBuf,
    description: Description,
}

/// The C extension `name_or_path` names (a directory under `extensions/` holding an
/// `extension.toml` and no `Cargo.toml`), or `None` for anything else.
///
/// Errors: such a directory outside `extensions`, or its `extension.toml` cannot be read
/// or parsed.
pub fn find(name_or_path: &str, extensions: &Path) -> Result<Option<CExtension>> {
    let candidate = Path::new(name_or_path);
    let directory = if candidate.is_dir() { candidate.to_path_buf() } else { extensions.join(name_or_path) };
    let manifest = directory.join("extension.toml");
    if !manifest.is_file() || directory.join("Cargo.toml").exists() {
        return Ok(None);
    }
    let (Ok(directory), Ok(root)) = (directory.canonicalize(), extensions.canonicalize()) else { return Ok(None) };
    if !directory.starts_with(&root) || directory == root {
        return Err(format!(
            "refusing to build `{name_or_path}`: {} is not inside {} (an extension is a crate or a C extension's directory under extensions/)",
            directory.display(),
            root.display()
        ));
    }
    let text = fs::read_to_string(&manifest).map_err(|error| format!("cannot read {}: {error}", manifest.display()))?;
    let description = toml::from_str(&text).map_err(|error| format!("{}: {error}", manifest.display()))?;
    Ok(Some(CExtension { argument: name_or_path.to_string(), directory, extensions_root: root, description }))
}

/// Checks a C extension before any tool runs: its tree ([`super::rules::check_tree`]),
/// its sources (relative paths of `.c` files inside its directory, no `..`), and its
/// manifest ([`Manifest::parse`] of the canonical text, so `extension.toml` obeys the
/// loader's rules).
///
/// Errors: the refusal, naming the file or the key.
fn check(extension: &CExtension) -> Result<Manifest> {
    if let Err(violations) = super::rules::check_tree(&extension.directory, &extension.extensions_root) {
        let refusal = super::rules::CheckError::Refused { crate_argument: extension.argument.clone(), technology: super::Technology::Wasm, violations };
        return Err(refusal.to_string());
    }
    let description = &extension.description;
    let toml_path = extension.directory.join("extension.toml");
    if description.sources.is_empty() {
        return Err(format!("{}: `sources` names no C file", toml_path.display()));
    }
    for source in &description.sources {
        let path = Path::new(source);
        let plain = path.components().all(|component| matches!(component, std::path::Component::Normal(_)));
        let is_c = path.extension().is_some_and(|extension| extension == "c");
        let is_file = fs::symlink_metadata(extension.directory.join(path)).is_ok_and(|metadata| metadata.is_file());
        if !(plain && is_c && is_file) {
            return Err(format!(
                "{}: source {source:?} must be a `.c` file inside the extension's directory, named by a relative path without `..`",
                toml_path.display()
            ));
        }
    }
    super::check_budget(description.budget_us, &format!("{}: budget_us", toml_path.display()))?;
    let manifest = Manifest {
        name: description.name.clone(),
        version: description.version.clone(),
        entry: spindle_abi::native::BINDING_COUNT_SYMBOL.into(),
        events: description.events.clone(),
        domains: description.domains.clone(),
        budget_microseconds: description.budget_us,
        memory_quota_bytes: description.memory_bytes,
    };
    Manifest::parse(&manifest.to_text()).map_err(|error| format!("{}: {error}", toml_path.display()))
}

/// Compiles a C extension into a Wasm module at `<output>/<name>.wasm`; returns its
/// manifest (parsed back, so `extension.toml` obeys the manifest's rules), the module
/// and its path. Nothing runs before [`check`] passes; clang runs with the builder's
/// cleaned environment and working directory ([`super::tools`]).
///
/// Errors: a refusal of [`check`], missing tools that cannot be installed, a compile error.
pub fn build(extension: &CExtension, output: &Path) -> Result<(Manifest, Vec<u8>, PathBuf)> {
    let manifest = check(extension)?;
    let header = write_header()?;
    let clang = ensure_c_tools()?;
    let module_path = output.join(format!("{}.wasm", manifest.name));
    fs::create_dir_all(output).map_err(|error| format!("cannot create {}: {error}", output.display()))?;
    let mut command = super::tools::command(clang)?;
    command
        .args(["--target=wasm32-unknown-unknown", "-std=c11", "-O2", "-ffreestanding", "-nostdlib", "-mbulk-memory"])
        .args(["-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(header.parent().ok_or("the header has no directory")?)
        .args(["-Wl,--no-entry", &format!("-Wl,-z,stack-size={WASM_STACK_SIZE}"), "-Wl,--strip-debug"]);
    for symbol in EXPORTED_FUNCTIONS {
        command.arg(format!("-Wl,--export={symbol}"));
    }
    for source in &extension.description.sources {
        command.arg(extension.directory.join(source));
    }
    command.arg("-o").arg(&module_path);
    super::tools::run_build(command, &format!("compiling `{}` with clang", manifest.name))?;
    let module = fs::read(&module_path).map_err(|error| format!("cannot read {}: {error}", module_path.display()))?;
    Ok((manifest, module, module_path))
}

/// Finds `clang` and `wasm-ld`, installing Debian's packages when missing (as root;
/// otherwise the error says which command to run).
pub(crate) fn ensure_c_tools() -> Result<PathBuf> {
    let find = || crate::setup::find_on_path("clang").filter(|_| crate::setup::find_on_path("wasm-ld").is_some());
    if let Some(clang) = find() {
        return Ok(clang);
    }
    let packages = C_PACKAGES.join(" ");
    if !crate::setup::running_as_root() || crate::setup::find_on_path("apt-get").is_none() {
        return Err(format!(
            "building a C extension needs clang and wasm-ld. Install them with:\n    sudo apt-get update && sudo apt-get install -y {packages}"
        ));
    }
    eprintln!("xtask: clang or wasm-ld missing; installing Debian packages: {packages}");
    crate::setup::run_apt(&["update"])?;
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(C_PACKAGES);
    crate::setup::run_apt(&install)?;
    find().ok_or_else(|| format!("installed {packages}, but clang or wasm-ld is still not on PATH"))
}

/// Writes `target/spindle/include/spindle.h` (only if it changed) and returns its path.
pub fn write_header() -> Result<PathBuf> {
    let path = workspace_root().join("target/spindle/include/spindle.h");
    write_if_changed(&path, header_text()?.as_bytes())?;
    Ok(path)
}

/// `CamelCase` → `camel_case`.
fn snake_case(name: &str) -> String {
    let mut text = String::new();
    for (index, character) in name.chars().enumerate() {
        if character.is_ascii_uppercase() && index > 0 {
            text.push('_');
        }
        text.push(character.to_ascii_lowercase());
    }
    text
}

/// `"console.Line"` → `CONSOLE_LINE`.
fn event_macro(name: &str) -> String {
    name.split('.').map(snake_case).collect::<Vec<_>>().join("_").to_ascii_uppercase()
}

/// A Rust type of the ABI (as `stringify!` writes it) in C.
fn c_type(rust: &str) -> Result<&'static str> {
    Ok(match rust.replace(' ', "").as_str() {
        "*constu8" => "const uint8_t *",
        "*mutu8" => "uint8_t *",
        "usize" => "size_t",
        "u8" => "uint8_t",
        "u16" => "uint16_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "i8" => "int8_t",
        "i16" => "int16_t",
        "i32" => "int32_t",
        "i64" => "int64_t",
        other => return Err(format!("no C type for the ABI type `{other}`")),
    })
}

/// One kernel function's C declaration, from its signature text
/// (`fn(pointer : *const u8, length : usize) -> !`).
fn c_function(name: &str, signature: &str) -> Result<String> {
    let inner = signature.strip_prefix("fn(").ok_or_else(|| format!("signature of {name}: {signature}"))?;
    let (arguments, result) = inner.split_once(')').ok_or_else(|| format!("signature of {name}: {signature}"))?;
    let result = result.trim().strip_prefix("->").map(str::trim);
    let mut parameters = Vec::new();
    for argument in arguments.split(',').map(str::trim).filter(|argument| !argument.is_empty()) {
        let (argument_name, ty) = argument.split_once(':').ok_or_else(|| format!("argument of {name}: {argument}"))?;
        let ty = c_type(ty)?;
        let separator = if ty.ends_with('*') { "" } else { " " };
        parameters.push(format!("{ty}{separator}{}", argument_name.trim()));
    }
    let parameters = if parameters.is_empty() { "void".to_string() } else { parameters.join(", ") };
    let returns = match result {
        None => "void".to_string(),
        Some("!") => "_Noreturn void".to_string(),
        Some(ty) => c_type(ty)?.to_string(),
    };
    Ok(format!(
        "__attribute__((import_module(\"{WASM_IMPORT_MODULE}\"), import_name(\"{name}\")))\n{returns} {name}({parameters});\n"
    ))
}

/// A service function for C: the import (a byte range is one `uint64_t`, offset low and
/// length high, as `spindle_abi::host::pack_wasm_range`) and an inline wrapper under the
/// symbol's own name taking each range as a pointer and a length.
fn c_service_function(function: &KernelFunction) -> String {
    let short = function.name.strip_prefix("spindle_").unwrap_or(function.name);
    let returns = if function.returns_value { "uint64_t" } else { "void" };
    let mut import_parameters = Vec::new();
    let mut wrapper_parameters = Vec::new();
    let mut arguments = Vec::new();
    for parameter in function.parameters {
        let name = parameter.name;
        import_parameters.push(format!("uint64_t {name}"));
        match parameter.kind {
            ArgumentKind::U64 => {
                wrapper_parameters.push(format!("uint64_t {name}"));
                arguments.push(name.to_string());
            }
            ArgumentKind::Bytes | ArgumentKind::BytesMut => {
                let constness = if parameter.kind == ArgumentKind::Bytes { "const " } else { "" };
                wrapper_parameters.push(format!("{constness}uint8_t *{name}, size_t {name}_length"));
                arguments.push(format!("spindle_range({name}, {name}_length)"));
            }
        }
    }
    let list = |parameters: &[String]| if parameters.is_empty() { "void".to_string() } else { parameters.join(", ") };
    let result = if function.returns_value { "return " } else { "" };
    format!(
        "__attribute__((import_module(\"{WASM_IMPORT_MODULE}\"), import_name(\"{name}\")))\n{returns} spindle_import_{short}({});\n\
         static inline {returns} {name}({}) {{\n    {result}spindle_import_{short}({});\n}}\n",
        list(&import_parameters),
        list(&wrapper_parameters),
        arguments.join(", "),
        name = function.name,
    )
}

fn record(text: &mut String, record: &RecordDescriptor) -> Result<()> {
    if record.fields.is_empty() {
        return Ok(());
    }
    let name = snake_case(record.type_name);
    text.push_str(&format!("/* {} */\nstruct spindle_{name} {{\n", record.signature));
    for field in record.fields {
        for line in field.doc {
            text.push_str(&format!("    /*{line} */\n"));
        }
        text.push_str(&format!("    {} {};\n", c_type(field.type_name)?, field.name));
    }
    text.push_str("};\n");
    text.push_str(&format!("_Static_assert(sizeof(struct spindle_{name}) == {}, \"size of {}\");\n", record.size, record.type_name));
    for (index, field) in record.fields.iter().enumerate() {
        text.push_str(&format!(
            "_Static_assert(offsetof(struct spindle_{name}, {}) == {}, \"offset of {}.{}\");\n#define SPINDLE_FIELD_{}_{} {index}\n",
            field.name,
            field.offset,
            record.type_name,
            field.name,
            name.to_ascii_uppercase(),
            field.name.to_ascii_uppercase()
        ));
    }
    text.push('\n');
    Ok(())
}

fn event(text: &mut String, event: &EventDescriptor) {
    let name = event_macro(event.name);
    text.push_str(&format!(
        "/* {} */\n#define SPINDLE_EVENT_{name}_ID {}u\n#define SPINDLE_EVENT_{name}_NAME \"{}\"\n#define SPINDLE_EVENT_{name}_FINGERPRINT 0x{:016x}ull\n#define SPINDLE_EVENT_{name}_ARGUMENTS_SIZE {}u\n#define SPINDLE_EVENT_{name}_RESULT_SIZE {}u\n\n",
        event.declaration, event.id.0, event.name, event.fingerprint.0, event.arguments.size, event.result.size
    ));
}

/// The header's text.
pub fn header_text() -> Result<String> {
    let mut text = String::from(
        "/* spindle.h: the Spindle extension ABI for C, generated by `cargo xtask ext header`\n \
         * from abi/ (do not edit). Compile with clang --target=wasm32-unknown-unknown; see\n \
         * docs/wasm-extensions.md. */\n#ifndef SPINDLE_H\n#define SPINDLE_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n",
    );
    text.push_str(&format!("#define SPINDLE_ABI_FINGERPRINT 0x{:016x}ull\n\n", spindle_abi::abi_fingerprint().0));
    text.push_str("/* ---- Kernel functions (imports from module \"spindle\"; pointers are linear-memory offsets) ---- */\n\n");
    text.push_str(
        "/* A byte range as a kernel function takes it: offset in the low 32 bits, length in the high 32. */\n\
         static inline uint64_t spindle_range(const void *pointer, size_t length) {\n    \
         return (uint64_t)(uintptr_t)pointer | ((uint64_t)length << 32);\n}\n\n",
    );
    for function in KERNEL_FUNCTIONS {
        if NOT_FOR_WASM.contains(&function.name) {
            text.push_str(&format!("/* {} (domain {}): native only; a Wasm module's heap is its linear memory. */\n\n", function.name, function.domain));
            continue;
        }
        text.push_str(&format!("/* domain \"{}\", fingerprint 0x{:016x} */\n", function.domain, function.fingerprint.0));
        if function.runtime {
            text.push_str(&c_function(function.name, function.signature)?);
        } else {
            text.push_str(&c_service_function(function));
        }
        text.push('\n');
    }
    text.push_str("/* ---- Events and their records ---- */\n\n");
    let mut seen = Vec::new();
    for descriptor in KERNEL_EVENTS.iter().chain(MEASUREMENT_EVENTS) {
        for record_descriptor in [&descriptor.arguments, &descriptor.result] {
            if !seen.contains(&record_descriptor.type_name) {
                seen.push(record_descriptor.type_name);
                record(&mut text, record_descriptor)?;
            }
        }
        event(&mut text, descriptor);
    }
    text.push_str("/* ---- The contract (spindle_abi::native, spindle_abi::wasm) ---- */\n\n");
    for symbol in EXPORTED_FUNCTIONS {
        text.push_str(&format!("/* export: {symbol} */\n"));
    }
    text.push_str(&format!(
        "#define SPINDLE_EXCHANGE_SIZE {EXCHANGE_SIZE}\n#define SPINDLE_ARGUMENTS_OFFSET {ARGUMENTS_OFFSET}\n#define SPINDLE_RESULT_OFFSET {RESULT_OFFSET}\n#define SPINDLE_MAX_GUARDS {MAX_GUARDS}\n\
         #define SPINDLE_GUARD_EQUALS {}\n#define SPINDLE_GUARD_IN_RANGE {}\n#define SPINDLE_GUARD_MASK {}\n\n",
        guard_kind::EQUALS,
        guard_kind::IN_RANGE,
        guard_kind::MASK
    ));
    for code in [ErrorCode::NoSuchBinding, ErrorCode::BufferTooSmall, ErrorCode::BadValue, ErrorCode::TooManyGuards, ErrorCode::NullPointer] {
        text.push_str(&format!("#define SPINDLE_ERROR_{} ({})\n", snake_case(&format!("{code:?}")).to_ascii_uppercase(), code as i32));
    }
    text.push_str(
        "\n/* A declarative guard (spindle_abi::native::RawGuard). */\nstruct spindle_raw_guard {\n    uint32_t kind;\n    uint32_t field;\n    uint64_t a;\n    uint64_t b;\n};\n\
         _Static_assert(sizeof(struct spindle_raw_guard) == 24, \"RawGuard\");\n\n\
         /* One binding described (spindle_abi::native::BindingInfo). */\nstruct spindle_binding_info {\n    uint32_t event_id;\n    uint32_t guard_count;\n    uint64_t event_fingerprint;\n    uint64_t arguments_size;\n    uint64_t result_size;\n    struct spindle_raw_guard guards[SPINDLE_MAX_GUARDS];\n    /* Native direct entry and its context (0: none; C extensions are marshalled). */\n    uint64_t direct_entry;\n    uint64_t direct_context;\n};\n",
    );
    text.push_str(&format!(
        "_Static_assert(sizeof(struct spindle_binding_info) == {}, \"BindingInfo\");\n\n",
        std::mem::size_of::<spindle_abi::native::BindingInfo>()
    ));
    text.push_str(
        "/* FNV-1a, as spindle_abi::fingerprint_of: e.g. a console command's fingerprint. */\n\
         static inline uint64_t spindle_fingerprint_of(const char *text) {\n    uint64_t hash = 0xcbf29ce484222325ull;\n    \
         for (; *text; text++) {\n        hash ^= (uint8_t)*text;\n        hash *= 0x100000001b3ull;\n    }\n    return hash;\n}\n\n#endif /* SPINDLE_H */\n",
    );
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_declares_imports_records_and_events() {
        let header = header_text().unwrap();
        assert!(header.contains("import_name(\"spindle_console_write\")))\nvoid spindle_import_console_write(uint64_t text);"), "{header}");
        assert!(
            header.contains("static inline void spindle_console_write(const uint8_t *text, size_t text_length) {\n    spindle_import_console_write(spindle_range(text, text_length));\n}"),
            "{header}"
        );
        assert!(header.contains(
            "static inline uint64_t spindle_block_read(uint64_t request, uint64_t offset, uint8_t *destination, size_t destination_length) {\n    \
             return spindle_import_block_read(request, offset, spindle_range(destination, destination_length));"
        ));
        assert!(header.contains("_Noreturn void spindle_extension_panic("));
        assert!(header.contains("uint64_t spindle_import_clock_ticks(void);\nstatic inline uint64_t spindle_clock_ticks(void) {"));
        assert!(!header.contains("void spindle_extension_alloc("));
        assert!(header.contains("struct spindle_console_line {") && header.contains("#define SPINDLE_FIELD_PROBE_KEY 0"));
        assert!(header.contains("#define SPINDLE_EVENT_BENCH_PROBE_ID 1000u"));
        assert_eq!(event_macro("console.Line"), "CONSOLE_LINE");
        assert_eq!(snake_case("NoSuchBinding"), "no_such_binding");
    }

    const C_MANIFEST: &str = "name = \"demo-c\"\nversion = \"0.1.0\"\nbudget_us = 100\nmemory_bytes = 65536\ndomains = []\nevents = []\nsources = [\"demo.c\"]\n";

    /// The refusal `build` gives for a C extension made of `files`, before any tool runs
    /// (the output directory is never created: clang would have needed it).
    fn refusal(files: &[(&str, &str)]) -> String {
        let extensions = crate::ext::tree::tests::TemporaryExtensions::new("c-check");
        extensions.write_crate("demo-c", files);
        let found = find("demo-c", &extensions.root).unwrap().expect("a C extension");
        let output = extensions.root.join("never-created");
        let error = build(&found, &output).map(|_| ()).unwrap_err();
        assert!(!output.exists(), "a tool ran: {error}");
        error
    }

    #[test]
    fn a_c_extension_tree_that_steers_the_build_is_refused_before_clang() {
        let error = refusal(&[("extension.toml", C_MANIFEST), ("demo.c", "int x;\n"), (".cargo/config.toml", "[build]\n")]);
        assert!(error.contains("as a Wasm extension") && error.contains("demo-c/.cargo/config.toml"), "{error}");
        let error = refusal(&[("extension.toml", C_MANIFEST), ("demo.c", "int x;\n"), ("rust-toolchain.toml", "[toolchain]\n")]);
        assert!(error.contains("demo-c/rust-toolchain.toml"), "{error}");
    }

    #[test]
    fn a_c_budget_outside_the_limit_is_refused_naming_it() {
        for budget in ["0", "1000001"] {
            let manifest = C_MANIFEST.replace("budget_us = 100", &format!("budget_us = {budget}"));
            let error = refusal(&[("extension.toml", &manifest), ("demo.c", "int x;\n")]);
            assert!(error.contains(&format!("extension.toml: budget_us is {budget} us")) && error.contains("1 ..= 1000000 us (MAX_BUDGET_MICROSECONDS"), "{error}");
        }
    }

    #[test]
    fn c_sources_must_be_c_files_inside_the_directory() {
        for source in ["../demo.c", "/etc/hostname", "demo.h", "missing.c", "-fplugin=x.c"] {
            let manifest = C_MANIFEST.replace("\"demo.c\"", &format!("{source:?}"));
            let error = refusal(&[("extension.toml", &manifest), ("demo.c", "int x;\n"), ("demo.h", "int y;\n")]);
            assert!(error.contains(&format!("source {source:?} must be a `.c` file inside")), "{source}: {error}");
        }
    }

    #[test]
    fn a_c_extension_outside_extensions_is_refused() {
        let extensions = crate::ext::tree::tests::TemporaryExtensions::new("c-outside");
        let elsewhere = extensions.root.parent().unwrap().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::write(elsewhere.join("extension.toml"), C_MANIFEST).unwrap();
        let error = find(&elsewhere.display().to_string(), &extensions.root).map(|_| ()).unwrap_err();
        assert!(error.contains("is not inside"), "{error}");
    }
}
