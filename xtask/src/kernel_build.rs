//! Building the kernel image.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// The kernel's target triple.
pub const KERNEL_TARGET: &str = "riscv64gc-unknown-none-elf";

/// The workspace root (xtask lives in `<root>/xtask`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is inside the workspace").to_path_buf()
}

/// `cargo` as invoked by the user (honours the toolchain chosen by rust-toolchain.toml).
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Builds the kernel in release mode, with the trusted builder's verifying key baked in,
/// and returns the ELF path.
pub fn build_kernel() -> Result<PathBuf> {
    build_kernel_variant(None)
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

/// Builds the kernel (release, verifying key baked in), or a [`Variant`] of it; returns
/// the ELF path.
pub fn build_kernel_variant(variant: Option<&Variant>) -> Result<PathBuf> {
    let verifying_key = crate::ext::verifying_key_hex()?;
    let mut command = cargo();
    command.env("SPINDLE_VERIFYING_KEY", verifying_key).args(["build", "--release", "--package", "spindle-kernel", "--target", KERNEL_TARGET]);
    let mut target_directory = workspace_root().join("target");
    if let Some(variant) = variant {
        target_directory = target_directory.join("variants").join(variant.name);
        command.arg("--target-dir").arg(&target_directory).env("RUSTFLAGS", variant.rustflags).env_remove("CARGO_ENCODED_RUSTFLAGS");
    }
    let status = command.status().map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("building the kernel failed (see the compiler output above)".into());
    }
    Ok(target_directory.join(KERNEL_TARGET).join("release").join("spindle-kernel"))
}

/// A bootable image: the kernel and the boot bundle of native extensions.
pub struct Image {
    /// The kernel ELF.
    pub kernel: PathBuf,
    /// The boot bundle (QEMU's initial RAM disk).
    pub bundle: PathBuf,
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

/// Bundle entries of Wasm builds are named `<name>.wasm` (`ext load NAME wasm` finds them).
pub const WASM_ENTRY_SUFFIX: &str = ".wasm";

/// What an image is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Running and benchmarking: the extensions of `image.toml`.
    Run,
    /// Testing: also the deliberately broken `test-*` extensions.
    Test,
}

/// Builds every extension named in `image.toml` as a signed native `.kext` (and, with
/// `wasm = true`, also as a Wasm `.kext`, bundle entry `<name>.wasm`; `wasm_only = true`
/// for a C extension), packs them into the boot bundle (plus the broken test extensions for a test image) with the
/// user programs (`bin/<name>`), and builds the kernel.
pub fn build_image(purpose: Purpose) -> Result<Image> {
    let path = workspace_root().join("image.toml");
    let text = std::fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let description: ImageDescription = toml::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    let mut entries = Vec::new();
    let read = |path: &Path| std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()));
    for extension in &description.extension {
        if !extension.wasm_only {
            entries.push((extension.name.clone(), read(&crate::ext::build_native(&extension.name)?)?));
        }
        if extension.wasm || extension.wasm_only {
            entries.push((format!("{}{WASM_ENTRY_SUFFIX}", extension.name), read(&crate::ext::build_wasm(&extension.name)?)?));
        }
        if extension.user {
            entries.push((crate::ext::user_entry_name(&extension.name), read(&crate::ext::build_user(&extension.name)?)?));
        }
    }
    if purpose == Purpose::Test {
        let hello = workspace_root().join("target").join("spindle").join("ext").join("hello.kext");
        entries.extend(crate::testkexts::build(&hello)?);
        entries.extend(crate::testkexts::build_wasm()?);
    }
    // User programs, as `bin/<name>` (`run NAME`, the `spawn` system call).
    entries.extend(crate::userspace::build_programs()?);
    let borrowed: Vec<(&str, &[u8])> = entries.iter().map(|(name, bytes)| (name.as_str(), bytes.as_slice())).collect();
    // A Wasm-only extension boots as its `.wasm` entry.
    let boot_names: Vec<String> = description
        .extension
        .iter()
        .filter(|extension| extension.boot)
        .map(|extension| if extension.wasm_only { format!("{}{WASM_ENTRY_SUFFIX}", extension.name) } else { extension.name.clone() })
        .collect();
    let boot: Vec<&str> = boot_names.iter().map(String::as_str).collect();
    let bundle_bytes = spindle_loader::bundle::build(&borrowed, &boot);
    spindle_loader::bundle::parse(&bundle_bytes).map_err(|error| format!("the boot bundle does not parse back: {error}"))?;
    let file = if purpose == Purpose::Test { "test.bundle" } else { "boot.bundle" };
    let bundle = workspace_root().join("target").join("spindle").join(file);
    std::fs::write(&bundle, &bundle_bytes).map_err(|error| format!("cannot write {}: {error}", bundle.display()))?;
    let kernel = build_kernel()?;
    Ok(Image { kernel, bundle })
}
