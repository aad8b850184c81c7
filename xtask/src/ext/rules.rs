//! The trusted builder's rules: what an extension crate must be before `ext build` compiles
//! it into a signed native extension. This file is the one place the rules live
//! ([`RULES`], [`ALLOWED_DEPENDENCIES`]); `docs/trusted-builder.md` explains them.
//!
//! Why these rules: a native extension runs in the kernel address space, contained only
//! by the Rust compiler's checks. `#![forbid(unsafe_code)]` at the crate root cannot be
//! relaxed inside the crate, and edition 2024 makes `no_mangle`, `export_name`,
//! `link_section` and `extern` blocks unsafe, so the lint covers them too. Code outside the
//! crate is kept to `spindle-abi` (trusted, reviewed with the kernel) and an explicit
//! allow-list, and nothing may run at build time (build scripts, proc-macros) unless
//! allow-listed.
//!
//! The dependency closure comes from `cargo metadata --format-version 1` (its `resolve`
//! graph): every package reachable from the crate through normal dependencies, on every
//! target platform (no platform filter, so a `cfg`-gated dependency cannot hide).
//!
//! Limitations: the attribute scan reads only the library's root file (that is where
//! crate-level attributes live); it does not expand macros, so `#![forbid(unsafe_code)]`
//! written through `cfg_attr` or a macro is not recognised and the crate is refused.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use serde::Deserialize;

use super::Technology;

/// A rule a native extension crate must follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The crate lives under `extensions/`.
    UnderExtensions,
    /// Nothing in the crate's directory can steer cargo, rustup or rustc (see
    /// [`super::tree`]).
    NothingSteersTheBuild,
    /// The crate has a library target (the glue links against it).
    LibraryTarget,
    /// Edition 2024 (package and library target).
    Edition2024,
    /// `#![no_std]` at crate level.
    NoStd,
    /// `#![forbid(unsafe_code)]` at crate level.
    ForbidUnsafeCode,
    /// Normal dependencies, transitively: only `spindle-abi` and [`ALLOWED_DEPENDENCIES`].
    AllowedDependencies,
    /// No build script anywhere in the closure (unless allow-listed).
    NoBuildScript,
    /// No proc-macro anywhere in the closure (unless allow-listed).
    NoProcMacro,
}

/// Every rule, in the order they are checked.
pub const RULES: &[Rule] = &[
    Rule::UnderExtensions,
    Rule::NothingSteersTheBuild,
    Rule::LibraryTarget,
    Rule::Edition2024,
    Rule::NoStd,
    Rule::ForbidUnsafeCode,
    Rule::AllowedDependencies,
    Rule::NoBuildScript,
    Rule::NoProcMacro,
];

impl Rule {
    /// The rule as one sentence (shown in every refusal).
    pub fn statement(self) -> &'static str {
        match self {
            Rule::UnderExtensions => "an extension is a crate (or a C extension's directory) under extensions/",
            Rule::NothingSteersTheBuild => {
                "nothing in the extension's directory can steer cargo, rustup or rustc: no .cargo, rust-toolchain(.toml), build.rs, symlink leaving the crate, or Cargo.toml cargo-features/[patch]/[replace]/[profile]/build/links/workspace/proc-macro"
            }
            Rule::LibraryTarget => "the crate has a library target",
            Rule::Edition2024 => "the crate uses edition 2024 (which makes no_mangle, export_name, link_section and extern blocks unsafe)",
            Rule::NoStd => "the library's root file has `#![no_std]` at crate level",
            Rule::ForbidUnsafeCode => "the library's root file has `#![forbid(unsafe_code)]` at crate level",
            Rule::AllowedDependencies => {
                "normal dependencies, transitively, are only spindle-abi (the workspace's abi/) and ALLOWED_DEPENDENCIES in xtask/src/ext/rules.rs"
            }
            Rule::NoBuildScript => "no package in the dependency closure has a build script (build.rs)",
            Rule::NoProcMacro => "no package in the dependency closure is a proc-macro",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.statement())
    }
}

/// A crate an extension may depend on besides `spindle-abi`.
#[derive(Clone, Copy, Debug)]
pub struct AllowedDependency {
    /// Package name.
    pub name: &'static str,
    /// Its `source` exactly as `cargo metadata` reports it (e.g.
    /// `registry+https://github.com/rust-lang/crates.io-index`), so a same-named local or
    /// git crate is not mistaken for it.
    pub source: &'static str,
    /// Whether it may have a build script.
    pub build_script: bool,
    /// Whether it may be a proc-macro.
    pub proc_macro: bool,
    /// Why it is trusted (reviewed, `no_std`, no `unsafe` the kernel would regret…).
    pub reason: &'static str,
}

/// The dependency allow-list: what an extension's tree may contain besides `spindle-abi`.
/// Each entry added here is code the kernel trusts; say why in `reason`.
pub const ALLOWED_DEPENDENCIES: &[AllowedDependency] = &[AllowedDependency {
    name: "spin",
    source: "registry+https://github.com/rust-lang/crates.io-index",
    build_script: false,
    proc_macro: false,
    reason: "spindle-abi's domain slots (`host::Slot`, a `spin::Once`): no_std, no build script, no proc-macro, \
             version pinned by the workspace's Cargo.lock; its unsafe is the well-reviewed spin-lock and once primitives",
}];

/// The ABI crate every extension depends on; accepted only from the workspace's `abi/`.
pub const ABI_PACKAGE: &str = "spindle-abi";

/// The ABI's own dependency holding the kernel-function list (no dependencies, no
/// `unsafe`); accepted only from the workspace's `abi/functions/`. (`spindle-abi`'s
/// optional `spindle-imports` is not accepted: only the builder's generated glue enables
/// it, never an extension.)
pub const ABI_FUNCTIONS_PACKAGE: &str = "spindle-functions";

/// One broken rule, with the place that breaks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// Where: a file, or a package and who requires it.
    pub place: String,
    /// What was found there.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "rule: {}\n    at {}: {}", self.rule, self.place, self.detail)
    }
}

/// Why a crate was not checked or not accepted.
#[derive(Debug)]
pub enum CheckError {
    /// The crate breaks rules (every violation found, in [`RULES`] order).
    Refused {
        /// What the user named.
        crate_argument: String,
        /// The technology it was to be built as.
        technology: Technology,
        /// The violations.
        violations: Vec<Violation>,
    },
    /// `cargo metadata` could not be run or its output not read.
    Metadata(String),
}

impl fmt::Display for CheckError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Refused { crate_argument, technology, violations } => {
                write!(formatter, "refusing to build `{crate_argument}` as {}:", technology.as_an_extension())?;
                for violation in violations {
                    write!(formatter, "\n  - {violation}")?;
                }
                Ok(())
            }
            CheckError::Metadata(message) => write!(formatter, "cannot read the crate's metadata: {message}"),
        }
    }
}

impl CheckError {
    /// The rules broken (empty for a metadata failure).
    #[cfg(test)]
    pub fn rules(&self) -> Vec<Rule> {
        match self {
            CheckError::Refused { violations, .. } => violations.iter().map(|violation| violation.rule).collect(),
            CheckError::Metadata(_) => Vec::new(),
        }
    }
}

/// An extension crate that follows every rule.
#[derive(Clone, Debug)]
pub struct CheckedCrate {
    /// Its package name.
    pub package_name: String,
    /// Its directory.
    pub directory: PathBuf,
    /// The root file of its library target.
    pub library_source: PathBuf,
}

/// Checks the crate named by `argument` — a directory name under `extensions_root` or a
/// path (to the crate directory or its `Cargo.toml`) inside it — against every rule, to be
/// built as `technology` (which only changes the wording of a refusal).
/// `abi_manifest` is the workspace's `abi/Cargo.toml`, the one `spindle-abi` accepted.
///
/// Order: the crate's place ([`locate`]), then its tree ([`check_tree`], plain file reads),
/// and only then the first tool, `cargo metadata` (cleaned environment, the builder's own
/// working directory).
///
/// Errors: [`CheckError::Refused`] listing every violation found (a crate outside
/// `extensions_root`, or one whose tree could steer the build, is refused before any tool
/// runs), [`CheckError::Metadata`].
pub fn check_crate(argument: &str, extensions_root: &Path, abi_manifest: &Path, technology: Technology) -> Result<CheckedCrate, CheckError> {
    let refuse = |violations: Vec<Violation>| CheckError::Refused { crate_argument: argument.to_string(), technology, violations };
    let manifest_path = locate(argument, extensions_root).map_err(|violation| refuse(vec![violation]))?;
    check_tree(manifest_path.parent().unwrap_or(&manifest_path), extensions_root).map_err(refuse)?;
    let json = run_cargo_metadata(&manifest_path)?;
    let metadata = parse_metadata(&json).map_err(CheckError::Metadata)?;
    let (checked, mut violations) = check_metadata(&metadata, &manifest_path, abi_manifest);
    if let Some(checked) = &checked {
        match std::fs::read_to_string(&checked.library_source) {
            Ok(source) => violations.extend(check_library_source(&checked.library_source, &source)),
            Err(error) => return Err(CheckError::Metadata(format!("cannot read {}: {error}", checked.library_source.display()))),
        }
    }
    violations.sort_by_key(|violation| RULES.iter().position(|rule| *rule == violation.rule));
    match checked {
        Some(checked) if violations.is_empty() => Ok(checked),
        _ => Err(refuse(violations)),
    }
}

/// The [`Rule::NothingSteersTheBuild`] check of an extension directory (Rust or C): every
/// finding of [`super::tree::scan`] as a violation.
///
/// Errors: the violations, one per offending file.
pub fn check_tree(directory: &Path, extensions_root: &Path) -> Result<(), Vec<Violation>> {
    let findings = super::tree::scan(directory, extensions_root);
    if findings.is_empty() {
        return Ok(());
    }
    Err(findings
        .into_iter()
        .map(|finding| Violation { rule: Rule::NothingSteersTheBuild, place: finding.path.display().to_string(), detail: finding.reason })
        .collect())
}

/// Finds the `Cargo.toml` of the crate `argument` names, which must be inside
/// `extensions_root`: a bare name means `extensions_root/<name>`, anything else is a path.
///
/// Errors: a [`Rule::UnderExtensions`] violation.
pub fn locate(argument: &str, extensions_root: &Path) -> Result<PathBuf, Violation> {
    let violation = |detail: String| Violation { rule: Rule::UnderExtensions, place: argument.to_string(), detail };
    let is_bare_name = !argument.is_empty() && !argument.contains(['/', '\\']) && argument != "." && argument != "..";
    let candidate = if is_bare_name && extensions_root.join(argument).is_dir() {
        extensions_root.join(argument)
    } else {
        PathBuf::from(argument)
    };
    let candidate = if candidate.file_name().is_some_and(|name| name == "Cargo.toml") {
        candidate
    } else {
        candidate.join("Cargo.toml")
    };
    let manifest = candidate.canonicalize().map_err(|_| {
        violation(format!(
            "no crate there (looked for {}); name a crate directory under {}",
            candidate.display(),
            extensions_root.display()
        ))
    })?;
    let root = extensions_root
        .canonicalize()
        .map_err(|error| violation(format!("cannot read {}: {error}", extensions_root.display())))?;
    let directory = manifest.parent().unwrap_or(&manifest);
    if !directory.starts_with(&root) || directory == root {
        return Err(violation(format!("{} is not inside {}", directory.display(), root.display())));
    }
    Ok(manifest)
}

/// Runs `cargo metadata --format-version 1` for the crate (whole resolve graph, every
/// platform) and returns its JSON. Cargo runs from the builder's working directory with a
/// cleaned environment ([`super::tools`]), so no configuration of the extension's applies.
fn run_cargo_metadata(manifest_path: &Path) -> Result<String, CheckError> {
    let output = super::tools::cargo()
        .map_err(CheckError::Metadata)?
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest_path)
        .output()
        .map_err(|error| CheckError::Metadata(format!("cannot run cargo metadata: {error}")))?;
    if !output.status.success() {
        return Err(CheckError::Metadata(format!(
            "cargo metadata --manifest-path {} failed:\n{}",
            manifest_path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    String::from_utf8(output.stdout).map_err(|_| CheckError::Metadata("cargo metadata printed non-UTF-8 text".into()))
}

/// The parts of `cargo metadata --format-version 1` the rules read.
#[derive(Debug, Deserialize)]
pub struct Metadata {
    /// Every package of the resolved graph.
    pub packages: Vec<Package>,
    /// The dependency graph (absent with `--no-deps`, which the builder never passes).
    pub resolve: Option<Resolve>,
}

/// A package in the metadata.
#[derive(Debug, Deserialize)]
pub struct Package {
    /// Opaque package id (keys of the resolve graph).
    pub id: String,
    /// Package name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Registry or git source; `None` for path packages.
    pub source: Option<String>,
    /// Its `Cargo.toml`.
    pub manifest_path: PathBuf,
    /// Package edition.
    pub edition: String,
    /// Its targets (lib, bins, build script, …).
    pub targets: Vec<Target>,
}

/// A build target of a package.
#[derive(Debug, Deserialize)]
pub struct Target {
    /// Target name.
    pub name: String,
    /// Kinds: `lib`, `rlib`, `proc-macro`, `custom-build`, `bin`, …
    pub kind: Vec<String>,
    /// Root source file.
    pub src_path: PathBuf,
    /// Target edition.
    pub edition: String,
}

/// The resolved dependency graph.
#[derive(Debug, Deserialize)]
pub struct Resolve {
    /// One node per package.
    pub nodes: Vec<Node>,
}

/// A package's resolved dependencies.
#[derive(Debug, Deserialize)]
pub struct Node {
    /// Package id.
    pub id: String,
    /// Its dependencies with their kinds.
    #[serde(default)]
    pub deps: Vec<NodeDependency>,
}

/// One resolved dependency edge.
#[derive(Debug, Deserialize)]
pub struct NodeDependency {
    /// The dependency's package id.
    pub pkg: String,
    /// How it is depended on (normal, dev, build; per platform).
    #[serde(default)]
    pub dep_kinds: Vec<DependencyKind>,
}

/// One kind of dependency edge.
#[derive(Debug, Deserialize)]
pub struct DependencyKind {
    /// `None` for a normal dependency, else `"dev"` or `"build"`.
    pub kind: Option<String>,
}

impl NodeDependency {
    /// Whether the edge is a normal dependency on some platform (cargo before 1.41 gave
    /// no kinds; then every edge counts).
    fn is_normal(&self) -> bool {
        self.dep_kinds.is_empty() || self.dep_kinds.iter().any(|kind| kind.kind.is_none())
    }
}

impl Package {
    fn has_kind(&self, kind: &str) -> bool {
        self.targets.iter().any(|target| target.kind.iter().any(|found| found == kind))
    }

    fn library(&self) -> Option<&Target> {
        self.targets.iter().find(|target| target.kind.iter().any(|kind| kind == "lib" || kind == "rlib"))
    }

    fn describe(&self) -> String {
        match &self.source {
            Some(source) => format!("package `{} {}` ({source})", self.name, self.version),
            None => format!("package `{} {}` ({})", self.name, self.version, self.manifest_path.display()),
        }
    }
}

/// Parses `cargo metadata --format-version 1` output.
///
/// Errors: the JSON error as text.
pub fn parse_metadata(json: &str) -> Result<Metadata, String> {
    serde_json::from_str(json).map_err(|error| format!("unexpected cargo metadata output: {error}"))
}

/// Whether two paths name the same file (compared as given, then canonicalised).
fn same_file(first: &Path, second: &Path) -> bool {
    first == second
        || matches!((first.canonicalize(), second.canonicalize()), (Ok(first), Ok(second)) if first == second)
}

/// Checks the package rules on the metadata of the crate whose manifest is
/// `manifest_path`: library target, edition, dependency closure, build scripts and
/// proc-macros. Returns the crate (when it was found and has a library) and the
/// violations.
pub fn check_metadata(metadata: &Metadata, manifest_path: &Path, abi_manifest: &Path) -> (Option<CheckedCrate>, Vec<Violation>) {
    let mut violations = Vec::new();
    let Some(package) = metadata.packages.iter().find(|package| same_file(&package.manifest_path, manifest_path)) else {
        violations.push(Violation {
            rule: Rule::LibraryTarget,
            place: manifest_path.display().to_string(),
            detail: "not a package (cargo metadata does not list it)".into(),
        });
        return (None, violations);
    };
    let place = package.manifest_path.display().to_string();
    let library = package.library();
    if library.is_none() {
        violations.push(Violation { rule: Rule::LibraryTarget, place: place.clone(), detail: "no [lib] target".into() });
    }
    if package.edition != "2024" {
        violations.push(Violation {
            rule: Rule::Edition2024,
            place: place.clone(),
            detail: format!("package `{}` uses edition {}", package.name, package.edition),
        });
    } else if let Some(library) = library.filter(|library| library.edition != "2024") {
        violations.push(Violation {
            rule: Rule::Edition2024,
            place: place.clone(),
            detail: format!("library target `{}` uses edition {}", library.name, library.edition),
        });
    }
    violations.extend(check_closure(metadata, package, abi_manifest));
    let checked = library.map(|library| CheckedCrate {
        package_name: package.name.clone(),
        directory: package.manifest_path.parent().map(Path::to_path_buf).unwrap_or_default(),
        library_source: library.src_path.clone(),
    });
    (checked, violations)
}

/// The dependency, build-script and proc-macro rules over the normal-dependency closure
/// of `root` (which is included).
fn check_closure(metadata: &Metadata, root: &Package, abi_manifest: &Path) -> Vec<Violation> {
    let packages: BTreeMap<&str, &Package> = metadata.packages.iter().map(|package| (package.id.as_str(), package)).collect();
    let Some(resolve) = &metadata.resolve else {
        return vec![Violation {
            rule: Rule::AllowedDependencies,
            place: root.describe(),
            detail: "cargo metadata gave no resolve graph, so the dependencies cannot be checked".into(),
        }];
    };
    let nodes: BTreeMap<&str, &Node> = resolve.nodes.iter().map(|node| (node.id.as_str(), node)).collect();
    // Breadth-first from the crate; `required_by` remembers who pulled each package in.
    let mut required_by: BTreeMap<&str, Option<&str>> = BTreeMap::from([(root.id.as_str(), None)]);
    let mut order = vec![root.id.as_str()];
    let mut queue = VecDeque::from([root.id.as_str()]);
    while let Some(id) = queue.pop_front() {
        for dependency in nodes.get(id).map(|node| node.deps.as_slice()).unwrap_or_default() {
            if dependency.is_normal() && !required_by.contains_key(dependency.pkg.as_str()) {
                required_by.insert(dependency.pkg.as_str(), Some(id));
                order.push(dependency.pkg.as_str());
                queue.push_back(dependency.pkg.as_str());
            }
        }
    }
    let mut violations = Vec::new();
    for id in order {
        let Some(package) = packages.get(id) else { continue };
        let place = match required_by[id].and_then(|parent| packages.get(parent)) {
            Some(parent) => format!("{}, required by `{}`", package.describe(), parent.name),
            None => package.describe(),
        };
        let allowed = ALLOWED_DEPENDENCIES
            .iter()
            .find(|allowed| allowed.name == package.name && package.source.as_deref() == Some(allowed.source));
        let is_root = package.id == root.id;
        let functions_manifest = abi_manifest.parent().map(|abi| abi.join("functions").join("Cargo.toml")).unwrap_or_default();
        let is_abi = package.source.is_none()
            && ((package.name == ABI_PACKAGE && same_file(&package.manifest_path, abi_manifest))
                || (package.name == ABI_FUNCTIONS_PACKAGE && same_file(&package.manifest_path, &functions_manifest)));
        if !is_root && !is_abi && allowed.is_none() {
            let detail = if package.name == ABI_PACKAGE {
                format!("a `{ABI_PACKAGE}` that is not the workspace's {}", abi_manifest.display())
            } else {
                format!("not spindle-abi and not in ALLOWED_DEPENDENCIES ({})", describe_allow_list())
            };
            violations.push(Violation { rule: Rule::AllowedDependencies, place: place.clone(), detail });
        }
        if package.has_kind("custom-build") && !allowed.is_some_and(|allowed| allowed.build_script) {
            let script = package.targets.iter().find(|target| target.kind.iter().any(|kind| kind == "custom-build"));
            let detail = match script {
                Some(script) => format!("has a build script, {}", script.src_path.display()),
                None => "has a build script".to_string(),
            };
            violations.push(Violation { rule: Rule::NoBuildScript, place: place.clone(), detail });
        }
        if package.has_kind("proc-macro") && !allowed.is_some_and(|allowed| allowed.proc_macro) {
            violations.push(Violation { rule: Rule::NoProcMacro, place, detail: "is a proc-macro crate".into() });
        }
    }
    violations
}

/// The allow-list as text for a refusal: each entry with why it is trusted.
fn describe_allow_list() -> String {
    if ALLOWED_DEPENDENCIES.is_empty() {
        return "which is empty".to_string();
    }
    let entries: Vec<String> = ALLOWED_DEPENDENCIES.iter().map(|allowed| format!("{}: {}", allowed.name, allowed.reason)).collect();
    format!("which lists {}", entries.join("; "))
}

/// Checks the crate-level attributes at the top of the library's root file.
pub fn check_library_source(path: &Path, source: &str) -> Vec<Violation> {
    let attributes = leading_inner_attributes(source);
    let mut violations = Vec::new();
    let found = if attributes.is_empty() { "no crate-level attributes".to_string() } else { format!("crate-level attributes are #![{}]", attributes.join("], #![")) };
    if !attributes.iter().any(|attribute| attribute == "no_std") {
        violations.push(Violation { rule: Rule::NoStd, place: path.display().to_string(), detail: found.clone() });
    }
    if !attributes.iter().any(|attribute| forbids_unsafe_code(attribute)) {
        violations.push(Violation { rule: Rule::ForbidUnsafeCode, place: path.display().to_string(), detail: found });
    }
    violations
}

/// Whether a normalised attribute is `forbid(…)` with `unsafe_code` among its lints.
fn forbids_unsafe_code(attribute: &str) -> bool {
    attribute
        .strip_prefix("forbid(")
        .and_then(|rest| rest.strip_suffix(')'))
        .is_some_and(|lints| lints.split(',').any(|lint| lint == "unsafe_code"))
}

/// The inner attributes (`#![…]`) at the top of a Rust source file, in order, with all
/// whitespace removed (`forbid ( unsafe_code )` → `forbid(unsafe_code)`). Comments
/// (including `//!` and `/*! */` doc comments) and whitespace between them are skipped;
/// the scan stops at the first token that is neither, because inner attributes may only
/// precede the items.
pub fn leading_inner_attributes(source: &str) -> Vec<String> {
    let mut scanner = Scanner { text: source.strip_prefix('\u{feff}').unwrap_or(source), position: 0 };
    let mut attributes = Vec::new();
    loop {
        scanner.skip_trivia();
        if !(scanner.eat("#") && scanner.skip_trivia_then("!") && scanner.skip_trivia_then("[")) {
            break;
        }
        let body_start = scanner.position;
        let Some(body_end) = scanner.skip_to_closing_bracket() else { break };
        let body: String = scanner.text[body_start..body_end].chars().filter(|character| !character.is_whitespace()).collect();
        attributes.push(body);
    }
    attributes
}

/// A cursor over source text for [`leading_inner_attributes`].
struct Scanner<'a> {
    text: &'a str,
    position: usize,
}

impl Scanner<'_> {
    fn rest(&self) -> &str {
        &self.text[self.position..]
    }

    fn eat(&mut self, token: &str) -> bool {
        let found = self.rest().starts_with(token);
        if found {
            self.position += token.len();
        }
        found
    }

    fn skip_trivia_then(&mut self, token: &str) -> bool {
        self.skip_trivia();
        self.eat(token)
    }

    /// Skips whitespace, line comments and (nested) block comments.
    fn skip_trivia(&mut self) {
        loop {
            let trimmed = self.rest().trim_start();
            self.position = self.text.len() - trimmed.len();
            if self.eat("//") {
                self.position = self.rest().find('\n').map_or(self.text.len(), |end| self.position + end);
            } else if self.rest().starts_with("/*") {
                self.skip_block_comment();
            } else {
                return;
            }
        }
    }

    fn skip_block_comment(&mut self) {
        let mut depth = 0usize;
        while !self.rest().is_empty() {
            if self.eat("/*") {
                depth += 1;
            } else if self.eat("*/") {
                depth -= 1;
                if depth == 0 {
                    return;
                }
            } else {
                self.skip_character();
            }
        }
    }

    fn skip_character(&mut self) {
        self.position += self.rest().chars().next().map_or(0, char::len_utf8);
    }

    /// From just after an attribute's `[`, finds its matching `]` (skipping nested
    /// brackets, string literals and comments); returns the `]`'s offset and moves past it.
    fn skip_to_closing_bracket(&mut self) -> Option<usize> {
        let mut depth = 1usize;
        loop {
            self.skip_trivia();
            let next = self.rest().chars().next()?;
            match next {
                '[' | '(' | '{' => depth += 1,
                ']' | ')' | '}' => {
                    depth -= 1;
                    if depth == 0 {
                        let end = self.position;
                        self.position += 1;
                        return Some(end);
                    }
                }
                '"' => {
                    self.skip_string()?;
                    continue;
                }
                'r' if self.rest()[1..].starts_with(['"', '#']) => {
                    self.skip_raw_string()?;
                    continue;
                }
                _ => {}
            }
            self.skip_character();
        }
    }

    /// Skips `"…"` with backslash escapes.
    fn skip_string(&mut self) -> Option<()> {
        self.position += 1;
        let mut escaped = false;
        for (offset, character) in self.rest().char_indices() {
            match character {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    self.position += offset + 1;
                    return Some(());
                }
                _ => escaped = false,
            }
        }
        None
    }

    /// Skips `r"…"`, `r#"…"#`, … (an `r` followed by `#` that is not a raw string, as
    /// in the identifier `r#type`, is skipped like an identifier).
    fn skip_raw_string(&mut self) -> Option<()> {
        let hashes = self.rest()[1..].chars().take_while(|character| *character == '#').count();
        if !self.rest()[1 + hashes..].starts_with('"') {
            self.position += 1 + hashes;
            return Some(());
        }
        self.position += 2 + hashes;
        let terminator = format!("\"{}", "#".repeat(hashes));
        let end = self.rest().find(&terminator)?;
        self.position += end + terminator.len();
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_build::workspace_root;

    fn fixtures() -> PathBuf {
        workspace_root().join("xtask/tests/fixtures")
    }

    fn abi_manifest() -> PathBuf {
        workspace_root().join("abi/Cargo.toml")
    }

    #[test]
    fn attributes_are_read_past_comments_and_docs() {
        let source = "\u{feff}//! Docs ] with a bracket.\n/* block /* nested */ #![not_this] */\n#![no_std]\n#! [ forbid ( missing_docs , unsafe_code ) ]\n#![doc = \"a ] in a string\"]\n#![doc = r#\"raw \"] string\"#]\nuse core::fmt;\n#![after_an_item]\n";
        assert_eq!(
            leading_inner_attributes(source),
            ["no_std", "forbid(missing_docs,unsafe_code)", "doc=\"a]inastring\"", "doc=r#\"raw\"]string\"#"]
        );
        assert!(check_library_source(Path::new("lib.rs"), source).is_empty());
    }

    #[test]
    fn substitutes_for_the_attributes_are_refused() {
        let cases = [
            ("#![no_std]\n#![deny(unsafe_code)]\n", vec![Rule::ForbidUnsafeCode]),
            ("#![cfg_attr(not(test), no_std)]\n#![cfg_attr(all(), forbid(unsafe_code))]\n", vec![Rule::NoStd, Rule::ForbidUnsafeCode]),
            ("#![no_std]\n// #![forbid(unsafe_code)]\n", vec![Rule::ForbidUnsafeCode]),
            ("#![no_std]\nfn f() {}\n#![forbid(unsafe_code)]\n", vec![Rule::ForbidUnsafeCode]),
            ("#[no_std]\n#[forbid(unsafe_code)]\nfn f() {}\n", vec![Rule::NoStd, Rule::ForbidUnsafeCode]),
            ("#![forbid(unsafe_code_extra)]\n#![no_std]\n", vec![Rule::ForbidUnsafeCode]),
            ("", vec![Rule::NoStd, Rule::ForbidUnsafeCode]),
        ];
        for (source, expected) in cases {
            let rules: Vec<Rule> = check_library_source(Path::new("lib.rs"), source).iter().map(|violation| violation.rule).collect();
            assert_eq!(rules, expected, "{source:?}");
        }
    }

    /// Synthetic metadata: `ext` depends on the given (name, source, kinds) packages.
    fn metadata(edition: &str, dependencies: &[(&str, Option<&str>, &[&str])]) -> Metadata {
        let mut packages = vec![serde_json::json!({
            "id": "ext", "name": "ext", "version": "0.1.0", "source": null,
            "manifest_path": "/ws/extensions/ext/Cargo.toml", "edition": edition,
            "targets": [{"name": "ext", "kind": ["lib"], "src_path": "/ws/extensions/ext/src/lib.rs", "edition": edition}],
        })];
        let mut edges = Vec::new();
        for (name, source, kinds) in dependencies {
            let manifest = if *name == ABI_PACKAGE { "/ws/abi/Cargo.toml".to_string() } else { format!("/deps/{name}/Cargo.toml") };
            let targets: Vec<_> = kinds
                .iter()
                .map(|kind| serde_json::json!({"name": name, "kind": [kind], "src_path": format!("/deps/{name}/{kind}.rs"), "edition": "2024"}))
                .collect();
            packages.push(serde_json::json!({
                "id": name, "name": name, "version": "1.0.0", "source": source,
                "manifest_path": manifest, "edition": "2024", "targets": targets,
            }));
            edges.push(serde_json::json!({"name": name, "pkg": name, "dep_kinds": [{"kind": null, "target": null}]}));
        }
        // A dev-dependency is not part of the closure.
        packages.push(serde_json::json!({
            "id": "test-helper", "name": "test-helper", "version": "1.0.0", "source": null,
            "manifest_path": "/deps/test-helper/Cargo.toml", "edition": "2021", "targets": [{"name": "b", "kind": ["custom-build"], "src_path": "/deps/test-helper/build.rs", "edition": "2021"}],
        }));
        edges.push(serde_json::json!({"name": "test_helper", "pkg": "test-helper", "dep_kinds": [{"kind": "dev", "target": null}]}));
        let json = serde_json::json!({
            "packages": packages,
            "resolve": {"root": "ext", "nodes": [{"id": "ext", "deps": edges}]},
        });
        parse_metadata(&json.to_string()).unwrap()
    }

    fn metadata_rules(metadata: &Metadata) -> Vec<Rule> {
        let (_, violations) = check_metadata(metadata, Path::new("/ws/extensions/ext/Cargo.toml"), Path::new("/ws/abi/Cargo.toml"));
        violations.iter().map(|violation| violation.rule).collect()
    }

    #[test]
    fn synthetic_metadata_rules() {
        assert_eq!(metadata_rules(&metadata("2024", &[(ABI_PACKAGE, None, &["lib"])])), []);
        assert_eq!(metadata_rules(&metadata("2021", &[(ABI_PACKAGE, None, &["lib"])])), [Rule::Edition2024]);
        assert_eq!(
            metadata_rules(&metadata("2024", &[("serde", Some("registry+https://github.com/rust-lang/crates.io-index"), &["lib", "custom-build"])])),
            [Rule::AllowedDependencies, Rule::NoBuildScript]
        );
        assert_eq!(metadata_rules(&metadata("2024", &[("derive-it", None, &["proc-macro"])])), [Rule::AllowedDependencies, Rule::NoProcMacro]);
        // A crates.io package that borrows the ABI's name is not the ABI.
        let impostor = metadata("2024", &[(ABI_PACKAGE, Some("registry+https://github.com/rust-lang/crates.io-index"), &["lib"])]);
        assert_eq!(metadata_rules(&impostor), [Rule::AllowedDependencies]);
    }

    #[test]
    fn transitive_dependencies_name_who_requires_them() {
        let json = serde_json::json!({
            "packages": [
                {"id": "ext", "name": "ext", "version": "0.1.0", "source": null, "manifest_path": "/ws/extensions/ext/Cargo.toml", "edition": "2024",
                 "targets": [{"name": "ext", "kind": ["lib"], "src_path": "/ws/extensions/ext/src/lib.rs", "edition": "2024"}]},
                {"id": "abi", "name": ABI_PACKAGE, "version": "0.1.0", "source": null, "manifest_path": "/ws/abi/Cargo.toml", "edition": "2024",
                 "targets": [{"name": "spindle_abi", "kind": ["lib"], "src_path": "/ws/abi/src/lib.rs", "edition": "2024"}]},
                {"id": "deep", "name": "deep", "version": "2.0.0", "source": "git+https://example.invalid/deep", "manifest_path": "/deps/deep/Cargo.toml", "edition": "2024",
                 "targets": [{"name": "deep", "kind": ["lib"], "src_path": "/deps/deep/src/lib.rs", "edition": "2024"}]},
            ],
            "resolve": {"root": "ext", "nodes": [
                {"id": "ext", "deps": [{"name": "spindle_abi", "pkg": "abi", "dep_kinds": [{"kind": null, "target": null}]}]},
                {"id": "abi", "deps": [{"name": "deep", "pkg": "deep", "dep_kinds": [{"kind": null, "target": "cfg(target_os = \"none\")"}]}]},
                {"id": "deep", "deps": []},
            ]},
        });
        let metadata = parse_metadata(&json.to_string()).unwrap();
        let (checked, violations) = check_metadata(&metadata, Path::new("/ws/extensions/ext/Cargo.toml"), Path::new("/ws/abi/Cargo.toml"));
        assert_eq!(checked.unwrap().library_source, Path::new("/ws/extensions/ext/src/lib.rs"));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].rule, Rule::AllowedDependencies);
        assert!(violations[0].place.contains("`deep 2.0.0`") && violations[0].place.contains("required by `spindle-abi`"), "{}", violations[0]);
    }

    #[test]
    fn a_crate_without_a_library_is_refused() {
        let json = serde_json::json!({
            "packages": [{"id": "ext", "name": "ext", "version": "0.1.0", "source": null, "manifest_path": "/ws/extensions/ext/Cargo.toml", "edition": "2024",
                          "targets": [{"name": "ext", "kind": ["bin"], "src_path": "/ws/extensions/ext/src/main.rs", "edition": "2024"}]}],
            "resolve": {"nodes": [{"id": "ext", "deps": []}]},
        });
        let metadata = parse_metadata(&json.to_string()).unwrap();
        assert_eq!(metadata_rules(&metadata), [Rule::LibraryTarget]);
    }

    #[test]
    fn crates_outside_extensions_are_refused() {
        let extensions = workspace_root().join("extensions");
        assert!(locate("hello", &extensions).is_ok());
        assert!(locate(&extensions.join("hello/Cargo.toml").display().to_string(), &extensions).is_ok());
        for outside in ["../xtask", "abi", "no-such-extension", "", "..", "/"] {
            let argument = if outside == "abi" { workspace_root().join("abi").display().to_string() } else { outside.to_string() };
            let violation = locate(&argument, &extensions).unwrap_err();
            assert_eq!(violation.rule, Rule::UnderExtensions, "{argument}");
        }
        let error = check_crate(&fixtures().join("build-script").display().to_string(), &extensions, &abi_manifest(), Technology::Native).unwrap_err();
        assert_eq!(error.rules(), [Rule::UnderExtensions]);
        assert!(error.to_string().contains("is not inside"), "{error}");
    }

    #[test]
    fn hello_follows_every_rule() {
        let checked = check_crate("hello", &workspace_root().join("extensions"), &abi_manifest(), Technology::Native).unwrap();
        assert_eq!(checked.package_name, "hello");
        assert!(checked.library_source.ends_with("extensions/hello/src/lib.rs"));
    }

    /// A `.cargo/config.toml` in the extension naming a rustc wrapper: the build is refused
    /// naming the file, and the wrapper (which would create a marker file) never runs.
    #[test]
    fn a_rustc_wrapper_in_the_extension_never_runs() {
        use std::os::unix::fs::PermissionsExt as _;
        let extensions = crate::ext::tree::tests::TemporaryExtensions::new("wrapper");
        let marker = extensions.root.join("wrapper-ran");
        let wrapper = extensions.root.join("wrapper.sh");
        std::fs::write(&wrapper, format!("#!/bin/sh\ntouch '{}'\nexec \"$@\"\n", marker.display())).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let manifest = format!(
            "[package]\nname = \"steered\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\nspindle-abi = {{ path = {:?} }}\n\n[workspace]\n",
            workspace_root().join("abi")
        );
        let configuration = format!("[build]\nrustc-wrapper = {:?}\n", wrapper);
        let directory = extensions.write_crate(
            "steered",
            &[("Cargo.toml", &manifest), ("src/lib.rs", "#![no_std]\n#![forbid(unsafe_code)]\n"), (".cargo/config.toml", &configuration)],
        );
        let error = check_crate("steered", &extensions.root, &abi_manifest(), Technology::Native).unwrap_err();
        assert!(!marker.exists(), "the extension's rustc-wrapper ran");
        let message = error.to_string();
        assert!(message.contains(&directory.join(".cargo/config.toml").display().to_string()), "{message}");
    }

    /// A refusal names the technology that was asked for.
    #[test]
    fn refusals_name_the_technology() {
        for (technology, wording) in [
            (Technology::Native, "as a native extension:"),
            (Technology::Wasm, "as a Wasm extension:"),
            (Technology::User, "as a user-level extension:"),
        ] {
            let message = check_crate("no-forbid-unsafe", &fixtures(), &abi_manifest(), technology).unwrap_err().to_string();
            assert!(message.starts_with(&format!("refusing to build `no-forbid-unsafe` {wording}")), "{message}");
        }
    }

    /// Each bad fixture crate is refused for exactly its fault, with the place named.
    #[test]
    fn bad_fixture_crates_are_refused() {
        let cases: [(&str, &[Rule], &str); 5] = [
            ("no-forbid-unsafe", &[Rule::ForbidUnsafeCode], "no-forbid-unsafe/src/lib.rs"),
            ("build-script", &[Rule::NothingSteersTheBuild], "build-script/build.rs"),
            ("bad-dependency", &[Rule::AllowedDependencies], "`local-helper 0.1.0`"),
            // Both are caught by the tree scan before cargo metadata runs; the metadata rules
            // still cover build scripts and proc-macros outside the tree (synthetic_metadata_rules).
            ("proc-macro-dependency", &[Rule::NothingSteersTheBuild], "local-derive/Cargo.toml"),
            ("edition-2021", &[Rule::Edition2024], "edition-2021/Cargo.toml"),
        ];
        for (fixture, rules, place) in cases {
            let error = check_crate(fixture, &fixtures(), &abi_manifest(), Technology::Native).unwrap_err();
            assert_eq!(error.rules(), rules, "{fixture}: {error}");
            let message = error.to_string();
            assert!(message.contains(place) && message.contains(rules[0].statement()), "{fixture}: {message}");
        }
    }
}
