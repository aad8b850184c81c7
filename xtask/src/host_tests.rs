//! Host unit tests: every workspace crate except the kernel binary, with plain
//! `cargo test`. Pure logic (dispatcher, domains, capabilities, ABI, xtask itself) is
//! tested here; hardware-touching code is tested in QEMU by `ktest`.

use std::io::{BufRead, BufReader};

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
    // Cargo names each test binary on stderr ("Running …", "Doc-tests …") and the binary
    // reports on stdout: one pipe for both keeps them in order.
    let (reader, writer) = std::io::pipe().map_err(|error| format!("cannot make a pipe: {error}"))?;
    let second_writer = writer.try_clone().map_err(|error| format!("cannot clone a pipe: {error}"))?;
    command.stdout(writer).stderr(second_writer);
    let mut child = command.spawn().map_err(|error| format!("cannot run cargo test: {error}"))?;
    // The command holds the pipe's write ends: drop it, or the read never ends.
    drop(command);
    let mut passed = 0;
    let mut failed = 0;
    let mut saw_result = false;
    let mut binaries = BinaryTally::default();
    for line in BufReader::new(reader).lines() {
        let line = line.map_err(|error| error.to_string())?;
        binaries.see(&line);
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
    for problem in binaries.finish() {
        println!("host tests: {problem}");
        failed += 1;
    }
    println!("host tests: {passed} passed, {failed} failed");
    Ok((passed, failed))
}

/// Follows which test binary is reporting, so that one which reports nothing (it crashed
/// before its summary) or a crate's unit tests that report no test at all fail the run.
#[derive(Default)]
struct BinaryTally {
    /// The binary reporting now (`unittests src/lib.rs (…/deps/spindle_abi-…)`, `Doc-tests …`)
    /// and whether it has printed its summary.
    current: Option<(String, bool)>,
    problems: Vec<String>,
}

impl BinaryTally {
    fn see(&mut self, line: &str) {
        let trimmed = line.trim();
        let started = trimmed.strip_prefix("Running ").or_else(|| trimmed.starts_with("Doc-tests ").then_some(trimmed));
        if let Some(binary) = started {
            self.close();
            self.current = Some((binary.to_string(), false));
        } else if let Some((passed, failed)) = parse_result_line(trimmed)
            && let Some((binary, reported)) = &mut self.current
        {
            *reported = true;
            if passed + failed == 0 && binary.starts_with("unittests") {
                self.problems.push(format!("{binary} reports no tests"));
            }
        }
    }

    fn close(&mut self) {
        if let Some((binary, false)) = self.current.take() {
            self.problems.push(format!("{binary} ended without reporting results"));
        }
    }

    /// The problems seen, once the output has ended.
    fn finish(mut self) -> Vec<String> {
        self.close();
        self.problems
    }
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
    fn a_binary_without_tests_or_without_a_summary_is_a_problem() {
        let mut tally = super::BinaryTally::default();
        for line in [
            "     Running unittests src/lib.rs (target/debug/deps/good-0123)",
            "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
            "     Running unittests src/lib.rs (target/debug/deps/empty-0123)",
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
            "   Doc-tests good",
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
            "     Running tests/crash.rs (target/debug/deps/crash-0123)",
        ] {
            tally.see(line);
        }
        let problems = tally.finish();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("empty-0123") && problems[0].contains("no tests"));
        assert!(problems[1].contains("crash-0123") && problems[1].contains("without reporting"));
    }

    #[test]
    fn ignores_other_lines() {
        assert_eq!(parse_result_line("running 3 tests"), None);
        assert_eq!(parse_result_line("test foo ... ok"), None);
    }
}
