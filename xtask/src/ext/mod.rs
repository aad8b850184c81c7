//! `cargo xtask ext`: the trusted builder of extensions (DESIGN.md §5).
//!
//! `ext build <crate>` turns an extension crate under `extensions/` into a signed
//! `target/spindle/ext/<name>.kext` that the kernel's loader accepts (`--wasm` and
//! `--user` build the other technologies through the same first two steps):
//!
//! 1. **rules** ([`rules`]): the crate's tree steers nothing ([`tree`], before any tool
//!    runs), edition 2024, `#![no_std]`, `#![forbid(unsafe_code)]`, dependencies only
//!    `spindle-abi` and an allow-list, no build scripts or proc-macros. Every tool runs
//!    from the builder's own directory with a cleaned environment ([`tools`]);
//! 2. **describe** ([`glue::describe`]): a generated wasm32 module describes the crate's
//!    `extension!` declaration in a `wasmi` sandbox ([`describe`]); the manifest is
//!    checked with `Manifest::parse`;
//! 3. **glue + build** ([`glue::build_shared_object`]): a generated `no_std` staticlib
//!    exports the C entry points of `spindle_abi::native`, is compiled for
//!    `riscv64gc-unknown-none-elf` position-independent, and linked by rust-lld into a
//!    shared object;
//! 4. **check** ([`artifact::check`]): the loader's ELF checks, exactly the contract's
//!    exports, imports only kernel functions of the manifest's domains, a trial load;
//! 5. **sign and pack** with the builder's key ([`keys`]), then open the result with
//!    `spindle_loader::open` and the verifying key, as the kernel will.
//!
//! Design notes and limits: `docs/trusted-builder.md`.

mod artifact;
pub(crate) mod c;
mod describe;
mod domains;
mod glue;
mod keys;
#[cfg(test)]
mod macro_tests;
mod rules;
mod tools;
mod tree;
mod user_glue;
pub mod wasm_check;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use clap::Subcommand;
use spindle_loader::pack::{self, PackError};
use spindle_loader::{Kind, Manifest, Policy};

use crate::Result;
use crate::kernel_build::workspace_root;

pub use keys::{signing_key, verifying_key_hex};

/// The technologies an extension crate is built as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Technology {
    /// A signed native `.kext` (`ext build CRATE`).
    Native,
    /// A signed Wasm `.kext` (`ext build CRATE --wasm`; C extensions too).
    Wasm,
    /// A user program served by upcalls (`ext build CRATE --user`).
    User,
}

impl Technology {
    /// Its name in messages: `native`, `Wasm`, `user-level`.
    pub fn name(self) -> &'static str {
        match self {
            Technology::Native => "native",
            Technology::Wasm => "Wasm",
            Technology::User => "user-level",
        }
    }

    /// `a native extension`, `a Wasm extension`, `a user-level extension`.
    pub fn as_an_extension(self) -> &'static str {
        match self {
            Technology::Native => "a native extension",
            Technology::Wasm => "a Wasm extension",
            Technology::User => "a user-level extension",
        }
    }
}

/// `cargo xtask ext …` subcommands.
#[derive(Subcommand)]
pub enum ExtCommand {
    /// Build an extension crate: native (.kext, default), Wasm (--wasm) or user-level (--user).
    ///
    /// Without a flag, builds a signed native extension (target/spindle/ext/NAME.kext).
    /// CRATE is a directory name under extensions/ (`hello`) or a path inside it. The crate
    /// must be edition 2024, `#![no_std]` and `#![forbid(unsafe_code)]`, and depend only on
    /// spindle-abi (and the allow-list in xtask/src/ext/rules.rs), with no build scripts or
    /// proc-macros; otherwise it is refused, naming the rule and the place. The signing key
    /// is created on first use in $SPINDLE_KEY_DIR or ~/.config/spindle/ (see
    /// docs/trusted-builder.md); its verifying key is written to
    /// target/spindle/verifying-key.hex.
    ///
    /// With `--wasm`, builds the same crate for wasm32-unknown-unknown instead
    /// (target/spindle/ext/NAME.wasm.kext, kind Wasm, signed too): the same rules, a
    /// generated cdylib glue exporting the contract of spindle_abi::wasm, and kernel
    /// functions imported from module "spindle". A directory under extensions/ with an
    /// `extension.toml` and C sources instead of a Cargo.toml (`hello-c`) is compiled with
    /// clang to wasm32 against target/spindle/include/spindle.h (Wasm only); see
    /// docs/wasm-extensions.md.
    Build {
        /// The extension crate: a name under extensions/ or a path inside it.
        #[arg(value_name = "CRATE")]
        crate_name: String,
        /// Build the WebAssembly technology instead of the native one.
        #[arg(long, conflicts_with = "user")]
        wasm: bool,
        /// Build the user-level technology instead: a user program
        /// (target/spindle/ext/ext-NAME, bundle entry bin/ext-NAME) that serves the
        /// extension's events by upcalls (`ext load NAME user`); see docs/user-space.md.
        #[arg(long)]
        user: bool,
    },
    /// Write the C header target/spindle/include/spindle.h (kernel functions and event
    /// records, generated from abi/) and print its path.
    Header,
}

/// Runs an `ext` subcommand.
pub fn run(command: ExtCommand) -> Result<ExitCode> {
    match command {
        ExtCommand::Build { crate_name, user: true, .. } => build_user(&crate_name).map(|_| ExitCode::SUCCESS),
        ExtCommand::Build { crate_name, wasm: false, .. } => build_native(&crate_name).map(|_| ExitCode::SUCCESS),
        ExtCommand::Build { crate_name, wasm: true, .. } => build_wasm(&crate_name).map(|_| ExitCode::SUCCESS),
        ExtCommand::Header => c::write_header().map(|path| {
            println!("{}", path.display());
            ExitCode::SUCCESS
        }),
    }
}

/// What a build prints when it succeeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// The full summary (`ext build`): path, size, manifest, imports, …
    Summary,
    /// Nothing: the caller reports progress itself (`cargo xtask qemu`'s image build).
    Quiet,
}

/// Builds `crate_name` (a name under `extensions/` or a path inside it) as `technology`
/// and returns the artifact's path: [`build_native`], [`build_wasm`] or [`build_user`].
///
/// Each build is done once per xtask process: the crates do not change while xtask runs,
/// so a second request (the test image builds `hello`, then the hot-load tests ask for it
/// again) returns the first result, and the rules and describe step run once per crate for
/// all three technologies ([`prepare`]).
///
/// Errors: those of the build.
pub fn build(technology: Technology, crate_name: &str, report: Report) -> Result<PathBuf> {
    static BUILT: Mutex<BTreeMap<(Technology, String), PathBuf>> = Mutex::new(BTreeMap::new());
    let key = (technology, crate_name.to_string());
    if let Some(path) = BUILT.lock().map_err(|_| "a build panicked")?.get(&key) {
        return Ok(path.clone());
    }
    let started = Instant::now();
    crate::setup::ensure_rust_targets()?;
    let path = match technology {
        Technology::Native => native(crate_name, report, started)?,
        Technology::Wasm => wasm(crate_name, report, started)?,
        Technology::User => user(crate_name, report, started)?,
    };
    BUILT.lock().map_err(|_| "a build panicked")?.insert(key, path.clone());
    Ok(path)
}

/// Builds `crate_name` (a name under `extensions/` or a path inside it) as a signed native
/// extension, checks that the kernel's loader accepts it, prints a summary and returns the
/// path of the `.kext`.
///
/// Errors: a rule refusal (naming the rule and the place), a build, link, check, key or
/// packing failure, each as a message.
pub fn build_native(crate_name: &str) -> Result<PathBuf> {
    build(Technology::Native, crate_name, Report::Summary)
}

/// Builds `crate_name` as a Wasm extension (`target/spindle/ext/<name>.wasm.kext`, kind
/// Wasm, signed): the same rules and describe step as [`build_native`], then the Wasm
/// glue, the checks of [`wasm_check`], packing, and opening it as the kernel would. A C
/// extension (a directory with `extension.toml`) goes through [`c::build`] instead.
///
/// Errors: as [`build_native`], or a [`wasm_check::WasmCheckError`] as a message.
pub fn build_wasm(crate_name: &str) -> Result<PathBuf> {
    build(Technology::Wasm, crate_name, Report::Summary)
}

/// Builds `crate_name` as a user-level extension: the same rules and describe step as
/// [`build_native`], then a static user program from generated glue
/// ([`user_glue::build_user_program`]) at `target/spindle/ext/ext-<name>`, checked with the
/// kernel's executable checks (`spindle_process::Executable`) and the domain check of
/// every technology ([`domains::check`]). Returns its path.
///
/// Errors: as [`build_native`], or those checks refuse the program.
pub fn build_user(crate_name: &str) -> Result<PathBuf> {
    build(Technology::User, crate_name, Report::Summary)
}

/// The steps every Rust technology shares, done once per crate and xtask process: the
/// rules ([`rules::check_crate`]: the tree scan first, then `cargo metadata`) and the
/// sandboxed describe step ([`glue::describe`], which also checks the budget). Returns the
/// checked crate and its manifest (before any glue domains are added).
///
/// Errors: a C extension asked for as another technology than Wasm, a refusal, a failed
/// describe step.
fn prepare(crate_name: &str, technology: Technology) -> Result<(rules::CheckedCrate, Manifest)> {
    static PREPARED: Mutex<BTreeMap<String, (rules::CheckedCrate, Manifest)>> = Mutex::new(BTreeMap::new());
    if let Some(prepared) = PREPARED.lock().map_err(|_| "a build panicked")?.get(crate_name) {
        return Ok(prepared.clone());
    }
    let root = workspace_root();
    if technology != Technology::Wasm && c::find(crate_name, &root.join("extensions"))?.is_some() {
        return Err(format!("`{crate_name}` is a C extension, which builds only as Wasm, not {}: `cargo xtask ext build {crate_name} --wasm`", technology.name()));
    }
    let checked = rules::check_crate(crate_name, &root.join("extensions"), &root.join("abi/Cargo.toml"), technology).map_err(|error| error.to_string())?;
    let manifest = glue::describe(&checked)?;
    PREPARED.lock().map_err(|_| "a build panicked")?.insert(crate_name.to_string(), (checked.clone(), manifest.clone()));
    Ok((checked, manifest))
}

fn native(crate_name: &str, report: Report, started: Instant) -> Result<PathBuf> {
    let (checked, mut manifest) = prepare(crate_name, Technology::Native)?;
    let output_directory = workspace_root().join("target/spindle/ext");
    let shared_object_path = output_directory.join(format!("{}.so", manifest.name));
    glue::build_shared_object(&checked, &manifest, &shared_object_path)?;
    let shared_object = fs::read(&shared_object_path).map_err(|error| format!("cannot read {}: {error}", shared_object_path.display()))?;
    let checks = artifact::check(&shared_object, &mut manifest, glue::GLUE_IMPORTS)
        .map_err(|error| format!("refusing to sign {}: {error}", shared_object_path.display()))?;

    let kext_path = output_directory.join(format!("{}.kext", manifest.name));
    let (kext, verifying_key_hex) = sign_and_write(Kind::Native, &manifest, &shared_object, &kext_path)?;

    if report == Report::Summary {
        print_summary(&kext_path, kext.len(), &manifest, &checks, &verifying_key_hex, started);
    }
    Ok(kext_path)
}

fn wasm(crate_name: &str, report: Report, started: Instant) -> Result<PathBuf> {
    let root = workspace_root();
    let output_directory = root.join("target/spindle/ext");
    let (mut manifest, module, module_path) = match c::find(crate_name, &root.join("extensions"))? {
        Some(c_extension) => c::build(&c_extension, &output_directory)?,
        None => {
            let (checked, manifest) = prepare(crate_name, Technology::Wasm)?;
            let module_path = output_directory.join(format!("{}.wasm", manifest.name));
            glue::build_wasm_module(&checked, &manifest, &module_path)?;
            let module = fs::read(&module_path).map_err(|error| format!("cannot read {}: {error}", module_path.display()))?;
            (manifest, module, module_path)
        }
    };
    let checks = wasm_check::check(&module, &mut manifest, glue::GLUE_IMPORTS)
        .map_err(|error| format!("refusing to pack {}: {error}", module_path.display()))?;
    let kext_path = output_directory.join(format!("{}.wasm.kext", manifest.name));
    let (kext, _) = sign_and_write(Kind::Wasm, &manifest, &module, &kext_path)?;

    if report == Report::Summary {
        let shown = kext_path.strip_prefix(&root).unwrap_or(&kext_path);
        println!("ext build --wasm: {} ({} bytes, signed, {:.1} s)", shown.display(), kext.len(), started.elapsed().as_secs_f64());
        print_manifest(&manifest);
        let imports: Vec<String> = checks.imports.iter().map(|(symbol, domain)| format!("{symbol} ({domain})")).collect();
        println!("  imports:     {}", if imports.is_empty() { "none".to_string() } else { imports.join(", ") });
        println!("  module:      {} bytes, initial memory {} bytes, {} binding(s) described", module.len(), checks.initial_memory, checks.bindings);
    }
    Ok(kext_path)
}

fn user(crate_name: &str, report: Report, started: Instant) -> Result<PathBuf> {
    let root = workspace_root();
    let (checked, manifest) = prepare(crate_name, Technology::User)?;
    let path = root.join("target/spindle/ext").join(format!("{}{}", user_glue::PROGRAM_PREFIX, manifest.name));
    let bytes = user_glue::build_user_program(&checked, &manifest)?;
    let calls = check_user_program(&bytes, &manifest).map_err(|error| format!("refusing the user-level build of `{crate_name}`: {error}"))?;
    write_if_changed(&path, &bytes)?;
    if report == Report::Summary {
        let shown = path.strip_prefix(&root).unwrap_or(&path);
        println!("ext build --user: {} ({} bytes, {:.1} s)", shown.display(), bytes.len(), started.elapsed().as_secs_f64());
        print_manifest(&manifest);
        let calls: Vec<String> = calls.iter().map(|(symbol, domain)| format!("{symbol} ({domain})")).collect();
        println!("  calls:       {}", if calls.is_empty() { "no kernel functions".to_string() } else { calls.join(", ") });
    }
    Ok(path)
}

/// The checks on a user-level program before it is written: the kernel's executable
/// checks (`spindle_process::Executable`), and the domain check every technology applies
/// ([`domains::check`]) to the kernel functions it calls. Returns those, with their
/// domains.
///
/// Errors: the kernel would refuse the program, or it calls a kernel function of a domain
/// the manifest does not name.
fn check_user_program(program: &[u8], manifest: &Manifest) -> Result<Vec<(String, &'static str)>> {
    spindle_process::Executable::parse(program).map_err(|error| format!("the kernel would refuse the program: {error}"))?;
    let called = domains::user_program_kernel_functions(program)?;
    // The glue's own runtime functions (its panic path) are the glue's, not the extension's.
    let called = called.iter().map(String::as_str).filter(|name| !glue::GLUE_IMPORTS.contains(name));
    domains::check(called, manifest, &[]).map_err(|error| format!("the program calls kernel functions it may not: {error}"))
}

/// The budget rule every technology enforces before anything is packed: 1 ..=
/// [`MAX_BUDGET_MICROSECONDS`](spindle_abi::extension::MAX_BUDGET_MICROSECONDS) (one
/// second per handler call). `source` says where the budget was declared (the
/// `extension!` declaration, a C extension's `extension.toml`); the loader's manifest
/// parser refuses the same budgets, so this is the builder's clearer message for them.
///
/// Errors: the budget and the limit.
pub fn check_budget(budget_microseconds: u64, source: &str) -> Result<()> {
    use spindle_abi::extension::MAX_BUDGET_MICROSECONDS;
    if budget_microseconds == 0 || budget_microseconds > MAX_BUDGET_MICROSECONDS {
        return Err(format!(
            "{source} is {budget_microseconds} us; a handler's budget must be 1 ..= {MAX_BUDGET_MICROSECONDS} us (MAX_BUDGET_MICROSECONDS, one second per handler call)"
        ));
    }
    Ok(())
}

/// The bundle entry of a user-level build: `bin/ext-<name>`.
pub fn user_entry_name(name: &str) -> String {
    format!("{}{}{name}", crate::userspace::BUNDLE_PREFIX, user_glue::PROGRAM_PREFIX)
}

/// Signs and packs `payload` as a `.kext` of `kind`, opens it as the kernel would, and
/// writes it to `path` (only if it changed). Returns the bytes and the verifying key (hex).
fn sign_and_write(kind: Kind, manifest: &Manifest, payload: &[u8], path: &Path) -> Result<(Vec<u8>, String)> {
    let signing_key = keys::signing_key()?;
    let verifying_key_hex = verifying_key_hex()?;
    let abi_fingerprint = spindle_abi::abi_fingerprint().0;
    let kext = pack::pack(kind, abi_fingerprint, manifest, payload, Some(&signing_key))
        .map_err(|error: PackError| format!("cannot pack {}: {error}", manifest.name))?;
    verify_as_the_kernel_would(&kext, kind, &verifying_key_hex, abi_fingerprint, manifest, payload)?;
    write_if_changed(path, &kext)?;
    Ok((kext, verifying_key_hex))
}

/// Opens the packed bytes with the kernel's policy (signature mandatory here, ABI
/// fingerprint) and checks that the kind, manifest and payload come back unchanged.
fn verify_as_the_kernel_would(kext: &[u8], kind: Kind, verifying_key_hex: &str, abi_fingerprint: u64, manifest: &Manifest, payload: &[u8]) -> Result<()> {
    let verifying_key = pack::key_from_hex(verifying_key_hex).map_err(|error| error.to_string())?;
    let policy = Policy { verifying_key, abi_fingerprint, allow_unsigned_wasm: false };
    let opened = spindle_loader::open(kext, &policy).map_err(|error| format!("the packed extension does not open: {error}"))?;
    let opened_payload = opened.payload_of_kind(kind).map_err(|error| error.to_string())?;
    if !opened.is_signed() || opened.manifest() != manifest || opened_payload != payload {
        return Err("the packed extension opens, but not to the manifest and payload packed".into());
    }
    Ok(())
}

/// Prints the one-line manifest summary every `ext build` shows.
fn print_manifest(manifest: &Manifest) {
    println!(
        "  manifest:    {} {}, events [{}], domains [{}], budget {} us, quota {} bytes",
        manifest.name,
        manifest.version,
        manifest.events.join(", "),
        manifest.domains.join(", "),
        manifest.budget_microseconds,
        manifest.memory_quota_bytes
    );
}

fn print_summary(path: &Path, size: usize, manifest: &Manifest, report: &artifact::Report, verifying_key_hex: &str, started: Instant) {
    let shown = path.strip_prefix(workspace_root()).unwrap_or(path);
    println!("ext build: {} ({size} bytes, signed, {:.1} s)", shown.display(), started.elapsed().as_secs_f64());
    print_manifest(manifest);
    println!("  exports:     {}", report.exports.join(", "));
    let imports: Vec<String> = report.imports.iter().map(|(symbol, domain)| format!("{symbol} ({domain})")).collect();
    println!("  imports:     {}", if imports.is_empty() { "none".to_string() } else { imports.join(", ") });
    let kinds: Vec<String> = report.relocations.iter().map(|(kind, count)| format!("{count} {kind}")).collect();
    println!("  relocations: {} ({}); image {} bytes", report.relocation_count(), kinds.join(", "), report.image_size);
    println!("  verified:    opens with verifying key {verifying_key_hex} and the ABI fingerprint");
}

/// Writes `bytes` to `path` (creating its directory) unless it already holds exactly
/// them, so unchanged generated files keep their timestamps and builds stay incremental.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if fs::read(path).is_ok_and(|existing| existing == bytes) {
        return Ok(());
    }
    if let Some(directory) = path.parent() {
        fs::create_dir_all(directory).map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    }
    fs::write(path, bytes).map_err(|error| format!("cannot write {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An extension that calls `spindle_clock_ticks` but declares no domains: its glue
    /// installs nothing for `clock`, so its user-level build calls no kernel function of
    /// that domain (a call panics the extension at run time, naming the domain); declared,
    /// the program calls it through the generated system-call stub, and the check reports it.
    #[test]
    fn a_user_level_program_imports_only_its_declared_domains() {
        let extensions = tree::tests::TemporaryExtensions::new("user-domains");
        let cargo_manifest = format!(
            "[package]\nname = \"undeclared-domain-test\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\nspindle-abi = {{ path = {:?} }}\n\n[workspace]\n",
            workspace_root().join("abi")
        );
        let library = "#![no_std]\n#![forbid(unsafe_code)]\n\
            use spindle_abi::event::{BENCH_PROBE, Probe, ProbeResult};\n\
            fn stamp(probe: &Probe) -> ProbeResult { ProbeResult { value: probe.value + spindle_abi::host::clock_ticks() } }\n\
            spindle_abi::extension! { name: \"undeclared\", version: \"0.1.0\", budget_microseconds: 10, memory_quota_bytes: 4096, domains: [], bindings: [BENCH_PROBE => stamp] }\n";
        extensions.write_crate("undeclared", &[("Cargo.toml", &cargo_manifest), ("src/lib.rs", library)]);
        let checked = rules::check_crate("undeclared", &extensions.root, &workspace_root().join("abi/Cargo.toml"), Technology::User).unwrap();
        let mut manifest = glue::describe(&checked).unwrap();
        let program = user_glue::build_user_program(&checked, &manifest).unwrap();
        assert_eq!(check_user_program(&program, &manifest).unwrap(), []);
        manifest.domains.push("clock".into());
        let program = user_glue::build_user_program(&checked, &manifest).unwrap();
        // Installing `clock` links every function of the domain: all are reported.
        let clock: Vec<(String, &str)> = spindle_abi::host::KERNEL_FUNCTIONS
            .iter()
            .filter(|function| function.domain == "clock")
            .map(|function| (function.name.to_string(), "clock"))
            .collect();
        assert_eq!(check_user_program(&program, &manifest).unwrap(), clock);
        // A program built for the wider manifest is refused under the narrower one.
        manifest.domains.clear();
        let error = check_user_program(&program, &manifest).unwrap_err();
        assert!(error.contains("`spindle_clock_ticks` of domain `clock`"), "{error}");
    }

    #[test]
    fn budgets_outside_the_limit_are_refused_naming_it() {
        assert!(check_budget(1, "b").is_ok() && check_budget(1_000_000, "b").is_ok());
        for budget in [0, 1_000_001, u64::MAX] {
            let error = check_budget(budget, "the declaration's budget_microseconds").unwrap_err();
            assert!(error.starts_with(&format!("the declaration's budget_microseconds is {budget} us")), "{error}");
            assert!(error.contains("1 ..= 1000000 us (MAX_BUDGET_MICROSECONDS"), "{error}");
        }
    }

    #[test]
    fn the_kernel_side_check_fails_for_a_wrong_key_or_fingerprint() {
        let manifest = Manifest {
            name: "demo".into(),
            version: "0.1.0".into(),
            entry: spindle_abi::native::BINDING_COUNT_SYMBOL.into(),
            events: vec!["console.Line".into()],
            domains: vec!["console".into()],
            budget_microseconds: 10,
            memory_quota_bytes: 4096,
        };
        let key = pack::signing_key_from_seed(&[9; 32]);
        let verifying = pack::key_to_hex(&pack::verifying_key_bytes(&key));
        let kext = pack::pack(Kind::Native, 77, &manifest, b"payload", Some(&key)).unwrap();
        verify_as_the_kernel_would(&kext, Kind::Native, &verifying, 77, &manifest, b"payload").unwrap();
        assert!(verify_as_the_kernel_would(&kext, Kind::Wasm, &verifying, 77, &manifest, b"payload").is_err());
        let other = pack::key_to_hex(&pack::verifying_key_bytes(&pack::signing_key_from_seed(&[8; 32])));
        assert!(verify_as_the_kernel_would(&kext, Kind::Native, &other, 77, &manifest, b"payload").is_err());
        assert!(verify_as_the_kernel_would(&kext, Kind::Native, &verifying, 78, &manifest, b"payload").is_err());
        assert!(verify_as_the_kernel_would(&kext, Kind::Native, &verifying, 77, &manifest, b"other").is_err());
        let unsigned = pack::pack(Kind::Native, 77, &manifest, b"payload", None).unwrap();
        assert!(verify_as_the_kernel_would(&unsigned, Kind::Native, &verifying, 77, &manifest, b"payload").is_err());
    }
}
