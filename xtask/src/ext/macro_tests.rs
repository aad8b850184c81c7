//! What a mistake in an `extension!` declaration looks like to its author: each test
//! compiles a small crate against the workspace's `abi/` with `cargo check
//! --message-format=json` and checks the error's code, its message and the line its
//! primary span points at (the binding at fault, not the macro's first line).

use std::path::Path;

use crate::ext::tree::tests::TemporaryExtensions;
use crate::kernel_build::workspace_root;

/// One compiler error: code, message, primary line, rendered text.
#[derive(Debug)]
struct Diagnostic {
    code: String,
    message: String,
    line: u64,
    rendered: String,
}

/// `cargo check`s a crate whose `src/lib.rs` is `source` (with the usual imports and
/// handlers before it) and returns its errors.
fn errors_of(crates: &TemporaryExtensions, source: &str) -> Vec<Diagnostic> {
    let manifest = format!(
        "[package]\nname = \"macro-diagnostics\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\nspindle-abi = {{ path = {:?} }}\n\n[workspace]\n",
        workspace_root().join("abi")
    );
    let directory = crates.write_crate("macro-diagnostics", &[("Cargo.toml", &manifest), ("src/lib.rs", source)]);
    let output = crate::ext::tools::cargo()
        .unwrap()
        .args(["check", "--quiet", "--message-format=json", "--manifest-path"])
        .arg(directory.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(directory.join("target"))
        .output()
        .unwrap();
    let mut errors = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let message = &message["message"];
        if message["level"] != "error" || message["code"].is_null() {
            continue;
        }
        let primary = message["spans"].as_array().and_then(|spans| spans.iter().find(|span| span["is_primary"] == true));
        let is_ours = primary.is_some_and(|span| Path::new(span["file_name"].as_str().unwrap_or("")).ends_with("src/lib.rs"));
        errors.push(Diagnostic {
            code: message["code"]["code"].as_str().unwrap_or("").to_string(),
            message: message["message"].as_str().unwrap_or("").to_string(),
            line: if is_ours { primary.and_then(|span| span["line_start"].as_u64()).unwrap_or(0) } else { 0 },
            rendered: message["rendered"].as_str().unwrap_or("").to_string(),
        });
    }
    errors
}

/// The line (1-based) of `source` that contains `text`.
fn line_of(source: &str, text: &str) -> u64 {
    source.lines().position(|line| line.contains(text)).expect("the marker is in the source") as u64 + 1
}

const PRELUDE: &str = "#![no_std]
use spindle_abi::event::{BENCH_PROBE, CONSOLE_LINE, ConsoleLine, ConsoleVerdict, Probe, ProbeResult};
fn double(probe: &Probe) -> ProbeResult { ProbeResult { value: probe.value * 2 } }
fn greet(_line: &ConsoleLine) -> ConsoleVerdict { ConsoleVerdict { claimed: 1 } }
";

#[test]
fn binding_errors_point_at_the_binding_and_list_the_fields() {
    let crates = TemporaryExtensions::new("macro-diagnostics");
    let source = format!(
        "{PRELUDE}spindle_abi::extension! {{
    name: \"diagnostics\",
    version: \"0.1.0\",
    budget_microseconds: 10,
    memory_quota_bytes: 4096,
    domains: [],
    bindings: [
        CONSOLE_LINE when [command_fingerprint == (7)] => greet,
        BENCH_PROBE when [colour == (3)] => double,
        BENCH_PROBE when [value in (1, 2)] => double,
        BENCH_PROBE => greet,
    ],
}}
"
    );
    let errors = errors_of(&crates, &source);
    // A handler of the wrong type is named in the declaration and the two generated invoke
    // paths (`invoke`, `invoke_words`: E0308, "expected fn pointer"), and its direct entry
    // (E0631: the handler's signature against the event's). Every error is at a binding —
    // none at the macro as a whole (line 0) — and no other kind of error appears.
    let mut found: Vec<(String, u64)> = errors.iter().map(|error| (error.code.clone(), error.line)).collect();
    found.sort_unstable();
    found.dedup();
    let (colour, greet) = (line_of(&source, "colour"), line_of(&source, "BENCH_PROBE => greet"));
    assert_eq!(found, [("E0308".to_string(), greet), ("E0609".to_string(), colour), ("E0631".to_string(), greet)], "{errors:#?}");
    let field = errors.iter().find(|error| error.code == "E0609").unwrap_or_else(|| panic!("{errors:#?}"));
    assert_eq!(field.line, line_of(&source, "colour"), "{}", field.rendered);
    assert!(field.message.contains("no field `colour`") && field.message.contains("Probe"), "{}", field.rendered);
    assert!(field.rendered.contains("available fields are: `key`, `value`"), "{}", field.rendered);
    let handler = errors.iter().find(|error| error.code == "E0308").unwrap_or_else(|| panic!("{errors:#?}"));
    assert_eq!(handler.line, line_of(&source, "BENCH_PROBE => greet"), "{}", handler.rendered);
    assert!(handler.rendered.contains("fn(&'a Probe) -> ProbeResult"), "{}", handler.rendered);
}

#[test]
fn a_budget_outside_the_limit_is_a_compile_error_naming_it() {
    let crates = TemporaryExtensions::new("macro-budget");
    let declaration = |module: &str, budget: &str| {
        format!(
            "mod {module} {{
    use super::*;
    spindle_abi::extension! {{
        name: \"{module}\",
        version: \"0.1.0\",
        budget_microseconds: {budget},
        memory_quota_bytes: 4096,
        domains: [],
        bindings: [BENCH_PROBE => double],
    }}
}}
"
        )
    };
    let source = format!("{PRELUDE}{}{}{}", declaration("zero", "0"), declaration("slow", "1_000_001"), declaration("fine", "1_000_000"));
    let errors = errors_of(&crates, &source);
    let budget_errors: Vec<&Diagnostic> = errors.iter().filter(|error| error.code == "E0080").collect();
    assert_eq!(budget_errors.len(), 2, "{errors:#?}");
    assert!(budget_errors.iter().any(|error| error.message.contains("budget_microseconds is 0")), "{errors:#?}");
    for error in budget_errors {
        assert!(error.message.contains("MAX_BUDGET_MICROSECONDS (1000000 us"), "{}", error.rendered);
    }
}
