//! The first check of every build: nothing in the extension's directory can steer cargo,
//! rustup or rustc into running a program or changing what is compiled.
//!
//! The scan uses only plain file-system reads (no tool runs before it passes) and lists
//! every offending file. Refused, anywhere in the extension's directory (recursively):
//!
//! - `.cargo` (directory, file or symlink): cargo's configuration (`.cargo/config.toml`
//!   can set `build.rustc-wrapper`, `target.<triple>.linker`, `rustflags`, …);
//! - `rust-toolchain`, `rust-toolchain.toml`: rustup would run another toolchain;
//! - `build.rs` next to a `Cargo.toml`: cargo runs it as the package's build script;
//! - a symlink that leaves the crate (or dangles): what it names is not reviewed with the
//!   crate, and can change after review;
//! - in any `Cargo.toml`: `cargo-features` (unstable cargo behaviour), `[patch]` and
//!   `[replace]` (other sources for dependencies), `[profile]` (compiler flags),
//!   `package.build` (a build script under another name; `build = false` is fine),
//!   `package.links` (native libraries, configured by build scripts), `package.metabuild`,
//!   `package.workspace` (another workspace root, whose `[patch]` and `[profile]` would
//!   apply), `lib.proc-macro` and `lib.plugin` (code that runs inside the compiler); a
//!   `Cargo.toml` that is not valid TOML is refused too, since it cannot be checked.
//!
//! The directories between the crate and the extensions root (inclusive) are checked
//! too, without recursion: a `.cargo`, `rust-toolchain(.toml)` or offending `Cargo.toml`
//! there applies to the crate as much as one inside it.
//!
//! Irrelevant and allowed: `Cargo.lock`, `.rustc_info.json`, `[workspace]` tables, `[lints]`,
//! `[build-dependencies]` (unused without a build script, which is refused), a module
//! called `build.rs` below `src/`. The builder also runs every tool from its own working
//! directory with a cleaned environment ([`super::tools`]), so even a file this scan
//! missed would not be read by cargo or rustup as configuration.

use std::fs;
use std::path::{Path, PathBuf};

/// One file in an extension's tree that could steer the build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The file (or directory, or symlink).
    pub path: PathBuf,
    /// What it could do.
    pub reason: String,
}

/// Keys of a `Cargo.toml` that steer the build, as (table or `""` for the top level, key,
/// why). `package.build = false` is allowed separately.
const CARGO_TOML_KEYS: &[(&str, &str, &str)] = &[
    ("", "cargo-features", "enables unstable cargo features"),
    ("", "patch", "[patch] replaces dependencies with other sources"),
    ("", "replace", "[replace] replaces dependencies with other sources"),
    ("", "profile", "[profile] changes compiler flags (and, with cargo-features, rustflags)"),
    ("package", "build", "names a build script, which cargo runs at build time"),
    ("package", "links", "declares a native library, configured by build scripts and cargo configuration"),
    ("package", "metabuild", "names metabuild packages, which run at build time"),
    ("package", "workspace", "names another workspace root, whose [patch] and [profile] would apply"),
    ("lib", "proc-macro", "makes the library a proc-macro, which runs inside the compiler"),
    ("lib", "proc_macro", "makes the library a proc-macro, which runs inside the compiler"),
    ("lib", "plugin", "makes the library a compiler plugin"),
];

/// Scans `crate_directory` recursively, and the directories from its parent up to and
/// including `extensions_root` without recursion; returns every finding (empty: the tree
/// may be built). Paths are reported as found under `crate_directory`.
pub fn scan(crate_directory: &Path, extensions_root: &Path) -> Vec<Finding> {
    let mut findings = Vec::new();
    let crate_root = crate_directory.canonicalize().unwrap_or_else(|_| crate_directory.to_path_buf());
    scan_directory(crate_directory, &crate_root, true, &mut findings);
    let extensions_root = extensions_root.canonicalize().unwrap_or_else(|_| extensions_root.to_path_buf());
    if crate_root.starts_with(&extensions_root) {
        for ancestor in crate_root.ancestors().skip(1) {
            scan_directory(ancestor, &crate_root, false, &mut findings);
            if ancestor == extensions_root {
                break;
            }
        }
    }
    findings
}

/// Checks the entries of `directory`; descends into subdirectories (never through
/// symlinks) when `recursive`. Symlinks are checked against `crate_root` only inside the
/// crate.
fn scan_directory(directory: &Path, crate_root: &Path, recursive: bool, findings: &mut Vec<Finding>) {
    let mut entries: Vec<PathBuf> = match fs::read_dir(directory) {
        Ok(entries) => entries.filter_map(|entry| entry.ok().map(|entry| entry.path())).collect(),
        Err(error) => {
            findings.push(Finding { path: directory.to_path_buf(), reason: format!("cannot be read ({error}), so it cannot be checked") });
            return;
        }
    };
    entries.sort();
    let has_manifest = entries.iter().any(|path| path.file_name().is_some_and(|name| name == "Cargo.toml"));
    for path in entries {
        let Ok(metadata) = fs::symlink_metadata(&path) else { continue };
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let is_symlink = metadata.file_type().is_symlink();
        let mut found = |reason: String| findings.push(Finding { path: path.clone(), reason });
        match name.as_str() {
            ".cargo" => {
                let configuration: Vec<&str> = ["config", "config.toml"].into_iter().filter(|file| !is_symlink && path.join(file).exists()).collect();
                if configuration.is_empty() {
                    found("cargo reads a `.cargo` directory as its configuration (build.rustc-wrapper, linker, rustflags…)".into());
                } else {
                    for file in configuration {
                        findings.push(Finding {
                            path: path.join(file),
                            reason: "cargo configuration: it can name programs to run (build.rustc-wrapper, target linker) and compiler flags".into(),
                        });
                    }
                }
                continue;
            }
            "rust-toolchain" | "rust-toolchain.toml" => {
                found("rustup would build with the toolchain it names (which can be any directory of programs)".into());
                continue;
            }
            "build.rs" if has_manifest => {
                found("cargo runs a package's build.rs at build time".into());
                continue;
            }
            _ => {}
        }
        if is_symlink {
            if recursive {
                match fs::canonicalize(&path) {
                    Ok(target) if target.starts_with(crate_root) => {}
                    Ok(target) => found(format!("a symlink to {}, outside the crate", target.display())),
                    Err(_) => found("a symlink that points nowhere (it could later point anywhere)".into()),
                }
            }
            continue;
        }
        if name == "Cargo.toml" && metadata.is_file() {
            findings.extend(check_cargo_toml(&path));
        } else if metadata.is_dir() && recursive {
            scan_directory(&path, crate_root, true, findings);
        }
    }
}

/// The steering keys of one `Cargo.toml` (see the module documentation).
fn check_cargo_toml(path: &Path) -> Vec<Finding> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => return vec![Finding { path: path.to_path_buf(), reason: format!("cannot be read ({error}), so it cannot be checked") }],
    };
    let table: toml::Table = match toml::from_str(&text) {
        Ok(table) => table,
        Err(error) => {
            let message = error.message().to_string();
            return vec![Finding { path: path.to_path_buf(), reason: format!("is not valid TOML ({message}), so it cannot be checked") }];
        }
    };
    let mut findings = Vec::new();
    for (section, key, why) in CARGO_TOML_KEYS {
        let tables: Vec<(&str, Option<&toml::Table>)> = match *section {
            "" => vec![("", Some(&table))],
            // `[project]` is the old name of `[package]`.
            "package" => vec![("package", table.get("package").and_then(toml::Value::as_table)), ("project", table.get("project").and_then(toml::Value::as_table))],
            other => vec![(other, table.get(other).and_then(toml::Value::as_table))],
        };
        for (name, found) in tables {
            let Some(value) = found.and_then(|found| found.get(*key)) else { continue };
            let allowed = match (*section, *key) {
                ("package", "build") => value.as_bool() == Some(false),
                ("lib", "proc-macro" | "proc_macro" | "plugin") => value.as_bool() == Some(false),
                _ => false,
            };
            if !allowed {
                let place = if name.is_empty() { format!("`{key}`") } else { format!("`{name}.{key}`") };
                findings.push(Finding { path: path.to_path_buf(), reason: format!("{place} {why}") });
            }
        }
    }
    findings
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory `…/extensions` under the system's temporary directory, removed
    /// when dropped.
    pub(crate) struct TemporaryExtensions {
        /// The `extensions` root.
        pub root: PathBuf,
    }

    impl TemporaryExtensions {
        pub(crate) fn new(label: &str) -> TemporaryExtensions {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let base = std::env::temp_dir().join(format!("spindle-{label}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
            let root = base.join("extensions");
            fs::create_dir_all(&root).unwrap();
            TemporaryExtensions { root }
        }

        /// Writes `files` (relative path, text) into crate `name` and returns its directory.
        pub(crate) fn write_crate(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
            let directory = self.root.join(name);
            for (file, text) in files {
                let path = directory.join(file);
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, text).unwrap();
            }
            directory
        }
    }

    impl Drop for TemporaryExtensions {
        fn drop(&mut self) {
            if let Some(base) = self.root.parent() {
                let _ = fs::remove_dir_all(base);
            }
        }
    }

    pub(crate) const GOOD_MANIFEST: &str = "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\n\n[workspace]\n";
    const GOOD_LIB: &str = "#![no_std]\n#![forbid(unsafe_code)]\n";

    fn found(findings: &[Finding]) -> Vec<String> {
        findings.iter().map(|finding| format!("{}: {}", finding.path.display(), finding.reason)).collect()
    }

    #[test]
    fn a_plain_crate_passes() {
        let extensions = TemporaryExtensions::new("tree-plain");
        let directory = extensions.write_crate(
            "demo",
            &[("Cargo.toml", GOOD_MANIFEST), ("Cargo.lock", "version = 4\n"), ("src/lib.rs", GOOD_LIB), ("src/build.rs", "// a module, not a build script\n"), (".rustc_info.json", "{}")],
        );
        std::os::unix::fs::symlink("lib.rs", directory.join("src/alias.rs")).unwrap();
        assert_eq!(found(&scan(&directory, &extensions.root)), Vec::<String>::new());
    }

    #[test]
    fn each_steering_file_is_named() {
        let wrapper = "[build]\nrustc-wrapper = \"/tmp/x\"\n";
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[(".cargo/config.toml", wrapper)], ".cargo/config.toml"),
            (&[(".cargo/config", wrapper)], ".cargo/config"),
            (&[("src/.cargo/config.toml", "[build]\n")], "src/.cargo/config.toml"),
            (&[(".cargo/other", "")], ".cargo"),
            (&[("rust-toolchain", "evil\n")], "rust-toolchain"),
            (&[("rust-toolchain.toml", "[toolchain]\nchannel = \"evil\"\n")], "rust-toolchain.toml"),
            (&[("build.rs", "fn main() {}\n")], "build.rs"),
            (&[("helper/Cargo.toml", "[package]\nname = \"helper\"\n"), ("helper/build.rs", "fn main() {}\n")], "helper/build.rs"),
        ];
        for (files, named) in cases {
            let extensions = TemporaryExtensions::new("tree-file");
            let mut all = vec![("Cargo.toml", GOOD_MANIFEST), ("src/lib.rs", GOOD_LIB)];
            all.extend_from_slice(files);
            let directory = extensions.write_crate("demo", &all);
            let findings = scan(&directory, &extensions.root);
            assert_eq!(findings.len(), 1, "{named}: {:?}", found(&findings));
            assert_eq!(findings[0].path, directory.join(named), "{named}");
        }
    }

    #[test]
    fn steering_cargo_toml_keys_are_named() {
        let cases: &[(&str, &str)] = &[
            ("cargo-features = [\"profile-rustflags\"]\n", "`cargo-features`"),
            ("[patch.crates-io]\nfoo = { path = \"/tmp\" }\n", "`patch`"),
            ("[replace]\n\"foo:1.0.0\" = { path = \"/tmp\" }\n", "`replace`"),
            ("[profile.release]\nopt-level = 0\n", "`profile`"),
            ("[lib]\nproc-macro = true\n", "`lib.proc-macro`"),
            ("[lib]\nplugin = true\n", "`lib.plugin`"),
        ];
        for (addition, key) in cases {
            let extensions = TemporaryExtensions::new("tree-key");
            let manifest = format!("{addition}{GOOD_MANIFEST}");
            let manifest = if addition.starts_with('[') { format!("{GOOD_MANIFEST}{addition}") } else { manifest };
            let directory = extensions.write_crate("demo", &[("Cargo.toml", &manifest), ("src/lib.rs", GOOD_LIB)]);
            let findings = scan(&directory, &extensions.root);
            assert_eq!(findings.len(), 1, "{addition}: {:?}", found(&findings));
            assert!(findings[0].reason.starts_with(key), "{addition}: {}", findings[0].reason);
            assert_eq!(findings[0].path, directory.join("Cargo.toml"));
        }
        for (package_key, key) in [("build = \"steer.rs\"", "`package.build`"), ("links = \"z\"", "`package.links`"), ("workspace = \"..\"", "`package.workspace`")] {
            let extensions = TemporaryExtensions::new("tree-key");
            let manifest = GOOD_MANIFEST.replacen("edition = \"2024\"\n", &format!("edition = \"2024\"\n{package_key}\n"), 1);
            let directory = extensions.write_crate("demo", &[("Cargo.toml", &manifest), ("src/lib.rs", GOOD_LIB)]);
            let findings = scan(&directory, &extensions.root);
            assert_eq!(findings.len(), 1, "{package_key}: {:?}", found(&findings));
            assert!(findings[0].reason.starts_with(key), "{}", findings[0].reason);
        }
        // Explicitly switched off is fine; unparseable is not.
        let extensions = TemporaryExtensions::new("tree-key");
        let manifest = GOOD_MANIFEST.replacen("edition = \"2024\"\n", "edition = \"2024\"\nbuild = false\n", 1) + "[lib]\nproc-macro = false\n";
        let directory = extensions.write_crate("demo", &[("Cargo.toml", &manifest), ("src/lib.rs", GOOD_LIB)]);
        assert!(scan(&directory, &extensions.root).is_empty());
        fs::write(directory.join("Cargo.toml"), "[package\n").unwrap();
        let findings = scan(&directory, &extensions.root);
        assert!(findings.len() == 1 && findings[0].reason.starts_with("is not valid TOML"), "{:?}", found(&findings));
    }

    #[test]
    fn symlinks_leaving_the_crate_are_named() {
        let extensions = TemporaryExtensions::new("tree-symlink");
        let directory = extensions.write_crate("demo", &[("Cargo.toml", GOOD_MANIFEST), ("src/lib.rs", GOOD_LIB)]);
        std::os::unix::fs::symlink("/etc/hostname", directory.join("src/outside.rs")).unwrap();
        std::os::unix::fs::symlink("../..", directory.join("src/up")).unwrap();
        std::os::unix::fs::symlink("/nonexistent-spindle-target", directory.join("dangling")).unwrap();
        std::os::unix::fs::symlink("/tmp", directory.join(".cargo")).unwrap();
        let findings = scan(&directory, &extensions.root);
        let paths: Vec<PathBuf> = findings.iter().map(|finding| finding.path.clone()).collect();
        assert_eq!(paths, [directory.join(".cargo"), directory.join("dangling"), directory.join("src/outside.rs"), directory.join("src/up")], "{:?}", found(&findings));
        assert!(findings[2].reason.contains("outside the crate"), "{}", findings[2].reason);
    }

    #[test]
    fn directories_above_the_crate_up_to_the_extensions_root_count() {
        let extensions = TemporaryExtensions::new("tree-ancestor");
        let directory = extensions.write_crate("group/demo", &[("Cargo.toml", GOOD_MANIFEST), ("src/lib.rs", GOOD_LIB)]);
        fs::create_dir_all(extensions.root.join(".cargo")).unwrap();
        fs::write(extensions.root.join(".cargo/config.toml"), "[build]\nrustc-wrapper = \"/tmp/x\"\n").unwrap();
        fs::write(extensions.root.join("group/rust-toolchain.toml"), "[toolchain]\n").unwrap();
        // Above the extensions root is the workspace's business, not the extension's.
        fs::write(extensions.root.parent().unwrap().join("rust-toolchain.toml"), "[toolchain]\n").unwrap();
        let paths: Vec<PathBuf> = scan(&directory, &extensions.root).into_iter().map(|finding| finding.path).collect();
        assert_eq!(paths, [extensions.root.join("group/rust-toolchain.toml"), extensions.root.join(".cargo/config.toml")]);
    }

    #[test]
    fn the_workspace_extensions_pass() {
        let root = crate::kernel_build::workspace_root();
        for entry in fs::read_dir(root.join("extensions")).unwrap() {
            let directory = entry.unwrap().path();
            assert_eq!(found(&scan(&directory, &root.join("extensions"))), Vec::<String>::new(), "{}", directory.display());
        }
    }
}
