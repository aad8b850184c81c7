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
    let verifying_key = crate::ext::verifying_key_hex()?;
    let status = cargo()
        .env("SPINDLE_VERIFYING_KEY", verifying_key)
        .args(["build", "--release", "--package", "spindle-kernel", "--target", KERNEL_TARGET])
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("building the kernel failed (see the compiler output above)".into());
    }
    Ok(workspace_root().join("target").join(KERNEL_TARGET).join("release").join("spindle-kernel"))
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
}

/// What an image is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Running and benchmarking: the extensions of `image.toml`.
    Run,
    /// Testing: also the deliberately broken `test-*` extensions.
    Test,
}

/// Builds every extension named in `image.toml` as a signed native `.kext`, packs them
/// into the boot bundle (plus the broken test extensions for a test image), and builds
/// the kernel.
pub fn build_image(purpose: Purpose) -> Result<Image> {
    let path = workspace_root().join("image.toml");
    let text = std::fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let description: ImageDescription = toml::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    let mut entries = Vec::new();
    for extension in &description.extension {
        let kext = crate::ext::build_native(&extension.name)?;
        let bytes = std::fs::read(&kext).map_err(|error| format!("cannot read {}: {error}", kext.display()))?;
        entries.push((extension.name.clone(), bytes));
    }
    if purpose == Purpose::Test {
        let hello = workspace_root().join("target").join("spindle").join("ext").join("hello.kext");
        entries.extend(crate::testkexts::build(&hello)?);
    }
    let borrowed: Vec<(&str, &[u8])> = entries.iter().map(|(name, bytes)| (name.as_str(), bytes.as_slice())).collect();
    let boot: Vec<&str> = description.extension.iter().filter(|extension| extension.boot).map(|extension| extension.name.as_str()).collect();
    let bundle_bytes = spindle_loader::bundle::build(&borrowed, &boot);
    spindle_loader::bundle::parse(&bundle_bytes).map_err(|error| format!("the boot bundle does not parse back: {error}"))?;
    let file = if purpose == Purpose::Test { "test.bundle" } else { "boot.bundle" };
    let bundle = workspace_root().join("target").join("spindle").join(file);
    std::fs::write(&bundle, &bundle_bytes).map_err(|error| format!("cannot write {}: {error}", bundle.display()))?;
    let kernel = build_kernel()?;
    Ok(Image { kernel, bundle })
}
