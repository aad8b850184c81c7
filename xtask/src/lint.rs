//! `cargo clippy -D warnings` for every target the project builds, as part of
//! `cargo xtask test`: the host crates (with their tests), the kernel (the production
//! build and the test build, which adds the in-kernel tests and benchmarks), the user
//! programs, and the extension crates for both extension targets (RISC-V for the native
//! and user-level builds, wasm32 for the Wasm build). A lint warning fails the run, named.

use crate::Result;
use crate::kernel_build::{KERNEL_TARGET, cargo};
use crate::ktest::Tally;

/// The Wasm extensions' target.
const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// One clippy run: its name and cargo's arguments before `-- -D warnings`.
struct Lint {
    name: &'static str,
    arguments: Vec<String>,
}

fn packages(prefix: &str, names: &[String]) -> Vec<String> {
    names.iter().flat_map(|name| ["-p".to_string(), format!("{prefix}{name}")]).collect()
}

/// The extension crates (directories under `extensions/` with a Cargo.toml; a C
/// extension has none).
fn extension_crates() -> Result<Vec<String>> {
    let directory = crate::kernel_build::workspace_root().join("extensions");
    let entries = std::fs::read_dir(&directory).map_err(|error| format!("cannot read {}: {error}", directory.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .filter_map(|entry| entry.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    Ok(names)
}

fn lints() -> Result<Vec<Lint>> {
    let programs = crate::userspace::program_names()?;
    let extensions = extension_crates()?;
    let strings = |words: &[&str]| words.iter().map(|word| word.to_string()).collect::<Vec<_>>();
    let mut host = strings(&["--workspace", "--all-targets", "--exclude", "spindle-kernel"]);
    for program in &programs {
        host.extend(["--exclude".to_string(), format!("user-{program}")]);
    }
    let mut user = packages("user-", &programs);
    user.extend(strings(&["-p", "spindle-runtime", "--target", KERNEL_TARGET]));
    let mut native = packages("", &extensions);
    native.extend(strings(&["--target", KERNEL_TARGET]));
    let mut wasm = packages("", &extensions);
    // The trusted Wasm imports and the ABI's direct calls of them (only the builder's
    // generated glue enables those features; lint them as it builds them).
    let direct: Vec<String> = spindle_functions::DOMAINS.iter().map(|domain| format!("spindle-abi/direct-{domain}")).collect();
    wasm.extend(strings(&["-p", "spindle-imports", "-p", "spindle-abi", "--features"]));
    wasm.push(direct.join(","));
    wasm.extend(strings(&["--target", WASM_TARGET]));
    Ok(vec![
        Lint { name: "host", arguments: host },
        Lint { name: "kernel", arguments: strings(&["-p", "spindle-kernel", "--target", KERNEL_TARGET]) },
        Lint { name: "kernel-with-tests", arguments: strings(&["-p", "spindle-kernel", "--target", KERNEL_TARGET, "--features", "tests"]) },
        Lint { name: "user-programs", arguments: user },
        Lint { name: "extensions-riscv64", arguments: native },
        Lint { name: "extensions-wasm32", arguments: wasm },
    ])
}

/// Runs every clippy pass and records each as a test (`clippy::<name>`).
pub fn run(tally: &mut Tally) -> Result<()> {
    println!("== clippy -D warnings (host, kernel, user programs, extensions for riscv64 and wasm32)");
    crate::setup::ensure_clippy()?;
    for lint in lints()? {
        let output = cargo()
            .arg("clippy")
            .args(&lint.arguments)
            .args(["--", "-D", "warnings"])
            .output()
            .map_err(|error| format!("cannot run cargo clippy: {error}"))?;
        let outcome = if output.status.success() {
            Ok(())
        } else {
            let messages = String::from_utf8_lossy(&output.stderr);
            let first: Vec<&str> = messages.lines().filter(|line| line.starts_with("error") || line.trim_start().starts_with("-->")).take(6).collect();
            println!("{messages}");
            Err(format!("clippy reported problems: {}", first.join(" | ")))
        };
        tally.record(&format!("clippy::{}", lint.name), &outcome);
    }
    Ok(())
}
