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

/// Builds the kernel in release mode and returns the ELF path.
pub fn build_kernel() -> Result<PathBuf> {
    let status = cargo()
        .args(["build", "--release", "--package", "spindle-kernel", "--target", KERNEL_TARGET])
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("building the kernel failed (see the compiler output above)".into());
    }
    Ok(workspace_root().join("target").join(KERNEL_TARGET).join("release").join("spindle-kernel"))
}
