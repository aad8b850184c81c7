//! How the trusted builder runs its tools (cargo, rustc, rust-lld, clang): from a working
//! directory no extension controls, with an environment cleaned down to an allow-list.
//!
//! Cargo reads `.cargo/config.toml` from its working directory and every directory above
//! it, and rustup reads `rust-toolchain(.toml)` the same way; either can name a program
//! to run (`build.rustc-wrapper`, a custom toolchain) that would then run with the
//! builder's rights, next to its signing key. Environment variables do the same
//! (`RUSTC_WRAPPER`, `RUSTFLAGS`, `CARGO_BUILD_*`, clang's `CCC_OVERRIDE_OPTIONS`, …).
//! So every tool the builder starts gets:
//!
//! - the working directory [`working_directory`] (`target/spindle/builder`, created and
//!   owned by xtask): its ancestors are `target/`, the workspace root (whose
//!   `.cargo/config.toml` and `rust-toolchain.toml` are reviewed with the kernel) and what
//!   lies above the checkout;
//! - an empty environment plus only the variables in [`PASSED_VARIABLES`] taken from
//!   xtask's own environment — what cargo and rustup need to find themselves and the
//!   registry cache, and nothing that changes what gets compiled or which program
//!   compiles it. Flags a build needs (`RUSTFLAGS` of the Wasm build, …) are set by the
//!   builder itself, per invocation.
//!
//! Not covered: the user's own `$CARGO_HOME/config.toml` still applies (it belongs to
//! whoever runs the builder, like `PATH`).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::Result;
use crate::kernel_build::workspace_root;

/// The variables passed from xtask's environment to the tools; everything else is
/// dropped. Locating the toolchain and registry (`PATH`, `HOME`, `CARGO_HOME`,
/// `RUSTUP_HOME`, `RUSTUP_TOOLCHAIN` — the toolchain rustup chose for the workspace —,
/// `RUSTUP_AUTO_INSTALL`), messages (`TERM`, `LANG`, `LC_ALL`, `LC_CTYPE`), temporary
/// files (`TMPDIR`), the user's identity (`USER`, `LOGNAME`) and network access to the
/// registry (proxies, CA certificates). Explicitly not: `RUSTFLAGS`,
/// `CARGO_ENCODED_RUSTFLAGS`, `RUSTC`, `RUSTC_WRAPPER`, `RUSTC_WORKSPACE_WRAPPER`,
/// `RUSTDOCFLAGS`, `CARGO_BUILD_*`, `CARGO_TARGET_*`, `CARGO_TARGET_DIR`,
/// `CARGO_PROFILE_*`, `RUSTC_BOOTSTRAP`, `CC`, `CFLAGS`, `CPATH`, `CCC_OVERRIDE_OPTIONS`,
/// `LD_PRELOAD`, `LD_LIBRARY_PATH`.
pub const PASSED_VARIABLES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTUP_AUTO_INSTALL",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
];

/// The working directory of every tool the builder runs: `target/spindle/builder`.
pub fn working_directory() -> PathBuf {
    workspace_root().join("target/spindle/builder")
}

/// `program` with the cleaned environment (the allow-listed variables of `environment`)
/// and [`working_directory`] as its working directory (created if missing).
///
/// Errors: the working directory cannot be created.
pub fn command_with(program: impl AsRef<OsStr>, environment: impl IntoIterator<Item = (OsString, OsString)>) -> Result<Command> {
    let directory = working_directory();
    std::fs::create_dir_all(&directory).map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    let mut command = Command::new(program);
    command.env_clear().current_dir(&directory);
    for (name, value) in environment {
        if name.to_str().is_some_and(|name| PASSED_VARIABLES.contains(&name)) {
            command.env(name, value);
        }
    }
    Ok(command)
}

/// `program` with the cleaned environment taken from xtask's own (see [`command_with`]).
///
/// Errors: the working directory cannot be created.
pub fn command(program: impl AsRef<OsStr>) -> Result<Command> {
    command_with(program, std::env::vars_os())
}

/// `cargo` (the one running xtask, `$CARGO`, else the one on `PATH`) with the cleaned
/// environment.
///
/// Errors: the working directory cannot be created.
pub fn cargo() -> Result<Command> {
    command(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs one build step of the builder (a `cargo build` from [`cargo`], or clang). The
/// tool's messages are passed on: printed on success (warnings), part of the error on
/// failure, so the caller's error says which step failed and why.
///
/// Errors: `what` failed, with the tool's messages; the tool could not be started.
pub fn run_build(mut command: Command, what: &str) -> Result<()> {
    let output = command.stdout(Stdio::inherit()).output().map_err(|error| format!("{what}: cannot run {:?}: {error}", command.get_program()))?;
    let messages = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        eprint!("{messages}");
        return Ok(());
    }
    let messages = messages.trim_end();
    if messages.is_empty() {
        return Err(format!("{what} failed ({})", output.status));
    }
    Err(format!("{what} failed:\n{messages}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the caller may have set: build-steering variables next to ordinary ones.
    fn caller_environment() -> Vec<(OsString, OsString)> {
        [
            ("PATH", std::env::var("PATH").unwrap_or_default().as_str()),
            ("HOME", "/home/builder"),
            ("RUSTFLAGS", "-C link-arg=-Wl,--evil"),
            ("CARGO_ENCODED_RUSTFLAGS", "-Cevil"),
            ("RUSTC_WRAPPER", "/tmp/wrapper"),
            ("RUSTC_WORKSPACE_WRAPPER", "/tmp/wrapper"),
            ("RUSTC", "/tmp/rustc"),
            ("CARGO_BUILD_RUSTC_WRAPPER", "/tmp/wrapper"),
            ("CARGO_BUILD_TARGET_DIR", "/tmp/elsewhere"),
            ("CARGO_TARGET_DIR", "/tmp/elsewhere"),
            ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0"),
            ("CCC_OVERRIDE_OPTIONS", "+-fplugin=/tmp/evil.so"),
            ("LD_PRELOAD", "/tmp/evil.so"),
            ("RUSTUP_TOOLCHAIN", "nightly"),
        ]
        .into_iter()
        .map(|(name, value)| (OsString::from(name), OsString::from(value)))
        .collect()
    }

    #[test]
    fn only_allow_listed_variables_reach_a_tool() {
        let command = command_with("env", caller_environment()).unwrap();
        let set: Vec<String> = command.get_envs().filter(|(_, value)| value.is_some()).map(|(name, _)| name.to_string_lossy().into_owned()).collect();
        assert_eq!(set, ["HOME", "PATH", "RUSTUP_TOOLCHAIN"]);
        assert_eq!(command.get_current_dir(), Some(working_directory().as_path()));
        // What the child actually sees (env_clear drops xtask's own environment too).
        let output = command_with("env", caller_environment()).unwrap().output().unwrap();
        let seen = String::from_utf8_lossy(&output.stdout);
        let names: Vec<&str> = seen.lines().filter_map(|line| line.split_once('=').map(|(name, _)| name)).collect();
        assert_eq!(names.len(), 3, "{seen}");
        for name in names {
            assert!(PASSED_VARIABLES.contains(&name), "{name} reached the tool: {seen}");
        }
    }

    #[test]
    fn the_working_directory_is_generated_not_the_extensions() {
        let directory = working_directory();
        assert!(directory.starts_with(workspace_root().join("target")));
        assert!(!directory.starts_with(workspace_root().join("extensions")));
    }
}
