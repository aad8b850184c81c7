//! Building the kernel image.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use crate::Result;
use crate::ext::{Report, Technology};

/// The kernel's target triple.
pub const KERNEL_TARGET: &str = "riscv64gc-unknown-none-elf";

/// The workspace root xtask works on, found at run time by [`locate_workspace`] (once;
/// `main` reports a failure before anything else runs).
///
/// Not the path xtask was compiled in: a copied checkout (with its `target/`, so cargo
/// does not rebuild xtask) must build the copy, not the original.
pub fn workspace_root() -> PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| locate_workspace().unwrap_or_else(|error| panic!("{error}"))).clone()
}

/// Finds the Spindle workspace this xtask runs in: the parent of `CARGO_MANIFEST_DIR` as
/// cargo sets it *when running* xtask (`cargo xtask` is `cargo run`; `cargo test` sets it
/// too), else the current directory or its nearest ancestor that is one (a `Cargo.toml`
/// whose `[workspace]` members include `xtask`).
///
/// Errors: neither leads to a Spindle workspace.
pub fn locate_workspace() -> Result<PathBuf> {
    let current = std::env::current_dir().map_err(|error| format!("cannot read the current directory: {error}"))?;
    find_workspace(std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).as_deref(), &current)
}

/// [`locate_workspace`] for a given `CARGO_MANIFEST_DIR` (if set) and current directory.
fn find_workspace(manifest_directory: Option<&Path>, current_directory: &Path) -> Result<PathBuf> {
    if let Some(root) = manifest_directory.and_then(Path::parent).filter(|root| is_spindle_workspace(root)) {
        return Ok(root.to_path_buf());
    }
    current_directory.ancestors().find(|directory| is_spindle_workspace(directory)).map(Path::to_path_buf).ok_or_else(|| {
        format!(
            "cannot find the Spindle workspace from {} (a Cargo.toml whose [workspace] members include \"xtask\"); run `cargo xtask` inside the checkout",
            current_directory.display()
        )
    })
}

/// Whether `directory` holds a `Cargo.toml` whose `[workspace]` members include `xtask`,
/// and `xtask/Cargo.toml`.
fn is_spindle_workspace(directory: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(directory.join("Cargo.toml")) else { return false };
    let Ok(manifest) = toml::from_str::<toml::Table>(&text) else { return false };
    let members = manifest.get("workspace").and_then(|workspace| workspace.get("members")).and_then(toml::Value::as_array);
    members.is_some_and(|members| members.iter().any(|member| member.as_str() == Some("xtask"))) && directory.join("xtask/Cargo.toml").is_file()
}

/// `cargo` as invoked by the user (honours the toolchain chosen by rust-toolchain.toml).
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Builds the kernel in release mode, with the trusted builder's verifying key baked in,
/// and returns the ELF path.
pub fn build_kernel(purpose: Purpose) -> Result<PathBuf> {
    build_kernel_variant(purpose, None)
}

/// The kernel built with extra code-generation flags, into its own target directory
/// (`target/variants/<name>`) so the default build's caches stay valid.
pub struct Variant {
    /// Directory name and label.
    pub name: &'static str,
    /// `RUSTFLAGS` for the kernel build.
    pub rustflags: &'static str,
}

/// The kernel with misaligned scalar loads and stores allowed: `wasmi` then decodes its
/// instruction stream with word loads instead of byte loads (DESIGN.md §3). QEMU executes
/// misaligned accesses at no cost; some real cores trap on them.
pub const UNALIGNED_SCALAR_MEM: Variant = Variant { name: "unaligned-scalar-mem", rustflags: "-C target-feature=+unaligned-scalar-mem" };

/// Builds the kernel for `purpose` (release, verifying key baked in, the purpose's cargo
/// features), or a [`Variant`] of it; returns the ELF path, one per purpose and variant
/// (`target/spindle/kernel-<purpose>[-<variant>]`), so images of different purposes never
/// overwrite each other. Cargo caches each feature set's build separately.
pub fn build_kernel_variant(purpose: Purpose, variant: Option<&Variant>) -> Result<PathBuf> {
    let verifying_key = crate::ext::verifying_key_hex()?;
    let mut command = cargo();
    command.env("SPINDLE_VERIFYING_KEY", verifying_key).args(["build", "--release", "--package", "spindle-kernel", "--target", KERNEL_TARGET]);
    if !purpose.kernel_features().is_empty() {
        command.args(["--features", purpose.kernel_features()]);
    }
    let mut target_directory = workspace_root().join("target");
    let mut name = format!("kernel-{}", purpose.name());
    if let Some(variant) = variant {
        target_directory = target_directory.join("variants").join(variant.name);
        command.arg("--target-dir").arg(&target_directory).env("RUSTFLAGS", variant.rustflags).env_remove("CARGO_ENCODED_RUSTFLAGS");
        name = format!("{name}-{}", variant.name);
    }
    let status = command.status().map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("building the kernel (spindle-kernel) failed: cargo's errors are above".into());
    }
    let built = target_directory.join(KERNEL_TARGET).join("release").join("spindle-kernel");
    let kept = workspace_root().join("target").join("spindle").join(name);
    std::fs::create_dir_all(kept.parent().unwrap_or(Path::new("."))).map_err(|error| format!("cannot create target/spindle: {error}"))?;
    std::fs::copy(&built, &kept).map_err(|error| format!("cannot copy {} to {}: {error}", built.display(), kept.display()))?;
    Ok(kept)
}

/// A bootable image: the kernel and the boot bundle of native extensions.
pub struct Image {
    /// The kernel ELF.
    pub kernel: PathBuf,
    /// The boot bundle (QEMU's initial RAM disk).
    pub bundle: PathBuf,
    /// The tree xtask copies into a machine's file system: `bin/NAME` (the user
    /// programs), `ext/NAME.kext` and `ext/NAME.wasm` (the extensions of image.toml).
    pub fs_root: PathBuf,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageDescription {
    extension: Vec<ImageExtension>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageExtension {
    name: String,
    boot: bool,
    /// Also pack the Wasm build as bundle entry `<name>.wasm`.
    #[serde(default)]
    wasm: bool,
    /// Pack only the Wasm build (a C extension has no native build).
    #[serde(default)]
    wasm_only: bool,
    /// Also pack the user-level build as program `bin/ext-<name>` (`ext load NAME user`).
    #[serde(default)]
    user: bool,
}

/// First line of the block of `kernel/Cargo.toml` that xtask generates from `image.toml`.
const BUILTIN_BEGIN: &str = "# BEGIN built-in extensions: generated by `cargo xtask` from image.toml (do not edit)";
/// Last line of that block.
const BUILTIN_END: &str = "# END built-in extensions";

/// The dependency lines of the built-in extensions: every `image.toml` entry with a Rust
/// crate (not `wasm_only`), in the file's order, between [`BUILTIN_BEGIN`] and [`BUILTIN_END`].
fn builtin_dependency_block(description: &ImageDescription) -> String {
    let mut block = format!("{BUILTIN_BEGIN}\n");
    for extension in description.extension.iter().filter(|extension| !extension.wasm_only) {
        block.push_str(&format!("{} = {{ path = \"../extensions/{}\" }}\n", extension.name, extension.name));
    }
    block.push_str(BUILTIN_END);
    block
}

/// `cargo_toml` with its generated block replaced by `block`.
///
/// Errors: the block's markers are missing or out of order.
fn with_builtin_block(cargo_toml: &str, block: &str) -> Result<String> {
    let start = cargo_toml.find(BUILTIN_BEGIN).ok_or_else(|| format!("kernel/Cargo.toml has no line `{BUILTIN_BEGIN}`"))?;
    let end = cargo_toml[start..].find(BUILTIN_END).map(|offset| start + offset + BUILTIN_END.len()).ok_or_else(|| format!("kernel/Cargo.toml has no line `{BUILTIN_END}` after `{BUILTIN_BEGIN}`"))?;
    Ok(format!("{}{block}{}", &cargo_toml[..start], &cargo_toml[end..]))
}

/// Makes the built-in extensions the kernel links (its dependencies in `kernel/Cargo.toml`)
/// the ones `image.toml` lists, rewriting the generated block when they differ (and saying
/// so), so adding an extension to the image is one edit. `kernel/build.rs` generates the
/// kernel's list of them from `image.toml` too.
///
/// Errors: `kernel/Cargo.toml` cannot be read or written, or lacks the block.
fn sync_builtin_dependencies(description: &ImageDescription) -> Result<()> {
    let path = workspace_root().join("kernel/Cargo.toml");
    let text = std::fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let updated = with_builtin_block(&text, &builtin_dependency_block(description))?;
    if updated != text {
        std::fs::write(&path, updated).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        eprintln!("xtask: kernel/Cargo.toml: the built-in extensions now follow image.toml");
    }
    Ok(())
}

/// Bundle entries of Wasm builds are named `<name>.wasm` (`ext load NAME wasm` finds them).
pub const WASM_ENTRY_SUFFIX: &str = ".wasm";

/// What an image is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Running (`cargo xtask qemu`): the production kernel, without test or benchmark
    /// code, and the extensions of `image.toml`.
    Run,
    /// Testing: the kernel with the in-kernel tests and benchmarks (features `tests`,
    /// `bench`); also the deliberately broken `test-*` extensions.
    Test,
    /// Benchmarking: the kernel with the benchmarks and the C references (feature `bench`).
    Bench,
}

impl Purpose {
    /// The word in file names (`kernel-run`).
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Run => "run",
            Purpose::Test => "test",
            Purpose::Bench => "bench",
        }
    }

    /// The kernel's cargo features for this purpose.
    pub fn kernel_features(self) -> &'static str {
        match self {
            Purpose::Run => "",
            Purpose::Test => "tests",
            Purpose::Bench => "bench",
        }
    }
}

/// Numbered progress lines on stderr (`xtask: [ 3/19] extension `hello` (user-level) … 1.9 s`),
/// so a first run that compiles for minutes says what it is doing.
struct Progress {
    step: usize,
    steps: usize,
    started: Instant,
}

impl Progress {
    fn new(steps: usize) -> Progress {
        Progress { step: 0, steps, started: Instant::now() }
    }

    /// Runs the next step, `what`: its line is printed first; its time is added after it
    /// when `timed` (steps whose tools print their own progress, like the kernel's cargo,
    /// end the line at once instead).
    fn run<T>(&mut self, what: &str, timed: bool, step: impl FnOnce() -> Result<T>) -> Result<T> {
        self.step += 1;
        let width = self.steps.to_string().len();
        let started = Instant::now();
        if timed {
            eprint!("xtask: [{:>width$}/{}] {what} …", self.step, self.steps);
            let _ = std::io::stderr().flush();
        } else {
            eprintln!("xtask: [{:>width$}/{}] {what}", self.step, self.steps);
        }
        let outcome = step();
        if timed {
            eprintln!(" {}", if outcome.is_ok() { format!("{:.1} s", started.elapsed().as_secs_f64()) } else { "failed".to_string() });
        }
        outcome
    }
}

/// The builds `image.toml` asks for, in order: (extension, technology).
fn image_builds(description: &ImageDescription) -> Vec<(&str, Technology)> {
    let mut builds = Vec::new();
    for extension in &description.extension {
        if !extension.wasm_only {
            builds.push((extension.name.as_str(), Technology::Native));
        }
        if extension.wasm || extension.wasm_only {
            builds.push((extension.name.as_str(), Technology::Wasm));
        }
        if extension.user {
            builds.push((extension.name.as_str(), Technology::User));
        }
    }
    builds
}

/// One build `image.toml` asks for, quietly; a failure names the extension, the
/// technology and the step, with the tool's messages.
fn build_for_image(name: &str, technology: Technology) -> Result<PathBuf> {
    crate::ext::build(technology, name, Report::Quiet).map_err(|error| format!("building extension `{name}` for image.toml ({}) failed: {error}", technology.name()))
}

/// Builds every extension named in `image.toml` as a signed native `.kext` (and, with
/// `wasm = true`, also as a Wasm `.kext`, bundle entry `<name>.wasm`; `wasm_only = true`
/// for a C extension; `user = true`, the user-level program `bin/ext-<name>`), packs them
/// into the boot bundle (plus the broken test extensions for a test image) with the user
/// programs (`bin/<name>`), and builds the kernel, printing one numbered progress line per
/// step. A failure names its step, e.g. "building extension `foo` for image.toml (native)
/// failed: …" followed by cargo's own messages.
pub fn build_image(purpose: Purpose) -> Result<Image> {
    let path = workspace_root().join("image.toml");
    let text = std::fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let description: ImageDescription = toml::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    sync_builtin_dependencies(&description)?;
    let builds = image_builds(&description);
    let test_steps = if purpose == Purpose::Test { 1 } else { 0 };
    let mut progress = Progress::new(builds.len() + test_steps + 3);
    let mut entries = Vec::new();
    let read = |path: &Path| std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()));
    for (name, technology) in builds {
        let built = progress.run(&format!("extension `{name}` ({})", technology.name()), true, || build_for_image(name, technology))?;
        let entry = match technology {
            Technology::Native => name.to_string(),
            Technology::Wasm => format!("{name}{WASM_ENTRY_SUFFIX}"),
            Technology::User => crate::ext::user_entry_name(name),
        };
        entries.push((entry, read(&built)?));
    }
    if purpose == Purpose::Test {
        progress.run("broken test extensions (test-*)", true, || {
            let hello = crate::ext::build(Technology::Native, "hello", Report::Quiet)?;
            entries.extend(crate::testkexts::build(&hello)?);
            entries.extend(crate::testkexts::build_wasm()?);
            Ok(())
        })?;
    }
    // User programs, as `bin/<name>` (`run NAME`, the `spawn` system call).
    let programs = crate::userspace::program_names()?;
    let built = progress.run(&format!("user programs ({})", programs.join(", ")), true, || {
        crate::userspace::build_programs().map_err(|error| format!("building the user programs under userspace/ failed: {error}"))
    })?;
    entries.extend(built);
    let borrowed: Vec<(&str, &[u8])> = entries.iter().map(|(name, bytes)| (name.as_str(), bytes.as_slice())).collect();
    // A Wasm-only extension boots as its `.wasm` entry.
    let boot_names: Vec<String> = description
        .extension
        .iter()
        .filter(|extension| extension.boot)
        .map(|extension| if extension.wasm_only { format!("{}{WASM_ENTRY_SUFFIX}", extension.name) } else { extension.name.clone() })
        .collect();
    let boot: Vec<&str> = boot_names.iter().map(String::as_str).collect();
    let file = if purpose == Purpose::Test { "test.bundle" } else { "boot.bundle" };
    let bundle = workspace_root().join("target").join("spindle").join(file);
    progress.run(&format!("boot bundle target/spindle/{file} ({} entries)", borrowed.len()), true, || {
        let bundle_bytes = spindle_loader::bundle::build(&borrowed, &boot);
        spindle_loader::bundle::parse(&bundle_bytes).map_err(|error| format!("the boot bundle does not parse back: {error}"))?;
        std::fs::write(&bundle, &bundle_bytes).map_err(|error| format!("cannot write {}: {error}", bundle.display()))
    })?;
    let fs_root = workspace_root().join("target").join("spindle").join(format!("{}-fsroot", purpose.name()));
    write_fs_root(&fs_root, &entries)?;
    let what = match purpose.kernel_features() {
        "" => String::from("kernel (cargo build --release, riscv64gc-unknown-none-elf)"),
        features => format!("kernel (cargo build --release, riscv64gc-unknown-none-elf, features {features})"),
    };
    let kernel = progress.run(&what, false, || build_kernel(purpose))?;
    eprintln!("xtask: image ready in {:.1} s", progress.started.elapsed().as_secs_f64());
    Ok(Image { kernel, bundle, fs_root })
}

/// Writes the file-system tree of an image (see [`Image::fs_root`]) from the bundle's
/// entries: programs `bin/NAME` as they are, native extensions `NAME` as `ext/NAME.kext`,
/// Wasm ones `NAME.wasm` as `ext/NAME.wasm`; the deliberately broken `test-*` extensions
/// stay in the bundle only. Replaces what an earlier build wrote.
fn write_fs_root(root: &Path, entries: &[(String, Vec<u8>)]) -> Result<()> {
    if root.exists() {
        std::fs::remove_dir_all(root).map_err(|error| format!("cannot clear {}: {error}", root.display()))?;
    }
    for directory in ["bin", "ext"] {
        std::fs::create_dir_all(root.join(directory)).map_err(|error| format!("cannot create {}: {error}", root.join(directory).display()))?;
    }
    for (name, bytes) in entries {
        let target = if let Some(program) = name.strip_prefix("bin/") {
            root.join("bin").join(program)
        } else if name.starts_with("test-") {
            continue;
        } else if name.ends_with(WASM_ENTRY_SUFFIX) {
            root.join("ext").join(name)
        } else {
            root.join("ext").join(format!("{name}.kext"))
        };
        std::fs::write(&target, bytes).map_err(|error| format!("cannot write {}: {error}", target.display()))?;
    }
    let readme = "This file system was made by `cargo xtask` from the image's programs (bin/) and extensions (ext/).\n\
                  Try: run /bin/hello, ext load /ext/hello.kext, write /notes hi, cat /notes.\n";
    std::fs::write(root.join("README"), readme).map_err(|error| format!("cannot write {}: {error}", root.join("README").display()))
}

/// Modules whose code must not be in the production kernel: the in-kernel tests and the
/// benchmarks.
const NOT_IN_PRODUCTION: &[&str] = &["ktest", "bench"];
/// Prefix of the C references' symbols (bench only).
const C_REFERENCE_PREFIX: &str = "spindle_c_";

/// The symbols of the kernel ELF at `kernel` that belong to test or benchmark code
/// (demangled path components `ktest`/`bench`, or C reference symbols).
pub fn test_and_bench_symbols(kernel: &Path) -> Result<Vec<String>> {
    use object::{Object, ObjectSymbol};
    let bytes = std::fs::read(kernel).map_err(|error| format!("cannot read {}: {error}", kernel.display()))?;
    let file = object::File::parse(&*bytes).map_err(|error| format!("{}: not an ELF file: {error}", kernel.display()))?;
    Ok(file.symbols().filter_map(|symbol| symbol.name().ok().map(str::to_string)).filter(|name| is_test_or_bench_symbol(name)).collect())
}

/// Whether a (mangled) symbol name is test or benchmark code: Rust's legacy mangling
/// writes each path component as `<length><name>`, so `…5ktest…` is the module `ktest`.
fn is_test_or_bench_symbol(name: &str) -> bool {
    if name.starts_with(C_REFERENCE_PREFIX) {
        return true;
    }
    NOT_IN_PRODUCTION.iter().any(|component| {
        let encoded = format!("{}{component}", component.len());
        name.match_indices(&encoded).any(|(at, _)| {
            let before_is_length = name[..at].ends_with(|character: char| character.is_ascii_digit());
            let after = name[at + encoded.len()..].chars().next();
            !before_is_length && after.is_some_and(|character| character.is_ascii_digit() || character == 'E')
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_and_bench_symbols_are_recognised() {
        assert!(is_test_or_bench_symbol("_ZN14spindle_kernel5ktest3run17h0123456789abcdefE"));
        assert!(is_test_or_bench_symbol("_ZN14spindle_kernel5bench6stream8workload17h0123456789abcdefE"));
        assert!(is_test_or_bench_symbol("spindle_c_hotlist_reclaim"));
        assert!(!is_test_or_bench_symbol("_ZN14spindle_kernel3ext10introspect6report17h0123456789abcdefE"));
        assert!(!is_test_or_bench_symbol("_ZN14spindle_kernel6events5probe5raise17h0123456789abcdefE"));
        // `benchmark` or `bench_x` are other words, not the module.
        assert!(!is_test_or_bench_symbol("_ZN3foo9benchmark3bar17h0123456789abcdefE"));
    }

    /// A copy of a workspace's skeleton under the system's temporary directory.
    fn skeleton(label: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("spindle-workspace-{label}-{}", std::process::id()));
        std::fs::create_dir_all(root.join("xtask/src")).unwrap();
        std::fs::write(root.join("Cargo.toml"), "[workspace]\nmembers = [\"xtask\", \"abi\"]\n").unwrap();
        std::fs::write(root.join("xtask/Cargo.toml"), "[package]\nname = \"xtask\"\n").unwrap();
        root
    }

    #[test]
    fn the_workspace_is_found_at_run_time_not_where_xtask_was_compiled() {
        let copy = skeleton("copy");
        // `cargo xtask` in the copy: cargo sets CARGO_MANIFEST_DIR to the copy's xtask.
        assert_eq!(find_workspace(Some(&copy.join("xtask")), Path::new("/")).unwrap(), copy);
        // The binary run directly, from somewhere inside the copy.
        assert_eq!(find_workspace(None, &copy.join("xtask/src")).unwrap(), copy);
        // A CARGO_MANIFEST_DIR of another project does not count.
        assert_eq!(find_workspace(Some(Path::new("/usr/share/other")), &copy.join("xtask")).unwrap(), copy);
        assert_ne!(copy, Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap());
        let error = find_workspace(None, Path::new("/")).unwrap_err();
        assert!(error.contains("cannot find the Spindle workspace"), "{error}");
        std::fs::remove_dir_all(&copy).unwrap();
    }

    #[test]
    fn a_failed_image_build_names_the_extension_and_technology() {
        let error = build_for_image("no-such-extension", Technology::Native).unwrap_err();
        assert!(error.starts_with("building extension `no-such-extension` for image.toml (native) failed: refusing to build"), "{error}");
        let error = build_for_image("hello-c", Technology::User).unwrap_err();
        assert!(error.starts_with("building extension `hello-c` for image.toml (user-level) failed: `hello-c` is a C extension"), "{error}");
    }

    #[test]
    fn builtin_dependencies_follow_image_toml() {
        let description: ImageDescription =
            toml::from_str("[[extension]]\nname = \"a\"\nboot = false\n\n[[extension]]\nname = \"c\"\nboot = true\nwasm_only = true\n\n[[extension]]\nname = \"b-x\"\nboot = false\n").unwrap();
        let block = builtin_dependency_block(&description);
        assert_eq!(block, format!("{BUILTIN_BEGIN}\na = {{ path = \"../extensions/a\" }}\nb-x = {{ path = \"../extensions/b-x\" }}\n{BUILTIN_END}"));
        let cargo_toml = format!("[dependencies]\nspin = \"1\"\n{BUILTIN_BEGIN}\nold = {{ path = \"../extensions/old\" }}\n{BUILTIN_END}\nfdt = \"0.1\"\n");
        let updated = with_builtin_block(&cargo_toml, &block).unwrap();
        assert_eq!(updated, format!("[dependencies]\nspin = \"1\"\n{block}\nfdt = \"0.1\"\n"));
        assert_eq!(with_builtin_block(&updated, &block).unwrap(), updated, "in sync: unchanged");
        assert!(with_builtin_block("[dependencies]\n", &block).unwrap_err().contains("has no line `# BEGIN built-in extensions"));
        // The repository's own files agree.
        let image: ImageDescription = toml::from_str(&std::fs::read_to_string(workspace_root().join("image.toml")).unwrap()).unwrap();
        let kernel = std::fs::read_to_string(workspace_root().join("kernel/Cargo.toml")).unwrap();
        assert_eq!(with_builtin_block(&kernel, &builtin_dependency_block(&image)).unwrap(), kernel);
    }

    #[test]
    fn image_builds_follow_image_toml() {
        let description: ImageDescription = toml::from_str(
            "[[extension]]\nname = \"a\"\nboot = false\nwasm = true\nuser = true\n\n[[extension]]\nname = \"c\"\nboot = true\nwasm_only = true\n",
        )
        .unwrap();
        assert_eq!(image_builds(&description), [("a", Technology::Native), ("a", Technology::Wasm), ("a", Technology::User), ("c", Technology::Wasm)]);
    }

    #[test]
    fn this_checkout_is_a_spindle_workspace() {
        assert!(is_spindle_workspace(&workspace_root()));
        assert!(!is_spindle_workspace(&workspace_root().join("xtask")));
    }
}
