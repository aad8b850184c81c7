//! Host unit tests: every workspace crate except the kernel binary, with plain
//! `cargo test`. Pure logic (dispatcher, domains, capabilities, ABI, xtask itself) is
//! tested here; hardware-touching code is tested in QEMU by `ktest`.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::Result;
use crate::kernel_build::cargo;

/// Crates that cannot be built for the host (they contain RISC-V assembly). The user
/// programs (`user-<name>`, `no_main` binaries for the bare-metal target) are excluded too.
const NOT_HOST_TESTABLE: &[&str] = &["spindle-kernel"];

/// Runs the host tests; returns (passed, failed) summed over every test binary.
pub fn run() -> Result<(usize, usize)> {
    println!("== host unit tests");
    let mut command = cargo();
    command.args(["test", "--workspace", "--no-fail-fast"]);
    for excluded in NOT_HOST_TESTABLE {
        command.args(["--exclude", excluded]);
    }
    for program in crate::userspace::program_names()? {
        command.args(["--exclude", &format!("user-{program}")]);
    }
    command.stdout(Stdio::piped());
    let mut child = command.spawn().map_err(|error| format!("cannot run cargo test: {error}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut passed = 0;
    let mut failed = 0;
    let mut saw_result = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|error| error.to_string())?;
        if let Some((binary_passed, binary_failed)) = parse_result_line(&line) {
            passed += binary_passed;
            failed += binary_failed;
            saw_result = true;
        }
        if line.starts_with("test ") && !line.ends_with("... ok") || line.starts_with("test result") || line.contains("panicked") {
            println!("{line}");
        }
    }
    let status = child.wait().map_err(|error| error.to_string())?;
    if !status.success() && failed == 0 {
        // A build failure (or a crashed test binary) produces no failing test line.
        println!("host tests: cargo test failed before reporting failures ({status})");
        failed += 1;
    }
    if !saw_result {
        println!("host tests: no test results were reported");
    }
    println!("host tests: {passed} passed, {failed} failed");
    Ok((passed, failed))
}

/// Parses libtest's `test result: ok. 3 passed; 1 failed; …` line.
pub fn parse_result_line(line: &str) -> Option<(usize, usize)> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let count_before = |label: &str| -> Option<usize> {
        let end = rest.find(label)?;
        rest[..end].trim_end().rsplit([' ', '.']).next()?.parse().ok()
    };
    Some((count_before(" passed")?, count_before(" failed")?))
}

#[cfg(test)]
mod tests {
    use super::parse_result_line;

    #[test]
    fn parses_libtest_summary() {
        let line = "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s";
        assert_eq!(parse_result_line(line), Some((12, 0)));
        let line = "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out";
        assert_eq!(parse_result_line(line), Some((3, 2)));
    }

    #[test]
    fn ignores_other_lines() {
        assert_eq!(parse_result_line("running 3 tests"), None);
        assert_eq!(parse_result_line("test foo ... ok"), None);
    }
}
