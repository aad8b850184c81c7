//! Building the user programs under `userspace/` for the boot bundle.
//!
//! Every directory under `userspace/` except `runtime` is one program: package
//! `user-<name>`, binary `<name>`. All are built in one cargo invocation for
//! `riscv64gc-unknown-none-elf`, linked with `userspace/user.ld` (static, at the user image
//! base, each section on its own pages) into `target/spindle/user-target`, a target
//! directory of their own so their flags never invalidate the kernel's build. Each
//! program becomes bundle entry `bin/<name>`, which `run NAME` and the `spawn` system call
//! start.

use std::path::PathBuf;

use crate::Result;
use crate::kernel_build::{KERNEL_TARGET, cargo, workspace_root};

/// Bundle entries of user programs are named `bin/<name>` (the kernel adds the prefix).
pub const BUNDLE_PREFIX: &str = "bin/";
/// The runtime library, the one directory under `userspace/` that is not a program.
const RUNTIME_DIRECTORY: &str = "runtime";

/// The user programs: the directory names under `userspace/` (sorted).
pub fn program_names() -> Result<Vec<String>> {
    let directory = workspace_root().join("userspace");
    let listing = std::fs::read_dir(&directory).map_err(|error| format!("cannot list {}: {error}", directory.display()))?;
    let mut names = Vec::new();
    for entry in listing {
        let path = entry.map_err(|error| error.to_string())?.path();
        let Some(name) = path.file_name().and_then(|name| name.to_str()).map(str::to_string) else { continue };
        if path.join("Cargo.toml").is_file() && name != RUNTIME_DIRECTORY {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Builds every user program (release) and returns the bundle entries
/// `(bin/<name>, ELF bytes)`.
pub fn build_programs() -> Result<Vec<(String, Vec<u8>)>> {
    let names = program_names()?;
    let root = workspace_root();
    let target_directory = root.join("target/spindle/user-target");
    let linker_script = root.join("userspace/user.ld");
    let mut command = cargo();
    command
        .args(["build", "--quiet", "--release", "--target", KERNEL_TARGET, "--target-dir"])
        .arg(&target_directory)
        // The linker script places the program; symbols stay for `llvm-objdump`, debug
        // information (useless to the kernel's loader) does not.
        .env("RUSTFLAGS", format!("-C link-arg=-T{} -C strip=debuginfo", linker_script.display()))
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    for name in &names {
        command.args(["--package", &format!("user-{name}")]);
    }
    let status = command.status().map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("cargo's errors are above".into());
    }
    let output: PathBuf = target_directory.join(KERNEL_TARGET).join("release");
    names
        .iter()
        .map(|name| {
            let path = output.join(name);
            let bytes = std::fs::read(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            Ok((format!("{BUNDLE_PREFIX}{name}"), bytes))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::program_names;

    #[test]
    fn every_program_directory_is_a_user_package() {
        let names = program_names().unwrap();
        assert!(names.iter().any(|name| name == "hello"), "{names:?}");
        for name in names {
            let manifest = std::fs::read_to_string(crate::kernel_build::workspace_root().join("userspace").join(&name).join("Cargo.toml")).unwrap();
            assert!(manifest.contains(&format!("name = \"user-{name}\"")), "userspace/{name} must be package user-{name}");
        }
    }
}
