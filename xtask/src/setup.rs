//! Prerequisites: rustup targets, QEMU and OpenSBI, installed when missing.
//!
//! `RUSTUP_AUTO_INSTALL=0` stops rustup from adding the targets named in
//! `rust-toolchain.toml`, so xtask adds them. QEMU and OpenSBI come from Debian's
//! `qemu-system-misc` and `opensbi` packages: installed with `apt-get` when running as
//! root, otherwise the exact command is printed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// Targets the build needs.
pub const RUST_TARGETS: &[&str] = &["riscv64gc-unknown-none-elf", "wasm32-unknown-unknown"];
/// Debian's OpenSBI firmware for QEMU `virt` (fw_dynamic: QEMU passes the kernel address).
pub const OPENSBI_FIRMWARE: &str = "/usr/lib/riscv64-linux-gnu/opensbi/generic/fw_dynamic.bin";
/// The QEMU binary.
pub const QEMU: &str = "qemu-system-riscv64";
const DEBIAN_PACKAGES: &[&str] = &["qemu-system-misc", "opensbi"];

/// Everything the kernel verbs need.
pub fn ensure_prerequisites() -> Result<()> {
    ensure_rust_targets()?;
    ensure_debian_packages()
}

/// Adds missing rustup targets to the active (rust-toolchain.toml) toolchain. rustup runs
/// from the workspace root, so the workspace's toolchain file is the one it reads (not one
/// in whatever directory xtask was started from).
pub fn ensure_rust_targets() -> Result<()> {
    // Once per process: every extension build asks.
    static PRESENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if PRESENT.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    add_missing_rust_targets()?;
    PRESENT.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

fn add_missing_rust_targets() -> Result<()> {
    let output = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(crate::kernel_build::workspace_root())
        .output()
        .map_err(|error| format!("cannot run `rustup` ({error}); install rustup from https://rustup.rs"))?;
    if !output.status.success() {
        return Err(format!("`rustup target list --installed` failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    let installed = String::from_utf8_lossy(&output.stdout);
    let missing: Vec<&str> = RUST_TARGETS.iter().copied().filter(|target| !installed.lines().any(|line| line.trim() == *target)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: adding rustup targets: {}", missing.join(" "));
    let status = Command::new("rustup")
        .current_dir(crate::kernel_build::workspace_root())
        .args(["target", "add"])
        .args(&missing)
        .status()
        .map_err(|error| format!("cannot run `rustup target add`: {error}"))?;
    if !status.success() {
        return Err(format!("`rustup target add {}` failed", missing.join(" ")));
    }
    Ok(())
}

/// Adds rustup's `clippy` component when `cargo clippy` is missing (`cargo xtask test`
/// lints every target).
pub fn ensure_clippy() -> Result<()> {
    let root = crate::kernel_build::workspace_root();
    let present = Command::new("cargo").args(["clippy", "--version"]).current_dir(&root).output().is_ok_and(|output| output.status.success());
    if present {
        return Ok(());
    }
    eprintln!("xtask: adding the rustup component clippy");
    let status = Command::new("rustup")
        .current_dir(&root)
        .args(["component", "add", "clippy"])
        .status()
        .map_err(|error| format!("cannot run `rustup component add clippy`: {error}"))?;
    if !status.success() {
        return Err("`rustup component add clippy` failed".into());
    }
    Ok(())
}

/// Finds an executable on PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|directory| directory.join(name)).find(|candidate| candidate.is_file())
}

/// Whether xtask runs as root (then it may install Debian packages itself).
pub fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
        .unwrap_or(false)
}

fn ensure_debian_packages() -> Result<()> {
    let have_qemu = find_on_path(QEMU).is_some();
    let have_opensbi = Path::new(OPENSBI_FIRMWARE).is_file();
    if have_qemu && have_opensbi {
        return Ok(());
    }
    let packages = DEBIAN_PACKAGES.join(" ");
    let what = match (have_qemu, have_opensbi) {
        (false, false) => format!("{QEMU} and the OpenSBI firmware are"),
        (false, true) => format!("{QEMU} is"),
        _ => format!("the OpenSBI firmware ({OPENSBI_FIRMWARE}) is"),
    };
    if find_on_path("apt-get").is_none() {
        return Err(format!(
            "{what} missing and this is not a Debian-like system (no apt-get); install QEMU >= 7.2 \
             with RISC-V support and OpenSBI, or run on Debian 12"
        ));
    }
    if !running_as_root() {
        return Err(format!(
            "{what} missing. Install them with:\n    sudo apt-get update && sudo apt-get install -y {packages}"
        ));
    }
    eprintln!("xtask: {what} missing; installing Debian packages: {packages}");
    run_apt(&["update"])?;
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(DEBIAN_PACKAGES);
    run_apt(&install)?;
    if find_on_path(QEMU).is_none() || !Path::new(OPENSBI_FIRMWARE).is_file() {
        return Err(format!("installed {packages}, but {QEMU} or {OPENSBI_FIRMWARE} is still missing"));
    }
    Ok(())
}

/// Runs `apt-get ARGUMENTS` non-interactively.
pub fn run_apt(arguments: &[&str]) -> Result<()> {
    let status = Command::new("apt-get")
        .args(arguments)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|error| format!("cannot run apt-get: {error}"))?;
    if !status.success() {
        return Err(format!("`apt-get {}` failed with {status}", arguments.join(" ")));
    }
    Ok(())
}
