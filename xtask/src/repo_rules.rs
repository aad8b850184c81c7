//! The project's own source rules, checked by `cargo xtask test` so they do not live only
//! in the docs (STYLE.md): every `unsafe {` block in `kernel/` and `abi/` has a
//! `// SAFETY:` comment within the three lines above it, and every extension crate's
//! `src/lib.rs` has `#![forbid(unsafe_code)]`.

use std::path::{Path, PathBuf};

use crate::ktest::Tally;

/// Lines above an `unsafe {` that may hold its `SAFETY:` comment.
const SAFETY_WINDOW: usize = 3;

fn rust_files(directory: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "target" || name == "fixtures") {
                continue;
            }
            rust_files(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// `unsafe {` lines of `source` with no `SAFETY:` in the lines just above (1-based).
pub fn undocumented_unsafe_blocks(source: &str) -> Vec<usize> {
    let lines: Vec<&str> = source.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.contains("unsafe {"))
        .filter(|(index, _)| !lines[index.saturating_sub(SAFETY_WINDOW)..*index].iter().any(|line| line.contains("SAFETY")))
        .map(|(index, _)| index + 1)
        .collect()
}

/// Runs the checks, recording one result per rule.
pub fn check(root: &Path, tally: &mut Tally) {
    println!("== repository rules");
    let mut files = Vec::new();
    rust_files(&root.join("kernel"), &mut files);
    rust_files(&root.join("abi"), &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap_or_default();
        for line in undocumented_unsafe_blocks(&source) {
            problems.push(format!("{}:{line}", file.strip_prefix(root).unwrap_or(file).display()));
        }
    }
    let outcome = if problems.is_empty() { Ok(()) } else { Err(format!("`unsafe {{` without a SAFETY comment above it: {}", problems.join(", "))) };
    tally.record("repo::every-unsafe-block-has-a-safety-comment", &outcome);

    let mut missing = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.join("extensions")) {
        for entry in entries.flatten() {
            let library = entry.path().join("src").join("lib.rs");
            if let Ok(source) = std::fs::read_to_string(&library)
                && !source.contains("#![forbid(unsafe_code)]")
            {
                missing.push(library.strip_prefix(root).unwrap_or(&library).display().to_string());
            }
        }
    }
    let outcome = if missing.is_empty() { Ok(()) } else { Err(format!("missing #![forbid(unsafe_code)]: {}", missing.join(", "))) };
    tally.record("repo::extensions-forbid-unsafe-code", &outcome);
}

#[cfg(test)]
mod tests {
    use super::undocumented_unsafe_blocks;

    #[test]
    fn finds_only_undocumented_blocks() {
        let source = "fn a() {\n    // SAFETY: fine.\n    unsafe { x() };\n}\nfn b() {\n    unsafe { y() };\n}\n";
        assert_eq!(undocumented_unsafe_blocks(source), vec![6]);
        let far = "// SAFETY: too far\n\n\n\nunsafe { z() };\n";
        assert_eq!(undocumented_unsafe_blocks(far), vec![5]);
    }
}
